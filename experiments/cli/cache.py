"""`evenhand cache`: the activation cache only (resumable)."""
from __future__ import annotations

import argparse

from evenhand.running.activations import CacheOptions
from evenhand.support.options import add_flags, options_from_args
from experiments.studies.run.config import CacheConfig

from .common import model_args, prepare, progress, renamed_flag

CACHE_FLAG_NAMES = {"dtype": "--cache-dtype"}
"""CacheOptions.dtype's flag (--dtype is the model's)."""


def _cache(a) -> int:
    from evenhand.running.activations import cache_activations  # deferred: keeps the CLI's start fast
    from evenhand.suite.content import items_version  # deferred: keeps the CLI's start fast
    out, spec, items, lm = prepare(a)
    opts = options_from_args(CacheOptions, a, ("sites", "batch_size", "dtype", "name_mean"), CACHE_FLAG_NAMES,
                             chat_template=spec.chat_template, progress=progress(a))
    cache = cache_activations(items, lm, opts, out, items_version(items), backend=a.backend)
    print(f"cached {len(cache.item_ids()):,} items x {len(cache.sites)} sites ({cache.dtype}) in {out}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add `cache` to the top-level subparsers ``sub``."""
    s = sub.add_parser("cache", help="activation cache only (resumable)")
    model_args(s)
    add_flags(s, CacheOptions, ["sites", "dtype", "name_mean"], flags=CACHE_FLAG_NAMES)
    add_flags(s, CacheConfig, ["backend"])
    renamed_flag(s, "--engine", "--backend")
    s.set_defaults(fn=_cache)
