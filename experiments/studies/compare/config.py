"""The comparison config: arms, splits, selection rule and the cells they make.

The YAML format and what each section means: :mod:`experiments.studies.compare` (``parse_config`` checks a
mapping with the one config builder, :func:`evenhand.support.options.build`, and names the field of every
problem); :func:`cells` expands the arms (options x sweep x seeds x random control) into the cells a
comparison runs.
"""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

from evenhand.engine.registry import Mode
from evenhand.inference.stats import BootstrapOptions
from interventions.base import REGISTRY, InterventionError
from interventions.fitted import fit_key
from interventions.registry import get

from .split import SelectRule
from evenhand.scoring.metrics import ASYMMETRY
from evenhand.support.options import ConfigError
from evenhand.support.options import Rules, build
from interventions.registry import registered
from evenhand.engine.openai_engine import OpenAIOptions
from evenhand.engine.registry import ENGINES, has_local_weights, refusal, weights_refusal
from evenhand.support.options import read_yaml


@dataclass(frozen=True)
class Arm:
    name: str
    options: dict = field(default_factory=dict)
    sweep: dict = field(default_factory=dict)
    seeds: tuple[int, ...] = (0,)
    control_draws: int | None = None  # random controls per fit for this arm; None: the config's control_draws


@dataclass(frozen=True)
class CompareConfig:
    model: str
    output_dir: str
    interventions: tuple[Arm, ...]
    split_seed: int = 0
    heldout_fraction: float = 0.2
    train_scenarios: int = 40
    train_degrees: tuple[int, ...] = (1, 2, 3)
    train_max_items: int = 800
    eval_scenarios: int = 16
    eval_contrasts: int = 1
    eval_degrees: tuple[int, ...] = (3,)
    eval_baselines: int | None = None
    """At most this many baseline items per evaluation scenario, each with every pressured version of it (one per
    variant in turn, slots drawn with ``seed``); None: all. For smoke runs on slow models."""
    validation_scenarios: int = 12
    validation_degrees: tuple[int, ...] = (3,)
    select: SelectRule = SelectRule()
    seed: int = 0
    mode: Mode = "answer"
    batch_size: int = 64
    resamples: int = BootstrapOptions.resamples
    controls: bool = True
    control_draws: int = 20  # random controls drawn per fit, each with its own seed (Cell.control_seed)
    refusal_margin: float = 0.05  # a cell whose refusal rate rises by more is flagged, never ranked (scoring.paired)
    accuracy_margin: float | None = None  # None: inference.decision.ACCURACY_MARGIN (5 pp); also triggers scrambled controls
    equivalence_margin: float | None = None  # None: inference.decision.EQUIVALENCE_MARGIN (0.25 of the baseline gap)
    engine: str = "hf"  # a registered engine; one without a HF model (vllm) decides the baseline and prompt methods,
    # the activation/learned ones decide on hf (cell_engine); one without local weights (openai) runs prompt methods only
    openai: OpenAIOptions | None = None
    """engine openai's endpoint (as a run config's ``openai`` section); None: its defaults."""
    signs: dict | None = None
    """Declared alignment signs (asymmetry metric -> +1 or -1); None: decided on the validation baseline."""
    suite: str | None = None
    """A scenario file of one's own (.yaml, :mod:`evenhand.suite.own`): its scenarios, not the model's suite
    version's, are split into fitting, validation and held-out sets; None: the model's suite version."""


MIN_CONTROLS = 20
"""The fewest random controls per method cell (an arm's seeds x its control draws) whose 2.5-97.5% band is an
interval of the controls' spread; a config with fewer is run, with a warning naming the field."""


@dataclass(frozen=True)
class _Split:
    seed: int = CompareConfig.split_seed
    heldout_fraction: float = CompareConfig.heldout_fraction


@dataclass(frozen=True)
class _Train:
    scenarios: int = CompareConfig.train_scenarios
    degrees: tuple[int, ...] = CompareConfig.train_degrees
    max_items: int = CompareConfig.train_max_items


@dataclass(frozen=True)
class _Eval:
    scenarios: int = CompareConfig.eval_scenarios
    contrasts: int = CompareConfig.eval_contrasts
    degrees: tuple[int, ...] = CompareConfig.eval_degrees
    baselines: int | None = CompareConfig.eval_baselines


@dataclass(frozen=True)
class _Validation:
    scenarios: int = CompareConfig.validation_scenarios
    degrees: tuple[int, ...] = CompareConfig.validation_degrees


@dataclass(frozen=True)
class _ArmFile:
    name: str
    options: dict | None = None
    sweep: dict | None = None
    seeds: tuple[int, ...] = (0,)
    control_draws: int | None = None


@dataclass(frozen=True)
class _CompareFile:
    """A comparison config file's shape (sections as in the module docstring); defaults are CompareConfig's."""
    model: str
    output_dir: str
    interventions: tuple[_ArmFile, ...]
    split: _Split | None = None
    train: _Train | None = None
    eval: _Eval | None = None
    validation: _Validation | None = None
    select: SelectRule | None = None
    seed: int = CompareConfig.seed
    mode: Mode = CompareConfig.mode
    batch_size: int = CompareConfig.batch_size
    resamples: int = CompareConfig.resamples
    controls: bool = CompareConfig.controls
    control_draws: int = CompareConfig.control_draws
    refusal_margin: float = CompareConfig.refusal_margin
    accuracy_margin: float | None = None
    equivalence_margin: float | None = None
    engine: str = CompareConfig.engine
    openai: OpenAIOptions | None = None
    signs: dict | None = None
    suite: str | None = None


def parse_signs(raw, where: str) -> dict[str, float] | None:
    """A declared ``signs`` mapping (asymmetry metric -> +1 or -1) as floats; errors name ``signs.<metric>``."""
    if raw is None:
        return None
    out = {}
    for m, v in raw.items():
        if m not in ASYMMETRY:
            raise ConfigError(f"{where}: signs.{m} is not an asymmetry metric; signs are declared for "
                              f"{', '.join(ASYMMETRY)}")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v not in (1, -1):
            raise ConfigError(f"{where}: signs.{m} must be +1 or -1 (the sign of the gap the baseline is expected "
                              f"to have), got {v!r}")
        out[m] = float(v)
    return out


def parse_config(raw: dict, where: str = "config") -> CompareConfig:
    """Validate a comparison config dict with the one config builder (:func:`evenhand.support.options.build`;
    errors name the file and the field)."""

    registered()  # loads the built-in methods
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: a comparison config must be a mapping")
    if raw.get("kind", "compare") != "compare":
        raise ConfigError(f"{where}: kind: {raw['kind']!r} is not a comparison config (kind: compare)")
    raw = {k: v for k, v in raw.items() if k != "kind"}
    rules = Rules(choices={"select.metric": ASYMMETRY, "engine": ENGINES},
                  positive=frozenset({"batch_size", "resamples", "train.scenarios", "train.max_items",
                                      "eval.scenarios", "eval.contrasts", "validation.scenarios",
                                      "control_draws"}))
    try:
        f = build(_CompareFile, raw, rules=rules)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    except ValueError as exc:  # OpenAIOptions' own checks, which start with the field's name
        if not str(exc).startswith("openai."):
            raise
        raise ConfigError(f"{where}: {exc}") from None
    if f.suite is not None:
        from evenhand.suite.own import OWN_SUFFIXES
        if Path(f.suite).suffix.lower() not in OWN_SUFFIXES or not Path(f.suite).is_file():
            raise ConfigError(f"{where}: suite must be an existing scenario file of your own (.yaml; evenhand suite "
                              f"new writes one), got {f.suite!r}")
    if f.openai is not None and f.engine != "openai":
        raise ConfigError(f"{where}: openai sets engine openai's endpoint, but engine is {f.engine}: set engine: "
                          f"openai or drop the section")
    arms = []
    for i, a in enumerate(f.interventions):
        w = f"{where}: interventions[{i}]"
        if a.name not in REGISTRY:
            raise ConfigError(f"{w}.name: unknown intervention {a.name!r}; registered: {', '.join(sorted(REGISTRY))}")
        options, sweep = a.options or {}, a.sweep or {}
        for k, v in sweep.items():
            if not isinstance(v, list) or not v:
                raise ConfigError(f"{w}.sweep.{k} must be a non-empty list")
            if k in options:
                raise ConfigError(f"{w}.sweep.{k}: {k} is also in options ({k}: {options[k]!r}); a setting is the "
                                  f"arm's options plus one value of each swept key, so name {k} in one of the two")
        try:  # option names and values: every swept value once
            REGISTRY[a.name].split_options(options)
            for k, vals in sweep.items():
                for v in vals:
                    REGISTRY[a.name].split_options({**options, k: v})
        except InterventionError as exc:
            raise ConfigError(f"{w}: {exc}") from None
        if REGISTRY[a.name].kind != "prompt" and not has_local_weights(f.engine):
            raise ConfigError(f"{w}: {weights_refusal(f.engine, a.name)}")
        if a.control_draws is not None and a.control_draws < 1:
            raise ConfigError(f"{w}.control_draws must be a positive integer, got {a.control_draws}")
        arms.append(canonical_arm(Arm(a.name, options, sweep, a.seeds, a.control_draws)))
        draws = a.control_draws or f.control_draws
        if f.controls and REGISTRY[a.name].has_random_control and len(a.seeds) * draws < MIN_CONTROLS:
            field_ = f"{w}.control_draws" if a.control_draws else f"{where}: control_draws"
            warnings.warn(f"{field_}: {a.name} gets {len(a.seeds)} seed(s) x {draws} draw(s) = "
                          f"{len(a.seeds) * draws} random controls, fewer than {MIN_CONTROLS}: its 2.5-97.5% control "
                          f"band is then little more than the controls' range", UserWarning, stacklevel=2)
    split, train, ev = f.split or _Split(), f.train or _Train(), f.eval or _Eval()
    val, select = f.validation or _Validation(), f.select or SelectRule()
    if ev.baselines is not None and ev.baselines < 1:
        raise ConfigError(f"{where}: eval.baselines must be at least 1 (or left out: all), got {ev.baselines}")
    if not 0 < split.heldout_fraction < 1:
        raise ConfigError(f"{where}: split.heldout_fraction must be in (0, 1)")
    if refusal(f.engine, mode=f.mode):
        raise ConfigError(f"{where}: {refusal(f.engine, mode=f.mode)}")
    if not 0 <= f.refusal_margin <= 1:
        raise ConfigError(f"{where}: refusal_margin must be in [0, 1] (a fraction: 0.05 = 5 pp)")
    if f.accuracy_margin is not None and not 0 <= f.accuracy_margin < 1:
        raise ConfigError(f"{where}: accuracy_margin must be in [0, 1) (a fraction: 0.05 = 5 pp)")
    if f.equivalence_margin is not None and not 0 < f.equivalence_margin < 0.5:
        raise ConfigError(f"{where}: equivalence_margin must be in (0, 0.5) (a share of the baseline gap)")
    for name in ("max_accuracy_loss", "max_refusal_rise"):
        if not 0 <= getattr(select, name) <= 1:
            raise ConfigError(f"{where}: select.{name} must be a fraction in [0, 1], got {getattr(select, name)}")
    return CompareConfig(
        model=f.model, output_dir=f.output_dir, interventions=tuple(arms), split_seed=split.seed,
        heldout_fraction=split.heldout_fraction, train_scenarios=train.scenarios, train_degrees=train.degrees,
        train_max_items=train.max_items, eval_scenarios=ev.scenarios, eval_contrasts=ev.contrasts,
        eval_degrees=ev.degrees, eval_baselines=ev.baselines, validation_scenarios=val.scenarios, validation_degrees=val.degrees, select=select,
        seed=f.seed, mode=f.mode, batch_size=f.batch_size, resamples=f.resamples, controls=f.controls,
        control_draws=f.control_draws, refusal_margin=f.refusal_margin, accuracy_margin=f.accuracy_margin,
        equivalence_margin=f.equivalence_margin, engine=f.engine, openai=f.openai,
        signs=parse_signs(f.signs, where), suite=f.suite)


def load_config(path: str | Path) -> CompareConfig:
    """A validated config from a YAML file (read by the one config reader,
    :func:`evenhand.support.options.read_yaml`)."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"comparison config {p} not found")
    return parse_config(read_yaml(p), str(p))


@dataclass(frozen=True)
class Cell:
    """One cell of the grid: an arm's options, a seed, and ``control``: 0 for the method itself, k >= 1 for
    its k-th random control (a random direction of the same norm at the same sites and strength)."""
    arm: Arm
    options: dict
    seed: int
    control: int

    @property
    def control_seed(self) -> int:
        """The seed of this control's random directions: the fit's seed for the first draw (so a one-draw run
        keeps its cells), then ``seed + 100000 * (k - 1)``, which no fit seed below 100000 shares."""
        return self.seed + CONTROL_SEED_STRIDE * (int(self.control) - 1) if self.control else self.seed

    @property
    def key(self) -> str:
        opts = ",".join(f"{k}={v}" for k, v in sorted(self.options.items()))
        raw = f"{self.arm.name}" + (f"[{opts}]" if opts else "") + f"-s{self.seed}" + control_suffix(self.control)
        return re.sub(r"[^A-Za-z0-9_.,=\[\]-]", "_", raw)

    def fit_dir(self, train_ids: list[str]) -> str:
        """The directory name of this cell's fit: ``<name>-<fit key>`` (``-random[k]`` for the k-th control)."""
        fit_opts, _ = get(self.arm.name).split_options(self.options)
        key = fit_key(self.arm.name, fit_opts, self.seed, train_ids)
        return f"{self.arm.name}-{key[:16]}" + control_suffix(self.control)


CONTROL_SEED_STRIDE = 100_000


def control_suffix(control: int) -> str:
    """The cell-name suffix of the ``control``-th random control: none for the method (0), ``-random`` for
    the first draw, ``-random<k>`` for the k-th."""
    return "" if not control else "-random" if control == 1 else f"-random{int(control)}"


def control_indices(cfg: CompareConfig, arm: Arm) -> list[int]:
    """The cells ``arm`` gets per setting and seed: 0 (the method) and, when ``controls`` is on and the method
    has a random control, 1..k for k = the arm's ``control_draws`` (else the config's)."""
    if not (cfg.controls and get(arm.name).has_random_control):
        return [0]
    return [0, *range(1, (arm.control_draws or cfg.control_draws) + 1)]


def setting_options(arm: Arm, setting: dict) -> dict:
    """The options a cell of ``arm`` runs with at one swept ``setting``: the arm's ``options`` plus the setting's
    values. The one way ``options`` and ``sweep`` merge (a key in both is refused by :func:`parse_config`)."""
    return {**arm.options, **setting}


def canonical_arm(arm: Arm) -> Arm:
    """``arm`` with a one-setting sweep (one value per swept key, e.g. ``sweep: {layers: [all], strength: [1.0]}``)
    folded into its ``options``: the same cells, decided and scored at the setting the sweep names, and the same
    config (so a run resumes) whichever of the two ways the setting is written. Other arms unchanged."""
    if not arm.sweep or len(settings(arm)) != 1:
        return arm
    return replace(arm, options=setting_options(arm, settings(arm)[0]), sweep={})


def canonical_interventions(recorded: list) -> list:
    """A recorded config's ``interventions`` (JSON, as a manifest holds them) with every one-setting sweep folded
    into its options (:func:`canonical_arm`): how a run made before the fold reads."""
    out = []
    for a in recorded:
        if not isinstance(a, dict):
            return recorded
        sweep, options = a.get("sweep") or {}, a.get("options") or {}
        if sweep and all(isinstance(v, list) and len(v) == 1 for v in sweep.values()):
            a = {**a, "options": {**options, **{k: v[0] for k, v in sweep.items()}}, "sweep": {}}
        out.append(a)
    return out


def settings(arm: Arm) -> list[dict]:
    """The swept settings of an arm (one empty setting when it has no sweep), in sweep order."""
    import itertools
    keys = sorted(arm.sweep)
    return [dict(zip(keys, vals)) for vals in itertools.product(*(arm.sweep[k] for k in keys))] or [{}]


def cells(cfg: CompareConfig, chosen: dict[int, dict] | None = None) -> list[Cell]:
    """The cells of the comparison grid, in config order: every swept setting of every arm, or, with
    ``chosen`` (arm index -> setting, from the selection), only the chosen setting of each swept arm."""
    out = []
    for i, arm in enumerate(cfg.interventions):
        grid = settings(arm) if chosen is None or i not in chosen else [chosen[i]]
        for g in grid:
            for seed in arm.seeds:
                for c in control_indices(cfg, arm):
                    out.append(Cell(arm, setting_options(arm, g), seed, c))
    return out


def swept_arms(cfg: CompareConfig) -> list[int]:
    """The indices of the arms with more than one setting (chosen on the validation split)."""
    return [i for i, arm in enumerate(cfg.interventions) if len(settings(arm)) > 1]
