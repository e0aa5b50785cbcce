"""The Study protocol and the registry of studies (docs/ARCHITECTURE.md, "Studies").

A study is one package ``experiments/studies/<kind>/`` whose ``study.py`` holds one :class:`Study`
subclass decorated with :func:`register`. A config names its study with ``kind:``; ``evenhand run``,
sweeps and the CLI look the study up here and never branch on its name.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

import pandas as pd

from evenhand.support.options import ConfigError
from evenhand.support.registry import Registry
from evenhand.running.stages import Stage


class Study(ABC):
    """One kind of study: its config dataclass, its stages (run through ``evenhand.running.stages``'s driver
    in a ``RunDir``), its result tables and the text it prints."""

    kind: ClassVar[str]
    """The value of the config's ``kind:`` key."""
    backends: ClassVar[tuple[str, ...]] = ("local",)
    """Where it can run (``evenhand run --backend``)."""
    tables: ClassVar[tuple[str, ...]] = ()
    """Its result tables, file names relative to the run directory (read by sweeps)."""

    @abstractmethod
    def parse(self, data: Mapping[str, Any], where: str = "config"):
        """The config dataclass from a YAML mapping (errors name the field; ``kind`` is dropped)."""

    @abstractmethod
    def stages(self, cfg, progress: bool = True) -> Sequence[Stage]:
        """The resumable stages of one run of ``cfg``."""

    @abstractmethod
    def run(self, cfg, progress: bool = True, backend: str = "local", **backend_options) -> Any:
        """Run (or resume) ``cfg`` through the stage driver on ``backend`` (one of :attr:`backends`;
        ``backend_options``: the backend's settings, e.g. Ray's address and workers); returns its result."""

    def text(self, cfg, result) -> str:
        """What ``evenhand run`` prints for ``result``."""
        return ""

    def rows(self, output_dir: Path, resamples: int) -> pd.DataFrame:
        """Its tidy result rows from a finished run directory, each with a ``table`` column (for sweeps)."""
        parts = [pd.read_parquet(Path(output_dir) / t).assign(table=Path(t).stem) for t in self.tables]
        return pd.concat(parts, ignore_index=True)


STUDIES: Registry[Study] = Registry("study", error=ConfigError, taken_error=ValueError,
                                    unknown="config field 'kind': unknown {what} {name!r}; known: {sorted}",
                                    taken="a {what} of kind {name!r} is already registered ({old.__class__.__name__})")
"""The registered studies by kind (:class:`evenhand.support.registry.Registry`)."""
DEFAULT_KIND = "run"
SWEEP_KIND = "sweep"
"""The study of a config with a ``sweep:`` field: it expands the config (whose ``kind:`` names the
cells' study) into cells."""
FORMER_KEYS = {"interventions": "compare", "methods": "dose_response", "configurations": "bbq",
               "per_category": "bbq"}
"""Fields from which the kind of a config was once guessed (before ``kind:``): a config without
``kind:`` carrying one is refused with the ``kind:`` line to add, not read as a run config."""


def register(cls: type[Study]) -> type[Study]:
    """Class decorator: add a study to the registry under its ``kind``."""
    kind = getattr(cls, "kind", None)
    if not kind:
        raise TypeError(f"{cls.__name__} has no 'kind'")
    STUDIES.add(kind, cls(), replace=type(STUDIES.find(kind)) is cls)
    return cls


def kinds() -> list[str]:
    """The registered kinds, sorted (the package's ``__init__`` imports ``registry.py``, which registers the
    shipped studies, before anything here is used)."""
    return sorted(STUDIES.names())


def get(kind: str) -> Study:
    """The registered study of ``kind`` (ConfigError naming the known kinds otherwise)."""
    return STUDIES.get(kind)


def without_kind(data: Mapping[str, Any], kind: str) -> dict:
    """A config mapping without its ``kind:`` field, which must be ``kind`` when present (ConfigError otherwise)."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"a {kind} config must be a mapping, got {type(data).__name__}")
    if data.get("kind", kind) != kind:
        raise ConfigError(f"config field 'kind' is {data['kind']!r}, but this is read as a {kind} config")
    return {k: v for k, v in data.items() if k != "kind"}


def without_unused(data: Mapping[str, Any], keys: Sequence[str], why: str) -> dict:
    """``data``, refusing any of ``keys``: fields that set nothing this study computes (ConfigError naming the
    field and ``why``, e.g. bootstrap resamples where every interval is the jackknife-t)."""
    for key in keys:
        if key in data:
            raise ConfigError(f"config field '{key}' does nothing here: {why}; drop it")
    return dict(data)


JACKKNIFE_ONLY = ("resamples", "seed")
"""The bootstrap's fields, refused by the studies whose every interval is the jackknife-t (:func:`without_unused`)."""


def study_of(data: Mapping[str, Any]) -> Study:
    """The study a config mapping names with ``kind:`` (``run`` when it names none); the sweep study
    for a config with a ``sweep:`` field."""
    if SWEEP_KIND in data:
        return get(SWEEP_KIND)
    if "kind" not in data:
        hints = [k for k in FORMER_KEYS if k in data]
        if hints:
            kind = FORMER_KEYS[hints[0]]
            raise ConfigError(f"config field 'kind' is missing: a config without it is a run config, but this one has "
                              f"field '{hints[0]}' (a {kind} config): add `kind: {kind}`")
    kind = data.get("kind", DEFAULT_KIND)
    if not isinstance(kind, str):
        raise ConfigError(f"config field 'kind': expected a study name, got {kind!r}")
    return get(kind)
