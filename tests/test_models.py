"""Models: loading, sites, decisions in three modes, resumability, the activation cache."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pandas as pd
import pytest
import torch

from evenhand.running.activations import CacheOptions, cache_activations
from evenhand.running.decisions import DecideOptions, decide
from evenhand.models.loading import ModelLoadError, ModelSpec, load_model, locate
from evenhand.models.sites import SiteError, expand, resolve
from evenhand.models.tiny import ARCHITECTURES
from evenhand.vocab.prompts import model_text, user_message
from tests.helpers import hf_hidden_states_same_batch, tiny_gemma3_multimodal

ARCHS = list(ARCHITECTURES)


def test_load_defaults(tiny):
    for arch, lm in tiny.items():
        assert lm.dtype == "float32" and lm.device == "cpu"
        assert lm.tokenizer.padding_side == "left" and lm.tokenizer.pad_token is not None
        assert lm.describe()["architecture"].startswith(arch)


def test_unknown_id_offline_fails_fast(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    t0 = time.perf_counter()
    with pytest.raises(ModelLoadError, match="nobody/no-such-model.*local directory"):
        locate(ModelSpec("nobody/no-such-model"))
    assert time.perf_counter() - t0 < 1.0
    with pytest.raises(ModelLoadError, match="does not exist"):
        locate(ModelSpec("./no/such/dir"))


def test_a_typo_of_a_preset_says_did_you_mean(monkeypatch):
    """A bare name close to a preset names the preset instead of suggesting a hub download; a real-looking id
    (org/name) and a bare name near nothing keep the download advice."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelLoadError, match="did you mean 'evenhand-organism'") as err:
        locate(ModelSpec("evenhand-organsim"))
    assert "huggingface-cli" not in str(err.value)
    with pytest.raises(ModelLoadError, match="did you mean 'qwen2.5-7b-instruct'"):
        locate(ModelSpec("qwen2.5-7b-instruc"))
    for name in ("nobody/evenhand-organsim", "completely-different-name"):
        with pytest.raises(ModelLoadError, match="huggingface-cli download") as err:
            locate(ModelSpec(name))
        assert "did you mean" not in str(err.value)


def test_presets_resolve():
    from evenhand.models.loading import resolve_spec
    s = resolve_spec(ModelSpec("qwen2.5-7b-instruct", device="cuda:1"))
    assert s.model == "Qwen/Qwen2.5-7B-Instruct" and s.dtype == "bfloat16" and s.device == "cuda:1"
    assert resolve_spec("gemma-3-12b-it").model == "google/gemma-3-12b-it"


@pytest.mark.parametrize("arch", ARCHS)
def test_sites_resolve(tiny, arch):
    model = tiny[arch].model
    assert resolve(model, "blocks.2.resid_post").path.endswith("layers.2")
    assert resolve(model, "blocks.0.resid_pre").port == "input"
    attn = resolve(model, "blocks.1.attn_out").path
    assert attn.endswith("post_attention_layernorm" if arch == "gemma3" else "self_attn")
    assert len(expand(model, "residual")) == 1 + 3
    with pytest.raises(SiteError, match="unknown site"):
        resolve(model, "blocks.1.resid_middle")
    with pytest.raises(SiteError, match="out of range"):
        resolve(model, "blocks.9.resid_post")


def test_unknown_architecture_is_named():
    from transformers import GPT2Config, GPT2LMHeadModel
    m = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=50))
    with pytest.raises(SiteError, match="unknown architecture GPT2LMHeadModel"):
        resolve(m, "blocks.0.resid_post")


@pytest.mark.parametrize("arch", ARCHS)
def test_cache_equals_hf_hidden_states_exactly(tiny, arch, smoke_items, tmp_path):
    lm = tiny[arch]
    items = smoke_items.head(6)
    cache = cache_activations(items, lm, CacheOptions(batch_size=6, dtype="float32", progress=False),
                              tmp_path / "c")
    want, hs = hf_hidden_states_same_batch(lm, items, 6)
    _, emb = cache.load("embed", want)
    assert np.array_equal(emb, hs[0][:, -1].numpy())
    for layer in range(2):
        _, x = cache.load(f"blocks.{layer}.resid_post", want)
        assert np.array_equal(x, hs[layer + 1][:, -1].numpy())
    _, last = cache.load("blocks.2.resid_post", want)
    normed = lm.model.model.norm(torch.from_numpy(last)).detach().numpy()
    assert np.allclose(normed, hs[3][:, -1].numpy(), atol=1e-6)
    # an unpadded single forward agrees too (padding is masked out)
    last = items.set_index("item_id").loc[want[-1]].to_dict()
    one = lm.tokenizer(model_text(lm.tokenizer, user_message(last)), add_special_tokens=False, return_tensors="pt")
    with torch.inference_mode():
        h1 = lm.model(**one, output_hidden_states=True).hidden_states
    assert np.allclose(cache.load("blocks.1.resid_post", [want[-1]])[1][0], h1[2][0, -1].numpy(), atol=1e-5)


@pytest.mark.parametrize("arch", ARCHS)
def test_transformer_lens_bridge_gives_the_same_cache(tiny, arch, smoke_items, tmp_path):
    lm = tiny[arch]
    items = smoke_items.head(10)
    opts = CacheOptions(batch_size=4, dtype="float32", progress=False)
    a = cache_activations(items, lm, opts, tmp_path / "nn")
    b = cache_activations(items, lm, opts, tmp_path / "tl", backend="transformer_lens")
    assert b.sites == ["hook_embed", "blocks.0.hook_resid_post", "blocks.1.hook_resid_post",
                       "blocks.2.hook_resid_post"]
    ids = items["item_id"].tolist()
    for s_nn, s_tl in zip(a.sites, b.sites):
        assert np.allclose(a.load(s_nn, ids)[1], b.load(s_tl, ids)[1], atol=1e-5), s_nn
    # the bridge worked on its own copy: the HF model is untouched
    assert type(lm.model).__name__.endswith("ForCausalLM")


def test_name_mean_sites(tiny, smoke_items, tmp_path):
    lm = tiny["gemma3"]
    items = pd.concat([smoke_items[smoke_items["degree"] == 1].head(3), smoke_items[smoke_items["degree"] == 3].head(2)])
    cache = cache_activations(items, lm, CacheOptions(batch_size=5, dtype="float32", name_mean=True,
                                                      progress=False), tmp_path / "n")
    ids, x = cache.load("blocks.1.resid_post@name_A", items["item_id"].tolist())
    assert np.isfinite(x[:3]).all() and np.isnan(x[3:]).all()


@pytest.mark.parametrize("arch", ARCHS)
def test_decide_three_modes(tiny, arch, smoke_items):
    lm = tiny[arch]
    items = smoke_items.head(6)
    for mode in ("answer", "reasoning", "logprob"):
        opts = DecideOptions(mode=mode, batch_size=3, max_new_tokens=4, reasoning_max_new_tokens=6, progress=False)
        r = decide(items, lm, opts)
        assert r["item_id"].tolist() == items["item_id"].tolist()
        assert (r["mode"] == mode).all() and r["seconds"].gt(0).all()
        if mode == "logprob":
            assert r["choice"].isin(["A", "B"]).all() and r["logprob_A"].lt(0).all()
            assert (r["choice"] == np.where(r["logprob_A"] >= r["logprob_B"], "A", "B")).all()
        else:
            assert r["n_new_tokens"].between(1, opts.max_new_tokens if mode == "answer" else 6).all()


def test_batching_does_not_change_results(tiny, smoke_items):
    lm = tiny["qwen2"]
    items = smoke_items.head(8)
    for mode in ("answer", "logprob"):
        a = decide(items, lm, DecideOptions(mode=mode, batch_size=1, progress=False))
        b = decide(items, lm, DecideOptions(mode=mode, batch_size=8, progress=False))
        assert a["text"].tolist() == b["text"].tolist()
        if mode == "logprob":
            assert np.allclose(a["logprob_A"], b["logprob_A"], atol=1e-4)


def test_logprob_scores_the_full_label(tiny, smoke_items):
    """The one-forward shortcut equals scoring each full label sequence separately."""
    lm = tiny["llama"]
    item = smoke_items.iloc[0].to_dict()
    r = decide([item], lm, DecideOptions(mode="logprob", progress=False)).iloc[0]
    text = model_text(lm.tokenizer, user_message(item))
    for slot, col in (("A", "logprob_A"), ("B", "logprob_B")):
        full = lm.tokenizer(text + f"{item['candidate_noun']} {slot}", add_special_tokens=False,
                            return_tensors="pt")["input_ids"]
        n_ctx = len(lm.tokenizer(text, add_special_tokens=False)["input_ids"])
        with torch.inference_mode():
            logp = torch.log_softmax(lm.model(input_ids=full).logits[0], -1)
        manual = sum(float(logp[t - 1, full[0, t]]) for t in range(n_ctx, full.shape[1]))
        assert r[col] == pytest.approx(manual, abs=1e-4)


def test_oom_halves_the_batch(tiny, smoke_items, monkeypatch):
    import evenhand.engine.generation as g
    real = g.generate

    def flaky(lm, texts, special, max_new):
        if len(texts) > 2:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(lm, texts, special, max_new)

    monkeypatch.setattr(g, "generate", flaky)
    r = decide(smoke_items.head(8), tiny["gemma3"], DecideOptions(batch_size=8, progress=False))
    assert len(r) == 8 and r["batch_size"].max() == 2


def test_decide_resumes_and_skips_done(tiny, smoke_items, tmp_path):
    lm = tiny["gemma3"]
    items = smoke_items.head(12)
    opts = DecideOptions(batch_size=4, progress=False)
    decide(items.head(4), lm, opts, out_dir=tmp_path)
    n_before = len(list((tmp_path / "decisions").iterdir()))
    full = decide(items, lm, opts, out_dir=tmp_path)
    assert len(full) == 12 and full["item_id"].is_unique
    assert len(list((tmp_path / "decisions").iterdir())) == n_before + 2


KILL_SCRIPT = textwrap.dedent("""
    import sys, pandas as pd
    from evenhand.models.loading import load_model
    from evenhand.running.decisions import decide, DecideOptions
    items = pd.read_parquet(sys.argv[2])
    lm = load_model(sys.argv[1])
    decide(items, lm, DecideOptions(mode="reasoning", batch_size=2, reasoning_max_new_tokens=24,
                                    progress=False), out_dir=sys.argv[3])
""")


def test_kill_minus_9_resumes_to_the_same_table(tiny_dirs, tiny, smoke_items, tmp_path):
    items = smoke_items.head(40)
    items_path = tmp_path / "items.parquet"
    items.to_parquet(items_path)
    script = tmp_path / "run.py"
    script.write_text(KILL_SCRIPT)
    killed = tmp_path / "killed"
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    proc = subprocess.Popen([sys.executable, str(script), str(tiny_dirs["gemma3"]), str(items_path), str(killed)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    shards = killed / "decisions"
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if shards.exists() and len(list(shards.glob("shard-*.parquet"))) >= 3:
            break
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    n_written = len(list(shards.glob("shard-*.parquet")))
    assert 3 <= n_written < 20, "the run was not interrupted mid-way"
    opts = DecideOptions(mode="reasoning", batch_size=2, reasoning_max_new_tokens=24, progress=False)
    resumed = decide(items, tiny["gemma3"], opts, out_dir=killed)
    clean = decide(items, tiny["gemma3"], opts, out_dir=tmp_path / "clean")
    cols = [c for c in clean.columns if c != "seconds"]
    pd.testing.assert_frame_equal(resumed[cols], clean[cols])
    assert resumed["item_id"].is_unique and len(resumed) == 40


def test_run_config_end_to_end(tiny_dirs, tmp_path):
    from experiments.cli import main
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(f"model: {tiny_dirs['llama']}\noutput_dir: {tmp_path / 'run'}\n"
                   "suite: {subset: smoke, limit: 24}\nmode: logprob\nbatch_size: 8\nresamples: 50\n"
                   "cache: {enabled: true, dtype: float32}\n")
    assert main(["run", str(cfg), "--quiet"]) == 0
    run = tmp_path / "run"
    for f in ("manifest.json", "responses.parquet", "metrics.json", "activations/index.json"):
        assert (run / f).exists(), f
    assert main(["run", str(cfg), "--quiet"]) == 0  # a re-run resumes and changes nothing
    assert len(pd.read_parquet(run / "responses.parquet")) == 24


@pytest.mark.parametrize("text, message", [
    ("model: x\noutput_dir: o\nmdoe: answer\n", "'mdoe' is not known (did you mean 'mode'?)"),
    ("model: x\noutput_dir: o\nbatch_size: zero\n", "'batch_size' must be an integer"),
    ("model: x\noutput_dir: o\nmode: vibes\n", "'mode' must be one of answer, reasoning, logprob"),
    ("output_dir: o\n", "'model' is required"),
    ("model: {model: x, dtpye: float32}\noutput_dir: o\n", "'model.dtpye' is not known"),
    ("model: x\noutput_dir: o\nsuite: {subset: nowhere.jsonl}\n", "'suite.subset'"),
])
def test_config_errors_name_the_field(tmp_path, text, message):
    from experiments.studies.run.config import ConfigError, load_config
    p = tmp_path / "c.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError) as exc:
        load_config(p)
    assert message in str(exc.value)


def test_cli_failures_are_fast(tmp_path, tiny_dirs):
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    cases = [
        ("model: x\noutput_dir: o\nbogus: 1\n", "config field 'bogus'"),
        (f"model: nobody/absent-model\noutput_dir: {tmp_path / 'o'}\n", "nobody/absent-model"),
        (f"model: {tiny_dirs['gemma3']}\noutput_dir: /proc/evenhand-run\n", "not writable"),
    ]
    for i, (text, message) in enumerate(cases):
        p = tmp_path / f"c{i}.yaml"
        p.write_text(text)
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-X", "importtime", "-m", "experiments.cli", "run", str(p)],
                           capture_output=True, text=True, env=env)
        # fast means nothing heavy ran before the check: neither torch nor transformers was imported (a wall-time
        # bound alone failed on a loaded 2-core machine: 5.8 s where an idle one takes under 2)
        imported = {ln.rsplit("|", 1)[-1].strip() for ln in r.stderr.splitlines() if ln.startswith("import time:")}
        assert not {"torch", "transformers"} & imported, sorted({"torch", "transformers"} & imported)
        assert time.perf_counter() - t0 < 30.0  # a generous bound against a hang
        assert r.returncode == 2 and message in r.stderr, r.stderr


def test_shipped_configs_are_valid():
    from pathlib import Path

    import yaml

    from experiments.studies.run.config import load_config
    from experiments.studies.bbq import load_config as load_bbq_config
    from experiments.studies.compare import load_config as load_compare
    for p in sorted((Path(__file__).resolve().parents[1] / "experiments" / "configs").glob("*.yaml")):
        raw = yaml.safe_load(p.read_text())
        if "sweep" in raw:
            from experiments.studies.sweep import load_sweep
            cfg, cells = load_sweep(p)
            assert all(c.data["output_dir"].startswith(raw["output_dir"] + "/cells/") for c in cells)
            assert cfg["output_dir"].startswith("runs/"), p
            continue
        if "interventions" in raw:
            cfg = load_compare(p)
        elif "methods" in raw:
            from experiments.studies.dose_response.study import load_config as load_dose
            cfg = load_dose(p)
        elif "per_category" in raw or "configurations" in raw:
            cfg = load_bbq_config(p)
        else:
            cfg = load_config(p)
        assert cfg.output_dir.startswith("runs/"), p


def test_gemma3_multimodal_class_goes_through_the_same_paths(smoke_items, tmp_path):
    """google/gemma-3-12b-it loads as Gemma3ForConditionalGeneration (text tower under
    model.language_model): a tiny random one must decide and cache like the text-only class."""
    from evenhand.models.tiny import build_tokenizer
    items = smoke_items.head(4)
    tok = build_tokenizer(smoke_items["prompt"].tolist(), extra=["A", "B"])
    model = tiny_gemma3_multimodal(tok, sliding_window=128)
    model.save_pretrained(tmp_path / "mm")
    tok.save_pretrained(tmp_path / "mm")
    lm = load_model(str(tmp_path / "mm"))
    assert type(lm.model).__name__ == "Gemma3ForConditionalGeneration"
    assert resolve(lm.model, "blocks.1.resid_post").path == "model.language_model.layers.1"
    r = decide(items, lm, DecideOptions(mode="logprob", batch_size=4, progress=False))
    assert r["choice"].isin(["A", "B"]).all()
    cache = cache_activations(items, lm, CacheOptions(batch_size=4, dtype="float32", progress=False), tmp_path / "c")
    text0 = model_text(lm.tokenizer, user_message(items.iloc[0].to_dict()))
    one = lm.tokenizer(text0, add_special_tokens=False, return_tensors="pt")
    with torch.inference_mode():
        hs = lm.model(**one, output_hidden_states=True).hidden_states
    got = cache.load("blocks.0.resid_post", [items["item_id"].iloc[0]])[1][0]
    assert np.allclose(got, hs[1][0, -1].numpy(), atol=1e-5)


def test_tiny_tokenizers_tokenise_prompts_for_every_architecture(tiny, smoke_items):
    """Each tiny model's word-level tokenizer is loaded as such (not the model type's own class)."""
    prompt = smoke_items["prompt"].iloc[0]
    for arch, lm in tiny.items():
        ids = lm.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        assert len(ids) > 50 and lm.tokenizer.unk_token_id not in ids, arch
