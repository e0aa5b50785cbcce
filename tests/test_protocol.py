"""The comparison's split and selection rule (experiments.studies.compare.split): stratified scenario and contrast sets, disjoint
fitting / validation / held-out scenarios, and the selection rule that reads validation runs only."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import pytest

from experiments.studies.compare.split import (SelectRule, assign_contrasts, choose, scenario_plan, select_settings,
                                               stratified)


@pytest.mark.parametrize("seed", range(12))
def test_stratified_sets_cover_domains_and_contrasts(seed):
    """Property: n scenarios cover min(n, domains) domains; k contrasts per scenario cover min(n k, pool)
    contrasts, distinct within a scenario, every contrast used a number of times that differs by at most one."""
    rng = np.random.default_rng(seed)
    n_domains = int(rng.integers(2, 31))
    ids = [f"d{int(rng.integers(n_domains))}.s{i}" for i in range(int(rng.integers(5, 120)))]
    domain_of = {i: i.split(".")[0] for i in ids}
    n = int(rng.integers(1, len(ids) + 5))
    picked = stratified(ids, domain_of, n, seed)
    assert len(picked) == min(n, len(ids)) == len(set(picked)) and set(picked) <= set(ids)
    domains = len(set(domain_of.values()))
    assert len({domain_of[i] for i in picked}) == min(len(picked), domains)
    per_domain = Counter(domain_of[i] for i in picked)
    available = Counter(domain_of.values())
    short = [d for d in available if per_domain[d] < available[d]]  # domains not exhausted are balanced
    assert max(per_domain[d] for d in short) - min(per_domain[d] for d in short) <= 1 if short else True
    pool = [f"c{j}" for j in range(int(rng.integers(1, 27)))]
    k = int(rng.integers(1, 4))
    assigned = assign_contrasts(picked, {3: pool}, k, seed)
    assert all(len(v) == len(set(v)) == min(k, len(pool)) for v in assigned.values())
    uses = Counter(c for v in assigned.values() for c in v)
    assert len(uses) == min(len(picked) * min(k, len(pool)), len(pool))
    assert max(uses.values()) - min(uses.values()) <= 1 if len(uses) == len(pool) else max(uses.values()) == 1


def test_a_stratified_pick_is_not_the_first_n():
    ids = [f"a.s{i}" for i in range(10)] + [f"b.s{i}" for i in range(10)]
    picked = stratified(ids, {i: i.split(".")[0] for i in ids}, 4, seed=0)
    assert Counter(i.split(".")[0] for i in picked) == {"a": 2, "b": 2}


def test_the_default_config_evaluates_the_whole_pool_stratified():
    """The organism comparison: fitting, validation and held-out scenarios disjoint; validation only from
    train ids; the evaluation covers every held-out domain and 26 of 26 type-1 contrasts at degree 3."""
    from organism import split_scenarios
    from experiments.studies.compare import item_sets, load_config
    cfg = load_config("experiments/configs/compare_interventions.yaml")
    sets = item_sets(cfg)
    train_ids, held_ids = split_scenarios(cfg.split_seed, cfg.heldout_fraction)
    fit, val, ev = (set(t["scenario_id"]) for t in (sets.train, sets.validation, sets.heldout))
    assert fit <= set(train_ids) and val <= set(train_ids) and ev <= set(held_ids)
    assert not (fit & val) and not (val & ev) and not (fit & ev)
    assert len(val) == cfg.validation_scenarios and len(ev) == min(cfg.eval_scenarios, sets.heldout_pool) == 70
    assert sets.heldout["domain"].nunique() == 30 and sets.heldout["contrast_id"].nunique() == 26
    assert len(sets.heldout) == 70 * 152 and set(sets.heldout["degree"]) == {3}
    assert sets.validation["domain"].nunique() == 12


def test_validation_exists_for_the_signs_unless_every_sign_is_declared():
    """Without a sweep the validation baseline still decides the alignment signs; only a config that declares
    every asymmetry metric's sign (and sweeps nothing) has no validation items."""
    from evenhand.scoring.metrics import ASYMMETRY
    from experiments.studies.compare import item_sets, parse_config
    raw = {"model": "m", "output_dir": "x", "train": {"scenarios": 2}, "eval": {"scenarios": 3},
           "validation": {"scenarios": 2}, "interventions": [{"name": "fair_instruction"}]}
    sets = item_sets(parse_config(raw))
    assert sets.validation["scenario_id"].nunique() == 2 and sets.heldout["scenario_id"].nunique() == 3
    assert set(sets.validation["scenario_id"]).isdisjoint(sets.heldout["scenario_id"])
    partly = item_sets(parse_config({**raw, "signs": {"fraggap": 1}}))
    assert partly.validation["scenario_id"].nunique() == 2
    declared = item_sets(parse_config({**raw, "signs": {m: 1 for m in ASYMMETRY}}))
    assert declared.validation.empty and declared.heldout["scenario_id"].nunique() == 3


def test_items_come_from_the_models_suite_version(tmp_path):
    """The planted organism (trained on v1) is compared on v1 items, the fair organism (v2) and any other model
    (a Hugging Face id, a local model directory without organism.json) on v2; each organism's held-out
    scenarios are its record's, and a split that would hold out scenarios it trained on is refused."""
    from organism.recipe import split_scenarios
    from interventions.base import InterventionError
    from experiments.studies.compare import item_sets, parse_config
    local = tmp_path / "some-model"
    local.mkdir()
    raw = {"output_dir": "x", "train": {"scenarios": 2, "max_items": 20}, "eval": {"scenarios": 2},
           "validation": {"scenarios": 1}, "interventions": [{"name": "caa", "sweep": {"alpha": [1, 2]}}]}
    models = (("evenhand-organism", "1."), ("evenhand-organism-fair", "2."), ("Qwen/Qwen2.5-7B-Instruct", "2."),
              (str(local), "2."))
    rendered = {model: item_sets(parse_config({**raw, "model": model})) for model, _ in models}
    for model, major in models:
        for t in (rendered[model].train, rendered[model].validation, rendered[model].heldout):
            assert set(t["suite_version"].str[:2]) == {major}, model
    from experiments.studies.compare.study import model_suite
    for model, major in models:
        sets = rendered[model]
        assert sets.suite.startswith(major), model
        suite, record = model_suite(model)
        _, held = split_scenarios(0, 0.2, suite)
        assert set(sets.heldout["scenario_id"]) <= set(held)
        if record is not None:
            assert set(sets.heldout["scenario_id"]) <= set(record["heldout_ids"])
    with pytest.raises(InterventionError, match=r"split: seed 1.*trained on"):
        item_sets(parse_config({**raw, "model": "evenhand-organism", "split": {"seed": 1}}))


def test_scenario_plan_refuses_overlapping_splits():
    with pytest.raises(ValueError, match="overlap"):
        scenario_plan(["a", "b"], ["b", "c"], {"a": "x", "b": "x", "c": "y"}, 1, 1, 1, 0)


BASE = {"value": 0.10, "distance": 0.10, "accuracy": 0.90, "refusal": 0.0}


def s(value, accuracy, refusal=0.0):
    return {"value": value, "distance": abs(value), "accuracy": accuracy, "refusal": refusal}


def test_choose_takes_the_largest_reduction_within_the_accuracy_budget():
    rule = SelectRule(max_accuracy_loss=0.02, max_refusal_rise=0.05)
    settings = [({"alpha": 1}, s(0.06, 0.90)), ({"alpha": 4}, s(0.01, 0.85)), ({"alpha": 2}, s(0.03, 0.89))]
    best, rows, why = choose(BASE, settings, rule, 12)
    assert best == 2 and rows[2]["chosen"] and not rows[1]["eligible"]  # alpha 4 loses 5 pp of accuracy
    assert why.startswith("alpha=2: largest |fraggap| reduction") and "12 validation scenarios" in why


def test_choose_counts_overshoot_against_and_refusals_out():
    rule = SelectRule()
    settings = [({"alpha": 8}, s(-0.15, 0.90)),  # overshoot: further from fair than the baseline
                ({"alpha": 16}, s(0.0, 0.95, refusal=0.8)),  # refuses most items
                ({"alpha": 1}, s(0.08, 0.90))]
    best, rows, _ = choose(BASE, settings, rule, 5)
    assert best == 2 and rows[0]["reduction"] < 0 and not rows[1]["eligible"]


def test_choose_says_when_no_setting_meets_the_constraints():
    settings = [({"alpha": 1}, s(0.0, 0.70)), ({"alpha": 2}, s(0.05, 0.80))]
    best, _, why = choose(BASE, settings, SelectRule(max_accuracy_loss=0.01), 5)
    assert best == 1 and why.startswith("alpha=2: no setting met")


@dataclass
class _Cell:
    key: str
    options: dict


@dataclass
class _Arm:
    name: str
    sweep: dict


def test_selection_reads_only_the_validation_runs(template_rows):
    """select_settings reads the validation baseline and the swept settings' validation runs, nothing else
    (no held-out run, no other arm's run)."""
    read = []

    def reader(key):
        read.append(key)
        return template_rows

    arms = [_Arm("caa", {"alpha": [1, 4]}), _Arm("ace", {})]
    trials = [(0, _Cell("caa[alpha=1]", {"alpha": 1})), (0, _Cell("caa[alpha=4]", {"alpha": 4}))]
    out = select_settings(SelectRule(), arms, [0], trials, reader, 3)
    assert sorted(read) == ["baseline", "caa[alpha=1]", "caa[alpha=4]"]
    assert out["0"]["setting"] == {"alpha": 1} and "3 validation scenarios" in out["0"]["reason"]


@pytest.fixture(scope="module")
def template_rows():
    from organism import ORGANISM_SUITE, split_scenarios
    from evenhand.models.policy import matched_items
    train, _ = split_scenarios(0, 0.2)
    items = matched_items(train[:2], 0, suite=ORGANISM_SUITE)
    items = items[items["degree"] == 3].reset_index(drop=True)
    return items.assign(choice=items["correct_slot"])
