"""What caching costs over a plain forward, and what one device-to-host copy per batch saves.

Two measurements: the host copies of one batch's saved sites alone (:func:`bench_copies`), and the cache's
forward against a plain one (:func:`bench_forward`)."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_models import SHAPES, paired, random_model  # noqa: E402
from evenhand.running.activations import CacheOptions, nnsight_runner, trace_body  # noqa: E402
from evenhand.engine.reader import host_rows  # noqa: E402
from evenhand.engine.batching import left_pad  # noqa: E402
from evenhand.models.sites import residual_sites, resolve  # noqa: E402
from evenhand.vocab.prompts import model_text, user_message  # noqa: E402


def per_row(saved: dict) -> list[dict]:
    """The cache's host copies before: each site of each row on its own."""
    n = next(iter(saved.values())).shape[0]
    return [{k: v[j].float().cpu().numpy() for k, v in saved.items()} for j in range(n)]


def timed(fn, reps: int, sync) -> float:
    """The median wall time of ``reps`` calls after one warm-up."""
    fn()
    sync()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def bench_copies(sites: int, rows: int, width: int, dtype, device: str, reps: int, sync) -> dict:
    """(a) copies: the host copies of one batch's saved sites alone (``--sites`` sites x ``--copy-batch`` rows x
    ``--width``, in ``--copy-dtype``, on ``--device``): the per-site, per-row copies the cache made before
    (``v[j].float().cpu().numpy()``, :func:`per_row`) against ``evenhand.activations.host_rows`` (on a device: the
    sites stacked there, one copy; on the CPU: one conversion per site) and against ``host_rows(stack=True)`` (the
    device path, also on the CPU). Median of ``--reps`` (at least 5)."""
    g = torch.Generator(device=device).manual_seed(0)
    saved = {f"s{i}": torch.randn(rows, width, generator=g, device=device).to(dtype) for i in range(sites)}
    before = timed(lambda: per_row(saved), reps, sync)
    now = timed(lambda: host_rows(saved), reps, sync)
    stacked = timed(lambda: host_rows(saved, stack=True), reps, sync)
    return {"sites": sites, "rows": rows, "width": width, "dtype": str(dtype).replace("torch.", ""),
            "per_row_ms": round(before * 1e3, 2), "host_rows_ms": round(now * 1e3, 2),
            "stacked_ms": round(stacked * 1e3, 2), "speedup": round(before / now, 2)}


def bench_forward(shape: str, layers: int | None, device: str, dtype: str, batch: int, reps: int) -> dict:
    """(b) forward: on a random-weight model of a real shape (``--random``, ``--layers`` to change its depth) and
    real smoke prompts, one batch of ``--batch`` prompts: a plain forward (``logits_to_keep=1``) against the
    cache's forward (the nnsight trace saving ``embed`` and every ``resid_post`` at the last token, then the host
    copies) with the per-row copies and with ``host_rows``. Each ratio is the median of ``--reps`` paired
    repetitions after one warm-up each (:func:`bench_models.paired`)."""
    import pandas as pd

    from evenhand.suite.subsets import iter_subset
    items = pd.DataFrame(list(iter_subset("smoke", 0)))
    if layers:
        SHAPES[shape] = dict(SHAPES[shape], num_hidden_layers=layers)
    lm = random_model(shape, device, dtype, items["prompt"].tolist())
    todo = items.head(batch).to_dict("records")
    texts = [model_text(lm.tokenizer, user_message(r, "answer")) for r in todo]
    enc = [lm.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    ids, mask, pos = left_pad(enc, lm.tokenizer.pad_token_id, lm.model.device)
    resolved = [resolve(lm.model, s) for s in residual_sites(lm.model)]
    idx = list(range(len(todo)))
    one_copy = nnsight_runner(lm, texts, todo, False, resolved, CacheOptions(progress=False))
    from nnsight import TransformersModel
    traced = TransformersModel(lm.model, tokenizer=lm.tokenizer)

    def plain():
        with torch.inference_mode():
            lm.model(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=1)

    def cache_per_row():
        with torch.inference_mode():
            with traced.trace(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=1):
                saved = trace_body(traced, resolved, None)
            per_row(dict(saved))

    def cache_one_copy():
        with torch.inference_mode():
            one_copy(idx)

    a = paired(cache_per_row, plain, reps)
    b = paired(cache_one_copy, plain, reps)
    return {"shape": shape, "layers": lm.model.config.num_hidden_layers, "sites": len(resolved), "batch": batch,
            "prompt_tokens": int(ids.shape[1]), "plain_s": round(a["base_s"], 3),
            "cache_per_row_s": round(a["variant_s"], 3), "cache_one_copy_s": round(b["variant_s"], 3),
            "per_row_over_plain": round(a["ratio"], 3), "one_copy_over_plain": round(b["ratio"], 3),
            "one_copy_over_per_row": round(b["ratio"] / a["ratio"], 3)}


def main() -> None:
    """Run both measurements. Not part of the test run. Prints a short table, then a JSON line::

        python benchmarks/bench_cache.py --threads 1                       # CPU: 270M shape, batch 16; 12B-shape copies
        python benchmarks/bench_cache.py --device cuda --random gemma-3-12b --dtype bfloat16 --batch 64

    Measured with ``--threads 1 --reps 2 --batch 8 --layers 6`` on one thread of a 2-core CPU at a load average
    of 14 to 17 (others' work): copies of 49 x 64 x 3840 bfloat16, 215 ms per site and row, 65 ms with
    host_rows, 229 ms stacked; cache over plain forward 0.93 (per-row copies) and 1.005 (host_rows), plain
    5.9 s: the two ratios are within the noise of the loaded machine."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--random", default="gemma-3-270m", choices=sorted(SHAPES))
    ap.add_argument("--layers", type=int, default=None, help="change the shape's depth (a stand-in)")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--sites", type=int, default=49, help="copies: sites (Gemma-3-12B: embed + 48 layers)")
    ap.add_argument("--copy-batch", type=int, default=64)
    ap.add_argument("--width", type=int, default=3840)
    ap.add_argument("--copy-dtype", default="bfloat16", choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--skip-forward", action="store_true")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    sync = torch.cuda.synchronize if a.device.startswith("cuda") else (lambda: None)
    res = {"device": a.device, "threads": torch.get_num_threads(), "load_before": os.getloadavg()[0]}
    res["copies"] = bench_copies(a.sites, a.copy_batch, a.width, getattr(torch, a.copy_dtype), a.device,
                                 max(a.reps, 5), sync)
    if not a.skip_forward:
        res["forward"] = bench_forward(a.random, a.layers, a.device, a.dtype, a.batch, a.reps)
    res["load_after"] = os.getloadavg()[0]
    c = res["copies"]
    print(f"copies of one batch ({c['sites']} sites x {c['rows']} rows x {c['width']}, {c['dtype']}, {a.device}): "
          f"per site and row {c['per_row_ms']} ms, host_rows {c['host_rows_ms']} ms ({c['speedup']}x; "
          f"stacked, one copy: {c['stacked_ms']} ms)")
    if "forward" in res:
        f = res["forward"]
        print(f"forward ({f['shape']}, {f['layers']} layers, batch {f['batch']} x {f['prompt_tokens']} tokens): "
              f"plain {f['plain_s']} s; cache/plain {f['per_row_over_plain']} with per-row copies, "
              f"{f['one_copy_over_plain']} with host_rows (host_rows / per row {f['one_copy_over_per_row']})")
    print(f"load average {res['load_before']:.1f} before, {res['load_after']:.1f} after")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
