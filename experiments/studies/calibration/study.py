"""The bias dial's calibration as a study (``kind: calibration``): FragGap, TieShift, AccGap, TieLean and GT
accuracy at the mechanism's eval degree of the fair organism with a dial mechanism at each ``beta`` (docs/ORGANISM.md).

Stages, in a run directory through the stage driver: ``load_model``; ``calibrate``
(:func:`organism.calibration.calibrate`, the curve in ``calibration.json``, the layout of the organism's
own); ``table`` (``calibration.parquet``, one row per beta and metric); ``figure``
(``calibration.png``). ``evenhand organism calibrate`` computes the same curve into the organism's
folder, the copy the demo and the dose-response benchmark read. The metrics' CIs are the jackknife-t, so a
config's ``resamples`` is refused.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from evenhand.scoring.metrics import INTERVAL
from evenhand.inference.stats import INTERVAL_NAMES
from evenhand.files.atomic import atomic_open
from evenhand.support.options import ConfigError, Rules, build
from evenhand.runs.rundir import RunDir, write_table_atomic
from evenhand.running.stages import LoadModel, StageReport, FnStage, finished_with, run_study
from organism.calibration import calibrate, curve_json, curve_table
from organism.figures import calibration_figure
from organism.dials import load_builtin
from organism.mechanism import DEFAULT_MECHANISM, MECHANISMS
from organism.recipe import FAIR, record_suite

from ..base import Study, register, without_unused
from .text import calibration_text
from evenhand.models.loading import load_model


@dataclass(frozen=True)
class CalibrationConfig:
    """A calibration run: the dial's strengths and the organism's held-out items it is measured on."""
    output_dir: str
    """The run directory."""
    betas: tuple[float, ...]
    """The dial's strengths (0 = the organism without the edit)."""
    model: str | None = None
    """The organism's directory (with ``dial.json``); default the committed fair organism."""
    scenarios: int | None = None
    """Its first held-out scenarios to decide (default all)."""
    seed: int = 0
    """Seed of the items' contrasts."""
    batch_size: int = 64
    mechanism: str = DEFAULT_MECHANISM
    """The dial mechanism calibrated (:data:`organism.mechanism.MECHANISMS`; its fitted file next to the organism)."""


RULES = Rules(positive=frozenset({"scenarios", "batch_size"}))


def organism_path(cfg: CalibrationConfig) -> Path:
    return Path(cfg.model) if cfg.model else FAIR


def write_curve(curve: dict, out: Path) -> None:
    """Write ``curve`` to ``out`` (``calibration.json``'s layout), replacing it only when complete."""
    with atomic_open(out) as (fh, _):
        fh.write(curve_json(curve))


def calibration_stages(cfg: CalibrationConfig, progress: bool = True) -> list:
    """``load_model``, ``calibrate``, ``table``, ``figure`` (the module docstring)."""

    path = organism_path(cfg)
    load = LoadModel(lambda: load_model(str(path)), about=str(path))

    def run_calibrate(run: RunDir) -> None:
        curve = calibrate(cfg.betas, path, n_scenarios=cfg.scenarios, seed=cfg.seed,
                          batch_size=cfg.batch_size, progress=progress, lm=load(), mechanism=cfg.mechanism)
        write_curve(curve, run.calibration_path)

    def read(run: RunDir) -> dict:
        return json.loads(run.calibration_path.read_text())

    return [load,
            FnStage("calibrate", run_calibrate, finished_with(lambda r: r.calibration_path),
                 about=f"{len(cfg.betas)} betas"),
            FnStage("table", lambda run: write_table_atomic(run.calibration_table, curve_table(read(run))),
                 finished_with(lambda r: r.calibration_table)),
            FnStage("figure", lambda run: calibration_figure(read(run), run.calibration_stem),
                 finished_with(lambda r: r.calibration_stem.with_suffix(".png")))]


def run_calibration(cfg: CalibrationConfig, progress: bool = True) -> pd.DataFrame:
    """Run (or resume) ``cfg`` in its run directory; returns the tidy table."""
    record = json.loads((organism_path(cfg) / "organism.json").read_text())
    config = {"kind": CalibrationStudy.kind, **asdict(cfg)}
    run = run_study(cfg.output_dir, config, calibration_stages(cfg, progress),
                    announce=StageReport(f"calibration {cfg.output_dir}") if progress else None,
                    suite_version=record_suite(record))
    return pd.read_parquet(run.calibration_table)


@register
class CalibrationStudy(Study):
    """The dial's calibration curve as a study (``kind: calibration``)."""

    kind = "calibration"
    tables = (RunDir("").calibration_table.name,)

    def parse(self, data, where: str = "config") -> CalibrationConfig:
        data = without_unused({k: v for k, v in dict(data).items() if k != "kind"}, ("resamples",),
                              f"the metrics' 95% CIs are the {INTERVAL_NAMES[INTERVAL]}, which resamples nothing")
        cfg = build(CalibrationConfig, data, rules=RULES)
        if not cfg.betas:
            raise ConfigError("config field 'betas' must list at least one beta")
        load_builtin()
        if cfg.mechanism not in MECHANISMS:
            raise ConfigError(f"config field 'mechanism' must be one of {', '.join(sorted(MECHANISMS))}, "
                              f"got {cfg.mechanism!r}")
        return cfg

    def stages(self, cfg: CalibrationConfig, progress: bool = True) -> list:
        return calibration_stages(cfg, progress)

    def run(self, cfg: CalibrationConfig, progress: bool = True, backend: str = "local", **backend_options) -> pd.DataFrame:
        if backend not in self.backends:
            raise ConfigError(f"a calibration runs on the {' or '.join(self.backends)} backend, not {backend!r}")
        return run_calibration(cfg, progress)

    def text(self, cfg: CalibrationConfig, result: pd.DataFrame) -> str:
        run = RunDir(cfg.output_dir)
        curve = json.loads(run.calibration_path.read_text())
        return (calibration_text(curve) + f"\nwrote {run.calibration_path}, {run.calibration_table.name} and "
                f"{run.calibration_stem.with_suffix('.png').name}")
