"""The bias dial's calibration as a registered study (experiments/studies/calibration/): found by its
``kind``, its config checked field by field, and a run through the stage driver that writes the same
curve as :func:`organism.calibration.calibrate` (what ``evenhand organism calibrate`` writes), a tidy
table and a figure, resumes without recomputing, and refuses a directory made from another config."""
from __future__ import annotations

import json

import pytest

from evenhand.support.options import ConfigError
from evenhand.runs.rundir import RunDir, RunError
from experiments.studies.base import get, kinds, study_of

SMALL = {"betas": [0, 40], "scenarios": 1}


def test_calibration_is_a_registered_study():
    assert "calibration" in kinds()
    study = study_of({"kind": "calibration", "output_dir": "x", "betas": [0]})
    assert study is get("calibration") and study.kind == "calibration"
    assert study.tables == ("calibration.parquet",)


@pytest.mark.parametrize("data, field", [
    ({"betas": [0], "resampels": 10}, "resampels"),
    ({"betas": [0], "resamples": 0}, "resamples"),
    ({"betas": [0], "scenarios": 0}, "scenarios"),
    ({"betas": []}, "betas"),
    ({"betas": ["big"]}, "betas[0]"),
    ({}, "betas"),
])
def test_a_bad_config_names_the_field(data, field):
    with pytest.raises(ConfigError, match=rf"'{field}'".replace("[", r"\[").replace("]", r"\]")):
        get("calibration").parse({"kind": "calibration", "output_dir": "x", **data})


@pytest.mark.slow  # calibrate() fast: tests/test_dial.py::test_cli_fit_dial_dial_and_calibrate
def test_a_calibration_run_writes_the_curve_resumes_and_refuses_another_config(tmp_path):
    from organism.calibration import CALIBRATION_METRICS, calibrate, curve_json

    study = get("calibration")
    cfg = study.parse({"kind": "calibration", "output_dir": str(tmp_path / "run"), **SMALL})
    table = study.run(cfg, progress=False)
    run = RunDir(tmp_path / "run")
    manifest = run.manifest()
    assert manifest["status"] == "done"
    assert manifest["stages_done"] == ["load_model", "calibrate", "table", "figure"]
    assert manifest["config"]["kind"] == "calibration" and manifest["suite_version"] == "2"
    direct = calibrate(SMALL["betas"], n_scenarios=1, resamples=50, progress=False)
    assert run.calibration_path.read_text() == curve_json(direct), "the study writes what calibrate computes"
    assert len(table) == 2 * len(CALIBRATION_METRICS)
    fraggap = table[table["metric"] == "fraggap"].set_index("beta")["value"]
    assert fraggap.to_dict() == {p["beta"]: p["fraggap"]["value"] for p in direct["points"]}
    assert run.calibration_stem.with_suffix(".png").stat().st_size > 0
    assert "beta     40: FragGap(3)" in study.text(cfg, table)

    written = run.calibration_path.stat().st_mtime_ns
    again = study.run(cfg, progress=False)
    assert run.calibration_path.stat().st_mtime_ns == written, "a finished stage is not run again"
    assert run.manifest()["resumed"] == 1 and again.equals(table)

    other = study.parse({"kind": "calibration", "output_dir": str(tmp_path / "run"), **SMALL, "seed": 1})
    with pytest.raises(RunError, match="seed"):
        study.run(other, progress=False)
    assert json.loads(run.calibration_path.read_text()) == direct
