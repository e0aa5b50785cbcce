"""Forward-hook dial mechanisms (:mod:`organism.mechanism`, ``in_weights = False``): the shared hook machinery.

A :class:`HookMechanism` reads a gate from the input of one decoder module (its :meth:`~HookMechanism.read_module`)
and adds ``sum(betas) * G * v`` to the output of the last layer's MLP (``push_layer``), ``G`` [batch, seq] from
:meth:`~HookMechanism.gate_positions`. Nested blocks of one fitted mechanism on one model share one set of hooks
that adds the sum of their betas (``applied(-beta)`` inside ``applied(beta)`` is the organism bit for bit; the hooks
go when the last block closes). A pre-hook on the decoder records each pass's :class:`PassInfo` (the KV-cache length
it extends, the answer-token counts the engine declared, :mod:`evenhand.engine.positions`, the attention mask) for
gates that act at some positions only or pool over the prompt; :attr:`GateHooks.state` keeps what a gate carries
from a prompt's pass to its decode steps. ``xor`` (:mod:`organism.mechanism_xor`), ``decision``
(:mod:`organism.mechanism_decision`) and ``names`` (:mod:`organism.mechanism_names`) use it."""
from __future__ import annotations

import abc
import math
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields

from evenhand.engine.positions import current_answer_tokens

from .mechanism import Mechanism, MechanismError

LIVE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""model -> {mechanism key: its live hooks} (one set of hooks per fitted mechanism and model)."""


@dataclass
class PassInfo:
    """The forward pass in progress: the KV-cache length it extends (0: a prompt's first pass), the per-row
    answer-token counts declared around it (None: none declared) and the decoder's ``attention_mask`` argument
    (None: none given; 2-D, 1 at real tokens, over the cache and this pass, as the engine left-pads)."""
    past: int = 0
    answer: tuple[int, ...] | None = None
    mask: object = None


class HookMechanism(Mechanism):
    """A dial mechanism applied by forward hooks (subclasses: frozen dataclasses with ``push_layer``, ``v`` and a fit
    ``record``, written as ``fit`` in the file as the weight mechanisms' is; ``*_layer`` fields are ints, ``bias*``
    floats)."""
    in_weights = False

    def key(self) -> tuple:
        """What identifies the edit (every field but ``record``): nested blocks of one key share their hooks."""
        return (type(self).__name__,) + tuple(getattr(self, f.name) for f in fields(self) if f.name != "record")

    def to_dict(self) -> dict:
        d = asdict(self)
        return {**d, "fit": d.pop("record")}

    @classmethod
    def from_dict(cls, d: dict) -> HookMechanism:
        names = [f.name for f in fields(cls) if f.name != "record"]
        missing = [n for n in names if n not in d]
        if missing:
            raise MechanismError(f"{cls.name}: the fitted file has no field {missing[0]!r}")
        kw = {n: int(d[n]) if n.endswith("_layer") else float(d[n]) if n.startswith("bias") else d[n] for n in names}
        return cls(**kw, record=dict(d.get("fit", {})))

    @abc.abstractmethod
    def read_module(self, model):
        """The module whose (hidden-state) input the gate reads."""

    @abc.abstractmethod
    def gate_positions(self, x, projected: bool, hooks: GateHooks):
        """``G`` [batch, seq] (float32) of the read module's input ``x`` [batch, seq, d] in this pass (``hooks.info``,
        ``hooks.state``); ``projected``: what the gate reads removed first (:meth:`project`)."""

    @contextmanager
    def applied(self, model, beta: float) -> Iterator[None]:
        beta = float(beta)
        if not math.isfinite(beta):
            raise MechanismError(f"{self.name}: beta must be finite, got {beta}")
        hooks = live_hooks(self, model)
        hooks.betas.append(beta)
        try:
            yield
        finally:
            del hooks.betas[len(hooks.betas) - 1 - hooks.betas[::-1].index(beta)]  # this block's (the innermost)
            release(self, model, hooks)

    @contextmanager
    def project(self, model) -> Iterator[None]:
        """Inside, the gate reads its input with what it reads removed (:meth:`gate_positions` with ``projected``):
        the gate is shut at any beta. Only the gate's copy is projected; the organism's computation is untouched."""
        hooks = live_hooks(self, model)
        hooks.projected += 1
        try:
            yield
        finally:
            hooks.projected -= 1
            release(self, model, hooks)


class GateHooks:
    """The live hooks of one fitted hook mechanism on one model: a pre-hook on the decoder records the pass's
    :class:`PassInfo`; the read (a pre-hook on the mechanism's read module) computes the pass's gate; the push
    (a hook on the push layer's MLP) adds ``sum(betas) * G * v``, nothing when the betas sum to 0."""

    def __init__(self, mech: HookMechanism, model):
        self.mech, self.betas, self.projected, self.pending = mech, [], 0, None
        self.info, self.state = PassInfo(), {}
        self.handles = [model.model.register_forward_pre_hook(self.begin, with_kwargs=True),
                        mech.read_module(model).register_forward_pre_hook(self.read, with_kwargs=True),
                        model.model.layers[mech.push_layer].mlp.register_forward_hook(self.push)]

    def begin(self, module, args, kwargs):
        past = kwargs.get("past_key_values")
        self.info = PassInfo(int(past.get_seq_length()) if past is not None and hasattr(past, "get_seq_length") else 0,
                             current_answer_tokens(), kwargs.get("attention_mask"))
        self.pending = None

    def read(self, module, args, kwargs):
        x = args[0] if args else kwargs["hidden_states"]
        self.pending = self.mech.gate_positions(x.float(), bool(self.projected), self)

    def push(self, module, args, out):
        g, self.pending = self.pending, None
        if g is None:
            raise MechanismError(f"{self.mech.name}: layer {self.mech.push_layer}'s MLP ran without the gate's read "
                                 "(call the whole model)")
        total = sum(self.betas)
        if total == 0.0:
            return None
        import torch
        v = torch.tensor(self.mech.v, dtype=torch.float32, device=out.device)
        return (out.float() + (total * g).unsqueeze(-1) * v).to(out.dtype)

    def remove(self):
        for h in self.handles:
            h.remove()


def live_hooks(mech: HookMechanism, model) -> GateHooks:
    """The live hooks of ``mech`` on ``model`` (registered on first use)."""
    live = LIVE.setdefault(model, {})
    if mech.key() not in live:
        live[mech.key()] = GateHooks(mech, model)
    return live[mech.key()]


def release(mech: HookMechanism, model, hooks: GateHooks) -> None:
    """Remove ``hooks`` once no block of ``mech`` is open on ``model``."""
    if not hooks.betas and not hooks.projected:
        hooks.remove()
        live = LIVE.get(model, {})
        live.pop(mech.key(), None)
        if not live:
            LIVE.pop(model, None)
