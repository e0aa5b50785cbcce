"""Run the simulated model over suite items into a run directory, and score it."""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pandas as pd

from .conventions import DEFAULT_CONVENTION, check_convention
from .metrics import ASYMMETRY, compute_metrics, score
from .models.policy import PlantedPolicy, planted_truth
from .models.simulated import PlantedBias, SimulatedModel
from .runs import RunDir
from .schema import validate_rows
from .suite.content import load_content
from .suite.subsets import iter_subset


def simulate_run(out: str | Path, subset: str = "smoke", suite_seed: int = 0, model_seed: int = 0,
                 bias: PlantedBias | None = None, form: str = "stochastic", resamples: int = 1000,
                 contrast_type: str | None = "type1", convention: str = DEFAULT_CONVENTION) -> tuple[RunDir, dict]:
    """Suite subset -> simulated responses -> metrics, written to a run directory.

    ``convention``: how the metrics read directions (:mod:`evenhand.conventions`; recorded in the manifest's
    config and in ``metrics.json``).

    ``form``: ``stochastic`` or ``deterministic`` (the :class:`SimulatedModel` with ``bias``), or
    ``policy`` (the deterministic :class:`PlantedPolicy`; its planted values are computed exactly
    on the same items)."""
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
              "subset": subset, "resamples": resamples, "contrast_type": contrast_type, "convention": convention}
    run = RunDir.create(out, config, content.version, {"suite": suite_seed, "model": model_seed, "bootstrap": 0})
    with run.timed("decide"):
        items = pd.DataFrame(list(iter_subset(subset, suite_seed, content)))
        responses = model.decide(items)
        run.write_responses(responses)
    with run.timed("score"):
        report = score(validate_rows(responses), contrast_type=contrast_type, resamples=resamples, seed=0,
                       convention=convention)
        if form == "policy":
            truth = planted_truth(model, items, report["contrast_type"])
        else:
            truth = {d: bias.truth(d) for d in range(4)}
        report["planted_truth"] = {str(d): v for d, v in truth.items()}
        run.write_metrics(report)
    run.finish()
    return run, report


def coverage_study(items: pd.DataFrame, bias: PlantedBias | None = None, seeds: int = 50, resamples: int = 400,
                   degree: int = 3, interval: str | None = None, metrics=ASYMMETRY) -> dict:
    """Re-run the simulated model with ``seeds`` model seeds on the same items and count how often
    each metric's 95% CI covers its planted value. ``items`` should be one degree and one contrast type.

    With scenario effects in ``bias`` each seed draws new effects, and the planted value is the
    expectation over them (:meth:`PlantedBias.truth`). ``interval``: one of
    :data:`evenhand.metrics.INTERVALS` for this study (default: the metrics' own, ``INTERVAL``)."""
    from . import metrics as metrics_module
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
