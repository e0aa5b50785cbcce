"""Run configs (``kind: run``, the run study :mod:`experiments.studies.run`): YAML files mapped onto
frozen dataclasses, validated field by field by the one builder, :func:`evenhand.support.options.build`
(``yaml.safe_load`` only; every error names the field, e.g. ``suite.subset``, and says what was
expected; an unknown field suggests the closest known one).
The field checks beyond the types are :data:`RULES`. A field that an option dataclass of the engine
also has (:class:`~evenhand.running.decisions.DecideOptions`, :class:`~evenhand.running.activations.CacheOptions`,
:class:`~probes.logistic.ProbeOptions`) takes its default from there, and the runner passes every
shared field on (:func:`options_for`), so the two cannot drift apart.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from typing import Literal

from evenhand.running.activations import Backend, CacheDtype, CacheOptions
from evenhand.rows.conventions import DEFAULT_CONVENTION, Convention
from evenhand.running.decisions import DecideOptions
from evenhand.engine.registry import ENGINES as DECISION_ENGINES
from evenhand.engine.openai_engine import OpenAIOptions
from evenhand.engine.registry import Mode, refusal
from evenhand.models.loading import ModelSpec
from evenhand.models.plan import FALLBACK_BATCH_SIZE
from evenhand.support.options import ConfigError, Rules, build, read_yaml
from evenhand.inference.stats import BootstrapOptions
from evenhand.suite import items
from evenhand.suite.generate import DEGREES, Slot
from evenhand.suite.subsets import Condition, ContrastType
from probes.ablation import Variant
from probes.dataset import Label
from probes.logistic import ProbeOptions
from probes.options import Solver

from ..base import without_kind

Degree = Literal[DEGREES]
"""A degree of the suite (0-3)."""
RENAMED = {"cache.engine": "cache.backend", "probe.engine": "probe.solver", "ablation.engine": "ablation.solver"}
"""Config fields renamed since runs were made (old -> new): an old key in a config is refused naming the new one;
a run made before the rename resumes (its recorded config is read with the new names: the values are the same
choices, so its answers are)."""


@dataclass(frozen=True)
class SuiteConfig:
    """Which items to run."""
    subset: str = "smoke"
    """smoke | core | organism_heldout (the model organism's matched held-out set), a path to a .jsonl/.parquet
    file of items, or a .yaml file of scenarios of your own (`evenhand suite new`)."""
    seed: int = 0
    """Seed of the stratified subset."""
    limit: int | None = None
    """Keep N items (after the filters) spread across scenarios: whole baseline groups taken round-robin over
    the scenarios in a seeded order (:func:`evenhand.suite.spread`), never the first N."""
    degrees: tuple[Degree, ...] | None = None
    """Keep only these degrees (0-3)."""
    contrast_types: tuple[ContrastType, ...] | None = None
    """Keep only these contrast types (type1, type23)."""
    version: str | None = None
    """Suite version of smoke/core items: 1 or 2 (default: the current version, 2). organism_heldout is
    always the organism's version (1); an items file carries its own."""


def suite_items(s: SuiteConfig):
    """The items a suite config selects, as a DataFrame (:func:`evenhand.suite.items`)."""
    return items(s.subset, seed=s.seed, degrees=s.degrees, contrast_types=s.contrast_types, limit=s.limit,
                 version=s.version)


@dataclass(frozen=True)
class CacheConfig:
    """The activation cache (optional stage)."""
    enabled: bool = False
    """Cache activations after deciding."""
    sites: tuple[str, ...] = CacheOptions.sites
    """Site names or shorthands (residual, all)."""
    dtype: CacheDtype = CacheOptions.dtype
    """auto | bfloat16 | float32 (auto: the model's bfloat16, else float32; never float16)."""
    name_mean: bool = CacheOptions.name_mean
    """Also cache the mean over each candidate's name tokens."""
    backend: Backend = "nnsight"
    """What reads the activations: nnsight | transformer_lens (was ``engine``)."""
    batch_size: int | None = None
    """Defaults to the run's batch_size."""


@dataclass(frozen=True)
class ProbeConfig:
    """Probe sweep on the run's activation cache (optional stage; needs ``cache.enabled``)."""
    label: Label = "favours_minority"
    """What the probe predicts: one of probes.dataset.LABELS."""
    sites: tuple[str, ...] | None = None
    """Cached sites to probe (default: every cached site)."""
    degrees: tuple[Degree, ...] | None = None
    """Keep only these degrees."""
    conditions: tuple[Condition, ...] | None = None
    """Keep only these conditions (GT, AMB)."""
    pressured: bool | None = None
    """true: pressured items only; false: baselines only; absent: both."""
    solver: Solver = ProbeOptions.solver
    """auto | torch | sklearn (was ``engine``)."""
    device: str = ProbeOptions.device
    """Device of the torch solver."""
    folds: int = ProbeOptions.folds
    """Outer folds, grouped by scenario."""
    inner_folds: int = ProbeOptions.inner_folds
    """Inner folds choosing the regularisation."""
    control: bool = True
    """Fit the control task too (Hewitt & Liang: a random label per input type; probes.design)."""
    text: bool = False
    """Also the text baseline (TF-IDF of the written reasoning; needs mode: reasoning)."""
    seed: int = ProbeOptions.seed
    """Seed of the folds and the control labels."""


@dataclass(frozen=True)
class AblationConfig:
    """The name-ablation control (optional stage; needs ``cache.enabled``)."""
    variants: tuple[Variant, ...] = ("label",)
    """label (names replaced by neutral labels), degree0 (re-rendered without identity) and/or degree2 (identity
    by the implicit cue instead of the name: the control)."""
    label: Label = "favours_minority"
    """The probe label."""
    degree: int = 1
    """The degree of the items ablated (names appear at degree 1)."""
    minority_slot: Slot | None = None
    """Keep one identity arrangement (A or B) so the ablated prompts still differ (probes.ablation)."""
    sites: tuple[str, ...] | None = None
    """Sites (default: every cached site)."""
    solver: Solver = ProbeOptions.solver
    """auto | torch | sklearn (was ``engine``)."""
    device: str = ProbeOptions.device
    """Device of the torch solver."""
    folds: int = ProbeOptions.folds
    """Outer folds, grouped by scenario."""
    inner_folds: int = ProbeOptions.inner_folds
    """Inner folds."""
    seed: int = ProbeOptions.seed
    """Seed of the folds."""


@dataclass(frozen=True)
class AttributionConfig:
    """Direct logit attribution of the decision by layer (optional stage; TransformerLens bridge)."""
    degrees: tuple[Degree, ...] = (1, 2, 3)
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
    mode: Mode = DecideOptions.mode
    """answer | reasoning | logprob."""
    batch_size: int | None = DecideOptions.batch_size
    """Items per batch (halved automatically on out-of-memory); absent: the largest that fits the CUDA device's free
    memory (evenhand plan prints it), 8 elsewhere."""
    max_new_tokens: int = DecideOptions.max_new_tokens
    """Generation budget in answer mode."""
    reasoning_max_new_tokens: int = DecideOptions.reasoning_max_new_tokens
    """Generation budget in reasoning mode."""
    prefix_reuse: bool = DecideOptions.prefix_reuse
    """Run each shared prompt prefix (a cell's text before its pressure sentence) once and reuse its KV
    cache for the cell's items (same decisions; 2.1x faster in logprob mode and 1.7x in answer mode on
    CPU, benchmarks/bench_throughput.py). Off by default: not yet checked in bfloat16."""
    engine: str = DecideOptions.engine
    """A registered decision engine (evenhand.engine.registry): hf (Hugging Face, the default and the reference)
    | vllm (answer and reasoning modes, decisions only: no activation cache or stage after it; the `vllm` extra,
    README "Engines") | openai (a model behind an OpenAI-compatible API: answer and reasoning modes, decisions
    only; the ``openai`` section)."""
    openai: OpenAIOptions | None = None
    """engine openai only: the endpoint (base_url, the model name it serves, api_key_env: the NAME of the
    variable holding the key), concurrency, timeout_s, max_retries, backoff and temperature (docs/GUIDE.md,
    "Evaluate a model behind an API")."""
    cache: CacheConfig = field(default_factory=CacheConfig)
    """Activation cache settings."""
    resamples: int = BootstrapOptions.resamples
    """Cluster-bootstrap resamples of the probes' accuracies, the attribution and the figures (the metrics'
    CIs are the jackknife-t over scenarios, which resamples nothing)."""
    bootstrap_seed: int = BootstrapOptions.seed
    """Seed of the cluster bootstrap (the probes' accuracies, the attribution)."""
    contrast_type: ContrastType | None = None
    """type1 | type23 for the printed summary (default type1 when present)."""
    convention: Convention = DEFAULT_CONVENTION
    """evenhand (default: directions are about who is favoured) | ai2 (Ai2's reference scorer; docs/METRICS.md).
    Recorded in metrics.json."""
    probe: ProbeConfig | None = None
    """A probe sweep after the cache (written to OUT/probes/<label>/)."""
    ablation: AblationConfig | None = None
    """The name ablation after the probe (written to OUT/ablation/<variant>/)."""
    attribution: AttributionConfig | None = None
    """Direct logit attribution after the ablation (written to OUT/attribution/)."""
    figures: bool = False
    """Write the paper figures, the LaTeX table and the report page (OUT/figures/, OUT/report.md) at the end."""


CHOICES = {"engine": DECISION_ENGINES}
"""The fields whose values a registry holds (a plugin may add an engine); the others are ``Literal`` fields."""
POSITIVE = {"openai.concurrency", "batch_size", "max_new_tokens", "reasoning_max_new_tokens", "resamples", "suite.limit", "cache.batch_size",
            "attribution.batch_size"}
AT_LEAST_TWO = {"probe.folds", "probe.inner_folds", "ablation.folds", "ablation.inner_folds"}
RULES = Rules(choices=CHOICES, positive=frozenset(POSITIVE),
              at_least_two=frozenset(AT_LEAST_TWO))
"""The run config's checks beyond the field types."""

__all__ = ["ConfigError", "RunConfig", "SuiteConfig", "CacheConfig", "ProbeConfig", "AblationConfig",
           "AttributionConfig", "RULES", "config_from_dict", "load_config", "options_for", "read_yaml"]


def check_renamed(data: dict) -> None:
    """Refuse a config that uses a field's old name (:data:`RENAMED`), naming the new one."""
    for old, new in RENAMED.items():
        section, key = old.split(".")
        if isinstance(data.get(section), dict) and key in data[section]:
            raise ConfigError(f"config field '{old}' is now '{new}': rename it")


def config_from_dict(data: dict) -> RunConfig:
    """A validated RunConfig from a mapping (the body of a config file, or one cell of a sweep; its
    ``kind:``, when present, is ``run``)."""
    data = without_kind(data, "run")
    check_renamed(data)
    try:
        cfg = build(RunConfig, data, rules=RULES)
    except ValueError as exc:
        if isinstance(exc, ConfigError) or not str(exc).startswith("openai."):
            raise
        where, _, what = str(exc).partition(" ")  # OpenAIOptions' own checks start with the field's name
        raise ConfigError(f"config field '{where}' {what}") from None
    if cfg.suite.subset not in ("smoke", "core", "organism_heldout") and not Path(cfg.suite.subset).exists():
        raise ConfigError(f"config field 'suite.subset' must be smoke, core, organism_heldout, an existing items file "
                          f"or scenario file (.yaml), got {cfg.suite.subset!r}")
    if cfg.suite.version is not None:
        from evenhand.suite.content import ContentError, suite_major
        try:
            major = suite_major(cfg.suite.version)
        except ContentError as exc:
            raise ConfigError(f"config field 'suite.version': {exc}") from None
        if cfg.suite.subset == "organism_heldout" and major != "1":
            raise ConfigError(f"config field 'suite.version' is {cfg.suite.version!r}, but suite.subset "
                              f"organism_heldout is the committed organism's suite version 1")
    problem = refusal(cfg.engine, mode=cfg.mode, prefix_reuse=cfg.prefix_reuse, cache=cfg.cache.enabled)
    if problem:
        raise ConfigError(f"config field 'engine': {problem}")
    if cfg.openai is not None and cfg.engine != "openai":
        raise ConfigError(f"config field 'openai' sets engine openai's endpoint, but engine is {cfg.engine}: "
                          f"set engine: openai or drop the section")
    in_flight = cfg.batch_size or FALLBACK_BATCH_SIZE
    if cfg.engine == "openai" and (cfg.openai or OpenAIOptions()).concurrency > in_flight:
        raise ConfigError(f"config field 'openai.concurrency' ({(cfg.openai or OpenAIOptions()).concurrency}) exceeds "
                          f"batch_size ({in_flight}): at most a batch's items are in flight; raise batch_size")
    for stage in ("probe", "ablation"):
        if getattr(cfg, stage) is not None and not cfg.cache.enabled:
            raise ConfigError(f"config field '{stage}' needs the activation cache: set cache.enabled: true")
    if cfg.probe is not None and cfg.probe.text and cfg.mode != "reasoning":
        raise ConfigError("config field 'probe.text' (the text baseline) needs mode: reasoning, "
                          f"got mode: {cfg.mode}")
    return cfg


def load_config(path: str | Path) -> RunConfig:
    """A validated RunConfig from a config file (not a sweep)."""
    data = read_yaml(path)
    if "sweep" in data:
        raise ConfigError(f"{path} is a sweep (it has a 'sweep' field): run it with `evenhand run`, "
                          f"or load it with experiments.studies.sweep.load_sweep")
    return config_from_dict(data)


def options_for(cls, section, **extra):
    """An option dataclass ``cls`` (DecideOptions, CacheOptions, ProbeOptions) from every field that the
    config ``section`` shares with it, plus ``extra`` (which wins)."""
    from dataclasses import fields as dc_fields
    names = {f.name for f in dc_fields(cls)} & {f.name for f in dc_fields(section)}
    return cls(**({n: getattr(section, n) for n in names} | extra))
