"""The decision suite: lazy enumeration of the full product, item rendering, item ids.

An item is fixed by its *cell* (scenario, condition variant, degree, contrast,
minority slot) and its pressure (none, or one sentence arguing for one slot).

- condition variant: ``GTmin`` / ``GTmaj`` (GT: the minority- / majority-coded
  candidate has the strong value on both criteria) and ``AMB1`` / ``AMB2``
  (AMB: the minority-coded candidate is strong on criterion 1 / 2 and weak on
  the other; the majority-coded candidate the reverse).
- degree: 0 neutral labels, 1 a name, 2 an implicit correlate sentence,
  3 an explicit label. Degree 1 is skipped for a contrast when either of its
  profiles has no name pool (a name cannot signal disability, sexuality, age,
  atheism or transgender identity)."""
from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal, get_args

from ..vocab.sides import favours_minority
from .content import Content, Contrast, PressureSentence, Scenario, load_content
from .cues import implicit_cue, pressure_named_slot
from .scenario_checks import direction_note

VARIANTS = ("GTmin", "GTmaj", "AMB1", "AMB2")
DEGREES = (0, 1, 2, 3)
Slot = Literal["A", "B"]
"""An answer slot."""
SLOTS = get_args(Slot)
ANSWER_INSTRUCTION = 'Answer with only "{a}" or "{b}".'


def stable_hash(*parts: object) -> int:
    """A 64-bit hash of the parts that is the same on every machine and run."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def other_slot(slot: str) -> str:
    return "B" if slot == "A" else "A"


def degree_valid(content: Content, contrast: Contrast, degree: int) -> bool:
    """Degree 1 needs a name pool for both profiles; every other degree is always valid."""
    if degree != 1:
        return True
    return all(content.profiles[p].names is not None for p in (contrast.minority, contrast.majority))


def cell_valid(content: Content, scenario: Scenario, contrast: Contrast, degree: int) -> bool:
    """Whether the suite has cells of this scenario, contrast and degree: the degree is valid for the
    contrast (:func:`degree_valid`) and the scenario does not exclude the contrast (v2
    ``excluded_contrasts``, e.g. an age contrast where age can legitimately matter)."""
    return degree_valid(content, contrast, degree) and all(contrast.id != cid for cid, _ in scenario.excluded_contrasts)


@dataclass(frozen=True)
class Cell:
    scenario: Scenario
    variant: str
    degree: int
    contrast: Contrast
    minority_slot: str

    @property
    def key(self) -> str:
        return f"{self.scenario.id}|{self.variant}|d{self.degree}|{self.contrast.id}|m{self.minority_slot}"


def pick_names(content: Content, scenario: Scenario, contrast: Contrast) -> tuple[str, str]:
    """(minority name, majority name) for a scenario and contrast: stable, never colliding."""
    mi_pool = content.name_pools[content.profiles[contrast.minority].names]
    ma_pool = content.name_pools[content.profiles[contrast.majority].names]
    h = stable_hash("names", scenario.id, contrast.id)
    mi_first = mi_pool.first[h % len(mi_pool.first)]
    mi_last = mi_pool.last[(h >> 8) % len(mi_pool.last)]
    ma_firsts = [f for f in ma_pool.first if f != mi_first]
    ma_lasts = [x for x in ma_pool.last if x != mi_last]
    ma_first = ma_firsts[(h >> 16) % len(ma_firsts)]
    ma_last = ma_lasts[(h >> 24) % len(ma_lasts)]
    return f"{mi_first} {mi_last}", f"{ma_first} {ma_last}"


def criterion_values(cell: Cell, minority: bool) -> tuple[float, float]:
    """The two criterion values on the line of the minority-coded candidate (``minority``) or the
    majority-coded one in ``cell``: strong or weak per criterion as the cell's variant says."""
    c1, c2 = cell.scenario.criteria
    strong_on: tuple[bool, bool]
    if cell.variant == "GTmin":
        strong_on = (minority, minority)
    elif cell.variant == "GTmaj":
        strong_on = (not minority, not minority)
    elif cell.variant == "AMB1":
        strong_on = (minority, not minority)
    else:
        strong_on = (not minority, minority)
    return (c1.strong if strong_on[0] else c1.weak, c2.strong if strong_on[1] else c2.weak)


def _candidate_text(content: Content, cell: Cell, slot: str, name: str | None) -> str:
    s = cell.scenario
    label = f"{s.candidate_noun} {slot}"
    # v2: a candidate that is not a person carries no identity; the person who stands for it does
    who = label if s.represented_by is None else f"{label}'s {s.represented_by}"
    minority = slot == cell.minority_slot
    profile = content.profiles[cell.contrast.minority if minority else cell.contrast.majority]
    v1, v2 = criterion_values(cell, minority)
    quals = f"{s.criteria[0].render(v1)} and {s.criteria[1].render(v2)}."
    if cell.degree == 1:
        return f"{label}, {name}, {quals}" if s.represented_by is None else f"{who} is {name}. {label} {quals}"
    if cell.degree == 2:
        pred = implicit_cue(content, s, cell.contrast, profile, stable_hash)
        return f"{who} {pred}. {label} {quals}"
    if cell.degree == 3:
        return f"{who} is {profile.explicit}. {label} {quals}"
    return f"{label} {quals}"


def render_item(content: Content, cell: Cell, pressure: PressureSentence | None = None,
                pressure_slot: str | None = None) -> dict:
    """One item as a dict of the suite's item fields (see SUITE.md), prompt included.

    Suite v2 (switched on by v2 content, so v1 renders byte-identically): a scenario whose candidates are not
    people (``represented_by``) attaches the identity cue to the person who stands for each candidate ("Route A's
    convoy lead is ..."); a scenario's ``excluded_contrasts`` have no cells at all (see :func:`cell_valid`); and
    from major version 2 on the prompt states each criterion's direction ("... rests on X (higher is better) and
    Y (lower is better) ...")."""
    s, x = cell.scenario, cell.contrast
    noun = s.candidate_noun
    mslot, oslot = cell.minority_slot, other_slot(cell.minority_slot)
    names = None
    if cell.degree == 1:
        mi_name, ma_name = pick_names(content, s, x)
        names = {mslot: mi_name, oslot: ma_name}
    is_gt = cell.variant.startswith("GT")
    truth_favors = ("minority" if cell.variant == "GTmin" else "majority") if is_gt else None
    correct_slot = None
    if is_gt:
        stronger = mslot if truth_favors == "minority" else oslot
        correct_slot = stronger if s.polarity == "positive" else other_slot(stronger)
    if content.major >= 2:  # v2 states every criterion's direction
        rests = f"{direction_note(s.criteria[0])} and {direction_note(s.criteria[1])}"
    else:
        rests = f"{s.criteria[0].name} and {s.criteria[1].name}"
    parts = [s.setting, f"The decision rests on {rests}, which matter equally."]
    parts.append("\n".join(_candidate_text(content, cell, slot, names[slot] if names else None) for slot in SLOTS))
    pressure_fields: dict = {"pressure_id": None, "pressure_family": None, "pressure_family_code": None,
                             "pressure_slot": None, "pressure_resolved": None, "pressure_targets": None}
    if pressure is not None:
        assert pressure_slot in SLOTS
        named = pressure_named_slot(pressure, s.polarity, pressure_slot)  # pressure_slot: the answer it pushes toward
        parts.append(pressure.render(f"{noun} {named}", f"{noun} {other_slot(named)}"))
        pressure_fields = {
            "pressure_id": pressure.id, "pressure_family": pressure.family,
            "pressure_family_code": pressure.family_code, "pressure_slot": pressure_slot,
            "pressure_resolved": ("pro_minority" if favours_minority(pressure_slot, mslot, s.polarity)
                                  else "pro_majority"),
            "pressure_targets": (None if not is_gt else ("stronger" if pressure_slot == correct_slot else "weaker")),
        }
    parts.append(f"{s.question} " + ANSWER_INSTRUCTION.format(a=f"{noun} A", b=f"{noun} B"))
    base_id = cell.key + "|none"
    item_id = base_id if pressure is None else f"{cell.key}|{pressure.id}:{pressure_slot}"
    return {
        "item_id": item_id, "baseline_id": base_id, "scenario_id": s.id, "domain": s.domain,
        "condition": "GT" if is_gt else "AMB", "variant": cell.variant, "question_polarity": s.polarity,
        "degree": cell.degree, "contrast_id": x.id, "contrast_type": x.type, "contrast_category": x.category,
        "minority_group": x.minority_group, "majority_group": x.majority_group, "minority_slot": mslot,
        "correct_slot": correct_slot, "truth_favors": truth_favors,
        "amb_minority_strong_on": None if is_gt else int(cell.variant[-1]),
        **pressure_fields, "candidate_noun": noun, "names": names, "prompt": "\n\n".join(parts),
        "suite_version": content.version,
    }


def iter_cells(content: Content | None = None) -> Iterator[Cell]:
    """Every cell of the full product (the valid ones: :func:`cell_valid`), in a fixed order."""
    content = content or load_content()
    for s in content.scenarios:
        for v in VARIANTS:
            for d in DEGREES:
                for x in content.contrasts:
                    if cell_valid(content, s, x, d):
                        for m in SLOTS:
                            yield Cell(s, v, d, x, m)


def iter_cell_items(content: Content, cell: Cell) -> Iterator[dict]:
    yield render_item(content, cell)
    for p in content.pressure:
        for slot in SLOTS:
            yield render_item(content, cell, p, slot)


def iter_items(content: Content | None = None) -> Iterator[dict]:
    """The full product, lazily, in a fixed order. Everything is a deterministic function of the content files:
    the same suite version gives byte-identical items. Nothing here holds the product in memory."""
    content = content or load_content()
    for cell in iter_cells(content):
        yield from iter_cell_items(content, cell)


def items_per_cell(content: Content) -> int:
    return 1 + len(SLOTS) * len(content.pressure)


def count_cells(content: Content | None = None) -> int:
    """The number of cells :func:`iter_cells` yields (computed, not enumerated)."""
    content = content or load_content()
    per_variant_slot = sum(cell_valid(content, s, x, d) for s in content.scenarios for d in DEGREES
                           for x in content.contrasts)
    return len(VARIANTS) * per_variant_slot * len(SLOTS)


def count_full(content: Content | None = None) -> int:
    content = content or load_content()
    return count_cells(content) * items_per_cell(content)


def parse_item_id(item_id: str, content: Content | None = None) -> tuple[Cell, PressureSentence | None, str | None]:
    """Invert :func:`render_item`'s id; raises KeyError naming the part that is unknown."""
    content = content or load_content()
    parts = item_id.split("|")
    if len(parts) != 6:
        raise KeyError(f"item id {item_id!r} does not have the 6 '|'-separated parts of a suite item id")
    sid, variant, deg, cid, mslot, press = parts
    if variant not in VARIANTS or not deg.startswith("d") or mslot not in ("mA", "mB"):
        raise KeyError(f"item id {item_id!r}: bad variant, degree or minority-slot part")
    cell = Cell(content.scenario(sid), variant, int(deg[1:]), content.contrast(cid), mslot[1])
    if not degree_valid(content, cell.contrast, cell.degree):
        raise KeyError(f"item id {item_id!r}: contrast {cid} is not signalled at degree {cell.degree}")
    if not cell_valid(content, cell.scenario, cell.contrast, cell.degree):
        raise KeyError(f"item id {item_id!r}: scenario {sid} excludes contrast {cid} "
                       f"({dict(cell.scenario.excluded_contrasts)[cid]})")
    if press == "none":
        return cell, None, None
    pid, _, pslot = press.partition(":")
    if pslot not in SLOTS:
        raise KeyError(f"item id {item_id!r}: pressure part must be 'none' or '<id>:A|B'")
    return cell, content.pressure_sentence(pid), pslot


def item_by_id(item_id: str, content: Content | None = None) -> dict:
    """The item with this id, rendered again from the content (the inverse of its ``item_id``)."""
    content = content or load_content()
    cell, pressure, pslot = parse_item_id(item_id, content)
    return render_item(content, cell, pressure, pslot)
