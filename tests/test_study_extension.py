"""Adding a study: one new file (below, written to a temporary module) whose ``@register`` is its one
registry line; it then runs through ``evenhand run CONFIG`` with its ``kind:`` and through a sweep, whose
table holds its rows. Nothing in the CLI, the sweep or the registry names it."""
from __future__ import annotations

import importlib.util
import sys

import pandas as pd
import pytest
import yaml

from experiments.cli import main
from experiments.studies import base

ECHO = '''
"""A study of one stage: n seeded draws written as a tidy table."""
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from evenhand.support.options import build
from evenhand.runs.rundir import write_table_atomic
from evenhand.running.stages import FnStage, finished_with, run_study
from experiments.studies.base import Study, register, without_kind


@dataclass(frozen=True)
class EchoConfig:
    output_dir: str
    n: int = 3
    seed: int = 0


@register
class Echo(Study):
    kind = "echo"
    tables = ("tables/echo.parquet",)

    def parse(self, data, where="config"):
        return build(EchoConfig, without_kind(data, self.kind))

    def stages(self, cfg, progress=True):
        def draw(run):
            rng = np.random.default_rng(cfg.seed)
            table = pd.DataFrame({"metric": "draw", "value": rng.normal(size=cfg.n)})
            run.tables.mkdir(parents=True, exist_ok=True)
            write_table_atomic(run.tables / "echo.parquet", table)
            return table
        return [FnStage("draw", draw, finished_with(lambda r: r.tables / "echo.parquet"))]

    def run(self, cfg, progress=True, backend="local", **options):
        stages = self.stages(cfg, progress)
        run = run_study(cfg.output_dir, asdict(cfg), stages)
        return stages[0].result if stages[0].result is not None else pd.read_parquet(run.tables / "echo.parquet")

    def text(self, cfg, result):
        return f"echo: {len(result)} draws, mean {result['value'].mean():+.3f}"
'''


@pytest.fixture
def echo(tmp_path, monkeypatch):
    """The new study's file, imported (its ``@register`` adds it to a copy of the registry)."""
    base.kinds()  # the shipped studies registered first, so that the copy below holds them
    monkeypatch.setattr(base, "STUDIES", base.STUDIES.copy())
    path = tmp_path / "echo_study.py"
    path.write_text(ECHO)
    spec = importlib.util.spec_from_file_location("echo_study", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "echo_study", module)
    spec.loader.exec_module(module)
    return module


def _config(path, **data):
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_a_new_study_runs_through_evenhand_run_and_a_sweep(echo, tmp_path, capsys):
    assert "echo" in base.kinds()
    cfg = _config(tmp_path / "echo.yaml", kind="echo", output_dir=str(tmp_path / "one"), n=4, seed=1)
    assert main(["run", cfg]) == 0
    assert capsys.readouterr().out.startswith("echo: 4 draws, mean ")
    manifest = base.get("echo").parse({"output_dir": str(tmp_path / "one")})  # parses without kind: too
    assert manifest.n == 3
    from evenhand.runs.rundir import RunDir
    m = RunDir(tmp_path / "one").manifest()
    assert m["status"] == "done" and m["stages_done"] == ["draw"]  # through the stage driver

    sweep = _config(tmp_path / "sweep.yaml", kind="echo", output_dir=str(tmp_path / "grid"),
                    sweep={"n": [2, 3], "seed": [0, 5]})
    assert main(["run", sweep]) == 0
    assert "sweep: 4 cells, 10 rows" in capsys.readouterr().out
    table = pd.read_parquet(tmp_path / "grid" / "sweep.parquet")
    assert set(table["table"]) == {"echo"} and set(table["metric"]) == {"draw"}
    assert table.groupby("cell").size().to_dict() == {"n=2,seed=0": 2, "n=2,seed=5": 2, "n=3,seed=0": 3,
                                                      "n=3,seed=5": 3}
    alone = pd.read_parquet(tmp_path / "grid" / "cells" / "n=3,seed=5" / "tables" / "echo.parquet")
    pd.testing.assert_series_equal(table.loc[table["cell"] == "n=3,seed=5", "value"].reset_index(drop=True),
                                   alone["value"])
    assert main(["run", sweep]) == 0  # resumed: every cell's run says done, so no cell runs again
    assert RunDir(tmp_path / "grid" / "cells" / "n=2,seed=0").manifest().get("resumed") is None


def test_a_kind_nobody_registered_is_refused_naming_the_known_ones(tmp_path, capsys):
    cfg = _config(tmp_path / "x.yaml", kind="echo", output_dir=str(tmp_path / "x"))
    assert main(["run", cfg]) == 2
    err = capsys.readouterr().err
    assert "config field 'kind': unknown study 'echo'; known:" in err and "run" in err


def test_a_study_refuses_a_backend_it_does_not_list(echo, tmp_path, capsys):
    cfg = _config(tmp_path / "echo.yaml", kind="echo", output_dir=str(tmp_path / "one"))
    assert main(["run", cfg, "--backend", "ray"]) == 2
    assert "a echo config runs on the local backend, not ray" in capsys.readouterr().err


def test_kind_sweep_without_a_sweep_field_is_refused(tmp_path, capsys):
    cfg = _config(tmp_path / "s.yaml", kind="sweep", output_dir=str(tmp_path / "s"))
    assert main(["run", cfg]) == 2
    assert "config field 'sweep' is missing" in capsys.readouterr().err


def test_a_study_without_its_stages_is_refused_at_registration(monkeypatch):
    """Study is abstract: a study that does not say how it parses, stages and runs cannot be registered."""
    from experiments.studies import base
    monkeypatch.setattr(base, "STUDIES", base.STUDIES.copy())

    class Half(base.Study):
        kind = "half"

        def parse(self, data, where="config"):
            return dict(data)

        def run(self, cfg, progress=True, backend="local", **backend_options):
            return None
    with pytest.raises(TypeError, match="stages"):
        base.register(Half)
    assert "half" not in base.STUDIES
