"""Probe scores with CIs over scenarios (clusters), vectorised.

``accuracy_ci`` and ``auroc_ci`` resample whole scenarios with replacement
(``resamples`` draws, seeded; :func:`evenhand.inference.stats.row_weights`): a resample is a
vector of cluster multiplicities, so every statistic is a weighted sum and all draws
are computed at once; the interval is the percentile one. Estimates are
:class:`evenhand.inference.stats.Estimate` with ``clusters`` set and NaN bounds where no interval is defined."""
from __future__ import annotations
from typing import get_args

import numpy as np

from evenhand.inference.stats import RESAMPLES
from evenhand.inference.stats import (
    ProbeInterval,
    Estimate,
    jackknife_t_estimate,
    jackknife_weights,
    paired_difference,
    percentile_interval,
    resample_weights,
    row_weights,
)

PAIRED_INTERVALS = get_args(ProbeInterval)
"""The intervals :func:`paired_drop_ci` can give."""
PAIRED_INTERVAL = "jackknife-t"
"""The interval of every paired probe difference (gain, selectivity, ablation drops): the one whose null
coverage held at 10 and 24 scenarios (:mod:`probes.coverage`)."""
POINT_INTERVAL = "percentile"
"""The interval of a single accuracy or AUROC (:func:`accuracy_ci`, :func:`auroc_ci`)."""


def _probe_estimate(point: float, draws: np.ndarray, n: int, clusters: int) -> Estimate:
    """``point`` with the 95% percentile interval of its draws (NaN bounds when none is defined)."""
    lo, hi = percentile_interval(draws) or (np.nan, np.nan)
    return Estimate(float(point), float(lo), float(hi), int(n), clusters=int(clusters))


def accuracy_ci(correct: np.ndarray, groups: np.ndarray, resamples: int = RESAMPLES, seed: int = 0) -> Estimate:
    """Share of ``correct`` with a cluster-bootstrap 95% CI."""
    c = np.asarray(correct, np.float64)
    w = row_weights(groups, resamples, seed)
    draws = (w @ c) / w.sum(1)
    return _probe_estimate(c.mean(), draws, len(c), len(np.unique(groups)))


def _auroc_weighted(score: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """AUROC (ties count one half) for each row of weights ``w`` [B, n]."""
    order = np.argsort(score, kind="stable")
    s, yy, ww = score[order], y[order], w[:, order]
    # group tied scores: within a tie block a positive beats none and ties with all negatives
    _, start = np.unique(s, return_index=True)
    block = np.repeat(np.arange(len(start)), np.diff(np.append(start, len(s))))
    wn = ww * (yy == 0)
    wp = ww * (yy == 1)
    neg_block = np.zeros((ww.shape[0], len(start)))
    np.add.at(neg_block.T, block, wn.T)
    below = np.cumsum(neg_block, 1) - neg_block                              # negatives strictly below
    credit = below[:, block] + 0.5 * neg_block[:, block]
    num = (wp * credit).sum(1)
    den = wp.sum(1) * wn.sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / den, np.nan)


def auroc_ci(prob: np.ndarray, y: np.ndarray, groups: np.ndarray, resamples: int = RESAMPLES, seed: int = 0) -> Estimate:
    """AUROC of ``prob`` for binary ``y`` with a cluster-bootstrap 95% CI."""
    prob = np.asarray(prob, np.float64)
    y = np.asarray(y).astype(int)
    point = _auroc_weighted(prob, y, np.ones((1, len(y))))[0]
    draws = _auroc_weighted(prob, y, row_weights(groups, resamples, seed))
    return _probe_estimate(point, draws, len(y), len(np.unique(groups)))


def _cluster_codes(groups: np.ndarray) -> tuple[np.ndarray, int]:
    uniq, inv = np.unique(np.asarray(groups), return_inverse=True)
    return inv, len(uniq)


def paired_drop_ci(correct_a: np.ndarray, correct_b: np.ndarray, groups: np.ndarray, resamples: int = RESAMPLES,
                   seed: int = 0, interval: str = PAIRED_INTERVAL) -> Estimate:
    """accuracy(a) - accuracy(b) on the same rows with a 95% CI over the scenarios ``groups``: a probe's gain over
    the evidence baseline, its selectivity over the control task, the name-ablation drops.

    ``interval``: ``jackknife-t`` (the default, :data:`PAIRED_INTERVAL`: each scenario left out in turn,
    SE from the k leave-one-out differences, t on k - 1; ``resamples`` and ``seed`` unused),
    ``percentile`` (both arms on the same ``resamples`` resampled scenario sets) or ``studentized``
    (bootstrap-t: each resample's difference minus the point one over its linearised cluster SE).

    The default is the delete-one-scenario jackknife-t (jackknife SE, t quantile on k - 1 degrees of freedom;
    :func:`evenhand.inference.stats.jackknife_t_estimate`), chosen by null coverage at 10 and 24 scenarios
    (:mod:`probes.coverage`, docs/metrics/probes.md "Probes"): the percentile cluster bootstrap under-covers there.
    ``percentile`` (the former interval: the same scenarios resampled for both arms) and ``studentized`` are the
    measured alternatives."""
    a = np.asarray(correct_a, np.float64)
    b = np.asarray(correct_b, np.float64)
    if interval not in PAIRED_INTERVALS:
        raise ValueError(f"interval must be one of {', '.join(PAIRED_INTERVALS)}, got {interval!r}")
    if not (len(a) == len(b) == len(groups)):
        raise ValueError(f"paired hits and groups differ in length: {len(a)}, {len(b)}, {len(groups)}")
    codes, k = _cluster_codes(groups)
    if interval == "percentile":
        w = row_weights(groups, resamples, seed)

        def arm(c: np.ndarray):
            return lambda weights: (weights @ c) / weights.sum(1)
        est = paired_difference(arm(a), arm(b), w, len(a))
        lo, hi = (np.nan, np.nan) if est.ci_low is None else (est.ci_low, est.ci_high)
        return Estimate(est.value, lo, hi, len(a), clusters=k)
    diff = np.bincount(codes, a - b, minlength=k)          # per-scenario sums of the paired difference
    rows = np.bincount(codes, minlength=k).astype(np.float64)
    value = float(diff.sum() / rows.sum())
    if interval == "jackknife-t":
        jw = jackknife_weights(k)
        with np.errstate(invalid="ignore", divide="ignore"):
            loo = (jw @ diff) / (jw @ rows)
        est = jackknife_t_estimate(value, loo, len(a), "the difference", bounds=(-1.0, 1.0))
    else:
        est = _studentized(value, diff, rows, resample_weights(k, resamples, seed), len(a))
    lo, hi = (np.nan, np.nan) if est.ci_low is None else (est.ci_low, est.ci_high)
    return Estimate(value, float(lo), float(hi), len(a), est.note, clusters=k)


def _studentized(value: float, diff: np.ndarray, rows: np.ndarray, w: np.ndarray, n: int) -> Estimate:
    """Bootstrap-t of a ratio of cluster sums ``diff / rows`` on cluster multiplicities ``w`` [B, k]: the SE of
    each resample (and of the point) is the linearised one, sqrt(k / (k - 1) * sum_j w_j r_j^2) / sum_j w_j
    rows_j with r_j = diff_j - theta * rows_j."""
    k = len(diff)
    if k < 2:
        return Estimate(value, None, None, n, f"no interval: the difference rests on {k} scenario", k)

    def se(weights: np.ndarray, theta: np.ndarray) -> np.ndarray:
        r = diff[None, :] - theta[:, None] * rows[None, :]
        return np.sqrt(k / (k - 1) * (weights * r ** 2).sum(1)) / (weights @ rows)
    theta = (w @ diff) / (w @ rows)
    s0 = float(se(np.ones((1, k)), np.array([value]))[0])
    if s0 == 0:
        return Estimate(value, value, value, n, None, k)
    sb = se(w, theta)
    ok = sb > 0
    t = (theta[ok] - value) / sb[ok]
    q_lo, q_hi = np.quantile(t, [0.025, 0.975])
    return Estimate(value, max(-1.0, value - q_hi * s0), min(1.0, value - q_lo * s0), n, None, k)


def majority_baseline(y: np.ndarray) -> float:
    """Accuracy of always predicting the more frequent class."""
    m = float(np.mean(np.asarray(y).astype(int)))
    return max(m, 1 - m)
