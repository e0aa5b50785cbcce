"""Turn a RunConfig into a run: suite -> decisions -> metrics -> summary (-> activation cache).

Checks that cost nothing come first (config fields, output directory, where
the model is), so a bad config fails in well under a second, before any
model is loaded. A re-run of the same config in the same directory resumes.
"""
from __future__ import annotations

import time
from dataclasses import asdict, replace
from pathlib import Path

from evenhand.models.loading import locate, resolve_spec
from evenhand.runs import RunDir, RunError

from .config import RunConfig, SuiteConfig


def check_output_dir(path: str | Path) -> Path:
    """Create the directory and prove it is writable; raise RunError naming it otherwise."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
        probe = p / ".write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        raise RunError(f"output_dir {p} is not writable: {exc.strerror or exc}") from None
    return p


def suite_items(s: SuiteConfig):
    """The items a suite config selects, as a DataFrame."""
    import pandas as pd

    from evenhand.schema import read_rows
    from evenhand.suite.subsets import iter_subset
    if s.subset in ("smoke", "core"):
        df = pd.DataFrame(list(iter_subset(s.subset, s.seed)))
    elif s.subset == "organism_heldout":
        import json

        from evenhand.models.organism import COMMITTED, heldout_items
        df = heldout_items(json.loads((COMMITTED / "organism.json").read_text()), seed=s.seed)
    else:
        df = read_rows(s.subset).drop(columns=["_line"], errors="ignore")
    if s.degrees:
        df = df[df["degree"].isin(s.degrees)]
    if s.contrast_types:
        df = df[df["contrast_type"].isin(s.contrast_types)]
    if s.limit:
        df = df.head(s.limit)
    return df.reset_index(drop=True)


def finish_stages(cfg: RunConfig, spec, run, items, responses, get_model, progress: bool) -> dict:
    """The stages after the decisions, shared by the local and the Ray backend: score the responses,
    write the metrics, and (when enabled) cache activations with the model ``get_model()`` returns."""
    from evenhand.metrics import score
    from evenhand.schema import validate_rows
    from evenhand.suite.content import load_content
    with run.timed("score"):
        report = score(validate_rows(responses), contrast_type=cfg.contrast_type, resamples=cfg.resamples,
                       seed=cfg.bootstrap_seed)
        run.write_metrics(report)
    if cfg.cache.enabled:
        from evenhand.activations import CacheOptions, cache_activations
        c = cfg.cache
        copts = CacheOptions(sites=c.sites, batch_size=c.batch_size or cfg.batch_size, dtype=c.dtype,
                             name_mean=c.name_mean, chat_template=spec.chat_template, progress=progress)
        with run.timed("cache"):
            cache_activations(items, get_model(), copts, run.path / "activations", load_content().version,
                              engine=c.engine)
    return report


def run_config(cfg: RunConfig, progress: bool = True) -> tuple[RunDir, dict]:
    from evenhand.decide import DecideOptions

    out = check_output_dir(cfg.output_dir)
    spec = resolve_spec(cfg.model)
    locate(spec)  # fails fast on a missing model
    opts = DecideOptions(mode=cfg.mode, batch_size=cfg.batch_size, max_new_tokens=cfg.max_new_tokens,
                         reasoning_max_new_tokens=cfg.reasoning_max_new_tokens, chat_template=spec.chat_template,
                         progress=progress)
    manifest_cfg = asdict(replace(cfg, model=spec))
    run = RunDir.open_or_create(out, manifest_cfg)

    from evenhand.decide import decide
    from evenhand.models.loading import load_model
    from evenhand.suite.content import load_content

    items = suite_items(cfg.suite)
    run.update_manifest(suite_version=load_content().version, seeds={"suite": cfg.suite.seed,
                                                                       "bootstrap": cfg.bootstrap_seed},
                        n_items=len(items))
    t0 = time.perf_counter()
    lm = load_model(spec)
    run.record_timing("load_model", time.perf_counter() - t0)
    run.update_manifest(model=lm.describe())
    with run.timed("decide"):
        responses = decide(items, lm, opts, out_dir=out)
        run.write_responses(responses)
    report = finish_stages(cfg, spec, run, items, responses, lambda: lm, progress)
    run.finish()
    return run, report
