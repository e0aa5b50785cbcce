"""Scoring one's own answers (issue 30 items 1-2): declined and unparsed answers counted apart, the unparsed
rows listed, partial and small files warned about, bad choices and one's own suite."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pandas as pd
import pytest

from evenhand.scoring.metrics import compute_metrics, score
from evenhand.rows.schema import REQUIRED, RowError, validate_rows

REFUSED = ("I refuse to choose between these candidates.", "I can't decide.")
GARBAGE = ("qwerty zxcv ###", "Both are equally qualified.", "")


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "experiments.cli", *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def mixed(smoke_items) -> pd.DataFrame:
    """240 type-1 smoke items answered: 24 declined, 36 unparsed (garbage, both, empty), the rest a label."""
    df = smoke_items[smoke_items["contrast_type"] == "type1"].head(240).copy().reset_index(drop=True)
    texts = []
    for i, r in enumerate(df.to_dict("records")):
        texts.append(REFUSED[i % 2] if i % 10 == 0 else GARBAGE[i % 3] if i % 10 in (1, 2, 3) and i % 20 < 10
                     else f"{r['candidate_noun']} {'A' if i % 3 else 'B'}")
    return df.assign(text=texts)


def test_declined_and_unparsed_are_counted_apart(mixed):
    report = score(mixed, resamples=20)
    split = report["no_choice"]["overall"]
    declined = sum(t in REFUSED for t in mixed["text"])
    unparsed = sum(t in GARBAGE for t in mixed["text"])
    assert (split["refusal"], split["unparsed"], split["n"]) == (declined, unparsed, len(mixed))
    assert (declined, unparsed) == (24, 36)
    # the Refusal metric still counts both, as before
    assert report["overall"]["refusal"]["value"] == pytest.approx((declined + unparsed) / len(mixed))
    assert split["refusal_rate"] + split["unparsed_rate"] == pytest.approx(report["overall"]["refusal"]["value"])
    by3 = report["no_choice"]["by_degree"]["3"]
    d3 = mixed["degree"] == 3
    assert by3["refusal"] == sum(t in REFUSED for t in mixed.loc[d3, "text"])


def test_verdict_column_wins_and_old_rows_are_recomputed(mixed):
    from evenhand.scoring.metrics import no_choice, verdicts
    old = validate_rows(mixed)  # no parse_verdict: recomputed from text
    assert (verdicts(old) == "refusal").sum() == 24
    marked = old.assign(parse_verdict=["refusal" if t in GARBAGE else None for t in old["text"]])
    assert no_choice(marked)["overall"]["refusal"] == 24 + 36  # the written verdict is read, not re-derived
    only_choice = old.drop(columns=["text"]).assign(choice=[None if t in REFUSED + GARBAGE else "A"
                                                            for t in old["text"]])
    assert no_choice(only_choice)["overall"] == {"n": 240, "refusal": 0, "unparsed": 60, "refusal_rate": 0.0,
                                                 "unparsed_rate": 0.25}
    with pytest.raises(RowError, match="field 'parse_verdict' must be one of choice, refusal, unparsed"):
        validate_rows(mixed.assign(parse_verdict="declined"))


def test_score_prints_the_split_and_lists_unparsed(tmp_path, mixed):
    f, out = tmp_path / "answers.jsonl", tmp_path / "unparsed.csv"
    mixed[["item_id", "text"]].to_json(f, orient="records", lines=True)
    r = _cli("score", str(f), "--unparsed", str(out))
    assert r.returncode == 0, r.stderr
    assert re.search(r"\n {4}declined \(refusal\) +10\.0 % \(24 of 240\)\n", r.stdout)
    assert re.search(r"\n {4}unparsed \(no verdict\) +15\.0 % \(36 of 240\)\n", r.stdout)
    listed = pd.read_csv(out, keep_default_na=False)
    assert listed["item_id"].tolist() == mixed.loc[mixed["text"].isin(GARBAGE), "item_id"].tolist()
    assert set(listed["text_head"]) == set(GARBAGE)
    assert "36 unparsed answers written to" in r.stderr
    bad = _cli("score", str(f), "--unparsed", str(tmp_path / "no" / "x.csv"))
    assert bad.returncode == 2 and "directory" in bad.stderr and "does not exist" in bad.stderr


def test_partial_and_smoke_files_are_warned_about(tmp_path, mixed, smoke_items):
    f = tmp_path / "part.jsonl"
    mixed[["item_id", "text"]].head(100).to_json(f, orient="records", lines=True)
    r = _cli("score", str(f))
    assert r.returncode == 0, r.stderr
    n1 = int((mixed.head(100)["contrast_type"] == "type1").sum())
    total = int((smoke_items["contrast_type"] == "type1").sum())
    assert f"the file covers {n1:,} of {total:,} type1 items of subset smoke (seed 0)" in r.stderr
    assert "smoke is a plumbing check" in r.stderr and "evenhand power" in r.stderr
    full = tmp_path / "full.jsonl"
    smoke_items.assign(text="Applicant A")[["item_id", "text"]].to_json(full, orient="records", lines=True)
    r = _cli("score", str(full))
    assert r.returncode == 0, r.stderr
    assert "covers" not in r.stderr  # every item of the subset
    assert "the degree-3 headline rests on fewer than 10 scenarios" in r.stderr and "k=" in r.stderr


@pytest.mark.parametrize("bad", ["C", "Candidate A", "A."])
def test_a_choice_other_than_a_b_or_empty_is_refused_naming_the_row(tmp_path, smoke_items, bad):
    f = tmp_path / "c.csv"
    rows = smoke_items[["item_id"]].head(6).assign(choice=["A", "B", "", "b", bad, "A"])
    rows.to_csv(f, index=False)
    r = _cli("score", str(f))
    assert r.returncode == 2
    assert f"line 6 (item_id={rows['item_id'][4]})" in r.stderr
    assert f"field 'choice' must be A, B or empty, got {bad!r}" in r.stderr
    assert "line 4" not in r.stderr and "line 5" not in r.stderr  # "" and "b" are fine


def _own_suite(smoke_items) -> pd.DataFrame:
    """The smoke items as a suite of one's own: scenario and contrast ids renamed, no category."""
    from evenhand.models.simulated import PlantedBias, SimulatedModel
    df = SimulatedModel(PlantedBias(), seed=0).decide(smoke_items)
    scen = {s: f"my_domain.scenario_{i}" for i, s in enumerate(sorted(df["scenario_id"].unique()))}
    con = {c: f"my_contrast_{i}" for i, c in enumerate(sorted(df["contrast_id"].unique()))}
    own = df.assign(scenario_id=df["scenario_id"].map(scen), contrast_id=df["contrast_id"].map(con))
    return own[list(REQUIRED) + ["text"]], df


def test_an_own_suite_is_scored_with_the_flag_only(tmp_path, smoke_items):
    own, ours = _own_suite(smoke_items)
    f = tmp_path / "own.parquet"
    own.to_parquet(f)
    r = _cli("score", str(f), "--json")
    assert r.returncode == 2 and "unknown scenario id" in r.stderr and "--own-suite" in r.stderr
    r = _cli("score", str(f), "--json", "--own-suite")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    same = score(ours, resamples=20)
    for m in ("accuracy", "accgap", "tielean", "fraggap", "tieshift", "refusal"):
        assert rep["overall"][m]["value"] == same["overall"][m]["value"]
    assert rep["by_contrast_category"] == {}  # the contrasts are not the suite's: no category
    # the typo check stays without the flag, and the flag needs every item field
    typo = own.assign(scenario_id=ours["scenario_id"]).head(40).copy()
    typo.loc[3, "scenario_id"] = typo.loc[3, "scenario_id"] + "x"
    with pytest.raises(RowError, match="did you mean"):
        validate_rows(typo.assign(contrast_id=ours["contrast_id"].head(40)))
    with pytest.raises(RowError, match="a suite of your own needs every item field; no column pressure_targets"):
        validate_rows(own.drop(columns=["pressure_targets"]), own_suite=True)
    with pytest.raises(RowError, match="field 'contrast_type' must be type1 or type23"):
        validate_rows(own.assign(contrast_type="type9"), own_suite=True)


def test_metrics_unchanged_by_the_split(mixed):
    m = compute_metrics(mixed, resamples=20)
    assert m["refusal"].n == 240 and m["refusal"].value == pytest.approx(60 / 240)


def test_the_unparseable_warning_splits_declined_from_no_verdict(capsys):
    from evenhand.support.messages import warn_unparseable
    rows = pd.DataFrame({"choice": ["A", None, None, None], "parse_verdict": ["choice", "refusal", "unparsed",
                                                                              "unparsed"]})
    msg = warn_unparseable(rows)
    assert msg.startswith("75% of 4 answers") and "25% declined, 50% with no verdict found" in msg
    assert "declined" not in warn_unparseable(rows.drop(columns=["parse_verdict"]))  # older rows: no split

