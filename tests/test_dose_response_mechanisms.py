"""The dose-response benchmark across dial mechanisms (issue 33, deliverable 3): the ``mechanism`` config field,
the items at the mechanism's eval degree, a resume with another mechanism refused, the across table's reading of
each cell (shown failing on broken classifiers), its figure, the ``--jobs`` scheduler, and the tiny config end to
end with the last_layer mechanism (the only one the tests can rely on)."""
from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from evenhand.support.options import ConfigError
from evenhand.runs.rundir import RunDir, RunError
from experiments.studies.dose_response import across
from experiments.studies.dose_response.across import (across_figure, across_markdown, across_table, arm_order,
                                                      classify, robustness)
from experiments.studies.dose_response.study import DoseConfig, DoseRun, SCORING_FIELDS, load_config, parse_config

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "experiments/configs/dose_response_mechanisms_tiny.yaml"
sys.path.insert(0, str(ROOT / "benchmarks"))


def test_the_mechanism_field_is_checked_against_the_registry_and_errors_name_it():
    assert parse_config({"output_dir": "x"}).mechanism == "last_layer"
    with pytest.raises(ConfigError, match=r"config field 'mechanism': unknown dial mechanism 'nope'; known: .*last_layer"):
        parse_config({"output_dir": "x", "mechanism": "nope"})
    with pytest.raises(ConfigError, match="config field 'mechanism'"):
        parse_config({"output_dir": "x", "mechanism": 3})
    assert "mechanism" not in SCORING_FIELDS  # it changes every cell: a resume with another one is refused


def test_the_bench_refuses_an_unknown_mechanism_naming_the_option(capsys):
    import bench_dose_response
    with pytest.raises(SystemExit) as exc:
        bench_dose_response.main([str(TINY), "--mechanism", "last_layer", "nope"])
    assert exc.value.code == 2 and "--mechanism: unknown dial mechanism 'nope'" in capsys.readouterr().err


def test_a_resume_with_another_mechanism_is_refused(tmp_path):
    cfg = DoseConfig(output_dir=str(tmp_path / "run"))
    DoseRun(cfg).open().unlock()
    with pytest.raises(RunError, match=r"fields that differ: mechanism\)"):
        DoseRun(replace(cfg, mechanism="decision")).open()
    DoseRun(cfg).open().unlock()  # the same mechanism resumes


@pytest.fixture
def degree_one(monkeypatch):
    """A registered mechanism evaluated at degree 1 (as ``names`` is), without a fitted file."""
    from organism.dial import Dial
    from organism.mechanism import MECHANISMS

    class DegreeOne(Dial):
        name = "degree_one_test"
        eval_degree = 1
        degrees = (1,)
    monkeypatch.setitem(MECHANISMS, DegreeOne.name, DegreeOne)
    return DegreeOne.name


def test_the_items_follow_the_mechanisms_eval_degree(degree_one):
    """items.py decided degree 3 whatever the mechanism (the old behaviour fails both asserts)."""
    import json as _json

    from experiments.studies.dose_response.items import item_sets
    from organism.recipe import FAIR
    record = _json.loads((FAIR / "organism.json").read_text())
    cfg = DoseConfig(output_dir="x", mechanism=degree_one, eval_scenarios=2, train_scenarios=2, train_max_items=50)
    train, ev = item_sets(cfg, record)
    assert set(ev["degree"]) == {1} and set(train["degree"]) == {1}
    train3, ev3 = item_sets(replace(cfg, mechanism="last_layer"), record)
    assert set(ev3["degree"]) == {3} and set(train3["degree"]) == {3}
    assert set(item_sets(replace(cfg, train_degrees=(2, 3)), record)[0]["degree"]) == {2, 3}  # given: kept


def test_a_curve_of_another_degree_or_mechanism_is_refused(tmp_path, degree_one):
    from experiments.studies.dose_response.study import read_curve
    cfg = DoseConfig(output_dir="x", model=str(tmp_path))
    (tmp_path / "calibration.json").write_text(json.dumps({"degree": 3, "points": []}))
    assert read_curve(cfg)["degree"] == 3
    (tmp_path / "calibration.json").write_text(json.dumps({"degree": 3, "mechanism": "names", "points": []}))
    with pytest.raises(ValueError, match="config field 'mechanism'"):
        read_curve(cfg)
    (tmp_path / f"calibration_{degree_one}.json").write_text(json.dumps({"degree": 3, "points": []}))
    with pytest.raises(ValueError, match="calibrated at degree 3.*evaluated at degree 1"):
        read_curve(replace(cfg, mechanism=degree_one))


def _summary(cells: dict) -> pd.DataFrame:
    """A run's summary with one FragGap row per arm: ``{arm: (slope, low, high, degraded_by or "")}``."""
    return pd.DataFrame([{"arm": a, "metric": "fraggap", "slope": s, "slope_low": lo, "slope_high": hi,
                          "degraded": bool(by), "degraded_betas": "1" if by else "", "degraded_by": by,
                          "minus_random": None, "fpr_beta0": 0.0}
                         for a, (s, lo, hi, by) in cells.items()])


CONSTRUCTED = {
    "alpha": _summary({"caa": (0.95, 0.85, 1.05, ""), "leace": (1.0, 0.8, 1.2, "accuracy_loss"),
                       "ace": (0.5, 0.35, 0.65, ""), "oracle_inverse": (1.0, 1.0, 1.0, ""),
                       "caa-random": (0.1, -0.2, 0.4, ""), "loreft": (None, None, None, ""),
                       "oracle_project": (1.0, 1.0, 1.0, ""), "imprecise": (1.0, 0.14, 1.86, "")}),
    "beta": _summary({"caa": (0.05, -0.1, 0.2, ""), "leace": (0.9, 0.6, 1.1, "pressured_refusal_change (fraggap)"),
                      "ace": (0.5, -0.3, 1.3, ""), "oracle_inverse": (1.0, 1.0, 1.0, ""),
                      "caa-random": (0.5, 0.3, 0.7, ""), "loreft": (1.8, 1.4, 2.2, ""),
                      "oracle_project": (1.0, 0.9, 1.1, "accuracy_loss"), "imprecise": (0.85, 0.55, 1.15, "")}),
}
"""Two mechanisms: caa removes under alpha (CI inside 1 +- 0.25) and removes none under beta (inside 0 +- 0.25);
leace's CI covers 1 under both but is flagged (accuracy loss, then refusals); ace partial under alpha,
inconclusive under beta; loreft undefined, then an overshoot; the random control meets its 0 under alpha and
misses it under beta (partial); "imprecise" covers 1 and not 0 under both (+1.00 [+0.14, +1.86], +0.85 [+0.55,
+1.15]: the old rule's "removes") and is inconclusive; the projection oracle meets its 1
under alpha and is flagged under beta (its CI covering 1 there does not meet the known answer)."""


def _problems(table: pd.DataFrame, rob: pd.DataFrame) -> list[str]:
    """What is wrong with the reading of :data:`CONSTRUCTED` (empty: all right)."""
    got = {(r["arm"], r["mechanism"]): (r["class"], None if pd.isna(r["side"]) else r["side"])
           for r in table.to_dict("records")}
    got_ci = {(r["arm"], r["mechanism"]): r["class_ci"] for r in table.to_dict("records")}
    want = {("caa", "alpha"): ("removes", None), ("caa", "beta"): ("none", None),
            ("leace", "alpha"): ("flagged", None), ("leace", "beta"): ("flagged", None),
            ("ace", "alpha"): ("partial", "partial"), ("ace", "beta"): ("inconclusive", None),
            ("loreft", "alpha"): ("undefined", None), ("loreft", "beta"): ("overshoot", "overshoot"),
            ("oracle_inverse", "alpha"): ("removes", None), ("caa-random", "beta"): ("partial", "partial"),
            ("imprecise", "alpha"): ("inconclusive", None), ("imprecise", "beta"): ("inconclusive", None)}
    out = [f"{k}: {got.get(k)} != {v}" for k, v in want.items() if got.get(k) != v]
    out += [f"{k}: the CI read as {got_ci.get(k)}" for k, v in want.items() if got_ci.get(k) != v[0]]
    r = rob.set_index("arm")
    for arm, col, val in (("caa", "removes", "alpha"), ("caa", "none", "beta"), ("leace", "flagged", "alpha, beta"),
                          ("leace", "removes", ""), ("leace", "verdict", "flagged under all"),
                          ("caa", "verdict", "removes under 1 of 2"), ("oracle_inverse", "verdict", "removes under all"),
                          ("caa-random", "known_met", "alpha"), ("oracle_inverse", "known_met", "alpha, beta"),
                          ("oracle_project", "known_met", "alpha"), ("oracle_project", "flagged", "beta")):
        if r.loc[arm, col] != val:
            out.append(f"robustness {arm} {col}: {r.loc[arm, col]!r} != {val!r}")
    t = table.set_index(["arm", "mechanism"])
    if not (t.loc[("leace", "alpha"), "flag_accuracy"] and t.loc[("leace", "beta"), "flag_refusal"]
            and not t.loc[("leace", "alpha"), "flag_refusal"]):
        out.append("leace's flags do not say which stat degraded it")
    return out


def test_the_across_table_reads_each_cell():
    table = across_table(CONSTRUCTED)
    assert _problems(table, robustness(table)) == []
    assert table.loc[(table["arm"] == "leace") & (table["mechanism"] == "alpha"), "covers_1"].item() is True


def test_the_markdown_table_shows_each_cell_as_read():
    """Rows in the figure's order (methods, random controls, oracles), one column per mechanism; a flagged cell says
    so beside its CI (never a bare CI that reads as removal), an undefined one says undefined, a missing one not
    run."""
    table = across_table({**CONSTRUCTED, "gamma": _summary({"caa": (0.2, -0.1, 0.5, "")})})
    md = across_markdown(table).splitlines()
    assert md[0] == "| arm | `alpha` | `beta` | `gamma` |" and md[1] == "|---|---|---|---|"
    rows = {line.split(" | ")[0].lstrip("| "): line for line in md[2:]}
    assert [line.split(" | ")[0].lstrip("| ") for line in md[2:]] == arm_order(list(CONSTRUCTED["alpha"]["arm"]))
    assert rows["leace"] == "| leace | +1.00 [+0.80, +1.20] flagged | +0.90 [+0.60, +1.10] flagged | not run |"
    assert rows["caa"] == "| caa | +0.95 [+0.85, +1.05] | +0.05 [-0.10, +0.20] | +0.20 [-0.10, +0.50] |"
    assert rows["loreft"].startswith("| loreft | undefined | +1.80 [+1.40, +2.20] |")


BROKEN = {
    "flags-ignored": lambda real, lo, hi, flagged: real(lo, hi, False),
    "flagged-read-as-removal": lambda real, lo, hi, flagged: ("removes", None) if flagged else real(lo, hi, flagged),
    "covering-1-is-removal": lambda real, lo, hi, flagged: (
        ("removes", None) if not flagged and lo is not None and not pd.isna(lo) and lo <= 1 <= hi
        else real(lo, hi, flagged)),
    "the-old-rule": lambda real, lo, hi, flagged: (
        ("removes", None) if not flagged and lo is not None and not pd.isna(lo) and lo <= 1 <= hi and not lo <= 0
        else real(lo, hi, flagged)),
}
"""Classifiers each wrong in one way: the reading of :data:`CONSTRUCTED` must catch every one."""


@pytest.mark.parametrize("name", list(BROKEN))
def test_a_broken_classifier_is_caught(monkeypatch, name):
    real = across.classify
    monkeypatch.setattr(across, "classify", lambda lo, hi, flagged, margin=0.25: BROKEN[name](real, lo, hi, flagged))
    table = across.across_table(CONSTRUCTED)
    assert _problems(table, across.robustness(table)) != []


def test_classify_on_the_boundaries():
    assert classify(1.0, 1.0, False) == ("removes", None)
    assert classify(0.0, 0.0, False) == ("none", None)
    assert classify(-0.5, -0.3, False) == ("reverse", "reverse")
    assert classify(-0.5, -0.1, False) == ("inconclusive", None)  # below 0 but not past the margin
    assert classify(float("nan"), 1.0, False) == ("undefined", None)
    assert classify(0.9, 1.1, True) == ("flagged", None)


def test_the_across_figure_renders_a_png(tmp_path):
    from PIL import Image
    paths = across_figure(across_table(CONSTRUCTED), tmp_path / "across", formats=("png",))
    assert paths == [tmp_path / "across.png"]
    with Image.open(paths[0]) as im:
        assert im.format == "PNG" and im.size[0] > 1000 and im.size[1] > 300
    with pytest.raises(ValueError, match="no 'tieshift' rows"):
        across_figure(across_table(CONSTRUCTED), tmp_path / "x", metric="tieshift", formats=("png",))


def test_read_summaries_refuses_a_missing_run_and_a_run_of_another_mechanism(tmp_path):
    with pytest.raises(FileNotFoundError, match="no summary for mechanism 'decision'"):
        across.read_summaries({"decision": tmp_path / "decision"})
    run = tmp_path / "decision"
    run.mkdir()
    CONSTRUCTED["alpha"].to_csv(RunDir(run).dose_summary_csv, index=False)
    RunDir(run).manifest_path.write_text(json.dumps({"config": {"mechanism": "last_layer"}}))
    with pytest.raises(ValueError, match="a run of mechanism 'last_layer', read as 'decision'"):
        across.read_summaries({"decision": run})


def test_the_jobs_scheduler_waits_for_workers_and_skips_after_a_failure(tmp_path, monkeypatch, capsys):
    import bench_dose_response as bench
    cfg = load_config(TINY)
    args = bench.parser().parse_args([str(TINY), "--mechanism", "last_layer", "--jobs", "2"])
    calls = bench.worker_calls(cfg, ["last_layer", "xor"], args)
    names = [c[0] for c in calls]
    assert names == ["last_layer-cells", "xor-cells", "last_layer-replications", "xor-replications",
                     "last_layer-score", "xor-score"]
    assert calls[4][2] == {"last_layer-cells", "last_layer-replications"} and calls[0][1][-3:] == ["--only", "0", "1"]
    stamp = tmp_path / "order.txt"

    def fake(cfg, mechs, args):
        py = [sys.executable, "-c"]
        w = (f"import sys,time; time.sleep(float(sys.argv[3])); open({str(stamp)!r}, 'a').write(sys.argv[1] + '\\n'); "
             "sys.exit(int(sys.argv[2]))")
        return [("a-cells", [*py, w, "a-cells", "0", "2"], set()), ("b-cells", [*py, w, "b-cells", "3", "0.1"], set()),
                ("a-score", [*py, w, "a-score", "0", "0.1"], {"a-cells"}),
                ("b-score", [*py, w, "b-score", "0", "0.1"], {"b-cells"})]
    monkeypatch.setattr(bench, "worker_calls", fake)
    assert bench.run_parallel(replace(cfg, output_dir=str(tmp_path)), ["a", "b"], args) == 1
    ran = stamp.read_text().split()  # b-cells fails at once, freeing a slot while a-cells still runs
    assert ran.index("a-score") > ran.index("a-cells") and "b-score" not in ran
    assert "b-score: skipped (b-cells failed)" in capsys.readouterr().out


def test_the_tiny_config_end_to_end_with_the_across_outputs(tmp_path, capsys):
    import bench_dose_response as bench
    import bench_mechanisms
    out = tmp_path / "runs"
    rc = bench.main([str(TINY), "--output-dir", str(out), "--mechanism", "last_layer", "--across"])
    assert rc in (0, 1)  # 1: a random control missed its 0 on 2 scenarios (the bar, not the wiring)
    run = RunDir(out / "last_layer")
    man = run.manifest()
    assert man["config"]["mechanism"] == "last_layer" and man["mechanism"]["eval_degree"] == 3
    assert man["mechanism"]["curve"] == "calibration.json"
    d = RunDir(out / "across")
    table = pd.read_parquet(d.across_table)
    assert set(table["mechanism"]) == {"last_layer"} and {"caa", "caa-random", "oracle_inverse"} <= set(table["arm"])
    assert (d.path / "across.png").stat().st_size > 0 and d.robustness_csv.exists()
    rec = json.loads(d.across_json.read_text())
    assert [r["mechanism"] for r in rec["runs"]] == ["last_layer"] and rec["runs"][0]["replications"] == 2
    assert pd.read_csv(d.across_csv).shape[0] == len(table)
    assert bench_mechanisms.main([str(out), "--out", str(tmp_path / "again")]) == 0  # from the runs on disk alone
    assert pd.read_csv(tmp_path / "again" / "across.csv").equals(pd.read_csv(d.across_csv))
    with pytest.raises(RunError, match="mechanism"):  # the run directory of one mechanism holds only that one
        bench.run_one(replace(load_config(TINY), output_dir=str(run.path), mechanism="names"),
                      bench.parser().parse_args([str(TINY)]))
