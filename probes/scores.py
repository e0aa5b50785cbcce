"""Probe scores with bootstrap CIs over scenarios (clusters), vectorised.

``accuracy_ci`` and ``auroc_ci`` resample whole scenarios with replacement
(``resamples`` draws, seeded); a resample is a vector of cluster multiplicities,
so every statistic is a weighted sum and all draws are computed at once.
``paired_drop_ci`` resamples the same clusters for two predictions on the same
rows (the name-ablation drop).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class Estimate:
    value: float
    ci_low: float
    ci_high: float
    n: int
    clusters: int

    def as_dict(self) -> dict:
        return asdict(self)


def cluster_weights(groups: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """[resamples, n] row weights of a cluster bootstrap over ``groups``: the multiplicity of each
    row's cluster in each of ``resamples`` draws (seeded by ``seed``)."""
    uniq, inv = np.unique(np.asarray(groups), return_inverse=True)
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(len(uniq), np.full(len(uniq), 1 / len(uniq)), size=resamples)
    return counts[:, inv].astype(np.float64)


def _ci(point: float, draws: np.ndarray, n: int, clusters: int, level: float = 0.95) -> Estimate:
    draws = draws[np.isfinite(draws)]
    a = (1 - level) / 2
    lo, hi = (np.quantile(draws, [a, 1 - a]) if len(draws) else (np.nan, np.nan))
    return Estimate(float(point), float(lo), float(hi), int(n), int(clusters))


def accuracy_ci(correct: np.ndarray, groups: np.ndarray, resamples: int = 1000, seed: int = 0) -> Estimate:
    """Share of ``correct`` with a cluster-bootstrap 95% CI."""
    c = np.asarray(correct, np.float64)
    w = cluster_weights(groups, resamples, seed)
    draws = (w @ c) / w.sum(1)
    return _ci(c.mean(), draws, len(c), len(np.unique(groups)))


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


def auroc_ci(prob: np.ndarray, y: np.ndarray, groups: np.ndarray, resamples: int = 1000, seed: int = 0) -> Estimate:
    """AUROC of ``prob`` for binary ``y`` with a cluster-bootstrap 95% CI."""
    prob = np.asarray(prob, np.float64)
    y = np.asarray(y).astype(int)
    point = _auroc_weighted(prob, y, np.ones((1, len(y))))[0]
    draws = _auroc_weighted(prob, y, cluster_weights(groups, resamples, seed))
    return _ci(point, draws, len(y), len(np.unique(groups)))


def paired_drop_ci(correct_a: np.ndarray, correct_b: np.ndarray, groups: np.ndarray, resamples: int = 1000,
                   seed: int = 0) -> Estimate:
    """accuracy(a) - accuracy(b) on the same rows, clusters resampled jointly."""
    a = np.asarray(correct_a, np.float64)
    b = np.asarray(correct_b, np.float64)
    w = cluster_weights(groups, resamples, seed)
    draws = (w @ (a - b)) / w.sum(1)
    return _ci(a.mean() - b.mean(), draws, len(a), len(np.unique(groups)))


def majority_baseline(y: np.ndarray) -> float:
    """Accuracy of always predicting the more frequent class."""
    m = float(np.mean(np.asarray(y).astype(int)))
    return max(m, 1 - m)
