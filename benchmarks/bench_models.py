"""Speed of EvenHand's model stages as ratios against bare Hugging Face baselines.

On one batch of real suite prompts (the smoke subset's longest items), median
of ``--reps`` repetitions after a warm-up:

  (a) cache: every layer's residual (embed + each resid_post) at the decision token,
      read in one nnsight trace, vs a plain forward of the same padded batch
      (both with logits_to_keep=1; the full-logits forward is printed too);
      and the whole cache stage per batch (tokenising, tracing, copying to host);
  (b) answer mode (evenhand.running.decisions, 8 greedy tokens, parsing) vs a bare batched
      ``generate`` loop (tokenise, generate 8 greedy tokens, decode);
  (c) logprob mode (both labels scored) vs a plain forward with logits_to_keep=1."""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evenhand.running.activations import CacheOptions, nnsight_runner, trace_body  # noqa: E402
from evenhand.running.decisions import DecideOptions, decide  # noqa: E402
from evenhand.engine.batching import left_pad  # noqa: E402
from evenhand.models.loading import LoadedModel, ModelSpec, load_model  # noqa: E402
from evenhand.models.sites import expand, resolve  # noqa: E402
from evenhand.vocab.prompts import model_text, user_message, uses_chat_template  # noqa: E402

SHAPES = {
    "gemma-3-270m": dict(arch="gemma3", hidden_size=640, intermediate_size=2048, num_hidden_layers=18,
                         num_attention_heads=4, num_key_value_heads=1, head_dim=256, vocab_size=262144),
    "gemma-3-12b": dict(arch="gemma3", hidden_size=3840, intermediate_size=15360, num_hidden_layers=48,
                        num_attention_heads=16, num_key_value_heads=8, head_dim=256, vocab_size=262208),
    "qwen2.5-7b": dict(arch="qwen2", hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                       num_attention_heads=28, num_key_value_heads=4, vocab_size=152064),
}


def random_model(shape: str, device: str, dtype: str, texts: list[str]) -> LoadedModel:
    """A random-weight model of a real shape with the suite's word-level tokenizer (ids < its vocab)."""
    import transformers as tf

    from evenhand.models.tiny import build_tokenizer
    s = dict(SHAPES[shape])
    arch = s.pop("arch")
    tok = build_tokenizer(texts, extra=["A", "B"])
    common = dict(s, max_position_embeddings=4096, pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
                  eos_token_id=[tok.eos_token_id, tok.convert_tokens_to_ids("<end_of_turn>")])
    cfg = tf.Gemma3TextConfig(sliding_window=512, **common) if arch == "gemma3" else tf.Qwen2Config(**common)
    cls = tf.Gemma3ForCausalLM if arch == "gemma3" else tf.Qwen2ForCausalLM
    torch_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype]
    with torch.device(device):
        model = cls(cfg).to(torch_dtype).eval()
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = cfg.eos_token_id
    return LoadedModel(model=model, tokenizer=tok, spec=ModelSpec(f"random:{shape}"), name=f"random:{shape}",
                       source="random weights", device=device, dtype=dtype)


def _once(fn) -> float:
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def paired(variant, base, reps: int) -> dict:
    """Alternate base and variant (after one warm-up each) so drift in machine speed hits both;
    the ratio is the median of the per-pair ratios."""
    variant(), base()
    tv, tb = [], []
    for _ in range(reps):
        tb.append(_once(base))
        tv.append(_once(variant))
    return {"variant_s": statistics.median(tv), "base_s": statistics.median(tb),
            "ratio": statistics.median(v / b for v, b in zip(tv, tb))}


def main() -> None:
    """Not part of the test run. Prints a JSON line with every timing and ratio::

        python benchmarks/bench_models.py --model gemma-3-270m-gguf        # real weights (demo extra)
        python benchmarks/bench_models.py --random gemma-3-270m            # random weights, real shape
        python benchmarks/bench_models.py --random qwen2.5-7b --device cuda --dtype bfloat16
    """
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=None, help="anything evenhand's load_model accepts")
    ap.add_argument("--random", choices=sorted(SHAPES), default=None)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    import pandas as pd

    from evenhand.suite.subsets import iter_subset
    items = pd.DataFrame(list(iter_subset("smoke", 0)))
    device = a.device if a.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    if a.random:
        lm = random_model(a.random, device, a.dtype, items["prompt"].tolist())
    else:
        lm = load_model(ModelSpec(a.model or "gemma-3-270m-gguf", device=device, dtype=a.dtype))
    special = not uses_chat_template(lm.tokenizer)
    texts_all = [model_text(lm.tokenizer, user_message(r)) for r in items.to_dict("records")]
    lengths = [len(lm.tokenizer(t, add_special_tokens=special)["input_ids"]) for t in texts_all]
    pick = sorted(range(len(texts_all)), key=lambda i: -lengths[i])[: a.batch]
    batch_items = items.iloc[pick].reset_index(drop=True)
    texts = [texts_all[i] for i in pick]
    enc = [lm.tokenizer(t, add_special_tokens=special)["input_ids"] for t in texts]
    ids, mask, pos = left_pad(enc, lm.tokenizer.pad_token_id, lm.model.device)
    model = lm.model
    res = {"model": lm.name, "device": device, "dtype": lm.dtype, "batch": a.batch, "reps": a.reps,
           "prompt_tokens": [len(e) for e in enc]}

    def plain(keep):
        def f():
            with torch.inference_mode():
                model(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=keep)
        return f

    from nnsight import TransformersModel
    traced = TransformersModel(model, tokenizer=lm.tokenizer)
    sites = [resolve(model, s) for s in expand(model, "residual")]

    def trace_only():
        with torch.inference_mode():
            with traced.trace(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=1):
                saved = trace_body(traced, sites, None)
        return saved

    runner = nnsight_runner(lm, texts, batch_items.to_dict("records"), special, sites, CacheOptions())

    def cache_stage():
        with torch.inference_mode():
            runner(list(range(len(texts))))

    def bare_generate():
        tok = lm.tokenizer
        e = tok(texts, add_special_tokens=special, padding=True, return_tensors="pt").to(model.device)
        with torch.inference_mode():
            out = model.generate(**e, max_new_tokens=8, do_sample=False, temperature=None, top_p=None, top_k=None,
                                 pad_token_id=tok.pad_token_id)
        tok.batch_decode(out[:, e["input_ids"].shape[1]:], skip_special_tokens=True)

    def answer_mode():
        decide(batch_items, lm, DecideOptions(mode="answer", batch_size=a.batch, progress=False))

    def logprob_mode():
        decide(batch_items, lm, DecideOptions(mode="logprob", batch_size=a.batch, progress=False))

    pairs = {
        "cache_trace_vs_plain_keep1": (trace_only, plain(1)),
        "cache_stage_vs_plain_keep1": (cache_stage, plain(1)),
        "answer_vs_bare_generate": (answer_mode, bare_generate),
        "logprob_vs_plain_keep1": (logprob_mode, plain(1)),
        "full_logits_vs_keep1": (plain(0), plain(1)),
    }
    for name, (variant, base) in pairs.items():
        r = paired(variant, base, a.reps)
        res[name] = r
        res[f"ratio_{name}"] = r["ratio"]
    for k, v in res.items():
        if k.startswith("ratio"):
            print(f"{k:<40} {v:.3f}")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
