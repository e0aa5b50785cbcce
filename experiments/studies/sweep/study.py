"""The sweep study: a config that lists values expands into a grid of cells, each run once, one table for all.

A config of any study (its ``kind:`` names it) may carry a ``sweep`` mapping
from a field's dotted path to the list of values it takes::

    kind: run
    model: evenhand-organism
    output_dir: runs/sweep_modes
    suite: {subset: organism_heldout, limit: 2432}
    sweep:
      mode: [answer, logprob]
      suite.seed: [0, 1]

``evenhand figures SWEEP_DIR`` draws every cell as one line."""
from __future__ import annotations

import copy
import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from evenhand.inference.stats import RESAMPLES
from evenhand.runs.rundir import RunDir, write_table_atomic
from evenhand.running.stages import FnStage, open_run, run_stages

from ..base import Study, register, study_of
from ..common import check_output_dir
from ..run.config import RENAMED, ConfigError, read_yaml


@dataclass(frozen=True)
class SweepCell:
    """One cell of a sweep: its name, its values on the axes, and its complete config mapping."""
    name: str
    params: dict
    data: dict


def _set_path(data: dict, path: str, value, where: str) -> None:
    keys = path.split(".")
    node = data
    for k in keys[:-1]:
        nxt = node.get(k)
        if nxt is None:
            nxt = node[k] = {}
        if not isinstance(nxt, dict):
            raise ConfigError(f"config field '{where}': '{k}' of '{path}' is not a mapping in the base config")
        node = nxt
    node[keys[-1]] = value


def _slug(value) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"))
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", text.split("/")[-1] if isinstance(value, str) else text)


def cell_name(params: dict) -> str:
    """``mode=answer,suite.seed=0`` made safe for a directory name (unique within a sweep)."""
    return ",".join(f"{k}={_slug(v)}" for k, v in params.items())


def expand(data: dict) -> list[SweepCell]:
    """The cells of a config mapping with a ``sweep`` field (one cell without one), each validated.

    The grid is the Cartesian product, in the order the axes and values are written (the module docstring's
    example: 4 cells). Every cell is a complete config (validated before anything runs, errors name the axis and
    value) with ``output_dir`` set to ``OUTPUT_DIR/cells/<cell name>``, and runs exactly as it would alone."""
    base = {k: v for k, v in data.items() if k != "sweep"}
    axes = data.get("sweep") or {}
    if not isinstance(axes, dict):
        raise ConfigError("config field 'sweep' must map field paths to lists of values")
    if "output_dir" not in base:
        raise ConfigError("config field 'output_dir' is required")
    for path, values in axes.items():
        if not isinstance(values, list) or not values:
            raise ConfigError(f"config field 'sweep.{path}' must be a non-empty list of values")
        if path in ("output_dir", "sweep") or path.startswith("sweep."):
            raise ConfigError(f"config field 'sweep.{path}': output_dir and sweep cannot be swept")
        if len({json.dumps(v, sort_keys=True, default=str) for v in values}) != len(values):
            raise ConfigError(f"config field 'sweep.{path}' lists a value twice")
    cells = []
    for combo in itertools.product(*[[(p, i, v) for i, v in enumerate(vs)] for p, vs in axes.items()]):
        params = {p: v for p, _, v in combo}
        cfg = copy.deepcopy(base)
        for p, i, v in combo:
            _set_path(cfg, p, copy.deepcopy(v), f"sweep.{p}[{i}]")
        name = cell_name(params) if params else "single"
        cfg["output_dir"] = str(RunDir(base["output_dir"]).cell(name).path)
        try:
            study_of(cfg).parse(cfg)
        except (ConfigError, ValueError) as exc:
            where = ", ".join(f"sweep.{p}[{i}]={v!r}" for p, i, v in combo)
            raise ConfigError(f"sweep cell {where}: {exc}") from None
        cells.append(SweepCell(name, params, cfg))
    if len({c.name for c in cells}) != len(cells):
        raise ConfigError("two sweep cells get the same directory name; make the swept values distinct")
    return cells


def load_sweep(path: str | Path) -> tuple[dict, list[SweepCell]]:
    """A sweep config file: (its mapping, its validated cells)."""
    data = read_yaml(path)
    return data, expand(data)


def _cell_done(cell: SweepCell) -> bool:
    return RunDir(cell.data["output_dir"]).status == "done"


def _cell_rows(cell: SweepCell, resamples: int) -> pd.DataFrame:
    df = study_of(cell.data).rows(Path(cell.data["output_dir"]), resamples)
    df.insert(0, "cell", cell.name)
    for i, (k, v) in enumerate(cell.params.items()):
        df.insert(1 + i, k, v if isinstance(v, (str, int, float, bool)) else json.dumps(v, sort_keys=True))
    return df


def run_sweep(data: dict, backend: str = "local", progress: bool = True, ray_options: dict | None = None,
              _after_cell=None) -> tuple[Path, pd.DataFrame]:
    """Run (or resume) every cell of a sweep config mapping; returns (sweep dir, tidy table).
    Each cell is a stage, done when its run directory says ``done``.

    Cells whose run directory says ``done`` are skipped, and a cell that was interrupted resumes from its saved
    batches (see :mod:`evenhand.running.decisions`), so a sweep killed half-way and run again finishes with the same
    table as an uninterrupted one (tested).

    The sweep's directory holds a manifest (the base config, the axes, every cell's parameters and status, git,
    packages, hardware, timings) and one tidy table ``sweep.parquet`` / ``sweep.csv``: every cell's rows (its
    study's :meth:`experiments.studies.base.Study.rows`) with a ``cell`` column, a column per axis, and ``table``
    naming where the rows come from (a run's ``metrics``, ``probes``, ``ablation``; a BBQ study's ``bbq``; ...). A
    cell runs on the sweep's backend when its study lists it (:attr:`experiments.studies.base.Study.backends`; the
    Ray backend shards each run cell's items over its workers)."""
    cells = expand(data)
    for cell in cells:
        study = study_of(cell.data)
        if backend not in study.backends:
            raise ConfigError(f"{study.kind} studies run on the {' or '.join(study.backends)} backend, not {backend} "
                              f"(sweep cell {cell.name})")
    out = check_output_dir(data["output_dir"])
    run = open_run(out, {"kind": "sweep", "base": {k: v for k, v in data.items() if k != "sweep"},
                         "sweep": data.get("sweep") or {}},
                   renamed={f"base.{old}": f"base.{new}" for old, new in RENAMED.items()},
                   cells=[{"name": c.name, "params": c.params, "output_dir": c.data["output_dir"]} for c in cells],
                   backend=backend)

    def announce(i: int, n: int, stage, skipped: bool) -> None:
        if progress and i <= len(cells):
            print(f"sweep cell {i}/{len(cells)} {cells[i - 1].name}: {'done, skipped' if skipped else 'running'}",
                  flush=True)
    stages = sweep_stages(cells, backend, progress, ray_options, int(data.get("resamples", 1000)), _after_cell)
    run_stages(run, stages, announce)
    return out, stages[-1].result


def sweep_stages(cells, backend: str = "local", progress: bool = True, ray_options: dict | None = None,
                 resamples: int = RESAMPLES, _after_cell=None) -> list[FnStage]:
    """One stage per cell (done when the cell's run directory says ``done``), then the table."""
    def cell_stage(cell: SweepCell) -> FnStage:
        def go(run: RunDir) -> None:
            _run_cell(cell, backend, progress, ray_options or {})
            if _after_cell is not None:
                _after_cell(cell)
        return FnStage(f"cell {cell.name}", go, lambda run, name: _cell_done(cell))

    def table(run: RunDir) -> pd.DataFrame:
        t = pd.concat([_cell_rows(c, resamples) for c in cells], ignore_index=True)
        write_table_atomic(run.sweep_table, t)
        write_table_atomic(run.sweep_csv, t)
        return t
    return [*map(cell_stage, cells), FnStage("table", table)]


def _run_cell(cell: SweepCell, backend: str, progress: bool, ray_options: dict) -> None:
    study = study_of(cell.data)
    study.run(study.parse(cell.data), progress=progress, backend=backend,
              **(ray_options if backend == "ray" else {}))


@dataclass(frozen=True)
class SweepConfig:
    """A sweep config: its mapping (with ``sweep:``) and its validated cells."""
    data: dict
    cells: tuple[SweepCell, ...]


@register
class SweepStudy(Study):
    """A grid of cells of another study (the config's ``kind:``), one table for all."""

    kind = "sweep"
    backends = ("local", "ray")
    tables = ("sweep.parquet",)

    def parse(self, data, where: str = "config") -> SweepConfig:
        if "sweep" not in data:
            raise ConfigError("config field 'sweep' is missing: a sweep is a config of another study (its kind:) "
                              "with a 'sweep' field listing the values of its axes")
        return SweepConfig(dict(data), tuple(expand(dict(data))))

    def stages(self, cfg: SweepConfig, progress: bool = True) -> list[FnStage]:
        return sweep_stages(cfg.cells, progress=progress, resamples=int(cfg.data.get("resamples", 1000)))

    def run(self, cfg: SweepConfig, progress: bool = True, backend: str = "local", **backend_options):
        return run_sweep(cfg.data, backend, progress=progress, ray_options=backend_options)

    def text(self, cfg: SweepConfig, result) -> str:
        out, table = result
        return (f"sweep: {table['cell'].nunique()} cells, {len(table):,} rows in {RunDir(out).sweep_table} (+ .csv); "
                f"figures: `evenhand figures {out}`")

    def rows(self, output_dir: Path, resamples: int) -> pd.DataFrame:
        return pd.read_parquet(RunDir(output_dir).sweep_table)
