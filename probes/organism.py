"""The organism's probe check: the planted demographic side of the answer must be readable.

:func:`side_probe` runs a probe sweep for ``favours_minority`` (grouped nested CV, every residual
site) on the organism's held-out baseline items at one degree; :func:`evaluate` is the whole
held-out evaluation: the core's known-answer checks
(:func:`evenhand.models.organism.known_answer_checks`) plus this probe, under ``"probe"``.
"""
from __future__ import annotations

from pathlib import Path

from evenhand.models.organism import COMMITTED, HeldoutRun, heldout_responses, known_answer_checks

PROBE_METRICS = ("accuracy", "auroc", "evidence_accuracy", "combined_accuracy", "gain", "control_accuracy",
                 "selectivity", "majority_baseline")
"""The metrics of the best site reported with their CIs."""


def side_probe(run: HeldoutRun, probe_degree: int = 3, batch_size: int = 64, seed: int = 0, resamples: int = 1000,
               progress: bool = False) -> dict:
    """A ``favours_minority`` probe sweep on the baseline (no pressure) responses of ``run`` at
    ``probe_degree``: ``label``, ``degree``, ``n`` rows, ``best_site``, the full ``table`` and the
    best site's :data:`PROBE_METRICS` (value and CI, None for NaN)."""
    import tempfile

    from evenhand.activations import CacheOptions, cache_activations

    from .dataset import build_dataset
    from .logistic import ProbeOptions
    from .sweep import best_site, probe_sweep

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


def evaluate(path: str | Path = COMMITTED, n_scenarios: int | None = None, seed: int = 0, resamples: int = 1000,
             batch_size: int = 64, probe_degree: int = 3, progress: bool = False) -> dict:
    """Known-answer checks on held-out scenarios, through the ordinary code paths.

    Returns the accuracy on GT items without pressure over all degrees and, per degree, each metric
    measured from the organism's answers (with CI) next to the value the policy plants on the same
    items; the organism's agreement with the policy (:func:`evenhand.models.organism.known_answer_checks`);
    and under ``"probe"`` a probe sweep for ``favours_minority`` (grouped nested CV, every residual
    site) on the baseline items at ``probe_degree`` (:func:`side_probe`)."""
    run = heldout_responses(path, n_scenarios, seed=seed, batch_size=batch_size, progress=progress)
    out = known_answer_checks(run, resamples=resamples, seed=seed)
    out["probe"] = side_probe(run, probe_degree, batch_size=batch_size, seed=seed, resamples=resamples,
                              progress=progress)
    return out
