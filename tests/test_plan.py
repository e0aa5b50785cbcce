"""`evenhand plan`: the shapes read from config.json give the exact parameter count of the
preset classes; predictions are within 25% of measurements on tiny models on the CPU (weights, the activation cache
on disk, peak host memory); the presets plan offline; a config that cannot fit is refused before anything loads;
the default batch size is a pure function of free memory, shapes and sequence length."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from evenhand.models.plan import (DEVICES, PRESET_CONFIGS, Device, Workload, auto_batch_size, decision_bytes, plan,
                                  shapes_from_config)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_plan  # noqa: E402


def test_preset_parameter_counts_are_the_published_ones():
    # Qwen2.5-7B-Instruct: 7,615,616,512 parameters (its model card: 7.61B); Gemma 3 12B: 12.2B with its vision tower
    assert shapes_from_config(PRESET_CONFIGS["qwen2.5-7b-instruct"]).params == 7_615_616_512
    g = shapes_from_config(PRESET_CONFIGS["gemma-3-12b-it"])
    assert round(g.params / 1e9, 1) == 12.2 and 0.4e9 < g.extra_params < 0.45e9
    assert g.kv_tokens(2048) == 8 * 2048 + 40 * 1024  # 8 global layers, 40 sliding at a window of 1024


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_weights_exact_for_the_preset_classes(tmp_path, dtype):
    """Gemma3ForConditionalGeneration (a SigLIP tower without a head, as the real one, and with one) and
    Qwen2ForCausalLM (q/k/v biases, untied head): the predicted bytes equal the loaded parameters' bytes."""
    for r in (bench_plan.measure_weights(bench_plan.multimodal_gemma3(tmp_path / "mm"), dtype),
              bench_plan.measure_weights(bench_plan.qwen2(tmp_path / "q"), dtype)):
        assert r["predicted"] == r["measured"], r


def test_cache_bytes_on_disk_within_25_percent(tiny_gemma_lm, smoke_items, tmp_path):
    r = bench_plan.measure_cache(tiny_gemma_lm, smoke_items.head(48), "float32", 8, tmp_path)
    assert 0.75 <= r["predicted"] / r["measured"] <= 1.25, r


def test_peak_host_memory_within_25_percent(tmp_path):
    r = bench_plan.measure_rss(bench_plan.qwen2(tmp_path / "q", hidden=512, layers=8), 8, 256)
    assert 0.75 <= r["predicted"] / r["measured"] <= 1.25, r


def test_auto_batch_size_is_the_largest_power_of_two_that_fits():
    s = shapes_from_config(PRESET_CONFIGS["gemma-3-12b-it"])
    weights = s.params * 2
    need16 = (weights + decision_bytes(s, 16, 300)) / 0.85
    assert auto_batch_size(need16, s, 300) == 16
    assert auto_batch_size(need16 - 1e6, s, 300) == 8
    assert auto_batch_size(weights, s, 300) == 1  # nothing left: one at a time (OOM recovery has the last word)
    assert auto_batch_size(141e9, s, 300) > auto_batch_size(80e9, s, 300) >= 32  # more memory, larger batch
    assert auto_batch_size(141e9, s, 4000) < auto_batch_size(141e9, s, 300)  # longer sequences, smaller batch


def test_a_plan_that_cannot_fit_is_refused_naming_the_stage():
    s = shapes_from_config(PRESET_CONFIGS["gemma-3-12b-it"])
    small = Device("16GB", 16e9, 1e14, 1e12)
    p = plan("gemma-3-12b-it", s, Workload(items=100, prompt_tokens=300), small)
    assert not p.fits() and "stage weights" in p.refusal() and "16GB" in p.refusal()
    big = plan("gemma-3-12b-it", s, Workload(items=100, prompt_tokens=300, batch_size=8), DEVICES["H200"])
    assert big.fits() and big.refusal() is None


def _config(tmp_path, model="gemma-3-12b-it", batch=32, extra=""):
    p = tmp_path / "c.yaml"
    p.write_text(f"model: {model}\noutput_dir: {tmp_path / 'out'}\nsuite: {{subset: core}}\nbatch_size: {batch}\n"
                 f"cache: {{enabled: true, sites: [residual], dtype: float32}}\n{extra}")
    return p


def test_plan_command_for_the_presets_offline(tmp_path, capsys, monkeypatch):
    """Core scale on one H200 from the embedded shapes; nothing is downloaded (HF_HUB_OFFLINE=1, the hub's
    download functions raise)."""
    import huggingface_hub

    from experiments.cli.main import main

    def no_hub(*a, **k):
        raise AssertionError("the plan reached the hub")
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", no_hub)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", no_hub)
    for model, weights_gb, sites in (("gemma-3-12b-it", 24.37, 49), ("qwen2.5-7b-instruct", 15.23, 29)):
        assert main(["plan", str(_config(tmp_path, model)), "--device", "H200"]) == 0
        out = capsys.readouterr().out
        assert "49,920 items" in out and f"cached sites {sites}" in out and f"{weights_gb:.2f} GB" in out
        assert "fits" in out and "time on H200" in out


def test_plan_command_refuses_a_config_that_cannot_fit(tmp_path, capsys):
    from experiments.cli.main import main
    assert main(["plan", str(_config(tmp_path, batch=4096)), "--device", "A100-80GB"]) == 2
    err = capsys.readouterr().err
    assert "does not fit on A100-80GB" in err and "stage cache writer" in err  # the largest stage: the trace holds every site per token


def test_run_refuses_before_loading_when_the_gpu_is_too_small(tmp_path, capsys, monkeypatch):
    import evenhand.models.loading as loading
    import experiments.cli.plan as cli_plan
    from experiments.cli.main import main

    def no_load(*a, **k):
        raise AssertionError("the model was loaded")
    monkeypatch.setattr(loading, "load_model", no_load)
    monkeypatch.setattr(cli_plan, "cuda_device", lambda: Device("cuda:0", 20e9, 1e14, 1e12))
    assert main(["run", str(_config(tmp_path))]) == 2
    assert "does not fit on cuda:0" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_default_batch_size_from_the_device_memory(tiny_gemma_lm, monkeypatch):
    """Off CUDA: 8. On CUDA (faked: a loaded model reporting cuda and the device's free memory): the largest batch
    whose decision stage fits in that memory plus the weights already on the device."""
    from dataclasses import replace

    from evenhand.models.plan import FALLBACK_BATCH_SIZE, default_batch_size
    assert default_batch_size(tiny_gemma_lm, 300) == FALLBACK_BATCH_SIZE == 8
    s = shapes_from_config(tiny_gemma_lm.model.config.to_dict(), "float32")
    free = 0.2e9
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free, 80e9))
    on_gpu = replace(tiny_gemma_lm, device="cuda:0")
    got = default_batch_size(on_gpu, 300)
    assert got == auto_batch_size(free + s.params * 4, s, 300) and got > 8


def test_decide_without_a_batch_size_uses_the_default(tiny_gemma_lm, smoke_items):
    from evenhand.running.decisions import DecideOptions, decide
    r = decide(smoke_items.head(10), tiny_gemma_lm, DecideOptions(mode="logprob", progress=False))
    assert DecideOptions().batch_size is None and r["batch_size"].max() == 8
