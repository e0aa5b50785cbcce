"""The intervention protocol: one small interface for the nine debiasing methods.

An :class:`Intervention` is a registered class with a ``name`` and a ``kind``:

- ``prompt``: changes what the model reads (``rewrite`` one item) or runs a
  multi-turn procedure (override ``decide``); ``fit`` is a no-op.
- ``activation``: edits activations through hooks; ``fit`` computes directions
  or erasers from activations of *train* scenarios.
- ``learned``: trains a small intervention (pyvene) on train scenarios.

``fit(lm, train_items, seed=...)`` returns a frozen :class:`Fitted` (name,
JSON parameters, tensors) that saves to and loads from a directory
(``fitted.json`` + ``tensors.safetensors``; never pickle). Decisions under an
intervention go through :func:`decide_with`; activation and learned methods act
inside ``apply(fitted, lm)``, a context manager that leaves the model exactly as
it was on exit (hooks removed, no weight touched; tested bit for bit).
"""
from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import pandas as pd

KINDS = ("prompt", "activation", "learned")
REGISTRY: dict[str, type["Intervention"]] = {}


class InterventionError(ValueError):
    """A bad intervention name, option or fitted file."""


def register(cls: type["Intervention"]) -> type["Intervention"]:
    """Class decorator: add ``cls`` to the registry (a duplicate name is an error)."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise InterventionError(f"{cls.__name__} has no registry name")
    if cls.kind not in KINDS:
        raise InterventionError(f"{cls.__name__}.kind must be one of {', '.join(KINDS)}, got {cls.kind!r}")
    if name in REGISTRY and REGISTRY[name] is not cls:
        raise InterventionError(f"an intervention named {name!r} is already registered ({REGISTRY[name].__name__})")
    REGISTRY[name] = cls
    return cls


def get(name: str, **options) -> "Intervention":
    """An intervention instance by registry name."""
    load_builtin()
    if name not in REGISTRY:
        raise InterventionError(f"unknown intervention {name!r}; registered: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[name](**options)


def registered() -> list[dict]:
    """Name, kind and one-line description of every registered intervention."""
    load_builtin()
    return [{"name": n, "kind": c.kind, "description": (c.__doc__ or "").strip().splitlines()[0]}
            for n, c in REGISTRY.items()]


def load_builtin() -> None:
    """Import the built-in methods so that they register themselves in :data:`REGISTRY`."""
    from . import learned, prompting, steered  # noqa: F401  (registration side effects)


@dataclass(frozen=True)
class Fitted:
    """A fitted intervention: everything needed to apply it, saved as JSON + safetensors."""
    name: str
    options: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)
    tensors: dict = field(default_factory=dict, repr=False)

    def save(self, path: str | Path) -> Path:
        from safetensors.torch import save_file

        from evenhand.runs import write_json_atomic
        out = Path(path)
        out.mkdir(parents=True, exist_ok=True)
        tensors = {k: v.detach().to("cpu").contiguous() for k, v in self.tensors.items()}
        save_file(tensors, str(out / "tensors.safetensors"))
        write_json_atomic(out / "fitted.json", {"name": self.name, "options": self.options, "info": self.info,
                                                "tensors": sorted(tensors)})
        return out

    @classmethod
    def load(cls, path: str | Path) -> "Fitted":
        from safetensors.torch import load_file
        path = Path(path)
        meta_file = path / "fitted.json"
        if not meta_file.exists():
            raise InterventionError(f"{path} holds no fitted intervention (fitted.json missing)")
        meta = json.loads(meta_file.read_text())
        for k in ("name", "options", "info", "tensors"):
            if k not in meta:
                raise InterventionError(f"{meta_file}: field {k!r} is missing")
        tensors = load_file(str(path / "tensors.safetensors")) if meta["tensors"] else {}
        if sorted(tensors) != sorted(meta["tensors"]):
            raise InterventionError(f"{path}: tensors.safetensors does not hold the tensors fitted.json lists")
        return cls(meta["name"], meta["options"], meta["info"], tensors)


class Intervention:
    """Base class; subclasses set ``name``, ``kind``, ``defaults`` and implement their part."""
    name: ClassVar[str] = ""
    kind: ClassVar[str] = "prompt"
    defaults: ClassVar[dict] = {}

    def __init__(self, **options):
        unknown = set(options) - set(self.defaults)
        if unknown:
            raise InterventionError(f"{self.name}: unknown option(s) {', '.join(sorted(unknown))}; "
                                    f"known: {', '.join(sorted(self.defaults)) or 'none'}")
        self.options = {**self.defaults, **options}

    # --- fitting -------------------------------------------------------------------------
    def fit(self, lm, train_items: pd.DataFrame | None = None, seed: int = 0, progress: bool = False) -> Fitted:
        """Prompt methods: nothing to fit."""
        return Fitted(self.name, dict(self.options))

    # --- prompt methods ------------------------------------------------------------------
    def rewrite(self, item: dict) -> dict:
        """The item as the model should see it (prompt methods)."""
        return item

    def decide(self, fitted: Fitted, items: pd.DataFrame, lm, opts) -> pd.DataFrame:
        """Decisions under this intervention. Default: rewrite the items, or apply, then decide."""
        from evenhand.decide import decide
        if self.kind == "prompt":
            rows = [self.rewrite(dict(r)) for r in items.to_dict("records")]
            return decide(pd.DataFrame(rows), lm, opts)
        with self.apply(fitted, lm):
            return decide(items, lm, opts)

    # --- activation / learned methods -----------------------------------------------------
    @contextlib.contextmanager
    def apply(self, fitted: Fitted, lm) -> Iterator[None]:
        """Activation and learned methods edit the model only inside this context."""
        yield


def check_fitted(intervention: Intervention, fitted: Fitted) -> None:
    if fitted.name != intervention.name:
        raise InterventionError(f"fitted object is for {fitted.name!r}, not {intervention.name!r}")


def decide_with(intervention: Intervention, fitted: Fitted, items: pd.DataFrame, lm, opts) -> pd.DataFrame:
    """Decide ``items`` under a fitted intervention; the table gains an ``intervention`` column.

    Rows keep the original item fields (a rewritten prompt is kept in ``shown_prompt``) so the
    metrics code scores them like any other responses."""
    check_fitted(intervention, fitted)
    table = intervention.decide(fitted, items, lm, opts)
    original = items.set_index("item_id")["prompt"]
    if "prompt" in table.columns:
        table = table.assign(shown_prompt=table["prompt"], prompt=table["item_id"].map(original))
    return table.assign(intervention=intervention.name)
