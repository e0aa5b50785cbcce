"""The items of the dose-response benchmark (:mod:`.study`): fitting items from train
scenarios and evaluation items from held-out scenarios of the organism's suite, at the dial mechanism's
``eval_degree`` (3 for most; ``train_degrees`` may widen the fitting items), each set drawn from a seed (the main
run's, or an independent replication's: :mod:`.replications`)."""
from __future__ import annotations

import pandas as pd
from organism.recipe import record_suite, split_scenarios
from evenhand.models.policy import matched_items
from evenhand.suite.content import load_content
from evenhand.suite.generate import degree_valid
from experiments.studies.compare.split import assign_contrasts, stratified
from experiments.studies.compare.split import scenario_plan
from organism.dials import mechanism_class


def eval_degree(cfg) -> int:
    """The degree the run decides: its dial mechanism's ``eval_degree`` (config field ``mechanism``)."""
    return mechanism_class(cfg.mechanism).eval_degree


def train_degrees(cfg) -> tuple[int, ...]:
    """The degrees of the fitting items: the config's ``train_degrees``, or (empty) the mechanism's eval degree."""
    return tuple(cfg.train_degrees) or (eval_degree(cfg),)


def eval_items(record: dict, n_scenarios: int, contrasts: int, seed: int,
               conditions: tuple[str, ...], degree: int = 3) -> pd.DataFrame:
    """Evaluation items at ``degree`` of ``n_scenarios`` held-out scenarios (domain-stratified, drawn with
    ``seed``): ``contrasts`` type-1 contrasts per scenario from a balanced cycle, names drawn with ``seed``,
    ``conditions`` only."""

    rec, suite = record["recipe"], record_suite(record)
    _, held_ids = split_scenarios(rec["seed"], rec["heldout_fraction"], suite)
    content = load_content(suite)
    heldout = stratified(held_ids, {s.id: s.domain for s in content.scenarios}, n_scenarios, seed)
    pool = [x.id for x in content.contrasts if x.type == "type1" and degree_valid(content, x, degree)]
    ev = matched_items(heldout, seed, suite=suite,
                       contrasts=assign_contrasts(heldout, {degree: pool}, contrasts, seed))
    return ev[ev["condition"].isin(conditions)].reset_index(drop=True)


def item_sets(cfg, record: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(fitting items from train scenarios, evaluation items from held-out scenarios), both domain-stratified
    (:func:`experiments.studies.compare.split.stratified`); the evaluation by :func:`eval_items` with the config's
    seed at the mechanism's :func:`eval_degree`, the fitting items at :func:`train_degrees`."""

    rec, suite = record["recipe"], record_suite(record)
    train_ids, held_ids = split_scenarios(rec["seed"], rec["heldout_fraction"], suite)
    domain_of = {s.id: s.domain for s in load_content(suite).scenarios}
    plan = scenario_plan(train_ids, held_ids, domain_of, cfg.train_scenarios, 0, cfg.eval_scenarios, cfg.seed)
    ev = eval_items(record, cfg.eval_scenarios, cfg.eval_contrasts, cfg.seed, cfg.conditions, eval_degree(cfg))
    if sorted(ev["scenario_id"].unique()) != sorted(plan.heldout):
        raise AssertionError("the evaluation scenarios differ from the plan's held-out ones")
    tr = matched_items(plan.fitting, cfg.seed + 1, suite=suite)
    tr = tr[tr["degree"].isin(train_degrees(cfg))]
    if len(tr) > cfg.train_max_items:
        tr = tr.sample(cfg.train_max_items, random_state=cfg.seed).sort_index()
    return tr.reset_index(drop=True), ev
