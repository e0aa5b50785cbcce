"""The Hugging Face engine against the vLLM engine on the same items, and a paper estimate of a
FairStress-Core run on one H200.

Measured (CPU here, a GPU when one is lent): the same items decided by both engines in answer and
reasoning modes; items per second of each (model load excluded, after one warm-up batch each),
their ratio, and the agreement of choices, texts and ``gen_logprob``. Hugging Face runs
length-bucketed batches of ``--batch``; vLLM gets every item at once (one shard)."""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

CORE_ITEMS = 49_920
H200 = {"peak_bf16_tflops": 989.0, "hbm_tb_per_s": 4.8, "memory_gib": 141}
ASSUME = {"prefill_mfu": 0.45, "decode_mfu": 0.45, "bandwidth_utilisation": 0.7, "concurrent_sequences": 256,
          "block_tokens": 16, "answer_generated_tokens": 8, "reasoning_generated_tokens": (256, 512)}


def bench_items(n: int):
    """``n`` smoke items spread over the subset (every k-th), the same for both engines."""
    import pandas as pd

    from evenhand.suite.subsets import iter_subset
    items = pd.DataFrame(list(iter_subset("smoke", 0)))
    return items.iloc[::max(1, len(items) // n)].head(n).reset_index(drop=True)


def model_dir(a, work: Path) -> str:
    """A local safetensors checkpoint for both engines: --tiny builds one, a GGUF model is dequantised."""
    if a.tiny:
        from evenhand.models.tiny import save_tiny_model
        texts = bench_items(1024)["prompt"].tolist()
        return str(save_tiny_model(work / "tiny-gemma3-h32", "gemma3", texts, seed=3, hidden=64, heads=2, kv_heads=1))
    from evenhand.models.loading import locate, resolve_spec
    spec = resolve_spec(a.model)
    where, gguf, _ = locate(spec)
    if not gguf:
        return where
    out = work / f"{Path(gguf).stem}-float32"
    if not (out / "config.json").exists():
        from evenhand.engine.vllm_engine import save_dequantized
        save_dequantized(spec, out)
    return str(out)


def timed_decide(items, lm, opts) -> tuple:
    from evenhand.running.decisions import decide
    t = time.perf_counter()
    table = decide(items, lm, opts)
    return table, time.perf_counter() - t


def measure(a) -> dict:
    """Both engines on the same items in answer and reasoning modes (module docstring)."""
    import torch

    from evenhand.running.decisions import DecideOptions
    from evenhand.engine.vllm_engine import load_vllm
    from evenhand.models.loading import load_model
    if a.threads:
        torch.set_num_threads(a.threads)
    work = Path(a.work or tempfile.mkdtemp(prefix="bench-engines-"))
    work.mkdir(parents=True, exist_ok=True)
    where = model_dir(a, work)
    items = bench_items(a.items)
    load_avg = [os.getloadavg()]
    t = time.perf_counter()
    hf_lm = load_model(where)
    hf_load = time.perf_counter() - t
    t = time.perf_counter()
    vm = load_vllm(where, max_model_len=a.max_model_len)
    vllm_load = time.perf_counter() - t
    out = {"model": where, "device": hf_lm.device, "dtype": hf_lm.dtype, "items": len(items), "hf_batch": a.batch,
           "hf_load_s": round(hf_load, 2), "vllm_load_s": round(vllm_load, 2), "modes": {}}
    for mode, budget in (("answer", a.answer_tokens), ("reasoning", a.reasoning_tokens)):
        kw = dict(mode=mode, max_new_tokens=budget, reasoning_max_new_tokens=budget, progress=False)
        hf_opts, vl_opts = DecideOptions(batch_size=a.batch, **kw), DecideOptions(batch_size=len(items), engine="vllm", **kw)
        warm = items.head(min(4, len(items)))
        timed_decide(warm, hf_lm, hf_opts)
        timed_decide(warm, vm, vl_opts)
        hf, hf_s = timed_decide(items, hf_lm, hf_opts)
        vl, vl_s = timed_decide(items, vm, vl_opts)
        out["modes"][mode] = {
            "max_new_tokens": budget, "hf_items_per_s": round(len(items) / hf_s, 3),
            "vllm_items_per_s": round(len(items) / vl_s, 3), "vllm_over_hf_speed": round(hf_s / vl_s, 3),
            "choice_agreement": float((hf["choice"].fillna("-") == vl["choice"].fillna("-")).mean()),
            "text_agreement": float((hf["text"] == vl["text"]).mean()),
            "max_abs_gen_logprob_diff": float((hf["gen_logprob"] - vl["gen_logprob"]).abs().max()),
            "mean_new_tokens": float(vl["n_new_tokens"].mean()), "mean_prompt_tokens": float(vl["n_prompt_tokens"].mean())}
        load_avg.append(os.getloadavg())
    vm.close()
    out["load_average_1_5_15"] = [[round(x, 2) for x in la] for la in load_avg]
    out["cpu_count"] = os.cpu_count()
    return out


def core_token_counts(tokenizer, limit: int | None = None) -> dict:
    """Mean prompt tokens of the core subset per mode (chat template as the engine applies it), and the share
    of prompt tokens a block-level prefix cache must compute, items in token order (as the vLLM engine's shards
    are): a block is computed once per distinct (prefix, block) chain."""
    from evenhand.engine.batching import token_ids
    from evenhand.vocab.prompts import model_text, uses_chat_template, user_message
    from evenhand.suite.subsets import iter_subset
    rows = list(iter_subset("core", 0))[:limit]
    special = not uses_chat_template(tokenizer)
    block = ASSUME["block_tokens"]
    out = {"items": len(rows)}
    for mode in ("answer", "reasoning"):
        ids = token_ids(tokenizer, [model_text(tokenizer, user_message(r, mode)) for r in rows], special)
        total = sum(len(s) for s in ids)
        out[mode] = {"mean_prompt_tokens": round(total / len(ids), 1), "computed_share_with_prefix_cache":
                     round(computed_share(ids, block), 4)}
    return out


def computed_share(ids: list[list[int]], block: int) -> float:
    """The share of prompt tokens a block-level prefix cache (vLLM's automatic prefix caching, unbounded) must
    compute: a prompt's leading full blocks whose whole prefix chain ran before are read from the cache."""
    seen: set = set()
    computed = 0
    for seq in sorted(ids):
        h: tuple | int = ()
        cached = 0
        for b in range(len(seq) // block):
            h = hash((h, tuple(seq[b * block:(b + 1) * block])))
            if h in seen and cached == b:
                cached += 1
            seen.add(h)
        computed += len(seq) - cached * block
    return computed / max(1, sum(len(s) for s in ids))


def shape_numbers(shape: dict) -> dict:
    """Parameters (non-embedding, LM head) and KV-cache bytes per token (bf16) of a published shape."""
    h, layers, heads, kv = (shape["hidden_size"], shape["num_hidden_layers"], shape["num_attention_heads"],
                            shape["num_key_value_heads"])
    hd = shape.get("head_dim", h // heads)
    per_layer = h * heads * hd * 2 + h * kv * hd * 2 + 3 * h * shape["intermediate_size"]
    body = layers * per_layer
    head = shape["vocab_size"] * h
    weights = body + head * (1 if shape.get("tie_word_embeddings") else 2)
    return {"body_params": body, "lm_head_params": head, "weight_bytes": 2 * weights,
            "kv_bytes_per_token": 2 * layers * kv * hd * 2, "layers": layers, "heads": heads, "head_dim": hd}


def estimate(name: str, shape: dict, counts: dict) -> dict:
    """Minutes of a FairStress-Core run on one H200 on the vLLM engine (assumptions in ASSUME and H200).

    Estimated (on paper, no GPU needed): a FairStress-Core run (49,920 items) on one H200 in bf16 for
    Gemma-3-12B-it and Qwen2.5-7B-Instruct on the vLLM engine, from the prompt token counts measured
    here with the real Gemma-3 tokenizer (chat template on; Qwen's own tokenizer is not on this
    machine, so its counts are Gemma's) and the share of prompt tokens a block-level prefix cache
    (16-token blocks, the cache holding what neighbouring shards share) must still compute
    (:func:`core_token_counts`). Every assumption (peak FLOP/s, bandwidth, utilisation, concurrency, generated
    tokens) is printed with the estimate and written to the JSON."""
    s = shape_numbers(shape)
    peak, bw = H200["peak_bf16_tflops"] * 1e12, H200["hbm_tb_per_s"] * 1e12 * ASSUME["bandwidth_utilisation"]
    conc = ASSUME["concurrent_sequences"]
    out = {}
    for mode in ("answer", "reasoning"):
        p = counts[mode]["mean_prompt_tokens"]
        share = counts[mode]["computed_share_with_prefix_cache"]
        gens = (ASSUME["answer_generated_tokens"],) if mode == "answer" else ASSUME["reasoning_generated_tokens"]
        for g in gens:
            ctx = p + g / 2  # mean context while decoding
            attn = 4 * s["layers"] * s["heads"] * s["head_dim"] * ctx  # score and value FLOPs per token
            prefill_flops = CORE_ITEMS * (p * share * (2 * s["body_params"] + attn) + 2 * s["lm_head_params"])
            prefill = prefill_flops / (peak * ASSUME["prefill_mfu"])
            step_mem = (s["weight_bytes"] + conc * ctx * s["kv_bytes_per_token"]) / bw
            step_compute = conc * (2 * (s["body_params"] + s["lm_head_params"]) + attn) / (peak * ASSUME["decode_mfu"])
            steps = CORE_ITEMS * g / conc
            decode = steps * max(step_mem, step_compute)
            no_cache = prefill / share + decode
            out[f"{mode}_gen{g}"] = {"minutes": round((prefill + decode) / 60, 1),
                                     "minutes_without_prefix_cache": round(no_cache / 60, 1),
                                     "prefill_minutes": round(prefill / 60, 1), "decode_minutes": round(decode / 60, 1),
                                     "decode_bound": "memory" if step_mem > step_compute else "compute"}
    kv_fit = (H200["memory_gib"] * 2**30 * 0.9 - s["weight_bytes"]) / s["kv_bytes_per_token"]
    return {"model": name, **{k: s[k] for k in ("body_params", "weight_bytes", "kv_bytes_per_token")},
            "kv_tokens_that_fit": int(kv_fit), "runs": out}


def main(argv: list[str] | None = None) -> dict:
    """Measure both engines (:func:`measure`) and estimate the H200 run (:func:`estimate`)::

        python benchmarks/bench_engines.py                              # Gemma-3 270M (demo extra), dequantised
        python benchmarks/bench_engines.py --model /path/to/checkpoint  # any local safetensors checkpoint
        python benchmarks/bench_engines.py --tiny                       # a tiny random Gemma3: the code path
        python benchmarks/bench_engines.py --estimate-only              # the H200 estimate only

    Needs the ``vllm`` extra for the measured part. Prints a table, then one JSON line (also written to
    ``--out``/bench_engines.json)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="gemma-3-270m-gguf", help="what load_model accepts; GGUF is dequantised")
    ap.add_argument("--tiny", action="store_true", help="a tiny random Gemma3 (head size 32): the code path")
    ap.add_argument("--items", type=int, default=48)
    ap.add_argument("--batch", type=int, default=16, help="Hugging Face's batch size")
    ap.add_argument("--answer-tokens", type=int, default=8)
    ap.add_argument("--reasoning-tokens", type=int, default=64)
    ap.add_argument("--max-model-len", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads of the HF engine")
    ap.add_argument("--work", default=None, help="where a dequantised checkpoint is kept (default: a temp dir)")
    ap.add_argument("--estimate-only", action="store_true")
    ap.add_argument("--no-estimate", action="store_true")
    ap.add_argument("--tokenizer-model", default="gemma-3-270m-gguf", help="whose tokenizer counts the core prompts")
    ap.add_argument("--core-limit", type=int, default=None, help="count only the first N core items")
    ap.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"))
    a = ap.parse_args(argv)
    result: dict = {}
    if not a.estimate_only:
        result["measured"] = m = measure(a)
        print(f"{m['model']} on {m['device']} ({m['dtype']}), {m['items']} items; load: HF {m['hf_load_s']} s, "
              f"vLLM {m['vllm_load_s']} s; load average {m['load_average_1_5_15'][0]} -> {m['load_average_1_5_15'][-1]}"
              f" on {m['cpu_count']} cores")
        print(f"{'mode':<11}{'new tok':>8}{'HF it/s':>10}{'vLLM it/s':>11}{'speed x':>9}{'choices':>9}{'texts':>7}"
              f"{'max|dlp|':>10}")
        for mode, r in m["modes"].items():
            print(f"{mode:<11}{r['max_new_tokens']:>8}{r['hf_items_per_s']:>10.2f}{r['vllm_items_per_s']:>11.2f}"
                  f"{r['vllm_over_hf_speed']:>9.2f}{r['choice_agreement']:>9.1%}{r['text_agreement']:>7.0%}"
                  f"{r['max_abs_gen_logprob_diff']:>10.1e}")
    if not a.no_estimate:
        from gpu_shapes import SHAPES

        from evenhand.models.loading import preset_tokenizer
        counts = core_token_counts(preset_tokenizer(a.tokenizer_model), a.core_limit)
        est = [estimate(n, SHAPES[n], counts) for n in ("gemma-3-12b-it", "qwen2.5-7b-instruct")]
        result["estimate"] = {"core_tokens": counts, "hardware": H200, "assumptions": ASSUME, "models": est,
                              "note": "paper estimate, not a measurement; Qwen's prompt counts are Gemma's"}
        print(f"\nFairStress-Core ({CORE_ITEMS:,} items) on one H200, vLLM engine, bf16 -- an estimate on paper.")
        print(f"core prompts (Gemma-3 tokenizer, {counts['items']:,} items): " + "; ".join(
            f"{md} {counts[md]['mean_prompt_tokens']} tokens, {counts[md]['computed_share_with_prefix_cache']:.0%} "
            f"computed with the prefix cache" for md in ("answer", "reasoning")))
        print(f"assumptions: {json.dumps(ASSUME)}; H200 {json.dumps(H200)}")
        for e in est:
            print(f"  {e['model']}: " + "; ".join(f"{k} {v['minutes']} min ({v['decode_bound']}-bound decode; "
                                                 f"{v['minutes_without_prefix_cache']} without the prefix cache)"
                                                 for k, v in e["runs"].items()))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_engines.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
