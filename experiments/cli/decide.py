"""`evenhand decide`: the decisions only (resumable), without scoring."""
from __future__ import annotations

import argparse
from dataclasses import replace

from evenhand.decisions import DecideOptions
from evenhand.engine.openai_engine import OpenAIOptions
from evenhand.models.plan import FALLBACK_BATCH_SIZE
from evenhand.options import add_flags, options_from_args

from .common import model_args, prepare, progress

API_FLAGS = ("base_url", "model", "api_key_env", "concurrency", "timeout_s", "max_retries", "requests_per_minute",
             "temperature")
"""The OpenAIOptions fields that `decide --engine openai` takes as flags."""
API_RENAMED = {"model": "--api-model"}
"""``--model`` names the run's model; the name the endpoint serves is ``--api-model``."""
DECIDE_FLAGS = ("mode", "batch_size", "max_new_tokens", "reasoning_max_new_tokens", "prefix_reuse", "engine")
"""The DecideOptions fields that `decide` takes as flags (batch_size among the model flags)."""


def _decide(a) -> int:
    from evenhand.messages import warn_unparseable  # deferred: keeps the CLI's start fast
    from evenhand.decisions import decide  # deferred: keeps the CLI's start fast
    from evenhand.runs import RunDir  # deferred: keeps the CLI's start fast
    opts = options_from_args(DecideOptions, a, DECIDE_FLAGS, progress=progress(a))  # a bad combination fails before the model loads
    api = options_from_args(OpenAIOptions, a, API_FLAGS, API_RENAMED)
    given = [API_RENAMED.get(f, "--" + f.replace("_", "-")) for f in API_FLAGS
             if getattr(api, f) != getattr(OpenAIOptions(), f)]
    if opts.engine != "openai" and given:
        raise ValueError(f"{', '.join(given)} set engine openai's endpoint, but --engine is {opts.engine}: "
                         f"add --engine openai")
    if opts.engine == "openai" and api.concurrency > (opts.batch_size or FALLBACK_BATCH_SIZE):
        raise ValueError(f"--concurrency {api.concurrency} exceeds --batch-size {opts.batch_size}: at most a batch's "
                         f"items are in flight; raise --batch-size")
    out, spec, items, lm = prepare(a, engine=opts.engine, options=api if opts.engine == "openai" else None)
    opts = replace(opts, chat_template=spec.chat_template)
    table = decide(items, lm, opts, out_dir=out)
    resp = RunDir(out).write_responses(table)
    warn_unparseable(table, RunDir(out))
    answered = table["choice"].notna().mean()
    print(f"{len(table):,} responses in {resp} ({answered:.1%} with an A/B choice); "
          f"score them with `evenhand score {resp}`")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add `decide` to the top-level subparsers ``sub``."""
    s = sub.add_parser("decide", help="decisions only (resumable), written to OUT/responses.parquet")
    model_args(s)
    # --engine takes any registered engine (a --plugin may register one): DecideOptions checks it before loading
    add_flags(s, DecideOptions, ["mode", "max_new_tokens", "reasoning_max_new_tokens", "prefix_reuse", "engine"])
    add_flags(s, OpenAIOptions, API_FLAGS, flags=API_RENAMED)
    s.set_defaults(fn=_decide)
