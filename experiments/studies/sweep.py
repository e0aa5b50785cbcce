"""Sweeps: a config that lists values expands into a grid of cells, each run once, one table for all.

A config (a run config or a comparison config) may carry a ``sweep`` mapping
from a field's dotted path to the list of values it takes::

    model: evenhand-organism
    output_dir: runs/sweep_modes
    suite: {subset: organism_heldout, limit: 2432}
    sweep:
      mode: [answer, logprob]
      suite.seed: [0, 1]

The grid is the Cartesian product, in the order the axes and values are
written (here 4 cells). Every cell is a complete config (validated before
anything runs, errors name the axis and value) with ``output_dir`` set to
``OUTPUT_DIR/cells/<cell name>``, and runs exactly as it would alone. Cells
whose run directory says ``done`` are skipped, and a cell that was
interrupted resumes from its saved batches (see :mod:`evenhand.decisions`), so
a sweep killed half-way and run again finishes with the same table as an
uninterrupted one (tested).

The sweep's directory holds a manifest (the base config, the axes, every
cell's parameters and status, git, packages, hardware, timings) and one
tidy table ``sweep.parquet`` / ``sweep.csv``: every cell's rows with a
``cell`` column, a column per axis, and ``table`` naming where the rows come
from (``metrics``: :func:`evenhand.figures.metrics_long`; ``probes``:
the probe sweep; ``ablation``: the name ablation; ``compare``: a comparison's table;
``bbq``: a BBQ study's scores). Comparison and BBQ configs can be swept too
(local backend); the Ray backend shards each run cell's items over its workers.
``evenhand figures SWEEP_DIR`` draws every cell as one line.
"""
from __future__ import annotations

import copy
import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from evenhand.runs import RunDir

from .config import ConfigError, config_from_dict, read_yaml


@dataclass(frozen=True)
class SweepCell:
    """One cell of a sweep: its name, its values on the axes, and its complete config mapping."""
    name: str
    params: dict
    data: dict


def study_kind(data: dict) -> str:
    """``compare`` for a comparison config (it lists ``interventions``), ``dose`` for a dose-response
    config (it lists ``methods``), ``bbq`` for a BBQ config (it lists ``configurations`` or sets
    ``per_category``), else ``run``."""
    if "interventions" in data:
        return "compare"
    if "methods" in data:
        return "dose"
    if "configurations" in data or "per_category" in data:
        return "bbq"
    return "run"


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
    """The cells of a config mapping with a ``sweep`` field (one cell without one), each validated."""
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
            _validate(cfg)
        except (ConfigError, ValueError) as exc:
            where = ", ".join(f"sweep.{p}[{i}]={v!r}" for p, i, v in combo)
            raise ConfigError(f"sweep cell {where}: {exc}") from None
        cells.append(SweepCell(name, params, cfg))
    if len({c.name for c in cells}) != len(cells):
        raise ConfigError("two sweep cells get the same directory name; make the swept values distinct")
    return cells


def _validate(cfg: dict):
    kind = study_kind(cfg)
    if kind == "compare":
        from interventions.compare import parse_config
        return parse_config(cfg)
    if kind == "dose":
        from interventions.dose_response import parse_config as parse_dose
        return parse_dose(cfg)
    if kind == "bbq":
        from evenhand.bbq.run import parse_config as parse_bbq
        return parse_bbq(cfg)
    return config_from_dict(cfg)


def load_sweep(path: str | Path) -> tuple[dict, list[SweepCell]]:
    """A sweep config file: (its mapping, its validated cells)."""
    data = read_yaml(path)
    return data, expand(data)


def _cell_done(cell: SweepCell) -> bool:
    return RunDir(cell.data["output_dir"]).status == "done"


def _cell_rows(cell: SweepCell, resamples: int) -> pd.DataFrame:
    from evenhand.figures import metrics_table
    out = RunDir(cell.data["output_dir"])
    parts = []
    kind = study_kind(cell.data)
    if kind == "compare":
        parts.append(pd.read_parquet(out.compare_table).assign(table="compare"))
    elif kind == "dose":
        parts.append(pd.read_parquet(out.path / "dose_response.parquet").assign(table="dose_response"))
    elif kind == "bbq":
        parts.append(pd.read_parquet(out.bbq_scores_path).assign(table="bbq"))
    else:
        parts.append(metrics_table(out.path, resamples).assign(table="metrics"))
        for p in out.probe_dirs():
            parts.append(pd.read_parquet(p.probes_table).assign(table="probes"))
        for p in out.ablation_dirs():
            parts.append(pd.read_parquet(p.ablation_table).assign(table="ablation"))
    df = pd.concat(parts, ignore_index=True)
    df.insert(0, "cell", cell.name)
    for i, (k, v) in enumerate(cell.params.items()):
        df.insert(1 + i, k, v if isinstance(v, (str, int, float, bool)) else json.dumps(v, sort_keys=True))
    return df


def run_sweep(data: dict, backend: str = "local", progress: bool = True, ray_options: dict | None = None,
              _after_cell=None) -> tuple[Path, pd.DataFrame]:
    """Run (or resume) every cell of a sweep config mapping; returns (sweep dir, tidy table).
    Each cell is a stage, done when its run directory says ``done``."""
    from evenhand.runs import write_table_atomic
    from evenhand.stages import Step, open_run, run_stages

    from .runner import check_output_dir
    cells = expand(data)
    out = check_output_dir(data["output_dir"])
    run = open_run(out, {"kind": "sweep", "base": {k: v for k, v in data.items() if k != "sweep"},
                         "sweep": data.get("sweep") or {}},
                   cells=[{"name": c.name, "params": c.params, "output_dir": c.data["output_dir"]} for c in cells],
                   backend=backend)
    resamples = int(data.get("resamples", 1000))
    result: dict = {}

    def cell_stage(cell: SweepCell) -> Step:
        def go(run: RunDir) -> None:
            _run_cell(cell, backend, progress, ray_options or {})
            if _after_cell is not None:
                _after_cell(cell)
        return Step(f"cell {cell.name}", go, lambda run, name: _cell_done(cell))

    def table(run: RunDir) -> None:
        result["table"] = t = pd.concat([_cell_rows(c, resamples) for c in cells], ignore_index=True)
        write_table_atomic(run.sweep_table, t)
        write_table_atomic(run.sweep_csv, t)

    def announce(i: int, n: int, stage, skipped: bool) -> None:
        if progress and i <= len(cells):
            print(f"sweep cell {i}/{len(cells)} {cells[i - 1].name}: {'done, skipped' if skipped else 'running'}",
                  flush=True)
    run_stages(run, [*map(cell_stage, cells), Step("table", table)], announce)
    return out, result["table"]


def _run_cell(cell: SweepCell, backend: str, progress: bool, ray_options: dict) -> None:
    kind = study_kind(cell.data)
    if kind != "run" and backend != "local":
        raise ConfigError(f"{kind} studies run on the local backend only (the ray backend shards run configs)")
    if kind == "compare":
        from interventions.compare import parse_config, run_compare
        run_compare(parse_config(cell.data), progress=progress)
        return
    if kind == "dose":
        from interventions.dose_response import parse_config as parse_dose
        from interventions.dose_response import run_dose_response
        run_dose_response(parse_dose(cell.data), progress=progress)
        return
    if kind == "bbq":
        from evenhand.bbq.run import parse_config as parse_bbq
        from evenhand.bbq.run import run_bbq
        run_bbq(parse_bbq(cell.data), progress=progress)
        return
    cfg = config_from_dict(cell.data)
    if backend == "ray":
        from .ray_backend import run_config_ray
        run_config_ray(cfg, progress=progress, **ray_options)
    else:
        from .runner import run_config
        run_config(cfg, progress=progress)
