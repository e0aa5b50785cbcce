"""Finding interventions: the built-in methods and user plugins, looked up by registry name.

The methods register themselves (:func:`interventions.base.register`) when their modules are imported;
this module imports the built-in ones on first use. It sits above the methods in the import graph
(they import :mod:`interventions.base`, never this module), so the registry has no import cycle.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

from .base import REGISTRY, Intervention
from .fitted import InterventionError, options_json


def load_builtin() -> None:
    """Import the built-in methods so that they register themselves (in the README table's order)."""
    from . import prompting, steered, learned  # noqa: F401  (registration side effects, in table order)


def get(name: str) -> Intervention:
    """The intervention registered as ``name`` (instances hold no options)."""
    load_builtin()
    if name not in REGISTRY:
        raise InterventionError(f"unknown intervention {name!r}; registered: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[name]()


def registered() -> list[dict]:
    """Name, kind, one-line description, fit and apply options (with defaults) of every registered intervention."""
    load_builtin()
    return [{"name": n, "kind": c.kind, "description": (c.__doc__ or "").strip().splitlines()[0],
             "fit_options": options_json(c.FitOptions()), "apply_options": options_json(c.ApplyOptions()),
             "random_control": c.has_random_control}
            for n, c in REGISTRY.items()]


def load_plugin(module_or_path: str | Path):
    """Import a user module that registers interventions: a dotted module name or a ``.py`` file path.

    Returns the module. Meant for an explicit user argument (e.g. a CLI flag), never for a
    value read from a config file."""
    load_builtin()
    target = str(module_or_path)
    path = Path(target)
    if target.endswith(".py") or path.exists():
        if not path.is_file():
            raise InterventionError(f"plugin {target!r}: no such file")
        mod_name = f"evenhand_plugin_{path.stem}"
        loaded = sys.modules.get(mod_name)
        if loaded is not None and Path(loaded.__file__ or "").resolve() == path.resolve():
            return loaded  # already imported: its classes are registered
        spec = importlib.util.spec_from_file_location(mod_name, path)
        if spec is None or spec.loader is None:
            raise InterventionError(f"plugin {target!r}: not an importable Python file")
        module = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(mod_name, None)
            raise
        return module
    return importlib.import_module(target)
