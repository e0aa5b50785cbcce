"""The 2PL model's formulas: P(correct) = sigmoid(a (theta - b)), Fisher information a^2 p (1 - p), and an
ability's posterior on a grid under a normal prior (MAP, EAP, posterior SD, central interval). Ours, in numpy:
``girth`` fits the item parameters (:mod:`evenhand.irt.fit`); these serve selection and adaptive testing."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GRID = np.linspace(-5.0, 5.0, 401)
"""The ability grid of :func:`posterior` (step 0.025)."""


def prob(theta, a, b) -> np.ndarray:
    """P(correct) of items (a, b) at abilities ``theta`` (broadcast: theta[..., None] against a, b)."""
    theta, a, b = np.asarray(theta, float), np.asarray(a, float), np.asarray(b, float)
    return 1.0 / (1.0 + np.exp(-a * (theta[..., None] - b)))


def information(theta, a, b) -> np.ndarray:
    """Fisher information a^2 p (1 - p) of items (a, b) at abilities ``theta`` (shape theta.shape + a.shape)."""
    p = prob(theta, a, b)
    return np.asarray(a, float) ** 2 * p * (1.0 - p)


def range_information(a, b, lo: float, hi: float, points: int = 21) -> np.ndarray:
    """Each item's Fisher information averaged over abilities evenly spaced in [lo, hi]."""
    if not hi >= lo:
        raise ValueError(f"the ability range needs lo <= hi, got [{lo}, {hi}]")
    return information(np.linspace(lo, hi, points), a, b).mean(axis=0)


@dataclass(frozen=True)
class Ability:
    """An ability estimate: MAP, EAP, posterior SD and the central 95% posterior interval."""
    map: float
    eap: float
    sd: float
    lo: float
    hi: float
    n_items: int

    def as_dict(self) -> dict:
        return {"theta_map": self.map, "theta_eap": self.eap, "theta_sd": self.sd, "theta_lo": self.lo,
                "theta_hi": self.hi, "n_items": self.n_items}


def _summary(logp: np.ndarray, grid: np.ndarray, n_items: int) -> Ability:
    """The :class:`Ability` of a log posterior on ``grid``."""
    w = np.exp(logp - logp.max())
    w /= w.sum()
    eap = float(w @ grid)
    sd = float(np.sqrt(max(w @ (grid - eap) ** 2, 0.0)))
    cdf = np.cumsum(w)
    lo, hi = float(np.interp(0.025, cdf, grid)), float(np.interp(0.975, cdf, grid))
    return Ability(float(grid[int(np.argmax(logp))]), eap, sd, lo, hi, n_items)


def posterior(y, a, b, prior_mean: float = 0.0, prior_sd: float = 1.0, grid: np.ndarray = GRID) -> Ability:
    """The ability posterior of one responder given 0/1 responses ``y`` to items (a, b) and a normal prior,
    on ``grid``; NaN responses are skipped. With no responses it is the prior."""
    y = np.asarray(y, float)
    seen = ~np.isnan(y)  # only the answered items enter: adaptive testing calls this after every item
    return abilities(y[seen, None], np.asarray(a, float)[seen], np.asarray(b, float)[seen], prior_sd, prior_mean,
                     grid)[0]


def abilities(Y, a, b, prior_sd: float = 1.0, prior_mean: float = 0.0, grid: np.ndarray = GRID) -> list[Ability]:
    """:func:`posterior` of each column of the items x responders matrix ``Y`` (NaN: not answered), all at once."""
    Y, a, b = np.asarray(Y, float), np.asarray(a, float), np.asarray(b, float)
    seen = ~np.isnan(Y)
    right = np.where(seen, Y, 0.0)
    z = a * (grid[:, None] - b)  # grid x items
    logp = (right.T @ -np.logaddexp(0.0, -z).T + (seen * (1 - right)).T @ -np.logaddexp(0.0, z).T
            - 0.5 * ((grid - prior_mean) / prior_sd) ** 2)  # responders x grid
    return [_summary(logp[j], grid, int(seen[:, j].sum())) for j in range(Y.shape[1])]
