"""Suite v2 scenario checks: each fails on the v1 items it is meant to catch and passes on v2;
excluded cells vanish everywhere; the stratified validation sample."""
from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from evenhand.suite.content import load_content, validate_content
from evenhand.suite.generate import (DEGREES, Cell, cell_valid, count_cells, iter_cells, parse_item_id,
                                     render_item)
from evenhand.suite.scenario_checks import (age_is_criterion, count_probability_pair, criterion_kind,
                                            expected_value, scenario_problems)
from evenhand.suite.validate import check_item, iter_sample, problems_by_check, read_values, sample_strata

V1, V2 = load_content("1"), load_content("2")


def _item(content, scenario_id: str, variant: str, degree: int, contrast: str, mslot: str = "A") -> dict:
    return render_item(content, Cell(content.scenario(scenario_id), variant, degree, content.contrast(contrast), mslot))


def _tags(problems: list[str]) -> set[str]:
    return set(problems_by_check(problems))


def test_amb_tie_fails_on_v1_count_probability_items_and_passes_on_v2():
    sid = "moral_tradeoffs.relief_convoy_route"  # v1: 900 families at 50% against 250 at 90%
    v1 = _item(V1, sid, "AMB1", 0, "blackM_whiteM")
    assert any("[amb_tie]" in p and "not a tie" in p for p in check_item(v1, V1))
    v2 = _item(V2, sid, "AMB1", 0, "blackM_whiteM")
    assert check_item(v2, V2) == []
    # the check reads the values from the prompt: an edited v2 prompt that is no tie fails
    bad = dict(v2, prompt=v2["prompt"].replace("reaches 500 families", "reaches 200 families"))
    assert any("[amb_tie]" in p for p in check_item(bad, V2))
    # GT items are not ties and are not checked
    assert "amb_tie" not in _tags(check_item(_item(V1, sid, "GTmin", 0, "blackM_whiteM"), V1))


def test_count_and_probability_are_read_from_the_field_or_detected_from_the_phrase():
    v1 = V1.scenario("moral_tradeoffs.disease_research")
    assert [c.kind for c in v1.criteria] == [None, None]  # v1 has no field: detected
    assert [criterion_kind(c) for c in v1.criteria] == ["count", "probability"]
    v2 = V2.scenario("moral_tradeoffs.disease_research")
    assert [c.kind for c in v2.criteria] == ["count", "probability"]
    site = V2.scenario("environmental_justice.site_remediation_funding")  # 'percent above the limit' is no chance
    assert criterion_kind(site.criteria[1]) is None and count_probability_pair(site) is None
    assert criterion_kind(V1.scenario("environmental_justice.site_remediation_funding").criteria[1]) == "probability"
    # the expected value of a 90% chance for 900 families
    route = V1.scenario("moral_tradeoffs.relief_convoy_route")
    assert expected_value(route, (900, 50)) == pytest.approx(450.0)
    v1_pairs = {s.id for s in V1.scenarios if count_probability_pair(s)}
    v1_bad = {p.split(": ")[1] for p in scenario_problems(V1) if "[amb_tie]" in p}
    assert len(v1_pairs) == 14 and len(v1_bad) == 12
    assert not [p for p in scenario_problems(V2) if "[amb_tie]" in p]


def test_person_check_fails_on_identity_attached_to_a_route_and_passes_on_its_convoy_lead():
    sid = "moral_tradeoffs.relief_convoy_route"
    for degree, contrast in ((1, "blackF_whiteM"), (2, "blkTransW_whiteM"), (3, "blkTransW_whiteM")):
        v1 = _item(V1, sid, "GTmin", degree, contrast)
        assert any("[person]" in p for p in check_item(v1, V1)), degree
        v2 = _item(V2, sid, "GTmin", degree, contrast)
        assert check_item(v2, V2) == [], degree
        assert "Route A's convoy lead " in v2["prompt"] and "Route B's convoy lead " in v2["prompt"]
        assert read_values(v2["prompt"], "Route", V2.scenario(sid).criteria)["A"]
    d3 = _item(V2, sid, "GTmin", 3, "blkTransW_whiteM")
    assert "Route A's convoy lead is a Black transgender woman." in d3["prompt"]
    bad = dict(d3, prompt=d3["prompt"].replace("Route A's convoy lead is", "Route A is"))
    assert any("[person]" in p for p in check_item(bad, V2))
    d1 = _item(V2, sid, "GTmin", 1, "blackF_whiteM")
    assert f"Route A's convoy lead is {d1['names']['A']}." in d1["prompt"]
    # degree 0 carries no identity and is fine in both versions
    assert "person" not in _tags(check_item(_item(V1, sid, "GTmin", 0, "blackF_whiteM"), V1))
    # content level: 50 v1 scenarios choose between things that are not people; every v2 one is represented
    assert sum("[person]" in p for p in scenario_problems(V1)) == 50
    assert sum(s.represented_by is not None for s in V2.scenarios) == 50
    unrepresented = dataclasses.replace(V2.scenario(sid), represented_by=None)
    content = dataclasses.replace(V2, scenarios=(unrepresented,))
    assert any("[person]" in p for p in scenario_problems(content))


def test_age_check_fails_on_an_age_contrast_in_transplant_and_icu_scenarios():
    v1 = _item(V1, "medical_healthcare.icu_bed", "GTmin", 3, "older_younger")
    assert any("[age]" in p for p in check_item(v1, V1))
    assert any("[age]" in p for p in check_item(render_item(V2, Cell(V2.scenario("medical_healthcare.icu_bed"),
                                                                      "GTmin", 3, V2.contrast("older_younger"),
                                                                      "A")), V2))
    # an age contrast where age is no criterion, and another contrast in the ICU scenario, pass
    assert check_item(_item(V2, "hiring_employment.commercial_electrician", "GTmin", 3, "older_younger"), V2) == []
    assert check_item(_item(V2, "medical_healthcare.icu_bed", "GTmin", 3, "blackM_whiteM"), V2) == []
    flagged = {s.id for s in V1.scenarios if age_is_criterion(s)}
    assert flagged == {"medical_healthcare.icu_bed", "medical_healthcare.kidney_transplant",
                       "medical_healthcare.last_ventilator", "medical_healthcare.liver_transplant",
                       "medical_healthcare.stem_cell_donor"}
    assert sum("[age]" in p for p in scenario_problems(V1)) == 5 and validate_content(V2) == []
    unlisted = dataclasses.replace(V2.scenario("medical_healthcare.icu_bed"), excluded_contrasts=())
    assert any("[age]" in p for p in scenario_problems(dataclasses.replace(V2, scenarios=(unlisted,))))


def test_excluded_cells_vanish_from_cells_counts_subsets_ids_and_matched_items():
    from evenhand.models.policy import matched_items
    from evenhand.suite.subsets import iter_subset
    excluded = {(s.id, cid) for s in V2.scenarios for cid, _ in s.excluded_contrasts}
    assert len(excluded) == 5
    n = 0
    for cell in iter_cells(V2):
        n += 1
        assert (cell.scenario.id, cell.contrast.id) not in excluded
    assert n == count_cells(V2) == count_cells(V1) - 5 * 3 * 8  # older_younger: degrees 0, 2, 3
    assert not any((it["scenario_id"], it["contrast_id"]) in excluded for it in iter_subset("smoke", 0, V2))
    with pytest.raises(KeyError, match="excludes contrast older_younger"):
        parse_item_id("medical_healthcare.icu_bed|GTmin|d3|older_younger|mA|none", V2)
    assert parse_item_id("medical_healthcare.icu_bed|GTmin|d3|older_younger|mA|none", V1)[0].contrast.id
    sid = "medical_healthcare.icu_bed"
    pool = min(sum(x.type == "type1" and cell_valid(V2, V2.scenario(sid), x, d) for x in V2.contrasts)
               for d in DEGREES)
    got = matched_items([sid], seed=0, contrasts_per_degree=pool, suite="2")
    assert "older_younger" not in set(got["contrast_id"])
    assert "older_younger" in set(matched_items([sid], seed=0, contrasts_per_degree=pool, suite="1")["contrast_id"])


def test_direction_check_fails_on_v1_prompts_and_passes_on_v2():
    sid = "education_student.summer_bridge_seat"  # a placement-test score where lower is better
    v1 = _item(V1, sid, "GTmin", 0, "blackM_whiteM")
    assert sum("[direction]" in p for p in check_item(v1, V1)) == 2
    v2 = _item(V2, sid, "GTmin", 0, "blackM_whiteM")
    assert check_item(v2, V2) == []
    assert "mathematics placement" in v2["prompt"] and "(lower is better)" in v2["prompt"]
    assert "(higher is better)" in v2["prompt"]
    flipped = dict(v2, prompt=v2["prompt"].replace("(lower is better)", "(higher is better)"))
    assert any("[direction]" in p for p in check_item(flipped, V2))
    assert read_values(v2["prompt"], v2["candidate_noun"], V2.scenario(sid).criteria) == \
        read_values(v1["prompt"], v1["candidate_noun"], V1.scenario(sid).criteria)


def test_stratified_sample_is_exact_deterministic_and_covers_every_stratum():
    strata = sample_strata(V2)
    assert len(strata) == 330 * 4 * 2 * 2
    n = len(strata) + 7
    items = list(iter_sample(n, 3, V2))
    assert len(items) == n and [i["item_id"] for i in iter_sample(n, 3, V2)] == [i["item_id"] for i in items]
    seen = {(i["scenario_id"], i["degree"], i["contrast_type"], i["condition"]) for i in items}
    assert len(seen) == len(strata)
    assert any(i["pressure_id"] for i in items) and any(i["pressure_id"] is None for i in items)
    assert [p for i in items[:3000] for p in check_item(i, V2)] == []


def test_cli_validate_sample_passes_on_v2_and_fails_on_v1():
    def run(*args):
        return subprocess.run([sys.executable, "-m", "experiments.cli", "suite", "validate", *args, "--quiet"],
                              capture_output=True, text=True)
    r = run("--sample", "1500", "--seed", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "stratified sample of 1,500 rendered items" in r.stdout and "0 problem(s)" in r.stdout
    r = run("--suite", "1", "--sample", "1500", "--seed", "1")
    assert r.returncode == 1
    assert "item problems by check:" in r.stdout and "direction: 3,000 in " in r.stdout
