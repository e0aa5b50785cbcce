"""How much prompt work sharding leaves to a perfect prefix cache: item-hash shards against scenario shards.

For each way of sharding (``item-hash``: the Ray backend before, ``stable_hash(item_id) % n``;
``scenario`` and ``baseline`` (scenario x contrast type): :func:`evenhand.running.shards.balanced_shards`) and each
number of shards, the *prefix share* is the share of prompt tokens a perfect prefix cache must still
compute: within each shard, the tokens of a prompt not shared with an earlier prompt of that shard (the
nodes of the shard's token trie), summed over shards, over all prompt tokens. It does not depend on the
order of the prompts in a shard. Also printed: the largest shard over the mean (balance).

The prompts are the suite's answer-mode prompts (``--mode reasoning``: the reasoning variant) as the model
reads them (chat template applied when the tokenizer has one), tokenised with a local tokenizer:
``gemma-3-270m-gguf`` (the `demo` extra; the real Gemma 3 vocabulary, the tokenizer of Gemma-3-12B-it) or
``evenhand-organism``."""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evenhand.running.shards import balanced_shards, scattered_units, shard_units  # noqa: E402


def trie_nodes(prompts: Sequence[Sequence[int]]) -> int:
    """The number of nodes of the token trie of ``prompts`` (the tokens a perfect prefix cache computes):
    with the prompts sorted, each adds its length less its longest common prefix with the one before."""
    total, prev = 0, ()
    for p in sorted(tuple(p) for p in prompts):
        common = 0
        for a, b in zip(prev, p):
            if a != b:
                break
            common += 1
        total += len(p) - common
        prev = p
    return total


def prefix_share(prompts: Sequence[Sequence[int]], shards: Sequence[int]) -> float:
    """Tokens a perfect prefix cache computes, summed over shards (each shard its own trie), over all tokens."""
    groups: dict[int, list] = {}
    for p, k in zip(prompts, shards):
        groups.setdefault(k, []).append(p)
    total = sum(len(p) for p in prompts)
    return sum(trie_nodes(g) for g in groups.values()) / total if total else 0.0


def item_hash_shards(item_ids: Sequence[str], n_shards: int) -> list[int]:
    """The Ray backend's sharding before: a stable hash of each item id."""
    from evenhand.suite.generate import stable_hash
    return [stable_hash("ray-shard", i) % n_shards for i in item_ids]


def main(argv: list[str] | None = None) -> dict:
    """Not part of the test run. Prints a table, then a JSON line::

        python benchmarks/bench_sharding.py --suite core --shards 1 8 32      # FairStress-Core, Gemma 3 tokenizer
        python benchmarks/bench_sharding.py --suite smoke --tokenizer evenhand-organism
    """
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suite", default="core")
    ap.add_argument("--tokenizer", default="gemma-3-270m-gguf")
    ap.add_argument("--mode", default="answer", choices=["answer", "reasoning"])
    ap.add_argument("--shards", type=int, nargs="+", default=[1, 8, 32])
    a = ap.parse_args(argv)
    from evenhand.engine.batching import token_ids
    from evenhand.vocab.prompts import model_text, user_message, uses_chat_template
    from evenhand.suite import items as suite_items

    t0 = time.perf_counter()
    items = suite_items(a.suite)
    from evenhand.models.loading import preset_tokenizer
    tok = preset_tokenizer(a.tokenizer)
    texts = [model_text(tok, user_message(r, a.mode)) for r in items.to_dict("records")]
    prompts = token_ids(tok, texts, not uses_chat_template(tok))
    n_tok = sum(map(len, prompts))
    ways = {"item-hash": lambda n: item_hash_shards(list(items["item_id"]), n),
            "scenario": lambda n: balanced_shards(shard_units(items, "scenario"), n),
            "baseline": lambda n: balanced_shards(shard_units(items, "baseline"), n)}
    rows = []
    for way, assign in ways.items():
        for n in a.shards:
            shards = assign(n)
            sizes = [shards.count(k) for k in range(n)]
            rows.append({"sharding": way, "shards": n, "prefix_share": round(prefix_share(prompts, shards), 4),
                         "largest_over_mean": round(max(sizes) / (len(shards) / n), 3),
                         "scenarios_scattered": len(scattered_units(shard_units(items, "scenario"), shards))})
    print(f"{a.suite}: {len(items):,} items, {n_tok / len(items):.1f} prompt tokens on average ({a.mode} mode, "
          f"{a.tokenizer} tokenizer, chat template {'on' if uses_chat_template(tok) else 'off'})")
    print(f"{'sharding':<11}{'shards':>7}{'prefix share':>14}{'largest/mean':>14}{'scenarios split':>17}")
    for r in rows:
        print(f"{r['sharding']:<11}{r['shards']:>7}{r['prefix_share']:>14.1%}{r['largest_over_mean']:>14.3f}"
              f"{r['scenarios_scattered']:>17}")
    res = {"suite": a.suite, "items": len(items), "tokenizer": a.tokenizer, "mode": a.mode,
           "mean_prompt_tokens": round(n_tok / len(items), 1), "rows": rows,
           "seconds": round(time.perf_counter() - t0, 1)}
    print(json.dumps(res))
    return res


if __name__ == "__main__":
    main()
