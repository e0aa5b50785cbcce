"""Finding interventions: the built-in methods and user plugins, looked up by registry name.

The methods register themselves (:func:`interventions.base.register`) when their modules are imported;
this module imports the built-in ones on first use. It sits above the methods in the import graph
(they import :mod:`interventions.base`, never this module), so the registry has no import cycle.
"""
from __future__ import annotations

from pathlib import Path

from evenhand.support import registry

from .base import REGISTRY, Intervention
from .fitted import InterventionError, options_json


def load_builtin() -> None:
    """Import the built-in methods so that they register themselves (in the README table's order)."""
    REGISTRY.load()


def get(name: str) -> Intervention:
    """The intervention registered as ``name`` (instances hold no options)."""
    return REGISTRY.get(name)()


def registered() -> list[dict]:
    """Name, kind, one-line description, fit and apply options (with defaults) of every registered intervention."""
    load_builtin()
    return [{"name": n, "kind": c.kind, "description": (c.__doc__ or "").strip().splitlines()[0],
             "fit_options": options_json(c.FitOptions()), "apply_options": options_json(c.ApplyOptions()),
             "random_control": c.has_random_control}
            for n, c in REGISTRY.items()]


def load_plugin(module_or_path: str | Path):
    """Import a user module that registers interventions (or engines, metrics, studies, figures): a dotted module
    name or a ``.py`` file path (:func:`evenhand.support.registry.load_plugin`). Returns the module. Meant for an
    explicit
    user argument (e.g. a CLI flag), never for a value read from a config file."""
    load_builtin()
    return registry.load_plugin(module_or_path, InterventionError)
