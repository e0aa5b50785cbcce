"""Throughput of evenhand.running.decisions on one device: each change as a ratio against the version before it."""
from __future__ import annotations

import argparse
import json
import random
import sys
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import evenhand.running.decisions as D  # noqa: E402
import evenhand.engine.scoring as S  # noqa: E402
from evenhand.engine.batching import left_pad, token_ids  # noqa: E402
from bench_models import SHAPES, paired, random_model  # noqa: E402
from evenhand.models.loading import LoadedModel, ModelSpec, load_model  # noqa: E402
from evenhand.vocab.prompts import labels, model_text, user_message, uses_chat_template  # noqa: E402

CELL_SIZE = 19  # a baseline and 9 pressure families x 2 slots


def bench_items(n: int, seed: int = 0, order: str = "shuffled") -> pd.DataFrame:
    """``n`` items of whole matched cells (the last one cut at ``n``), drawn with ``seed``.

    The prompts: a matched set of real suite items (:func:`evenhand.models.policy.matched_items`): for each cell
    (scenario, degree, contrast, variant, slot order) its baseline and one sentence of every pressure family
    toward each slot, 19 items that share every token up to the pressure sentence. Whole cells are drawn
    (seeded) until ``--items`` items, and the items are shuffled (``--order shuffled``, the default) or kept cell
    by cell as the suite files list them (``--order cells``)."""
    from evenhand.models.policy import matched_items
    from evenhand.suite.content import load_content
    rng = random.Random(seed)
    scenarios = sorted(s.id for s in load_content().scenarios)
    # a scenario holds 32 cells (4 degrees x 4 condition variants x 2 slot orders); one scenario more for variety
    pool = matched_items(rng.sample(scenarios, -(-n // (32 * CELL_SIZE)) + 1), seed=seed)
    cells = list(dict.fromkeys(pool["baseline_id"]))
    rng.shuffle(cells)
    chosen, total = [], 0
    for c in cells:
        if total >= n:
            break
        chosen.append(c)
        total += int((pool["baseline_id"] == c).sum())
    items = pool[pool["baseline_id"].isin(chosen)]
    items = items.assign(_cell=items["baseline_id"].map({c: i for i, c in enumerate(chosen)}))
    items = items.sort_values("_cell", kind="stable").drop(columns="_cell").head(n)
    if order == "shuffled":
        items = items.sample(frac=1.0, random_state=seed)
    elif order != "cells":
        raise ValueError(f"order must be shuffled or cells, got {order!r}")
    return items.reset_index(drop=True)


def tiny_model(texts: list[str], device: str, dtype: str) -> LoadedModel:
    """A tiny random Gemma 3 (3 layers, hidden 64, sliding window 128) with the suite's word-level tokenizer."""
    from evenhand.models.tiny import build_tiny_model
    model, tok = build_tiny_model("gemma3", texts, seed=0)
    model = model.to(device, {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype])
    return LoadedModel(model=model, tokenizer=tok, spec=ModelSpec("tiny:gemma3"), name="tiny:gemma3",
                       source="random weights", device=device, dtype=dtype)


def per_label_logprob(lm: LoadedModel, texts: list[str], items: list[dict], special: bool,
                      min_prefix: int = 0) -> list[dict]:
    """The previous version of logprob scoring: one forward per label (each label's full sequence,
    all items of the batch together), the label's log-probability summed over its tokens.
    ``min_prefix`` is accepted for decide's call and ignored (no prefix reuse here)."""
    tok, model = lm.tokenizer, lm.model
    per_label, n_ctx = [], []
    for which in (0, 1):
        seqs, conts = [], []
        for text, item in zip(texts, items):
            ctx, cont = S.label_token_ids(tok, text, labels(item)[which], special)
            seqs.append(ctx + cont)
            conts.append(cont)
            n_ctx.append(len(ctx))
        k = max(len(c) for c in conts)
        ids, mask, pos = left_pad(seqs, tok.pad_token_id, model.device)
        with torch.inference_mode():
            logits = model(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=k + 1).logits
        logp = torch.log_softmax(logits.float(), dim=-1)
        per_label.append([float(sum(logp[r, k - len(c) + t, c[t]] for t in range(len(c))))
                          for r, c in enumerate(conts)])
    return [{"logprob_A": a, "logprob_B": b, "n_prompt_tokens": n, "n_new_tokens": 0, "logprob_forwards": 2}
            for a, b, n in zip(*per_label, n_ctx)]


@contextmanager
def scorer(fn):
    """decide with ``fn`` in place of its logprob scorer."""
    real = S.score_labels
    S.score_labels = fn
    try:
        yield
    finally:
        S.score_labels = real


def _agreement(new: pd.DataFrame, old: pd.DataFrame, mode: str) -> dict:
    out = {"same_choices": bool((new["choice"].fillna("-") == old["choice"].fillna("-")).all())}
    if mode == "logprob":
        out["max_abs_logprob_diff"] = float(max((new[c] - old[c]).abs().max() for c in ("logprob_A", "logprob_B")))
    else:
        out["same_texts"] = bool((new["text"] == old["text"]).all())
        out["max_abs_gen_logprob_diff"] = float((new["gen_logprob"] - old["gen_logprob"]).abs().max())
    return out


def main(argv: list[str] | None = None) -> dict:
    """Not part of the test run (except ``--tiny``). Prints a short table, then a JSON line::

        python benchmarks/bench_throughput.py --random gemma-3-270m --items 114 --reps 3 --threads 1  # CPU, float32
        python benchmarks/bench_throughput.py --random gemma-3-12b --device cuda --dtype bfloat16 --items 760 --batch 64
        python benchmarks/bench_throughput.py --model gemma-3-270m-gguf                    # real weights
        python benchmarks/bench_throughput.py --tiny                                      # seconds; what CI runs

    Measured with the first command (random Gemma 3 270M shape, float32, one thread of a shared
    2-core CPU; 114 items in 6 cells, 148 prompt tokens on average, 102 of them shared; batch 16;
    median of 3): bucketing 0.87 (1.15x faster), one forward for both labels 0.50 (1.99x), prefix
    reuse 0.48 in logprob mode (2.09x) and 0.58 in answer mode (1.72x); every comparison gave the
    same choices (answer mode: the same texts) and log-probabilities within 6e-6."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--random", choices=sorted(SHAPES), default=None, help="random weights of a real shape")
    src.add_argument("--tiny", action="store_true", help="a tiny random Gemma 3: the code path in seconds")
    src.add_argument("--model", default=None, help="anything evenhand's load_model accepts")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--items", type=int, default=None, help="items (whole matched cells; default 95, --tiny 38)")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--reps", type=int, default=None, help="paired repetitions (default 3, --tiny 1)")
    ap.add_argument("--order", choices=["shuffled", "cells"], default="shuffled")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    ap.add_argument("--max-new-tokens", type=int, default=8, help="answer mode's generation budget")
    ap.add_argument("--skip", default="", help="comma-separated comparisons to skip: bucket,labels,prefix,answer")
    a = ap.parse_args(argv)
    n_items = a.items if a.items is not None else (38 if a.tiny else 95)
    reps = a.reps if a.reps is not None else (1 if a.tiny else 3)
    skip = {s for s in a.skip.split(",") if s}
    unknown = skip - {"bucket", "labels", "prefix", "answer"}
    if unknown:
        ap.error(f"--skip: unknown comparison(s) {', '.join(sorted(unknown))}")
    if n_items < 2 or reps < 1:
        ap.error("--items must be at least 2 and --reps at least 1")
    device = a.device if a.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    # On a CPU shared with other work, --threads 1 gives steadier timings: with two threads on two busy cores, one
    # forward took 1.7x longer than with one, and varied twofold between repetitions.
    if a.threads is not None:
        torch.set_num_threads(a.threads)

    items = bench_items(n_items, order=a.order)
    if a.tiny:
        lm = tiny_model(items["prompt"].tolist(), device, a.dtype)
    elif a.random:
        lm = random_model(a.random, device, a.dtype, items["prompt"].tolist())
    else:
        lm = load_model(ModelSpec(a.model or "gemma-3-270m-gguf", device=device, dtype=a.dtype))

    last: dict[str, pd.DataFrame] = {}  # each version's latest table, for the agreement checks

    def version(key: str, mode: str, per_label: bool = False, **kw):
        opts = D.DecideOptions(mode=mode, batch_size=a.batch, progress=False, max_new_tokens=a.max_new_tokens, **kw)

        def f():
            if per_label:
                with scorer(per_label_logprob):
                    last[key] = D.decide(items, lm, opts)
            else:
                last[key] = D.decide(items, lm, opts)
        f.key = key
        return f

    # Every comparison decides the same items with the same batch size; the median of --reps paired repetitions
    # after one warm-up each (alternating, so drift in machine speed hits both sides):
    #   (a) bucket:   length-bucketed batches vs batches in input order (logprob mode, no prefix reuse);
    #   (b) labels:   logprob scoring both labels from one forward vs one forward per label (a per-label scorer
    #                 defined here, per_label_logprob, swapped into decide; bucketed batches);
    #   (c) prefix:   prefix reuse (batches in token order) vs none (length-bucketed batches), in logprob mode and
    #                 in answer mode (--max-new-tokens greedy tokens, default 8).
    # `ratio` is the new version's time over the previous version's (below 1: faster) and `speedup` its inverse.
    # Each comparison also checks that both sides give the same choices (and log-probabilities within float
    # rounding).
    plain = version("logprob", "logprob")
    comparisons = {  # name: (new version, previous version, mode, description)
        "bucket": (plain, version("logprob_in_order", "logprob", bucket=False), "logprob",
                   "length bucketing vs input order (logprob)"),
        "labels": (plain, version("logprob_per_label", "logprob", per_label=True), "logprob",
                   "both labels in one forward vs one per label"),
        "prefix": (version("logprob_reuse", "logprob", prefix_reuse=True), plain, "logprob",
                   "prefix reuse vs none (logprob)"),
        "answer": (version("answer_reuse", "answer", prefix_reuse=True), version("answer", "answer"), "answer",
                   f"prefix reuse vs none (answer, {a.max_new_tokens} new tokens)"),
    }
    special = not uses_chat_template(lm.tokenizer)
    texts = [model_text(lm.tokenizer, user_message(r)) for r in items.to_dict("records")]
    lengths = [len(x) for x in token_ids(lm.tokenizer, texts, special)]
    res = {"model": lm.name, "device": device, "dtype": lm.dtype, "threads": torch.get_num_threads(),
           "items": len(items), "cells": int(items["baseline_id"].nunique()), "order": a.order, "batch": a.batch,
           "reps": reps,
           "prompt_tokens_mean": sum(lengths) / len(lengths), "prompt_tokens_max": max(lengths)}
    for name, (new, old, mode, what) in comparisons.items():
        if name in skip:
            continue
        r = paired(new, old, reps)
        r.update(what=what, speedup=1.0 / r["ratio"], **_agreement(last[new.key], last[old.key], mode))
        if "n_shared_prefix_tokens" in last[new.key] and "reuse" in new.key:
            r["shared_prefix_tokens_mean"] = float(last[new.key]["n_shared_prefix_tokens"].mean())
        res[name] = r
    print(f"{res['model']} on {device} ({lm.dtype}): {res['items']} items in {res['cells']} cells ({a.order}), "
          f"{res['prompt_tokens_mean']:.0f} prompt tokens on average, batch {a.batch}, median of {reps}")
    print(f"{'change':<48} {'new s':>8} {'prev s':>8} {'ratio':>7} {'speedup':>8}  same choices")
    for name in comparisons:
        if name in res:
            r = res[name]
            print(f"{r['what']:<48} {r['variant_s']:>8.3f} {r['base_s']:>8.3f} {r['ratio']:>7.3f} "
                  f"{r['speedup']:>8.2f}  {r['same_choices']}")
    print(json.dumps(res))
    return res


if __name__ == "__main__":
    main()
