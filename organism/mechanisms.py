"""The bias dial's ``distributed`` mechanism (:mod:`organism.mechanism`): a sum of rank-1 weight edits
``W(l) += beta * scale * v_l a_l^T`` whose reads ``a_l`` are fitted on the organism like the first one's
(``decision``, ``names`` and ``xor`` are forward hooks: :mod:`organism.mechanism_decision`,
:mod:`organism.mechanism_names`, :mod:`organism.mechanism_xor`):

- ``distributed``: one edit at every layer, read at the letter position, each 1/L of the strength.

It is a weight edit (foldable with :func:`organism.dial.write_dialled`), exactly undone on leaving
:meth:`~organism.mechanism.Mechanism.applied` (:func:`organism.mechanism.restored`); ``project`` removes every
``a_l`` from its edited weight's input. ``fit`` (the interface's) fits it on an organism directory;
:func:`organism.dials.fit_mechanism` any by name. More in docs/ORGANISM.md, "Dial mechanisms"."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

# The fitting helpers are organism/dial.py's, generalised: down_proj_inputs (any layers, any module's input, the
# last position or sampled earlier ones), fit_read (at, zero_at, target, zero_sample, module; its defaults are the
# dial's read bit for bit), ridge_read, fit_check_items. Every mechanism (LayerEdits' subclasses here, Decision in
# organism/mechanism_decision.py) has the interface's fit(path, seed, n_fit, n_check, layer, batch_size, ...):
# organism.dials.fit_mechanism(name, path, ...) = mechanism_class(name).fit(...) fits any registered mechanism
# (`evenhand organism fit-dial --mechanism NAME`, xor and names included: layer is their read layer, default 1).
from .dial import (
    down_proj_inputs,
    fit_check_items,
    letter_position_batches,
    mean_read_by_c,
    pressure_sign,
    r_squared,
    ridge_read,
)
from .mechanism import Mechanism, MechanismError, no_layer, register, restored
from .recipe import FAIR
from evenhand.models.loading import load_model

POSITION_OFFSET = {"noun": -1, "prompt": -2}
"""Where an edit's read sits, from the end of :func:`~organism.dial.letter_position_batches` ending at the
noun: the letter position (the noun, which predicts the letter) or the last prompt token (the decision
position, which predicts the noun)."""
EDITABLE = ("mlp.down_proj", "self_attn.v_proj")
"""The linear maps an edit may change: the MLP's down-projection (reads the MLP's intermediate activation) or
the attention's value projection (reads the normed residual entering the layer)."""


def letter_gradient(lm, items: pd.DataFrame, layer: int, at: str = "noun", batch_size: int = 64,
                    module: str = "mlp.down_proj") -> np.ndarray:
    """The mean over ``items`` of the gradient of the letter-A-minus-B logit at the letter position with
    respect to the output of ``model.layers[layer].mlp.down_proj`` at the position ``at`` (``"noun"``: the
    letter position; ``"prompt"``: the last prompt token): the residual write there that raises A over B most,
    through whatever lies between (the post-feedforward norm, later layers, their attention). The write
    directions ``v_l`` of :class:`Distributed`."""
    import torch
    if at not in POSITION_OFFSET:
        raise ValueError(f"at must be one of {', '.join(POSITION_OFFSET)}, got {at!r}")
    model, tok = lm.model, lm.tokenizer
    ia, ib = tok.convert_tokens_to_ids("A"), tok.convert_tokens_to_ids("B")
    total, n = None, 0
    for ids, mask, pos in letter_position_batches(lm, items, batch_size, "noun"):
        mod = model.model.layers[layer].get_submodule(module)
        delta = torch.zeros(len(ids), mod.out_features, requires_grad=True)
        onehot = torch.zeros(ids.shape[1])
        onehot[ids.shape[1] + POSITION_OFFSET[at]] = 1.0
        hook = mod.register_forward_hook(
            lambda m, i, o: o + delta[:, None, :].to(o.dtype) * onehot[None, :, None].to(o.dtype))
        try:
            with torch.enable_grad():
                logits = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits[:, -1].float()
                (logits[:, ia] - logits[:, ib]).sum().backward()
        finally:
            hook.remove()
        g = delta.grad.sum(0)
        total, n = (g if total is None else total + g), n + len(ids)
    return (total / n).numpy()


@dataclass(frozen=True)
class LayerEdits(Mechanism):
    """Rank-1 edits ``W_down(l) += beta * scale * v_l a_l^T`` at ``layers`` (the registered subclasses set
    where the reads sit and how they are fitted)."""
    position: ClassVar[str] = "noun"
    """Where the reads ``a_l`` are fitted (:data:`POSITION_OFFSET`)."""
    layers: tuple[int, ...]
    """The decoder layers whose ``mlp.down_proj`` is edited."""
    a: tuple[tuple[float, ...], ...]
    """Per layer, the read direction in the down-projection's input (intermediate) space."""
    v: tuple[tuple[float, ...], ...]
    """Per layer, the write direction in the residual space."""
    scale: float = 1.0
    """Each edit's share of ``beta``."""
    module: str = "mlp.down_proj"
    """The edited linear map of each layer (its weight's input is what ``a_l`` reads)."""
    record: dict | None = None
    """How it was fitted (``fit`` in its file): items, R^2, the mean read by class."""

    def __post_init__(self):
        object.__setattr__(self, "layers", tuple(int(x) for x in self.layers))
        object.__setattr__(self, "a", tuple(tuple(float(t) for t in r) for r in self.a))
        object.__setattr__(self, "v", tuple(tuple(float(t) for t in r) for r in self.v))
        object.__setattr__(self, "scale", float(self.scale))
        if self.module not in EDITABLE:
            raise MechanismError(f"dial mechanism {self.name!r}: module must be one of {', '.join(EDITABLE)}, "
                                 f"got {self.module!r}")
        object.__setattr__(self, "record", dict(self.record or {}))
        if not (len(self.layers) == len(self.a) == len(self.v)) or not self.layers:
            raise MechanismError(f"dial mechanism {self.name!r}: layers, a and v must have one entry per edited "
                                 f"layer, got {len(self.layers)}, {len(self.a)}, {len(self.v)}")

    def weight_names(self) -> list[str]:
        """The edited parameters' names in the model's state dict."""
        return [f"model.layers.{lay}.{self.module}.weight" for lay in self.layers]

    def weight_deltas(self, beta: float) -> dict:
        import torch
        return {n: beta * self.scale * torch.outer(torch.tensor(v, dtype=torch.float32), torch.tensor(a, dtype=torch.float32))
                for n, a, v in zip(self.weight_names(), self.a, self.v)}

    @contextmanager
    def applied(self, model, beta: float) -> Iterator[None]:
        import torch
        params = dict(model.named_parameters())
        with restored(model, self.weight_names()):
            with torch.no_grad():
                for n, d in self.weight_deltas(beta).items():
                    params[n] += d.to(dtype=params[n].dtype, device=params[n].device)
            yield

    @contextmanager
    def project(self, model) -> Iterator[None]:
        """Remove each ``a_l`` from the input of its layer's down-projection (``W <- W - (W a) a^T / |a|^2``)."""
        import torch
        params = dict(model.named_parameters())
        with restored(model, self.weight_names()):
            with torch.no_grad():
                for n, a in zip(self.weight_names(), self.a):
                    w = params[n]
                    at = torch.tensor(a, dtype=torch.float32, device=w.device)
                    w -= (torch.outer(w.float() @ at, at) / float(at @ at)).to(w.dtype)
            yield

    def reads(self, lm, items: pd.DataFrame, batch_size: int = 64) -> np.ndarray:
        """The gate per item: ``scale * sum_l <a_l, m_l>`` at :attr:`position` (``m_l``: layer ``l``'s
        down-projection input)."""
        end = "noun" if self.position == "noun" else "prompt"
        x = down_proj_inputs(lm, items, self.layers, batch_size, end, module=self.module)
        return self.scale * sum(x[lay] @ np.asarray(a) for lay, a in zip(self.layers, self.a))

    def to_dict(self) -> dict:
        return {"layers": list(self.layers), "a": [list(r) for r in self.a], "v": [list(r) for r in self.v],
                "scale": self.scale, "module": self.module, "fit": self.record}

    @classmethod
    def from_dict(cls, d: dict) -> LayerEdits:
        try:
            return cls(layers=tuple(d["layers"]), a=tuple(d["a"]), v=tuple(d["v"]), scale=d.get("scale", 1.0),
                       module=d.get("module", "mlp.down_proj"), record=d.get("fit", {}))
        except KeyError as e:
            raise MechanismError(f"dial mechanism {cls.name!r}: its file lacks the field {e.args[0]!r}") from None


def _check_record(lm, mech: LayerEdits, fit_items, check_items, fit_ids, seed: int, ridge: float,
                  target=pressure_sign, batch_size: int = 64) -> dict:
    """R^2 and mean gate by class of ``target`` on the fit and the check items (and the mean gate per degree
    and class on the check items)."""
    y, yh = target(fit_items), target(check_items)
    p, ph = mech.reads(lm, fit_items, batch_size), mech.reads(lm, check_items, batch_size)
    ch = pressure_sign(check_items)
    return {"items": len(fit_items), "scenarios": len(fit_ids), "seed": seed, "ridge": ridge,
            "r2": round(r_squared(y, p), 4), "mean_read_by_c": mean_read_by_c(p, y),
            "heldout_items": len(check_items), "heldout_r2": round(r_squared(yh, ph), 4),
            "heldout_mean_read_by_c": mean_read_by_c(ph, yh),
            "heldout_mean_read_by_degree_and_c": {
                str(d): mean_read_by_c(ph[check_items["degree"].to_numpy() == d],
                                       ch[check_items["degree"].to_numpy() == d]) for d in (0, 1, 2, 3)}}


@register
@dataclass(frozen=True)
class Distributed(LayerEdits):
    """``distributed``: a rank-1 edit of EVERY layer's down-projection, each at ``beta / L``. Layer ``l``'s read
    ``a_l`` reads ``c`` at the letter position from that layer's down-projection input (target 0 at the last
    prompt token, the letter and, below the last layer, a sample of earlier prompt positions); its write ``v_l``
    is the mean gradient of the letter's A-minus-B logit w.r.t. that layer's output at the letter position,
    scaled so that every layer's first-order logit push per unit read equals the last layer's unit write: each
    layer plants an equal share. Models a bias spread over depth: a single-layer read or erase sees a share."""
    name = "distributed"
    summary = ("rank-1 edits of every layer's down-projection, each at beta/L; each reads the pressure's side "
               "(design label c) at the letter position")

    @classmethod
    def fit(cls, path: str | Path = FAIR, seed: int = 0, n_fit: int = 24, n_check: int = 12,
            layer: int | None = None, batch_size: int = 64, ridge: float = 1e-3, zero_sample: int = 4) -> Distributed:
        """Fit on the organism at ``path`` (items: :func:`~organism.dial.fit_check_items`); it edits every layer,
        so a ``layer`` is refused."""
        no_layer(cls.name, layer, "it edits every layer")
        record, fit_ids, fit_items, check_items = fit_check_items(path, seed, n_fit, n_check)
        n_layers = record["recipe"]["layers"]
        lm = load_model(str(path))
        on = fit_items[pressure_sign(fit_items) != 0]
        layers = tuple(range(n_layers))
        x = {end: down_proj_inputs(lm, fit_items, layers, batch_size, end) for end in ("noun", "prompt", "A", "B")}
        xs = down_proj_inputs(lm, fit_items, layers, batch_size, "prompt", zero_sample, seed) if zero_sample else {}
        c = pressure_sign(fit_items)
        a, g = [], []
        for lay in layers:
            rows = [x[end][lay] for end in ("noun", "prompt", "A", "B")] + ([xs[lay]] if lay < n_layers - 1 and xs else [])
            a.append(tuple(ridge_read(rows, c, ridge)))
            g.append(letter_gradient(lm, on, lay, "noun", batch_size))
        top = float(np.linalg.norm(g[-1]))
        v = [tuple(gl * top / float(gl @ gl)) for gl in g]
        mech = cls(layers=tuple(range(n_layers)), a=tuple(a), v=tuple(v), scale=1.0 / n_layers)
        rec = _check_record(lm, mech, fit_items, check_items, fit_ids, seed, ridge, batch_size=batch_size)
        per_layer = []
        for lay in range(n_layers):
            one = cls(layers=(lay,), a=(a[lay],), v=(v[lay],))  # the layer alone, at full strength
            ph = one.reads(lm, check_items, batch_size)
            per_layer.append({"layer": lay, "heldout_r2": round(r_squared(pressure_sign(check_items), ph), 4),
                              "gradient_norm": round(float(np.linalg.norm(g[lay])), 4),
                              "write_norm": round(float(np.linalg.norm(v[lay])), 4)})
        return cls(layers=mech.layers, a=mech.a, v=mech.v, scale=mech.scale,
                   record={**rec, "zero_sample": zero_sample, "per_layer": per_layer})
