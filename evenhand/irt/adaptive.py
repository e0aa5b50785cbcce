"""Adaptive evaluation of a new model on a fitted item bank (docs/IRT.md, "Adapt"): each step asks the
unanswered GT item of maximum Fisher information at the current MAP ability, scores the answer (1: the correct
slot), updates the grid posterior (normal prior, SD 3 by default), and stops when the posterior SD reaches
``target_se``, the ``budget`` of items is spent, or the bank is exhausted. Selection and posterior use the
discriminations shrunk toward their mean by their bootstrap reliability (:func:`shrunk_discrimination`;
``discrimination="fitted"``: as fitted). Any engine: ``answer(item) -> "A" | "B" | None`` gets
the item's fields (prompt included). With ``state_path`` the state is written (atomically) after every item and
a rerun resumes from it; a state of other settings is refused."""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from ..files.atomic import write_json_atomic
from .model import information, posterior

Answer = Callable[[dict], "str | None"]


@dataclass(frozen=True)
class AdaptiveOptions:
    """When adaptive testing stops and its prior."""
    target_se: float = 0.3
    """Stop once the ability's posterior SD is at most this."""
    budget: int = 50
    """Stop after this many items."""
    prior_sd: float = 3.0
    """SD of the normal prior on the ability (mean 0: the fitted runs' scale). 3, not the fitted population's 1:
    a new model is often outside the fitted population (stronger, a wider spread), where a prior of SD 1 pulls
    its estimate toward the old models' mean and the interval misses (docs/IRT.md, "Adapt")."""
    min_items: int = 0
    """Ask at least this many items before the target SE may stop the test."""
    per_scenario: int | None = None
    """Ask at most this many items of one scenario (None: no limit). A model's scenario effect is shared by all
    of a scenario's items, so several of them are not independent evidence of its ability (docs/IRT.md,
    "Adapt"); needs the bank's ``scenario_id``."""
    discrimination: Literal["shrunk", "fitted"] = "shrunk"
    """Item discriminations used to select items and in the posterior: shrunk (toward the bank's mean by each
    item's bootstrap reliability; needs a_se, a fit with --bootstrap > 0; the default) or fitted (as
    estimated). Maximum information picks the largest estimates, which are on average overestimates: with a
    joint-ML fit, as fitted, the intervals come out too narrow. The marginal-ML fit's prior already shrinks
    them, so shrinking again makes the intervals a little wide (conservative): in the fitted population both
    cover, outside it only shrunk kept >= 0.93 on every population measured (docs/IRT.md, "Adapt")."""

    def __post_init__(self) -> None:
        if not self.target_se > 0:
            raise ValueError(f"target_se must be > 0, got {self.target_se}")
        if self.budget < 1:
            raise ValueError(f"budget must be at least 1, got {self.budget}")
        if self.min_items < 0:
            raise ValueError(f"min_items must be >= 0, got {self.min_items}")
        if self.discrimination not in ("shrunk", "fitted"):
            raise ValueError(f"discrimination must be 'shrunk' or 'fitted', got {self.discrimination!r}")
        if not self.prior_sd > 0:
            raise ValueError(f"prior_sd must be > 0, got {self.prior_sd}")
        if self.per_scenario is not None and self.per_scenario < 1:
            raise ValueError(f"per_scenario must be at least 1, got {self.per_scenario}")


def bank_of(items: pd.DataFrame) -> pd.DataFrame:
    """The adaptive item bank of a fitted item table: its GT items with finite ``a`` and ``b``."""
    ok = items["a"].notna() & items["b"].notna() & (items["condition"] == "GT")
    bank = items[ok].reset_index(drop=True)
    if bank.empty:
        raise ValueError("the item table has no fitted GT item (columns a, b): fit runs first (evenhand irt fit)")
    return bank


def shrunk_discrimination(a, a_se) -> np.ndarray:
    """Empirical-Bayes discriminations: mean(a) + r (a - mean(a)) with each item's reliability
    r = 1 - a_se^2 / var(a) (clipped to [0, 1]; mean and variance over the given items), the expected true
    discrimination given the estimate. Maximum-information selection picks the largest estimates, which are
    the most overestimated on average; shrinking undoes that selection bias (docs/IRT.md, "Adapt")."""
    a, se = np.asarray(a, float), np.asarray(a_se, float)
    if np.isnan(se).any():
        raise ValueError(f"a_se: {int(np.isnan(se).sum())} of {len(se)} bank items have no bootstrap SE of the "
                         f"discrimination; fit with --bootstrap > 0 or use --discrimination fitted")
    r = np.clip(1.0 - se ** 2 / a.var(), 0.0, 1.0) if a.var() > 0 else np.zeros_like(a)
    return a.mean() + r * (a - a.mean())


def adaptive_test(bank: pd.DataFrame, answer: Answer, options: AdaptiveOptions = AdaptiveOptions(),
                  item_for: Callable[[str], dict] | None = None, state_path: str | Path | None = None) -> dict:
    """Run adaptive testing; returns the state: ``options``, ``answered`` (item_id, choice, correct, and the
    ability after it), ``ability`` (:meth:`~evenhand.irt.model.Ability.as_dict`) and ``stopped`` (``target_se``,
    ``budget`` or ``bank``). ``item_for(item_id)`` gives the fields handed to ``answer`` (default: the bank row)."""
    a, b = bank["a"].to_numpy(float), bank["b"].to_numpy(float)
    if options.discrimination == "shrunk":
        if "a_se" not in bank.columns:
            raise ValueError("a_se: the item bank has no bootstrap SE of the discrimination; fit with "
                             "--bootstrap > 0 or use --discrimination fitted")
        a = shrunk_discrimination(a, bank["a_se"].to_numpy(float))
    ids = bank["item_id"].tolist()
    pos = {i: k for k, i in enumerate(ids)}
    if options.per_scenario is not None and "scenario_id" not in bank.columns:
        raise ValueError("scenario_id: the item bank has no scenario_id column, which per_scenario needs")
    scen = pd.factorize(bank["scenario_id"])[0] if options.per_scenario is not None else np.zeros(len(ids), int)
    settings = {"options": asdict(options), "bank": len(ids), "bank_first": ids[0], "bank_last": ids[-1]}
    answered: list[dict] = []
    if state_path is not None and Path(state_path).exists():
        old = json.loads(Path(state_path).read_text())
        if old.get("settings") != settings:
            raise ValueError(f"{state_path} holds adaptive testing of other settings or another item bank; "
                             f"use another output directory")
        answered = old["answered"]
    used = np.zeros(len(ids), bool)
    y = np.full(len(ids), np.nan)
    for r in answered:
        used[pos[r["item_id"]]] = True
        y[pos[r["item_id"]]] = r["correct"]

    def estimate():
        return posterior(y, a, b, prior_sd=options.prior_sd)

    def save(stopped: str | None) -> dict:
        state = {"settings": settings, "answered": answered, "ability": est.as_dict(), "stopped": stopped}
        if state_path is not None:
            write_json_atomic(Path(state_path), state)
        return state

    est = estimate()
    while True:
        n = int(used.sum())
        stopped = ("target_se" if n and n >= options.min_items and est.sd <= options.target_se else "budget" if n >= options.budget
                   else "bank" if used.all() else None)
        if stopped:
            return save(stopped)
        blocked = used.copy()
        if options.per_scenario is not None:
            asked = np.bincount(scen[used], minlength=scen.max() + 1)
            blocked |= asked[scen] >= options.per_scenario
            if blocked.all():
                return save("bank")
        gain = np.where(blocked, -np.inf, information(np.array([est.map]), a, b)[0])
        k = int(np.argmax(gain))
        item = item_for(ids[k]) if item_for is not None else bank.iloc[k].to_dict()
        choice = answer(item)
        correct = int(choice == item["correct_slot"])
        used[k], y[k] = True, correct
        est = estimate()
        answered.append({"item_id": ids[k], "choice": choice, "correct": correct, "theta_map": est.map,
                         "theta_sd": est.sd})
        save(None)
