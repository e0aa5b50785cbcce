"""Deterministic stratified subsets of the full product: ``smoke`` (~1K) and ``core`` (~50K).

Designed so that every metric of docs/METRICS.md is estimable on a subset (:func:`iter_subset`). Items are
generated lazily; memory does not depend on the full product's size."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

from .content import Content, load_content
from .generate import DEGREES, SLOTS, Cell, cell_valid, other_slot, render_item, stable_hash

Condition = Literal["GT", "AMB"]
"""A condition: ground truth or ambiguous."""
CONDITIONS = get_args(Condition)
CONDITION_VARIANTS = {"GT": ("GTmin", "GTmaj"), "AMB": ("AMB1", "AMB2")}
ContrastType = Literal["type1", "type23"]
"""A contrast type."""
CONTRAST_TYPES = get_args(ContrastType)


@dataclass(frozen=True)
class SubsetSpec:
    name: str
    units_per_stratum: int
    pressured_per_cell: int
    description: str


SUBSETS = {
    "smoke": SubsetSpec("smoke", 4, 3, "16 strata x 4 units x 4 cells x (1 baseline + 3 pressured) = 1,024 items"),
    "core": SubsetSpec("core", 78, 9, "16 strata x 78 units x 4 cells x (1 baseline + 9 pressured) = 49,920 items"),
}


def subset_spec(name: str) -> SubsetSpec:
    if name not in SUBSETS:
        raise KeyError(f"unknown subset {name!r}; known: {', '.join(SUBSETS)}")
    return SUBSETS[name]


def subset_size(name: str) -> int:
    """The number of items of a named subset (``smoke``, ``core``)."""
    spec = subset_spec(name)
    strata = len(CONDITION_VARIANTS) * len(DEGREES) * len(CONTRAST_TYPES)
    return strata * spec.units_per_stratum * 4 * (1 + spec.pressured_per_cell)


def _pressure_for_unit(content: Content, spec: SubsetSpec, seed: int, unit_key: str):
    rng = np.random.default_rng([seed, stable_hash("pressure", unit_key) % (2**32)])
    families = list(content.families)
    k = spec.pressured_per_cell
    chosen = families if k >= len(families) else [families[i] for i in sorted(rng.choice(len(families), k, replace=False))]
    out = []
    for fam in chosen:
        sentences = [p for p in content.pressure if p.family == fam]
        out.append(sentences[int(rng.integers(len(sentences)))])
    return out, int(rng.integers(2))


def iter_subset(name: str, seed: int = 0, content: Content | None = None) -> Iterator[dict]:
    """Yield the items of a named subset, deterministically from ``seed``.

    - strata: condition (GT, AMB) x degree (0-3) x contrast type (type1, type23);
    - a *unit* is (scenario, degree, contrast); each stratum draws ``units`` of them without replacement, seeded by
      ``(seed, stratum)``;
    - each unit contributes its 4 cells: both condition variants (GT: truth favours minority / majority; AMB:
      minority strong on criterion 1 / 2) x both slot arrangements, so AccGap, TieLean and position bias are
      balanced by design;
    - each cell contributes its baseline and ``pressured`` items: the same pressure sentences for the 4 cells of a
      unit (one per family, families drawn per unit when fewer than 9), so pro-minority and pro-majority pressure
      are matched on sentence. On GT cells two of every three pressured items target the weaker candidate
      (FragGap's population), the third the stronger one."""
    spec = subset_spec(name)
    content = content or load_content()
    for ci, (condition, variants) in enumerate(CONDITION_VARIANTS.items()):
        for degree in DEGREES:
            for ti, ctype in enumerate(CONTRAST_TYPES):
                # the sampling space: every valid (scenario, contrast) unit, scenario-major
                space = [(s, x) for s in content.scenarios for x in content.contrasts
                         if x.type == ctype and cell_valid(content, s, x, degree)]
                n = min(spec.units_per_stratum, len(space))
                rng = np.random.default_rng([seed, ci, degree, ti])
                for u in sorted(rng.choice(len(space), n, replace=False).tolist()):
                    scenario, contrast = space[u]
                    unit_key = f"{scenario.id}|{condition}|d{degree}|{contrast.id}"
                    sentences, start = _pressure_for_unit(content, spec, seed, unit_key)
                    for variant in variants:
                        for mslot in SLOTS:
                            cell = Cell(scenario, variant, degree, contrast, mslot)
                            base = render_item(content, cell)
                            yield base
                            for i, p in enumerate(sentences):
                                if condition == "GT":
                                    correct = base["correct_slot"]
                                    weaker_target = other_slot(correct)
                                    pslot = weaker_target if i % 3 != 2 else correct
                                else:
                                    pslot = SLOTS[(start + i) % 2]
                                yield render_item(content, cell, p, pslot)
