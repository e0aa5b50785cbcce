"""Engine openai: what a subset costs behind an API (requests, prompt tokens, the output budget) and the engine's
rate against the project's own server (evenhand.engine.serve) serving the fair organism.

    python benchmarks/bench_api.py cost --subset core      # requests and tokens (docs/guide/api.md, "Evaluate a model behind an API")
    python benchmarks/bench_api.py rate --items 192         # items/s at concurrency 1 and 4

Prompt tokens are counted offline with two tokenizers: Gemma 3's (the real 262k-token vocabulary of the `demo`
extra's Gemma 3 270M GGUF, with Gemma 3's chat template) and the fair organism's (a word-level vocabulary; its own
chat template). An endpoint bills with its own tokenizer: take these as the order of magnitude.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evenhand.running.decisions import DecideOptions  # noqa: E402
from evenhand.vocab.prompts import chat_text, user_message  # noqa: E402


def tokenizers() -> dict:
    """name -> tokenizer with its chat template: Gemma 3 270M's (GGUF, offline) and the fair organism's."""
    from evenhand.models.loading import preset_tokenizer
    return {"gemma-3 (262k vocabulary, Gemma 3 chat template)": preset_tokenizer("gemma-3-270m-gguf"),
            "evenhand-organism-fair (word-level, its chat template)": preset_tokenizer("evenhand-organism-fair")}


def cost(subset: str, seed: int = 0) -> dict:
    """Items, distinct requests (items sharing a prompt are asked once) and prompt tokens of ``subset`` in
    answer and reasoning modes, per tokenizer; the output budget is max_tokens per request."""
    from evenhand.suite.subsets import iter_subset
    items = list(iter_subset(subset, seed))
    opts = DecideOptions()
    out = {"subset": subset, "items": len(items), "modes": {}}
    toks = tokenizers()
    for mode, budget in (("answer", opts.max_new_tokens), ("reasoning", opts.reasoning_max_new_tokens)):
        prompts = sorted({user_message(it, mode) for it in items})
        row = {"requests": len(prompts), "max_tokens_per_request": budget,
               "output_tokens_at_most": len(prompts) * budget, "prompt_tokens": {}}
        for name, tok in toks.items():
            texts = [chat_text(tok, [{"role": "user", "content": p}]) for p in prompts]
            n = sum(len(ids) for ids in tok(texts, add_special_tokens=False)["input_ids"])
            row["prompt_tokens"][name] = {"total": n, "per_request": round(n / len(prompts), 1)}
        out["modes"][mode] = row
    return out


def rate(n_items: int, concurrency: tuple[int, ...] = (1, 4)) -> dict:
    """Items/s of engine openai deciding ``n_items`` smoke items (answer mode, distinct prompts, no cache hits)
    through :class:`~evenhand.engine.serve.ChatServer` serving the fair organism on loopback, per concurrency."""
    import pandas as pd
    from evenhand.running.decisions import decide
    from evenhand.engine.openai_engine import OpenAIOptions, load_api
    from evenhand.engine.serve import ChatServer
    from evenhand.models.loading import load_model
    from evenhand.suite.subsets import iter_subset
    items = pd.DataFrame(list(iter_subset("smoke", 0))).drop_duplicates("prompt").head(n_items)
    lm = load_model("evenhand-organism-fair")
    out = {"items": len(items)}
    with ChatServer(lm, "evenhand-organism-fair") as server:
        decide(items.head(16), lm, DecideOptions(progress=False))  # warm-up
        for c in concurrency:
            api = load_api("evenhand-organism-fair", OpenAIOptions(base_url=server.url, concurrency=c))
            t0 = time.perf_counter()
            decide(items, api, DecideOptions(engine="openai", progress=False, batch_size=max(8, 4 * c)))
            out[f"concurrency_{c}_items_per_s"] = round(len(items) / (time.perf_counter() - t0), 1)
        t0 = time.perf_counter()
        decide(items, lm, DecideOptions(progress=False))
        out["hf_engine_in_process_items_per_s"] = round(len(items) / (time.perf_counter() - t0), 1)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    c = sub.add_parser("cost", help="requests and tokens of a subset")
    c.add_argument("--subset", default="core", help="smoke or core")
    r = sub.add_parser("rate", help="items/s against the local server")
    r.add_argument("--items", type=int, default=192, help="distinct smoke items decided per concurrency")
    a = p.parse_args()
    print(json.dumps(cost(a.subset) if a.what == "cost" else rate(a.items), indent=1))


if __name__ == "__main__":
    main()
