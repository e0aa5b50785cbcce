"""The intervention protocol: fitting is separate from applying, options are declared, edits are owned.

An :class:`Intervention` is a registered class with a ``name``, a ``kind`` and two
frozen dataclasses of options:

- ``FitOptions``: what fitting depends on (layers, rank, steps, ...). A fit is made
  by ``fit(lm, train_items, fit_options, seed=...)``; the returned :class:`Fitted`
  stores the fit options, the seed and the fit key (a hash of the fit options, the
  seed and the training item ids, :func:`interventions.fitted.fit_key`).
- ``ApplyOptions``: what applying depends on (strength, alpha, prompt variant, ...).
  Applying always takes the fitted object plus apply options; nothing about how a
  fit is applied is kept on the instance (instances hold no options at all)."""
from __future__ import annotations

import abc
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Any, ClassVar

import pandas as pd

from .fitted import Fitted, InterventionError, fit_key, options_json
from .model_state import ModelState
from evenhand.running.decisions import decide
from evenhand.engine.registry import engine_of, has_local_weights, weights_refusal
from evenhand.support.registry import Registry
from steering.directions import random_like

KINDS = ("prompt", "activation", "learned")
EDITING_KINDS = ("activation", "learned")
_SEALED = ("fit", "apply")  # owned by the base class: every method's fits and edits go through them


REGISTRY: Registry[type["Intervention"]] = Registry(
    "intervention", error=InterventionError, unknown="unknown {what} {name!r}; registered: {sorted}",
    taken="an {what} named {name!r} is already registered ({old.__name__})",
    modules=("interventions.prompting", "interventions.steered", "interventions.learned"))
"""The registered interventions by name (:class:`evenhand.support.registry.Registry`; the built-in methods, in the README
table's order, are imported on first use)."""


@dataclass(frozen=True)
class NoOptions:
    """No options."""


def check_at_layers(name: str, at_layers):
    """``at_layers`` normalised (a list becomes a tuple); :class:`InterventionError` naming the option otherwise."""
    if isinstance(at_layers, list):
        at_layers = tuple(at_layers)
    ok = at_layers == "fitted" or (isinstance(at_layers, int) and not isinstance(at_layers, bool)) or (
        isinstance(at_layers, tuple) and at_layers
        and all(isinstance(x, int) and not isinstance(x, bool) for x in at_layers))
    if not ok:
        raise InterventionError(f"{name}: option at_layers must be 'fitted', a layer index or a list of them, "
                                f"got {at_layers!r}")
    return at_layers


@dataclass(frozen=True)
class SitesApply:
    """Where an editing method's edits act, shared by every activation and learned method's apply options.

    ``positions``: ``all`` (default), ``prompt``, ``last`` (the last prompt token, the decision token) or
    ``generated`` (the answer's tokens; :data:`steering.hooks.POSITIONS`). ``at_layers``: ``fitted``
    (default: every layer the fit holds an edit for) or a layer index or list of them, each one a fitted
    layer. Subclasses add their own options and call ``super().__post_init__()``."""
    method: ClassVar[str] = "apply"  # the method named in errors
    positions: str = "all"
    at_layers: str | int | tuple = "fitted"

    def __post_init__(self):
        from steering.hooks import POSITIONS  # deferred: pulls in torch
        if self.positions not in POSITIONS:
            raise InterventionError(f"{self.method}: option positions must be one of {', '.join(POSITIONS)}, "
                                    f"got {self.positions!r}")
        object.__setattr__(self, "at_layers", check_at_layers(self.method, self.at_layers))


def placed_edits(name: str, edits: dict, options) -> dict:
    """``edits`` (site -> edit(s)) kept at the layers ``options.at_layers`` names and restricted to
    ``options.positions`` (options without these fields: every fitted site, every position)."""
    from steering.hooks import AtPositions  # deferred: pulls in torch
    at_layers = getattr(options, "at_layers", "fitted")
    positions = getattr(options, "positions", "all")
    if at_layers != "fitted":
        wanted = {int(x) for x in (at_layers if isinstance(at_layers, tuple) else (at_layers,))}
        layer_of = {s: int(s.split(".")[1]) for s in edits if s.startswith("blocks.")}
        missing = sorted(wanted - set(layer_of.values()))
        if missing:
            raise InterventionError(f"{name}: option at_layers names layer(s) {missing} the fit has no edit for "
                                    f"(fitted layers: {sorted(set(layer_of.values()))})")
        edits = {s: e for s, e in edits.items() if layer_of.get(s) in wanted}
    if positions != "all":
        edits = {s: AtPositions(e, positions) for s, e in edits.items()}
    return edits


class Intervention:
    """Base class; subclasses set ``name``, ``kind``, ``FitOptions``/``ApplyOptions`` and implement their part.

    Kind ``prompt`` (this class): changes what the model reads (:meth:`rewrite` one item) or runs a multi-turn
    procedure (override :meth:`decide`); nothing to fit. Kinds ``activation`` and ``learned``:
    :class:`EditingIntervention`."""
    name: ClassVar[str] = ""
    kind: ClassVar[str] = "prompt"
    FitOptions: ClassVar[type] = NoOptions
    ApplyOptions: ClassVar[type] = NoOptions
    has_random_control: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__module__ == __name__:
            return
        sealed = _SEALED + (("decide",) if cls.kind in EDITING_KINDS else ())
        for attr in sealed:
            if attr in cls.__dict__:
                raise InterventionError(f"{cls.__name__} overrides {attr}(); the base class owns fitting and applying "
                                        f"(implement fit_parameters() and, for a model edit, edits())")

    # --- options ---------------------------------------------------------------------------
    @classmethod
    def split_options(cls, flat: dict | None = None) -> tuple[Any, Any]:
        """(fit options, apply options) from one flat mapping (as in a comparison config), split by the
        dataclasses' fields; an unknown key is an error naming it."""
        flat = dict(flat or {})
        fit_names = [f.name for f in fields(cls.FitOptions)]
        apply_names = [f.name for f in fields(cls.ApplyOptions)]
        unknown = sorted(set(flat) - set(fit_names) - set(apply_names))
        if unknown:
            raise InterventionError(f"{cls.name}: unknown option(s) {', '.join(unknown)}; "
                                    f"fit options: {', '.join(fit_names) or 'none'}; "
                                    f"apply options: {', '.join(apply_names) or 'none'}")
        return (cls._build(cls.FitOptions, {k: v for k, v in flat.items() if k in fit_names}),
                cls._build(cls.ApplyOptions, {k: v for k, v in flat.items() if k in apply_names}))

    @classmethod
    def defaults(cls) -> dict:
        """Every option's default, fit and apply options together (a flat mapping)."""
        return {**options_json(cls.FitOptions()), **options_json(cls.ApplyOptions())}

    @classmethod
    def _build(cls, kind: type, values: dict):
        try:
            return kind(**values)
        except TypeError as exc:
            raise InterventionError(f"{cls.name}: {exc}") from None

    @classmethod
    def fit_options(cls, options=None):
        """``options`` as this method's ``FitOptions`` (None: the defaults; a mapping is built and checked)."""
        return cls._coerce(cls.FitOptions, options)

    @classmethod
    def apply_options(cls, options=None):
        """``options`` as this method's ``ApplyOptions`` (None: the defaults; a mapping is built and checked)."""
        return cls._coerce(cls.ApplyOptions, options)

    @classmethod
    def _coerce(cls, kind: type, options) -> Any:
        if options is None:
            return kind()
        if isinstance(options, dict):
            return cls._build(kind, options)
        if not isinstance(options, kind):
            raise InterventionError(f"{cls.name}: expected {kind.__qualname__}, got {type(options).__qualname__}")
        return options

    def fit_options_of(self, fitted: Fitted):
        """The fit options ``fitted`` was made with, as this method's ``FitOptions``."""
        check_fitted(self, fitted)
        return self.fit_options(fitted.fit_options)

    def check_weights(self, lm) -> None:
        """Refuse (one line) a method that is not a prompt method on a model without local weights (behind an
        API: :func:`evenhand.engine.registry.has_local_weights`)."""
        if self.kind != "prompt" and not has_local_weights(engine_of(lm)):
            raise InterventionError(weights_refusal(engine_of(lm), self.name))

    # --- fitting -----------------------------------------------------------------------------
    def fit(self, lm, train_items: pd.DataFrame | None = None, options=None, *, seed: int = 0,
            progress: bool = False) -> Fitted:
        """Fit on ``train_items`` with ``options`` (this method's ``FitOptions``; None: the defaults) and ``seed``.

        The seed is one argument of ``fit``, never an option. The model is checked to be unchanged afterwards
        (no hook left, no parameter changed)."""
        self.check_weights(lm)
        opts = self.fit_options(options)
        ids = [] if train_items is None else train_items["item_id"].astype(str).tolist()
        model = getattr(lm, "model", None)
        before = ModelState.capture(model) if model is not None else None
        info, tensors = self.fit_parameters(lm, train_items, opts, int(seed), progress)
        if before is not None:
            before.check(model, f"{self.name}: fitting")
        return Fitted(self.name, options_json(opts), int(seed), fit_key(self.name, opts, seed, ids), "none", info,
                      tensors)

    def fit_parameters(self, lm, train_items: pd.DataFrame | None, options, seed: int,
                       progress: bool) -> tuple[dict, dict]:
        """(JSON info, named tensors) of a fit. Prompt methods: nothing to fit."""
        return {}, {}

    # --- prompt methods ----------------------------------------------------------------------
    def rewrite(self, item: dict, options=None) -> dict:
        """The item as the model should see it (prompt methods)."""
        return item

    def decide(self, fitted: Fitted, items: pd.DataFrame, lm, opts, options=None) -> pd.DataFrame:
        """Decisions under this intervention: rewrite the items with the apply ``options``, then decide."""
        options = self.apply_options(options)
        rows = [self.rewrite(dict(r), options) for r in items.to_dict("records")]
        return decide(pd.DataFrame(rows), lm, opts)


class EditingIntervention(Intervention, abc.ABC):
    """A method that edits the model's hidden states: it declares edits, the base class applies them.

    Kinds ``activation`` and ``learned``: the method declares its edits (site name -> edit, e.g. the hooks of
    :mod:`steering.hooks`) with ``edits(fitted, lm, apply_options)``; the base class applies them in
    ``apply(fitted, lm, apply_options)`` (at the layers and positions of the shared apply options
    :class:`SitesApply`: ``at_layers``, ``positions``) and removes them on exit, then checks that no hook is left
    and no parameter changed (:class:`InterventionError` otherwise). Subclasses may not override ``fit``,
    ``apply`` or ``decide``."""
    kind = "activation"

    @abc.abstractmethod
    def fit_parameters(self, lm, train_items: pd.DataFrame | None, options, seed: int,
                       progress: bool) -> tuple[dict, dict]:
        """(JSON info, named tensors) of a fit on ``train_items`` with fit ``options`` and ``seed``."""

    @abc.abstractmethod
    def edits(self, fitted: Fitted, lm, options) -> dict:
        """Site name -> edit (or list of edits) from the fitted object and the apply ``options``."""

    @contextlib.contextmanager
    def apply(self, fitted: Fitted, lm, options=None) -> Iterator[None]:
        """Inside this context the model runs with the fitted edits at the apply ``options``.

        On exit every hook is removed; then the model is checked to hold exactly the hooks
        and parameters it held before (:class:`InterventionError` naming what changed)."""
        from steering.hooks import steer  # deferred: pulls in torch
        check_fitted(self, fitted)
        opts = self.apply_options(options)
        edits = placed_edits(self.name, self.edits(fitted, lm, opts), opts)
        before = ModelState.capture(lm.model)
        try:
            with steer(lm.model, edits):
                yield
        finally:
            before.check(lm.model, f"{self.name}: after apply")

    def decide(self, fitted: Fitted, items: pd.DataFrame, lm, opts, options=None) -> pd.DataFrame:
        """Decisions with the edits applied (prefix reuse off when the edits act at some positions only: the
        prefix and the rest of a prompt would run in separate passes)."""
        options = self.apply_options(options)
        if getattr(options, "positions", "all") != "all" and opts.prefix_reuse:
            opts = replace(opts, prefix_reuse=False)
        with self.apply(fitted, lm, options):
            return decide(items, lm, opts)


class DirectionIntervention(EditingIntervention, abc.ABC):
    """An activation method whose fit is directions (tensors named ``<site>/direction``).

    It gets the random-direction control, ``random_control(fitted, seed)``: the same fit
    with every direction replaced by a seeded random direction of the same norm. The comparison runs this
    control beside every such method, and the test suite checks it for every registered one."""
    kind = "activation"
    has_random_control = True

    def random_control(self, fitted: Fitted, seed: int) -> Fitted:
        """``fitted`` with its directions replaced by seeded random directions (:meth:`control_tensors`)."""
        check_fitted(self, fitted)
        if fitted.control != "none":
            raise InterventionError(f"{self.name}: the fitted object is already a {fitted.control} control")
        return fitted.replace_tensors(self.control_tensors(fitted, int(seed)), "random")

    def control_tensors(self, fitted: Fitted, seed: int) -> dict:
        """Each ``<site>/direction`` (k-th in order) as a random direction of the same norm, seed ``seed*1000+k``."""
        import torch

        keys = [k for k in fitted.tensors if k.endswith("/direction")]
        if not keys:
            raise InterventionError(f"{self.name}: the fitted object has no '<site>/direction' tensor to randomise")
        out = {}
        for k, key in enumerate(keys):
            v = fitted.tensors[key]
            out[key] = torch.tensor(random_like(v.detach().cpu().double().numpy(), seed * 1000 + k), dtype=v.dtype)
        return out


def check_fitted(intervention: Intervention, fitted: Fitted) -> None:
    """Raise :class:`InterventionError` unless ``fitted`` was made by ``intervention``'s method."""
    if fitted.name != intervention.name:
        raise InterventionError(f"fitted object is for {fitted.name!r}, not {intervention.name!r}")


def decide_with(intervention: Intervention, fitted: Fitted, items: pd.DataFrame, lm, opts,
                options=None) -> pd.DataFrame:
    """Decide ``items`` under a fitted intervention applied with the apply ``options`` (None: the defaults).

    The table gains an ``intervention`` column. Rows keep the original item fields (a
    rewritten prompt is kept in ``shown_prompt``) so the metrics code scores them like
    any other responses."""
    check_fitted(intervention, fitted)
    intervention.check_weights(lm)
    table = intervention.decide(fitted, items, lm, opts, intervention.apply_options(options))
    original = items.set_index("item_id")["prompt"]
    if "prompt" in table.columns:
        table = table.assign(shown_prompt=table["prompt"], prompt=table["item_id"].map(original))
    return table.assign(intervention=intervention.name)


# --- the registry ----------------------------------------------------------------------------
def register(cls: type[Intervention]) -> type[Intervention]:
    """Class decorator: check ``cls``'s declarations and add it to the registry (a duplicate name is an error).

    Looking methods up (``interventions.registry.get``, ``registered``) and importing user modules
    (``load_plugin``) live in :mod:`interventions.registry`, which imports the built-in methods: they import
    this module, never the other way round."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise InterventionError(f"{cls.__name__} has no registry name")
    if cls.kind not in KINDS:
        raise InterventionError(f"{cls.__name__}.kind must be one of {', '.join(KINDS)}, got {cls.kind!r}")
    if (cls.kind in EDITING_KINDS) != issubclass(cls, EditingIntervention):
        raise InterventionError(f"{cls.__name__}: kind {cls.kind!r} needs "
                                f"{'an EditingIntervention' if cls.kind in EDITING_KINDS else 'a non-editing'} base")
    declared = {}
    for attr in ("FitOptions", "ApplyOptions"):
        kind = getattr(cls, attr)
        if not (is_dataclass(kind) and kind.__dataclass_params__.frozen):
            raise InterventionError(f"{cls.__name__}.{attr} must be a frozen dataclass")
        try:
            kind()
        except TypeError:
            raise InterventionError(f"{cls.__name__}.{attr}: every option needs a default") from None
        declared[attr] = {f.name for f in fields(kind)}
    both = declared["FitOptions"] & declared["ApplyOptions"]
    if both:
        raise InterventionError(f"{cls.__name__}: option(s) {', '.join(sorted(both))} declared as fit and as apply "
                                f"options")
    reserved = (declared["FitOptions"] | declared["ApplyOptions"]) & {"seed", "control"}
    if reserved:
        raise InterventionError(f"{cls.__name__}: {', '.join(sorted(reserved))} cannot be an option (the seed is an "
                                f"argument of fit; the random control is random_control())")
    return REGISTRY.add(name, cls)
