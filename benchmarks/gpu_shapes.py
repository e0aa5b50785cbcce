"""GPU benchmark at the real model shapes, on random weights built directly on the device."""
from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# published configs (config.json of each model on the Hugging Face hub)
SHAPES = {
    "qwen2.5-7b-instruct": dict(arch="qwen2", hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                                num_attention_heads=28, num_key_value_heads=4, vocab_size=152064,
                                max_position_embeddings=32768, rope_theta=1000000.0, rms_norm_eps=1e-6,
                                tie_word_embeddings=False),
    "gemma-3-12b-it": dict(arch="gemma3", hidden_size=3840, intermediate_size=15360, num_hidden_layers=48,
                           num_attention_heads=16, num_key_value_heads=8, head_dim=256, vocab_size=262208,
                           max_position_embeddings=131072, sliding_window=1024, rms_norm_eps=1e-6,
                           query_pre_attn_scalar=256, tie_word_embeddings=True),
}
TINY = {
    # head size 32: the least vLLM's CPU attention takes
    "qwen2-tiny": dict(arch="qwen2", hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=2,
                       num_key_value_heads=1, vocab_size=512, max_position_embeddings=2048, tie_word_embeddings=False),
    "gemma3-tiny": dict(arch="gemma3", hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                        num_attention_heads=2, num_key_value_heads=1, head_dim=32, vocab_size=512,
                        max_position_embeddings=2048, sliding_window=128, tie_word_embeddings=True),
}
PEAK_BF16_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0}


def build(shape: dict, device: str, dtype):
    import torch
    import transformers as tf
    kw = {k: v for k, v in shape.items() if k != "arch"}
    cfg = tf.Qwen2Config(**kw) if shape["arch"] == "qwen2" else tf.Gemma3TextConfig(**kw)
    cls = tf.Qwen2ForCausalLM if shape["arch"] == "qwen2" else tf.Gemma3ForCausalLM
    with torch.device(device):  # made in ``dtype`` on the device: no float32 copy inflating reserved memory
        torch.manual_seed(0)
        model = cls._from_config(cfg, dtype=dtype).eval()
    return model


def free_share(device: str, margin: float = 0.05, most: float = 0.8) -> float:
    """The share of the GPU vLLM may ask for: what is free now less ``margin``, at most ``most`` (vLLM refuses
    to start when it asks for more than is free, e.g. while memory of the Hugging Face model is still held)."""
    if not device.startswith("cuda"):
        return most
    import torch
    free, total = torch.cuda.mem_get_info()
    return round(max(0.05, min(most, free / total - margin)), 3)


def prompts(vocab: int, batch: int, length: int):
    """Token ids of real suite prompts (smoke subset, word hashes mapped into the vocabulary), equal length."""
    import torch

    from evenhand.suite.generate import stable_hash
    from evenhand.suite.subsets import iter_subset
    rows = []
    for item in iter_subset("smoke"):
        words = item["prompt"].split()
        ids = [stable_hash("tok", w) % (vocab - 10) + 10 for w in words] * 3
        rows.append(ids[:length])
        if len(rows) == batch:
            break
    return torch.tensor(rows)


def flops_per_token(model) -> float:
    """2 x non-embedding parameters (matmul FLOPs of a forward per token, attention scores excluded)."""
    n = sum(p.numel() for name, p in model.named_parameters() if "embed" not in name)
    return 2.0 * n


def timed(fn, reps: int, sync) -> float:
    fn()
    sync()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        sync()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def bench_shape(name: str, shape: dict, device: str, batch: int, length: int, reps: int, gen_prompts: int = 0,
                gen_tokens: int = 0) -> dict:
    import torch

    from steering.hooks import Add, steer
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    t0 = time.perf_counter()
    model = build(shape, device, dtype)
    build_s = time.perf_counter() - t0
    ids = prompts(shape["vocab_size"], batch, length).to(device)
    mask = torch.ones_like(ids)
    n_tok = ids.numel()
    fpt = flops_per_token(model)
    out = {"shape": name, "batch": batch, "prompt_tokens": length, "build_s": round(build_s, 2)}

    def plain():
        with torch.inference_mode():
            model(input_ids=ids, attention_mask=mask, logits_to_keep=1)

    from nnsight import TransformersModel

    from evenhand.running.activations import trace_body
    from evenhand.models.sites import residual_sites, resolve
    from evenhand.models.tiny import build_tokenizer
    traced = TransformersModel(model, tokenizer=build_tokenizer(["a b"]))  # ids are passed directly
    n_layers = len(model.model.layers)  # a count, not a reference that would keep the weights alive after del
    resolved = [resolve(model, s) for s in residual_sites(model)]
    pos = (mask.cumsum(-1) - 1).clamp(min=0)

    def cached():  # the activation cache's own trace body: embed + every resid_post at the last token
        with torch.inference_mode():
            with traced.trace(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=1):
                saved = trace_body(traced, resolved, None)
        return saved

    vec = torch.randn(shape["hidden_size"], device=device, dtype=dtype)
    edits = {f"blocks.{i}.resid_post": Add(vec, 0.1) for i in range(n_layers)}

    def steered():
        with steer(model, edits), torch.inference_mode():
            model(input_ids=ids, attention_mask=mask, logits_to_keep=1)

    peak = None
    if device.startswith("cuda"):
        gpu = torch.cuda.get_device_name()
        peak = next((v for k, v in PEAK_BF16_TFLOPS.items() if k in gpu), None)
        out["device_name"] = gpu
    for key, fn in (("plain", plain), ("cache_all_layers", cached), ("steering_all_layers", steered)):
        s = timed(fn, reps, sync)
        out[f"{key}_s"] = round(s, 4)
        out[f"{key}_tok_per_s"] = round(n_tok / s, 1)
        if peak:
            out[f"{key}_mfu"] = round(fpt * n_tok / s / (peak * 1e12), 4)
    out["cache_over_plain"] = round(out["cache_all_layers_s"] / out["plain_s"], 3)
    out["steering_over_plain"] = round(out["steering_all_layers_s"] / out["plain_s"], 3)
    if gen_prompts:
        gen_ids = prompts(shape["vocab_size"], gen_prompts, length).to(device)
        hf_generate(model, gen_ids[:batch], batch, 2, sync)  # warm-up
        s = hf_generate(model, gen_ids, batch, gen_tokens, sync)
        out.update(gen_prompts=gen_prompts, gen_tokens=gen_tokens, hf_generate_s=round(s, 3),
                   hf_gen_tok_per_s=round(gen_prompts * gen_tokens / s, 1))
    del model, traced, plain, cached, steered
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return out


def hf_generate(model, ids, batch: int, gen: int, sync) -> float:
    """Seconds Hugging Face ``generate`` takes for exactly ``gen`` greedy tokens per prompt, in batches."""
    import torch
    t = time.perf_counter()
    with torch.inference_mode():
        for i in range(0, len(ids), batch):
            chunk = ids[i:i + batch]
            model.generate(input_ids=chunk, attention_mask=torch.ones_like(chunk), max_new_tokens=gen,
                           min_new_tokens=gen, do_sample=False, pad_token_id=0)
    sync()
    return time.perf_counter() - t


def bench_vllm(name: str, shape: dict, device: str, ids, gen: int) -> dict:
    """vLLM (the engine's settings: greedy, prefix caching, eager on CPU) on random weights of ``shape``:
    generated tokens per second for ``ids`` (every prompt at once), start-up excluded."""
    import tempfile

    import transformers as tf
    try:
        from vllm import LLM, SamplingParams
        from vllm.inputs import TokensPrompt
    except ImportError as exc:
        return {"shape": name, "vllm": f"not installed ({exc.__class__.__name__})"}
    if device == "cpu":
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    kw = {k: v for k, v in shape.items() if k != "arch"}
    cfg = tf.Qwen2Config(**kw) if shape["arch"] == "qwen2" else tf.Gemma3TextConfig(**kw)
    cfg.architectures = ["Qwen2ForCausalLM" if shape["arch"] == "qwen2" else "Gemma3ForCausalLM"]
    with tempfile.TemporaryDirectory() as d:
        cfg.save_pretrained(d)
        t = time.perf_counter()
        llm = LLM(model=d, load_format="dummy", skip_tokenizer_init=True, enable_prefix_caching=True, seed=0,
                  dtype="bfloat16" if device.startswith("cuda") else "float32", enforce_eager=device == "cpu",
                  max_model_len=ids.shape[1] + gen + 16, gpu_memory_utilization=free_share(device))
        start = time.perf_counter() - t
        params = SamplingParams(temperature=0.0, max_tokens=gen, min_tokens=gen, ignore_eos=True, detokenize=False)
        prompts = [TokensPrompt(prompt_token_ids=row) for row in ids.tolist()]
        llm.generate(prompts[:2], params, use_tqdm=False)  # warm-up
        t = time.perf_counter()
        outs = llm.generate(prompts, params, use_tqdm=False)
        s = time.perf_counter() - t
        engine = getattr(llm, "llm_engine", None)
        core = getattr(engine, "engine_core", None)
        if core is not None and hasattr(core, "shutdown"):
            core.shutdown()
        del llm
    n = sum(len(o.outputs[0].token_ids) for o in outs)
    return {"shape": name, "vllm_start_s": round(start, 1), "vllm_s": round(s, 3),
            "vllm_gen_tok_per_s": round(n / s, 1)}


def bench_probes(layers: int, dim: int, rows: int, device: str, sk_layers: int) -> dict:
    import numpy as np

    from probes.logistic import ProbeOptions, fit_sites
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, rows)
    groups = np.repeat(np.arange(rows // 8 + 1), 8)[:rows]
    Xs = [(rng.normal(size=(rows, dim)) + np.outer(2 * y - 1, rng.normal(size=dim) / np.sqrt(dim)) * l / layers)
          .astype(np.float32) for l in range(layers)]
    t = time.perf_counter()
    rt = fit_sites(Xs, y, groups, ProbeOptions(solver="torch", device=device))
    t_torch = time.perf_counter() - t
    k = min(sk_layers, layers)
    t = time.perf_counter()
    rs = fit_sites(Xs[:k], y, groups, ProbeOptions(solver="sklearn"))
    t_sk = (time.perf_counter() - t) * layers / k
    diff = max(abs(((a.prob >= .5) == y).mean() - ((b.prob >= .5) == y).mean()) for a, b in zip(rt[:k], rs))
    return {"probe_layers": layers, "probe_dim": dim, "probe_rows": rows, "torch_s": round(t_torch, 2),
            "sklearn_s_extrapolated": round(t_sk, 2), "sklearn_layers_measured": k,
            "ratio_sklearn_over_torch": round(t_sk / t_torch, 2), "max_accuracy_diff_points": round(100 * diff, 3)}


def main() -> None:
    """For each shape (Qwen2.5-7B-Instruct and Gemma-3-12B-it, numbers from their published configs,
    :data:`SHAPES`), on suite-length prompts (real smoke-subset prompts, token ids mapped into the vocabulary):

      - prefill tokens/s and model FLOPs utilisation (MFU) of a plain forward (``logits_to_keep=1``);
      - the same with every layer's residual saved at the decision token (the activation cache's nnsight trace);
      - the same with a steering hook on every layer (``steering.hooks.steer`` with an Add edit);
      - a full probe sweep (every layer, nested grouped CV) with the torch engine on the device against
        scikit-learn on CPU (``--probe-layers`` layers of scikit-learn, extrapolated to all layers);
      - greedy generation of ``--gen-tokens`` tokens for ``--gen-prompts`` prompts: Hugging Face
        ``generate`` (batches of ``--batch``) against the vLLM engine (every prompt at once, random
        weights via vLLM's ``load_format="dummy"``, prefix caching on), generated tokens per second of
        each (when vLLM is installed; the ``vllm`` extra on CPU, ``vllm`` on a GPU).

    One script, under 5 minutes on one H200 before the generation comparison was added (its time on a GPU
    is not measured yet: no GPU was lent to that change); prints a short table last and writes every number to
    ``OUT/gpu_shapes.json`` (``--out``, or ``$OUT`` when set). ``--tiny`` runs the same code path with small
    shapes on CPU so that CI keeps it working::

        python benchmarks/gpu_shapes.py                 # on a GPU machine
        python benchmarks/gpu_shapes.py --tiny          # anywhere, seconds
    """
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiny", action="store_true", help="small shapes on CPU (the same code path)")
    ap.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--length", type=int, default=256, help="prompt tokens (suite prompts are 150-250)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--probe-rows", type=int, default=2000)
    ap.add_argument("--probe-sklearn-layers", type=int, default=2)
    ap.add_argument("--gen-prompts", type=int, default=256, help="prompts of the generation comparison (0: none)")
    ap.add_argument("--gen-tokens", type=int, default=128, help="greedy tokens generated per prompt")
    a = ap.parse_args()
    import torch
    device = "cpu" if a.tiny or not torch.cuda.is_available() else "cuda"
    if not a.tiny and device == "cpu":
        sys.exit("no CUDA device: run with --tiny on CPU")
    shapes = TINY if a.tiny else SHAPES
    results = {"device": device, "torch": torch.__version__, "shapes": [], "probes": [], "vllm": []}
    gen_prompts, gen_tokens = (8, 8) if a.tiny else (a.gen_prompts, a.gen_tokens)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)

    def attempt(key: str, name: str, fn) -> dict:
        """Run one measurement; a failure is recorded (its type and message), not fatal; the JSON is rewritten
        after each one, so a run cut short keeps what it measured."""
        try:
            r = fn()
        except Exception as exc:  # noqa: BLE001 - the next measurement still runs
            r = {"shape": name, "error": f"{type(exc).__name__}: {exc}"[:2000]}
            gc.collect()
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
        results[key].append(r)
        (out / "gpu_shapes.json").write_text(json.dumps(results, indent=2))
        return r

    for name, shape in shapes.items():
        length = 64 if a.tiny else a.length
        r = attempt("shapes", name, lambda: bench_shape(name, shape, device, 2 if a.tiny else a.batch, length,
                                                        2 if a.tiny else a.reps, gen_prompts, gen_tokens))
        if gen_prompts:
            v = attempt("vllm", name, lambda: bench_vllm(name, shape, device,
                                                          prompts(shape["vocab_size"], gen_prompts, length),
                                                          gen_tokens))
            if "vllm_gen_tok_per_s" in v and "hf_gen_tok_per_s" in r:
                v["vllm_over_hf_gen"] = round(v["vllm_gen_tok_per_s"] / r["hf_gen_tok_per_s"], 2)
                (out / "gpu_shapes.json").write_text(json.dumps(results, indent=2))
        rows = 200 if a.tiny else a.probe_rows
        attempt("probes", name, lambda: {"shape": name, **bench_probes(shape["num_hidden_layers"] + 1,
                                                                       shape["hidden_size"], rows, device,
                                                                       a.probe_sklearn_layers)})
    print(f"\n{'shape':<22}{'plain tok/s':>12}{'MFU':>7}{'cache x':>9}{'steer x':>9}{'probe sk/torch':>16}")
    for r, p in zip(results["shapes"], results["probes"]):
        if "error" in r or "error" in p:
            print(f"{r['shape']:<22}failed: {r.get('error') or p.get('error')}")
            continue
        mfu = r.get("plain_mfu")
        print(f"{r['shape']:<22}{r['plain_tok_per_s']:>12,.0f}{'-' if mfu is None else f'{mfu:.2f}':>7}"
              f"{r['cache_over_plain']:>9.2f}{r['steering_over_plain']:>9.2f}{p['ratio_sklearn_over_torch']:>16.2f}")
    for v in results["vllm"]:
        print(f"{v['shape']:<22}generation: " + (f"vLLM {v['vllm_gen_tok_per_s']:,.0f} tok/s, "
                                               f"{v['vllm_over_hf_gen']:.2f}x HF generate" if "vllm_over_hf_gen" in v
                                               else v.get("vllm") or v.get("error", "no ratio")))
    print(f"full numbers: {out / 'gpu_shapes.json'}")


if __name__ == "__main__":
    main()
