"""The comparison's split: which scenarios and contrasts it fits, selects and reports on, and how a
swept setting is chosen.

Scenarios (:func:`scenario_plan`): the organism's split gives train and held-out scenarios. The held-out
evaluation set, the validation set and the fitting set are each drawn *stratified across domains*
(:func:`stratified`: round robin over domains in a seeded order, so ``n`` scenarios cover
``min(n, domains)`` domains), validation and fitting from the train scenarios and disjoint, evaluation
from the held-out ones. Each chosen scenario gets ``contrasts`` type-1 contrasts per degree from a
seeded cycle over the contrasts valid at that degree (:func:`assign_contrasts`), so every contrast is
used as evenly as the count allows.
"""
from __future__ import annotations

import random
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from evenhand.scoring.metrics import COMPONENTS, FAIR, metric_values
from evenhand.rows.schema import ensure_valid


def stratified(ids: Sequence[str], domain_of: Mapping[str, str], n: int, seed: int) -> list[str]:
    """``n`` of ``ids`` (all when ``n`` is larger) taken round robin over their domains: domains in a
    seeded order, scenarios within a domain in a seeded order; returned in the order of ``ids``."""
    rng = random.Random(f"stratified-{seed}")
    groups: dict[str, list[str]] = {}
    for i in ids:
        groups.setdefault(domain_of[i], []).append(i)
    order = sorted(groups)
    rng.shuffle(order)
    queues = []
    for d in order:
        members = list(groups[d])
        rng.shuffle(members)
        queues.append(members)
    picked: list[str] = []
    while len(picked) < min(n, len(ids)):
        for q in queues:
            if q and len(picked) < n:
                picked.append(q.pop(0))
    keep = set(picked)
    return [i for i in ids if i in keep]


def assign_contrasts(scenarios: Sequence[str], pools: Mapping[int, Sequence[str]], k: int,
                     seed: int) -> dict[tuple[str, int], list[str]]:
    """For each scenario and degree, ``k`` distinct contrasts from a seeded cycle over the degree's pool
    (``pools``: degree -> valid contrast ids), so the counts of the contrasts differ by at most one."""
    out: dict[tuple[str, int], list[str]] = {}
    for d, pool in pools.items():
        if not pool:
            continue
        rng = random.Random(f"contrasts-{seed}-{d}")
        cycle = list(pool)
        rng.shuffle(cycle)
        kk = min(k, len(cycle))
        pos = 0
        for s in scenarios:
            chosen = []
            while len(chosen) < kk:
                c = cycle[pos % len(cycle)]
                pos += 1
                if c not in chosen:
                    chosen.append(c)
            out[(s, d)] = chosen
    return out


@dataclass(frozen=True)
class ScenarioPlan:
    """The scenario ids of each role (disjoint) and the contrasts of the evaluation sets."""
    fitting: list[str]
    validation: list[str]
    heldout: list[str]
    heldout_pool: int
    """Held-out scenarios available (the evaluation takes at most this many)."""


def scenario_plan(train_ids: Sequence[str], held_ids: Sequence[str], domain_of: Mapping[str, str],
                  n_fit: int, n_validation: int, n_eval: int, seed: int) -> ScenarioPlan:
    """Stratified, disjoint fitting / validation (from ``train_ids``) and evaluation (from ``held_ids``)."""
    if set(train_ids) & set(held_ids):
        raise ValueError("train and held-out scenarios overlap")
    validation = stratified(train_ids, domain_of, n_validation, seed + 1) if n_validation else []
    rest = [i for i in train_ids if i not in set(validation)]
    fitting = stratified(rest, domain_of, n_fit, seed + 2)
    heldout = stratified(held_ids, domain_of, n_eval, seed)
    return ScenarioPlan(fitting, validation, heldout, len(held_ids))


# Every activation and learned method is swept in experiments/configs/compare_interventions.yaml over its layer option
# and, where it has one, its strength (organism layers 0-2; 37 settings, 1,824 validation items each). The layer axis
# is a fit option (one fit per value), the strength axis an apply option (one fit reused):
#
#   method   layer axis                              strength axis                                         grid
#   caa      layers 0, 1, 2                          alpha 1, 4, 8 (the vector's multiple)                    9
#   ace      layers all, 0, 1, 2                     strength 0.5, 1 (1 sets the component to the mean)       8
#   leace    layers all, 0, 1, 2 (fitted in order,   strength 0.5, 1 (partial erasure, `Affine`)              8
#            each on upstream-erased activations)
#   loreft   layer 0, 1, 2                           none: LoReFT has no strength, its edit is as large as    3
#                                                    training makes it
#   reft_r1  layer 0, 1, 2                           alpha null (the fit's steering factor, the mean top-k    9
#                                                    latent), 2, 8
#
# A learned method's validation runs use its first seed; its other seeds are fitted at the chosen setting only.
# tests/test_selection.py checks, for each of the five, a planted case where the held-out best differs from the
# validation best (the validation best within the bounds is chosen, the selection scores validation responses only,
# and the table names it), the rule's bounds, and that the config sweeps every method.
@dataclass(frozen=True)
class SelectRule:
    """How a swept arm's setting is chosen on the validation split.

    Among the settings whose accuracy loss (GT items without pressure, a refusal counted wrong) is at most
    ``max_accuracy_loss`` and whose refusal rate rises by at most ``max_refusal_rise`` over the
    validation baseline, the one that brings ``metric`` closest to fair: the largest |baseline| -
    |setting| (the signed change toward zero while the sign holds; an overshoot past zero counts
    against). Ties go to the earlier setting in the sweep. When no setting meets the constraints, the one
    with the smallest accuracy loss is chosen and the reason says so."""
    metric: str = "fraggap"
    """The asymmetry metric the selection reduces (FragGap by default)."""
    max_accuracy_loss: float = 0.02
    """The largest accuracy loss (a fraction; 2 pp) a chosen setting may have on validation."""
    max_refusal_rise: float = 0.05
    """The largest rise of the refusal rate (a fraction; 5 pp, the same value as the comparison's
    ``refusal_margin``) a chosen setting may have on validation."""


TOL = 1e-9
"""Rounding slack of the selection's bounds (far below one item in a validation set): a loss of exactly 2 pp (1 item
in 50, ``0.020000000000000018`` in floats) is within them."""


def validation_scores(resp: pd.DataFrame, metric: str) -> dict[str, float]:
    """Point values on a validation run, counted exactly as the held-out table counts them
    (:func:`evenhand.scoring.paired.counted_indicators`: a refusal on a GT item is a wrong answer and a flip):
    ``metric``,
    accuracy (GT items without pressure), refusal rate. (Before, ``metric`` read answered items only, so a setting
    that refused pressured items looked fairer on validation than it would score held out.)"""
    from evenhand.scoring.paired import counted_indicators
    N, D = counted_indicators(ensure_valid(resp))
    n, d = N.sum(0), D.sum(0)
    value = float(metric_values(n, d, metric))
    acc, ref = COMPONENTS.index("acc"), COMPONENTS.index("refusal")
    return {"value": value, "distance": abs(value - FAIR.get(metric, 0.0)),
            "accuracy": float(n[acc] / d[acc]) if d[acc] else float("nan"), "n_accuracy": int(d[acc]),
            "refusal": float(n[ref] / d[ref]) if d[ref] else float("nan")}


def choose(base: Mapping[str, float], settings: Sequence[tuple[dict, Mapping[str, float]]], rule: SelectRule,
           n_validation: int) -> tuple[int, list[dict], str]:
    """(index of the chosen setting, one row per setting, the reason) from validation scores
    (:func:`validation_scores`) of the baseline and of each setting ``(options, scores)``, with the rule of
    :class:`SelectRule`.

    When no setting meets both bounds the one with the smallest accuracy loss is run and its reason (the table's
    ``selection`` column, ``selection.json``) says "no setting met ...". The held-out table names the chosen
    setting three times: the cell (``caa[alpha=4.0,layers=1]-s0``), its ``options`` (JSON) and ``selection`` (the
    setting, then why)."""
    rows = []
    for opts, s in settings:
        rows.append({"setting": dict(opts), "value": s["value"], "reduction": base["distance"] - s["distance"],
                     "accuracy_loss": base["accuracy"] - s["accuracy"], "refusal_rise": s["refusal"] - base["refusal"]})
    for r in rows:  # the bounds hold with TOL: a loss of exactly 2 pp (1 item in 50) is 0.020000000000000018 in floats
        r["eligible"] = bool(r["accuracy_loss"] <= rule.max_accuracy_loss + TOL
                             and r["refusal_rise"] <= rule.max_refusal_rise + TOL and np.isfinite(r["reduction"]))
    eligible = [i for i, r in enumerate(rows) if r["eligible"]]
    if eligible:
        best = max(eligible, key=lambda i: (rows[i]["reduction"], -i))
        why = (f"largest |{rule.metric}| reduction on validation ({100 * rows[best]['reduction']:+.1f} pp) with accuracy "
               f"loss {100 * rows[best]['accuracy_loss']:+.1f} pp <= {100 * rule.max_accuracy_loss:g} pp and refusal "
               f"rise {100 * rows[best]['refusal_rise']:+.1f} pp <= {100 * rule.max_refusal_rise:g} pp")
    else:
        best = min(range(len(rows)), key=lambda i: (rows[i]["accuracy_loss"], -rows[i]["reduction"], i))
        why = (f"no setting met accuracy loss <= {100 * rule.max_accuracy_loss:g} pp and refusal rise <= "
               f"{100 * rule.max_refusal_rise:g} pp on validation; smallest accuracy loss "
               f"({100 * rows[best]['accuracy_loss']:+.1f} pp)")
    for i, r in enumerate(rows):
        r["chosen"] = i == best
    n_acc = int(base.get("n_accuracy") or 0)
    if n_acc and rule.max_accuracy_loss + TOL < 1 / n_acc:  # one item lost already breaks the bound
        note = (f"the accuracy bound {100 * rule.max_accuracy_loss:g} pp is below one of the {n_acc} validation GT "
                f"items without pressure ({100 / n_acc:.2f} pp), so it admits no loss at all: a setting that moves "
                f"answers is kept out by one item; raise validation.scenarios or select.max_accuracy_loss")
        warnings.warn(f"selection: {note}", stacklevel=2)
        why = f"{why}; {note}"
    label = ", ".join(f"{k}={v}" for k, v in sorted(rows[best]["setting"].items()))
    return best, rows, f"{label}: {why}; {n_validation} validation scenarios, {len(rows)} settings"


def select_settings(rule: SelectRule, arms: Sequence, swept: Sequence[int], trials: Sequence[tuple[int, object]],
                    read, n_validation: int) -> dict:
    """The selection of every swept arm from its validation runs: ``trials`` are (arm index, cell) pairs, a
    cell having ``options`` and ``key``; ``read(key)`` returns a validation run's responses (``"baseline"``
    for the validation baseline) and is the only data read. Returns ``{str(arm index): {arm, intervention,
    setting, reason, validation rows}}``.

    Selection follows AxBench's protocol (Wu et al. 2025, "AxBench: Steering LLMs? Even simple baselines
    outperform sparse autoencoders": choose on one split and report on another): an arm with a ``sweep`` runs every
    swept setting (first seed, no control) on the validation items only, and :func:`choose` picks one; the held-out
    comparison then runs only the chosen setting. Held-out items are never decided during selection: the validation
    items are rendered from validation scenario ids only, which are train ids (the split's ``train``)."""
    base = validation_scores(read("baseline"), rule.metric)
    out = {}
    for i in swept:
        arm = arms[i]
        mine = [c for j, c in trials if j == i]
        scored = [({k: c.options[k] for k in arm.sweep}, validation_scores(read(c.key), rule.metric)) for c in mine]
        best, rows, why = choose(base, scored, rule, n_validation)
        out[str(i)] = {"arm": i, "intervention": arm.name, "setting": rows[best]["setting"], "reason": why,
                       "validation": rows}
    return out
