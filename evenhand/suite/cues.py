"""Degree-2 cues and pressure direction: the choices the generator makes here, and their checks.

**Pressure direction.** A suite-v2 pressure sentence says what it argues for
(``argues`` in ``data/v2/pressure.yaml``): ``choose`` ("{target} should be the
answer") pushes toward {target} on any question; ``benefit`` ("{target} deserves
a good outcome") pushes toward {target} on a positive question and toward the
*other* candidate on a negative one ("which employee should be laid off?").
An item's ``pressure_slot`` is always the answer the sentence pushes toward
(docs/METRICS.md), so :func:`pressure_named_slot` gives the slot to render as
{target}. Suite v1 has no annotation and renders every sentence as ``choose``."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from .cue_words import (BENEFIT, CHOOSE, DOMAIN_MERIT_WORDS, benefit_words, choice_words, merit_words,
                        wording_argues)

# This module imports no other suite module (content, the generator and the validator all import it, and modules
# may not import each other in a cycle): it reads the content's objects through the small protocols below.


class PressureLike(Protocol):
    """What this module reads of a ``content.PressureSentence``."""
    id: str
    template: str
    argues: str | None

    def render(self, target: str, other: str) -> str: ...


class ProfileLike(Protocol):
    """What this module reads of a ``content.Profile``."""
    id: str
    implicit: tuple[str, ...]
    cue_shapes: tuple[str, ...] | None

    def cue(self, shape: str) -> str: ...


class ContrastLike(Protocol):
    """What this module reads of a ``content.Contrast``."""
    id: str
    minority: str
    majority: str


class ScenarioLike(Protocol):
    """What this module reads of a ``content.Scenario``."""
    id: str
    polarity: str


class ContentLike(Protocol):
    """What this module reads of a ``content.Content``."""
    scenarios: Sequence[ScenarioLike]
    contrasts: Sequence[ContrastLike]
    profiles: Mapping[str, ProfileLike]
    pressure: Sequence[PressureLike]
    cue_shapes: Mapping[str, str]

    @property
    def domains(self) -> tuple[str, ...]: ...

    def contrast(self, contrast_id: str) -> ContrastLike: ...

    def scenario(self, scenario_id: str) -> ScenarioLike: ...

    def pressure_sentence(self, pressure_id: str) -> PressureLike: ...


ARGUES = (CHOOSE, BENEFIT)
LENGTH_TOLERANCE = 0.30
"""Two parallel cues' lengths (characters) differ by at most this share of the longer one."""
_SLOTS = ("A", "B")


def _other(slot: str) -> str:
    return "B" if slot == "A" else "A"


# ---- pressure direction ---------------------------------------------------------------------

def effective_argues(pressure: PressureLike) -> str:
    """How the generator renders a sentence: its annotation, or ``choose`` (suite v1, unannotated)."""
    return pressure.argues or CHOOSE


def pushes_toward(argues: str, polarity: str, named_slot: str) -> str:
    """The answer a sentence pushes toward when it names ``named_slot`` as {target}: that slot for a
    ``choose`` sentence or on a positive question; the other slot for a ``benefit`` sentence on a
    negative question (a good outcome for the named candidate means choosing the other one)."""
    return named_slot if argues == CHOOSE or polarity == "positive" else _other(named_slot)


def pressure_named_slot(pressure: PressureLike, polarity: str, pressure_slot: str) -> str:
    """The slot to render as {target} so that the sentence pushes toward ``pressure_slot``."""
    return pushes_toward(effective_argues(pressure), polarity, pressure_slot)


def _pressure_item_problems(item: dict, content: ContentLike) -> list[str]:
    iid, noun, prompt = item["item_id"], item["candidate_noun"], item["prompt"]
    p = content.pressure_sentence(item["pressure_id"])
    slot, polarity = item["pressure_slot"], item["question_polarity"]
    named = [n for n in _SLOTS if p.render(f"{noun} {n}", f"{noun} {_other(n)}") in prompt]
    if len(named) != 1:
        return [f"{iid}: pressure sentence {p.id} is not in the prompt naming exactly one label as its target"]
    words = wording_argues(p.template)
    argues = p.argues or words or CHOOSE
    problems = []
    if p.argues is not None and words != p.argues:
        problems.append(f"{iid}: pressure sentence {p.id} is annotated {p.argues!r} but its wording reads {words!r}")
    pushed = pushes_toward(argues, polarity, named[0])
    if pushed != slot:
        problems.append(f"{iid}: pressure sentence {p.id} argues {argues!r} for {noun} {named[0]} on a {polarity} "
                        f"question, which pushes toward {noun} {pushed}, but pressure_slot is {slot}")
    if item.get("condition") == "GT" and item.get("correct_slot") in _SLOTS:
        targets = "stronger" if slot == item["correct_slot"] else "weaker"
        if item.get("pressure_targets") != targets:
            problems.append(f"{iid}: pressure_targets {item.get('pressure_targets')} should be {targets}")
    return problems


def _pressure_content_problems(content: ContentLike) -> list[str]:
    problems = []
    for p in content.pressure:
        w = f"pressure.yaml: {p.id}"
        if p.argues is None:
            problems.append(f"{w}: no 'argues' annotation (choose or benefit); rendered as 'choose'")
        elif p.argues not in ARGUES:
            problems.append(f"{w}.argues: must be choose or benefit, got {p.argues!r}")
            continue
        argues = effective_argues(p)
        has_b, has_c = bool(benefit_words(p.template)), bool(choice_words(p.template))
        if argues == CHOOSE and (has_b or not has_c):
            problems.append(f"{w}: treated as 'choose' but its wording "
                            + ("suggests benefit (a benefit word)" if has_b else "has no choice word"))
        if argues == BENEFIT and (has_c or not has_b):
            problems.append(f"{w}: annotated 'benefit' but its wording "
                            + ("asks for a choice (a choice word)" if has_c else "has no benefit word"))
    return problems


def check_pressure_directions(content: ContentLike) -> list[str]:
    """Every (template, polarity) pair in both slots: the sentence as the generator renders it
    (:func:`pressure_named_slot` names its {target}) must, by its wording, push toward the
    ``pressure_slot`` it is rendered for. (``validate.check_item`` runs the same check on the
    generator's rendered items.)"""
    problems = []
    for polarity in ("positive", "negative"):
        for p in content.pressure:
            for slot in _SLOTS:
                named = pressure_named_slot(p, polarity, slot)
                item = {"item_id": f"{p.id} on a {polarity} question, pressure_slot {slot}", "candidate_noun": "Applicant",
                        "prompt": p.render(f"Applicant {named}", f"Applicant {_other(named)}"),
                        "pressure_id": p.id, "pressure_slot": slot, "question_polarity": polarity}
                problems += _pressure_item_problems(item, content)
    return problems


# ---- parallel, merit-free degree-2 cues ------------------------------------------------------
# Parallel cues: a suite-v2 profile tags each implicit cue with a shape (``cue_shapes`` in data/v2/groups.yaml);
# implicit_cue picks ONE shape per (scenario, contrast) among the shapes both profiles have, so both candidates get
# a cue of the same shape. Suite v1 draws each profile's cue by its own hash (kept so that v1 renders byte-identical
# items).
# Merit-free cues: MERIT_WORDS (general) and DOMAIN_MERIT_WORDS (per scenario domain) in evenhand.suite.cue_words
# list words that would make a cue carry criterion-relevant merit; no cue may contain one.

def _shapes(profile: ProfileLike) -> tuple[str, ...]:
    """A profile's cue shapes: its tags (v2), or each cue's position in an untagged v1 list."""
    return profile.cue_shapes or tuple(f"list item {j + 1}" for j in range(len(profile.implicit)))


def shared_shapes(content: ContentLike, contrast: ContrastLike) -> tuple[str, ...]:
    """The shapes both profiles of a contrast have cues of, in the order ``cue_shapes`` lists them."""
    mi, ma = content.profiles[contrast.minority], content.profiles[contrast.majority]
    both = set(_shapes(mi)) & set(_shapes(ma))
    order = list(content.cue_shapes) or list(_shapes(mi))
    return tuple(s for s in order if s in both)


def contrast_shape(content: ContentLike, scenario: ScenarioLike, contrast: ContrastLike,
                   draw: Callable[..., int]) -> str:
    """The one cue shape both candidates get in a (scenario, contrast) (suite v2): ``draw`` (the
    generator's stable hash) of the two ids picks among :func:`shared_shapes`. KeyError when the
    contrast's profiles share no shape (``check_content_cues`` reports it)."""
    shared = shared_shapes(content, contrast)
    if not shared:
        raise KeyError(f"groups.yaml: the profiles of contrast {contrast.id} share no cue shape")
    return shared[draw("implicit", scenario.id, contrast.id) % len(shared)]


def implicit_cue(content: ContentLike, scenario: ScenarioLike, contrast: ContrastLike, profile: ProfileLike,
                 draw: Callable[..., int]) -> str:
    """The degree-2 cue of ``profile`` (one side of ``contrast``) in ``scenario``: in suite v2 its cue
    of the shape :func:`contrast_shape` picks for both sides; in v1 (untagged cues) a draw per
    profile, as v1 always rendered. ``draw`` is the generator's stable hash."""
    if profile.cue_shapes is None:
        return profile.implicit[draw("implicit", scenario.id, profile.id) % len(profile.implicit)]
    return profile.cue(contrast_shape(content, scenario, contrast, draw))


def _lengths_close(a: str, b: str) -> bool:
    return abs(len(a) - len(b)) <= LENGTH_TOLERANCE * max(len(a), len(b))


def _cue_content_problems(content: ContentLike) -> list[str]:
    problems = []
    for p in content.profiles.values():
        w = f"groups.yaml: profiles.{p.id}.implicit"
        if p.cue_shapes is None:
            problems.append(f"{w}: cues carry no shape (an untagged list); the two candidates' cues are drawn "
                            f"independently and need not be parallel")
        for shape in p.cue_shapes or ():
            if shape not in content.cue_shapes:
                problems.append(f"{w}.{shape}: shape not declared in cue_shapes")
        if p.cue_shapes is not None and len(set(p.cue_shapes)) != len(p.cue_shapes):
            problems.append(f"{w}: a shape appears twice")
        for shape, text in zip(_shapes(p), p.implicit):
            hits = merit_words(text) + [h for d in DOMAIN_MERIT_WORDS for h in merit_words(text, d, general=False)]
            if hits:
                problems.append(f"{w}.{shape}: carries merit ({', '.join(sorted(set(hits)))}): {text!r}")
    for x in content.contrasts:
        mi, ma = content.profiles[x.minority], content.profiles[x.majority]
        shared = shared_shapes(content, x)
        if not shared:
            problems.append(f"groups.yaml: contrast {x.id}: profiles {mi.id} and {ma.id} share no cue shape")
        for shape in shared:
            a, b = mi.implicit[_shapes(mi).index(shape)], ma.implicit[_shapes(ma).index(shape)]
            if a == b:
                problems.append(f"groups.yaml: contrast {x.id}: {mi.id} and {ma.id} have the same {shape} cue")
            elif not _lengths_close(a, b):
                problems.append(f"groups.yaml: contrast {x.id}: the {shape} cues of {mi.id} ({len(a)} chars) and "
                                f"{ma.id} ({len(b)} chars) differ by more than {LENGTH_TOLERANCE:.0%}")
    for d in content.domains:
        if d not in DOMAIN_MERIT_WORDS:
            problems.append(f"cue_words.py: domain {d!r} has no list in DOMAIN_MERIT_WORDS")
    return problems


def _cue_item_problems(item: dict, content: ContentLike) -> list[str]:
    iid, noun, prompt = item["item_id"], item["candidate_noun"], item["prompt"]
    x = content.contrast(item["contrast_id"])
    mslot = item["minority_slot"]
    # a candidate that is not a person carries no cue itself: the person who stands for it does (suite v2)
    role = getattr(content.scenario(item["scenario_id"]), "represented_by", None)
    found = {}
    for slot in _SLOTS:
        profile = content.profiles[x.minority if slot == mslot else x.majority]
        who = f"{noun} {slot}" if role is None else f"{noun} {slot}'s {role}"
        hits = [(shape, text) for shape, text in zip(_shapes(profile), profile.implicit)
                if f"{who} {text}. {noun} {slot} " in prompt]
        if len(hits) != 1:
            return [f"{iid}: {noun} {slot} does not carry exactly one implicit cue of profile {profile.id}"]
        found[slot] = hits[0]
    (sa, ta), (sb, tb) = found["A"], found["B"]
    problems = []
    if sa != sb:
        problems.append(f"{iid}: the two cues are not parallel: {noun} A's is of shape {sa!r}, {noun} B's of {sb!r}")
    if not _lengths_close(ta, tb):
        problems.append(f"{iid}: the two cues' lengths ({len(ta)}, {len(tb)} chars) differ by more than "
                        f"{LENGTH_TOLERANCE:.0%}")
    for slot, (_, text) in found.items():
        hits = merit_words(text, item.get("domain"))
        if hits:
            problems.append(f"{iid}: {noun} {slot}'s cue carries merit ({', '.join(sorted(set(hits)))})")
    return problems


def check_item_cues(item: dict, content: ContentLike) -> list[str]:
    """Problems with one rendered item's pressure direction (pressured items) and degree-2 cues (same
    shape, lengths within 30%, no merit word of the general lists or the item's domain). Called by
    ``validate.check_item``; it fails on suite v1, whose defects it was written to catch, and passes on suite v2."""
    problems = []
    if isinstance(item.get("pressure_id"), str):
        problems += _pressure_item_problems(item, content)
    if item.get("degree") == 2:
        problems += _cue_item_problems(item, content)
    return problems


def check_content_cues(content: ContentLike) -> list[str]:
    """Content-level checks: pressure annotations and their wording, every (template, polarity) pair
    (:func:`check_pressure_directions`), cue shapes, parallel cue lengths, merit words in every cue
    (general and every domain's list), a merit list for every domain (empty list: valid). Called by
    ``content.validate_content``; it fails on suite v1, whose defects it was written to catch, and passes on
    suite v2."""
    problems = _pressure_content_problems(content) + _cue_content_problems(content)
    return problems + check_pressure_directions(content)
