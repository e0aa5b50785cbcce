"""`evenhand decide`: the decisions only (resumable), without scoring.

The output directory gets a manifest like a run's (:class:`evenhand.runs.rundir.RunDir`): the settings that shape the
answers (:func:`decide_config`), the suite version, the loaded model's record (engine, endpoint, served model,
sampling, ``reproducible_from_weights``), package versions and the git SHA. A rerun resumes only into an output
made with the same settings (the request-handling ones and ``--limit`` may change); otherwise it is refused, naming
the fields, before the model loads: ``--restart`` clears the output's decisions, response cache and manifest and
starts afresh (or choose another ``--out``)."""
from __future__ import annotations

import argparse
import shutil
from dataclasses import asdict, replace

from evenhand.running.decisions import DecideOptions
from evenhand.engine.openai_engine import OpenAIOptions
from evenhand.models.plan import FALLBACK_BATCH_SIZE
from evenhand.support.options import add_flags, options_from_args

from .common import model_args, model_spec, prepare, progress

API_FLAGS = ("base_url", "model", "api_key_env", "concurrency", "timeout_s", "max_retries", "requests_per_minute",
             "temperature", "seed", "outage_budget_s")
"""The OpenAIOptions fields that `decide --engine openai` takes as flags."""
API_RENAMED = {"model": "--api-model", "seed": "--api-seed"}
"""``--model`` names the run's model and ``--seed`` the suite's draw; the endpoint's are ``--api-model`` and
``--api-seed``."""
DECIDE_FLAGS = ("mode", "batch_size", "max_new_tokens", "reasoning_max_new_tokens", "prefix_reuse", "engine")
"""The DecideOptions fields that `decide` takes as flags (batch_size among the model flags)."""
REQUESTS = ("concurrency", "timeout_s", "max_retries", "backoff_s", "max_backoff_s", "requests_per_minute",
            "outage_after", "outage_budget_s", "api_key_env")
"""Engine openai's options that change how answers are asked for, not what they are."""
MAY_CHANGE = ("requests", "limit")
"""The recorded settings a resume may change: how requests are made, and how many items (the rest must match)."""


def decide_config(a: argparse.Namespace, spec, opts: DecideOptions, api: OpenAIOptions | None) -> dict:
    """The settings a `decide` output records (``config`` in its manifest): the model spec, the engine, the mode
    and its token limit, the suite's subset and seed (and ``limit``), the chat template, and for engine openai the
    endpoint, the name it serves and the sampling; ``requests``: what may change on resume (engine openai's
    request handling, and its batch size, which only groups requests)."""
    tokens = {"answer": ("max_new_tokens", opts.max_new_tokens),
              "reasoning": ("reasoning_max_new_tokens", opts.reasoning_max_new_tokens)}.get(opts.mode)
    config = {"model": asdict(spec), "engine": opts.engine, "mode": opts.mode, **dict([tokens] if tokens else []),
              "suite": {"subset": a.subset, "seed": a.seed}, "limit": a.limit, "chat_template": spec.chat_template,
              "prefix_reuse": opts.prefix_reuse, "batch_size": opts.batch_size, "openai": None, "requests": None}
    if api is not None:
        config["openai"] = {"base_url": api.base_url, "model": api.model, "temperature": api.temperature,
                            "seed": api.seed if api.temperature > 0 else None}
        config["requests"] = {"batch_size": config.pop("batch_size"), **{k: getattr(api, k) for k in REQUESTS}}
    return config


def _restart(run) -> None:
    """Clear what `decide` wrote in ``run`` (its decisions, response cache, responses and manifest)."""
    from evenhand.engine.openai_engine import CACHE_FILE  # deferred: keeps the CLI's start fast
    shutil.rmtree(run.decisions, ignore_errors=True)
    for f in (run.path / CACHE_FILE, run.responses_path, run.manifest_path):
        f.unlink(missing_ok=True)


def _decide(a) -> int:
    from evenhand.support.messages import warn_unparseable  # deferred: keeps the CLI's start fast
    from evenhand.running.decisions import decide  # deferred: keeps the CLI's start fast
    from evenhand.models.loading import resolve_spec  # deferred: keeps the CLI's start fast
    from evenhand.runs.rundir import RunDir, RunError  # deferred: keeps the CLI's start fast
    from evenhand.suite.content import items_version  # deferred: keeps the CLI's start fast
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
    api = api if opts.engine == "openai" else None
    config = decide_config(a, resolve_spec(model_spec(a)), opts, api)
    run = RunDir(a.out)
    if a.restart and run.path.is_dir():
        run.lock()  # never clear an output another process is writing
        _restart(run)
    elif run.exists():
        differ = run.config_differences(config, may_change=MAY_CHANGE)
        if differ:
            raise RunError(f"{run.path} holds decisions made with other settings (differ: {', '.join(differ[:8])}): "
                           f"resuming would mix them in one table; rerun with --restart to start afresh there, or "
                           f"choose another --out")
    elif run.decisions.is_dir() and any(run.decisions.iterdir()):
        raise RunError(f"{run.path} holds decisions with no manifest (made before `decide` recorded its settings), so "
                       f"whether they match these settings is unknown: rerun with --restart, or choose another --out")
    try:
        out, spec, items, lm = prepare(a, engine=opts.engine, options=api)
    except BaseException:
        run.unlock()
        raise
    opts = replace(opts, chat_template=spec.chat_template)
    run = RunDir.open_or_create(out, config, MAY_CHANGE)
    try:
        run.update_manifest(suite_version=items_version(items), n_items=len(items), seeds={"suite": a.seed})
        run.record_model(lm.describe())
        table = decide(items, lm, opts, out_dir=out)
        resp = run.write_responses(table)
    except BaseException as exc:
        run.fail("decide", exc)
        raise
    finally:
        if hasattr(lm, "close"):
            lm.close()
    run.finish()
    warn_unparseable(table, run)
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
    s.add_argument("--restart", action="store_true",
                   help="clear the output's decisions, response cache and manifest and start afresh (a rerun "
                        "otherwise resumes, and refuses an output made with other settings)")
    s.set_defaults(fn=_decide)
