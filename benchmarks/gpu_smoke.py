"""Will a real EvenHand run work on this GPU? One prepared check, about 4 minutes on an H200.

``python benchmarks/gpu_smoke.py --out DIR`` builds random weights of the presets' exact classes at their real widths
(``--layers`` sets the depth; ``real`` for the whole model) in bf16 on the device, saves and loads them like a
checkpoint, and checks every model path of a run: ``env``, ``checkpoint``, ``decide`` (logprob, answer, reasoning;
prefix reuse; the default batch), ``cache`` (finite, its dtype, the size at core scale), ``oom`` (a batch that
cannot fit finishes smaller with the answers of a run there), ``steering`` (every layer, no hook left), ``restore``
(the on-device digest catches a ``.data`` write), ``learned`` (``loreft`` steps), ``transformer_lens`` (the bridge,
offline, no second copy), ``probes`` (the torch solver at 49 x 3,840 x 10,000), ``plan`` (``evenhand plan``'s
predictions over what was measured) and ``vllm`` (in a subprocess after the models are freed). Each check is
independent: a failure is recorded and the next still runs; each record is appended to ``DIR/gpu_smoke.jsonl`` when
it finishes, and ``DIR/gpu_smoke.json`` gathers them. ``--tiny`` runs the same code at toy widths (CI, on the CPU:
tests/test_gpu_smoke.py). Results and what they showed: docs/results/gpu_smoke.md, "First contact with a GPU".
All of it is ours (a check script); the models are transformers' classes."""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CORE_ITEMS = 49_920
"""Items of the core subset: the projection's scale."""
REAL_LAYERS = {"gemma3-mm": 48, "qwen2": 28}
"""The real models' depths (gemma-3-12b-it's text tower, Qwen2.5-7B-Instruct)."""
PACKAGES = ("transformers", "nnsight", "transformer_lens", "vllm", "pyvene", "concept_erasure", "sklearn",
            "numpy", "pandas", "pyarrow", "safetensors", "tokenizers", "datasets", "huggingface_hub")
DISTRIBUTIONS = {"transformer_lens": "transformer-lens", "concept_erasure": "concept-erasure", "sklearn": "scikit-learn",
                 "huggingface_hub": "huggingface-hub"}


@dataclass
class Ctx:
    """What the checks share: the arguments, the device, and the checkpoints and models built so far."""
    args: argparse.Namespace
    device: str
    out: Path
    work: Path
    checkpoints: dict = field(default_factory=dict)
    models: dict = field(default_factory=dict)
    items: object = None
    results: dict = field(default_factory=dict)
    """Each finished check's result, by name (the plan check compares its predictions with them)."""

    @property
    def cuda(self) -> bool:
        return self.device.startswith("cuda")


def _mem(ctx: Ctx) -> dict:
    """Device memory now and at peak since the last reset (GiB), and the process's host RSS (GiB)."""
    import resource
    out = {"host_maxrss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)}
    try:
        import psutil
        out["host_rss_gib"] = round(psutil.Process().memory_info().rss / 2**30, 2)
    except ImportError:
        pass
    if ctx.cuda:
        import torch
        out.update(device_allocated_gib=round(torch.cuda.memory_allocated() / 2**30, 2),
                   device_peak_gib=round(torch.cuda.max_memory_allocated() / 2**30, 2),
                   device_reserved_gib=round(torch.cuda.memory_reserved() / 2**30, 2))
    return out


def _reset_peak(ctx: Ctx) -> None:
    if ctx.cuda:
        import torch
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def _free(ctx: Ctx) -> None:
    gc.collect()
    if ctx.cuda:
        import torch
        torch.cuda.empty_cache()


def _sync(ctx: Ctx) -> None:
    if ctx.cuda:
        import torch
        torch.cuda.synchronize()


class Skip(Exception):
    """A check that cannot run here (a package missing, an earlier check it needs failed): recorded, not failed."""


# --- the checks ------------------------------------------------------------------------------------------------

def check_env(ctx: Ctx) -> dict:
    from importlib import metadata

    import torch
    out = {"python": platform.python_version(), "torch": torch.__version__, "cuda_available": torch.cuda.is_available(),
           "torch_cuda": torch.version.cuda, "device": ctx.device, "packages": {}}
    if ctx.cuda:
        free, total = torch.cuda.mem_get_info()
        out.update(device_name=torch.cuda.get_device_name(), capability=".".join(map(str, torch.cuda.get_device_capability())),
                   device_total_gib=round(total / 2**30, 1), device_free_gib=round(free / 2**30, 1),
                   bf16_supported=torch.cuda.is_bf16_supported())
    for name in PACKAGES:  # installed versions (the checks below import what they use)
        try:
            out["packages"][name] = metadata.version(DISTRIBUTIONS.get(name, name))
        except metadata.PackageNotFoundError:
            out["packages"][name] = "missing"
    out["cpu_count"] = os.cpu_count()
    return out


def _archs(ctx: Ctx) -> list[str]:
    return [a for a in ("gemma3-mm", "qwen2") if a in ctx.args.archs]


def check_checkpoint(ctx: Ctx) -> dict:
    import torch

    import evenhand as eh
    from evenhand.models.tiny import build_random_checkpoint
    out = {}
    for arch in _archs(ctx):
        layers = ctx.args.layers.get(arch)
        d = ctx.work / f"ckpt-{arch}"
        _reset_peak(ctx)
        t = time.perf_counter()
        build_random_checkpoint(arch, d, width="tiny" if ctx.args.tiny else "real", dtype=torch.bfloat16,
                                layers=layers, device=ctx.device)
        _sync(ctx)
        build_s = time.perf_counter() - t
        _free(ctx)
        size = sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
        _reset_peak(ctx)
        t = time.perf_counter()
        lm = eh.load_model(str(d), dtype="bfloat16", device=ctx.device)
        _sync(ctx)
        load_s = time.perf_counter() - t
        cfg = lm.model.config.get_text_config()
        params = sum(p.numel() for p in lm.model.parameters())
        ctx.checkpoints[arch] = d
        ctx.models[arch] = lm
        out[arch] = {"class": type(lm.model).__name__, "layers": int(cfg.num_hidden_layers),
                     "real_layers": REAL_LAYERS[arch], "hidden": int(cfg.hidden_size),
                     "vocab": int(cfg.vocab_size), "params": params, "dtype": lm.dtype, "device": lm.device,
                     "checkpoint_gib": round(size / 2**30, 2), "build_save_s": round(build_s, 1),
                     "load_s": round(load_s, 1), "load_gib_per_s": round(size / 2**30 / max(load_s, 1e-9), 2),
                     "weights_fingerprint": lm.meta.get("weights"), **_mem(ctx)}
    return out


def _model(ctx: Ctx, arch: str):
    if arch not in ctx.models:
        raise Skip(f"no {arch} model (the checkpoint check did not load it)")
    return ctx.models[arch]


def _first(ctx: Ctx):
    """The first class asked for and its loaded model (the checks that run on one class)."""
    arch = _archs(ctx)[0]
    return arch, _model(ctx, arch)


def _items(ctx: Ctx):
    import evenhand as eh
    if ctx.items is None:
        ctx.items = eh.suite.items("smoke", limit=ctx.args.items)
    return ctx.items


def check_decide(ctx: Ctx) -> dict:
    """Decisions through the hf engine after a warm-up batch: logprob with and without prefix reuse (their largest
    logprob difference and how many choices differ), answer mode with and without it, reasoning mode
    (``--reasoning-tokens`` generated), and logprob at the default batch size (chosen from the device's memory)."""
    import evenhand as eh
    items = _items(ctx)
    out = {"items": len(items)}
    runs = (("logprob", "logprob", False, ctx.args.batch), ("logprob_prefix", "logprob", True, ctx.args.batch),
            ("answer", "answer", False, ctx.args.batch), ("answer_prefix", "answer", True, ctx.args.batch),
            ("reasoning", "reasoning", False, ctx.args.batch), ("logprob_auto_batch", "logprob", False, None))
    for arch in _archs(ctx):
        lm = _model(ctx, arch)
        eh.decide(items.head(8), lm, eh.DecideOptions(mode="logprob", batch_size=8, progress=False))  # warm-up
        res, frames = {}, {}
        for key, mode, prefix, batch in runs:
            _reset_peak(ctx)
            opts = eh.DecideOptions(mode=mode, batch_size=batch, prefix_reuse=prefix, progress=False,
                                    max_new_tokens=8, reasoning_max_new_tokens=ctx.args.reasoning_tokens)
            t = time.perf_counter()
            rows = eh.decide(items, lm, opts)
            _sync(ctx)
            s = time.perf_counter() - t
            shared = rows["n_shared_prefix_tokens"] if "n_shared_prefix_tokens" in rows else rows["batch_size"] * 0
            res[key] = {"items_per_s": round(len(rows) / s, 1), "seconds": round(s, 2),
                        "max_batch": int(rows["batch_size"].max()), "shared_prefix_tokens_mean": round(float(shared.mean()), 1),
                        "prompt_tokens_mean": round(float(rows["n_prompt_tokens"].mean()), 1),
                        "new_tokens_mean": round(float(rows["n_new_tokens"].mean()), 1) if "n_new_tokens" in rows else 0.0,
                        "parsed": int(rows["choice"].notna().sum()), **_mem(ctx)}
            if mode == "logprob" and batch == ctx.args.batch:
                frames[key] = rows.set_index("item_id")[["logprob_A", "logprob_B", "choice"]]
        a, b = frames["logprob_prefix"], frames["logprob"].loc[frames["logprob_prefix"].index]
        res["prefix_vs_plain_max_abs_logprob_diff"] = float((a[["logprob_A", "logprob_B"]]
                                                              - b[["logprob_A", "logprob_B"]]).abs().max().max())
        res["prefix_vs_plain_choices_differing"] = int((a["choice"].fillna("-") != b["choice"].fillna("-")).sum())
        out[arch] = res
    return out


def check_cache(ctx: Ctx) -> dict:
    import numpy as np

    import evenhand as eh
    items = _items(ctx).head(ctx.args.cache_items)
    out = {"items": len(items)}
    for arch in _archs(ctx):
        lm = _model(ctx, arch)
        d = ctx.work / f"cache-{arch}"
        _reset_peak(ctx)
        t = time.perf_counter()
        cache = eh.cache(items, lm, eh.CacheOptions(sites=("residual",), batch_size=ctx.args.batch, progress=False),
                         out_dir=d)
        _sync(ctx)
        s = time.perf_counter() - t
        sites = cache.sites
        finite = all(bool(np.isfinite(cache.load(site)[1]).all()) for site in sites)
        size = sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
        n_layers = int(lm.model.config.get_text_config().num_hidden_layers)
        real_sites = REAL_LAYERS[arch] + 1
        per_item_site = size / len(items) / len(sites)
        out[arch] = {"sites": len(sites), "stored_dtype": cache.manifest.get("dtype"), "all_finite": finite,
                     "items_per_s": round(len(items) / s, 1), "bytes_on_disk": size,
                     "layers_here": n_layers,
                     "projected_core_gib_real_depth": round(per_item_site * real_sites * CORE_ITEMS / 2**30, 1),
                     **_mem(ctx)}
        if not finite:
            raise AssertionError(f"{arch}: the cache holds non-finite values")
    return out


def check_oom(ctx: Ctx) -> dict:
    """Decisions at a batch that cannot fit: the run finishes at a smaller batch, with the answers of a run there."""
    import numpy as np
    import torch

    import evenhand as eh
    arch, lm = _first(ctx)
    items = _items(ctx)
    big = len(items)
    out = {"arch": arch, "asked_batch": big}
    real_cap = ctx.cuda and not ctx.args.tiny  # toy widths never fill a GPU: they get the injected error
    if real_cap:
        _free(ctx)
        free, total = torch.cuda.mem_get_info()
        allowed = torch.cuda.memory_allocated() + int(ctx.args.oom_headroom_gib * 2**30)
        torch.cuda.set_per_process_memory_fraction(min(1.0, allowed / total))
        out["cap_gib"] = round(allowed / 2**30, 2)
        injected = None
    else:  # CPU or toy widths: an injected out-of-memory error above a batch of 8
        injected = 8
    out["oom_source"] = "device memory capped" if real_cap else "injected above batch 8"
    try:
        opts = eh.DecideOptions(mode="logprob", batch_size=big, progress=False)
        if injected is None:
            rows = eh.decide(items, lm, opts)
        else:
            rows = _with_injected_oom(lm, injected, lambda: eh.decide(items, lm, opts))
    finally:
        if real_cap:
            torch.cuda.set_per_process_memory_fraction(1.0)
        _free(ctx)
    used = int(rows["batch_size"].max())
    out["finished_at_batch"] = used
    if used >= big:
        raise AssertionError(f"asked batch {big} ran whole: the cap did not bind (raise --items or lower --oom-headroom-gib)")
    ref = eh.decide(items, lm, eh.DecideOptions(mode="logprob", batch_size=used, progress=False))
    a = rows.set_index("item_id")[["logprob_A", "logprob_B"]]
    b = ref.set_index("item_id").loc[a.index, ["logprob_A", "logprob_B"]]
    out["max_abs_diff_vs_run_at_that_batch"] = float(np.abs(a.to_numpy() - b.to_numpy()).max())
    out["same_choices"] = bool((rows.set_index("item_id")["choice"].fillna("-")
                               == ref.set_index("item_id").loc[a.index, "choice"].fillna("-")).all())
    if out["max_abs_diff_vs_run_at_that_batch"] > 0 or not out["same_choices"]:
        raise AssertionError(f"the recovered run differs from a run at batch {used}: {out}")
    return out


def _with_injected_oom(lm, above: int, fn: Callable):
    """Run ``fn`` with the model's forward raising torch's out-of-memory error for batches above ``above``."""
    import torch
    model = lm.model
    orig = model.forward

    def forward(*a, **kw):
        ids = kw.get("input_ids", a[0] if a else None)
        if ids is not None and ids.shape[0] > above:
            raise torch.cuda.OutOfMemoryError(f"CUDA out of memory (injected above batch {above})")
        return orig(*a, **kw)

    model.forward = forward
    try:
        return fn()
    finally:
        del model.forward


def _prompt_ids(ctx: Ctx, lm, n: int = 4):
    import torch

    from evenhand.vocab.prompts import model_text, user_message
    rows = _items(ctx).head(n).to_dict("records")
    texts = [model_text(lm.tokenizer, user_message(r, "answer"), "auto") for r in rows]
    enc = lm.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    return {k: v.to(lm.model.device) for k, v in enc.items() if k in ("input_ids", "attention_mask")}


def _hook_count(model) -> int:
    return sum(len(getattr(m, k, {}) or {}) for m in model.modules()
               for k in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks"))


def check_steering(ctx: Ctx) -> dict:
    import torch

    from evenhand.models.sites import residual_sites
    from steering.hooks import Add, steer
    out = {}
    for arch in _archs(ctx):
        lm = _model(ctx, arch)
        enc = _prompt_ids(ctx, lm)
        hooks_before = _hook_count(lm.model)
        with torch.inference_mode():
            base = lm.model(**enc, logits_to_keep=1).logits.float()
        d = int(lm.model.config.get_text_config().hidden_size)
        vec = torch.randn(d, generator=torch.Generator().manual_seed(0))
        sites = [s for s in residual_sites(lm.model) if s.endswith("resid_post")]
        _reset_peak(ctx)
        t = time.perf_counter()
        with steer(lm.model, {s: Add(vec, 4.0) for s in sites}), torch.inference_mode():
            hooks_inside = _hook_count(lm.model)
            edited = lm.model(**enc, logits_to_keep=1).logits.float()
        _sync(ctx)
        s = time.perf_counter() - t
        with torch.inference_mode():
            after = lm.model(**enc, logits_to_keep=1).logits.float()
        out[arch] = {"edited_sites": len(sites), "hooks_before": hooks_before, "hooks_inside": hooks_inside,
                     "hooks_after": _hook_count(lm.model), "steered_changed_logits": bool((edited - base).abs().max() > 0),
                     "after_equals_before": bool(torch.equal(after, base)), "steered_forward_s": round(s, 3),
                     **_mem(ctx)}
        r = out[arch]
        if r["hooks_after"] != hooks_before or not r["after_equals_before"] or not r["steered_changed_logits"]:
            raise AssertionError(f"{arch}: steering left the model changed or did nothing: {r}")
    return out


def check_restore(ctx: Ctx) -> dict:
    """The comparison's per-cell restore check (:func:`interventions.model_state.weights_digest`, on-device
    integer checksums): its time, host memory it adds, and that one element written through ``.data`` (which
    autograd's version counter does not see) changes it."""
    import torch

    from interventions.model_state import weights_digest
    arch, lm = _first(ctx)
    _reset_peak(ctx)
    rss0 = _mem(ctx).get("host_rss_gib")
    t = time.perf_counter()
    clean = weights_digest(lm.model)
    _sync(ctx)
    digest_s = time.perf_counter() - t
    again = weights_digest(lm.model)
    p = next(p for n, p in lm.model.named_parameters() if "layers.0." in n and p.ndim == 2)
    with torch.no_grad():
        old = p.data[1, 3].clone()
        p.data[1, 3] += 1.0
    written = weights_digest(lm.model)
    with torch.no_grad():
        p.data[1, 3] = old
    restored = weights_digest(lm.model)
    weights_gib = sum(q.numel() * q.element_size() for q in lm.model.parameters()) / 2**30
    out = {"arch": arch, "weights_gib": round(weights_gib, 2), "digest_s": round(digest_s, 3),
           "repeatable": clean == again, "data_write_caught": written != clean, "restored_equal": restored == clean,
           "host_rss_before_gib": rss0, **_mem(ctx)}
    if not (out["repeatable"] and out["data_write_caught"] and out["restored_equal"]):
        raise AssertionError(f"restore check: {out}")
    return out


def check_learned(ctx: Ctx) -> dict:
    import interventions
    arch, lm = _first(ctx)
    items = _items(ctx)
    method = interventions.get("loreft")
    fit_opts, _ = method.split_options({"steps": ctx.args.learned_steps, "batch_size": ctx.args.learned_batch,
                                        "max_train": 64})
    _reset_peak(ctx)
    t = time.perf_counter()
    fitted = method.fit(lm, items, fit_opts, seed=0, progress=False)
    _sync(ctx)
    s = time.perf_counter() - t
    curve = fitted.info.get("curve") or []
    return {"arch": arch, "steps": ctx.args.learned_steps, "batch": ctx.args.learned_batch,
            "seconds_per_step": round(s / ctx.args.learned_steps, 3),
            "first_loss": curve[0].get("loss") if curve else None, "last_loss": curve[-1].get("loss") if curve else None,
            **_mem(ctx)}


def check_transformer_lens(ctx: Ctx) -> dict:
    import numpy as np
    import torch

    import evenhand as eh
    arch, lm = _first(ctx)
    items = _items(ctx).head(8)
    os.environ["HF_HUB_OFFLINE"] = "1"
    _free(ctx)
    before = torch.cuda.memory_allocated() if ctx.cuda else 0
    _reset_peak(ctx)
    t = time.perf_counter()
    tl = eh.cache(items, lm, eh.CacheOptions(sites=("residual",), batch_size=1, progress=False),
                  out_dir=ctx.work / f"tl-{arch}", backend="transformer_lens")
    s = time.perf_counter() - t
    extra = (torch.cuda.max_memory_allocated() - before) / 2**30 if ctx.cuda else None
    nn = eh.cache(items, lm, eh.CacheOptions(sites=("residual",), batch_size=1, progress=False),
                  out_dir=ctx.work / f"nn-{arch}")
    diffs = []
    for site, hook in zip(nn.sites, tl.sites):
        a, b = nn.load(site)[1], tl.load(hook)[1]
        diffs.append(float(np.abs(a - b).max() / (np.abs(a).max() + 1e-6)))
    return {"arch": arch, "seconds": round(s, 2), "sites": len(tl.sites), "max_rel_diff_vs_nnsight": max(diffs),
            "extra_device_gib_peak": None if extra is None else round(extra, 2),
            "weights_gib": round(sum(p.numel() * p.element_size() for p in lm.model.parameters()) / 2**30, 2)}


def check_probes(ctx: Ctx) -> dict:
    from probes.logistic import time_solver
    a = ctx.args
    _free(ctx)
    resident = 0
    if ctx.cuda:
        import torch
        resident = torch.cuda.memory_allocated()
    out = time_solver(sites=a.probe_sites, dim=a.probe_dim, rows=a.probe_rows, device=ctx.device)
    if out["peak_measured"]:  # the models still loaded are not the solver's
        out["peak_bytes_above_resident"] = out["peak_bytes"] - resident
        out["expected_over_measured"] = round(out["solver"]["expected_peak_bytes"]
                                              / max(out["peak_bytes_above_resident"], 1), 3)
    return out


def check_plan(ctx: Ctx) -> dict:
    """``evenhand plan``'s predictions (:mod:`evenhand.models.plan`) against what this run measured: weights,
    the decision stage's memory above the weights and its seconds (logprob and answer mode), the cache on disk,
    and the probe solver's seconds and memory. Ratios are predicted / measured."""
    from evenhand.models.plan import DEVICES, GB, Device, Workload, plan, shapes_from_config
    r = ctx.results
    if "checkpoint" not in r or "decide" not in r:
        raise Skip("needs the checkpoint and decide checks' results")
    name = ("H200" if "H200" in r.get("env", {}).get("device_name", "") else "H100") if ctx.cuda else "CPU"
    dev: Device = DEVICES[name]
    out = {"device_model": name, "efficiency": 0.4}
    for arch in _archs(ctx):
        if arch not in r["checkpoint"] or arch not in r["decide"]:
            continue
        cfg = json.loads((ctx.checkpoints[arch] / "config.json").read_text())
        shapes = shapes_from_config(cfg, "bfloat16")
        dec = r["decide"][arch]
        tokens = int(round(dec["logprob"]["prompt_tokens_mean"] * 1.25))  # the widest prompt of a batch
        row = {"weights": round(shapes.params * 2 / (r["checkpoint"][arch]["params"] * 2), 3)}
        for mode in ("logprob", "answer", "reasoning"):
            key = mode
            work = Workload(items=r["decide"]["items"], prompt_tokens=tokens,
                            mean_prompt_tokens=int(dec["logprob"]["prompt_tokens_mean"]), mode=mode,
                            new_tokens=ctx.args.reasoning_tokens if mode == "reasoning" else 8,
                            batch_size=ctx.args.batch)
            pl = plan(arch, shapes, work, dev)
            row[f"{mode}_seconds"] = round(pl.seconds["decisions"] / dec[key]["seconds"], 3)
            if ctx.cuda:
                over = (dec[key]["device_peak_gib"] - dec[key]["device_allocated_gib"]) * 2**30
                row[f"{mode}_memory_above_weights"] = round((pl.gpu["decisions"] - pl.gpu["weights"]) / max(over, 1), 3)
        if arch in r.get("cache", {}):
            c = r["cache"][arch]
            work = Workload(items=r["cache"]["items"], prompt_tokens=tokens, batch_size=ctx.args.batch,
                            cache_sites=c["sites"], cache_dtype=c["stored_dtype"] or "bfloat16")
            row["cache_disk"] = round(plan(arch, shapes, work, dev).disk["activation cache"] / c["bytes_on_disk"], 3)
        out[arch] = row
    if "probes" in r:
        pr = r["probes"]
        shapes = shapes_from_config({"hidden_size": pr["dim"], "num_hidden_layers": pr["sites"] - 1,
                                     "intermediate_size": 4 * pr["dim"], "num_attention_heads": 1,
                                     "vocab_size": 1}, "bfloat16")
        pl = plan("probe", shapes, Workload(items=pr["rows"], prompt_tokens=1, cache_sites=pr["sites"],
                                            probe_rows=pr["rows"]), dev)
        out["probes_seconds"] = round(pl.seconds["probes"] / pr["seconds"], 3)
        if pr.get("peak_bytes_above_resident"):
            out["probes_memory"] = round(pl.gpu.get("probe solver", 0) / pr["peak_bytes_above_resident"], 3)
        out["probes_memory_predicted_gb"] = round(pl.gpu.get("probe solver", 0) / GB, 2)
    return out


def check_vllm(ctx: Ctx) -> dict:
    """vLLM on each checkpoint, in a subprocess after the Hugging Face models are freed: load time, items/s in
    answer mode. A class vLLM cannot load here for a named, known reason (Gemma 3's multimodal class without
    torchvision, as on a CPU install) is recorded as skipped for that class; any other failure fails the check."""
    try:
        import vllm  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        raise Skip(f"vllm does not import here ({type(exc).__name__}: {str(exc)[:160]})") from None
    if not ctx.checkpoints:
        raise Skip("no checkpoint")
    ctx.models.clear()
    _free(ctx)
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(Path(__file__).resolve().parents[1]) + os.pathsep
               + os.environ.get("PYTHONPATH", ""))
    if not ctx.cuda:
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    out = {}
    for arch, ckpt in ctx.checkpoints.items():
        code = (
            "import json, time; import evenhand as eh; from evenhand.engine import registry\n"
            f"t=time.perf_counter(); vm = registry.load({str(ckpt)!r}, 'vllm'); load_s=time.perf_counter()-t\n"
            f"items = eh.suite.items('smoke', limit={ctx.args.items})\n"
            "t=time.perf_counter(); rows = eh.decide(items, vm, eh.DecideOptions(engine='vllm', progress=False, "
            f"batch_size={ctx.args.items})); s=time.perf_counter()-t\n"
            "print('RESULT', json.dumps({'load_s': round(load_s,1), 'items_per_s': round(len(rows)/s,1), "
            "'architecture': vm.architecture, 'rows': len(rows)}))\n"
            "vm.close()\n")
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                           timeout=ctx.args.vllm_timeout)
        line = next((x for x in p.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is not None and p.returncode == 0:
            out[arch] = json.loads(line[len("RESULT "):])
        elif "torchvision" in (p.stderr or ""):
            out[arch] = {"skipped": "vLLM needs torchvision for this class and it is not installed here"}
        else:
            raise AssertionError(f"{arch}: vLLM subprocess exited {p.returncode}: {(p.stderr or p.stdout)[-1500:]}")
    if all("skipped" in v for v in out.values()):
        raise Skip(f"no class could be loaded by vLLM here: {out}")
    return out


CHECKS: dict[str, Callable[[Ctx], dict]] = {
    "env": check_env, "checkpoint": check_checkpoint, "decide": check_decide, "cache": check_cache,
    "oom": check_oom, "steering": check_steering, "restore": check_restore, "learned": check_learned,
    "transformer_lens": check_transformer_lens, "probes": check_probes, "plan": check_plan, "vllm": check_vllm,
}


def run_check(ctx: Ctx, name: str, fn: Callable[[Ctx], dict], deadline: float) -> dict:
    """Run one check; its record (status ok / failed / skipped, seconds, result or error) is appended to the
    JSONL file at once."""
    t = time.perf_counter()
    left = deadline - time.time()
    if left <= 0:
        rec = {"check": name, "status": "skipped", "reason": "the run's time budget (--budget-s) is spent"}
    else:
        try:
            rec = {"check": name, "status": "ok", "result": fn(ctx)}
            ctx.results[name] = rec["result"]
        except Skip as exc:
            rec = {"check": name, "status": "skipped", "reason": str(exc)}
        except BaseException as exc:  # noqa: BLE001 - one check's failure is recorded; the others still run
            if isinstance(exc, KeyboardInterrupt):
                raise
            rec = {"check": name, "status": "failed", "error": f"{type(exc).__name__}: {str(exc)[:2000]}",
                   "traceback": traceback.format_exc()[-4000:]}
        finally:
            if ctx.cuda:
                import torch
                torch.cuda.set_per_process_memory_fraction(1.0)
            gc.collect()
    rec["seconds"] = round(time.perf_counter() - t, 2)
    with open(ctx.out / "gpu_smoke.jsonl", "a") as fh:
        fh.write(json.dumps(rec, default=str) + "\n")
    status = rec["status"] + (f" ({rec.get('reason') or rec.get('error', '')})"[:300] if rec["status"] != "ok" else "")
    print(f"[gpu_smoke] {name:<17} {status}  {rec['seconds']:.1f} s", flush=True)
    return rec


def parse_layers(text: str) -> dict:
    out = {}
    for part in filter(None, text.split(",")):
        k, _, v = part.partition("=")
        out[k.strip()] = None if v.strip() in ("", "real", "all") else int(v)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiny", action="store_true",
                    help="toy widths (CI runs this on the CPU; on a GPU it is a one-minute plumbing check)")
    ap.add_argument("--device", default=None, help="cuda | cpu (default: cuda when available)")
    ap.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"), help="where the JSON files go")
    ap.add_argument("--work", default=None,
                    help="scratch folder for checkpoints and caches (default: a temporary folder, removed at the end)")
    ap.add_argument("--only", default="", help="comma-separated checks to run (default: all)")
    ap.add_argument("--skip", default="", help="comma-separated checks to leave out")
    ap.add_argument("--archs", default="gemma3-mm,qwen2", help="preset classes to build (gemma3-mm, qwen2)")
    ap.add_argument("--layers", default="gemma3-mm=12,qwen2=8",
                    help="layers per class ('gemma3-mm=real' for the real depth); real widths always")
    ap.add_argument("--items", type=int, default=256, help="smoke items decided")
    ap.add_argument("--batch", type=int, default=64, help="decision and cache batch")
    ap.add_argument("--cache-items", type=int, default=128)
    ap.add_argument("--reasoning-tokens", type=int, default=32, help="tokens generated per item in reasoning mode")
    ap.add_argument("--oom-headroom-gib", type=float, default=1.0,
                    help="device memory above the weights the OOM check allows")
    ap.add_argument("--learned-steps", type=int, default=4)
    ap.add_argument("--learned-batch", type=int, default=16)
    ap.add_argument("--probe-sites", type=int, default=49)
    ap.add_argument("--probe-dim", type=int, default=3840)
    ap.add_argument("--probe-rows", type=int, default=10_000)
    ap.add_argument("--vllm-timeout", type=int, default=300)
    ap.add_argument("--budget-s", type=float, default=540, help="checks not started by then are skipped")
    a = ap.parse_args(argv)
    a.archs = [x.strip() for x in a.archs.split(",") if x.strip()]
    a.layers = parse_layers(a.layers)
    if a.tiny:  # toy sizes: the checks' code paths, in about a minute on two CPU cores
        a.items, a.batch, a.cache_items = min(a.items, 24), min(a.batch, 8), min(a.cache_items, 8)
        a.reasoning_tokens = min(a.reasoning_tokens, 8)
        a.probe_sites, a.probe_dim, a.probe_rows = min(a.probe_sites, 3), min(a.probe_dim, 32), min(a.probe_rows, 400)
        a.learned_steps, a.learned_batch = min(a.learned_steps, 2), min(a.learned_batch, 4)
    import torch
    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu" and not a.tiny and not a.device:  # real widths on a CPU only when asked for by --device
        print("no CUDA device: run with --tiny on CPU", file=sys.stderr)
        return 2
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_smoke.jsonl").unlink(missing_ok=True)
    tmp = None if a.work else tempfile.TemporaryDirectory(prefix="gpu_smoke-")
    work = Path(a.work) if a.work else Path(tmp.name)
    work.mkdir(parents=True, exist_ok=True)
    ctx = Ctx(args=a, device=device, out=out, work=work)
    only = {x for x in a.only.split(",") if x}
    skip = {x for x in a.skip.split(",") if x}
    unknown = (only | skip) - set(CHECKS)
    if unknown:
        print(f"unknown check(s) {', '.join(sorted(unknown))}; known: {', '.join(CHECKS)}", file=sys.stderr)
        return 2
    deadline = time.time() + a.budget_s
    t0 = time.perf_counter()
    records = [run_check(ctx, name, fn, deadline) for name, fn in CHECKS.items()
               if (not only or name in only) and name not in skip]
    summary = {"tiny": a.tiny, "device": device, "seconds": round(time.perf_counter() - t0, 1),
               "ok": sum(r["status"] == "ok" for r in records), "failed": sum(r["status"] == "failed" for r in records),
               "skipped": sum(r["status"] == "skipped" for r in records), "checks": records}
    (out / "gpu_smoke.json").write_text(json.dumps(summary, indent=1, default=str))
    ctx.models.clear()
    if tmp is not None:
        tmp.cleanup()
    print(f"[gpu_smoke] {summary['ok']} ok, {summary['failed']} failed, {summary['skipped']} skipped in "
          f"{summary['seconds']} s: {out / 'gpu_smoke.json'}")
    return 1 if summary["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
