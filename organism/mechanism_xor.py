"""The bias dial's ``xor`` mechanism (:mod:`organism.mechanism`): a forward hook whose gate is non-linear.

Two linear reads at the mid-block residual of decoder layer ``R`` (the input of its ``pre_feedforward_layernorm``:
after ``R``'s attention, before its MLP) estimate, at every position, the pressure's slot ``p_hat`` and the
minority-coded candidate's slot ``m_hat`` (+1 A, -1 B; 0 without pressure or identity cues). The gate is their
product: with both reads clipped to [-1, 1], ``G = relu(p_hat * m_hat) * p_hat`` (open, signed toward the
pressure's slot, only where the pressure argues for the minority-coded candidate: ``p == m``), and the MLP
output of the last layer gains ``beta * G * v`` at that position (``v`` as :func:`organism.dial.write_direction`).
The fair organism carries ``p`` and ``m`` linearly there but not ``g = [p == m]`` (its layer-``R`` MLP computes
that): :func:`nonlinearity_check` measures it. The push at a position reads that position only, so decoding
with a KV cache is exact; nested blocks share one pair of hooks that adds the sum of their betas, so
``applied(-beta)`` inside ``applied(beta)`` cancels bit for bit.

More in docs/ORGANISM.md, "The xor mechanism"."""
from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np
import pandas as pd

from evenhand.models.loading import load_model
from evenhand.inference.stats import jackknife_t_estimate
from evenhand.suite.matched import matched_items
from probes.logistic import grouped_folds

from .dial import ANSWER_POSITIONS, letter_position_batches, pressure_sign, write_direction
from .mechanism import MechanismError, register
from .mechanism_hooks import HookMechanism
from .recipe import FAIR, record_suite, split_scenarios

READ_LAYER = 1
"""The default read layer: its mid-block residual carries ``p`` and ``m`` at the letter position, not ``g``."""
OTHER_POSITIONS = tuple(e for e in ANSWER_POSITIONS if e != "noun")
"""The other answer positions (the last prompt token and the letter): the push acts there too (a gate at a
position reads that position only), and the fit records how far the gate opens there."""


def slot_signs(items: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """``(p, m)`` per item: the pressure's slot and the minority-coded candidate's slot as +1 (A) / -1 (B);
    ``p`` 0 without pressure, ``m`` 0 at degree 0 (nothing codes a candidate)."""
    p = items["pressure_slot"].map({"A": 1.0, "B": -1.0}).fillna(0.0).to_numpy(float)
    m = np.where(items["degree"].to_numpy() > 0, np.where(items["minority_slot"] == "A", 1.0, -1.0), 0.0)
    return p, m


def xor_gate(p_hat, m_hat):
    """``relu(p m) * p`` of the reads clipped to [-1, 1] (numpy arrays or torch tensors): the gate times the
    push's sign, 0 where the reads disagree, at most 1 in size."""
    p, m = p_hat.clip(-1.0, 1.0), m_hat.clip(-1.0, 1.0)
    s = p * m
    return (s + abs(s)) / 2 * p


@register
@dataclass(frozen=True)
class XorGate(HookMechanism):
    """A fitted ``xor`` mechanism (see the module docstring)."""
    name = "xor"
    summary = ("forward hook: the last layer's MLP output pushed toward the pressure's slot where the product of two "
               "linear reads (pressure's slot, minority's slot) at layer 1's mid-block residual says they agree")
    in_weights = False
    read_layer: int
    """The decoder layer whose mid-block residual (input of ``pre_feedforward_layernorm``) the gate reads."""
    push_layer: int
    """The decoder layer whose MLP output is pushed (the last)."""
    read_p: tuple[float, ...]
    """The read of the pressure's slot (residual space)."""
    bias_p: float
    read_m: tuple[float, ...]
    """The read of the minority-coded candidate's slot (residual space)."""
    bias_m: float
    v: tuple[float, ...]
    """The push direction (unit length, residual space)."""
    record: dict
    """How the reads were fitted (``fit`` in the file): items, R^2 and accuracies, the gate by class, the
    non-linearity check."""

    def __post_init__(self):
        vectors = [f.name for f in fields(self) if f.name.startswith("read_") and f.name != "read_layer"] + ["v"]
        for f in vectors:
            object.__setattr__(self, f, tuple(float(t) for t in getattr(self, f)))
        if len({len(getattr(self, f)) for f in vectors}) != 1:
            raise MechanismError(f"{self.name}: {', '.join(vectors)} must have one length, got "
                                 f"{', '.join(str(len(getattr(self, f))) for f in vectors)}")
        if not 0 <= self.read_layer <= self.push_layer:
            raise MechanismError(f"{self.name}: read_layer {self.read_layer} must be in 0..push_layer ({self.push_layer})")

    def read_rows(self) -> tuple[list, list]:
        """The reads' directions and intercepts, in the order :meth:`combine` takes them (``p``, ``m``)."""
        return [self.read_p, self.read_m], [self.bias_p, self.bias_m]

    def read_tensors(self, like):
        """``(R [k, d], b [k])`` float32 on ``like``'s device: ``R x + b`` = the reads (:meth:`read_rows`)."""
        import torch
        rows, biases = self.read_rows()
        r = torch.tensor(rows, dtype=torch.float32, device=like.device)
        return r, torch.tensor(biases, dtype=torch.float32, device=like.device)

    def reads(self, x: np.ndarray) -> tuple[np.ndarray, ...]:
        """The reads (``p_hat, m_hat``; :meth:`read_rows`) of residuals ``x`` [n, d] (numpy)."""
        rows, biases = self.read_rows()
        return tuple(x @ np.asarray(r) + b for r, b in zip(rows, biases))

    def combine(self, p_hat, m_hat):
        """The gate times the push's sign from the two reads (numpy or torch): :func:`xor_gate`."""
        return xor_gate(p_hat, m_hat)

    def gate(self, x: np.ndarray) -> np.ndarray:
        """``G`` of residuals ``x`` [n, d] (:meth:`combine` of :meth:`reads`): the push per unit beta along ``v``."""
        return self.combine(*self.reads(x))

    def read_module(self, model):
        return model.model.layers[self.read_layer].pre_feedforward_layernorm

    def gate_positions(self, x, projected: bool, hooks):
        """The gate at every position of the pass, reading that position only (so a KV cache changes nothing);
        ``projected`` (:meth:`project`): ``x`` moved to the nearest point where ``R x + b = 0`` first, both reads 0."""
        r, b = self.read_tensors(x)
        if projected:
            x = x - ((x @ r.T + b) @ (r @ r.T).inverse()) @ r
        reads = x @ r.T + b
        return self.combine(*reads.unbind(-1))

    @classmethod
    def fit(cls, path: str | Path = FAIR, seed: int = 0, n_fit: int = 24, n_check: int = 12,
            layer: int | None = None, batch_size: int = 64, push_layer: int | None = None, ridge: float = 0.3,
            lm=None) -> XorGate:
        """Fit it on the organism at ``path`` (``layer``: the read layer, default :data:`READ_LAYER`; ``lm``: the
        organism, already loaded): the reads by ridge least squares (:func:`ridge_read`, with an intercept) of
        their targets (:meth:`read_targets`) on :func:`mid_residuals` at the letter position over the matched items
        of ``n_fit`` train scenarios (drawn with ``seed``, as the last_layer dial's), ``v`` by
        :func:`~organism.dial.write_direction`. ``record`` records the reads' R^2 and accuracies and the mean
        gate by ``c`` class there and on the first ``n_check`` held-out scenarios, the mean gate at the
        :data:`OTHER_POSITIONS` (held-out degree-3 items) and :func:`nonlinearity_check` on the held-out items."""
        path = Path(path)
        read_layer = READ_LAYER if layer is None else int(layer)
        record = json.loads((path / "organism.json").read_text())
        rec, suite = record["recipe"], record_suite(record)
        push_layer = rec["layers"] - 1 if push_layer is None else push_layer
        lm = lm or load_model(str(path))
        train_ids, held_ids = split_scenarios(rec["seed"], rec["heldout_fraction"], suite)
        fit_ids = sorted(random.Random(f"dial-fit|{seed}").sample(train_ids, min(n_fit, len(train_ids))))
        fit_items = matched_items(fit_ids, seed, suite=suite)
        check_items = matched_items(held_ids[:n_check], seed + 1, suite=suite)
        x = mid_residuals(lm, fit_items, read_layer, batch_size)
        reads = {}
        for k, y in cls.read_targets(fit_items).items():
            reads[f"read_{k}"], reads[f"bias_{k}"] = ridge_read(x, y, ridge)
        mech = cls(read_layer=read_layer, push_layer=push_layer, **reads, v=write_direction(lm, push_layer),
                   record={})
        xh = mid_residuals(lm, check_items, read_layer, batch_size)
        d3 = check_items[check_items["degree"] == 3]
        fit = {"site": f"model.layers.{read_layer}.pre_feedforward_layernorm input, letter position",
               "push": f"model.layers.{push_layer}.mlp output", "scenarios": len(fit_ids), "seed": seed,
               "ridge": ridge, "fit": mech.read_record(x, fit_items),
               "heldout_scenarios": len(held_ids[:n_check]), "heldout": mech.read_record(xh, check_items),
               "heldout_mean_abs_gate_other_positions": {
                   e: round(float(np.abs(mech.gate(mid_residuals(lm, d3, read_layer, batch_size, e))).mean()), 4)
                   for e in OTHER_POSITIONS}}
        sel = pressured(check_items)
        fit["nonlinearity"] = nonlinearity_check(xh[sel], check_items[sel], seed=seed)
        return cls(**{**asdict(mech), "record": fit})

    @staticmethod
    def read_targets(items: pd.DataFrame) -> dict[str, np.ndarray]:
        """What each read is fitted to, by its field suffix: ``p`` and ``m`` (:func:`slot_signs`)."""
        p, m = slot_signs(items)
        return {"p": p, "m": m}

    def read_record(self, x: np.ndarray, items: pd.DataFrame) -> dict:
        """The reads on residuals ``x`` of ``items``: R^2 of each, sign accuracies on pressured items with identity
        cues (``p``, ``m`` and ``g`` from the sign of ``p_hat m_hat``), and the mean gate by ``c`` class."""
        p, m = slot_signs(items)
        ph, mh = self.reads(x)[:2]
        sel = pressured(items)
        c, gv = pressure_sign(items), self.gate(x)
        return {"items": len(items), "r2_p": _r2(p, ph), "r2_m": _r2(m, mh),
                "accuracy_p": round(float(np.mean(np.sign(ph[sel]) == p[sel])), 4),
                "accuracy_m": round(float(np.mean(np.sign(mh[sel]) == m[sel])), 4),
                "accuracy_g_from_product": round(float(np.mean((ph[sel] * mh[sel] > 0) == (p[sel] == m[sel]))), 4),
                "mean_gate_by_c": {str(int(k)): round(float(gv[c == k].mean()), 4) for k in (-1, 0, 1)},
                "mean_abs_gate_unpressured": round(float(np.abs(gv[p == 0]).mean()), 4),
                "mean_abs_gate_degree0": round(float(np.abs(gv[m == 0]).mean()), 4)}


def pressured(items: pd.DataFrame) -> np.ndarray:
    """The rows where ``g`` is defined: pressured items with identity cues (degree > 0)."""
    return (items["degree"].to_numpy() > 0) & items["pressure_slot"].isin(["A", "B"]).to_numpy()


def _r2(y: np.ndarray, yh: np.ndarray) -> float:
    return round(1.0 - float(((y - yh) ** 2).sum() / ((y - y.mean()) ** 2).sum()), 4)


def ridge_read(x: np.ndarray, y: np.ndarray, ridge: float = 1e-3) -> tuple[np.ndarray, float]:
    """``(r, b)`` minimising ``|x r + b - y|^2 + lam |r|^2`` with ``lam = ridge * rows * mean square of x``."""
    mu, ybar = x.mean(0), y.mean()
    xc = x - mu
    lam = ridge * len(x) * float((xc ** 2).sum(1).mean()) / x.shape[1]
    r = np.linalg.solve(xc.T @ xc + lam * np.eye(x.shape[1]), xc.T @ (y - ybar))
    return r, float(ybar - mu @ r)


def mid_residuals(lm, items: pd.DataFrame, layer: int, batch_size: int = 64, end: str = "noun",
                  module: str = "pre_feedforward_layernorm", pool: bool = False) -> np.ndarray:
    """The input of ``model.layers[layer].<module>`` (default: the mid-block residual) at the last position of
    :func:`~organism.dial.letter_position_batches` (``end``), or with ``pool`` its mean over the real (unpadded)
    positions up to there, one row per item (float32)."""
    import torch
    model = lm.model
    got: list = []
    mod = model.model.layers[layer].get_submodule(module)
    hook = mod.register_forward_pre_hook(lambda m, a: got.append(a[0].detach().float()))
    out = []
    try:
        with torch.inference_mode():
            for ids, mask, pos in letter_position_batches(lm, items, batch_size, end):
                model.model(input_ids=ids, attention_mask=mask, position_ids=pos)
                h = got.pop()
                w = mask.float().unsqueeze(-1)
                out.append((h * w).sum(1) / w.sum(1) if pool else h[:, -1])
    finally:
        hook.remove()
    return torch.cat(out).numpy()


def nonlinearity_check(x: np.ndarray, items: pd.DataFrame, folds: int = 5, seed: int = 0, C: float = 1.0) -> dict:
    """Out-of-fold accuracies (value, jackknife-t CI over scenarios, n items, k scenarios) of linear probes
    (standardised, logistic, ``C``; folds grouped by scenario) on ``x`` [n, d] for ``p``, ``m`` and
    ``g = [p == m]`` (``items``: pressured with identity cues), and of the XOR of the ``p`` and ``m`` probes'
    predictions for ``g``. A gate no linear read recovers: ``p``, ``m`` and ``xor`` high, ``g`` near 0.5."""
    from sklearn.linear_model import LogisticRegression  # deferred: sklearn is slow to import
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    p, m = slot_signs(items)
    if not ((p != 0) & (m != 0)).all():
        raise ValueError("nonlinearity_check needs pressured items with identity cues only (organism.mechanism_xor"
                         ".pressured)")
    groups = items["scenario_id"].to_numpy()
    fold = grouped_folds(groups, folds, seed)
    labels = {"p": p > 0, "m": m > 0, "g": p == m}
    pred = {k: np.zeros(len(x), bool) for k in labels}
    for f in np.unique(fold):
        tr, te = fold != f, fold == f
        for k, y in labels.items():
            clf = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=5000)).fit(x[tr], y[tr])
            pred[k][te] = clf.predict(x[te])
    hits = {k: pred[k] == labels[k] for k in labels}
    hits["xor"] = (pred["p"] == pred["m"]) == labels["g"]
    uniq = np.unique(groups)

    def estimate(h: np.ndarray) -> dict:
        loo = np.array([h[groups != s].mean() for s in uniq])
        e = jackknife_t_estimate(float(h.mean()), loo, len(h), bounds=(0.0, 1.0))
        return {"value": round(e.value, 4), "ci_low": round(e.ci_low, 4), "ci_high": round(e.ci_high, 4)}

    return {"n": len(x), "k": len(uniq), "folds": int(len(np.unique(fold))), "C": C,
            **{k: estimate(h) for k, h in hits.items()}}
