"""One registry idiom for every extension axis: engines, studies, interventions, metrics and figures.

A :class:`Registry` maps names to records (a frozen record, an engine, a study, an intervention class): ``add``
refuses a taken name unless ``replace=True``, ``get`` answers with one line naming the registered ones, ``names``
lists them in registration order. Built-ins are found on first use: ``lazy`` (name -> a callable giving the
record, so listing names imports nothing) and ``modules`` (imported once; they register themselves).
:func:`load_plugin` imports a user module that registers records on any axis (``evenhand --plugin``). Each axis
keeps its own one-line messages and error types (``what``, ``unknown``, ``taken``, ``error``, ``taken_error``).
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

T = TypeVar("T")

UNKNOWN = "unknown {what} {name!r}; registered: {names}"
"""The default message of a lookup of an unregistered name (``{names}``: in registration order, ``{sorted}``:
sorted)."""
TAKEN = "{what} {name!r} is already registered (replace=True to redefine it)"
"""The default message of an ``add`` under a taken name."""


class Registry(Generic[T]):
    """Records of one axis by name, in registration order (a read-only mapping plus ``add``/``remove``)."""

    def __init__(self, what: str, *, error: type[Exception] = ValueError, unknown: str = UNKNOWN,
                 taken: str = TAKEN, taken_error: type[Exception] | None = None, lazy: Mapping[str, Callable[[], T]] | None = None,
                 modules: Sequence[str] = ()) -> None:
        self.what, self.error, self.unknown, self.taken = what, error, unknown, taken
        self.taken_error = taken_error or error
        self.lazy = dict(lazy or {})
        self.modules = tuple(modules)
        self.loaded = not self.modules
        self.records: dict[str, T] = {}

    def load(self) -> None:
        """Import the built-in modules (once) so that they register themselves."""
        if not self.loaded:
            self.loaded = True  # first: a module registering itself reads the registry again
            try:
                for module in self.modules:
                    importlib.import_module(module)
            except BaseException:
                self.loaded = False
                raise

    def add(self, name: str, record: T, *, replace: bool = False) -> T:
        """Register ``record`` as ``name``; ``error`` (the ``taken`` line) when the name is taken by another
        record (``taken_error``), unless ``replace``. Registering the same record again is a no-op. Returns the record."""
        if not isinstance(name, str) or not name:
            raise self.error(f"a {self.what} needs a name, got {name!r}")
        old = self.records.get(name, self.lazy.get(name))  # no loading here: a built-in registers while imported
        if old is not None and old is not record and not replace:
            raise self.taken_error(self.taken.format(what=self.what, name=name, old=old))
        self.records[name] = record
        return record

    def remove(self, name: str) -> T:
        """Unregister ``name`` (``error`` when it is not registered or is a lazy built-in); returns its record."""
        if name in self.lazy:
            raise self.error(f"{self.what} {name} is built in")
        record = self.get(name)
        del self.records[name]
        return record

    def find(self, name: Any) -> T | None:
        """The record registered as ``name``, or None."""
        if not isinstance(name, str):
            return None
        if name in self.lazy and name not in self.records:
            self.records[name] = self.lazy[name]()
        if name not in self.records:
            self.load()
        return self.records.get(name)

    def get(self, name: Any) -> T:
        """The record registered as ``name``; ``error`` with the ``unknown`` line (naming the registered) otherwise."""
        record = self.find(name)
        if record is None:
            names = self.names()
            raise self.error(self.unknown.format(what=self.what, name=name, names=", ".join(names),
                                                 sorted=", ".join(sorted(names))))
        return record

    def names(self) -> tuple[str, ...]:
        """The registered names: the lazy built-ins first, then in registration order."""
        self.load()
        return tuple(self.lazy) + tuple(n for n in self.records if n not in self.lazy)

    def values(self) -> tuple[T, ...]:
        """Every record, in :meth:`names` order (loads the lazy ones)."""
        return tuple(self.get(n) for n in self.names())

    def items(self) -> tuple[tuple[str, T], ...]:
        """(name, record) pairs, in :meth:`names` order."""
        return tuple(zip(self.names(), self.values()))

    def keys(self) -> tuple[str, ...]:
        """:meth:`names` (so that ``dict(registry)`` copies it)."""
        return self.names()

    def copy(self) -> Registry[T]:
        """An independent registry with the same records (a test registers into it and drops it)."""
        new = Registry(self.what, error=self.error, unknown=self.unknown, taken=self.taken,
                       taken_error=self.taken_error, lazy=self.lazy, modules=self.modules)
        new.loaded, new.records = self.loaded, dict(self.records)
        return new

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self.lazy or self.find(name) is not None)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def __repr__(self) -> str:
        return f"Registry({self.what}: {', '.join(self.names())})"


def load_plugin(module_or_path: str | Path, error: type[Exception] = ValueError):
    """Import a user module that registers records (on any axis): a dotted module name or a ``.py`` file path.

    Returns the module; ``error`` for a path that is not an importable file. Meant for an explicit user argument
    (e.g. a CLI flag), never for a value read from a config file."""
    target = str(module_or_path)
    path = Path(target)
    if not (target.endswith(".py") or path.exists()):
        return importlib.import_module(target)
    if not path.is_file():
        raise error(f"plugin {target!r}: no such file")
    mod_name = f"evenhand_plugin_{path.stem}"
    loaded = sys.modules.get(mod_name)
    if loaded is not None and Path(loaded.__file__ or "").resolve() == path.resolve():
        return loaded  # already imported: its records are registered
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise error(f"plugin {target!r}: not an importable Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(mod_name, None)
        raise
    return module
