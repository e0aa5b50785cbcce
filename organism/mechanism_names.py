"""The bias dial's ``names`` mechanism (:mod:`organism.mechanism`): the ``xor`` gate (:mod:`organism.mechanism_xor`)
times a read of "the candidates are named", pooled over the prompt.

``d = clip(<w, mean of h over the prompt's real positions> + b, 0, 1)``, ``h`` the xor gate's site (layer ``R``'s
mid-block residual), ``w, b`` ridge least squares of ``[degree == 1]`` (names, e.g. "Lecturer A, Aisha
Mahmoud"; degrees 2-3 carry identity through cues or a sentence, degree 0 through nothing). The organism carries
degree at the criterion value and name tokens, not at the letter, so the read pools. The gate at each position is
``xor_gate(p_hat, m_hat) * d``. Positions follow :mod:`organism.mechanism_decision`'s rules: with answer-token
counts declared (one pass, no cache) ``d`` pools the prompt positions only; a prompt's first pass pools every real
(unpadded: the attention mask) position and stores ``d``; a one-token decode step uses the stored ``d`` (none
stored: an error); a longer pass extending a cache is refused. The push, nesting and the projection oracle are
the xor mechanism's (the projection also sets ``d``'s read to 0).

More in docs/results/organism_mechanisms.md, "What the `names` gate truly reads here"."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from evenhand.models.loading import load_model
from evenhand.inference.stats import jackknife_t_estimate

from .dial import fit_check_items, pressure_sign
from .mechanism import MechanismError, register
from .mechanism_hooks import GateHooks
from .mechanism_xor import XorGate, mid_residuals, ridge_read, xor_gate
from .recipe import FAIR

DEGREE_RIDGE = 0.01
"""The degree read's ridge (:func:`~organism.mechanism_xor.ridge_read`): held-out accuracy 0.999 at layer 1's
mid-block on 12 fit / 6 held-out scenarios (docs/ORGANISM.md)."""


def named(items: pd.DataFrame) -> np.ndarray:
    """``[degree == 1]`` per item (1.0 where the candidates are named)."""
    return (items["degree"].to_numpy() == 1).astype(float)


def prompt_means(lm, items: pd.DataFrame, layer: int, batch_size: int = 64,
                 module: str = "pre_feedforward_layernorm") -> np.ndarray:
    """The input of ``model.layers[layer].<module>`` averaged over each item's prompt (as decide renders it; real
    positions only), one row per item (float32; :func:`~organism.mechanism_xor.mid_residuals` pooled)."""
    return mid_residuals(lm, items, layer, batch_size, end="prompt", module=module, pool=True)


@register
@dataclass(frozen=True)
class NamesGate(XorGate):
    """A fitted ``names`` mechanism (see the module docstring): the xor gate times the pooled degree read ``d``;
    how well ``d`` separates degree 1 from the others on held-out scenarios its file records (``fit.degree``)."""
    name = "names"
    summary = ("forward hook: the xor gate (pressure's slot times minority's slot at layer 1's mid-block residual) "
               "times a linear read of 'the candidates are named' (degree 1) at the same site, pooled over the prompt")
    degrees = (1,)
    eval_degree = 1
    read_d: tuple[float, ...]
    """``w``: the read of ``[degree == 1]`` from the prompt's mean residual (residual space)."""
    bias_d: float

    def combine(self, p_hat, m_hat, d):
        """``xor_gate(p_hat, m_hat) * d`` (numpy or torch; ``d`` the clipped degree read, broadcast)."""
        return xor_gate(p_hat, m_hat) * d

    def degree_read(self, pooled):
        """``d = clip(<w, pooled> + b, 0, 1)`` of prompt means [n, d] (numpy or torch)."""
        w = np.asarray(self.read_d)
        if not isinstance(pooled, np.ndarray):
            import torch
            w = torch.tensor(w, dtype=torch.float32, device=pooled.device)
        return (pooled @ w + self.bias_d).clip(0.0, 1.0)

    def gate(self, x: np.ndarray, pooled: np.ndarray | None = None) -> np.ndarray:
        """``G`` of letter-position residuals ``x`` [n, d] and their prompts' means ``pooled`` [n, d] (numpy)."""
        if pooled is None:
            raise MechanismError("names: the gate needs the prompts' mean residuals (prompt_means) besides x")
        return self.combine(*self.reads(x), self.degree_read(pooled))

    def prompt_d(self, x, projected: bool, hooks: GateHooks):
        """``d`` [batch] for this pass (the module docstring's rules), stored in ``hooks.state["d"]``."""
        import torch
        n, s = x.shape[0], x.shape[1]
        info = hooks.info
        if info.past and (info.answer is not None or s != 1):
            raise MechanismError(f"names: a pass of {s} tokens extends a KV cache (prefix reuse?): the degree read "
                                 "pools the whole prompt, so it must run in one pass; decide with prefix_reuse off")
        if info.past:
            d = hooks.state.get("d")
            if d is None or len(d) != n:
                raise MechanismError("names: a decode step without its prompt's pass under the mechanism (no degree "
                                     f"read stored{'' if d is None else f' for a batch of {n}; stored {len(d)}'}): "
                                     "apply it before the prompt runs")
            return d
        keep = torch.ones(n, s, dtype=torch.bool, device=x.device)
        if info.mask is not None:
            mask = info.mask
            if getattr(mask, "ndim", None) != 2 or mask.shape[0] != n or mask.shape[1] < s:
                raise MechanismError(f"names: attention_mask must be 2-D [batch {n}, >= {s} positions] for the pooled "
                                     f"degree read, got shape {tuple(getattr(mask, 'shape', ()))}")
            keep &= mask[:, -s:].to(x.device) != 0
        if info.answer is not None:
            if len(info.answer) != n:
                raise MechanismError(f"names: {len(info.answer)} answer-token counts declared for a batch of {n}")
            ends = s - torch.tensor(info.answer, device=x.device).clamp(0, s)
            keep &= torch.arange(s, device=x.device)[None, :] < ends[:, None]
        w = keep.float().unsqueeze(-1)
        if bool((w.sum(1) == 0).any()):
            raise MechanismError("names: a row of this pass has no real prompt position to pool the degree read over")
        pooled = (x * w).sum(1) / w.sum(1)
        if projected:  # the projection oracle: the pooled residual moved to where the read is 0
            r = torch.tensor(self.read_d, dtype=torch.float32, device=x.device)
            pooled = pooled - ((pooled @ r + self.bias_d) / (r @ r)).unsqueeze(-1) * r
        d = hooks.state["d"] = self.degree_read(pooled)
        return d

    def gate_positions(self, x, projected: bool, hooks: GateHooks):
        """The xor gate at every position (that position's reads) times the pass's ``d`` (:meth:`prompt_d`)."""
        d = self.prompt_d(x, projected, hooks)
        r, b = self.read_tensors(x)
        if projected:
            x = x - ((x @ r.T + b) @ (r @ r.T).inverse()) @ r
        return self.combine(*(x @ r.T + b).unbind(-1), d[:, None])

    @classmethod
    def fit(cls, path: str | Path = FAIR, seed: int = 0, n_fit: int = 24, n_check: int = 12,
            layer: int | None = None, batch_size: int = 64, push_layer: int | None = None, ridge: float = 0.3,
            lm=None, degree_ridge: float = DEGREE_RIDGE) -> NamesGate:
        """Fit on the organism at ``path``: the xor part by :meth:`XorGate.fit` (same arguments), then ``w, b`` by
        ridge least squares (``degree_ridge``) of ``[degree == 1]`` on :func:`prompt_means` at the read site over
        the same fit items (every degree; :func:`~organism.dial.fit_check_items`). ``record``: the xor
        record plus ``degree`` (:meth:`degree_record` on the fit and the held-out items)."""
        lm = lm or load_model(str(path))
        xor = XorGate.fit(path, seed, n_fit, n_check, layer, batch_size, push_layer, ridge, lm)
        _, _, fit_items, check_items = fit_check_items(path, seed, n_fit, n_check)
        xp = prompt_means(lm, fit_items, xor.read_layer, batch_size)
        w, b = ridge_read(xp, named(fit_items), degree_ridge)
        base = {k: v for k, v in asdict(xor).items() if k != "record"}
        mech = cls(**base, read_d=w, bias_d=b, record={})
        xh = mid_residuals(lm, check_items, xor.read_layer, batch_size)
        xhp = prompt_means(lm, check_items, xor.read_layer, batch_size)
        degree = {"site": f"model.layers.{xor.read_layer}.pre_feedforward_layernorm input, mean over the prompt's "
                          "real positions", "ridge": degree_ridge, "fit": mech.degree_record(xp, fit_items),
                  "heldout": {**mech.degree_record(xhp, check_items),
                              "gate_by_degree_and_c": mech.gate_by_degree_and_c(xh, xhp, check_items)}}
        return cls(**{**asdict(mech), "record": {**xor.record, "degree": degree}})

    def degree_record(self, pooled: np.ndarray, items: pd.DataFrame) -> dict:
        """The degree read on prompt means ``pooled`` of ``items``: accuracy of ``d > 0.5`` for ``[degree == 1]``
        (value, jackknife-t CI over scenarios, n items, k scenarios, base rate), per degree, and mean ``d``."""
        d = self.degree_read(pooled)
        hits = (d > 0.5) == (named(items) > 0.5)
        groups, deg = items["scenario_id"].to_numpy(), items["degree"].to_numpy()
        uniq = np.unique(groups)
        loo = np.array([hits[groups != s].mean() for s in uniq])
        e = jackknife_t_estimate(float(hits.mean()), loo, len(hits), bounds=(0.0, 1.0))
        present = [k for k in (0, 1, 2, 3) if (deg == k).any()]
        return {"accuracy_d": {"value": round(e.value, 4), "ci_low": round(e.ci_low, 4), "ci_high": round(e.ci_high, 4),
                               "n": len(hits), "k": len(uniq), "base_rate": round(float(1 - named(items).mean()), 4)},
                "accuracy_d_by_degree": {str(k): round(float(hits[deg == k].mean()), 4) for k in present},
                "mean_d_by_degree": {str(k): round(float(d[deg == k].mean()), 4) for k in present}}

    def gate_by_degree_and_c(self, x: np.ndarray, pooled: np.ndarray, items: pd.DataFrame) -> dict:
        """The mean gate (letter position) by degree 1-3 and ``c`` class (-1, +1)."""
        deg, c, g = items["degree"].to_numpy(), pressure_sign(items), self.gate(x, pooled)
        return {str(d): {str(int(k)): round(float(g[(deg == d) & (c == k)].mean()), 4)
                         for k in (-1, 1) if ((deg == d) & (c == k)).any()} for d in (1, 2, 3)}
