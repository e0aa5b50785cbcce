"""The organisms' probe checks: the planted organism's side probe, and the probe study of the fair
organism with the bias dial.

:func:`side_probe` runs a probe sweep for ``favours_minority`` (grouped nested CV, every residual
site) on the organism's held-out baseline items at one degree; :func:`evaluate` is the whole
held-out evaluation: the core's known-answer checks
(:func:`organism.known_answer_checks`) plus this probe, under ``"probe"``."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from evenhand.inference.stats import RESAMPLES
from probes.dataset import TARGETS

from .evaluation import HeldoutRun, heldout_responses, known_answer_checks
from .recipe import COMMITTED
from evenhand.running.activations import CacheOptions, cache_activations
from probes.dataset import build_dataset
from probes.logistic import ProbeOptions
from probes.sweep import best_site, probe_sweep
from evenhand.models.loading import load_model
from .calibration import (
    calibration_items,
    dialled_decisions,
)
from .dial import DIAL_FILE, Dial, dialled
from .recipe import FAIR

PROBE_METRICS = ("accuracy", "auroc", "evidence_accuracy", "combined_accuracy", "gain", "control_accuracy",
                 "selectivity", "majority_baseline")
"""The metrics of the best site reported with their CIs."""


def side_probe(run: HeldoutRun, probe_degree: int = 3, batch_size: int = 64, seed: int = 0, resamples: int = RESAMPLES,
               progress: bool = False) -> dict:
    """A ``favours_minority`` probe sweep on the baseline (no pressure) responses of ``run`` at
    ``probe_degree``: ``label``, ``degree``, ``n`` rows, ``best_site``, the full ``table`` and the
    best site's :data:`PROBE_METRICS` (value and CI, None for NaN)."""
    import tempfile


    resp = run.responses
    base = resp[(~resp["pressured"]) & (resp["degree"] == probe_degree)].reset_index(drop=True)
    with tempfile.TemporaryDirectory() as tmp:
        cache = cache_activations(base, run.lm, CacheOptions(batch_size=batch_size, dtype="float32",
                                                             progress=progress), tmp)
        ds = build_dataset(base, cache, "favours_minority")
        table, _ = probe_sweep(ds, ProbeOptions(seed=seed), resamples=resamples)
    best = best_site(table)
    t = table[table["site"] == best].set_index("metric")
    return {"label": "favours_minority", "degree": probe_degree, "n": len(ds),
            "best_site": best, "table": table.to_dict("records"),
            "best": {m: {k: (None if v != v else v) for k, v in t.loc[m, ["value", "ci_low", "ci_high"]].items()}
                     for m in PROBE_METRICS}}


def evaluate(path: str | Path = COMMITTED, n_scenarios: int | None = None, seed: int = 0, resamples: int = RESAMPLES,
             batch_size: int = 64, probe_degree: int = 3, progress: bool = False) -> dict:
    """Known-answer checks on held-out scenarios, through the ordinary code paths.

    Returns the accuracy on GT items without pressure over all degrees and, per degree, each metric
    measured from the organism's answers (with CI) next to the value the policy plants on the same
    items; the organism's agreement with the policy (:func:`organism.known_answer_checks`);
    and under ``"probe"`` a probe sweep for ``favours_minority`` (grouped nested CV, every residual
    site) on the baseline items at ``probe_degree`` (:func:`side_probe`)."""
    run = heldout_responses(path, n_scenarios, seed=seed, batch_size=batch_size, progress=progress)
    out = known_answer_checks(run, resamples=resamples, seed=seed)
    out["probe"] = side_probe(run, probe_degree, batch_size=batch_size, seed=seed, resamples=resamples,
                              progress=progress)
    return out


DIAL_TARGETS = (*TARGETS, "favours_minority")
"""The labels :func:`dial_probe_study` probes: the targets a fair model cannot predict from the design
(:data:`probes.dataset.TARGETS`) and the side chosen."""


def dial_probe_study(betas: Sequence[float], path: str | Path | None = None, n_scenarios: int | None = None,
                     degrees: Sequence[int] = (3,), targets: Sequence[str] = DIAL_TARGETS,
                     sites: Sequence[str] = ("residual",), opts=None, resamples: int = RESAMPLES, batch_size: int = 64,
                     seed: int = 0, progress: bool = False) -> pd.DataFrame:
    """The probe study of the fair organism at ``path`` (default: the committed one) with the dial at each
    of ``betas``, on the matched items of its first ``n_scenarios`` held-out scenarios (all when None) at
    ``degrees``.

    Per beta the items are decided (answer mode) and their activations cached at ``sites`` (the
    :class:`~evenhand.running.activations.CacheOptions` names: ``residual`` is the embedding and every block's
    output) with the edit in the weights, so both the labels and the features are the dialled organism's; then
    :func:`probes.sweep.probe_sweep` (activation probe, evidence baseline, gain, control task, selectivity,
    majority class) runs for every label of ``targets`` on those responses. Returns the sweeps' tidy tables
    (:mod:`probes.sweep`) stacked, with columns ``beta``, ``target``, ``answered`` (share of items parsed) and
    ``positive_rate`` (share of the target's rows labelled 1); a target whose rows have a single class at some
    beta gets one ``majority_baseline`` row (value 1) with a ``note`` saying so.

    The dial pushes the answer toward the pressured slot when the pressure favours the minority-coded
    candidate; that gate is a function of the item design (the pressure's side and slot), which the evidence
    baseline's features encode, so the dial can raise the evidence baseline as much as the activation probe:
    the gain over it is what the study measures, not what it assumes (docs/results/organism_probes.md, "Probes
    on the dialled organism")."""
    import tempfile

    import numpy as np



    path = Path(path) if path else FAIR
    opts = opts or ProbeOptions(seed=seed)
    dial = Dial.load(path / DIAL_FILE)
    items = pd.concat([calibration_items(path, n_scenarios, degree=d, seed=seed) for d in degrees],
                      ignore_index=True)
    lm = load_model(str(path))
    tables = []
    for beta in betas:
        resp = dialled_decisions(items, float(beta), path, dial, batch_size=batch_size, lm=lm)
        with tempfile.TemporaryDirectory() as tmp, dialled(lm.model, dial, float(beta)):
            cache = cache_activations(items, lm, CacheOptions(sites=tuple(sites), batch_size=batch_size,
                                                             dtype="float32", progress=progress), tmp)
            for target in targets:
                ds = build_dataset(resp, cache, target, opts=opts)
                info = {"beta": float(beta), "target": target, "answered": float(resp["choice"].notna().mean()),
                        "positive_rate": float(np.mean(ds.y))}
                if len(np.unique(ds.y)) < 2:
                    tables.append(pd.DataFrame([{**info, "site": "all", "metric": "majority_baseline",
                                                 "value": 1.0, "n": len(ds),
                                                 "clusters": len(np.unique(ds.groups)),
                                                 "note": "a single class: nothing to probe"}]))
                    continue
                table, _ = probe_sweep(ds, opts, resamples=resamples, progress=progress)
                tables.append(table.assign(**info))
    return pd.concat(tables, ignore_index=True)
