"""Run configs: YAML files mapped onto frozen dataclasses, validated field by field.

YAML is read with ``yaml.safe_load`` only (no code runs from a config). Every
error names the field (``suite.subset``) and says what was expected; an
unknown field suggests the closest known one.
"""
from __future__ import annotations

import difflib
import types
import typing
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from pathlib import Path

import yaml

from evenhand.models.loading import ModelSpec

MODES = ("answer", "reasoning", "logprob")


class ConfigError(ValueError):
    """A config is invalid; the message names the field."""


@dataclass(frozen=True)
class SuiteConfig:
    """Which items to run."""
    subset: str = "smoke"
    """smoke | core | organism_heldout (the model organism's matched held-out set), or a path to a .jsonl/.parquet
    file of items."""
    seed: int = 0
    """Seed of the stratified subset."""
    limit: int | None = None
    """Keep only the first N items (after filters)."""
    degrees: tuple[int, ...] | None = None
    """Keep only these degrees (0-3)."""
    contrast_types: tuple[str, ...] | None = None
    """Keep only these contrast types (type1, type23)."""


@dataclass(frozen=True)
class CacheConfig:
    """The activation cache (optional stage)."""
    enabled: bool = False
    """Cache activations after deciding."""
    sites: tuple[str, ...] = ("residual",)
    """Site names or shorthands (residual, all)."""
    dtype: str = "float16"
    """float16 | float32."""
    name_mean: bool = False
    """Also cache the mean over each candidate's name tokens."""
    engine: str = "nnsight"
    """nnsight | transformer_lens."""
    batch_size: int | None = None
    """Defaults to the run's batch_size."""


@dataclass(frozen=True)
class RunConfig:
    """One run: a model on a suite subset in one mode, then metrics (and optionally the cache)."""
    model: ModelSpec
    """A model id, path or preset, or a mapping of ModelSpec fields."""
    output_dir: str
    """The run directory (created; a re-run of the same config resumes it)."""
    suite: SuiteConfig = field(default_factory=SuiteConfig)
    """Which items."""
    mode: str = "answer"
    """answer | reasoning | logprob."""
    batch_size: int = 8
    """Items per batch (halved automatically on out-of-memory)."""
    max_new_tokens: int = 8
    """Generation budget in answer mode."""
    reasoning_max_new_tokens: int = 512
    """Generation budget in reasoning mode."""
    cache: CacheConfig = field(default_factory=CacheConfig)
    """Activation cache settings."""
    resamples: int = 1000
    """Bootstrap resamples for the metrics."""
    bootstrap_seed: int = 0
    """Seed of the bootstrap."""
    contrast_type: str | None = None
    """type1 | type23 for the printed summary (default type1 when present)."""


CHOICES = {"mode": MODES, "cache.dtype": ("float16", "float32"), "cache.engine": ("nnsight", "transformer_lens"),
           "contrast_type": ("type1", "type23", None), "model.dtype": ("auto", "float32", "bfloat16", "float16"),
           "model.chat_template": ("auto", "none")}
POSITIVE = {"batch_size", "max_new_tokens", "reasoning_max_new_tokens", "resamples", "suite.limit", "cache.batch_size"}


def _check(value, tp, where: str):
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _check(value, inner[0], where)
    if is_dataclass(tp):
        if tp is ModelSpec and isinstance(value, str):
            return ModelSpec(value)
        if not isinstance(value, dict):
            raise ConfigError(f"config field '{where}' must be a mapping, got {type(value).__name__}")
        return build(tp, value, where + ".")
    if origin is tuple:
        if isinstance(value, (str, int)):
            value = [value]
        if not isinstance(value, list):
            raise ConfigError(f"config field '{where}' must be a list, got {type(value).__name__}")
        return tuple(_check(v, args[0], f"{where}[{i}]") for i, v in enumerate(value))
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"config field '{where}' must be true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"config field '{where}' must be an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"config field '{where}' must be a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"config field '{where}' must be a string, got {value!r}")
        return value
    raise ConfigError(f"config field '{where}': unsupported type {tp}")


def build(cls, data: dict, prefix: str = ""):
    """Map a mapping onto dataclass ``cls``, checking names, types and allowed values."""
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in fields(cls)}
    for key in data:
        if key not in known:
            close = difflib.get_close_matches(str(key), list(known), n=1)
            hint = f" (did you mean '{prefix}{close[0]}'?)" if close else f"; known: {', '.join(known)}"
            raise ConfigError(f"config field '{prefix}{key}' is not known{hint}")
    kwargs = {}
    for name, f in known.items():
        where = prefix + name
        if name not in data:
            if f.default is MISSING and f.default_factory is MISSING:
                raise ConfigError(f"config field '{where}' is required")
            continue
        value = _check(data[name], hints[name], where)
        if where in CHOICES and value not in CHOICES[where]:
            allowed = ", ".join(str(c) for c in CHOICES[where] if c is not None)
            raise ConfigError(f"config field '{where}' must be one of {allowed}, got {value!r}")
        if where in POSITIVE and value is not None and value < 1:
            raise ConfigError(f"config field '{where}' must be at least 1, got {value}")
        kwargs[name] = value
    return cls(**kwargs)


def load_config(path: str | Path) -> RunConfig:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a config is a mapping of fields")
    cfg = build(RunConfig, data)
    if cfg.suite.degrees and any(d not in (0, 1, 2, 3) for d in cfg.suite.degrees):
        raise ConfigError(f"config field 'suite.degrees' must list degrees 0-3, got {list(cfg.suite.degrees)}")
    if cfg.suite.contrast_types and any(t not in ("type1", "type23") for t in cfg.suite.contrast_types):
        raise ConfigError("config field 'suite.contrast_types' must list type1 and/or type23")
    if cfg.suite.subset not in ("smoke", "core", "organism_heldout") and not Path(cfg.suite.subset).exists():
        raise ConfigError(f"config field 'suite.subset' must be smoke, core, organism_heldout or an existing items file, "
                          f"got {cfg.suite.subset!r}")
    return cfg
