"""Estimates with confidence intervals: the jackknife-t and the cluster bootstrap, and the paired comparison.

Every interval in EvenHand is over *clusters* (scenarios; templates for BBQ), 95% by default, and is one
of :data:`INTERVAL_NAMES`: the suite's metrics, their paired differences and the probes' paired gains use
the jackknife-t over scenarios (:func:`jackknife_t_estimate`); the probes' accuracies and AUROC, the
attribution means and BBQ use the percentile cluster bootstrap. One bootstrap resample draws the k clusters
with replacement (a multinomial vector of cluster multiplicities); a statistic of per-cluster sums is then,
for all resamples at once, one matrix product ``weights (R x k) @ sums (k x C)`` (:func:`resample_weights`,
:func:`cluster_sums`); a statistic over rows takes each row's cluster multiplicity (:func:`row_weights`).

A paired comparison (:func:`paired_difference`) evaluates two arms on the *same*
resampled clusters, so what the arms share cancels out of the interval."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal, get_args

import numpy as np

ALPHA = 0.05
"""Two-sided error rate of every interval: 95% intervals, quantiles 0.025 and 0.975."""
FEW_CLUSTERS = 10
"""Below this many clusters an interval's note warns that it rests on few scenarios."""

SeedLike = int | Sequence[int] | np.random.Generator
Arm = Callable[[np.ndarray], np.ndarray]
"""A statistic of resample weights: (R, m) weights -> (R,) values (NaN where undefined)."""

PairedInterval = Literal["jackknife-t", "percentile"]
"""The intervals of a paired comparison (:mod:`evenhand.scoring.paired`, the dose-response study)."""
MetricInterval = Literal[PairedInterval, "iid"]
"""The intervals of the suite's metrics (:mod:`evenhand.scoring.metrics`); iid ignores the scenarios (a foil)."""
ProbeInterval = Literal[PairedInterval, "studentized"]
"""The intervals of a probe's paired accuracy drop (:mod:`probes.scores`)."""
Interval = Literal[MetricInterval, ProbeInterval]
"""Every interval method; each estimate takes the ones its type above lists."""
INTERVALS = get_args(Interval)
INTERVAL_NAMES = {"jackknife-t": "jackknife-t over scenarios",
                  "percentile": "percentile cluster bootstrap over scenarios",
                  "studentized": "studentized cluster bootstrap over scenarios",
                  "iid": "iid binomial (ignores scenarios)"}
"""Each interval's name in help, printouts, pages and manifests (one name per interval)."""


@dataclass(frozen=True)
class BootstrapOptions:
    """How an estimate's interval is drawn: the method, and the cluster bootstrap's resamples and seed (read
    only by bootstrap intervals; the jackknife-t takes none). The one home of their defaults and of the
    ``--resamples``/``--seed``/``--interval`` flags."""
    resamples: int = 1000
    """Cluster-bootstrap resamples (bootstrap intervals only; the jackknife-t resamples nothing)."""
    seed: int = 0
    """Seed of the cluster bootstrap (bootstrap intervals only)."""
    interval: Interval | None = None
    """Interval method: jackknife-t | percentile | iid | studentized (default: the estimate's own)."""

    @classmethod
    def of(cls, bootstrap: BootstrapOptions | None = None, resamples: int | None = None,
           seed: int | None = None) -> BootstrapOptions:
        """``bootstrap`` (default: the defaults) with the older keywords ``resamples``/``seed`` applied where
        given."""
        opts = bootstrap or cls()
        given = {k: v for k, v in (("resamples", resamples), ("seed", seed)) if v is not None}
        return replace(opts, **given) if given else opts


RESAMPLES = BootstrapOptions.resamples
"""The default bootstrap resamples (:class:`BootstrapOptions`), for the signatures that take ``resamples``."""


@dataclass(frozen=True)
class Estimate:
    """A point value with its bootstrap interval.

    ``value``, ``ci_low`` and ``ci_high`` are None when undefined (the suite's metrics)
    or NaN (probe tables); ``n`` counts the units behind the value; ``note`` says why a
    value or interval is missing or rests on fewer resamples; ``clusters`` is the number
    of clusters resampled, where a table reports it."""
    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    note: str | None = None
    clusters: int | None = None

    def as_dict(self, *fields: str) -> dict:
        """The named ``fields`` as a dict; by default value, ci_low, ci_high, n and note."""
        return {f: getattr(self, f) for f in (fields or ("value", "ci_low", "ci_high", "n", "note"))}


def resample_weights(n_clusters: int, resamples: int, rng: SeedLike) -> np.ndarray:
    """(resamples, n_clusters) float multiplicities: each row one multinomial draw of the clusters.

    ``rng`` is a generator or a seed for :func:`numpy.random.default_rng`; the draws are
    ``rng.multinomial(n_clusters, [1/n_clusters] * n_clusters, size=resamples)``."""
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    return rng.multinomial(n_clusters, np.full(n_clusters, 1.0 / n_clusters), size=resamples).astype(np.float64)


def row_weights(groups: np.ndarray, resamples: int, rng: SeedLike) -> np.ndarray:
    """(resamples, n_rows) weights: the multiplicity of each row's cluster in each resample.

    Clusters are the sorted unique values of ``groups``, drawn as :func:`resample_weights`."""
    uniq, inv = np.unique(np.asarray(groups), return_inverse=True)
    return resample_weights(len(uniq), resamples, rng)[:, inv]


def cluster_sums(codes: np.ndarray, values: np.ndarray, n_clusters: int) -> np.ndarray:
    """(n_clusters, C) sums of the rows of ``values`` (N, C) by cluster code (0 .. n_clusters-1)."""
    out = np.zeros((n_clusters, values.shape[1]))
    np.add.at(out, codes, values)
    return out


def interval_bounds(draws: np.ndarray, alpha: float = ALPHA) -> np.ndarray:
    """The (alpha/2, 1 - alpha/2) quantiles of ``draws`` along the first axis (shape (2, ...))."""
    return np.quantile(draws, [alpha / 2, 1 - alpha / 2], axis=0)


def percentile_interval(draws: np.ndarray, alpha: float = ALPHA) -> tuple[float, float] | None:
    """The percentile interval of the defined (finite) draws; None when no draw is defined."""
    draws = np.asarray(draws, np.float64)
    ok = draws[np.isfinite(draws)]
    if ok.size == 0:
        return None
    lo, hi = interval_bounds(ok, alpha)
    return float(lo), float(hi)


def bootstrap_estimate(value: float, draws: np.ndarray, n: int, what: str = "the metric",
                       alpha: float = ALPHA) -> Estimate:
    """``value`` with the percentile interval of its bootstrap ``draws``.

    Resamples on which the statistic is undefined (NaN) are left out of its interval, and the note says so:
    no defined draw: no interval, and the note says no resample defined ``what``; some
    undefined draws: the interval of the others, and the note says how many."""
    draws = np.asarray(draws, np.float64)
    interval = percentile_interval(draws, alpha)
    if interval is None:
        return Estimate(value, None, None, n, f"no bootstrap resample defined {what}")
    defined = int(np.isfinite(draws).sum())
    note = None if defined == len(draws) else f"CI from the {defined} of {len(draws)} resamples that define it"
    return Estimate(value, interval[0], interval[1], n, note)


def paired_difference(arm_a: Arm, arm_b: Arm, weights: np.ndarray, n: int, alpha: float = ALPHA) -> Estimate:
    """arm_a - arm_b, both evaluated on the same resampled clusters.

    Each arm maps (R, m) weights (cluster weights, or row weights from
    :func:`row_weights`) to R values; the point value is the arms on unit weights
    (every cluster once), the draws are the arms on ``weights``. When an
    arm is undefined on the data the estimate has no value."""
    unit = np.ones((1, weights.shape[1]))
    va, vb = arm_a(unit)[0], arm_b(unit)[0]
    if np.isnan(va) or np.isnan(vb):
        return Estimate(None, None, None, n, "insufficient data in one of the runs")
    return bootstrap_estimate(float(va - vb), arm_a(weights) - arm_b(weights), n, "the difference", alpha)


def jackknife_weights(n_clusters: int) -> np.ndarray:
    """(k, k) cluster weights of the delete-one-cluster jackknife: row i leaves cluster i out."""
    return 1.0 - np.eye(n_clusters)


def jackknife_t_estimate(value: float, leave_one_out: np.ndarray, n: int, what: str = "the metric",
                         alpha: float = ALPHA, bounds: tuple[float, float] | None = None,
                         se_floor: float = 0.0) -> Estimate:
    """``value`` with a jackknife-t interval over clusters.

    ``leave_one_out`` holds the statistic with each of the k clusters left out in turn. The standard
    error is the jackknife one, sqrt((k-1)/k * sum((theta_i - mean)^2)), and the interval is
    value +/- t_{k-1, 1-alpha/2} * se, clipped to ``bounds`` (the statistic's range) when given. The
    half-width is at least z_{1-alpha/2} * ``se_floor`` (for the suite's metrics, the binomial SE of
    independent items with one pseudo-success and one pseudo-failure per proportion): with few items
    the jackknife often sees no variation at all (every item correct, say) and would give an interval
    of zero width.
    Fewer than two clusters, or a cluster whose removal leaves the statistic undefined (all of a
    component's items in one scenario), give no interval and a note saying why; fewer than
    :data:`FEW_CLUSTERS` clusters give an interval with a note that it rests on few scenarios.

    Why not the percentile bootstrap: with few clusters it is too narrow (its variance is the plug-in one,
    short by (k-1)/k, and its quantiles are those of a normal, not a t with k-1 degrees of freedom): on random
    answers to the smoke subset its per-degree 95% intervals excluded the true null far more often than 5%.
    The suite's metrics therefore use this interval, chosen by the coverage study in
    ``benchmarks/interval_coverage.py`` (numbers in docs/METRICS.md). The paired comparisons of
    :mod:`evenhand.scoring.paired` use the same interval (delete-one-scenario jackknife of the difference,
    both arms on the same leave-one-out scenarios), chosen by that study's paired null arms (``--paired``);
    :func:`holm` adjusts a family of their p-values."""
    from scipy.stats import t as student_t

    loo = np.asarray(leave_one_out, np.float64)
    k = int(loo.size)
    if k < 2:
        return Estimate(value, None, None, n, f"no interval: {what} rests on {k} scenario", k)
    if not np.isfinite(loo).all():
        alone = int((~np.isfinite(loo)).sum())
        return Estimate(value, None, None, n, f"no interval: {alone} of {k} scenarios hold all of a component's "
                                               f"items, so leaving one out leaves {what} undefined", k)
    from scipy.stats import norm

    se = jackknife_se(loo)
    half = max(float(student_t.ppf(1 - alpha / 2, k - 1)) * se, float(norm.ppf(1 - alpha / 2)) * se_floor)
    lo, hi = value - half, value + half
    if bounds is not None:
        lo, hi = max(lo, bounds[0]), min(hi, bounds[1])
    note = f"only {k} scenarios: the interval is approximate" if k < FEW_CLUSTERS else None
    return Estimate(value, lo, hi, n, note, k)


def rate_interval(k: int, n: int, alpha: float = ALPHA) -> tuple[float, float] | None:
    """The Wilson score interval of a rate ``k / n`` (a false-positive rate or a coverage over ``n``
    independent replications); None when ``n`` is 0. Unlike the Wald interval it stays inside [0, 1] and is
    not of zero width at ``k`` 0 or ``n``: 0 of 40 gives [0, 0.088]."""
    from scipy.stats import norm

    if n <= 0:
        return None
    if not 0 <= k <= n:
        raise ValueError(f"a rate needs 0 <= k <= n, got k={k}, n={n}")
    z = float(norm.ppf(1 - alpha / 2))
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def jackknife_se(leave_one_out: np.ndarray) -> float:
    """The delete-one-cluster jackknife standard error, sqrt((k-1)/k * sum((theta_i - mean)^2)); NaN when
    fewer than two values or any is undefined."""
    loo = np.asarray(leave_one_out, np.float64)
    k = loo.size
    if k < 2 or not np.isfinite(loo).all():
        return float("nan")
    return float(np.sqrt((k - 1) / k * np.sum((loo - loo.mean()) ** 2)))


def t_p_value(value: float, se: float, df: float) -> float:
    """Two-sided p-value of ``value / se`` against a t on ``df`` degrees of freedom (1 at value 0; 0 at a
    nonzero value with se 0; NaN where undefined)."""
    from scipy.stats import t as student_t

    if value is None or not np.isfinite(value) or not np.isfinite(se) or not df > 0:
        return float("nan")
    if se == 0:
        return 1.0 if value == 0 else 0.0
    return float(min(1.0, 2 * student_t.sf(abs(value) / se, df)))


def holm(p_values) -> np.ndarray:
    """Holm's step-down adjustment of a family of p-values (NaN entries stay NaN and are not counted in
    the family): the i-th smallest of m is adjusted to max_{j <= i} min(1, (m - j + 1) p_(j)). Holm (1979),
    Scand. J. Statist. 6:65-70; written here because statsmodels is not a dependency."""
    p = np.asarray(p_values, np.float64)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    m = ok.size
    if m == 0:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    adj = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(adj)
    return out
