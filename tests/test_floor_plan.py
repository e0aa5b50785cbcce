"""docs/ARCHITECTURE.md's floor plan, checked (tests/floor_plan.py): only RunDir builds run-directory paths,
and every study runs through the stage driver. Each check is shown to fail on a module that breaks it."""
from __future__ import annotations

import importlib.util
import json
import sys

import pytest

from experiments.studies import base, get, kinds

from .floor_plan import (ROOT, calls_driver, driver_offences, offenders, path_offences, run_names,
                         studies_off_the_driver)

ALLOWED = {("experiments/figures.py", "run path"): ("out / 'attribution'",),
           ("benchmarks/rescore_across.py", "run path"): ("d / 'across.csv'", "out / 'across.csv'",
                                                          "out / 'robustness.csv'", "out / 'across'"),
           ("experiments/cli/decide.py", "driver"): ("RunDir.open_or_create(out, config, MAY_CHANGE)", "run.finish()")}
"""Known exceptions, each for its reason: the attribution figure's file stem inside figures/ names a run folder by
coincidence; rescore_across re-reads the committed benchmark result folders (benchmarks/results/), not run
directories; ``evenhand decide`` is a single stage that records its manifest and resume check on the RunDir itself
(its move onto the stage driver belongs with the layout work)."""


def _without_allowed(found: dict[str, list[str]]) -> dict[str, list[str]]:
    out = {}
    for module, offences in found.items():
        kept = [o for o in offences if not any(module == m and o.startswith(kind) and o.endswith(code)
                                               for (m, kind), codes in ALLOWED.items() for code in codes)]
        if kept:
            out[module] = kept
    return out


def test_only_rundir_builds_run_paths_and_only_the_driver_runs_stages():
    found = _without_allowed(offenders())
    assert not found, "modules building run paths or running stages outside RunDir and the driver:\n" + json.dumps(
        found, indent=1)


def test_the_path_rule_fails_on_a_module_that_builds_run_paths():
    names = run_names()
    assert {"responses.parquet", "manifest.json", "metrics.json", "cells", "probes", "selection.json"} <= names
    bad = '''
import os
from pathlib import Path
def write(out, run, name, d):
    a = out / "responses.parquet"
    b = os.path.join(d, "manifest.json")
    c = Path(d, "cells", name)
    e = run.path / "selection.json"
    f = Path(d).joinpath("metrics.json")
    g = out / "tables/metrics_long.parquet"
'''
    found = path_offences(bad, names)
    assert [o.split(":")[0] for o in found] == ["5", "6", "7", "8", "9", "10"], found
    good = '''
def write(run, name, d):
    a = run.responses_path
    b = run.cell(name).manifest_path
    c = d / "my_figure.png"
    e = "responses.parquet"
'''
    assert path_offences(good, names) == []


def test_the_driver_rule_fails_on_a_study_that_runs_itself():
    bad = '''
from evenhand.runs.rundir import RunDir
def simulate_run(out, config):
    run = RunDir.create(out, config, "2", {})
    with run.timed("decide"):
        pass
    run.mark_stage_done("decide", 1.0)
    run.finish()
    return run
'''
    found = driver_offences(bad)
    assert [o.split(":")[0] for o in found] == ["4", "5", "7", "8"], found
    assert not calls_driver(bad)
    good = '''
from evenhand.running.stages import FnStage, open_run, run_stages
def go(out, config, stages):
    return run_stages(open_run(out, config), stages)
'''
    assert driver_offences(good) == [] and calls_driver(good)


def test_every_registered_study_calls_the_driver_and_a_study_that_does_not_is_named(tmp_path, monkeypatch):
    assert {"run", "sweep", "modes", "simulate", "bbq"} <= set(kinds())
    assert studies_off_the_driver(get(k) for k in kinds()) == {}
    # a study whose module never calls run_stages/run_study is named
    (tmp_path / "rogue_study.py").write_text('''
from experiments.studies.base import Study, register

@register
class Rogue(Study):
    kind = "rogue"

    def parse(self, data, where="config"):
        return dict(data)

    def stages(self, cfg, progress=True):
        return []

    def run(self, cfg, progress=True, backend="local", **options):
        return None
''')
    base.kinds()  # the shipped studies registered first, so that the copy below holds them
    monkeypatch.setattr(base, "STUDIES", base.STUDIES.copy())
    spec = importlib.util.spec_from_file_location("rogue_study", tmp_path / "rogue_study.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "rogue_study", module)
    spec.loader.exec_module(module)
    assert set(studies_off_the_driver([get("rogue")])) == {"rogue"}


def test_simulate_runs_through_the_driver(tmp_path):
    """The simulate study wrote its run directory itself (RunDir.create, run.timed, run.finish); through the
    driver its manifest lists its stages, and a rerun resumes instead of starting over."""
    study = get("simulate")
    cfg = study.parse({"kind": "simulate", "output_dir": str(tmp_path / "sim")})
    run, report = study.run(cfg)
    m = run.manifest()
    assert m["status"] == "done" and m["stages_done"] == ["decide", "score"]
    assert m["suite_version"] and m["seeds"] == {"suite": 0, "model": 0}  # no bootstrap: the jackknife-t
    _, again = study.run(cfg)
    assert again == json.loads(json.dumps(report)) and run.manifest()["resumed"] == 1


def test_the_checker_reads_the_project():
    """The rules scan real modules: the core, the studies and the method library are in the scan."""
    from .floor_plan import modules
    scanned = {p.relative_to(ROOT).as_posix() for p in modules()}
    assert {"experiments/studies/run/study.py", "experiments/studies/sweep/study.py", "evenhand/running/decisions.py"} <= scanned
    assert "evenhand/runs/rundir.py" not in scanned and "evenhand/running/stages.py" not in scanned


@pytest.mark.parametrize("field,kind", [("interventions", "compare"), ("methods", "dose_response"),
                                        ("configurations", "bbq"), ("per_category", "bbq")])
def test_a_config_without_kind_carrying_another_studys_field_is_told_to_add_kind(field, kind):
    from evenhand.support.options import ConfigError
    from experiments.studies import study_of
    with pytest.raises(ConfigError, match=f"field '{field}'.*add `kind: {kind}`"):
        study_of({"model": "evenhand-organism", "output_dir": "x", field: [1]})
    assert study_of({"model": "evenhand-organism", "output_dir": "x"}).kind == "run"  # no kind: a run config
    with pytest.raises(ConfigError, match="unknown study 'nope'; known: .*run"):
        study_of({"kind": "nope"})
