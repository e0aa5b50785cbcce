"""The run study (``kind: run``, the default): a model on a suite subset in one mode, scored (then cached,
probed, ablated, attributed, drawn), on the local backend (:mod:`.local`) or on Ray (:mod:`.ray`)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from evenhand.engine.registry import DEFAULT
from evenhand.reporting.figures import metrics_table
from evenhand.models.loading import resolve_spec
from evenhand.runs.rundir import RunDir
from evenhand.running.stages import Stage

from ..base import Study, register
from .config import RunConfig, config_from_dict, suite_items
from .local import local_stages, run_config
from .ray import run_config_ray
from ..text import score_table


@register
class RunStudy(Study):
    """A run config: one model on a suite subset in one mode, scored (and optionally cached, probed,
    ablated, attributed, drawn)."""

    kind = "run"
    backends = ("local", "ray")

    def parse(self, data, where: str = "config") -> RunConfig:
        return config_from_dict(data)

    def stages(self, cfg: RunConfig, progress: bool = True) -> list[Stage]:
        return local_stages(cfg, resolve_spec(cfg.model), suite_items(cfg.suite), progress)

    def run(self, cfg: RunConfig, progress: bool = True, backend: str = "local", **backend_options):
        if backend == "ray":
            if cfg.engine != DEFAULT:
                raise ValueError(f"engine {cfg.engine} runs on the local backend (the Ray workers load Hugging Face "
                                 f"models)")
            return run_config_ray(cfg, progress=progress, **backend_options)
        return run_config(cfg, progress=progress)

    def text(self, cfg: RunConfig, result) -> str:
        run, report = result
        return f"{score_table(report)}\n\nrun directory: {run.path}"

    def rows(self, output_dir: Path, resamples: int) -> pd.DataFrame:
        """The metrics (:func:`evenhand.reporting.figures.metrics_table`), then every probe sweep's and name
        ablation's rows."""
        out = RunDir(output_dir)
        parts = [metrics_table(out.path, resamples).assign(table="metrics")]
        parts += [pd.read_parquet(p.probes_table).assign(table="probes") for p in out.probe_dirs()]
        parts += [pd.read_parquet(p.ablation_table).assign(table="ablation") for p in out.ablation_dirs()]
        return pd.concat(parts, ignore_index=True)
