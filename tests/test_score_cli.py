"""`evenhand score` / `compare` on files: rows the suite did not generate, and bad input."""
from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from evenhand.models.simulated import PlantedBias, SimulatedModel
from evenhand.rows.schema import REQUIRED, RowError, load_rows


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "experiments.cli", *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def responses(smoke_items):
    return SimulatedModel(PlantedBias(), seed=0).decide(smoke_items)


def _write_jsonl(path, rows):
    with open(path, "w") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")


def _minimal(rows: pd.DataFrame) -> list[dict]:
    """Only the fields docs/METRICS.md requires plus text: as a foreign tool would write them."""
    keep = list(REQUIRED) + ["text"]
    out = []
    for r in rows[keep].to_dict("records"):
        out.append({k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()})
    return out


def test_score_json_on_minimal_foreign_rows(tmp_path, responses):
    f = tmp_path / "foreign.jsonl"
    rows = _minimal(responses)
    for r in rows:  # ids the suite never generated
        r["item_id"] = "x-" + str(abs(hash(r["item_id"])))
    # baselines must follow the renamed ids explicitly
    ren = {a: b for a, b in zip(responses["item_id"], (r["item_id"] for r in rows))}
    for r, old in zip(rows, responses["baseline_id"]):
        r["baseline_id"] = ren[old]
    _write_jsonl(f, rows)
    r = _cli("score", str(f), "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert set(rep["overall"]) >= {"accuracy", "accgap", "tielean", "fraggap", "tieshift", "refusal"}
    assert rep["by_domain"] == {}  # no domain field given
    # identical numbers to scoring the suite's own rows
    f2 = tmp_path / "own.parquet"
    responses.to_parquet(f2)
    rep2 = json.loads(_cli("score", str(f2), "--json").stdout)
    for m in ("accuracy", "fraggap", "tieshift", "tielean", "accgap", "refusal"):
        assert rep["overall"][m]["value"] == rep2["overall"][m]["value"]


def test_score_human_output(tmp_path, responses):
    f = tmp_path / "r.parquet"
    responses.to_parquet(f)
    r = _cli("score", str(f))
    assert r.returncode == 0, r.stderr
    assert "Headline (degree 3" in r.stdout and "D0 -> D3" in r.stdout and "n=" in r.stdout


def test_score_refuses_resamples_and_seed_the_jackknife_never_reads(tmp_path, responses):
    f = tmp_path / "r.parquet"
    responses.to_parquet(f)
    for flag in ("--resamples", "--seed"):
        r = _cli("score", str(f), flag, "10")
        assert r.returncode == 2 and f"{flag} sets the cluster bootstrap" in r.stderr, r.stderr
        assert "jackknife-t over scenarios" in r.stderr and r.stdout == ""
    assert "--resamples" not in _cli("score", "--help").stdout


def test_help_and_printouts_name_the_metrics_interval_one_way(tmp_path, responses, smoke_items):
    """Where the interval is the jackknife-t, no help text or printout calls it a bootstrap."""
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    responses.to_parquet(a)
    SimulatedModel(PlantedBias(flip_pro_minority=0.15), seed=0).decide(smoke_items).to_parquet(b)
    texts = {"--help": _cli("--help").stdout, "score --help": _cli("score", "--help").stdout,
             "score": _cli("score", str(a)).stdout, "compare-runs": _cli("compare-runs", str(a), str(b)).stdout}
    for where, text in texts.items():
        assert "bootstrap" not in text.lower(), where
    for where in ("score --help", "score", "compare-runs"):
        assert "jackknife-t over scenarios" in " ".join(texts[where].split()), where  # help wraps lines
    desc = _cli("compare-runs", "--help").stdout
    assert "paired 95% CI (jackknife-t over scenarios)" in " ".join(desc.split())


@pytest.mark.parametrize("mutate, expect", [
    (lambda rows: rows[3].pop("minority_slot"), "line 4 (item_id="),
    (lambda rows: rows[5].update(contrast_id="martians_humans"), "field 'contrast_id'"),
    (lambda rows: rows[2].update(condition="MAYBE"), "field 'condition'"),
    (lambda rows: rows[7].update(degree=7), "field 'degree'"),
])
def test_bad_rows_name_row_and_field(tmp_path, responses, mutate, expect):
    rows = _minimal(responses.head(20))
    mutate(rows)
    f = tmp_path / "bad.jsonl"
    _write_jsonl(f, rows)
    before = sorted(p.name for p in tmp_path.iterdir())
    r = _cli("score", str(f), "--json")
    assert r.returncode == 2
    assert expect in r.stderr and r.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written


def test_missing_field_is_joined_from_the_suite_or_named(tmp_path, responses):
    rows = _minimal(responses.head(10))
    for r in rows:
        r.pop("pressure_targets")
    f = tmp_path / "m.jsonl"
    _write_jsonl(f, rows)
    joined = load_rows(f)  # suite item ids: the field comes from the suite
    assert joined["pressure_targets"].tolist() == responses.head(10)["pressure_targets"].tolist()
    for r in rows:
        r["item_id"] = "x-" + r["item_id"]
    _write_jsonl(f, rows)
    with pytest.raises(RowError, match=r"(?s)has no column pressure_targets.*line 1 .*'item_id' is not an item of"):
        load_rows(f)
    rows = _minimal(responses.head(10))
    rows[6].pop("minority_slot")
    _write_jsonl(f, rows)
    with pytest.raises(RowError, match=r"line 7 .*'minority_slot'"):
        load_rows(f)


def test_malformed_jsonl_line(tmp_path, responses):
    f = tmp_path / "broken.jsonl"
    rows = _minimal(responses.head(5))
    text = "\n".join(json.dumps(r) for r in rows[:3]) + "\n{not json\n" + json.dumps(rows[4]) + "\n"
    f.write_text(text)
    r = _cli("score", str(f))
    assert r.returncode == 2 and "line 4: malformed JSON" in r.stderr


def test_compare_runs_cli(tmp_path, responses, smoke_items):
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    responses.to_parquet(a)
    SimulatedModel(PlantedBias(flip_pro_minority=0.15), seed=0).decide(smoke_items).to_parquet(b)
    r = _cli("compare-runs", str(a), str(b), "--json", "--resamples", "100", "--degrees", "0", "1", "2", "3")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["n_items"] == int((responses["contrast_type"] == "type1").sum())  # every degree, pooled as asked
    assert "p_value" in res["mcnemar"]
    stats = {(s["metric"], s["stat"]) for s in res["score"]}
    assert {("fraggap", "change"), ("accuracy", "accuracy_loss"), ("refusal", "refusal_change")} <= stats
    fr = next(s for s in res["score"] if (s["metric"], s["stat"]) == ("fraggap", "change"))
    assert fr["value"] > 0  # b plants flip_pro_minority 0.15 = flip_neutral: its FragGap moved toward zero
    r = _cli("compare-runs", str(a), str(b), "--resamples", "100")
    assert "Intervention score" in r.stdout and "change toward zero, fraggap" in r.stdout


def test_compare_takes_a_config_and_the_old_two_file_form_names_compare_runs(tmp_path, responses):
    """`evenhand compare` runs a comparison config only; the old `compare BASE OTHER` (with or without
    compare-runs' flags) and a single response file fail with a message naming `evenhand compare-runs`."""
    a = tmp_path / "a.parquet"
    responses.to_parquet(a)
    for args in ([str(a), str(a)], [str(a), str(a), "--json", "--resamples", "100"], [str(a)]):
        r = _cli("compare", *args)
        assert r.returncode == 2 and r.stdout == "", args
        assert "evenhand compare-runs BASE OTHER" in r.stderr and "Traceback" not in r.stderr, args
    cfg = tmp_path / "c.yaml"
    cfg.write_text("model: m\n")
    r = _cli("compare", str(cfg), "--resamples", "100")
    assert r.returncode == 2 and "--resamples applies to two response files (`evenhand compare-runs" in r.stderr
    r = _cli("compare", str(cfg))  # the config form reaches the config check (names the missing field)
    assert r.returncode == 2 and "c.yaml: config field 'output_dir' is required" in r.stderr, r.stderr
    r = _cli("compare-runs", "--help")
    assert r.returncode == 0 and "evenhand compare CONFIG.yaml" in " ".join(r.stdout.split())  # help wraps lines


def test_coverage_cli_with_scenario_effects():
    """`evenhand coverage --scenario-sd` states the ICC its effects produce and covers every headline metric."""
    r = _cli("coverage", "--subset", "smoke", "--seeds", "2", "--scenario-sd", "0.6", "--interval", "iid")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "intervals: iid" in r.stdout and "ICC 0.099 latent" in r.stdout
    for m in ("accuracy", "accgap", "tielean", "fraggap", "tieshift", "refusal"):
        assert f"  {m} " in r.stdout, m
