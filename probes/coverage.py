"""Which interval do the paired probe differences need? Null coverage at 10 and 24 scenarios.

A probe's gain (design + activations minus the evidence baseline) and selectivity (probe minus control task) are
differences of two predictors' accuracies on the same rows, with an interval over scenarios
(:func:`probes.scores.paired_drop_ci`). The null: two predictors of *equal true accuracy*, so the true difference is
0 and an interval covering 0 counts as covered. Two nulls, both exchangeable (swapping the predictors leaves the
distribution unchanged, so their expected accuracies are equal exactly): ``hits`` (:func:`null_hits`) and ``probes``
(:func:`null_probes`). :func:`null_coverage` counts, over seeds, how often each interval of
:data:`probes.scores.PAIRED_INTERVALS` covers 0; :func:`coverage_table` runs it at several scenario counts.
Command (numbers in docs/METRICS.md)::

    python -m probes.coverage --null hits --scenarios 10 24 --seeds 2000
    python -m probes.coverage --null probes --scenarios 10 24 --seeds 300
"""
from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence

import numpy as np

from evenhand.support.options import add_flags
from evenhand.inference.stats import BootstrapOptions
from .scores import PAIRED_INTERVALS, paired_drop_ci
from .logistic import ProbeOptions, fit_sites
from evenhand.inference.stats import rate_interval

NULLS = ("hits", "probes")


def null_hits(k: int, m: int, rng: np.random.Generator, accuracy: float = 0.85, base_sd: float = 0.5,
              scenario_sd: float = 0.8, item_sd: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(hits of predictor a, hits of predictor b, scenario of every row): ``k`` scenarios of ``m`` rows, two
    exchangeable predictors (module docstring); ``accuracy`` sets the base logit.

    The two predictors' hits are drawn directly. Scenario s has a base logit ``mu + N(0, base_sd)``; each
    predictor its own scenario deviation ``N(0, scenario_sd)`` (one predictor is better on some scenarios, the
    other on others: the between-scenario spread of the difference that an interval over scenarios is for); each
    item a difficulty ``N(0, item_sd)`` shared by both (the pairing)."""
    from scipy.special import expit, logit
    base = logit(accuracy) + rng.normal(0, base_sd, k)
    dev = rng.normal(0, scenario_sd, (2, k))
    groups = np.repeat(np.arange(k), m)
    item = rng.normal(0, item_sd, k * m)
    p = expit(base[groups] + dev[:, groups] + item)
    hits = rng.random(p.shape) < p
    return hits[0], hits[1], groups


def null_probes(k: int, m: int, rng: np.random.Generator, d: int = 6, strength: float = 0.8, opts=None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(out-of-fold hits of probe a, of probe b, scenario of every row): two probes fitted with the sweep's
    nested grouped CV to two exchangeable feature blocks of ``d`` dimensions (module docstring).

    The probes are fitted by :func:`probes.logistic.fit_sites` (the sweep's folds) to two feature blocks that carry
    the label along a planted direction with a strength drawn per scenario and block (uniform on
    ``[0, 2 * strength]``); out-of-fold predictions, as in the sweep."""
    opts = opts or ProbeOptions(folds=5, inner_folds=3, Cs=(0.01, 0.1, 1.0), solver="torch")
    groups = np.repeat(np.arange(k), m)
    y = rng.integers(0, 2, k * m)
    Xs = []
    for _ in range(2):
        u = rng.normal(size=d)
        u /= np.linalg.norm(u)
        r = rng.uniform(0, 2 * strength, k)[groups]
        Xs.append(rng.normal(size=(k * m, d)) + np.outer((2 * y - 1) * r, u))
    a, b = fit_sites(Xs, y, groups, opts)
    return (a.prob >= 0.5) == (y == 1), (b.prob >= 0.5) == (y == 1), groups


def null_coverage(k: int, seeds: int, null: str = "hits", m: int | None = None, resamples: int | None = None,
                  intervals: Sequence[str] | None = None, seed: int = 0,
                  bootstrap: BootstrapOptions | None = None) -> dict:
    """Over ``seeds`` draws of the ``null`` at ``k`` scenarios of ``m`` rows (default: 152 for ``hits``, the
    dial study's rows per scenario; 60 for ``probes``): per interval, the share of 95% intervals covering 0
    (``coverage``), with its Wilson interval and the mean width. ``intervals`` default to every paired one
    (:data:`~probes.scores.PAIRED_INTERVALS`); ``bootstrap`` gives the resamples and, when it sets one, the only
    interval (``seed`` seeds the nulls; each draw's bootstrap is seeded by its index)."""
    boot = BootstrapOptions.of(bootstrap, resamples)
    resamples = boot.resamples
    intervals = intervals or ((boot.interval,) if boot.interval else PAIRED_INTERVALS)
    if null not in NULLS:
        raise ValueError(f"null must be one of {', '.join(NULLS)}, got {null!r}")
    m = m or (152 if null == "hits" else 60)
    covered = {i: 0 for i in intervals}
    width = {i: 0.0 for i in intervals}
    t0 = time.perf_counter()
    for s in range(seeds):
        rng = np.random.default_rng([seed, k, s])
        a, b, groups = (null_hits if null == "hits" else null_probes)(k, m, rng)
        for i in intervals:
            est = paired_drop_ci(a, b, groups, resamples, seed=s, interval=i)
            covered[i] += bool(est.ci_low <= 0 <= est.ci_high)
            width[i] += (est.ci_high - est.ci_low) / seeds
    return {"null": null, "scenarios": k, "rows_per_scenario": m, "seeds": seeds, "resamples": resamples,
            "seconds": round(time.perf_counter() - t0, 1),
            "intervals": {i: {"coverage": covered[i] / seeds, "wilson": rate_interval(covered[i], seeds),
                              "mean_width": width[i]} for i in intervals}}


def coverage_table(scenarios: Sequence[int] = (10, 24), seeds: int = 1000, null: str = "hits", **kw) -> list[dict]:
    """:func:`null_coverage` at each scenario count."""
    return [null_coverage(k, seeds, null, **kw) for k in scenarios]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--null", default="hits", choices=NULLS, help="hits: the dial study's rows; probes: probe fits")
    p.add_argument("--scenarios", type=int, nargs="+", default=[10, 24], help="scenario counts (default 10 24)")
    p.add_argument("--seeds", type=int, default=1000, help="draws of the null per scenario count")
    add_flags(p, BootstrapOptions, ["resamples"])
    p.add_argument("--rows", type=int, default=None, help="rows per scenario")
    p.add_argument("--out", default=None, help="also write the results as JSON")
    a = p.parse_args(argv)
    res = coverage_table(a.scenarios, a.seeds, a.null, m=a.rows, resamples=a.resamples)
    for r in res:
        print(f"{r['null']} null, {r['scenarios']} scenarios x {r['rows_per_scenario']} rows, {r['seeds']} seeds "
              f"({r['seconds']} s):")
        for i, v in r["intervals"].items():
            lo, hi = v["wilson"]
            print(f"  {i:<12} coverage {v['coverage']:.3f} [{lo:.3f}, {hi:.3f}]  mean width {v['mean_width']:.4f}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
