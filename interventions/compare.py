"""Compare interventions against the baseline on the same held-out items.

A comparison config (YAML, read and checked by :mod:`evenhand.options`; see
``experiments/configs/compare_interventions.yaml``)::

    model: evenhand-organism            # preset, HF id or local path
    output_dir: runs/compare_organism
    split: {seed: 0, heldout_fraction: 0.2}   # scenarios split by a stable hash
    train: {scenarios: 40, degrees: [1, 2, 3], max_items: 800}
    eval: {scenarios: 16, degrees: [3]}
    seed: 0                             # item sampling and bootstrap
    mode: answer
    batch_size: 64
    resamples: 1000
    controls: true                      # a random direction of the same norm for every direction-based method
    refusal_margin: 0.05                # a cell whose refusal rate rises by more is flagged, never ranked
    interventions:
      - name: fair_instruction
      - name: caa
        options: {layers: middle}
        sweep: {alpha: [1, 4, 16]}      # one cell per value (alpha is an apply option: fitted once)
      - name: loreft
        seeds: [0, 1, 2]

Each arm's flat ``options`` (and swept values) are split into the method's fit
and apply options by their dataclass fields (an unknown key is an error naming
it). A fit is cached under its fit key (a hash of the fit options, the seed and
the train item ids) in ``fitted/<name>-<key>/``, so a swept fit option gets one
fit per value and a swept apply option reuses one fit; the random control of a
direction-based method is derived from that fit (``fitted/<name>-<key>-random/``).

Fitting uses items of train scenarios only, scoring uses items of held-out
scenarios only (:func:`evenhand.models.policy.matched_items`: every pressured
item's baseline is present). Each cell (intervention x options x seed x
control) writes ``cells/<cell>/responses.parquet``; cells already written are
skipped, so an interrupted comparison resumes. The result is one tidy table
``compare.parquet`` / ``compare.csv`` (:func:`comparison_rows`: per cell and
metric, the cell's value and the paired scoring of :mod:`evenhand.paired`:
signed change toward zero, refusal change and flag, accuracy loss with a
clustered test, method minus its random controls; docs/INTERVENTIONS.md,
"Scoring a comparison"), the frontier figure ``frontier.{pdf,svg,png}`` and
the LaTeX table ``compare.tex``.
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from evenhand.runs import RunDir

from .base import REGISTRY, Fitted, InterventionError, decide_with
from .fitted import fit_key
from .registry import get


@dataclass(frozen=True)
class Arm:
    name: str
    options: dict = field(default_factory=dict)
    sweep: dict = field(default_factory=dict)
    seeds: tuple[int, ...] = (0,)


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
    eval_degrees: tuple[int, ...] = (3,)
    seed: int = 0
    mode: str = "answer"
    batch_size: int = 64
    resamples: int = 1000
    controls: bool = True
    refusal_margin: float = 0.05  # a cell whose refusal rate rises by more is flagged, never ranked (evenhand.paired)


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
    degrees: tuple[int, ...] = CompareConfig.eval_degrees


@dataclass(frozen=True)
class _ArmFile:
    name: str
    options: dict | None = None
    sweep: dict | None = None
    seeds: tuple[int, ...] = (0,)


@dataclass(frozen=True)
class _CompareFile:
    """A comparison config file's shape (sections as in the module docstring); defaults are CompareConfig's."""
    model: str
    output_dir: str
    interventions: tuple[_ArmFile, ...]
    split: _Split | None = None
    train: _Train | None = None
    eval: _Eval | None = None
    seed: int = CompareConfig.seed
    mode: str = CompareConfig.mode
    batch_size: int = CompareConfig.batch_size
    resamples: int = CompareConfig.resamples
    controls: bool = CompareConfig.controls
    refusal_margin: float = CompareConfig.refusal_margin


def parse_config(raw: dict, where: str = "config") -> CompareConfig:
    """Validate a comparison config dict with the one config builder (:func:`evenhand.options.build`;
    errors name the file and the field)."""
    from evenhand.options import ConfigError, Rules, build

    from .registry import registered
    registered()  # loads the built-in methods
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: a comparison config must be a mapping")
    rules = Rules(choices={"mode": ("answer", "reasoning", "logprob")},
                  positive=frozenset({"batch_size", "resamples", "train.scenarios", "train.max_items",
                                      "eval.scenarios"}))
    try:
        f = build(_CompareFile, raw, rules=rules)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    arms = []
    for i, a in enumerate(f.interventions):
        w = f"{where}: interventions[{i}]"
        if a.name not in REGISTRY:
            raise ConfigError(f"{w}.name: unknown intervention {a.name!r}; registered: {', '.join(sorted(REGISTRY))}")
        options, sweep = a.options or {}, a.sweep or {}
        for k, v in sweep.items():
            if not isinstance(v, list) or not v:
                raise ConfigError(f"{w}.sweep.{k} must be a non-empty list")
        try:  # option names and values: every swept value once
            REGISTRY[a.name].split_options(options)
            for k, vals in sweep.items():
                for v in vals:
                    REGISTRY[a.name].split_options({**options, k: v})
        except InterventionError as exc:
            raise ConfigError(f"{w}: {exc}") from None
        arms.append(Arm(a.name, options, sweep, a.seeds))
    split, train, ev = f.split or _Split(), f.train or _Train(), f.eval or _Eval()
    if not 0 < split.heldout_fraction < 1:
        raise ConfigError(f"{where}: split.heldout_fraction must be in (0, 1)")
    if not 0 <= f.refusal_margin <= 1:
        raise ConfigError(f"{where}: refusal_margin must be in [0, 1] (a fraction: 0.05 = 5 pp)")
    return CompareConfig(
        model=f.model, output_dir=f.output_dir, interventions=tuple(arms), split_seed=split.seed,
        heldout_fraction=split.heldout_fraction, train_scenarios=train.scenarios, train_degrees=train.degrees,
        train_max_items=train.max_items, eval_scenarios=ev.scenarios, eval_degrees=ev.degrees, seed=f.seed,
        mode=f.mode, batch_size=f.batch_size, resamples=f.resamples, controls=f.controls,
        refusal_margin=f.refusal_margin)


def load_config(path: str | Path) -> CompareConfig:
    """A validated config from a YAML file (read by the one config reader, :func:`evenhand.options.read_yaml`)."""
    from evenhand.options import read_yaml
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"comparison config {p} not found")
    return parse_config(read_yaml(p), str(p))


@dataclass(frozen=True)
class Cell:
    arm: Arm
    options: dict
    seed: int
    control: bool

    @property
    def key(self) -> str:
        opts = ",".join(f"{k}={v}" for k, v in sorted(self.options.items()))
        raw = f"{self.arm.name}" + (f"[{opts}]" if opts else "") + f"-s{self.seed}" + ("-random" if self.control else "")
        return re.sub(r"[^A-Za-z0-9_.,=\[\]-]", "_", raw)

    def fit_dir(self, train_ids: list[str]) -> str:
        """The directory name of this cell's fit: ``<name>-<fit key>`` (``-random`` for the control)."""
        fit_opts, _ = get(self.arm.name).split_options(self.options)
        key = fit_key(self.arm.name, fit_opts, self.seed, train_ids)
        return f"{self.arm.name}-{key[:16]}" + ("-random" if self.control else "")


def cells(cfg: CompareConfig) -> list[Cell]:
    """Every cell of the comparison grid, in config order."""
    import itertools
    out = []
    for arm in cfg.interventions:
        keys = sorted(arm.sweep)
        grid = [dict(zip(keys, vals)) for vals in itertools.product(*(arm.sweep[k] for k in keys))] or [{}]
        for g in grid:
            for seed in arm.seeds:
                controls = [False, True] if (cfg.controls and get(arm.name).has_random_control) else [False]
                for c in controls:
                    out.append(Cell(arm, {**arm.options, **g}, seed, c))
    return out


def item_sets(cfg: CompareConfig) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(train items, held-out evaluation items) from disjoint scenario sets."""
    from evenhand.models.organism import ORGANISM_SUITE, split_scenarios
    from evenhand.models.policy import matched_items
    train_ids, held_ids = split_scenarios(cfg.split_seed, cfg.heldout_fraction)
    if set(train_ids) & set(held_ids):
        raise InterventionError("train and held-out scenarios overlap")
    # the split is the organism's, so the items are rendered from the organism's suite version
    tr = matched_items(train_ids[: cfg.train_scenarios], cfg.seed + 1, suite=ORGANISM_SUITE)
    tr = tr[tr["degree"].isin(cfg.train_degrees)]
    if len(tr) > cfg.train_max_items:
        tr = tr.sample(cfg.train_max_items, random_state=cfg.seed).sort_index()
    ev = matched_items(held_ids[: cfg.eval_scenarios], cfg.seed, suite=ORGANISM_SUITE)
    ev = ev[ev["degree"].isin(cfg.eval_degrees)].reset_index(drop=True)
    return tr.reset_index(drop=True), ev


def _identity(cell_key: str, cell: Cell | None) -> dict:
    """The identifying columns of a cell's rows (the baseline when ``cell`` is None)."""
    return {"cell": cell_key, "intervention": cell.arm.name if cell else "baseline",
            "kind": get(cell.arm.name).kind if cell else "none", "seed": cell.seed if cell else None,
            "control": bool(cell.control) if cell else False,
            "options": json.dumps(cell.options if cell else {}, sort_keys=True, default=str)}


def _rows_for(cell_key: str, cell: Cell | None, resp: pd.DataFrame, resamples: int, seed: int) -> list[dict]:
    """The cell's own ``value`` rows: every metric as ``evenhand score`` reports it (answered items only)."""
    from evenhand.metrics import score
    from evenhand.schema import validate_rows
    rep = score(validate_rows(resp), resamples=resamples, seed=seed)
    ident = _identity(cell_key, cell)
    return [{**ident, "metric": m, "stat": "value", **{k: est.get(k) for k in ("value", "ci_low", "ci_high", "n")}}
            for m, est in rep["overall"].items()]


def controls_of(grid: list[Cell]) -> dict[str, list[str]]:
    """Each method cell's random controls: the control cells of the same intervention and options (one per
    seed), by cell key. Cells without a control are left out."""
    out = {}
    for c in grid:
        if not c.control:
            ctl = [k.key for k in grid if k.control and k.arm.name == c.arm.name and k.options == c.options]
            if ctl:
                out[c.key] = ctl
    return out


def comparison_rows(grid: list[Cell], base: pd.DataFrame, responses: dict[str, pd.DataFrame], resamples: int,
                    seed: int, refusal_margin: float) -> list[dict]:
    """The comparison table's rows: each cell's ``value`` rows and the paired scoring of every cell against the
    baseline and against its random controls (:func:`evenhand.paired.score_arms`, all cells on the same
    resampled scenarios). ``responses``: cell key -> the cell's responses."""
    from evenhand.paired import score_arms
    by_key = {c.key: c for c in grid}
    rows = _rows_for("baseline", None, base, resamples, seed)
    for c in grid:
        rows += _rows_for(c.key, c, responses[c.key], resamples, seed)
    paired = score_arms({"baseline": base, **{c.key: responses[c.key] for c in grid}}, "baseline", controls_of(grid),
                        resamples=resamples, seed=seed, refusal_margin=refusal_margin)
    for r in paired.to_dict("records"):
        arm = r.pop("arm")
        rows.append({**_identity(arm, by_key.get(arm)), **r})
    return rows


def run_compare(cfg: CompareConfig, progress: bool = True) -> pd.DataFrame:
    """Run (or resume) a comparison; returns the tidy table and writes every output. The stages: the
    model, the baseline, one per cell (each done once its responses are written), the table."""
    from evenhand.decisions import DecideOptions, decide
    from evenhand.models.loading import load_model, locate, resolve_spec
    from evenhand.runs import write_table_atomic
    from evenhand.stages import LoadModel, Step, exists, open_run, run_stages

    spec = resolve_spec(cfg.model)
    locate(spec)
    train, ev = item_sets(cfg)
    run = open_run(cfg.output_dir, {"kind": "compare_interventions", **json.loads(json.dumps(asdict(cfg), default=str))},
                   n_train_items=len(train), n_eval_items=len(ev),
                   train_scenarios=sorted(train["scenario_id"].unique().tolist()),
                   eval_scenarios=sorted(ev["scenario_id"].unique().tolist()))
    model = LoadModel(lambda: load_model(spec))
    opts = DecideOptions(mode=cfg.mode, batch_size=cfg.batch_size, progress=progress,
                         chat_template=spec.chat_template)
    baseline = run.cell("baseline")

    def decide_baseline(run: RunDir) -> None:
        baseline.path.mkdir(parents=True, exist_ok=True)
        write_table_atomic(baseline.responses_path, decide(ev, model(), opts, out_dir=baseline.path))

    fitted_cache: dict[str, Fitted] = {}
    train_ids = train["item_id"].astype(str).tolist()
    grid = cells(cfg)

    def cell_stage(i: int, cell: Cell) -> Step:
        def go(run: RunDir) -> None:
            method = get(cell.arm.name)
            _, apply_opts = method.split_options(cell.options)
            fitted = _fitted(method, cell, model(), train, train_ids, run, fitted_cache,
                             f"[{i + 1}/{len(grid)}] " if progress else None)
            if progress:
                print(f"[{i + 1}/{len(grid)}] deciding under {cell.key}", flush=True)
            resp = decide_with(method, fitted, ev, model(), opts, apply_opts)
            out = run.cell(cell.key)
            out.path.mkdir(parents=True, exist_ok=True)
            write_table_atomic(out.responses_path, resp)
        return Step(cell.key, go, exists(lambda r: r.cell(cell.key).responses_path))

    def table(run: RunDir) -> pd.DataFrame:
        responses = {c.key: pd.read_parquet(run.cell(c.key).responses_path) for c in grid}
        t = pd.DataFrame(comparison_rows(grid, pd.read_parquet(baseline.responses_path), responses, cfg.resamples,
                                         cfg.seed, cfg.refusal_margin))
        write_table_atomic(run.compare_table, t)
        write_table_atomic(run.compare_csv, t)
        from .figures import compare_latex, frontier_figure
        frontier_figure(t, run.frontier_stem)
        Path(run.frontier_stem).with_name("compare.tex").write_text(compare_latex(t))
        return t

    final = Step("table", table)
    run_stages(run, [model, Step("baseline", decide_baseline, exists(lambda r: baseline.responses_path)),
                     *(cell_stage(i, c) for i, c in enumerate(grid)), final])
    return final.result


def _fitted(method, cell: Cell, lm, train: pd.DataFrame, train_ids: list[str], run: RunDir,
            cache: dict[str, Fitted], progress: str | None) -> Fitted:
    """The cell's fit: from memory, from the run's ``fitted/<fit dir>`` (checked against the fit key), or fitted
    and saved.

    A random control is derived from the method's own fit (fitted first if needed)."""
    name = cell.fit_dir(train_ids)
    if name in cache:
        return cache[name]
    fit_opts, _ = method.split_options(cell.options)
    key = fit_key(method.name, fit_opts, cell.seed, train_ids)
    fdir = run.fitted_dir(name)
    if (fdir / "fitted.json").exists():
        fitted = Fitted.load(fdir)
        if fitted.key != key or fitted.name != method.name or (fitted.control == "random") != cell.control:
            raise InterventionError(f"{fdir} holds a fit with another key ({fitted.key[:16]}), not {key[:16]}")
    elif cell.control:
        own = _fitted(method, Cell(cell.arm, cell.options, cell.seed, False), lm, train, train_ids, run, cache,
                      progress)
        fitted = method.random_control(own, cell.seed)
        fitted.save(fdir)
    else:
        if progress is not None:
            print(f"{progress}fitting {name}", flush=True)
        fitted = method.fit(lm, train, fit_opts, seed=cell.seed, progress=progress is not None)
        fitted.save(fdir)
    cache[name] = fitted
    return fitted
