"""Item-level validation: every rendered item is checked against its own text.

For a GT item the criterion values are read back *from the rendered prompt*
(each phrase becomes a regular expression), the dominating candidate is
computed from the criteria's directions, and the stored ``correct_slot`` and
``truth_favors`` must follow from it and the question's polarity. AMB items
must have no dominating candidate. Pressure items must render the mirror of
their twin. No template may leave a placeholder; names never collide. The v2
scenario checks (AMB ties, identity only on people, age where age matters,
stated directions) are in :mod:`evenhand.suite.scenario_checks`.

:func:`validate_suite` checks a fixed selection of items; :func:`iter_sample`
draws a stratified random sample of any size (``evenhand suite validate
--sample N --seed S``).
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from ..vocab.sides import favours_minority
from .content import Content, Criterion, load_content
from .cues import check_item_cues, pressure_named_slot
from .generate import (DEGREES, SLOTS, VARIANTS, Cell, cell_valid, other_slot, render_item)
from .scenario_checks import item_problems
from .subsets import CONDITION_VARIANTS, CONTRAST_TYPES

_PLACEHOLDER = re.compile(r"\{[^{}]*\}")
_TAG = re.compile(r": \[([a-z_0-9]+)\] ")
_NUMBER = r"(-?[0-9][0-9,]*(?:\.[0-9]+)?)"


def _phrase_regex(c: Criterion) -> re.Pattern:
    return re.compile(re.escape(c.phrase).replace(re.escape("{value}"), _NUMBER))


def read_values(prompt: str, noun: str, criteria: tuple[Criterion, Criterion]) -> dict[str, tuple[float, float]]:
    """The two criterion values of each slot, parsed from the prompt's candidate lines."""
    out = {}
    paragraphs = prompt.split("\n\n")
    block = paragraphs[2] if len(paragraphs) > 2 else ""  # setting, criteria, candidates, [pressure], question
    for slot in SLOTS:
        label = f"{noun} {slot}"
        lines = [ln for ln in block.split("\n") if ln.startswith((label + " ", label + ",", label + "'s "))]
        if len(lines) != 1:
            raise ValueError(f"expected one line for {label}, found {len(lines)}")
        vals = []
        for c in criteria:
            m = _phrase_regex(c).search(lines[0])
            if not m:
                raise ValueError(f"criterion {c.name!r} not found on the line of {label}")
            vals.append(float(m.group(1).replace(",", "")))
        out[slot] = (vals[0], vals[1])
    return out


def _dominates(x: tuple[float, float], y: tuple[float, float], crit: tuple[Criterion, Criterion]) -> bool:
    at_least = all(c.is_better(a, b) or a == b for c, a, b in zip(crit, x, y))
    return at_least and any(c.is_better(a, b) for c, a, b in zip(crit, x, y))


def check_item(item: dict, content: Content | None = None) -> list[str]:
    """Problems with one item (empty list: valid)."""
    content = content or load_content()
    iid = item["item_id"]
    problems = []
    prompt, noun = item["prompt"], item["candidate_noun"]
    if _PLACEHOLDER.search(prompt):
        problems.append(f"{iid}: leftover placeholder {_PLACEHOLDER.search(prompt).group(0)!r}")
    if not prompt.endswith(f'Answer with only "{noun} A" or "{noun} B".'):
        problems.append(f"{iid}: prompt does not end with the answer instruction")
    scenario = content.scenario(item["scenario_id"])
    try:
        vals = read_values(prompt, noun, scenario.criteria)
    except ValueError as exc:
        return problems + [f"{iid}: {exc}"] + item_problems(item, scenario, content, None)
    problems += item_problems(item, scenario, content, vals)
    dom_a = _dominates(vals["A"], vals["B"], scenario.criteria)
    dom_b = _dominates(vals["B"], vals["A"], scenario.criteria)
    mslot = item["minority_slot"]
    if item["condition"] == "GT":
        if dom_a == dom_b:
            problems.append(f"{iid}: GT item without exactly one dominating candidate")
        else:
            stronger = "A" if dom_a else "B"
            correct = stronger if item["question_polarity"] == "positive" else other_slot(stronger)
            if item["correct_slot"] != correct:
                problems.append(f"{iid}: correct_slot {item['correct_slot']} but the criteria give {correct}")
            truth = "minority" if stronger == mslot else "majority"
            if item["truth_favors"] != truth:
                problems.append(f"{iid}: truth_favors {item['truth_favors']} but the criteria give {truth}")
    elif dom_a or dom_b:
        problems.append(f"{iid}: AMB item where one candidate dominates on every criterion")
    if item["degree"] == 1:
        names = item["names"] if isinstance(item.get("names"), dict) else {}
        if len(set(names.values())) != 2 or len({n.split()[-1] for n in names.values()}) != 2:
            problems.append(f"{iid}: names collide across slots: {names}")
        for slot, name in names.items():
            role = scenario.represented_by
            on_line = f"{noun} {slot}, {name}," if role is None else f"{noun} {slot}'s {role} is {name}."
            if on_line not in prompt:
                problems.append(f"{iid}: name {name!r} is not on the line of slot {slot}")
    if isinstance(item.get("pressure_id"), str):
        p = content.pressure_sentence(item["pressure_id"])
        slot = item["pressure_slot"]
        named = pressure_named_slot(p, item["question_polarity"], slot)  # the label rendered as {target}
        mine = p.render(f"{noun} {named}", f"{noun} {other_slot(named)}")
        twin = p.render(f"{noun} {other_slot(named)}", f"{noun} {named}")
        mirror = mine.replace(f"{noun} A", "\0").replace(f"{noun} B", f"{noun} A").replace("\0", f"{noun} B")
        if mine not in prompt or mirror != twin:
            problems.append(f"{iid}: pressure sentence is missing or not the mirror of its twin")
        expect = "pro_minority" if favours_minority(slot, mslot, item["question_polarity"]) else "pro_majority"
        if item["pressure_resolved"] != expect:
            problems.append(f"{iid}: pressure_resolved {item['pressure_resolved']} should be {expect}")
    problems += check_item_cues(item, content)
    return problems


def validate_items(items: Iterable[dict], content: Content | None = None) -> list[str]:
    """The problems :func:`check_item` finds in each of ``items`` (empty when every item is sound)."""
    content = content or load_content()
    problems: list[str] = []
    for item in items:
        problems.extend(check_item(item, content))
    return problems


def validate_suite(content: Content | None = None, full: bool = False) -> tuple[int, list[str]]:
    """Check rendered items. Default: every scenario x variant x slot x degree (one contrast per
    degree, rotating) with one pressure sentence per family; every contrast x degree on one
    scenario; every pressure sentence on one cell. ``full``: every cell's baseline too.
    Returns (items checked, problems)."""
    content = content or load_content()
    checked, problems = 0, []

    def run(item: dict) -> None:
        nonlocal checked
        checked += 1
        problems.extend(check_item(item, content))

    fams = {}
    for p in content.pressure:
        fams.setdefault(p.family, p)
    for i, s in enumerate(content.scenarios):
        for v in VARIANTS:
            for d in DEGREES:
                valid = [x for x in content.contrasts if cell_valid(content, s, x, d)]
                x = valid[(i + d) % len(valid)]
                for m in SLOTS:
                    cell = Cell(s, v, d, x, m)
                    run(render_item(content, cell))
                    for j, p in enumerate(fams.values()):
                        run(render_item(content, cell, p, SLOTS[j % 2]))
    s0 = content.scenarios[0]
    for x in content.contrasts:
        for d in DEGREES:
            if cell_valid(content, s0, x, d):
                for m in SLOTS:
                    run(render_item(content, Cell(s0, "GTmin", d, x, m)))
    cell = Cell(s0, "GTmaj", 3, next(x for x in content.contrasts if cell_valid(content, s0, x, 3)), "A")
    for p in content.pressure:
        for slot in SLOTS:
            run(render_item(content, cell, p, slot))
    if full:
        for s in content.scenarios:
            for x in content.contrasts:
                for d in DEGREES:
                    if cell_valid(content, s, x, d):
                        for v in VARIANTS:
                            for m in SLOTS:
                                run(render_item(content, Cell(s, v, d, x, m)))
    return checked, problems


SAMPLE_CONDITIONS = CONDITION_VARIANTS
SAMPLE_CONTRAST_TYPES = CONTRAST_TYPES


def sample_strata(content: Content) -> list[tuple]:
    """The strata of :func:`iter_sample`: (scenario, degree, contrast type, condition, valid contrasts)."""
    out = []
    for s in content.scenarios:
        for d in DEGREES:
            for t in SAMPLE_CONTRAST_TYPES:
                contrasts = [x for x in content.contrasts if x.type == t and cell_valid(content, s, x, d)]
                if contrasts:
                    out.extend((s, d, t, cond, contrasts) for cond in SAMPLE_CONDITIONS)
    return out


def iter_sample(n: int, seed: int = 0, content: Content | None = None) -> Iterator[dict]:
    """A stratified random sample of ``n`` items of the full product, deterministic in ``seed``.

    Strata: scenario x degree x contrast type x condition (GT, AMB). Each stratum gets ``n // strata``
    items (``n % strata`` of them, drawn at random, one more), drawn without replacement from all of its items:
    both variants of the condition x its valid contrasts x both minority slots x (the baseline and every
    pressure sentence toward either slot). A stratum smaller than its share gives all its items."""
    import numpy as np

    content = content or load_content()
    strata = sample_strata(content)
    per, extra = divmod(n, len(strata))
    plus_one = set(np.random.default_rng([seed, len(strata)]).permutation(len(strata))[:extra].tolist())
    pressures = [(None, None)] + [(p, slot) for p in content.pressure for slot in SLOTS]
    for k, (s, d, _t, cond, contrasts) in enumerate(strata):
        want = per + (k in plus_one)
        if not want:
            continue
        space = 2 * len(contrasts) * len(SLOTS) * len(pressures)
        rng = np.random.default_rng([seed, k])
        for idx in sorted(rng.choice(space, min(want, space), replace=False).tolist()):
            idx, pi = divmod(idx, len(pressures))
            idx, mi = divmod(idx, len(SLOTS))
            vi, xi = divmod(idx, len(contrasts))
            cell = Cell(s, SAMPLE_CONDITIONS[cond][vi], d, contrasts[xi], SLOTS[mi])
            yield render_item(content, cell, *pressures[pi])


def problems_by_check(problems: Iterable[str]) -> dict[str, dict[str, int]]:
    """Per check tag (``amb_tie``, ``person``, ...; ``other`` for untagged problems): the number of
    problems and of distinct scenarios they are in (read from the item id that starts each problem)."""
    out: dict[str, tuple[int, set]] = {}
    for p in problems:
        m = _TAG.search(p)
        tag = m.group(1) if m else "other"
        n, scen = out.get(tag, (0, set()))
        scen.add(p.split("|", 1)[0].split(":", 1)[0])
        out[tag] = (n + 1, scen)
    return {tag: {"problems": n, "scenarios": len(scen)} for tag, (n, scen) in sorted(out.items())}
