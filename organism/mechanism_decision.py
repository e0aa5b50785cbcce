"""The bias dial's ``decision`` mechanism (:mod:`organism.mechanism`): a forward hook gated at the decision position.

The gate is a linear read ``c_hat = <a, h> + b`` of ``h``, the residual entering decoder layer ``R`` (Hugging Face's
``hidden_states[R]``; by default the recipe's ``side_layer``, where the organism was trained to represent the
pressure's side), at the LAST PROMPT TOKEN, fitted (ridge least squares with an intercept) on the design sign ``c``
(:func:`~organism.dial.pressure_sign`). The push: the last layer's MLP output gains ``beta * c_hat * v`` at the
ANSWER positions (the candidate noun, which predicts the letter, and every later token; ``v`` as
:func:`organism.dial.write_direction`). Positions follow the engine's conventions (:mod:`evenhand.engine.positions`,
:class:`steering.hooks.AtPositions`): with answer-token counts declared, row ``i``'s last prompt token is
``s - c_i - 1`` and its answer the rest; a prompt's first pass (no KV cache; left-padded) ends at its last prompt
token and pushes nothing; a one-token pass extending a cache is a decode step, pushed with the gate stored at its
prompt's pass (none stored: an error). It models a model whose decision is formed at the last prompt token:
anything that removes ``a`` from that token's residual at layer ``R`` removes the bias.

More in docs/ORGANISM.md, "Dial mechanisms"."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from evenhand.models.loading import load_model

from .dial import fit_check_items, mean_read_by_c, pressure_sign, r_squared, write_direction
from .mechanism import MechanismError, register
from .mechanism_hooks import GateHooks, HookMechanism
from .mechanism_xor import mid_residuals, ridge_read
from .recipe import FAIR


@register
@dataclass(frozen=True)
class Decision(HookMechanism):
    """A fitted ``decision`` mechanism (see the module docstring)."""
    name = "decision"
    summary = ("forward hook: the last layer's MLP output pushed at the answer positions by a linear read of the "
               "pressure's side (design label c) at the last prompt token, at the side layer's input")
    read_layer: int
    """The decoder layer whose input (``hidden_states[read_layer]``) the gate reads at the last prompt token."""
    push_layer: int
    """The decoder layer whose MLP output is pushed at the answer positions (the last)."""
    read: tuple[float, ...]
    """``a``: the read of ``c`` (residual space)."""
    bias: float
    """``b``: the read's intercept."""
    v: tuple[float, ...]
    """The push direction (unit length, residual space)."""
    record: dict
    """How the read was fitted (``fit`` in the file): items, R^2, the mean read by ``c`` class and degree."""

    def __post_init__(self):
        for f in ("read", "v"):
            object.__setattr__(self, f, tuple(float(t) for t in getattr(self, f)))
        object.__setattr__(self, "bias", float(self.bias))
        if len(self.read) != len(self.v):
            raise MechanismError(f"decision: read and v must have one length, got {len(self.read)}, {len(self.v)}")
        if not 0 <= self.read_layer <= self.push_layer:
            raise MechanismError(f"decision: read_layer {self.read_layer} must be in 0..push_layer ({self.push_layer})")

    def read_module(self, model):
        return model.model.layers[self.read_layer]

    def read_at(self, h, projected: bool = False):
        """``c_hat`` of residuals ``h`` [n, d] (torch, float32); ``projected``: ``h`` moved to the nearest point
        where the read is 0 first (the projection oracle: ``a`` removed)."""
        import torch
        a = torch.tensor(self.read, dtype=torch.float32, device=h.device)
        c = h @ a + self.bias
        if projected:
            c = (h - (c / (a @ a)).unsqueeze(-1) * a) @ a + self.bias
        return c

    def gate_positions(self, x, projected: bool, hooks: GateHooks):
        """``c_hat`` (read at the last prompt token, see the module docstring) at the answer positions, 0 elsewhere."""
        import torch
        n, s = x.shape[0], x.shape[1]
        info = hooks.info
        if info.answer is not None:
            if len(info.answer) != n:
                raise MechanismError(f"decision: {len(info.answer)} answer-token counts declared for a batch of {n}")
            counts = torch.tensor(info.answer, device=x.device).clamp(0, s)
            last = s - counts - 1
            if bool((last < 0).any()):
                raise MechanismError("decision: a row of this pass is all answer tokens: its last prompt token "
                                     "(where the gate reads) is not in the pass")
            c = hooks.state["c_hat"] = self.read_at(x[torch.arange(n, device=x.device), last], projected)
            return c[:, None] * (torch.arange(s, device=x.device)[None, :] > last[:, None])
        if info.past == 0:  # a prompt's first pass: its last position is every row's last prompt token
            hooks.state["c_hat"] = self.read_at(x[:, -1], projected)
            return torch.zeros(n, s, device=x.device)
        if s != 1:
            raise MechanismError(f"decision: a pass of {s} tokens extends a KV cache without declared answer tokens "
                                 "(prefix reuse?): where its prompt ends is unknown; decide with prefix_reuse off")
        c = hooks.state.get("c_hat")
        if c is None or len(c) != n:
            raise MechanismError("decision: a decode step without its prompt's pass under the mechanism (no gate "
                                 f"stored{'' if c is None else f' for a batch of {n}; stored {len(c)}'}): apply it "
                                 "before the prompt runs")
        return c[:, None]

    def reads(self, lm, items: pd.DataFrame, batch_size: int = 64) -> np.ndarray:
        """The gate per item: ``c_hat`` at the last prompt token (numpy)."""
        x = mid_residuals(lm, items, self.read_layer, batch_size, end="prompt", module="")
        return x @ np.asarray(self.read) + self.bias

    @classmethod
    def fit(cls, path: str | Path = FAIR, seed: int = 0, n_fit: int = 24, n_check: int = 12, layer: int | None = None,
            batch_size: int = 64, ridge: float = 0.01, lm=None) -> Decision:
        """Fit on the organism at ``path`` (items: :func:`~organism.dial.fit_check_items`, every degree; ``layer``:
        the read layer, default the recipe's ``side_layer``; ``lm``: the organism, already loaded): ``a, b`` by
        :func:`~organism.mechanism_xor.ridge_read` of ``c`` on the residual entering ``layer`` at the last prompt
        token; ``v`` by :func:`~organism.dial.write_direction` at the last layer. ``record``: R^2 and the mean
        read by ``c`` there and on the check items (also per degree)."""
        record, fit_ids, fit_items, check_items = fit_check_items(path, seed, n_fit, n_check)
        rec = record["recipe"]
        push_layer = rec["layers"] - 1
        layer = int(rec.get("side_layer", push_layer)) if layer is None else int(layer)
        if not 0 <= layer <= push_layer:
            raise MechanismError(f"decision: layer (the read layer) must be in 0..{push_layer}, got {layer}")
        lm = lm or load_model(str(path))
        x = mid_residuals(lm, fit_items, layer, batch_size, end="prompt", module="")
        c = pressure_sign(fit_items)
        a, b = ridge_read(x, c, ridge)
        mech = cls(read_layer=layer, push_layer=push_layer, read=a, bias=b, v=write_direction(lm, push_layer),
                   record={})
        ph, ch = mech.reads(lm, check_items, batch_size), pressure_sign(check_items)
        deg = check_items["degree"].to_numpy()
        fit = {"site": f"model.layers.{layer} input (hidden_states[{layer}]), last prompt token",
               "push": f"model.layers.{push_layer}.mlp output, answer positions", "items": len(fit_items),
               "scenarios": len(fit_ids), "seed": seed, "ridge": ridge, "r2": round(r_squared(c, x @ a + b), 4),
               "mean_read_by_c": mean_read_by_c(x @ a + b, c), "heldout_items": len(check_items),
               "heldout_r2": round(r_squared(ch, ph), 4), "heldout_mean_read_by_c": mean_read_by_c(ph, ch),
               "heldout_mean_read_by_degree_and_c": {str(d): mean_read_by_c(ph[deg == d], ch[deg == d])
                                                     for d in (0, 1, 2, 3)}}
        return cls(**{**asdict(mech), "record": fit})
