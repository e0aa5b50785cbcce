"""The dose-response study (``kind: dose_response``): every intervention on the fair organism with the bias dial.

The fair organism (docs/ORGANISM.md) with the dial (the config's ``mechanism``) at each ``beta`` of a grid, with
per-scenario random effects, decides the same held-out items at the mechanism's ``eval_degree`` as is (the ``baseline``), under every method of the
config (fitted on the dialled model), under each direction method's random control, under the two full
oracles and the half oracle, and (at scoring time) under each method's scrambled control. The run goes
through :mod:`evenhand.running.stages` in a :class:`~evenhand.runs.rundir.RunDir`: the model, the grid, one stage per
(arm, beta) cell, one per independent replication (:mod:`.replications`), and the scoring (:mod:`.scoring`).

More in docs/interventions/dose_response.md and :func:`run_dose_response`."""
from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal, get_args

import pandas as pd

from evenhand.runs.rundir import RunDir
from evenhand.inference.stats import BootstrapOptions, PairedInterval
from evenhand.suite.subsets import Condition
from evenhand.running.stages import LoadModel, Stage, StageReport, FnStage, exists, open_run, run_stages
from experiments.studies.base import Study, register

from .items import eval_degree, item_sets
from .scoring import (ACCURACY_MARGIN, BASELINE, CONTROL_SUFFIX, ORACLE_ARMS, ORACLE_FRACTION, PARTIAL_ORACLE,
                      REFUSAL_MARGIN)
from evenhand.support.options import ConfigError, Rules, build
from interventions.registry import load_builtin
from evenhand.support.options import read_yaml
from interventions.registry import get
from organism.dial import dialled
from organism.calibration import beta_for, gain_at
from organism.calibration import letter_logit_diff
from organism.dial import pressure_sign
from evenhand.running.decisions import decide
from interventions.base import decide_with
from evenhand.running.decisions import DecideOptions
from evenhand.runs.rundir import write_json_atomic
from interventions.fitted import Fitted
from evenhand.models.loading import load_model
from organism.calibration import scenario_multipliers
from organism.dial import Dial
from organism.dials import load_mechanism, mechanism_class
from organism.mechanism import DEFAULT_MECHANISM, MechanismError, calibration_file, dial_file
from .replications import check_replication_fields
from .replications import decode_replication, replication_cells
from evenhand.runs.rundir import write_table_atomic
from .replications import replication_data
from .scoring import (
    dose_data,
    dose_figure,
    replicate,
    replicate_independent,
    score_dose,
    scrambled_controls,
    summary,
)

METHODS = ("fair_instruction", "identity_blind", "self_critique", "counterfactual_cot", "caa", "ace", "leace",
           "loreft", "reft_r1")
"""The nine methods, in the README table's order."""


@dataclass(frozen=True)
class Oracle:
    """A known-answer edit on the dial: ``inverse`` applies the mechanism at ``sign * beta_s`` on top (-1 undoes
    it), ``project`` is the mechanism's projection oracle (:meth:`~organism.mechanism.Mechanism.project`;
    ``layer``: the last_layer dial's read removed at another layer, a misplaced oracle for tests)."""
    kind: str
    sign: float = -1.0
    layer: int | None = None


Replicate = Literal["subsets", "independent"]
"""The ways of drawing the replications (:attr:`DoseConfig.replicate`)."""
REPLICATE = get_args(Replicate)
SCORING_FIELDS = frozenset({"output_dir", "replications", "replicate", "replication_fraction", "resamples",
                            "interval", "replication_scenarios", "replication_conditions", "accuracy_margin",
                            "refusal_margin"})
"""Config fields that change no cell of the main run (how many replications there are only adds or ignores
cells): a run directory can be rescored with other values of these. The independent replications' own
fields are checked against ``replications/replication.json``
(:func:`.replications.check_replication_fields`)."""

ORACLES = {"oracle_inverse": Oracle("inverse"), "oracle_project": Oracle("project")}
"""The benchmark's two full oracles by arm name (the half oracle: :data:`HALF_ORACLE`)."""


HALF_ORACLE = Oracle("inverse", sign=-ORACLE_FRACTION)
"""The half oracle: the inverse edit of :data:`~.scoring.ORACLE_FRACTION` of the dial
(``-0.5 beta_s v a^T`` added: scenario ``s`` is decided at ``beta_s / 2``). Its known slope 0.5 assumes FragGap
linear in beta over the grid; the replications' mean slope measures that (docs/INTERVENTIONS.md)."""


def oracle_for(arm: str) -> Oracle | None:
    """The oracle edit of ``arm`` (None: the arm is no oracle)."""
    return HALF_ORACLE if arm == PARTIAL_ORACLE else ORACLES.get(arm)


@dataclass(frozen=True)
class DoseMethod:
    """One method of the benchmark and its flat options (split into fit and apply options by the method)."""
    name: str
    options: dict = field(default_factory=dict)


@dataclass(frozen=True)
class DoseConfig:
    """The benchmark's config (``experiments/configs/dose_response.yaml``; :func:`parse_config`)."""
    output_dir: str
    model: str = "evenhand/models/organism_fair"
    """The fair organism's directory (with the mechanism's fitted file, :func:`~organism.mechanism.dial_file`, and
    its calibration curve, :func:`~organism.mechanism.calibration_file`, when ``betas`` is empty)."""
    mechanism: str = DEFAULT_MECHANISM
    """The dial mechanism that plants the bias (a name of :data:`organism.mechanism.MECHANISMS`): its fitted
    file, its calibration curve and its ``eval_degree`` (the degree of the evaluation and fitting items)."""
    fraggaps: tuple[float, ...] = (0.0, 2.5, 5.0, 10.0, 20.0)
    """Target FragGaps (pp) at the mechanism's ``eval_degree``; each beta is read off its calibration curve (0 pp:
    beta 0)."""
    betas: tuple[float, ...] = ()
    """An explicit beta grid (the first must be 0); when given, ``fraggaps`` is not used."""
    icc: float = 0.1
    """The intra-class correlation of the per-scenario random effects (0: none)."""
    gain: float | None = None
    """The dial's gain k (logits per unit beta) for the random effects when there is no calibration curve;
    None: measured on the fitting items at the largest beta."""
    eval_scenarios: int = 24
    eval_contrasts: int = 1
    conditions: tuple[Condition, ...] = ("GT",)
    """The item conditions decided (GT: FragGap and accuracy; add AMB for TieShift)."""
    train_scenarios: int = 24
    train_degrees: tuple[int, ...] = ()
    """The degrees of the fitting items; empty: the mechanism's ``eval_degree`` (:func:`train_degrees`)."""
    train_max_items: int = 600
    methods: tuple[DoseMethod, ...] = tuple(DoseMethod(m) for m in METHODS)
    controls: bool = True
    control_seed: int = 0
    replications: int = 40
    replicate: Replicate = "subsets"
    """How the replications behind the false-positive rate and the coverage are drawn: ``subsets`` (seeded
    subsets of ``replication_fraction`` of the one decoded pool: cheap, overlapping, so not independent) or
    ``independent`` (each replication decodes its own items: :mod:`.replications`)."""
    replication_fraction: float = 0.5
    replication_scenarios: int = 10
    """Held-out scenarios per independent replication (``replicate: independent``)."""
    replication_conditions: tuple[Condition, ...] = ("GT",)
    """The conditions an independent replication decides (GT: FragGap; add AMB for TieShift)."""
    accuracy_margin: float = ACCURACY_MARGIN
    """A cell (arm, beta) losing more accuracy than this (GT items without pressure, refusals wrong) is
    degraded; a method beyond it at some beta gets a scrambled control."""
    refusal_margin: float = REFUSAL_MARGIN
    """A cell whose refusal rate rises by more than this, over all items or over a metric's pressured items,
    is degraded (:func:`.scoring.flag_cells`)."""
    resamples: int = BootstrapOptions.resamples
    interval: PairedInterval = "percentile"
    """The CIs of the table and the replications: ``percentile`` or ``jackknife-t``
    (:data:`.scoring.INTERVALS`)."""
    seed: int = 0
    batch_size: int = 64


def parse_config(raw: dict, where: str = "config") -> DoseConfig:
    """Check a config mapping with the one config builder (:func:`evenhand.support.options.build`); errors name the
    field.
    Its ``kind``, when given, must be ``dose_response``."""

    from interventions.base import REGISTRY, InterventionError  # deferred: a name of this module
    load_builtin()
    rules = Rules(tuple_choices={"train_degrees": (1, 2, 3)},
                  positive=frozenset({"eval_scenarios", "eval_contrasts", "train_scenarios", "train_max_items",
                                      "replications", "resamples", "batch_size", "replication_scenarios"}))
    if raw.get("kind", DoseResponseStudy.kind) != DoseResponseStudy.kind:
        raise ConfigError(f"{where}: config field 'kind': {raw['kind']!r} is not a dose_response config")
    raw = {k: v for k, v in raw.items() if k != "kind"}
    try:
        cfg = build(DoseConfig, raw, rules=rules)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    try:
        mechanism_class(cfg.mechanism)
    except MechanismError as exc:
        raise ConfigError(f"{where}: config field 'mechanism': {exc}") from None
    for i, m in enumerate(cfg.methods):
        if m.name not in REGISTRY:
            raise ConfigError(f"{where}: config field 'methods[{i}].name': unknown intervention {m.name!r}")
        try:
            REGISTRY[m.name].split_options(m.options)
        except InterventionError as exc:
            raise ConfigError(f"{where}: config field 'methods[{i}].options': {exc}") from None
    if cfg.betas and cfg.betas[0] != 0:
        raise ConfigError(f"{where}: config field 'betas' must start with 0 (the fair organism), got {cfg.betas[0]}")
    if not cfg.betas and (not cfg.fraggaps or cfg.fraggaps[0] != 0):
        raise ConfigError(f"{where}: config field 'fraggaps' must start with 0 (the fair organism)")
    if not 0 <= cfg.icc < 1:
        raise ConfigError(f"{where}: config field 'icc' must be in [0, 1), got {cfg.icc}")
    if not 0 < cfg.replication_fraction <= 1:
        raise ConfigError(f"{where}: config field 'replication_fraction' must be in (0, 1]")
    for name in ("accuracy_margin", "refusal_margin"):
        if not 0 <= getattr(cfg, name) < 1:
            raise ConfigError(f"{where}: config field {name!r} must be in [0, 1), got {getattr(cfg, name)}")
    return cfg


def load_config(path: str | Path) -> DoseConfig:
    """Read and check a dose-response config file."""
    return parse_config(read_yaml(path), str(path))


def arm_names(cfg: DoseConfig) -> list[str]:
    """The baseline, the methods, the random controls of the direction methods, the oracles (the scrambled
    controls are added at scoring time)."""
    methods = [m.name for m in cfg.methods]
    controls = [m + CONTROL_SUFFIX for m in methods if cfg.controls and get(m).has_random_control]
    return [BASELINE, *methods, *controls, *ORACLE_ARMS]


@contextlib.contextmanager
def edited(lm, dial, beta: float, oracle: Oracle | None = None) -> Iterator[None]:
    """Inside: the model carries the dial mechanism ``dial`` at ``beta`` (and the ``oracle``'s edit on top);
    restored exactly on exit, the oracle's edit first (:func:`organism.dial.dialled`)."""
    if oracle is not None and oracle.layer is not None and not isinstance(dial, Dial):
        raise ValueError(f"a misplaced projection oracle (layer {oracle.layer}) exists for the last_layer dial only, "
                         f"not {dial.name!r}")
    with contextlib.ExitStack() as stack:
        stack.enter_context(dialled(lm.model, dial, beta))
        if oracle is not None and oracle.kind == "inverse":
            stack.enter_context(dialled(lm.model, dial, oracle.sign * beta))
        elif oracle is not None:
            stack.enter_context(dial.project(lm.model) if oracle.layer is None
                                else dial.project(lm.model, layer=oracle.layer))  # a misplaced oracle (tests)
        yield


def read_curve(cfg: DoseConfig) -> dict | None:
    """The mechanism's calibration curve next to the organism (:func:`~organism.mechanism.calibration_file`), or
    None when there is none; refused when it records another mechanism or another degree than the run's."""
    path = Path(cfg.model) / calibration_file(cfg.mechanism)
    if not path.exists():
        return None
    curve = json.loads(path.read_text())
    if curve.get("mechanism", cfg.mechanism) != cfg.mechanism:  # without the key: the file name's mechanism
        raise ValueError(f"{path}: a calibration curve of mechanism {curve['mechanism']!r}, the config's "
                         f"mechanism is {cfg.mechanism!r} (config field 'mechanism')")
    if curve.get("degree", eval_degree(cfg)) != eval_degree(cfg):
        raise ValueError(f"{path}: calibrated at degree {curve['degree']}, mechanism {cfg.mechanism!r} is "
                         f"evaluated at degree {eval_degree(cfg)}: recalibrate it")
    return curve


def grid(cfg: DoseConfig, lm, dial, train: pd.DataFrame) -> tuple[list[float], list[float | None], list[float]]:
    """(betas, their target FragGaps or None, the dial's gain at each beta) from the config and, for targets,
    the mechanism's committed calibration curve (:func:`read_curve`)."""
    curve_path = Path(cfg.model) / calibration_file(cfg.mechanism)
    curve = read_curve(cfg)
    if cfg.betas:
        betas, targets = [float(b) for b in cfg.betas], [None] * len(cfg.betas)
    elif curve is None:
        raise FileNotFoundError(f"{curve_path}: no calibration curve; give the betas (config field 'betas')")
    else:
        betas = [0.0 if t == 0 else beta_for(curve, t / 100) for t in cfg.fraggaps]
        targets = [t / 100 for t in cfg.fraggaps]
    if curve is not None and cfg.gain is None:
        gains = [gain_at(curve, b) if b else 0.0 for b in betas]
    else:
        k = cfg.gain if cfg.gain is not None or not max(betas) else measured_gain(lm, dial, train, max(betas))[0]
        gains = [k if b else 0.0 for b in betas]
    return betas, targets, gains


def measured_gain(lm, dial, items: pd.DataFrame, beta: float, under=None,
                  oracle: Oracle | None = None) -> tuple[float, float, int]:
    """The dial's gain at ``beta``: the mean change of the A-minus-B letter logit, signed by ``c``, per unit
    beta, with its standard error and the number of items (pressured items with ``c`` != 0). ``under``: a
    zero-argument callable giving a context manager (an arm's edit) entered for both the undialled and the
    dialled pass, so the gain is the dial's effect *under* that arm: an arm that damps the dial's read lowers
    it; ``oracle``: both passes with that oracle's edit on the dial (either full oracle sets the gain to 0, the
    half oracle halves it). The
    letter logit is read from one forward pass over the prompt and the candidate noun, the noun declared the
    answer token (:func:`organism.calibration.letter_logit_diff`)."""
    import numpy as np

    under = under or contextlib.nullcontext
    c = pressure_sign(items)
    on, c = items[c != 0], c[c != 0]
    with edited(lm, dial, 0.0, oracle), under():
        base = letter_logit_diff(lm, on)
    with edited(lm, dial, beta, oracle), under():
        g = (letter_logit_diff(lm, on) - base) * c / beta
    return float(np.mean(g)), float(np.std(g, ddof=1) / np.sqrt(len(g))), len(g)


def decide_cell(lm, dial, items: pd.DataFrame, beta: float, multipliers: dict[str, float], opts,
                method=None, fitted=None, apply_options=None, oracle: Oracle | None = None) -> pd.DataFrame:
    """Decide ``items`` scenario by scenario, scenario ``s`` with the dial at ``beta * multipliers[s]`` in the
    weights, under ``method`` (a fitted intervention; None: as is) or ``oracle``; items' order kept."""
    parts = []
    for s, g in items.groupby("scenario_id", sort=False):
        with edited(lm, dial, beta * multipliers[s], oracle):
            parts.append(decide(g, lm, opts) if method is None else
                         decide_with(method, fitted, g, lm, opts, apply_options))
    return pd.concat(parts).set_index("item_id").loc[items["item_id"]].reset_index()


class CellDecoder:
    """Decodes the benchmark's cells into one run directory: the model with the dial, the decide options,
    and every method's fit at each beta index (loaded from the run's ``fitted_dir("<method>@<k>")`` or
    fitted on the train items of the dialled model and saved there)."""

    def __init__(self, cfg: DoseConfig, lm, dial, train: pd.DataFrame, betas: list[float], progress: bool = True,
                 run: RunDir | None = None):
        self.cfg, self.lm, self.dial, self.train, self.betas, self.progress = cfg, lm, dial, train, betas, progress
        self.run = run if run is not None else RunDir(cfg.output_dir)
        self.opts = DecideOptions(mode="answer", batch_size=cfg.batch_size, progress=False)
        self.options = {m.name: m.options for m in cfg.methods}
        self.fits: dict[tuple[str, int], object] = {}

    def fitted(self, name: str, k: int):
        """Method ``name``'s fit on the model dialled at beta index ``k`` (fitted once, then read back)."""
        from interventions.fitted import Fitted, InterventionError, fit_key  # deferred: a name of this module
        if (name, k) not in self.fits:
            fdir = self.run.fitted_dir(f"{name}@{k}")
            method = get(name)
            fit_opts = method.split_options(self.options[name])[0]
            ids = self.train["item_id"].astype(str).tolist()
            key = fit_key(name, method.fit_options(fit_opts), self.cfg.seed, ids)
            if (fdir / "fitted.json").exists():
                fit = Fitted.load(fdir)
                if fit.key != key:  # a fit of other options or another version of the method: its cells are stale
                    raise InterventionError(f"{fdir} holds a fit with another key ({fit.key[:16]}, expected "
                                            f"{key[:16]}): the method or its options changed since it was fitted; "
                                            "remove that fit and the cells decoded with it, or use another "
                                            "output_dir")
                self.fits[(name, k)] = fit
            else:
                t0 = time.time()
                with edited(self.lm, self.dial, self.betas[k]):
                    fit = method.fit(self.lm, self.train, fit_opts, seed=self.cfg.seed)
                fit.save(fdir)
                write_json_atomic(RunDir(fdir).seconds_path, {"seconds": round(time.time() - t0, 1)})
                self.fits[(name, k)] = fit
        return self.fits[(name, k)]

    def decode(self, cell: RunDir, arm: str, k: int, items: pd.DataFrame, multipliers: dict[str, float],
               control_seed: int, log: bool = True) -> pd.DataFrame:
        """The responses of ``arm`` at beta index ``k`` on ``items`` (scenario effects ``multipliers``), read
        from the ``cell`` directory when decoded before, else decoded and written there atomically (a random
        control's direction drawn with ``control_seed``)."""
        if cell.responses_path.exists():
            return cell.read_responses()
        t0, beta = time.time(), self.betas[k]
        if arm == BASELINE or arm in ORACLE_ARMS:
            resp = decide_cell(self.lm, self.dial, items, beta, multipliers, self.opts,
                               oracle=oracle_for(arm))
        else:
            name = arm.removesuffix(CONTROL_SUFFIX)
            method = get(name)
            fit = self.fitted(name, k)
            if arm != name:
                fit = method.random_control(fit, control_seed)
            resp = decide_cell(self.lm, self.dial, items, beta, multipliers, self.opts, method, fit,
                               method.split_options(self.options[name])[1])
        cell.write_responses(resp)
        write_json_atomic(cell.seconds_path, {"seconds": round(time.time() - t0, 1)})
        if self.progress and log:
            print(f"[beta {beta:g}] {arm}: {len(resp)} items, {time.time() - t0:.1f} s, "
                  f"answered {resp['choice'].notna().mean():.3f}", flush=True)
        return resp


ERASERS = ("ace", "leace")
"""The methods whose edit is an eraser: their operator norms (and their controls') go to ``operator_norms.csv``."""


def eraser_norm_rows(run: RunDir | Path, arms: list[str], betas: list[float], control_seed: int) -> pd.DataFrame:
    """One row per (arm, beta, site) of every eraser arm and its random control: the operator norm of the map's
    linear part (:func:`interventions.steered.eraser_norms`), from the run's saved fits (a control's from the
    same relabelled refit :meth:`random_control` decodes with). Fits not written are left out."""
    from interventions.steered import eraser_norms  # deferred: pulls in torch
    run = run if isinstance(run, RunDir) else RunDir(run)
    rows = []
    for arm in arms:
        name = arm.removesuffix(CONTROL_SUFFIX)
        if name not in ERASERS:
            continue
        for k, beta in enumerate(betas):
            fdir = run.fitted_dir(f"{name}@{k}")
            if not (fdir / "fitted.json").exists():
                continue
            fit = Fitted.load(fdir)
            if arm != name:
                fit = get(name).random_control(fit, control_seed)
            rows += [{"arm": arm, "beta": beta, "site": site, "operator_norm": float(v)}
                     for site, v in eraser_norms(fit).items()]
    return pd.DataFrame(rows, columns=["arm", "beta", "site", "operator_norm"])


def config_record(cfg: DoseConfig) -> dict:
    """The config as the manifest records it (plain JSON values)."""
    return json.loads(json.dumps(asdict(cfg), default=str))


def recorded_defaults() -> dict:
    """Every field's default: a field a recorded config lacks (written before it existed) counts as this."""
    return config_record(DoseConfig(output_dir=""))


class DoseRun:
    """The stages of one call on a run directory and what they share: the model, the dial, the items, the
    grid and the decoded cells. ``only``, ``reverse`` and ``replication_shard``: :func:`run_dose_response`."""

    def __init__(self, cfg: DoseConfig, progress: bool = True, only: list[int] | None = None, reverse: bool = False,
                 replication_shard: tuple[int, int] | None = None):
        self.cfg, self.progress, self.only, self.reverse, self.shard = cfg, progress, only, reverse, replication_shard
        self.run = RunDir(cfg.output_dir)
        self.arms = arm_names(cfg)
        self.n_betas = len(cfg.betas or cfg.fraggaps)
        self.model = LoadModel(lambda: load_model(cfg.model))
        self.responses: dict[tuple[str, int], pd.DataFrame] = {}
        self.summary: pd.DataFrame | None = None

    @property
    def worker(self) -> str | None:
        """The name of this call's worker run (a share of the cells, no scoring); None for the run itself."""
        if self.only is None and self.shard is None:
            return None
        if self.shard is not None:
            return f"replications-{self.shard[0]}of{self.shard[1]}"
        return "only-" + "-".join(map(str, sorted(set(self.only)))) + ("-reverse" if self.reverse else "")

    def prepare(self, run: RunDir) -> None:
        """The grid stage: the items, the betas and the dial's gains, recorded in ``run``'s manifest."""

        cfg = self.cfg
        self.record = json.loads((Path(cfg.model) / "organism.json").read_text())
        self.dial = load_mechanism(cfg.model, cfg.mechanism)
        lm = self.model()
        self.train, self.ev = item_sets(cfg, self.record)
        self.betas, self.targets, self.gains = grid(cfg, lm, self.dial, self.train)
        scen = sorted(self.ev["scenario_id"].unique())
        self.mults = [scenario_multipliers(scen, cfg.icc, b, self.gains[k] or 1.0, cfg.seed)
                      for k, b in enumerate(self.betas)]
        self.dec = CellDecoder(cfg, lm, self.dial, self.train, self.betas, self.progress, self.run)
        if cfg.replicate == "independent" and self.only is None:
            check_replication_fields(cfg, self.run, write=True)
        run.update_manifest(mechanism={"name": self.dial.name, "summary": self.dial.summary,
                                       "eval_degree": eval_degree(cfg), "file": dial_file(self.dial.name),
                                       "curve": calibration_file(self.dial.name) if not cfg.betas else None},
                            betas=self.betas, targets=self.targets, gains=self.gains, arms=self.arms,
                            n_eval_items=len(self.ev), n_eval_scenarios=len(scen), n_train_items=len(self.train),
                            eval_scenarios=scen)

    def cell_stage(self, arm: str, k: int) -> FnStage:
        """Decode ``arm`` at beta index ``k``; done once its responses are written (by any process)."""
        cell = self.run.dose_cell(arm, k)

        def go(run: RunDir) -> None:
            self.responses[(arm, k)] = self.dec.decode(cell, arm, k, self.ev, self.mults[k], self.cfg.control_seed)
        return FnStage(f"cell {arm}@{k}", go, exists(lambda run: cell.responses_path), about=f"beta index {k}")

    def replication_stage(self, r: int) -> FnStage:
        """Decode independent replication ``r``; done once each of its cells is written."""
        paths = [self.run.replication_cell(r, a, k).responses_path for a, k in replication_cells(self.arms,
                                                                                                  self.n_betas)]
        return FnStage(f"replication r{r:02d}",
                    lambda run: decode_replication(self.dec, self.record, r, self.arms, self.gains),
                    exists(*(lambda run, p=p: p for p in paths)))

    def score(self, run: RunDir) -> pd.DataFrame:
        """Record the cells' times in the manifest, then score every cell (:func:`score_run`)."""
        seconds = {str(p.parent.relative_to(self.run.path)): json.loads(p.read_text())["seconds"]
                   for p in self.run.seconds_files()}
        run.update_manifest(seconds={k: v for k, v in seconds.items() if not k.startswith("replications")},
                            replication_seconds=round(sum(v for k, v in seconds.items()
                                                          if k.startswith("replications")), 1))
        responses = {(a, k): self.responses[(a, k)] if (a, k) in self.responses
                     else self.run.dose_cell(a, k).read_responses()
                     for k in range(self.n_betas) for a in self.arms}
        self.summary = score_run(self.cfg, responses, self.arms, self.betas, self.targets, self.run)
        return self.summary

    def stages(self) -> list[Stage]:
        """The model, the grid, then this call's share: every cell, the replications and the scoring; with
        ``only``, the cells of those beta indices; with ``replication_shard``, that shard's replications."""
        arms = self.arms[::-1] if self.reverse else self.arms
        head: list[Stage] = [self.model, FnStage("grid", self.prepare)]
        if self.shard is not None:
            i, n = self.shard
            return [*head, *(self.replication_stage(r) for r in range(self.cfg.replications) if r % n == i)]
        cells = [self.cell_stage(a, k) for k in range(self.n_betas) if self.only is None or k in self.only
                 for a in arms]
        if self.only is not None:
            return [*head, *cells]
        reps = [self.replication_stage(r) for r in range(self.cfg.replications)] \
            if self.cfg.replicate == "independent" else []
        return [*head, *cells, *reps, FnStage("score", self.score)]

    def open(self) -> RunDir:
        """Open (or create) this call's run directory through the driver: the run's own, or, for a share of
        the cells, its worker run ``workers/<name>/`` (its own lock, so processes writing different shares run
        side by side). Refused when the run or any worker was made from a config that decodes other cells."""
        config, defaults = config_record(self.cfg), recorded_defaults()
        if self.worker is None:
            for w in self.run.workers():
                w.check_same_config(config, None, SCORING_FIELDS, defaults)
            return open_run(self.run.path, config, SCORING_FIELDS, defaults=defaults, kind="dose_response",
                            half_oracle={"fraction": ORACLE_FRACTION, "edit": f"inverse of {ORACLE_FRACTION} beta_s"})
        if self.run.exists():
            self.run.check_same_config(config, None, SCORING_FIELDS, defaults)
        return open_run(self.run.worker(self.worker).path, config, SCORING_FIELDS, defaults=defaults,
                        kind="dose_response worker", run=str(self.run.path))


def run_dose_response(cfg: DoseConfig, progress: bool = True, only: list[int] | None = None,
                      reverse: bool = False, replication_shard: tuple[int, int] | None = None) -> pd.DataFrame | None:
    """Run (or resume) the benchmark through the stage driver; returns the per-arm summary and writes every
    output (below).

    The fair organism (docs/ORGANISM.md) with the dial (the config's ``mechanism``, default ``last_layer``:
    ``W_down[L] += beta v a^T``; the others: docs/interventions/dose_response.md, "The benchmark across dial
    mechanisms", where "degree 3" below reads as the mechanism's ``eval_degree``) at each ``beta`` of a grid (read
    off the calibration curve with :func:`organism.calibration.beta_for` for the target degree-3 FragGaps, or given
    directly), with per-scenario random effects at an intra-class correlation
    (:func:`organism.calibration.scenario_multipliers`: scenario ``s`` is decided with ``beta_s v a^T`` in its
    weights, edited in place and restored exactly), decides the same held-out degree-3 items

    - as is (the arm ``baseline``: the bias at that beta);
    - under every method of the config, each fitted on train-scenario items *of that dialled model* (the edit at
      ``beta``, without the per-scenario effects);
    - under each direction method's random control
      (:meth:`interventions.base.DirectionIntervention.random_control`: same sites, norm and strength);
    - under the two full oracles (:data:`ORACLES`): the inverse edit (``-beta_s v a^T`` added) and the projection
      of ``a`` out of the down-projection's input at the dial's layer (``W_down <- W_down (I - a a^T / |a|^2)``);
    - under the half oracle (:data:`HALF_ORACLE`): the inverse edit of half the dial (known slope 0.5);
    - and, at scoring time, under each method's *scrambled* control when the method loses accuracy
      (:func:`.scoring.scrambled_controls`: the baseline's answers, the same share randomised).

    The run goes through :mod:`evenhand.running.stages` in a :class:`~evenhand.runs.rundir.RunDir` (every path is
    RunDir's): the model, the grid, one stage per (arm, beta) cell (done once its responses are written: a resumed
    run skips it), one per independent replication (``replications``), and the scoring (``scoring``), which always
    runs. Fields that change no decoded cell (:data:`SCORING_FIELDS`) may change between calls on one output
    directory (the driver's ``may_change``): the run is rescored. Outputs and the two-process recipe:
    docs/interventions/dose_response.md, "The dose-response benchmark".

    ``only``: decode the cells of these beta indices and stop (None returned); ``reverse``: take the arms of a
    beta in reverse order (a second process on the same betas meets the first in the middle instead of
    repeating its cells); ``replication_shard`` ``(i, n)``: decode only the independent replications ``r``
    with ``r % n == i`` and stop. Such a call runs as a worker run of its own (:meth:`RunDir.worker`), so
    separate processes can share one output directory (each cell and each fit is its own file); a last call
    without them decodes what is missing and scores."""
    if replication_shard is not None:
        if cfg.replicate != "independent":
            raise ValueError("replication_shard needs independent replications (config field 'replicate: independent')")
        if not 0 <= replication_shard[0] < replication_shard[1]:
            raise ValueError(f"replication shard {replication_shard[0]} of {replication_shard[1]}: need 0 <= i < n")
        if only is not None:
            raise ValueError("only and replication_shard together decode nothing: give one of them")
    study = DoseRun(cfg, progress, only, reverse, replication_shard)
    run_stages(study.open(), study.stages(), StageReport(f"dose_response {cfg.output_dir}") if progress else None)
    return None if study.worker else study.summary


def score_run(cfg: DoseConfig, responses: dict, arms: list[str], betas: list[float],
              targets: list[float | None], run: RunDir | None = None) -> pd.DataFrame:
    """Score the decoded cells and write the table, the replications, the summary and the figure."""

    run = run if run is not None else RunDir(cfg.output_dir)
    scram, shares = scrambled_controls(responses, arms, len(betas), cfg.accuracy_margin, cfg.seed)
    d = dose_data({**responses, **scram}, [*arms, *dict.fromkeys(a for a, _ in scram)], betas)
    table = score_dose(d, cfg.resamples, cfg.seed, targets=targets, interval=cfg.interval,
                       accuracy_margin=cfg.accuracy_margin, refusal_margin=cfg.refusal_margin)
    if cfg.replicate == "independent":
        check_replication_fields(cfg, run, write=False)
        reps = replicate_independent(replication_data(run, arms, betas, cfg.replications), cfg.resamples, cfg.seed,
                                     interval=cfg.interval)
    else:
        reps = replicate(d, cfg.replications, cfg.replication_fraction, cfg.resamples, cfg.seed,
                         interval=cfg.interval)
    summ = summary(table, reps)
    write_table_atomic(run.dose_table, table)
    write_table_atomic(run.dose_csv, table)
    write_table_atomic(run.dose_replications_table, reps)
    write_table_atomic(run.dose_summary_csv, summ)
    write_table_atomic(run.scrambled_csv, shares)
    write_table_atomic(run.operator_norms_csv, eraser_norm_rows(run, arms, betas, cfg.control_seed))
    dose_figure(table, run.dose_figure_stem)
    return summ


@register
class DoseResponseStudy(Study):
    """``kind: dose_response``: every intervention on the fair organism across the bias dial's strength."""

    kind = "dose_response"
    tables = (RunDir(".").dose_table.name,)

    def parse(self, data, where: str = "config") -> DoseConfig:
        return parse_config(dict(data), where)

    def stages(self, cfg: DoseConfig, progress: bool = True) -> list[Stage]:
        return DoseRun(cfg, progress).stages()

    def run(self, cfg: DoseConfig, progress: bool = True, backend: str = "local", **backend_options) -> pd.DataFrame:
        if backend != "local":
            from evenhand.support.options import ConfigError
            raise ConfigError(f"a dose_response config runs on the local backend only, not {backend!r}")
        return run_dose_response(cfg, progress)

    def text(self, cfg: DoseConfig, result: pd.DataFrame) -> str:
        return result.round(3).to_string(index=False)
