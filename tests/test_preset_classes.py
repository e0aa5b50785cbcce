"""Every model-touching path on the exact classes the presets load, in bfloat16 as on a GPU.

gemma-3-12b-it loads as ``Gemma3ForConditionalGeneration`` (a SigLIP vision tower, the text tower under
``model.language_model``, sliding-window layers with a full-attention layer every sixth) and qwen2.5-7b-instruct
as ``Qwen2ForCausalLM``. :func:`evenhand.models.tiny.build_random_checkpoint` writes a tiny random checkpoint of
each class (hidden 64, 3 layers; Gemma's sliding window of 16 tokens with layers sliding, full, sliding, so the
prompts cross the window), with a tokenizer and the model's chat template (Gemma's turns, Qwen's ChatML), and
each loads through :func:`evenhand.models.loading.load_model` with its preset's spec (bfloat16, sdpa) and only
the path changed. On them: decisions in the three modes on the hf engine and in two on the vllm engine, the
activation cache on both backends, a run with the cache and a probe sweep, the nine interventions' fit, apply
and exact restore, and a small comparison.
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from evenhand.running.activations import CacheOptions, cache_activations
from evenhand.running.decisions import DecideOptions, decide
from evenhand.models.loading import PRESETS, load_model
from evenhand.models.sites import resolve
from evenhand.models.tiny import build_random_checkpoint, build_tokenizer, checkpoint_config
from evenhand.vocab.prompts import model_text, user_message

PRESET = {"gemma3-mm": "gemma-3-12b-it", "qwen2": "qwen2.5-7b-instruct"}
CLASS = {"gemma3-mm": "Gemma3ForConditionalGeneration", "qwen2": "Qwen2ForCausalLM"}
ARCHS = list(PRESET)
ARMS = [{"name": "caa", "options": {"batch_size": 8}}, {"name": "fair_instruction"}]
COMPARE = {"train": {"scenarios": 2, "max_items": 24}, "eval": {"scenarios": 1}, "validation": {"scenarios": 1},
           "mode": "logprob", "batch_size": 16, "resamples": 20, "controls": False}


def spec_of(arch: str, where: Path):
    """The preset's spec with the model path changed (its dtype, attention implementation and template kept)."""
    return replace(PRESETS[PRESET[arch]].spec, model=str(where), device="cpu")


def compare_config(where: Path, out: Path):
    from experiments.studies.compare import parse_config
    return parse_config({"model": str(where), "output_dir": str(out), **COMPARE, "interventions": ARMS})


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory, smoke_items) -> dict[str, Path]:
    """A tiny bfloat16 checkpoint of each preset class, with a tokenizer that knows the smoke prompts and the
    comparison's items (suite v2)."""
    from experiments.studies.compare import item_sets
    sets = item_sets(compare_config(Path("m"), Path("x")))
    texts = smoke_items["prompt"].tolist() + [p for t in (sets.train, sets.validation, sets.heldout)
                                              for p in t["prompt"].tolist()]
    root = tmp_path_factory.mktemp("preset-classes")
    return {a: build_random_checkpoint(a, root / a, texts=texts, seed=1) for a in ARCHS}


@pytest.fixture(scope="module")
def lms(ckpts):
    return {a: load_model(spec_of(a, d)) for a, d in ckpts.items()}


@pytest.fixture(scope="module")
def items(smoke_items):
    return smoke_items[smoke_items["degree"] > 0].head(8).reset_index(drop=True)


def logits(lm, its: pd.DataFrame) -> torch.Tensor:
    texts = [model_text(lm.tokenizer, user_message(r)) for r in its.to_dict("records")]
    enc = lm.tokenizer(texts, add_special_tokens=False, padding=True, return_tensors="pt")
    with torch.inference_mode():
        return lm.model(**enc, logits_to_keep=1).logits.clone()


@pytest.mark.parametrize("arch", ARCHS)
def test_checkpoints_load_as_the_presets_classes_in_bfloat16(arch, ckpts, lms):
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    lm = lms[arch]
    assert type(lm.model).__name__ == CLASS[arch]
    # the published checkpoints' config.json model_type (gemma3, qwen2) is what AutoModelForCausalLM maps
    model_type = json.loads((ckpts[arch] / "config.json").read_text())["model_type"]
    assert MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type] == CLASS[arch]
    assert lm.dtype == "bfloat16" and {p.dtype for p in lm.model.parameters()} == {torch.bfloat16}
    assert lm.spec.attn_implementation == "sdpa" and lm.meta["chat_template"] == "tokenizer"
    text = lm.model.config.get_text_config()
    if arch == "gemma3-mm":
        assert text.layer_types == ["sliding_attention", "full_attention", "sliding_attention"]
        assert text.sliding_window == 16 and lm.model.model.vision_tower is not None
        assert resolve(lm.model, "blocks.1.resid_post").path == "model.language_model.layers.1"
    else:
        assert resolve(lm.model, "blocks.1.resid_post").path == "model.layers.1"


def test_build_random_checkpoint_makes_every_weight_in_the_dtype_asked(tmp_path):
    """No float32 copy is ever made: every parameter is registered in bfloat16 (the check fails for the
    build-then-cast way, shown below); the same seed writes the same weights; ``layers`` sets the depth."""
    import transformers as tf
    from safetensors.torch import load_file
    seen: list[torch.dtype] = []
    hook = torch.nn.modules.module.register_module_parameter_registration_hook(
        lambda module, name, param: seen.append(param.dtype))
    try:
        a = build_random_checkpoint("gemma3-mm", tmp_path / "a", texts=["a b c"], layers=2, seed=3)
        assert seen and set(seen) == {torch.bfloat16}
        seen.clear()
        tok = build_tokenizer(["a b c"], chat="chatml")
        tf.Qwen2ForCausalLM(checkpoint_config("qwen2", tok, layers=1)).to(torch.bfloat16)  # the old way
        assert torch.float32 in seen
    finally:
        hook.remove()
    b = build_random_checkpoint("gemma3-mm", tmp_path / "b", texts=["a b c"], layers=2, seed=3)
    wa, wb = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    assert json.loads((a / "config.json").read_text())["text_config"]["num_hidden_layers"] == 2
    with pytest.raises(ValueError, match="arch must be one of gemma3-mm, qwen2"):
        build_random_checkpoint("gemma3", tmp_path / "c", texts=["a"])


def test_real_widths_are_the_published_models():
    """At real width the classes have the published parameter counts: Gemma-3-12B-it 12,187,325,040 (text and
    vision towers), Qwen2.5-7B-Instruct 7,615,616,512 (built on the meta device: no memory)."""
    import transformers as tf
    counts = {}
    for arch, cls in (("gemma3-mm", tf.Gemma3ForConditionalGeneration), ("qwen2", tf.Qwen2ForCausalLM)):
        tok = build_tokenizer(["a b"], chat="gemma" if arch == "gemma3-mm" else "chatml",
                              image_tokens=arch == "gemma3-mm")
        cfg = checkpoint_config(arch, tok, "real")
        with torch.device("meta"):
            counts[arch] = sum(p.numel() for p in cls._from_config(cfg, dtype=torch.bfloat16).parameters())
        if arch == "gemma3-mm":
            types = cfg.text_config.layer_types
            assert len(types) == 48 and types[:6] == ["sliding_attention"] * 5 + ["full_attention"]
            assert (cfg.text_config.sliding_window, cfg.text_config.head_dim) == (1024, 256)
    assert counts == {"gemma3-mm": 12_187_325_040, "qwen2": 7_615_616_512}


@pytest.mark.parametrize("arch", ARCHS)
def test_decide_three_modes_on_hf(arch, lms, items):
    lm = lms[arch]
    for mode in ("answer", "reasoning", "logprob"):
        opts = DecideOptions(mode=mode, batch_size=4, max_new_tokens=4, reasoning_max_new_tokens=8, progress=False)
        r = decide(items, lm, opts)
        assert r["item_id"].tolist() == items["item_id"].tolist() and (r["mode"] == mode).all()
        if mode == "logprob":
            assert np.isfinite(r[["logprob_A", "logprob_B"]].to_numpy()).all()
            assert (r["choice"] == np.where(r["logprob_A"] >= r["logprob_B"], "A", "B")).all()
        else:
            assert r["n_new_tokens"].between(1, 4 if mode == "answer" else 8).all()
            assert np.isfinite(r["gen_logprob"]).all() and r["text"].str.len().gt(0).all()


@pytest.mark.parametrize("arch", ARCHS)
def test_cache_on_both_backends_reads_the_models_hidden_states(arch, lms, items, tmp_path, monkeypatch):
    """nnsight and TransformerLens cache the same values (bfloat16 rounding apart), equal to the model's own
    hidden states in one padded forward. TransformerLens boots without a processor: on the multimodal class it
    used to load one and, failing, ``pip install torchvision`` from inside the boot (recorded here, not run)."""
    import subprocess
    lm = lms[arch]
    installs = []
    monkeypatch.setattr(subprocess, "check_call", lambda cmd, *a, **k: installs.append(cmd))
    opts = CacheOptions(batch_size=8, dtype="float32", progress=False)
    a = cache_activations(items, lm, opts, tmp_path / "nn")
    b = cache_activations(items, lm, opts, tmp_path / "tl", backend="transformer_lens")
    assert installs == []
    ids = items["item_id"].tolist()
    texts = [model_text(lm.tokenizer, user_message(r)) for r in items.to_dict("records")]
    enc = lm.tokenizer(texts, add_special_tokens=False, padding=True, return_tensors="pt")
    with torch.inference_mode():
        hs = lm.model(**enc, output_hidden_states=True).hidden_states
    want = {r: i for i, r in enumerate(ids)}
    for layer, (s_nn, s_tl) in enumerate(zip(a.sites, b.sites)):
        got_ids, x = a.load(s_nn, ids)
        _, y = b.load(s_tl, ids)
        assert np.isfinite(x).all() and np.abs(x).max() > 0
        scale = np.abs(x).max()
        assert np.abs(x - y).max() <= 0.02 * scale, s_nn
        if layer < 3:  # embed, blocks.0, blocks.1: the hidden states before the final norm
            ref = hs[layer][[want[i] for i in got_ids], -1].float().numpy()
            assert np.abs(x - ref).max() <= 0.02 * scale, s_nn


@pytest.mark.parametrize("arch", ARCHS)
def test_run_with_cache_and_probe_sweep(arch, ckpts, tmp_path):
    """The run study end to end from a config: decisions, the cache and a probe per site, in bfloat16."""
    from experiments.studies.run.config import config_from_dict
    from experiments.studies.run.local import run_config
    spec = spec_of(arch, ckpts[arch])
    model = {k: getattr(spec, k) for k in ("model", "dtype", "attn_implementation", "device")}
    cfg = config_from_dict({"model": model, "output_dir": str(tmp_path / "r"),
                            "suite": {"subset": "smoke", "limit": 128}, "mode": "logprob",
                            "batch_size": 16, "resamples": 20, "cache": {"enabled": True, "dtype": "float32"},
                            "probe": {"folds": 2, "inner_folds": 2, "control": False}})
    run, _ = run_config(cfg, progress=False)
    assert run.manifest()["status"] == "done" and run.manifest()["model"]["dtype"] == "bfloat16"
    probes = pd.read_parquet(run.path / "probes" / "favours_minority" / "probes.parquet")
    acc = probes[(probes["variant"] == "activations") & (probes["metric"] == "accuracy")]
    assert sorted(acc["site"]) == sorted(["embed"] + [f"blocks.{i}.resid_post" for i in range(3)])
    assert acc["value"].between(0, 1).all() and (acc["n"] > 0).all()


def _nine():
    from tests.test_interventions import FAST, NINE
    return FAST, NINE


@pytest.mark.parametrize("name", _nine()[1])
@pytest.mark.parametrize("arch", ARCHS)
def test_nine_interventions_fit_apply_and_restore(arch, name, lms, smoke_items, items):
    from interventions.base import EditingIntervention, decide_with
    from interventions.registry import get
    fast, _ = _nine()
    lm = lms[arch]
    train = smoke_items[smoke_items["degree"] > 0].sample(24, random_state=0).reset_index(drop=True)
    before = logits(lm, items)
    params = {k: v.clone() for k, v in lm.model.state_dict().items()}
    method = get(name)
    fit_opts, apply_opts = method.split_options(fast.get(name, {}))
    fitted = method.fit(lm, train, fit_opts, seed=0)
    assert torch.equal(logits(lm, items), before), "fitting changed the model"
    for t in fitted.tensors.values():
        assert torch.isfinite(t.float()).all()
    if isinstance(method, EditingIntervention):
        # every position edited (caa's default edits generated tokens only), so that a prompt's logits move: an
        # edit lost to bfloat16 rounding would leave them equal
        with method.apply(fitted, lm, replace(apply_opts, positions="all")):
            inside = logits(lm, items)
        assert inside.shape == before.shape and torch.isfinite(inside).all()
        assert not torch.equal(inside, before), "the edit did not change the model's logits"
        assert torch.equal(logits(lm, items), before)
    out = decide_with(method, fitted, items.head(4), lm,
                      DecideOptions(batch_size=4, max_new_tokens=4, progress=False), apply_opts)
    assert out["item_id"].tolist() == items["item_id"].head(4).tolist() and (out["intervention"] == name).all()
    assert torch.equal(logits(lm, items), before)
    for k, v in lm.model.state_dict().items():
        assert torch.equal(v, params[k]), k


# qwen2's comparison is slow: its fits, edits and restores are test_nine_interventions_fit_apply_and_restore's, and
# the comparison's path on a preset class is gemma3-mm's
@pytest.mark.parametrize("arch", ["gemma3-mm", pytest.param("qwen2", marks=pytest.mark.slow)])
def test_small_comparison_restores_every_cell(arch, ckpts, tmp_path, monkeypatch):
    """A comparison (caa and fair_instruction against the baseline) on the preset's spec: every cell's
    restore record says the weights came back bit-identical, with no hook left."""
    import experiments.studies.compare.study as compare
    spec = spec_of(arch, ckpts[arch])
    loaded = []
    monkeypatch.setattr(compare, "load_model", lambda s: loaded.append(1) or load_model(
        replace(s, dtype=spec.dtype, attn_implementation=spec.attn_implementation, device="cpu")))
    cfg = compare_config(ckpts[arch], tmp_path / "cmp")
    table = compare.run_compare(cfg, progress=False)
    assert loaded and set(table["intervention"]) == {"baseline", "caa", "fair_instruction"}
    records = [json.loads(p.read_text()) for p in (tmp_path / "cmp" / "cells").glob("*/restore.json")]
    assert {r["intervention"] for r in records} == {"caa", "fair_instruction"}
    for r in records:
        assert r["restored_bit_exactly"] is True and all(c["hooks_after"] == 0 for c in r["checks"])
    manifest = json.loads((tmp_path / "cmp" / "manifest.json").read_text())["model"]
    assert manifest["dtype"] == "bfloat16" and manifest["architecture"] == json.loads(
        (ckpts[arch] / "config.json").read_text())["model_type"]


@pytest.fixture(scope="module")
def vllm_cpu_gemma3():
    """Let vLLM's module for Gemma3ForConditionalGeneration import on this CPU machine.

    That module imports transformers' torchvision image processor at import time, and the CPU install has no
    torchvision (PyPI's builds are CUDA builds that break ``import vllm``: the Makefile removes them; a GPU
    install of vllm has one). Here the processor's module is given the PIL processor class, and vLLM inspects
    the model class in this process (its inspection subprocess would not see that module). Neither is called
    with images off, and without ``language_model_only`` the engine still fails as on a GPU (the test below)."""
    import importlib.util
    import sys
    import types
    if importlib.util.find_spec("torchvision") is not None:
        yield
        return
    from transformers.models.gemma3 import image_processing_pil_gemma3 as pil
    from vllm.model_executor.models import registry
    name = "transformers.models.gemma3.image_processing_gemma3"
    shim = types.ModuleType(name)
    shim.Gemma3ImageProcessor = pil.Gemma3ImageProcessorPil
    mp = pytest.MonkeyPatch()
    mp.setitem(sys.modules, name, shim)
    mp.setattr(registry, "_run_in_subprocess", lambda fn: fn())
    yield
    mp.undo()


@pytest.fixture(scope="module")
def vllm_models(ckpts, vllm_cpu_gemma3):
    pytest.importorskip("vllm")
    from evenhand.engine.vllm_engine import load_vllm
    models = {}
    try:
        for a, d in ckpts.items():
            models[a] = load_vllm(spec_of(a, d), max_model_len=1024)
        yield models
    finally:
        for vm in models.values():
            vm.close()


@pytest.mark.parametrize("arch", ARCHS)
def test_vllm_decides_on_the_preset_classes(arch, vllm_models, lms, items):
    """Both classes start in vLLM (the multimodal one text-only) and decide as on hf: in bfloat16 the greedy
    tokens may part at a near tie, so the first generated token's agreement is checked, not whole texts."""
    vm, lm = vllm_models[arch], lms[arch]
    assert vm.dtype == "bfloat16" and vm.describe()["architecture"] == lm.architecture
    for mode, budget in (("answer", 4), ("reasoning", 8)):
        kw = dict(mode=mode, max_new_tokens=budget, reasoning_max_new_tokens=budget, progress=False)
        hf = decide(items, lm, DecideOptions(batch_size=8, **kw))
        vl = decide(items, vm, DecideOptions(batch_size=8, engine="vllm", **kw))
        assert vl["item_id"].tolist() == hf["item_id"].tolist() and (vl["mode"] == mode).all()
        assert vl["n_new_tokens"].between(1, budget).all() and np.isfinite(vl["gen_logprob"]).all()
        first = [t.split()[:1] for t in hf["text"]], [t.split()[:1] for t in vl["text"]]
        assert np.mean([a == b for a, b in zip(*first)]) >= 0.75, (hf["text"].tolist(), vl["text"].tolist())


def test_vllm_needs_language_model_only_for_the_multimodal_class(ckpts, vllm_cpu_gemma3, monkeypatch):
    """What the engine's ``language_model_only`` avoids: without it vLLM builds Gemma 3's image processor, which
    needs the tokenizer the engine skips (EvenHand tokenises), and refuses to start."""
    pytest.importorskip("vllm")
    import vllm

    from evenhand.engine.vllm_engine import load_vllm
    real = vllm.LLM
    monkeypatch.setattr(vllm, "LLM", lambda **kw: real(**{**kw, "language_model_only": False}))
    with pytest.raises(ValueError, match="requires a tokenizer"):
        load_vllm(spec_of("gemma3-mm", ckpts["gemma3-mm"]), max_model_len=1024)


def test_vllm_names_missing_torchvision_for_the_multimodal_class(ckpts, monkeypatch):
    """Without torchvision vLLM cannot import its Gemma 3 multimodal module: the engine says so in one line
    (vLLM's own message is that the architecture "failed to be inspected")."""
    pytest.importorskip("vllm")
    import sys

    from evenhand.engine.vllm_engine import load_vllm
    from evenhand.models.loading import ModelLoadError
    monkeypatch.setitem(sys.modules, "transformers.models.gemma3.image_processing_gemma3", None)
    with pytest.raises(ModelLoadError, match="only where torchvision imports"):
        load_vllm(spec_of("gemma3-mm", ckpts["gemma3-mm"]), max_model_len=1024)
