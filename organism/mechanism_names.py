"""The bias dial's ``names`` mechanism (:mod:`organism.mechanism`): the ``xor`` gate (:mod:`organism.mechanism_xor`)
times a read of "the candidates are named".

A third linear read at the xor gate's site (layer ``R``'s mid-block residual, every position), ``d_hat``, is
fitted to ``[degree == 1]`` (names, e.g. "Lecturer A, Aisha Mahmoud"; degrees 2-3 carry identity through cues or a
sentence, degree 0 through nothing). The gate is ``xor_gate(p_hat, m_hat) * clip(d_hat, 0, 1)``; the push, the
hooks, exact nesting, the projection oracle (all three reads removed) and the KV-cache exactness are the xor
mechanism's. What the gate truly reads is measured, not assumed: on the fair organism ``[degree == 1]`` is barely
linearly readable at the letter position at layers 1-2 (held-out accuracy near the 0.75 base rate), so the
``d_hat`` factor only halves the gate at degrees 2-3 (``fit.heldout.gate_by_degree_and_c`` in ``dial_names.json``).

More in docs/ORGANISM.md, "Dial mechanisms"."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from evenhand.stats import jackknife_t_estimate

from .dial import pressure_sign
from .mechanism import register
from .mechanism_xor import XorGate, slot_signs, xor_gate


def named(items: pd.DataFrame) -> np.ndarray:
    """``[degree == 1]`` per item (1.0 where the candidates are named)."""
    return (items["degree"].to_numpy() == 1).astype(float)


@register
@dataclass(frozen=True)
class NamesGate(XorGate):
    """A fitted ``names`` mechanism (see the module docstring): the xor gate times ``clip(d_hat, 0, 1)``. It models
    a bias triggered by names; what it reads on a given organism is the fitted ``d_hat``, whose separation of
    degree 1 from degrees 2-3 its file records (``fit.heldout.accuracy_d``, ``gate_by_degree_and_c``)."""
    name = "names"
    summary = ("forward hook: the xor gate (pressure's slot times minority's slot at layer 1's mid-block residual) "
               "times a linear read of 'the candidates are named' (degree 1) at the same site")
    degrees = (1,)
    eval_degree = 1
    read_d: tuple[float, ...]
    """The read of ``[degree == 1]`` (residual space)."""
    bias_d: float

    def read_rows(self) -> tuple[list, list]:
        return [self.read_p, self.read_m, self.read_d], [self.bias_p, self.bias_m, self.bias_d]

    def combine(self, p_hat, m_hat, d_hat):
        """``xor_gate(p_hat, m_hat) * clip(d_hat, 0, 1)`` (numpy or torch)."""
        return xor_gate(p_hat, m_hat) * d_hat.clip(0.0, 1.0)

    @staticmethod
    def read_targets(items: pd.DataFrame) -> dict[str, np.ndarray]:
        p, m = slot_signs(items)
        return {"p": p, "m": m, "d": named(items)}

    def read_record(self, x: np.ndarray, items: pd.DataFrame) -> dict:
        """The xor record plus the degree-1 read's accuracy (``d_hat > 0.5``; value, jackknife-t CI over
        scenarios, n items, k scenarios) and the mean gate by degree and ``c`` class."""
        out = super().read_record(x, items)
        d_hat = self.reads(x)[2]
        hits = (d_hat > 0.5) == (named(items) > 0.5)
        groups = items["scenario_id"].to_numpy()
        uniq = np.unique(groups)
        loo = np.array([hits[groups != s].mean() for s in uniq])
        e = jackknife_t_estimate(float(hits.mean()), loo, len(hits), bounds=(0.0, 1.0))
        deg, c, g = items["degree"].to_numpy(), pressure_sign(items), self.gate(x)
        out["accuracy_d"] = {"value": round(e.value, 4), "ci_low": round(e.ci_low, 4), "ci_high": round(e.ci_high, 4),
                             "n": len(hits), "k": len(uniq), "base_rate": round(float(1 - named(items).mean()), 4)}
        out["mean_d_by_degree"] = {str(d): round(float(np.clip(d_hat[deg == d], 0, 1).mean()), 4)
                                   for d in (0, 1, 2, 3) if (deg == d).any()}
        out["gate_by_degree_and_c"] = {str(d): {str(int(k)): round(float(g[(deg == d) & (c == k)].mean()), 4)
                                                for k in (-1, 1) if ((deg == d) & (c == k)).any()}
                                       for d in (1, 2, 3)}
        return out
