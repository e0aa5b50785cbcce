"""The simulate study (``kind: simulate``, ``evenhand simulate``): the simulated model (the core's
:mod:`evenhand.models.simulated`) over suite items into a run directory, scored beside its planted truth;
and the coverage study of the metrics' intervals (:func:`coverage_study`, ``evenhand coverage``; no run
directory)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from evenhand.scoring import metrics as metrics_module
from evenhand.inference.stats import INTERVAL_NAMES
from evenhand.rows.conventions import CONVENTIONS, DEFAULT_CONVENTION, check_convention
from evenhand.scoring.metrics import ASYMMETRY, INTERVAL, compute_metrics, score
from evenhand.models.policy import PlantedPolicy, planted_truth
from evenhand.models.simulated import PlantedBias, SimulatedModel
from evenhand.support.options import Rules, build
from evenhand.runs.rundir import RunDir
from evenhand.rows.schema import validate_rows
from evenhand.running.stages import FnStage, finished_with, open_run, run_stages
from evenhand.suite.content import load_content
from evenhand.suite.subsets import iter_subset

from ..base import Study, register, without_kind, without_unused
from ..text import score_table
from evenhand.reporting.figures import metrics_table


def simulate_run(out: str | Path, subset: str = "smoke", suite_seed: int = 0, model_seed: int = 0,
                 bias: PlantedBias | None = None, form: str = "stochastic", resamples: int | None = None,
                 contrast_type: str | None = "type1", convention: str = DEFAULT_CONVENTION) -> tuple[RunDir, dict]:
    """Suite subset -> simulated responses -> metrics, written to a run directory through the stage
    driver (stages ``decide`` and ``score``; a rerun of the same arguments resumes, other arguments are
    refused).

    ``convention``: how the metrics read directions (:mod:`evenhand.rows.conventions`; recorded in the manifest's
    config and in ``metrics.json``). ``resamples`` is accepted and unused, as in :func:`evenhand.scoring.metrics.score`:
    the metrics' CIs are the jackknife-t, which resamples nothing, so neither it nor a bootstrap seed is recorded.

    ``form``: ``stochastic`` or ``deterministic`` (the :class:`SimulatedModel` with ``bias``), or
    ``policy`` (the deterministic :class:`PlantedPolicy`; its planted values are computed exactly
    on the same items)."""
    config, info, stages = simulation(subset, suite_seed, model_seed, bias, form, resamples, contrast_type, convention)
    run = run_stages(open_run(out, config, **info), stages)
    return run, (stages[-1].result if stages[-1].result is not None else run.read_metrics())


def simulation(subset: str = "smoke", suite_seed: int = 0, model_seed: int = 0, bias: PlantedBias | None = None,
               form: str = "stochastic", resamples: int | None = None, contrast_type: str | None = "type1",
               convention: str = DEFAULT_CONVENTION) -> tuple[dict, dict, list[FnStage]]:
    """A simulated run's manifest config, its manifest info (suite version, seeds) and its stages (``resamples``
    unused: :func:`simulate_run`)."""
    bias = bias or PlantedBias()
    check_convention(convention)
    content = load_content()
    if form == "policy":
        model = PlantedPolicy()
        name, planted = "planted-policy", model.as_dict()
    else:
        model = SimulatedModel(bias, seed=model_seed, form=form)
        name, planted = model.name, asdict(bias)
    config = {"model": name, "model_kind": "simulated", "form": form, "planted": planted,
              "subset": subset, "contrast_type": contrast_type, "convention": convention}
    items = pd.DataFrame(list(iter_subset(subset, suite_seed, content)))

    def decide(run: RunDir) -> pd.DataFrame:
        responses = model.decide(items)
        run.write_responses(responses)
        return responses

    def scored(run: RunDir) -> dict:
        responses = decided.result if decided.result is not None else run.read_responses()
        report = score(validate_rows(responses), contrast_type=contrast_type, convention=convention)
        if form == "policy":
            truth = planted_truth(model, items, report["contrast_type"])
        else:
            truth = {d: bias.truth(d) for d in range(4)}
        report["planted_truth"] = {str(d): v for d, v in truth.items()}
        run.write_metrics(report)
        return report
    decided = FnStage("decide", decide, finished_with(lambda r: r.responses_path))
    scores = FnStage("score", scored, finished_with(lambda r: r.metrics_path))
    info = {"suite_version": content.version, "seeds": {"suite": suite_seed, "model": model_seed}}
    return config, info, [decided, scores]


def coverage_study(items: pd.DataFrame, bias: PlantedBias | None = None, seeds: int = 50, resamples: int = 400,
                   degree: int = 3, interval: str | None = None, metrics=ASYMMETRY) -> dict:
    """Re-run the simulated model with ``seeds`` model seeds on the same items and count how often
    each metric's 95% CI covers its planted value. ``items`` should be one degree and one contrast type.

    With scenario effects in ``bias`` each seed draws new effects, and the planted value is the
    expectation over them (:meth:`PlantedBias.truth`). ``interval``: one of
    :data:`evenhand.scoring.metrics.INTERVALS` for this study (default: the metrics' own, ``INTERVAL``)."""
    bias = bias or PlantedBias()
    truth = bias.truth(degree)
    out = {m: {"planted": truth[m], "covered": 0, "estimates": []} for m in metrics}
    if interval is not None and interval not in metrics_module.INTERVALS:
        raise ValueError(f"interval must be one of {metrics_module.INTERVALS}, got {interval!r}")
    kept = metrics_module.INTERVAL
    metrics_module.INTERVAL = interval or kept
    try:
        for seed in range(seeds):
            resp = validate_rows(SimulatedModel(bias, seed=seed).decide(items))
            est = compute_metrics(resp, resamples=resamples, seed=seed, metrics=metrics)
            for m in metrics:
                e = est[m]
                out[m]["estimates"].append(e.value)
                out[m]["covered"] += bool(e.ci_low is not None and e.ci_low <= truth[m] <= e.ci_high)
    finally:
        metrics_module.INTERVAL = kept
    for m in metrics:
        vals = out[m].pop("estimates")
        out[m].update(seeds=seeds, coverage=out[m]["covered"] / seeds, mean_estimate=sum(vals) / len(vals))
    return out


UNUSED_WHY = f"the metrics' 95% CIs are the {INTERVAL_NAMES[INTERVAL]}, which resamples nothing"
"""Why a simulate config's ``resamples`` is refused."""


@dataclass(frozen=True)
class SimulateConfig:
    """A simulated run: the simulated model with planted biases on a suite subset."""
    output_dir: str
    """The run directory."""
    subset: str = "smoke"
    """smoke | core (a suite subset)."""
    suite_seed: int = 0
    """Seed of the subset."""
    model_seed: int = 0
    """Seed of the simulated model's draws."""
    form: str = "stochastic"
    """stochastic | deterministic (the simulated model with ``planted``) | policy (the deterministic planted
    policy; ``planted`` unused)."""
    planted: PlantedBias = field(default_factory=PlantedBias)
    """The planted policy parameters (:class:`evenhand.models.simulated.PlantedBias`)."""
    contrast_type: str | None = "type1"
    """type1 | type23."""
    convention: str = DEFAULT_CONVENTION
    """evenhand | ai2 (:mod:`evenhand.rows.conventions`)."""


RULES = Rules(choices={"form": ("stochastic", "deterministic", "policy"), "contrast_type": ("type1", "type23", None),
                       "convention": CONVENTIONS})
"""The simulate config's checks beyond the field types."""


@register
class SimulateStudy(Study):
    """The simulated model with planted biases: metrics beside the planted truth."""

    kind = "simulate"

    def parse(self, data, where: str = "config") -> SimulateConfig:
        data = without_unused(without_kind(data, self.kind), ("resamples",), UNUSED_WHY)
        return build(SimulateConfig, data, rules=RULES)

    def stages(self, cfg: SimulateConfig, progress: bool = True) -> list[FnStage]:
        return simulation(cfg.subset, cfg.suite_seed, cfg.model_seed, cfg.planted, cfg.form,
                          contrast_type=cfg.contrast_type, convention=cfg.convention)[2]

    def run(self, cfg: SimulateConfig, progress: bool = True, backend: str = "local",
            **backend_options) -> tuple[RunDir, dict]:
        return simulate_run(cfg.output_dir, cfg.subset, cfg.suite_seed, cfg.model_seed, cfg.planted, cfg.form,
                            contrast_type=cfg.contrast_type, convention=cfg.convention)

    def text(self, cfg: SimulateConfig, result) -> str:
        run, report = result
        return (f"{score_table(report, truth={int(d): v for d, v in report['planted_truth'].items()})}\n\n"
                f"run directory: {run.path} (manifest.json, responses.parquet, metrics.json)")

    def rows(self, output_dir: Path, resamples: int) -> pd.DataFrame:
        return metrics_table(Path(output_dir), resamples).assign(table="metrics")
