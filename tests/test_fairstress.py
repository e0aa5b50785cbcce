"""The released-FairStress loader: field mapping, the maintainers' corrections, exclusions."""
from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from evenhand.scoring.metrics import compute_metrics
from evenhand.models.simulated import PlantedBias, SimulatedModel
from evenhand.rows.schema import RowError, validate_rows
from evenhand.rows.fairstress import load_fairstress, released_disagreements
from evenhand.rows.fairstress_groups import AI2_GROUPS
from evenhand.suite.subsets import iter_subset


def _released(item: dict, choice: str | None, ai2: bool = False) -> dict:
    """Our item written the way the released rows are: no polarity, and expected_correct = the
    stronger candidate's slot (the released data's reading, wrong for negative questions). ``ai2``
    writes Ai2's field values (``"Applicant B"``, ``pro_B``, group strings, ``favored_group_truth``);
    otherwise our earlier forms (``B``, ``B``, ``D3``, no group fields)."""
    gt = item["condition"] == "GT"
    stronger = None
    if gt:
        stronger = item["minority_slot"] if item["truth_favors"] == "minority" else \
            ("B" if item["minority_slot"] == "A" else "A")
    inj = None
    if isinstance(item["pressure_id"], str):
        inj = {"id": item["pressure_id"], "family": item["pressure_family_code"] + "_" + item["pressure_family"],
               "class": "directional", "direction": ("pro_" if ai2 else "") + item["pressure_slot"]}
    # what a scorer assuming positive polarity would have written
    resolved = targets = None
    if inj:
        resolved = "pro_minority" if item["pressure_slot"] == item["minority_slot"] else "pro_majority"
        targets = ("stronger" if item["pressure_slot"] == stronger else "weaker") if gt else None
    row = {"item_id": "fs-" + item["item_id"], "scenario_id": item["scenario_id"], "domain": item["domain"],
           "condition": item["condition"], "signaling_level": f"D{item['degree']}",
           "contrast_id": item["contrast_id"], "minority_slot": item["minority_slot"], "expected_correct": stronger,
           "injection": inj, "injection_resolved": resolved, "injection_targets": targets,
           "prompt": item["prompt"], "choice": choice}
    if ai2:
        groups = AI2_GROUPS[item["contrast_id"]]
        row.update(signaling_level=int(item["degree"]), minority_group=groups[0], majority_group=groups[1],
                   has_injection=inj is not None, expected_correct=stronger and f"{item['candidate_noun']} {stronger}",
                   favored_group_truth=(groups[0] if item["truth_favors"] == "minority" else groups[1]) if gt else "none")
    return row


@pytest.fixture(scope="module")
def native():
    c_items = [it for it in iter_subset("core", 0) if it["degree"] == 3]
    df = pd.DataFrame(c_items)
    neg = df.loc[df["question_polarity"] == "negative", "scenario_id"].unique()
    assert len(neg) >= 2, "the sample must contain negative-question scenarios"
    resp = SimulatedModel(PlantedBias(refusal=0.0), seed=0).decide(df)
    resp["choice"] = [SimulatedModel(PlantedBias(refusal=0.0), seed=0).choose(r) for r in df.to_dict("records")]
    return resp, sorted(neg)


def _write(tmp_path, native_df, ai2: bool = False):
    rows = [_released(r, r["choice"], ai2) for r in native_df.to_dict("records")]
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


@pytest.mark.parametrize("ai2", [False, True], ids=["our-forms", "ai2-forms"])
def test_corrected_released_rows_score_like_native_rows(tmp_path, native, ai2):
    resp, neg = native
    df = load_fairstress(_write(tmp_path, resp, ai2), _corrections(tmp_path, neg))
    assert (df["question_polarity"] == "negative").sum() == (resp["question_polarity"] == "negative").sum()
    ours = compute_metrics(validate_rows(resp[resp["contrast_type"] == "type1"]), resamples=10)
    theirs = compute_metrics(df[df["contrast_type"] == "type1"], resamples=10)
    for m in ("accuracy", "accgap", "tielean", "fraggap", "tieshift"):
        assert theirs[m].value == pytest.approx(ours[m].value), m
    # the released resolved/targets agree with docs/METRICS.md wherever the polarity is positive
    assert released_disagreements(df) == {"pressure_resolved": 0, "pressure_targets": 0, "truth_favors": 0}
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
    """Ai2's semantics: D2 by the released group strings at degree 2 only; F6/F9 by listed id AND listed domain."""
    resp, neg = native
    sub = resp[resp["degree"] == 3]
    scen = sub["scenario_id"].iloc[0]
    bad_id = sub.loc[sub["pressure_family_code"].isin(["F6", "F9"]), "pressure_id"].iloc[0]
    dom = sub.loc[sub["pressure_id"] == bad_id, "domain"].iloc[0]
    rows = sub.copy()
    rows.loc[rows.index[:40], "degree"] = 2  # pretend some rows are degree 2 to exercise that rule
    path = _write(tmp_path, rows, ai2=True)
    group = AI2_GROUPS[rows.iloc[0]["contrast_id"]][0]
    df = load_fairstress(path, _corrections(tmp_path, neg, d2_confound_exclusions={scen: [group]},
                                            f6f9_excluded_injection_ids=[bad_id], f6f9_incoherent_domains=[dom]))
    reasons = df["exclusion_reason"].value_counts().to_dict()
    assert set(reasons) == {"d2_confound", "f6f9_incoherent_domain"}
    d2x = df[df["exclusion_reason"] == "d2_confound"]
    assert (d2x["degree"] == 2).all() and set(d2x["scenario_id"]) == {scen}
    is_group = df["contrast_id"].map(lambda c: group in AI2_GROUPS[c])
    assert len(d2x) == ((df["degree"] == 2) & (df["scenario_id"] == scen) & is_group).sum()
    ex = df[df["exclusion_reason"] == "f6f9_incoherent_domain"]
    listed = (df["pressure_id"] == bad_id) & (df["domain"] == dom) & (df["exclusion_reason"] != "d2_confound")
    assert len(ex) == listed.sum() > 0 and set(ex["pressure_id"]) == {bad_id}
    # the listed id in other domains, and other F6/F9 sentences in the listed domain, stay
    other_dom = df[(df["pressure_id"] == bad_id) & (df["domain"] != dom)]
    other_f6f9 = df[df["pressure_family_code"].isin(["F6", "F9"]) & (df["pressure_id"] != bad_id) & (df["domain"] == dom)]
    assert len(other_dom) > 0 and not other_dom["excluded"].any()
    assert len(other_f6f9) > 0 and not other_f6f9.loc[other_f6f9["degree"] == 3, "excluded"].any()


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
