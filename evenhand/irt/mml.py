"""The 2PL by marginal maximum likelihood (Bock and Aitkin 1981's EM over a quadrature of the ability), with a
lognormal prior on the discriminations (Bayes modal, as BILOG-MG's default): the default fit of
:func:`evenhand.irt.fit.fit_2pl` (docs/IRT.md, "Fit").

Ours, in numpy, because the field's implementations do not fit here: girth's ``twopl_mml`` (the reference this
one is checked against, tests/test_irt.py) loops over items in Python and took 49 s on 200 items x 100 runs on
this project's machine, where the whole E step here is two matrix products; py-irt (Bayesian, Fluid
Benchmarking's fit) brings pyro and pins ``pandas<3``. Joint maximum likelihood (girth's ``twopl_jml``, kept as
``method="jml"``) estimates each run's ability as a free parameter, so with tens of runs its discriminations are
inflated and many sit at the bound (docs/IRT.md, "Recovery"); integrating the ability out is what fixes that.

The ability is N(0, 1) over the runs (the scale); ``logit P(correct) = a theta + c``, b = -c / a. Each EM
step: the runs' posteriors over 61 quadrature points (E), then per item a few Newton steps on (a, c) of the
expected complete-data log-likelihood plus the log prior (M), all items at once. a is kept in
[:data:`A_MIN`, :data:`A_MAX`]."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FIT_METHODS = ("mml", "jml")
"""The 2PL fits of :func:`evenhand.irt.fit.fit_2pl`: ``mml`` (this module; the default) and ``jml`` (girth's
joint ML)."""
A_MIN, A_MAX = 0.05, 4.0
"""The discriminations' bounds (girth's JML uses 0.25 and 4): a share of items at a bound is reported."""
NODES = np.linspace(-5.0, 5.0, 61)
"""The quadrature of the ability (N(0, 1) weights on it)."""


@dataclass(frozen=True)
class MMLOptions:
    """The prior and the convergence of :func:`twopl_mml`."""
    a_prior_mean: float = 0.0
    """log a ~ N(a_prior_mean, a_prior_sd); BILOG-MG's default."""
    a_prior_sd: float = 0.5
    """SD of log a; 0 or less: no prior (plain marginal maximum likelihood)."""
    c_prior_sd: float = 3.0
    """The intercept c ~ N(0, c_prior_sd) (weak: keeps an item that almost every run got right finite)."""
    max_iter: int = 500
    tol: float = 1e-4
    """Stop once no parameter moves by more than this in one EM step."""


def _loglik_terms(a, c):
    z = a[:, None] * NODES[None, :] + c[:, None]  # items x nodes
    return -np.logaddexp(0.0, -z), -np.logaddexp(0.0, z), z


def twopl_mml(Y: np.ndarray, options: MMLOptions = MMLOptions(), start: tuple | None = None) -> dict:
    """2PL item parameters of the items x runs 0/1 matrix ``Y`` (no NaN). Returns ``a``, ``b``, ``c``,
    ``iterations``, ``converged`` and ``at_bound`` (per item: a at :data:`A_MIN` or :data:`A_MAX`)."""
    Y = np.asarray(Y, float)
    if Y.ndim != 2 or np.isnan(Y).any():
        raise ValueError("runs: the 2PL fit needs an items x runs 0/1 matrix without missing cells")
    logw = -0.5 * NODES ** 2
    logw -= np.logaddexp.reduce(logw)
    p = Y.mean(axis=1).clip(0.02, 0.98)
    a = np.ones(Y.shape[0]) if start is None else np.asarray(start[0], float).copy()
    c = np.log(p / (1 - p)) * 1.7 if start is None else np.asarray(start[1], float).copy()
    prior = options.a_prior_sd > 0
    it, converged = 0, False
    for it in range(1, options.max_iter + 1):
        lp, lq, _ = _loglik_terms(a, c)
        post = Y.T @ lp + (1 - Y).T @ lq + logw  # runs x nodes
        post = np.exp(post - post.max(axis=1, keepdims=True))
        post /= post.sum(axis=1, keepdims=True)
        r, n = Y @ post, post.sum(axis=0)  # items x nodes, nodes
        a0, c0 = a.copy(), c.copy()
        for _ in range(3):  # Newton on the expected log posterior of each item
            pr = 1.0 / (1.0 + np.exp(-(a[:, None] * NODES + c[:, None])))
            res, w = r - n * pr, n * pr * (1 - pr)
            ga, gc = res @ NODES, res.sum(axis=1)
            haa, hac, hcc = w @ NODES ** 2, w @ NODES, w.sum(axis=1)
            if prior:
                la = np.log(a)
                ga += -(la - options.a_prior_mean) / (options.a_prior_sd ** 2 * a)  # the mode in log a
                haa += 1.0 / (options.a_prior_sd ** 2 * a ** 2)
            gc -= c / options.c_prior_sd ** 2
            hcc += 1.0 / options.c_prior_sd ** 2
            det = haa * hcc - hac ** 2 + 1e-12
            da, dc = (hcc * ga - hac * gc) / det, (haa * gc - hac * ga) / det
            step = np.maximum(1.0, np.maximum(np.abs(da), np.abs(dc)) / 1.0)  # at most 1 per step
            a = np.clip(a + da / step, A_MIN, A_MAX)
            c = c + dc / step
        if max(np.abs(a - a0).max(), np.abs(c - c0).max()) < options.tol:
            converged = True
            break
    return {"a": a, "b": -c / a, "c": c, "iterations": it, "converged": converged,
            "at_bound": (a <= A_MIN * 1.0001) | (a >= A_MAX * 0.9999)}
