"""`evenhand decide` and `evenhand cache`: decisions only, or the activation cache only (resumable)."""
from __future__ import annotations

import argparse
from dataclasses import replace

from evenhand.activations import CacheOptions
from evenhand.decisions import DecideOptions
from evenhand.options import add_flags, options_from_args
from experiments.config import CacheConfig

from .common import model_args, prepare, renamed_flag

DECIDE_FLAGS = ("mode", "batch_size", "max_new_tokens", "reasoning_max_new_tokens", "prefix_reuse", "engine")
"""The DecideOptions fields that `decide` takes as flags (batch_size among the model flags)."""
CACHE_FLAG_NAMES = {"dtype": "--cache-dtype"}
"""CacheOptions.dtype's flag (--dtype is the model's)."""


def _decide(a) -> int:
    from evenhand.checks import warn_unparseable
    from evenhand.decisions import decide
    from evenhand.runs import RunDir
    opts = options_from_args(DecideOptions, a, DECIDE_FLAGS)  # a bad combination fails before the model loads
    out, spec, items, lm = prepare(a, engine=opts.engine)
    opts = replace(opts, chat_template=spec.chat_template)
    table = decide(items, lm, opts, out_dir=out)
    resp = RunDir(out).write_responses(table)
    warn_unparseable(table, RunDir(out))
    answered = table["choice"].notna().mean()
    print(f"{len(table):,} responses in {resp} ({answered:.1%} with an A/B choice); "
          f"score them with `evenhand score {resp}`")
    return 0


def _cache(a) -> int:
    from evenhand.activations import cache_activations
    from evenhand.suite.content import items_version
    out, spec, items, lm = prepare(a)
    opts = options_from_args(CacheOptions, a, ("sites", "batch_size", "dtype", "name_mean"), CACHE_FLAG_NAMES,
                             chat_template=spec.chat_template)
    cache = cache_activations(items, lm, opts, out, items_version(items), backend=a.backend)
    print(f"cached {len(cache.item_ids()):,} items x {len(cache.sites)} sites ({a.cache_dtype}) in {out}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add `decide` and `cache` to the top-level subparsers ``sub``."""
    s = sub.add_parser("decide", help="decisions only (resumable), written to OUT/responses.parquet")
    model_args(s)
    # --engine takes any registered engine (a --plugin may register one): DecideOptions checks it before loading
    add_flags(s, DecideOptions, ["mode", "max_new_tokens", "reasoning_max_new_tokens", "prefix_reuse", "engine"])
    s.set_defaults(fn=_decide)
    s = sub.add_parser("cache", help="activation cache only (resumable)")
    model_args(s)
    add_flags(s, CacheOptions, ["sites", "dtype", "name_mean"], flags=CACHE_FLAG_NAMES)
    add_flags(s, CacheConfig, ["backend"])
    renamed_flag(s, "--engine", "--backend")
    s.set_defaults(fn=_cache)
