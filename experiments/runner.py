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

from .config import RunConfig, SuiteConfig, options_for


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
        copts = options_for(CacheOptions, c, batch_size=c.batch_size or cfg.batch_size,
                            chat_template=spec.chat_template, progress=progress)
        with run.timed("cache"):
            cache_activations(items, get_model(), copts, run.path / "activations", load_content().version,
                              engine=c.engine)
    return report


def analysis_stages(cfg: RunConfig, run: RunDir, progress: bool, lm=None) -> None:
    """The optional stages after the cache, shared by both backends: the probe sweep
    (``OUT/probes/<label>/``), the name ablation (``OUT/ablation/<variant>/``; it re-decides with
    ``lm`` or loads the model), the direct logit attribution (``OUT/attribution/``) and the figures and report page (``OUT/figures/``, ``OUT/report.md``)."""
    if cfg.probe is not None:
        from probes.dataset import from_run
        from probes.logistic import ProbeOptions
        from probes.sweep import probe_sweep, write_sweep
        p = cfg.probe
        filters = {k: v for k, v in (("degree", list(p.degrees) if p.degrees else None),
                                     ("condition", list(p.conditions) if p.conditions else None),
                                     ("pressured", p.pressured)) if v is not None}
        with run.timed("probe"):
            ds = from_run(run.path, p.label, p.sites, filters)
            opts = options_for(ProbeOptions, p)
            table, _ = probe_sweep(ds, opts, control=p.control, resamples=cfg.resamples, text=p.text)
            write_sweep(table, run.path / "probes" / p.label, ds, opts, run_dir=str(run.path))
    if cfg.ablation is not None:
        from probes.ablation import name_ablation
        from probes.logistic import ProbeOptions
        ab = cfg.ablation
        opts = options_for(ProbeOptions, ab)
        for variant in ab.variants:
            with run.timed(f"ablation_{variant}"):
                name_ablation(run.path, run.path / "ablation" / variant, variant, ab.label, ab.degree,
                              list(ab.sites) if ab.sites else None, opts, cfg.resamples, cfg.batch_size,
                              progress=progress, lm=lm)
    if cfg.attribution is not None:
        from probes.attribution import run_attribution
        with run.timed("attribution"):
            run_attribution(run.path, run.path / "attribution", cfg.attribution.degrees, cfg.attribution.batch_size,
                            cfg.resamples, cfg.bootstrap_seed, progress=progress)
    if cfg.figures:
        from .pages import write_report
        with run.timed("figures"):
            write_report(run.path, resamples=cfg.resamples)  # draws every figure, then the page


def run_config(cfg: RunConfig, progress: bool = True) -> tuple[RunDir, dict]:
    from evenhand.decide import DecideOptions

    out = check_output_dir(cfg.output_dir)
    spec = resolve_spec(cfg.model)
    locate(spec)  # fails fast on a missing model
    opts = options_for(DecideOptions, cfg, chat_template=spec.chat_template, progress=progress)
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
    run.check_same_model(lm.describe())
    run.update_manifest(model=lm.describe())
    with run.timed("decide"):
        responses = decide(items, lm, opts, out_dir=out)
        run.write_responses(responses)
    report = finish_stages(cfg, spec, run, items, responses, lambda: lm, progress)
    analysis_stages(cfg, run, progress, lm)
    run.finish()
    return run, report
