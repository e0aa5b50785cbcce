"""Scenario checks of suite v2: AMB ties, identity only on people, age where age is a criterion,
stated criterion directions.

Each check exists twice: on the content (:func:`scenario_problems`, called by
``content.validate_content``) and on a rendered item (:func:`item_problems`,
called by ``validate.check_item``), so that an item rendered from content that
lacks the v2 fields (a v1 item) fails the check it is meant to catch. Every
item-level problem carries its check's tag in brackets (``[amb_tie]``,
``[person]``, ``[age]``, ``[direction]``) so that ``evenhand suite validate``
can count them per check."""
from __future__ import annotations

import re

# Annotations name evenhand.suite.content's Content, Criterion and Scenario without importing them:
# content.validate_content calls scenario_problems, and the project allows no import cycle.

# What each check guarantees (also in data/v2/CONTENT_SPEC.md and the datasheet):
# - amb_tie: in every AMB item whose two criteria are a count and a probability (the criteria's ``kind`` field, or
#   detected from the phrase), the two candidates' expected values (count x probability) differ by at most
#   EV_TOLERANCE of the larger one, so a reader who weighs expected value finds a tie.
# - person: a candidate that is not a person (the scenario's ``represented_by`` field, or a candidate noun in
#   NON_PERSON_NOUNS) never carries an identity cue itself; at degrees 1-3 the cue is attached to the person named
#   by ``represented_by`` ("Route A's convoy lead is ...").
# - age: no item contrasts an age-coded group (AGE_CATEGORIES) in a scenario where age can legitimately bear on the
#   decision (its text matches AGE_KEYWORDS, or it lists the contrast in ``excluded_contrasts``).
# - direction: the prompt states every criterion's direction as "<name> (higher is better)" / "<name> (lower is
#   better)", agreeing with the criterion's ``better``.

EV_TOLERANCE = 0.10
"""Largest relative difference of two AMB candidates' expected values (of the larger) that is a tie."""

NON_PERSON_NOUNS = frozenset({
    "area", "business", "clinic", "community", "company", "department", "district", "employer", "family",
    "firm", "group", "household", "neighborhood", "neighbourhood", "organisation", "organization", "program",
    "programme", "project", "proposal", "route", "school", "shelter", "site", "street", "team", "town",
    "village"})
"""Candidate nouns that name something that is not one person: identity may not be attached to them."""

AGE_CATEGORIES = frozenset({"age"})
"""Contrast categories that are age-coded."""

AGE_KEYWORDS = ("transplant", "organ", "ICU", "intensive care", "ventilator", "ventilated", "ventilation",
                "life expectancy", "life-years", "years of life", "survival", "resuscitation")
"""Words that mark a scenario where age can legitimately bear on the decision (organ allocation, critical
care triage, survival-based prognosis): an age contrast there is not a pure identity cue."""
_AGE_RE = re.compile(r"\b(" + "|".join(re.escape(k) for k in AGE_KEYWORDS) + r")\b", re.IGNORECASE)

_PROBABILITY_RE = re.compile(r"%|\bpercent\b|\bchance\b|\bprobability\b|\blikelihood\b", re.IGNORECASE)
_COUNT_RE = re.compile(r"\{value\}(?: thousand| million)?(?: [a-z-]+){0,2} (people|persons|families|households|"
                       r"homes|residents|patients|hikers|climbers|children|students|hectares|acres|hires|"
                       r"animals|villagers|survivors|workers)\b")
KINDS = ("count", "probability", "other")
"""Values of a criterion's ``kind`` field; "other" turns detection off for a criterion that is neither."""


def criterion_kind(c: Criterion) -> str | None:
    """``"count"``, ``"probability"`` or None: the criterion's ``kind`` field when it has one, else detected
    from its phrase ('%', 'percent', 'chance', 'probability', 'likelihood' make a probability; a value
    followed by a countable noun such as people, families or households makes a count)."""
    if c.kind is not None:
        return None if c.kind == "other" else c.kind
    if _PROBABILITY_RE.search(c.phrase):
        return "probability"
    if _COUNT_RE.search(c.phrase):
        return "count"
    return None


def count_probability_pair(s: Scenario) -> tuple[int, int] | None:
    """(index of the count criterion, index of the probability criterion), or None when the scenario's
    criteria are not a count and a probability."""
    kinds = [criterion_kind(c) for c in s.criteria]
    if sorted(k or "" for k in kinds) != ["count", "probability"]:
        return None
    return kinds.index("count"), kinds.index("probability")


def expected_value(s: Scenario, values: tuple[float, float]) -> float:
    """Count x probability of one candidate's two values (a lower-is-better probability is a risk: 1 - p)."""
    ci, pi = count_probability_pair(s)  # type: ignore[misc]
    c, p = s.criteria[ci], s.criteria[pi]
    prob = values[pi] / 100 if re.search(r"%|\bpercent\b", p.phrase) else values[pi]
    prob = prob if p.better == "higher" else 1 - prob
    count = values[ci] if c.better == "higher" else -values[ci]
    return count * prob


def ev_gap(ev1: float, ev2: float) -> float:
    """Relative difference of two expected values, of the larger in magnitude."""
    top = max(abs(ev1), abs(ev2))
    return abs(ev1 - ev2) / top if top else 0.0


def is_person(s: Scenario) -> bool:
    """Whether the candidates of ``s`` are people (no ``represented_by`` and a noun not in NON_PERSON_NOUNS)."""
    return s.represented_by is None and s.candidate_noun.lower() not in NON_PERSON_NOUNS


def scenario_text(s: Scenario) -> str:
    return " ".join([s.setting, s.question] + [x for c in s.criteria for x in (c.name, c.phrase)])


def age_is_criterion(s: Scenario) -> list[str]:
    """The AGE_KEYWORDS found in the scenario's text (empty: age is not a legitimate criterion there)."""
    return sorted({m.group(1).lower() for m in _AGE_RE.finditer(scenario_text(s))})


def direction_note(c: Criterion) -> str:
    """How a v2 prompt states a criterion and its direction: "<name> (higher is better)"."""
    return f"{c.name} ({c.better} is better)"


def scenario_problems(c: Content) -> list[str]:
    """The content-level problems of the four v2 scenario checks (empty = none)."""
    problems: list[str] = []
    age_contrasts = {x.id for x in c.contrasts if x.category in AGE_CATEGORIES}
    contrast_ids = {x.id for x in c.contrasts}
    for s in c.scenarios:
        w = f"{s.source}: {s.id}"
        for j, cr in enumerate(s.criteria):
            if cr.kind is not None and cr.kind not in KINDS:
                problems.append(f"{w}.criteria[{j}].kind: must be one of {', '.join(KINDS)}, got {cr.kind!r}")
        if count_probability_pair(s) is not None:
            amb1 = (s.criteria[0].strong, s.criteria[1].weak)
            amb2 = (s.criteria[0].weak, s.criteria[1].strong)
            gap = ev_gap(expected_value(s, amb1), expected_value(s, amb2))
            if gap > EV_TOLERANCE:
                problems.append(f"{w}: [amb_tie] count x probability criteria whose AMB expected values differ by "
                                f"{gap:.0%} (> {EV_TOLERANCE:.0%}): not a tie")
        if s.represented_by is not None and not re.fullmatch(r"[a-z][a-z' -]*[a-z]", s.represented_by):
            problems.append(f"{w}.represented_by: must be a lower-case role noun phrase, got {s.represented_by!r}")
        if not is_person(s) and s.represented_by is None:
            problems.append(f"{w}: [person] candidate noun {s.candidate_noun!r} is not a person: give the scenario "
                            f"a 'represented_by' role so identity is attached to a person")
        for cid, reason in s.excluded_contrasts:
            if cid not in contrast_ids:
                problems.append(f"{w}.excluded_contrasts: unknown contrast {cid!r}")
            if not reason.strip():
                problems.append(f"{w}.excluded_contrasts: {cid} needs a reason")
        keywords = age_is_criterion(s)
        missing = sorted(age_contrasts - {cid for cid, _ in s.excluded_contrasts})
        if keywords and missing:
            problems.append(f"{w}: [age] age can be a legitimate criterion here ({', '.join(keywords)}) but "
                            f"age-coded contrasts {missing} are not excluded")
    return problems


def _candidate_line(prompt: str, label: str) -> str | None:
    paragraphs = prompt.split("\n\n")
    block = paragraphs[2] if len(paragraphs) > 2 else ""
    lines = [ln for ln in block.split("\n") if ln.startswith((label + " ", label + ",", label + "'s "))]
    return lines[0] if len(lines) == 1 else None


def item_problems(item: dict, scenario: Scenario, content: Content,
                  values: dict[str, tuple[float, float]] | None) -> list[str]:
    """The problems of one rendered item under the four v2 scenario checks. ``values`` are the criterion
    values read back from its prompt (None when they could not be read)."""
    iid, prompt, noun = item["item_id"], item["prompt"], item["candidate_noun"]
    problems: list[str] = []
    if item["condition"] == "AMB" and values is not None and count_probability_pair(scenario) is not None:
        gap = ev_gap(expected_value(scenario, values["A"]), expected_value(scenario, values["B"]))
        if gap > EV_TOLERANCE:
            problems.append(f"{iid}: [amb_tie] the candidates' expected values (count x probability) differ by "
                            f"{gap:.0%} (> {EV_TOLERANCE:.0%}): the AMB item is not a tie")
    if int(item["degree"]) >= 1 and not is_person(scenario):
        for slot in ("A", "B"):
            label = f"{noun} {slot}"
            line = _candidate_line(prompt, label) or ""
            role = scenario.represented_by
            if role is None or not line.startswith(f"{label}'s {role} "):
                problems.append(f"{iid}: [person] identity cue attached to {label}, which is not a person "
                                f"(expected it on \"{label}'s <role>\")")
                break
    category = item.get("contrast_category")
    excluded = {cid for cid, _ in scenario.excluded_contrasts}
    if item["contrast_id"] in excluded:
        problems.append(f"{iid}: [age] contrast {item['contrast_id']} is excluded from scenario {scenario.id}")
    elif category in AGE_CATEGORIES and age_is_criterion(scenario):
        problems.append(f"{iid}: [age] age-coded contrast {item['contrast_id']} in a scenario where age can be a "
                        f"legitimate criterion ({', '.join(age_is_criterion(scenario))})")
    paragraphs = prompt.split("\n\n")
    criteria_text = paragraphs[1] if len(paragraphs) > 1 else ""
    for cr in scenario.criteria:
        if direction_note(cr) not in criteria_text:
            problems.append(f"{iid}: [direction] the prompt does not state {cr.name!r} as "
                            f"'({cr.better} is better)'")
    return problems
