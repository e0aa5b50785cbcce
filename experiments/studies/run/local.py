"""The run study's local backend: a RunConfig's suite -> decisions -> metrics (-> activation cache ->
analyses), and the stages it shares with the Ray backend (:mod:`.ray`).

Checks that cost nothing come first (config fields, output directory, where
the model is), so a bad config fails in well under a second, before any
model is loaded. The run is a list of stages (:mod:`evenhand.running.stages`): a
re-run of the same config in the same directory resumes, skipping the stages
whose outputs are written.
"""
from __future__ import annotations

from dataclasses import asdict, replace

from evenhand.models.plan import FALLBACK_BATCH_SIZE

from evenhand.support.messages import warn_unparseable
from evenhand.scoring.metrics import INTERVAL
from evenhand.models.loading import locate, resolve_spec
from evenhand.runs.rundir import RunDir
from evenhand.inference.stats import INTERVAL_NAMES
from evenhand.running.stages import LoadModel, Stage, StageReport, FnStage, finished_with, open_run, run_stages

from .config import RENAMED, RunConfig, options_for, suite_items
from ..common import check_output_dir
from evenhand.scoring.metrics import score
from evenhand.rows.schema import validate_rows
from probes.dataset import from_run
from probes.logistic import ProbeOptions
from probes.sweep import probe_sweep, write_sweep
from probes.ablation import name_ablation
from probes.attribution import run_attribution
from experiments.report import write_report
from evenhand.suite.content import items_version
from evenhand.running.decisions import DecideOptions, decide
from evenhand.engine.registry import get as get_engine, has_local_weights, load

MAY_CHANGE = ("resamples", "bootstrap_seed", "contrast_type", "convention", "probe", "attribution", "figures")
"""A run config's fields that do not change the model's answers (the bootstrap, the summary's contrast
type, the scoring convention, the probe sweep, the attribution, the figures): a resumed run may change
them; its stages after the answers and the cache then run again with the new values. Everything else (model, suite, mode, batch
and generation settings, cache and ablation settings) must match to resume."""

ADDED = {"openai": None}
"""Run config fields added since runs were made, with the value a run made before them had: it resumes."""

KEEP_STAGES = ("load_model", "model", "decide", "cache")
"""The stages a change of :data:`MAY_CHANGE` fields leaves finished: those that produce or cache answers."""


def score_run(cfg: RunConfig, run: RunDir, responses=None) -> dict:
    """Score the run's responses (``responses``, else ``responses.parquet``) and write ``metrics.json``."""
    responses = run.read_responses() if responses is None else responses
    report = score(validate_rows(responses), contrast_type=cfg.contrast_type, resamples=cfg.resamples,
                   seed=cfg.bootstrap_seed, convention=cfg.convention)
    run.write_metrics(report)
    return report


def finish_stages(cfg: RunConfig, spec, items, decided: FnStage, get_model, progress: bool,
                  cache_with=None) -> list[FnStage]:
    """The stages after the decisions, shared by the local and the Ray backend: score the responses
    (``decided.result`` when the decisions ran now, else the saved table) into ``metrics.json``, and
    (when enabled) cache activations with the model ``get_model()`` returns, or with
    ``cache_with(options, out_dir, suite_version, backend)`` when given (the Ray backend's workers)."""
    stages = [FnStage("score", lambda run: score_run(cfg, run, decided.result), finished_with(lambda r: r.metrics_path),
                   about=f"{len(items):,} responses, 95% CIs: {INTERVAL_NAMES[INTERVAL]}")]
    if cfg.cache.enabled:
        from evenhand.running.activations import CacheOptions, cache_activations
        from evenhand.suite.content import items_version
        c = cfg.cache
        copts = options_for(CacheOptions, c, batch_size=c.batch_size or cfg.batch_size or FALLBACK_BATCH_SIZE,
                            chat_template=spec.chat_template, progress=progress)

        def cache(run: RunDir):
            if cache_with is not None:
                return cache_with(copts, run.activations, items_version(items), c.backend)
            return cache_activations(items, get_model(), copts, run.activations, items_version(items),
                                     backend=c.backend)
        stages.append(FnStage("cache", cache,
                           finished_with(lambda r: RunDir(r.activations).cache_index_path),
                           about=f"{len(items):,} items, sites {', '.join(c.sites)}", work=len(items)))
    return stages


def analysis_stages(cfg: RunConfig, progress: bool, get_model=None, items=None) -> list[Stage]:
    """The optional stages after the cache, shared by both backends: the probe sweep
    (``OUT/probes/<label>/``), the name ablation (``OUT/ablation/<variant>/``; it re-decides with
    ``get_model()`` or loads the model), the direct logit attribution (``OUT/attribution/``) and the figures
    and report page (``OUT/figures/``, ``OUT/report.md``). Each is skipped once its outputs are written.
    ``items`` (the run's items) sizes the ablation's progress header."""
    stages: list[Stage] = []
    if cfg.probe is not None:
        p = cfg.probe

        def probe(run: RunDir) -> None:
            filters = {k: v for k, v in (("degree", list(p.degrees) if p.degrees else None),
                                         ("condition", list(p.conditions) if p.conditions else None),
                                         ("pressured", p.pressured)) if v is not None}
            ds = from_run(run.path, p.label, p.sites, filters)
            opts = options_for(ProbeOptions, p)
            table, _ = probe_sweep(ds, opts, control=p.control, resamples=cfg.resamples, text=p.text,
                                   progress=progress)
            write_sweep(table, run.probe_dir(p.label).path, ds, opts, run_dir=str(run.path))
        stages.append(FnStage("probe", probe, finished_with(lambda r: r.probe_dir(p.label).probes_table),
                           about=f"label {p.label}, sites {', '.join(p.sites) if p.sites else 'all cached'}"
                                 f"{', with control task' if p.control else ''}"))
    if cfg.ablation is not None:
        ab = cfg.ablation

        def ablation(variant: str):
            def go(run: RunDir) -> None:
                opts = options_for(ProbeOptions, ab)
                name_ablation(run.path, run.ablation_dir(variant).path, variant, ab.label, ab.degree,
                              list(ab.sites) if ab.sites else None, opts, cfg.resamples,
                              cfg.batch_size or FALLBACK_BATCH_SIZE,
                              progress=progress, lm=get_model() if get_model is not None else None,
                              minority_slot=ab.minority_slot)
            n = None if items is None else int(len(items) if ab.degree is None else (items["degree"] == ab.degree).sum())
            return FnStage(f"ablation_{variant}", go, finished_with(lambda r: r.ablation_dir(variant).ablation_table),
                        about=(f"up to {n:,} items " if n is not None else "items ") + f"at degree {ab.degree} re-decided and "
                              f"re-cached with names {variant}-ablated", work=None if n is None else 2 * n)
        stages += [ablation(v) for v in ab.variants]
    if cfg.attribution is not None:
        def attribution(run: RunDir) -> None:
            run_attribution(run.path, run.attribution_dir.path, cfg.attribution.degrees, cfg.attribution.batch_size,
                            cfg.resamples, cfg.bootstrap_seed, progress=progress)
        stages.append(FnStage("attribution", attribution, finished_with(lambda r: r.attribution_dir.attribution_table),
                           about=f"degrees {', '.join(map(str, cfg.attribution.degrees))}"))
    if cfg.figures:
        def figures(run: RunDir) -> None:
            write_report(run.path, resamples=cfg.resamples)  # draws every figure, then the page
        stages.append(FnStage("figures", figures, finished_with(lambda r: r.report_html),
                           about="figures, LaTeX table and report page"))
    return stages


def load_for(cfg: RunConfig, spec):
    """``spec`` loaded for the config's engine; an engine that takes options (``openai``) gets the config's
    section of its name and the run directory (where it keeps its response cache)."""
    if getattr(get_engine(cfg.engine), "Options", None) is None:
        return load(spec, cfg.engine)
    return load(spec, cfg.engine, options=getattr(cfg, cfg.engine, None), run_dir=cfg.output_dir)


def run_info(cfg: RunConfig, items) -> dict:
    """What a run's manifest records about its items beside the config."""
    return {"suite_version": items_version(items), "n_items": len(items),
            "seeds": {"suite": cfg.suite.seed, "bootstrap": cfg.bootstrap_seed},
            "intervals": {"metrics": INTERVAL_NAMES[INTERVAL]}}


def local_stages(cfg: RunConfig, spec, items, progress: bool = True) -> list[Stage]:
    """The stages of a local run of ``cfg`` on ``items`` with the resolved model ``spec``: the model, the
    decisions, the score (then the cache and the analyses when enabled)."""

    opts = options_for(DecideOptions, cfg, chat_template=spec.chat_template, progress=progress)
    model = LoadModel(lambda: load_for(cfg, spec), about=spec.model)

    def decide_all(run: RunDir):
        responses = decide(items, model(), opts, out_dir=run.path)
        run.write_responses(responses)
        warn_unparseable(responses, run)
        return responses
    decided = FnStage("decide", decide_all, finished_with(lambda r: r.responses_path),
                   about=f"{len(items):,} items, {cfg.mode} mode", work=len(items))
    score, *cache = finish_stages(cfg, spec, items, decided, model, progress)
    return [model, decided, score, *cache, *analysis_stages(cfg, progress, model, items)]


def run_config(cfg: RunConfig, progress: bool = True) -> tuple[RunDir, dict]:
    """Run (or resume) a run config locally; returns (RunDir, metrics report)."""
    spec = resolve_spec(cfg.model)
    if has_local_weights(cfg.engine):
        locate(spec)  # fails fast on a missing or damaged model, before the output directory is made
    out = check_output_dir(cfg.output_dir)
    items = suite_items(cfg.suite)
    stages = local_stages(cfg, spec, items, progress)
    run = open_run(out, asdict(replace(cfg, model=spec)), MAY_CHANGE, KEEP_STAGES, renamed=RENAMED,
                   defaults=ADDED, **run_info(cfg, items))
    run_stages(run, stages, StageReport(f"run {cfg.output_dir}") if progress else None)
    score = stages[2]
    return run, (score.result if score.result is not None else run.read_metrics())
