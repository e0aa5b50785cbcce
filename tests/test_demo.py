"""The demo's known answer (organism/demo.py): the dial setting, the truth per degree and metric, whether
each measured CI covers it, the demo's scenarios and the cached dialled organism; and `evenhand demo` end to
end at beta 0 (truth 0, covered) and against a wrong calibration curve (reported as not covered)."""
import json

import pytest

from organism import FAIR, record_suite, split_scenarios
from organism.demo import (
    Truth,
    coverage,
    curve_at,
    demo_scenario_ids,
    dial_beta,
    dialled_organism,
    planted_truths,
    truth_json,
)


def _point(beta, frag, shift, half=0.03):
    vals = {"fraggap": frag, "tieshift": shift, "accgap": frag / 4, "tielean": 0.5, "accuracy": 0.94 - frag / 10}
    return {"beta": beta, **{m: {"value": v, "ci_low": v - half, "ci_high": v + half} for m, v in vals.items()}}


CURVE = {"n_scenarios": 35, "points": [_point(0, 0.0, 0.0), _point(20, 0.04, 0.06), _point(40, 0.12, 0.1)]}
FAIR_TRUTH = {d: {"accuracy": 0.98, "accgap": 0.0, "tielean": 0.5, "fraggap": 0.0, "tieshift": 0.0} for d in range(4)}


def _est(value, lo, hi):
    return {"value": value, "ci_low": lo, "ci_high": hi, "n": 100, "clusters": 20, "note": None}


def test_curve_at_interpolates_between_calibrated_points_and_refuses_outside():
    assert curve_at(CURVE, 20, "fraggap") == Truth(*(pytest.approx(x) for x in (0.04, 0.01, 0.07)), "calibration")
    t = curve_at(CURVE, 30, "fraggap")
    assert t.value == pytest.approx(0.08) and t.ci_low == pytest.approx(0.05) and t.ci_high == pytest.approx(0.11)
    assert curve_at(CURVE, 30, "tieshift").value == pytest.approx(0.08)
    with pytest.raises(ValueError, match="outside the calibrated range"):
        curve_at(CURVE, 41, "fraggap")


def test_dial_beta_reads_the_curve_or_takes_beta():
    assert dial_beta(CURVE, 0.10) == pytest.approx(35.0)  # 0.04 + (35 - 20) / 20 * 0.08 = 0.10
    assert dial_beta(CURVE) == pytest.approx(35.0)  # the default: 10 pp
    assert dial_beta(None, beta=7.5) == 7.5
    with pytest.raises(ValueError, match="calibration curve"):
        dial_beta(None)
    with pytest.raises(ValueError, match="not both"):
        dial_beta(CURVE, 0.1, 3.0)


def test_truth_at_beta_zero_is_the_fair_policy_everywhere():
    truths = planted_truths(FAIR_TRUTH, 0.0, CURVE)
    assert set(truths) == {0, 1, 2, 3}
    for row in truths.values():
        assert set(row) == {"accuracy", "accgap", "tielean", "fraggap", "tieshift"}
        assert row["fraggap"] == Truth(0.0, None, None, "fair policy")


def test_truth_with_the_dial_on_comes_from_the_curve_at_degree_3_and_is_fair_at_degree_0():
    truths = planted_truths(FAIR_TRUTH, 30.0, CURVE)
    assert truths[3]["fraggap"].source == "calibration" and truths[3]["fraggap"].value == pytest.approx(0.08)
    assert truths[3]["accgap"].source == "calibration" and truths[3]["accgap"].value == pytest.approx(0.02)
    assert set(truths[3]) == {"accuracy", "accgap", "tielean", "fraggap", "tieshift"}
    assert truths[0]["fraggap"] == Truth(0.0, None, None, "fair policy")  # degree 0: nothing marks identity
    assert set(truths[0]) == {"accgap", "tielean", "fraggap", "tieshift"}  # accuracy there: not calibrated
    assert truths[1] == {} and truths[2] == {}  # the dial acts there, not calibrated
    with pytest.raises(ValueError, match="calibration curve"):
        planted_truths(FAIR_TRUTH, 30.0, None)
    assert truth_json(truths, 30.0)["3"]["fraggap"]["source"] == "calibration"


def test_coverage_reports_a_wrong_truth_as_not_covered():
    from experiments.cli.formatting import truth_text
    report = {"by_degree": {"3": {"fraggap": _est(0.09, 0.05, 0.13), "tieshift": _est(0.1, None, None),
                                  "accgap": _est(0.02, -0.03, 0.07)}}}
    right = {3: {"fraggap": Truth(0.10, 0.07, 0.13, "calibration"), "tieshift": Truth(0.1, None, None, "calibration"),
                 "accgap": Truth(0.0, None, None, "fair policy")}}
    cov = coverage(report, right).set_index("metric")
    assert cov.loc["fraggap", "covered"] is True and cov.loc["accgap", "covered"] is True
    assert cov.loc["tieshift", "covered"] is None  # no CI: neither covered nor not
    wrong = {3: {"fraggap": Truth(0.50, 0.45, 0.55, "calibration"), "accgap": Truth(0.10, None, None, "fair policy")}}
    cov = coverage(report, wrong)
    assert not cov["covered"].any()
    text = truth_text(cov, 30.0, CURVE)
    assert text.count("NOT covered") == 2 and "0 of 2 truths covered" in text
    assert "+50.0 pp [+45.0, +55.0] calibration" in text


def test_demo_scenarios_are_held_out_and_after_the_calibrations():
    from organism.calibration import calibration_items
    record = json.loads((FAIR / "organism.json").read_text())
    rec = record["recipe"]
    train, held = split_scenarios(rec["seed"], rec["heldout_fraction"], record_suite(record))
    ids = demo_scenario_ids(record, 20, 35)
    calib = set(calibration_items(FAIR, 35)["scenario_id"])
    assert len(ids) == 20 and set(ids) <= set(held) and not set(ids) & set(train) and not set(ids) & calib
    assert len(demo_scenario_ids(record, 35, 35)) == 35
    with pytest.raises(ValueError, match="35 held-out scenarios lie outside"):
        demo_scenario_ids(record, 36, 35)


def test_dialled_organism_is_written_once_per_beta(tmp_path):
    out = tmp_path / "org"
    dialled_organism(2.0, out)
    first = (out / "model.safetensors").stat().st_mtime_ns
    assert json.loads((out / "organism.json").read_text())["dial"]["beta"] == 2.0
    dialled_organism(2.0, out)
    assert (out / "model.safetensors").stat().st_mtime_ns == first  # reused
    dialled_organism(3.0, out)
    assert json.loads((out / "organism.json").read_text())["dial"]["beta"] == 3.0


def _fraggap_d3_line(text: str) -> str:
    return next(line for line in text.splitlines() if line.strip().startswith("FragGap") and " D3 " in line)


def test_demo_at_beta_zero_prints_truth_zero_covered(tmp_path, capsys):
    """Beta 0 is the fair organism: the truth is the fair policy's (FragGap 0) and the CIs cover it; the
    run directory holds the run, its truth and the probe sweep."""
    import pandas as pd

    from experiments.cli import main
    assert main(["demo", "--beta", "0", "--out", str(tmp_path / "demo"), "--scenarios", "3", "--no-progress"]) == 0
    printed = capsys.readouterr()
    text = printed.out
    # the metrics' interval is named once: the score stage and the table say jackknife-t, no "bootstrap resamples"
    assert "bootstrap" not in (printed.out + printed.err).split("probe favours_minority")[0].lower()
    line = _fraggap_d3_line(text)
    assert "+0.0 pp fair policy" in line and line.rstrip().endswith("yes")
    assert "NOT covered" not in text
    d = tmp_path / "demo" / "run-b0-s3"
    assert {p.name for p in d.iterdir()} >= {"manifest.json", "responses.parquet", "metrics.json", "activations",
                                             "probes", "planted_truth.json"}
    truth = json.loads((d / "planted_truth.json").read_text())
    assert truth["dial_beta"] == 0 and truth["3"]["fraggap"]["value"] == 0.0
    assert set(truth) == {"dial_beta", "0", "1", "2", "3"}
    assert len(pd.read_parquet(d / "responses.parquet")) == 3 * 608  # the matched set: 608 items per scenario
    assert (d / "probes" / "favours_minority" / "probes.parquet").exists()


def test_the_score_stage_names_the_metrics_interval(tmp_path):
    """The stage line the demo (and every run) prints before scoring names the jackknife-t, not resamples."""
    from evenhand.models.loading import ModelSpec
    from experiments.studies.run.config import RunConfig
    from experiments.studies.run.local import finish_stages
    cfg = RunConfig(model=ModelSpec("m"), output_dir=str(tmp_path / "run"))
    score = next(s for s in finish_stages(cfg, None, [{}] * 1824, None, None, False) if s.name == "score")
    assert score.about == "1,824 responses, 95% CIs: jackknife-t over scenarios"


@pytest.mark.slow  # the demo end to end again; fast: test_demo_at_beta_zero_prints_truth_zero_covered, and
# test_coverage_reports_a_wrong_truth_as_not_covered, test_dial_beta_reads_the_curve_or_takes_beta for its parts
def test_demo_against_a_wrong_curve_reports_not_covered(tmp_path, capsys):
    """A curve that claims a far larger FragGap than the dial plants: the demo says the CI misses it."""
    from experiments.cli import main
    wrong = {"n_scenarios": 35, "points": [_point(0, 0.5, 0.0), _point(10, 0.6, 0.0)]}
    (tmp_path / "curve.json").write_text(json.dumps(wrong))
    assert main(["demo", "--fraggap", "55", "--calibration", str(tmp_path / "curve.json"), "--out",
                 str(tmp_path / "demo"), "--scenarios", "3", "--no-progress"]) == 0
    line = _fraggap_d3_line(capsys.readouterr().out)
    assert "+55.0 pp [+52.0, +58.0] calibration" in line and line.rstrip().endswith("NOT covered")
