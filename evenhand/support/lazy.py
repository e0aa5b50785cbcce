"""Lazy package exports (PEP 562): a package names its public API without importing it.

A package ``__init__`` lists ``name -> "module"`` (relative to the package) and installs the
returned ``__getattr__``/``__dir__``; ``pkg.name`` imports the module on first use and caches the
attribute in the package, so ``import pkg`` stays cheap (no torch, no transformers) while
``pkg.name`` and ``from pkg import name`` work as for an eager import.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str], submodules: tuple[str, ...] = ()
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``.

    ``exports[name]`` is the module that defines ``name``, relative to the package (``".metrics"``),
    or ``"module:attr"`` when the module calls it ``attr``; ``submodules`` are subpackages or modules
    exported as themselves (``pkg.suite``). Each is imported on first access."""
    def __getattr__(name: str) -> Any:
        if name in submodules:
            return importlib.import_module(f".{name}", package)
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attr = exports[name].partition(":")
        value = getattr(importlib.import_module(module, package), attr or name)
        setattr(importlib.import_module(package), name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(exports) | set(submodules) | set(vars(importlib.import_module(package))))

    return __getattr__, __dir__
