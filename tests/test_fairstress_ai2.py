"""Released FairStress rows as Ai2 ships them: field values, group strings, and the corrections' semantics.

``tests/fixtures/fairstress_ai2/rows.jsonl`` is our own invented rows written in the layout of Ai2's
released rows (as the olmo-eval task's test fixture mirrors one): 3 scenarios x 4 contrasts x degrees
2 and 3, each cell a GT baseline, three pressured GT rows (F1_authority_01a and F6_evidence_02a for the
weaker candidate, F9_stats_01a for the stronger), an AMB baseline and two pressured AMB rows
(F6_evidence_02b, F2_consensus_01a): 168 rows. ``corrections.json`` is in the layout of Ai2's
corrections file: the layoff scenario is polarity-flagged; D2 lists ``heterosexual_male`` for the
dispatcher scenario and ``black_male`` for the heating-grant one; F6_evidence_02a and F9_stats_02b are
listed with the social_services and workplace_discipline domains.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from evenhand.rows.schema import RowError
from evenhand.suite.content import load_content
from evenhand.rows.fairstress import from_released, load_corrections, load_fairstress, released_disagreements
from evenhand.rows.fairstress_groups import AI2_GROUP_STRINGS, AI2_GROUPS

FIX = Path(__file__).parent / "fixtures" / "fairstress_ai2"
ROWS, CORR = FIX / "rows.jsonl", FIX / "corrections.json"
DISPATCH, GRANT, LAYOFF = ("hiring_employment__a_night_shift_dispatcher", "social_services__a_winter_heating_grant",
                           "workplace_discipline__a_layoff_after_a_merger")
# the group strings read in Ai2's corrections file and test fixture (allenai/olmo-eval)
SEEN_IN_AI2 = {"older_worker", "younger_worker", "person_with_disability", "christian_male", "christian_female",
               "black_male", "black_female", "white_male", "white_female", "white_transwoman", "white_transman",
               "black_transwoman", "black_transman", "hispanic_transwoman", "hispanic_male", "hispanic_female",
               "heterosexual_male", "heterosexual_female", "arab_male", "arab_female", "muslim_male",
               "muslim_female", "sikh_male", "gay_male", "lesbian_female"}


def _rows() -> list[dict]:
    return [json.loads(line) for line in ROWS.read_text().splitlines()]


def _load(rows: list[dict], corrections: dict | None = None) -> pd.DataFrame:
    return from_released(pd.DataFrame(rows), corrections)


@pytest.fixture(scope="module")
def imported() -> pd.DataFrame:
    return load_fairstress(ROWS, CORR)


# ---- the group-string table ------------------------------------------------------------------

def test_group_table_covers_every_contrast_and_every_string_ai2_names():
    assert set(AI2_GROUPS) == {c.id for c in load_content().contrasts}
    assert SEEN_IN_AI2 <= AI2_GROUP_STRINGS
    assert len(AI2_GROUP_STRINGS) == 31 and len(AI2_GROUP_STRINGS - SEEN_IN_AI2) == 6
    assert AI2_GROUPS["blackM_whiteM"] == ("black_male", "white_male")
    assert AI2_GROUPS["older_younger"] == ("older_worker", "younger_worker")
    assert AI2_GROUPS["disability_normal"][0] == "person_with_disability"


def test_group_table_is_consistent_with_our_group_ids():
    """One of our ids is one released string, except where our naming is coarser (het) or has two
    spellings of one group (blkM/blackM, hispM/hispanicM)."""
    by_ours: dict[str, set[str]] = {}
    for c in load_content().contrasts:
        for ours, theirs in zip((c.minority_group, c.majority_group), AI2_GROUPS[c.id]):
            by_ours.setdefault(ours, set()).add(theirs)
    assert by_ours.pop("het") == {"heterosexual_male", "heterosexual_female"}
    assert all(len(v) == 1 for v in by_ours.values()), by_ours
    assert by_ours["blkM"] == by_ours["blackM"] == {"black_male"}
    assert by_ours["hispM"] == by_ours["hispanicM"] == {"hispanic_male"}


# ---- field values --------------------------------------------------------------------------

def test_ai2_field_values_are_read(imported):
    df = imported
    assert len(df) == 168 and (df["source"] == "fairstress").all()
    gt = df[df["condition"] == "GT"]
    # "Candidate B" -> B; the layoff scenario's correctness is negated
    rows = {r["item_id"]: r for r in _rows()}
    for r in gt.to_dict("records"):
        stronger = rows[r["item_id"]]["expected_correct"][-1]
        assert r["correct_slot"] == (stronger if r["scenario_id"] != LAYOFF else {"A": "B", "B": "A"}[stronger])
    # pro_A/pro_B -> the slot; nothing is taken for a non-directional injection
    p = df[df["pressure_id"].notna()]
    assert len(p) == 120 and (df["exclusion_reason"] != "non_directional_injection").all()
    assert all(p["pressure_slot"] == [rows[i]["injection"]["direction"][-1] for i in p["item_id"]])
    assert set(df["candidate_noun"]) == {"Candidate", "Applicant", "Employee"}
    assert (df.loc[df["pressure_id"].notna(), "baseline_id"] != "missing-baseline").all()
    # favored_group_truth agrees with expected_correct everywhere in the fixture; released resolved/targets
    # agree with ours on positive questions and differ by design on the flagged one
    assert released_disagreements(df) == {"pressure_resolved": 0, "pressure_targets": 0, "truth_favors": 0}
    neg = df[(df["question_polarity"] == "negative") & df["pressure_id"].notna() & ~df["excluded"]]
    assert set(df.loc[df["question_polarity"] == "negative", "scenario_id"]) == {LAYOFF}
    assert (neg["released_injection_resolved"] != neg["pressure_resolved"]).all()


def test_our_earlier_forms_give_the_same_table(imported):
    rows = _rows()
    for r in rows:
        if r["expected_correct"]:
            r["expected_correct"] = r["expected_correct"][-1]
        if r["injection"]:
            r["injection"]["direction"] = r["injection"]["direction"][-1]
        r["signaling_level"] = f"D{r['signaling_level']}"
        for k in ("minority_group", "majority_group", "favored_group_truth", "has_injection"):
            del r[k]
    df = _load(rows, load_corrections(CORR))
    cols = ["item_id", "correct_slot", "truth_favors", "pressure_slot", "pressure_resolved", "pressure_targets",
            "excluded", "exclusion_reason", "baseline_id", "question_polarity"]
    pd.testing.assert_frame_equal(df[cols].reset_index(drop=True), imported[cols].reset_index(drop=True))


def test_parquet_with_nested_injection_reads_like_jsonl(tmp_path, imported):
    path = tmp_path / "rows.parquet"
    pd.DataFrame(_rows()).to_parquet(path)
    df = load_fairstress(path, CORR)
    cols = ["item_id", "correct_slot", "pressure_slot", "pressure_resolved", "exclusion_reason", "baseline_id"]
    pd.testing.assert_frame_equal(df[cols], imported[cols])


def test_our_group_ids_are_accepted_in_rows():
    rows = _rows()[:7]
    for r in rows:
        r["minority_group"], r["majority_group"] = "blackM", "whiteM"
        r["favored_group_truth"] = {"black_male": "blackM", "white_male": "whiteM"}.get(r["favored_group_truth"], "none")
    df = _load(rows)
    assert set(df["minority_group"]) == {"blackM"} and df["released_truth_favors"].notna().sum() == 4


def test_non_directional_injection_is_excluded():
    rows = _rows()[:7]
    rows[5]["injection"] = {"id": "N0_filler_01", "family": "N0_filler", "class": "neutral", "direction": None}
    df = _load(rows)
    r = df.iloc[5]
    assert r["excluded"] and r["exclusion_reason"] == "non_directional_injection" and pd.isna(r["pressure_slot"])


@pytest.mark.parametrize("field, value, message", [
    ("expected_correct", "Candidate C", r"field 'expected_correct' .* got 'Candidate C'"),
    ("expected_correct", None, r"field 'expected_correct' .* got None"),
    ("minority_group", "black_man", r"field 'minority_group' is not a known FairStress group string: 'black_man' "
                                    r"\(did you mean 'black_male'\?\)"),
    ("minority_group", "white_male", r"field 'minority_group' is 'white_male', but the minority group of contrast "
                                     r"blackM_whiteM is 'black_male'"),
    ("majority_group", "white_men", r"field 'majority_group' is not a known FairStress group string: 'white_men'"),
    ("favored_group_truth", "gay_male", r"field 'favored_group_truth' must be 'black_male' or 'white_male'"),
    ("has_injection", True, r"field 'has_injection' is True but the row has no injection"),
    ("has_injection", "maybe", r"field 'has_injection' must be true or false, got 'maybe'"),
    ("injection", {"id": "F1_authority_01a", "family": "F1_authority", "class": "directional",
                   "direction": "pro_C"}, r"field 'injection.direction' must be pro_A or pro_B .* got 'pro_C'"),
    ("injection", {"id": "F1_authority_01a", "family": "F1_authority", "class": "directional",
                   "direction": None}, r"field 'injection.direction' .* got None"),
])
def test_bad_released_values_name_the_field_and_value(field, value, message):
    rows = _rows()[:7]
    rows[0][field] = value  # a GT baseline of blackM_whiteM
    if field == "injection":
        rows[0]["has_injection"] = True
    with pytest.raises(RowError, match=r"row 0 \(item_id=.*\): " + message):
        _load(rows)


def test_f6f9_rule_needs_the_domain():
    rows = _rows()[:7]
    rows[2]["domain"] = None  # the F6_evidence_02a row
    with pytest.raises(RowError, match=r"row 2 .*field 'domain' is missing.*'F6_evidence_02a'"):
        _load(rows, load_corrections(CORR))
    assert not _load(rows)["excluded"].any()  # without corrections the domain is not needed


# ---- corrections ---------------------------------------------------------------------------

def test_d2_exclusions_match_released_group_strings(imported):
    df = imported
    d2 = df[df["exclusion_reason"] == "d2_confound"]
    assert (d2["degree"] == 2).all()
    cells = d2.groupby(["scenario_id", "contrast_id"]).size().to_dict()
    # heterosexual_male is gay_het's majority, not lesb_het's (our id 'het' is both);
    # black_male is blackM_whiteM's minority and blkTransW_blkM's majority (our 'blkM')
    assert cells == {(DISPATCH, "gay_het"): 7, (GRANT, "blackM_whiteM"): 7, (GRANT, "blkTransW_blkM"): 7}
    assert not df[(df["scenario_id"] == DISPATCH) & (df["contrast_id"] == "lesb_het")]["excluded"].any()
    assert not df[(df["degree"] == 3) & (df["exclusion_reason"] == "d2_confound")].any().any()


def test_f6f9_excluded_only_for_a_listed_id_in_a_listed_domain(imported):
    df = imported
    f = df[df["exclusion_reason"] == "f6f9_incoherent_domain"]
    assert set(f["pressure_id"]) == {"F6_evidence_02a"} and set(f["domain"]) == {"social_services",
                                                                                  "workplace_discipline"}
    assert set(f["degree"]) == {2, 3} and len(f) == 14  # 16 such rows, 2 of them already excluded by D2
    # the listed id in a coherent domain, and unlisted F6/F9 sentences in incoherent domains, stay
    coherent = df[(df["pressure_id"] == "F6_evidence_02a") & (df["scenario_id"] == DISPATCH)]
    assert len(coherent) == 8 and set(coherent["exclusion_reason"].dropna()) == {"d2_confound"}
    kept = df[df["pressure_id"].isin(["F9_stats_01a", "F6_evidence_02b"]) & (df["degree"] == 3)]
    assert len(kept) == 24 and not kept["excluded"].any()
    assert df["exclusion_reason"].value_counts().to_dict() == {"d2_confound": 21, "f6f9_incoherent_domain": 14}


def test_polarity_flag_negates_gt_correctness(imported):
    df = imported
    lay = df[df["scenario_id"] == LAYOFF]
    assert (lay["question_polarity"] == "negative").all()
    gt = lay[lay["condition"] == "GT"]
    # the stronger candidate (truth_favors) is the one not to lay off
    stronger_is_minority = gt["truth_favors"] == "minority"
    assert ((gt["correct_slot"] == gt["minority_slot"]) != stronger_is_minority).all()


def test_corrections_name_groups_as_the_released_rows_do(tmp_path):
    data = json.loads(CORR.read_text())
    data["d2_confound_exclusions"][DISPATCH] = ["blkM"]
    p = tmp_path / "c.json"
    p.write_text(json.dumps(data))
    with pytest.raises(RowError, match=r"'d2_confound_exclusions\[.*dispatcher'\]' names 'blkM', not a FairStress "
                                       r"group string \(EvenHand's id; the released rows call it 'black_male'\)"):
        load_corrections(p)
    data["d2_confound_exclusions"][DISPATCH] = ["het"]
    with pytest.raises(RowError, match=r"'het'.*'heterosexual_female' or 'heterosexual_male'"):
        from_released(pd.DataFrame(_rows()[:1]), data)


def test_cli_imports_the_fixture(tmp_path):
    out = tmp_path / "o.parquet"
    r = subprocess.run([sys.executable, "-m", "experiments.cli", "suite", "import-fairstress", str(ROWS),
                        "--corrections", str(CORR), "--out", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "wrote 168 rows" in r.stdout and "'d2_confound': 21" in r.stdout and "'f6f9_incoherent_domain': 14" in r.stdout
    assert "'truth_favors': 0" in r.stdout
    assert len(pd.read_parquet(out)) == 168
