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
LABELS = ("favours_minority", "correct", "pressure_followed", "slot_a_minority")
ENGINES = ("auto", "torch", "sklearn")


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
class ProbeConfig:
    """Probe sweep on the run's activation cache (optional stage; needs ``cache.enabled``)."""
    label: str = "favours_minority"
    """favours_minority | correct | pressure_followed | slot_a_minority."""
    sites: tuple[str, ...] | None = None
    """Cached sites to probe (default: every cached site)."""
    degrees: tuple[int, ...] | None = None
    """Keep only these degrees."""
    conditions: tuple[str, ...] | None = None
    """Keep only these conditions (GT, AMB)."""
    pressured: bool | None = None
    """true: pressured items only; false: baselines only; absent: both."""
    engine: str = "auto"
    """auto | torch | sklearn."""
    device: str = "cpu"
    """Device of the torch engine."""
    folds: int = 5
    """Outer folds, grouped by scenario."""
    inner_folds: int = 3
    """Inner folds choosing the regularisation."""
    control: bool = True
    """Fit the shuffled-label control task too."""
    text: bool = False
    """Also the text baseline (TF-IDF of the written reasoning; needs mode: reasoning)."""
    seed: int = 0
    """Seed of the folds and the control labels."""


@dataclass(frozen=True)
class AblationConfig:
    """The name-ablation control (optional stage; needs ``cache.enabled``)."""
    variants: tuple[str, ...] = ("label",)
    """label (names replaced by neutral labels) and/or degree0 (re-rendered without identity)."""
    label: str = "favours_minority"
    """The probe label."""
    degree: int = 1
    """The degree of the items ablated (names appear at degree 1)."""
    sites: tuple[str, ...] | None = None
    """Sites (default: every cached site)."""
    engine: str = "auto"
    """auto | torch | sklearn."""
    folds: int = 5
    """Outer folds, grouped by scenario."""
    inner_folds: int = 3
    """Inner folds."""
    seed: int = 0
    """Seed of the folds."""


@dataclass(frozen=True)
class AttributionConfig:
    """Direct logit attribution of the decision by layer (optional stage; TransformerLens bridge)."""
    degrees: tuple[int, ...] = (1, 2, 3)
    """Degrees of the items attributed."""
    batch_size: int = 8
    """Prompts per bridge forward."""


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
    prefix_reuse: bool = False
    """Run each shared prompt prefix (a cell's text before its pressure sentence) once and reuse its KV
    cache for the cell's items (same decisions; 2.1x faster in logprob mode and 1.7x in answer mode on
    CPU, benchmarks/bench_throughput.py). Off by default: not yet checked in bfloat16."""
    cache: CacheConfig = field(default_factory=CacheConfig)
    """Activation cache settings."""
    resamples: int = 1000
    """Bootstrap resamples for the metrics."""
    bootstrap_seed: int = 0
    """Seed of the bootstrap."""
    contrast_type: str | None = None
    """type1 | type23 for the printed summary (default type1 when present)."""
    probe: ProbeConfig | None = None
    """A probe sweep after the cache (written to OUT/probes/<label>/)."""
    ablation: AblationConfig | None = None
    """The name ablation after the probe (written to OUT/ablation/<variant>/)."""
    attribution: AttributionConfig | None = None
    """Direct logit attribution after the ablation (written to OUT/attribution/)."""
    figures: bool = False
    """Write the paper figures, the LaTeX table and the report page (OUT/figures/, OUT/report.md) at the end."""


CHOICES = {"mode": MODES, "cache.dtype": ("float16", "float32"), "cache.engine": ("nnsight", "transformer_lens"),
           "contrast_type": ("type1", "type23", None), "model.dtype": ("auto", "float32", "bfloat16", "float16"),
           "model.chat_template": ("auto", "none"),
           "probe.label": LABELS, "ablation.label": LABELS, "probe.engine": ENGINES, "ablation.engine": ENGINES}
TUPLE_CHOICES = {"probe.conditions": ("GT", "AMB"), "ablation.variants": ("label", "degree0"),
                 "probe.degrees": (0, 1, 2, 3), "attribution.degrees": (0, 1, 2, 3), "suite.degrees": (0, 1, 2, 3),
                 "suite.contrast_types": ("type1", "type23")}
POSITIVE = {"batch_size", "max_new_tokens", "reasoning_max_new_tokens", "resamples", "suite.limit", "cache.batch_size",
            "attribution.batch_size"}
AT_LEAST_TWO = {"probe.folds", "probe.inner_folds", "ablation.folds", "ablation.inner_folds"}


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
        if where in AT_LEAST_TWO and value < 2:
            raise ConfigError(f"config field '{where}' must be at least 2, got {value}")
        if where in TUPLE_CHOICES and value is not None:
            bad = [v for v in value if v not in TUPLE_CHOICES[where]]
            if bad:
                allowed = ", ".join(map(str, TUPLE_CHOICES[where]))
                raise ConfigError(f"config field '{where}' may only list {allowed}, got {bad[0]!r}")
        kwargs[name] = value
    return cls(**kwargs)


def read_yaml(path: str | Path) -> dict:
    """A config file's mapping (``yaml.safe_load``), with errors that name the file."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a config is a mapping of fields")
    return data


def config_from_dict(data: dict) -> RunConfig:
    """A validated RunConfig from a mapping (the body of a config file, or one cell of a sweep)."""
    cfg = build(RunConfig, data)
    if cfg.suite.subset not in ("smoke", "core", "organism_heldout") and not Path(cfg.suite.subset).exists():
        raise ConfigError(f"config field 'suite.subset' must be smoke, core, organism_heldout or an existing items file, "
                          f"got {cfg.suite.subset!r}")
    for stage in ("probe", "ablation"):
        if getattr(cfg, stage) is not None and not cfg.cache.enabled:
            raise ConfigError(f"config field '{stage}' needs the activation cache: set cache.enabled: true")
    if cfg.probe is not None and cfg.probe.text and cfg.mode != "reasoning":
        raise ConfigError("config field 'probe.text' (the text baseline) needs mode: reasoning, "
                          f"got mode: {cfg.mode}")
    return cfg


def load_config(path: str | Path) -> RunConfig:
    data = read_yaml(path)
    if "sweep" in data:
        raise ConfigError(f"{path} is a sweep (it has a 'sweep' field): run it with `evenhand run`, "
                          f"or load it with experiments.sweep.load_sweep")
    return config_from_dict(data)
