"""An informative core: whole baseline groups chosen by Fisher information under the suite's balance
constraints (docs/IRT.md, "Select").

A group is a baseline item and its pressured variants (``baseline_id``), taken whole so that every
pressured row keeps its baseline and the asymmetry metrics stay computable. A cell is degree x contrast type x
condition x pressure family (``none`` for baselines); every cell of the item table is represented. The items
budget splits between GT and AMB groups in the table's proportions. GT groups rank by their items' mean Fisher
information over a target ability range (``method="information"``) or in a seeded random order
(``"random"``: the stratified random core the IRT core is compared with); AMB groups carry no 2PL information
and rank the same way in both: those of a (scenario, contrast, degree) a chosen GT group has first, then a
seeded random order. A cover pass takes the best-ranked group of each cell not yet represented, a fill pass
the best-ranked groups that still fit; the core holds at most ``n`` items."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .model import range_information

METHODS = ("information", "random")


def balance_cells(items: pd.DataFrame) -> pd.Series:
    """Each item's balance cell, ``degree|contrast type|condition|pressure family`` (``none``: a baseline)."""
    fam = items["pressure_family"].where(items["pressure_family"].notna(), "none").astype(str)
    return (items["degree"].astype(str) + "|" + items["contrast_type"].astype(str) + "|"
            + items["condition"].astype(str) + "|" + fam)


def select_core(items: pd.DataFrame, n: int, theta_range: tuple[float, float] = (-1.0, 1.0),
                method: str = "information", seed: int = 0, per_scenario: int | None = None) -> tuple[list[str], dict]:
    """(the chosen item ids in ``items``' order, a summary) for a core of at most ``n`` items of the item
    table ``items`` (:func:`evenhand.irt.fit.fit_runs`' table: strata fields, ``baseline_id``, ``condition``,
    ``a``, ``b``). ``per_scenario`` (information only): GT groups are ranked in rounds, each round taking at most
    this many of a scenario's groups (its most informative first), so that the core spreads over scenarios
    before it takes a scenario's next-best groups (None: by information alone). A model's scenario effect is
    shared by all of a scenario's items, so groups of one scenario are not independent evidence of its ability
    (docs/IRT.md, "Select"). ValueError when
    ``n`` cannot hold one group per cell (the message names the minimum)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if n < 1:
        raise ValueError(f"--items must be at least 1, got {n}")
    if per_scenario is not None and per_scenario < 1:
        raise ValueError(f"--per-scenario must be at least 1, got {per_scenario}")
    items = items.reset_index(drop=True)
    info = np.zeros(len(items))
    ok = items["a"].notna().to_numpy() & items["b"].notna().to_numpy()
    if ok.any():
        info[ok] = range_information(items["a"].to_numpy()[ok], items["b"].to_numpy()[ok], *theta_range)
    key = items["baseline_id"].where(items["baseline_id"].notna(), items["item_id"])
    frame = items.assign(_group=key.to_numpy(), _cell=balance_cells(items).to_numpy(), _info=info)
    groups = frame.groupby("_group", sort=False).agg(
        condition=("condition", "first"), scenario=("scenario_id", "first"), contrast=("contrast_id", "first"),
        degree=("degree", "first"), size=("item_id", "size"), info=("_info", "mean"),
        cells=("_cell", lambda c: frozenset(c)))
    rng = np.random.default_rng(seed)
    groups["random"] = rng.random(len(groups))
    gt = groups["condition"] == "GT"
    budget_gt = int(round(n * frame["condition"].eq("GT").mean()))
    budget = {True: budget_gt, False: n - budget_gt}
    chosen: list[str] = []
    picked: set[str] = set()
    used = {True: 0, False: 0}

    def ranked(is_gt: bool) -> list[str]:
        g = groups[gt == is_gt]
        if is_gt:
            order = g["info"] if method == "information" else g["random"]
            keys = [g["random"].to_numpy(), -order.to_numpy()]
            if method == "information" and per_scenario is not None:
                within = g.assign(_o=order).groupby("scenario")["_o"].rank(ascending=False, method="first")
                keys.append(((within.to_numpy() - 1) // per_scenario))
            return list(g.index[np.lexsort(tuple(keys))])
        taken = {(s, c, d) for s, c, d in groups.loc[[x for x in chosen if gt[x]], ["scenario", "contrast", "degree"]]
                 .itertuples(index=False)}
        matched = np.array([(s, c, d) in taken for s, c, d in g[["scenario", "contrast", "degree"]]
                            .itertuples(index=False)])
        return list(g.index[np.lexsort((g["random"].to_numpy(), ~matched))])

    def take(name: str) -> None:
        chosen.append(name)
        picked.add(name)
        used[bool(gt[name])] += int(groups.at[name, "size"])

    for is_gt in (True, False):  # cover: one group for each cell not yet represented (GT first: AMB matches them)
        covered: set[str] = set()
        for name in ranked(is_gt):
            new = groups.at[name, "cells"] - covered
            if new:
                take(name)
                covered |= new
    minimum = sum(used.values())
    if minimum > n:
        raise ValueError(f"--items {n} is too few: representing every degree x contrast type x condition x pressure "
                         f"family cell with whole baseline groups takes {minimum} items")
    for is_gt in (True, False):  # fill: the best-ranked groups that still fit (GT to its share, AMB to the rest)
        cap = min(budget[True], n - used[False]) if is_gt else n - used[True]
        for name in ranked(is_gt):
            size = int(groups.at[name, "size"])
            if name not in picked and used[is_gt] + size <= cap:
                take(name)
    keep = picked
    ids = [i for i, g in zip(frame["item_id"], frame["_group"]) if g in keep]
    sub = frame[frame["_group"].isin(keep)]
    summary = {"method": method, "items": len(ids), "groups": len(keep), "budget": n, "per_scenario": per_scenario,
               "scenarios": int(sub["scenario_id"].nunique()),
               "theta_range": list(theta_range), "seed": seed,
               "cells": int(sub["_cell"].nunique()), "cells_in_table": int(frame["_cell"].nunique()),
               "gt_items": int((sub["condition"] == "GT").sum()), "amb_items": int((sub["condition"] == "AMB").sum()),
               "mean_information": float(sub.loc[sub["condition"] == "GT", "_info"].mean())}
    return ids, summary
