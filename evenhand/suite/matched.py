"""Matched evaluation sets (:func:`matched_items`) and the committed organism's held-out set.

A matched set holds, per scenario and degree, whole cells with their baselines and one pressure sentence
of every family toward each slot: what the known-answer checks, the comparison and the dose-response
items are built from. :func:`heldout_items` is the matched set on the scenarios an organism's
``organism.json`` holds out (its ``heldout_ids``), in the suite version it was trained on
(:func:`record_suite`); the ``organism_heldout`` subset is that set for the committed organism
(:data:`ORGANISM_DIR`). The organism's code (training, the dial) is the top-level ``organism`` package.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pandas as pd
from .content import load_content
from .generate import DEGREES, SLOTS, VARIANTS, Cell, cell_valid, render_item

ORGANISM_DIR = Path(__file__).resolve().parents[1] / "models" / "organism"
"""The committed (biased) organism's weights and ``organism.json`` (preset ``evenhand-organism``)."""
ORGANISM_SUITE = "1"
"""The suite version the committed (biased) organism was trained and is evaluated on (its items,
split and vocabulary come from this version's content); the fair organism's recipe names its own."""


def record_suite(record: dict) -> str:
    """The suite version an organism record (its ``organism.json``) was trained on."""
    return str(record.get("recipe", {}).get("suite", ORGANISM_SUITE))


def trained_suite(model: object) -> str | None:
    """The suite version (major) a model was trained on when it is an organism (a loaded model, a spec or a
    path whose directory holds ``organism.json``), else None."""
    import json
    spec = getattr(model, "spec", model)
    path = getattr(spec, "model", spec)
    if not isinstance(path, (str, Path)):
        return None
    record = Path(path) / "organism.json"
    if not record.is_file():
        return None
    from .content import suite_major
    return suite_major(record_suite(json.loads(record.read_text(encoding="utf-8"))))


def suite_mismatch(model: object, items) -> str | None:
    """What is wrong when ``model``, an organism, is given ``items`` of another suite version than it was
    trained on (None when it is no organism or the versions agree); :func:`evenhand.running.decisions.decide`
    states it as a warning."""
    trained = trained_suite(model)
    if trained is None:
        return None
    from .content import ContentError, items_version, suite_major
    try:
        have = items_version(items)
    except ContentError:
        return None  # mixed versions: refused where the rows are scored
    if suite_major(have) == trained:
        return None
    name = getattr(model, "name", None) or str(model)
    return (f"{name} is an organism trained on suite version {trained}, but these items are of suite {have}: its "
            f"answers to a suite it never saw check the plumbing, not its planted policy; to check against that, "
            f"decide its own version's items (eh.suite.items(..., version=\"{trained}\"))")


def pressure_by_family(content) -> dict[str, list]:
    """The suite's pressure sentences grouped by family, in content order."""
    out: dict[str, list] = {}
    for p in content.pressure:
        out.setdefault(p.family, []).append(p)
    return out


def matched_items(scenario_ids: list[str], seed: int = 0, contrast_type: str = "type1",
                  contrasts_per_degree: int = 1, suite: str | None = None,
                  contrasts: Mapping[tuple[str, int], Sequence[str]] | None = None) -> pd.DataFrame:
    """A matched evaluation set for known-answer checks: for each scenario and degree,
    ``contrasts_per_degree`` contrasts of ``contrast_type`` drawn at random (or the contrast ids that
    ``contrasts`` gives for ``(scenario_id, degree)``, e.g. a stratified assignment; a degree it gives
    none for is skipped); for each, all 4 condition variants x both slots (cells); for each cell its
    baseline and one sentence of every pressure family toward each slot. Every pressured item's
    baseline is in the set."""
    import random

    content = load_content(suite)
    scen = {s.id: s for s in content.scenarios}
    rng = random.Random(seed)
    by_family = pressure_by_family(content)
    rows = []
    for sid in scenario_ids:
        for d in DEGREES:
            pool = [x for x in content.contrasts if x.type == contrast_type and cell_valid(content, scen[sid], x, d)]
            if contrasts is None:
                chosen = rng.sample(pool, contrasts_per_degree)
            else:
                by_id = {x.id: x for x in pool}
                bad = [c for c in contrasts.get((sid, d), ()) if c not in by_id]
                if bad:
                    raise ValueError(f"{sid} at degree {d}: no {contrast_type} contrast {bad[0]!r} valid there")
                chosen = [by_id[c] for c in contrasts.get((sid, d), ())]
            for x in chosen:
                sentences = [rng.choice(by_family[f]) for f in content.families]
                for v in VARIANTS:
                    for m in SLOTS:
                        cell = Cell(scen[sid], v, d, x, m)
                        rows.append(render_item(content, cell))
                        for p in sentences:
                            for slot in SLOTS:
                                rows.append(render_item(content, cell, p, slot))
    return pd.DataFrame(rows)


def heldout_items(record: dict, n_scenarios: int | None = None, degrees: Iterable[int] | None = None,
                  seed: int = 0) -> pd.DataFrame:
    """The matched evaluation set on the organism's held-out scenarios (see :func:`matched_items`), in
    the suite version the organism was trained on (:func:`record_suite`)."""
    held = record["heldout_ids"][:n_scenarios] if n_scenarios else record["heldout_ids"]
    items = matched_items(held, seed, suite=record_suite(record))
    if degrees is not None:
        items = items[items["degree"].isin(list(degrees))].reset_index(drop=True)
    return items
