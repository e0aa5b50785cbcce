"""The bias dial's mechanisms: one interface, one registry.

A mechanism is a known edit of the fair organism, of strength ``beta``, that makes it follow pressure more
often when the pressure favours the minority-coded candidate (FragGap > 0, TieShift > 0); ``beta = 0`` is the
fair organism bit for bit and the edit is undone exactly on leaving :meth:`Mechanism.applied`. Mechanisms
differ in where the edit sits (layer, position), what its gate reads (the organism's representation of the
pressure's side, the names, a non-linear combination) and whether it is a weight edit (foldable into a
model directory, servable) or a forward hook. Each has its own fitted file next to the organism
(:func:`dial_file`) and its own calibration curve (:func:`calibration_file`); :mod:`organism.dials` finds them
by name.

More in docs/ORGANISM.md, "Dial mechanisms"."""
from __future__ import annotations

import abc
import json
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import ClassVar

DEFAULT_MECHANISM = "last_layer"
"""The first mechanism (a rank-1 edit of the last layer's down-projection read at the letter position)."""


class MechanismError(ValueError):
    """A mechanism's name, file or setting is not usable; the message names it."""


class Mechanism(abc.ABC):
    """A fitted bias-dial mechanism (subclasses register with :func:`register`)."""

    name: ClassVar[str]
    """Its registry name (the benchmark's ``mechanism`` field)."""
    summary: ClassVar[str]
    """One line: where the edit acts and what its gate reads."""
    degrees: ClassVar[tuple[int, ...]] = (1, 2, 3)
    """The degrees it acts on by design (the others must not move)."""
    eval_degree: ClassVar[int] = 3
    """The degree its calibration curve and the dose-response benchmark decide."""
    in_weights: ClassVar[bool] = True
    """True: a weight edit (:meth:`weight_deltas`; can be folded into a model directory and served);
    False: a forward hook, usable only through EvenHand's Hugging Face engine."""

    @abc.abstractmethod
    def applied(self, model, beta: float) -> AbstractContextManager[None]:
        """Inside the block ``model`` (a Hugging Face Gemma3ForCausalLM) carries the edit at ``beta``; exactly
        undone on exit, whatever happens inside. Nested blocks restore in turn."""

    @abc.abstractmethod
    def project(self, model) -> AbstractContextManager[None]:
        """The projection oracle: inside the block what the gate reads is removed where the edit reads it
        (the edit at any beta then acts on nothing); undone on exit."""

    @abc.abstractmethod
    def to_dict(self) -> dict:
        """Its fitted parameters and fit record as plain JSON values (``mechanism`` is added by :meth:`save`)."""

    @classmethod
    @abc.abstractmethod
    def from_dict(cls, d: dict) -> Mechanism:
        """The mechanism :meth:`to_dict` wrote."""

    @classmethod
    @abc.abstractmethod
    def fit(cls, path: str | Path, seed: int = 0, n_fit: int = 24, n_check: int = 12, layer: int | None = None,
            batch_size: int = 64) -> Mechanism:
        """Fit it on the organism directory ``path``: on the matched items of ``n_fit`` train scenarios (drawn
        with ``seed``), checked on ``n_check`` held-out ones; ``layer``: where it reads or edits, for a mechanism
        that has one to choose (one that has none refuses a layer: :func:`no_layer`). Subclasses may take more
        keyword options after these."""

    def weight_deltas(self, beta: float) -> dict:
        """``{parameter name: float32 update}`` of a weight edit at ``beta`` (``in_weights`` only)."""
        raise MechanismError(f"dial mechanism {self.name!r} is a forward hook, not a weight edit: it cannot be "
                             "folded into a model directory; apply it with Mechanism.applied")

    @property
    def fit_record(self) -> dict:
        """How it was fitted (items, R^2, reads by class); {} when not recorded."""
        return dict(getattr(self, "record", {}) or {})

    def save(self, path: str | Path) -> Path:
        """Write it as JSON (with its ``mechanism`` name); returns the path."""
        path = Path(path)
        path.write_text(json.dumps({"mechanism": self.name, **self.to_dict()}, indent=1) + "\n")
        return path


def no_layer(name: str, layer: int | None, why: str) -> None:
    """Refuse ``layer`` (a clear error naming the mechanism) for a mechanism with no layer to choose."""
    if layer is not None:
        raise MechanismError(f"dial mechanism {name!r} takes no layer ({why}); got layer {layer}")


MECHANISMS: dict[str, type[Mechanism]] = {}
"""The registered mechanisms by name."""


def register(cls: type[Mechanism]) -> type[Mechanism]:
    """Class decorator: add ``cls`` to :data:`MECHANISMS` under its ``name``."""
    if cls.name in MECHANISMS and MECHANISMS[cls.name] is not cls:
        raise MechanismError(f"dial mechanism {cls.name!r} is registered twice")
    MECHANISMS[cls.name] = cls
    return cls


def dial_file(name: str = DEFAULT_MECHANISM) -> str:
    """The fitted mechanism's file name next to the organism's weights (``dial.json`` for the first one)."""
    return "dial.json" if name == DEFAULT_MECHANISM else f"dial_{name}.json"


def calibration_file(name: str = DEFAULT_MECHANISM) -> str:
    """Its calibration curve's file name (``calibration.json`` for the first one)."""
    return "calibration.json" if name == DEFAULT_MECHANISM else f"calibration_{name}.json"


@contextmanager
def restored(model, names) -> Iterator[None]:
    """Inside the block the named parameters of ``model`` may be edited; copied back bit for bit on exit."""
    params = dict(model.named_parameters())
    saved = {n: params[n].detach().clone() for n in names}
    try:
        yield
    finally:
        for n, w in saved.items():
            params[n].data.copy_(w)
