"""The released-FairStress loader: field mapping, the maintainers' corrections, exclusions."""
from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from evenhand.metrics import compute_metrics
from evenhand.models.simulated import PlantedBias, SimulatedModel
from evenhand.schema import RowError, validate_rows
from evenhand.suite.fairstress import load_fairstress, released_disagreements
from evenhand.suite.subsets import iter_subset


def _released(item: dict, choice: str | None) -> dict:
    """Our item written the way the released rows are: no polarity, and expected_correct = the
    stronger candidate's slot (the released data's reading, wrong for negative questions)."""
    gt = item["condition"] == "GT"
    stronger = None
    if gt:
        stronger = item["minority_slot"] if item["truth_favors"] == "minority" else \
            ("B" if item["minority_slot"] == "A" else "A")
    inj = None
    if isinstance(item["pressure_id"], str):
        inj = {"id": item["pressure_id"], "family": item["pressure_family_code"] + "_" + item["pressure_family"],
               "class": "directional", "direction": item["pressure_slot"]}
    # what a scorer assuming positive polarity would have written
    resolved = targets = None
    if inj:
        resolved = "pro_minority" if item["pressure_slot"] == item["minority_slot"] else "pro_majority"
        targets = ("stronger" if item["pressure_slot"] == stronger else "weaker") if gt else None
    return {"item_id": "fs-" + item["item_id"], "scenario_id": item["scenario_id"], "domain": item["domain"],
            "condition": item["condition"], "signaling_level": f"D{item['degree']}",
            "contrast_id": item["contrast_id"], "minority_slot": item["minority_slot"], "expected_correct": stronger,
            "injection": inj, "injection_resolved": resolved, "injection_targets": targets,
            "prompt": item["prompt"], "choice": choice}


@pytest.fixture(scope="module")
def native():
    c_items = [it for it in iter_subset("core", 0) if it["degree"] == 3]
    df = pd.DataFrame(c_items)
    neg = df.loc[df["question_polarity"] == "negative", "scenario_id"].unique()
    assert len(neg) >= 2, "the sample must contain negative-question scenarios"
    resp = SimulatedModel(PlantedBias(refusal=0.0), seed=0).decide(df)
    resp["choice"] = [SimulatedModel(PlantedBias(refusal=0.0), seed=0).choose(r) for r in df.to_dict("records")]
    return resp, sorted(neg)


def _write(tmp_path, native_df):
    rows = [_released(r, r["choice"]) for r in native_df.to_dict("records")]
    path = tmp_path / "released.jsonl"
    with path.open("w") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")
    return path


def _corrections(tmp_path, neg, **kw):
    data = {"polarity_flagged_scenarios": list(neg), "d2_confound_exclusions": {},
            "f6f9_excluded_injection_ids": [], "f6f9_incoherent_domains": []}
    data.update(kw)
    p = tmp_path / "corr.json"
    p.write_text(json.dumps(data))
    return p


def test_corrected_released_rows_score_like_native_rows(tmp_path, native):
    resp, neg = native
    df = load_fairstress(_write(tmp_path, resp), _corrections(tmp_path, neg))
    assert (df["question_polarity"] == "negative").sum() == (resp["question_polarity"] == "negative").sum()
    ours = compute_metrics(validate_rows(resp[resp["contrast_type"] == "type1"]), resamples=10)
    theirs = compute_metrics(df[df["contrast_type"] == "type1"], resamples=10)
    for m in ("accuracy", "accgap", "tielean", "fraggap", "tieshift"):
        assert theirs[m].value == pytest.approx(ours[m].value), m
    # the released resolved/targets agree with docs/METRICS.md wherever the polarity is positive
    assert released_disagreements(df) == {"pressure_resolved": 0, "pressure_targets": 0}
    # baselines were found by matching fields
    assert (df.loc[df["pressure_id"].notna(), "baseline_id"] != "missing-baseline").all()


def test_without_corrections_negative_scenarios_are_scored_wrongly(tmp_path, native):
    resp, neg = native
    df = load_fairstress(_write(tmp_path, resp), None)
    flagged = df[df["scenario_id"].isin(neg) & (df["condition"] == "GT")]
    assert (flagged["question_polarity"] == "positive").all()
    fixed = load_fairstress(_write(tmp_path, resp), _corrections(tmp_path, neg))
    f2 = fixed[fixed["scenario_id"].isin(neg) & (fixed["condition"] == "GT")]
    assert (flagged["correct_slot"].to_numpy() != f2["correct_slot"].to_numpy()).all()


def test_exclusions(tmp_path, native):
    resp, neg = native
    sub = resp[resp["degree"] == 3]
    d2 = resp.head(0)
    scen = sub["scenario_id"].iloc[0]
    fam_rows = sub[sub["pressure_family_code"].isin(["F6", "F9"])]
    dom = fam_rows["domain"].iloc[0]
    bad_id = sub.loc[sub["pressure_id"].notna(), "pressure_id"].iloc[0]
    rows = sub.copy()
    rows.loc[rows.index[:40], "degree"] = 2  # pretend some rows are degree 2 to exercise that rule
    path = _write(tmp_path, rows)
    groups = [rows.iloc[0]["minority_group"]]
    df = load_fairstress(path, _corrections(tmp_path, neg, d2_confound_exclusions={scen: groups},
                                            f6f9_excluded_injection_ids=[bad_id], f6f9_incoherent_domains=[dom]))
    reasons = df["exclusion_reason"].value_counts().to_dict()
    assert reasons.get("d2_confound", 0) >= 1
    assert reasons.get("f6f9_excluded_injection", 0) >= 1
    assert reasons.get("f6f9_incoherent_domain", 0) >= 1
    ex = df[df["exclusion_reason"] == "f6f9_incoherent_domain"]
    assert set(ex["domain"]) == {dom} and set(ex["pressure_family_code"]) <= {"F6", "F9"}
    d2x = df[df["exclusion_reason"] == "d2_confound"]
    assert (d2x["degree"] == 2).all() and set(d2x["scenario_id"]) == {scen}
    del d2


def test_bad_released_rows(tmp_path, native):
    resp, neg = native
    rows = [_released(r, r["choice"]) for r in resp.head(5).to_dict("records")]
    rows[2]["contrast_id"] = "nobody_somebody"
    p = tmp_path / "bad.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(RowError, match=r"line 3 .*'contrast_id'"):
        load_fairstress(p, None)
    c = tmp_path / "c.json"
    c.write_text(json.dumps({"polarity_flagged_scenarios": []}))
    r = subprocess.run([sys.executable, "-m", "experiments.cli", "suite", "import-fairstress", str(p), "--corrections",
                        str(c), "--out", str(tmp_path / "o.parquet")], capture_output=True, text=True)
    assert r.returncode == 2 and "missing key 'd2_confound_exclusions'" in r.stderr
    assert not (tmp_path / "o.parquet").exists()
