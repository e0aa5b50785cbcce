"""Scenario-level random effects for the simulated model, and the planted values they imply.

Real models do not err independently item by item: some scenarios draw more of a lean toward the
minority-coded candidate than others. :class:`~evenhand.models.simulated.SimulatedModel` plants this
as a random intercept on the logit scale. Each scenario ``s`` draws ``u_s ~ N(0, scenario_sd^2)`` and
each (scenario, contrast) pair draws ``v_sc ~ N(0, scenario_contrast_sd^2)``, independently; an item
of that scenario and contrast has ``e = u_s + v_sc``, so ``e ~ N(0, sigma^2)`` with
``sigma^2 = scenario_sd^2 + scenario_contrast_sd^2``. Every decision probability ``p`` of the planted
policy is moved to :func:`shift` ``(p, s*e) = expit(logit(p) + s*e)``, where ``s = +1`` when the
action it is the probability of favours the minority-coded candidate and ``-1`` when it favours the
majority-coded one. The refusal probability gets its own intercept ``e_r`` of the same variance,
drawn independently (unsigned: a refusal favours no one), so refusals stay independent of choices."""
from __future__ import annotations

import math
from collections.abc import Callable
from statistics import NormalDist

import numpy as np

_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(80)
_WEIGHTS = _WEIGHTS / _WEIGHTS.sum()  # probabilists' Hermite: E[f(Z)], Z ~ N(0, 1)
_NORMAL = NormalDist()


def shift(p: float | np.ndarray, e: float | np.ndarray) -> float | np.ndarray:
    """``expit(logit(p) + e)``; p of exactly 0 or 1 is left where it is."""
    p = np.asarray(p, np.float64)
    with np.errstate(divide="ignore"):
        logit = np.log(p) - np.log1p(-p)
    out = 1.0 / (1.0 + np.exp(-(logit + e)))
    out = np.where((p <= 0) | (p >= 1), p, out)
    return float(out) if out.ndim == 0 else out


def normal_from_uniform(u: float) -> float:
    """The standard normal quantile of ``u`` in (0, 1) (u of 0 is moved to the smallest positive double)."""
    return _NORMAL.inv_cdf(min(max(u, 2.0 ** -53), 1.0 - 2.0 ** -53))


def expect(fn: Callable[[np.ndarray], np.ndarray], sd: float) -> float:
    """``E[fn(e)]`` for ``e ~ N(0, sd^2)`` by 80-node Gauss-Hermite quadrature (``fn`` vectorised)."""
    return float(np.dot(_WEIGHTS, fn(sd * _NODES)))


def planted_values(rates: dict[str, float], sd: float) -> dict[str, float]:
    """The population components of the planted policy with effects of total sd ``sd``.

    ``rates``: the no-effect probabilities at one degree: ``acc_min`` / ``acc_maj`` (a correct GT
    baseline when the truth favours the minority / majority), ``lean_hi`` / ``lean_lo`` (an AMB
    baseline favouring the minority when the position bias helps / hinders it), ``flip_min`` /
    ``flip_maj`` (following pro-minority / pro-majority pressure toward the weaker candidate),
    ``shift_min`` / ``shift_maj`` (following AMB pressure) and ``refusal``. Returns ``acc_min``,
    ``acc_maj``, ``tielean``, ``flip_min``, ``flip_maj``, ``shift_min``, ``shift_maj``, ``refusal``.

    Because ``expit`` is not linear, the effects change the population values. The planted truth with effects is
    defined as the expectation over the effects (``e ~ N(0, sigma^2)``), computed by Gauss-Hermite quadrature
    (:func:`expect`, 80 nodes: exact to about 1e-12 here) for a suite whose GT truth, slot and polarity
    arrangements are balanced, as the suite's are. The ratio metrics (FragGap's and TieShift's rates) condition on
    the baseline answer, which shares the item's ``e``: their truth is ``E[P(baseline) * P(move)] / E[P(baseline)]``,
    not ``E[P(move)]``. The effects are symmetric around 0, so a policy that is fair without them (degree 0) stays
    fair with them."""
    r = rates
    out = {"acc_min": expect(lambda e: shift(r["acc_min"], e), sd),
           "acc_maj": expect(lambda e: shift(r["acc_maj"], -e), sd),
           "refusal": expect(lambda e: shift(r["refusal"], e), sd)}
    leans = (r["lean_hi"], r["lean_lo"])
    out["tielean"] = sum(expect(lambda e, p=p: shift(p, e), sd) for p in leans) / 2
    # pro-minority pressure toward the weaker candidate: the truth favours the majority
    out["flip_min"] = (expect(lambda e: shift(r["acc_maj"], -e) * shift(r["flip_min"], e), sd)
                       / expect(lambda e: shift(r["acc_maj"], -e), sd))
    out["flip_maj"] = (expect(lambda e: shift(r["acc_min"], e) * shift(r["flip_maj"], -e), sd)
                       / expect(lambda e: shift(r["acc_min"], e), sd))
    # TieShift's rates condition on the AMB baseline having favoured the other side
    out["shift_min"] = (sum(expect(lambda e, p=p: (1 - shift(p, e)) * shift(r["shift_min"], e), sd) for p in leans)
                        / sum(expect(lambda e, p=p: 1 - shift(p, e), sd) for p in leans))
    out["shift_maj"] = (sum(expect(lambda e, p=p: shift(p, e) * shift(r["shift_maj"], -e), sd) for p in leans)
                        / sum(expect(lambda e, p=p: shift(p, e), sd) for p in leans))
    return out


def latent_icc(scenario_sd: float, scenario_contrast_sd: float = 0.0) -> dict[str, float]:
    """Latent-scale (logit) ICCs: ``scenario`` for two items of one scenario and different contrasts,
    ``scenario_contrast`` for two items of one scenario and contrast (residual variance pi^2/3).

    The intra-class correlation of the "favours the minority" outcome on the latent logit scale: items of one
    scenario share ``scenario_sd^2 / (sigma^2 + pi^2/3)``. On the observed 0/1 scale it depends on ``p``
    (:func:`observed_icc`)."""
    total = scenario_sd ** 2 + scenario_contrast_sd ** 2 + math.pi ** 2 / 3
    return {"scenario": scenario_sd ** 2 / total,
            "scenario_contrast": (scenario_sd ** 2 + scenario_contrast_sd ** 2) / total}


def observed_icc(p: float, scenario_sd: float, scenario_contrast_sd: float = 0.0) -> float:
    """The ICC of a 0/1 outcome of probability ``shift(p, e)`` between two items of one scenario and
    different contrasts: ``Var_u(E_v[shift(p, u + v)]) / (pbar (1 - pbar))`` (nested quadrature)."""
    def given_u(u: np.ndarray) -> np.ndarray:
        return np.array([expect(lambda v, x=x: shift(p, x + v), scenario_contrast_sd) for x in np.atleast_1d(u)])
    mean = expect(given_u, scenario_sd)
    var = expect(lambda u: (given_u(u) - mean) ** 2, scenario_sd)
    return float(var / (mean * (1 - mean))) if 0 < mean < 1 else 0.0
