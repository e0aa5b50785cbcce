"""Suite v2's pressure direction, parallel degree-2 cues and merit-free cues (evenhand/suite/cues.py).

Each check is shown to fail on the suite-v1 content or items it was written to catch (or on a
constructed case) and to pass on suite v2."""
from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from evenhand.vocab.sides import favours_minority
from evenhand.suite.content import load_content, validate_content
from evenhand.suite.cue_words import DOMAIN_MERIT_WORDS, merit_words, wording_argues
from evenhand.suite.cues import (check_content_cues, check_item_cues, check_pressure_directions, contrast_shape,
                                 pressure_named_slot)
from evenhand.suite.generate import Cell, render_item, stable_hash
from evenhand.suite.validate import check_item

V1, V2 = load_content("1"), load_content("2")


def _first(content, polarity):
    return next(s for s in content.scenarios if s.polarity == polarity)


def _with_profile_cue(content, pid, shape, text):
    """``content`` with profile ``pid``'s cue of ``shape`` replaced by ``text``."""
    prof = content.profiles[pid]
    implicit = tuple(text if s == shape else t for s, t in zip(prof.cue_shapes, prof.implicit))
    return dataclasses.replace(content, profiles={**content.profiles, pid: dataclasses.replace(prof, implicit=implicit)})


def test_v2_content_passes_every_cue_check_and_v1_fails_them():
    assert check_content_cues(V2) == [] and validate_content(V2) == []
    v1 = check_content_cues(V1)
    assert "pressure.yaml: emotional_05: no 'argues' annotation (choose or benefit); rendered as 'choose'" in v1
    assert "pressure.yaml: emotional_05: treated as 'choose' but its wording suggests benefit (a benefit word)" in v1
    assert any(p.startswith("groups.yaml: profiles.whiteM.implicit: cues carry no shape") for p in v1)


# ---- 1. pressure direction ----------------------------------------------------------------

def test_every_v2_sentence_is_annotated_and_both_kinds_occur():
    kinds = Counter(p.argues for p in V2.pressure)
    assert set(kinds) == {"choose", "benefit"} and sum(kinds.values()) == len(V2.pressure) == 81
    assert all(p.argues == "benefit" for p in V2.pressure if p.family in ("emotional", "historical_disadvantage"))
    assert all(p.argues is None for p in V1.pressure)


def test_a_mislabelled_sentence_fails_either_way():
    flip = {"emotional_05": "choose", "authority_01": "benefit"}
    bad = dataclasses.replace(V2, pressure=tuple(dataclasses.replace(p, argues=flip.get(p.id, p.argues))
                                                 for p in V2.pressure))
    problems = check_content_cues(bad)
    assert "pressure.yaml: emotional_05: treated as 'choose' but its wording suggests benefit (a benefit word)" \
        in problems
    assert "pressure.yaml: authority_01: annotated 'benefit' but its wording asks for a choice (a choice word)" \
        in problems
    bogus = dataclasses.replace(V2, pressure=(dataclasses.replace(V2.pressure[0], argues="maybe"), *V2.pressure[1:]))
    assert "pressure.yaml: authority_01.argues: must be choose or benefit, got 'maybe'" in check_content_cues(bogus)


def test_every_template_polarity_pair_pushes_toward_pressure_slot_in_v2_not_v1():
    assert check_pressure_directions(V2) == []
    v1 = check_pressure_directions(V1)
    benefit_worded = {p.id for p in V1.pressure if wording_argues(p.template) == "benefit"}
    assert len(benefit_worded) == 34
    assert {m.split()[0] for m in v1} == benefit_worded and len(v1) == 2 * len(benefit_worded)
    assert all("on a negative question" in m for m in v1)
    # the generator's own renderings, every (template, polarity) pair in both slots
    for content in (V2,):
        for polarity in ("positive", "negative"):
            cell = Cell(_first(content, polarity), "GTmaj", 3, content.contrasts[4], "B")
            for p in content.pressure:
                for slot in "AB":
                    assert check_item(render_item(content, cell, p, slot), content) == []


def test_benefit_sentence_on_a_negative_question_names_the_other_candidate():
    for content in (V1, V2):
        assert _first(content, "negative").id == "academic_integrity.assistantship_funding_cut"
    cell_v1 = Cell(_first(V1, "negative"), "GTmin", 3, V1.contrast("blackM_whiteM"), "A")
    cell_v2 = Cell(_first(V2, "negative"), "GTmin", 3, V2.contrast("blackM_whiteM"), "A")
    noun = cell_v2.scenario.candidate_noun
    # v1 renders "Student A has overcome a great deal ..." for pressure_slot A: it argues that A be spared,
    # yet the item says following it means withdrawing A's funding
    old = render_item(V1, cell_v1, V1.pressure_sentence("emotional_05"), "A")
    assert f"{noun} A has overcome" in old["prompt"]
    assert any("argues 'benefit' for Student A on a negative question, which pushes toward Student B, but "
               "pressure_slot is A" in m for m in check_item_cues(old, V1))
    assert any("pushes toward" in m for m in check_item(old, V1))
    # v2 names Student B: a good outcome for B is withdrawing A's funding, the answer the pressure pushes toward
    new = render_item(V2, cell_v2, V2.pressure_sentence("emotional_05"), "A")
    assert f"{noun} B has overcome" in new["prompt"] and f"{noun} A has overcome" not in new["prompt"]
    assert new["pressure_slot"] == "A" and check_item(new, V2) == []
    assert new["pressure_resolved"] == ("pro_minority" if favours_minority("A", "A", "negative") else "pro_majority")
    assert new["pressure_targets"] == ("stronger" if new["correct_slot"] == "A" else "weaker")
    # a choose sentence names pressure_slot on either polarity
    chosen = render_item(V2, cell_v2, V2.pressure_sentence("authority_01"), "A")
    assert f"that {noun} A be chosen" in chosen["prompt"] and check_item(chosen, V2) == []
    assert pressure_named_slot(V2.pressure_sentence("emotional_05"), "positive", "A") == "A"


def test_item_check_catches_a_wrong_pressure_targets():
    cell = Cell(_first(V2, "negative"), "GTmaj", 3, V2.contrasts[0], "B")
    item = render_item(V2, cell, V2.pressure_sentence("legal_06"), "B")
    assert check_item_cues(item, V2) == []
    bad = dict(item, pressure_targets="stronger" if item["pressure_targets"] == "weaker" else "weaker")
    assert any("pressure_targets" in m for m in check_item_cues(bad, V2))


# ---- 2. parallel cues -----------------------------------------------------------------------

def _pairs(content, scenarios):
    for s in scenarios:
        for x in content.contrasts:
            yield s, x, render_item(content, Cell(s, "GTmin", 2, x, "A"))


def test_v1_cues_are_often_not_parallel_and_v2_always_are():
    v1 = [any("not parallel" in m for m in check_item_cues(it, V1)) for _, _, it in _pairs(V1, V1.scenarios[::5])]
    assert 0.55 < sum(v1) / len(v1) < 0.8  # about two in three (67.5% over all 10,890 pairs)
    for _, _, it in _pairs(V2, V2.scenarios[::3]):
        assert check_item_cues(it, V2) == []


def test_one_shape_per_scenario_and_contrast_for_both_arrangements():
    x = V2.contrast("muslimF_christianF")
    shapes = Counter()
    for s in V2.scenarios[:60]:
        a = render_item(V2, Cell(s, "AMB1", 2, x, "A"))["prompt"]
        b = render_item(V2, Cell(s, "AMB1", 2, x, "B"))["prompt"]
        shape = contrast_shape(V2, s, x, stable_hash)
        mi, ma = V2.profiles[x.minority].cue(shape), V2.profiles[x.majority].cue(shape)
        role = "" if s.represented_by is None else f"'s {s.represented_by}"  # a person standing for a non-person
        assert f"A{role} {mi}." in a and f"B{role} {ma}." in a and f"A{role} {ma}." in b and f"B{role} {mi}." in b
        shapes[shape] += 1
    assert set(shapes) == {"congregation", "symbol_schedule", "pilgrimage"}


def test_item_check_fails_on_cues_of_different_shapes_or_lengths():
    s, x = V2.scenarios[0], V2.contrast("blackM_whiteM")
    item = render_item(V2, Cell(s, "GTmin", 2, x, "A"))
    shape = contrast_shape(V2, s, x, stable_hash)
    other = next(sh for sh in V2.profiles["whiteM"].cue_shapes if sh != shape)
    swapped = item["prompt"].replace(V2.profiles["whiteM"].cue(shape), V2.profiles["whiteM"].cue(other))
    assert any("not parallel" in m for m in check_item_cues(dict(item, prompt=swapped), V2))
    long = V2.profiles["whiteM"].cue(shape) + " with a large group of old friends from the neighbourhood and their dogs"
    bad = _with_profile_cue(V2, "whiteM", shape, long)
    assert any("differ by more than 30%" in m for m in check_content_cues(bad))
    assert any("lengths" in m for m in check_item_cues(render_item(bad, Cell(s, "GTmin", 2, x, "A")), bad))


def test_contrasts_without_a_shared_shape_are_reported():
    prof = V2.profiles["blkTransW"]
    bad = dataclasses.replace(V2, profiles={**V2.profiles, "blkTransW": dataclasses.replace(
        prof, cue_shapes=tuple(f"{s}_x" for s in prof.cue_shapes))})
    problems = check_content_cues(bad)
    assert "groups.yaml: contrast blkTransW_blkM: profiles blkTransW and blackM share no cue shape" in problems
    assert "groups.yaml: profiles.blkTransW.implicit.parade_x: shape not declared in cue_shapes" in problems
    with pytest.raises(KeyError, match="share no cue shape"):
        contrast_shape(bad, V2.scenarios[0], V2.contrast("blkTransW_blkM"), stable_hash)


# ---- 3. merit-free cues -----------------------------------------------------------------------

def test_v1_cues_carry_merit_and_v2_cues_do_not():
    v1 = check_content_cues(V1)
    assert any(m.startswith("groups.yaml: profiles.normal.implicit.list item 3: carries merit "
                            "(fitness_athletics:half-marathon") for m in v1)
    assert any(m.startswith("groups.yaml: profiles.younger.implicit.list item 3: carries merit") and "graduat" in m
               for m in v1)
    assert not any("carries merit" in m for m in check_content_cues(V2))
    # a v1 firefighting item whose non-disabled candidate runs half-marathons
    x = V1.contrast("disability_normal")
    hits = [it for s, _, it in _pairs(V1, [s for s in V1.scenarios if s.domain == "public_safety"])
            if it["contrast_id"] == x.id and "runs half-marathons" in it["prompt"]]
    assert hits and any("carries merit (fitness_athletics:half-marathon" in m for m in check_item_cues(hits[0], V1))


def test_domain_merit_words_apply_to_that_domain_only():
    assert set(V2.domains) <= set(DOMAIN_MERIT_WORDS)
    assert merit_words("plays cello in a community ensemble") == []
    assert merit_words("plays cello in a community ensemble", "education_student") == ["education_student:cello"]
    s_music = next(s for s in V2.scenarios if s.domain == "education_student")
    s_other = next(s for s in V2.scenarios if s.domain == "medical_healthcare")
    x = V2.contrast("muslimM_christianM")
    shape = contrast_shape(V2, s_music, x, stable_hash)
    bad = _with_profile_cue(V2, "christianM", shape, V2.profiles["christianM"].cue(shape) + " and plays cello there")
    assert any("education_student:cello" in m for m in check_content_cues(bad))
    music = render_item(bad, Cell(s_music, "GTmin", 2, x, "A"))
    assert any("carries merit (education_student:cello)" in m for m in check_item_cues(music, bad))
    other = render_item(bad, Cell(s_other, "GTmin", 2, x, "A"))
    assert not any("carries merit" in m for m in check_item_cues(other, bad))


def test_a_domain_without_a_merit_list_is_reported():
    bad = dataclasses.replace(V2, scenarios=(dataclasses.replace(V2.scenarios[0], domain="astrology"),
                                             *V2.scenarios[1:]))
    assert "cue_words.py: domain 'astrology' has no list in DOMAIN_MERIT_WORDS" in check_content_cues(bad)
