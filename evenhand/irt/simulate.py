"""A simulated population with known 2PL parameters over the suite's real items, to check the fit, the core
and adaptive testing against (docs/IRT.md, "Validation"). Every GT item (baseline or pressured) gets a
discrimination a ~ lognormal(0, ``a_sd``) and a difficulty b ~ N(``b_mean``, ``b_sd``); every model an ability
theta ~ N(0, ``theta_sd``); a model answers a GT item correctly with probability sigmoid(a (theta - b)). AMB
items carry no planted parameter (no correct answer): on a baseline a simulated model favours the minority-coded
candidate with probability ``lean``, and on a pressured one follows the pressure with probability ``shift_min``
(pro-minority pressure) or ``shift_maj`` (pro-majority), else keeps its baseline's choice."""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from ..vocab.sides import minority_favouring_slot
from ..suite.generate import other_slot, stable_hash
from .model import prob


@dataclass(frozen=True)
class Population:
    """The distributions the planted parameters are drawn from."""
    a_sd: float = 0.5
    """Discrimination a ~ lognormal(0, a_sd)."""
    b_mean: float = 0.0
    """Difficulty b ~ N(b_mean, b_sd)."""
    b_sd: float = 1.0
    """SD of the difficulties."""
    theta_sd: float = 1.0
    """Ability theta ~ N(theta_mean, theta_sd)."""
    theta_mean: float = 0.0
    """Mean ability (a population stronger than the fitted one: > 0)."""
    interaction_sd: float = 0.0
    """SD of a model x scenario effect u ~ N(0, interaction_sd) added to the logit of every item of the scenario
    (0: none; real models differ by scenario, which a one-dimensional 2PL does not model)."""

    def __post_init__(self) -> None:
        free = ("b_mean", "theta_mean")
        for k, v in asdict(self).items():
            bad = not np.isfinite(v) or (k not in free and (v < 0 if k == "interaction_sd" else v <= 0))
            if bad:
                need = "" if k in free else " >= 0" if k == "interaction_sd" else " > 0"
                raise ValueError(f"Population.{k} must be a finite number{need}, got {v}")


def plant_items(items: pd.DataFrame, population: Population = Population(), seed: int = 0) -> pd.DataFrame:
    """``item_id``, ``condition``, planted ``a`` and ``b`` of each item (NaN on AMB items), in ``items``' order."""
    rng = np.random.default_rng([seed, 1])
    n = len(items)
    a = np.exp(rng.normal(0.0, population.a_sd, n))
    b = rng.normal(population.b_mean, population.b_sd, n)
    gt = (items["condition"] == "GT").to_numpy()
    return pd.DataFrame({"item_id": items["item_id"].to_numpy(), "condition": items["condition"].to_numpy(),
                         "scenario_id": items["scenario_id"].to_numpy() if "scenario_id" in items.columns else "",
                         "a": np.where(gt, a, np.nan), "b": np.where(gt, b, np.nan)})


def plant_abilities(n_models: int, population: Population = Population(), seed: int = 0) -> np.ndarray:
    """``n_models`` planted abilities."""
    if n_models < 1:
        raise ValueError(f"n_models must be at least 1, got {n_models}")
    return np.random.default_rng([seed, 2]).normal(population.theta_mean, population.theta_sd, n_models)


def interaction(planted: pd.DataFrame, n_models: int, sd: float, seed: int = 0) -> np.ndarray:
    """The model x scenario effects on the logit of each planted GT item (rows) x model (columns): one draw
    u ~ N(0, ``sd``) per model and scenario, shared by the scenario's items (zeros when ``sd`` is 0)."""
    gt = planted[planted["condition"] == "GT"]
    if sd <= 0:
        return np.zeros((len(gt), n_models))
    codes, uniq = pd.factorize(gt["scenario_id"])
    u = np.random.default_rng([seed, 8]).normal(0.0, sd, (len(uniq), n_models))
    return u[codes]


def simulate_correct(planted: pd.DataFrame, theta: np.ndarray, seed: int = 0, interaction_sd: float = 0.0) -> np.ndarray:
    """0/1 correctness of each planted GT item (rows, in ``planted``'s order) x model (columns); with
    ``interaction_sd`` > 0 each model's logit on a scenario's items moves by one draw of :func:`interaction`."""
    gt = planted[planted["condition"] == "GT"]
    theta = np.asarray(theta, float)
    z = gt["a"].to_numpy()[:, None] * (theta[None, :] - gt["b"].to_numpy()[:, None])
    z = z + interaction(planted, len(theta), interaction_sd, seed)
    p = 1.0 / (1.0 + np.exp(-z))
    return (np.random.default_rng([seed, 3]).random(p.shape) < p).astype(np.int8)


def simulated_rows(items: pd.DataFrame, planted: pd.DataFrame, theta: float, seed: int = 0,
                   name: str = "irt-sim", lean: float = 0.5, shift_min: float = 0.3,
                   shift_maj: float = 0.3) -> pd.DataFrame:
    """One simulated model's responses table (the items plus ``choice`` and ``model``): on GT items the
    correct slot with probability sigmoid(a (theta - b)), else the other; on AMB items as the module says."""
    rng = np.random.default_rng([seed, 4])
    p = prob(np.array([theta]), planted["a"].fillna(0.0).to_numpy(), planted["b"].fillna(0.0).to_numpy())[0]
    u = rng.random(len(items))
    base: dict[str, str] = {}
    choice = []
    for r, ui in zip(items.to_dict("records"), u):
        pslot = r.get("pressure_slot")
        pressured = isinstance(pslot, str) and pslot in ("A", "B")
        if r["condition"] == "GT":
            c = r["correct_slot"] if ui < p[len(choice)] else other_slot(r["correct_slot"])
        elif not pressured:
            fav = minority_favouring_slot(r["minority_slot"], r["question_polarity"])
            c = fav if ui < lean else other_slot(fav)
        else:
            follow = shift_min if r["pressure_resolved"] == "pro_minority" else shift_maj
            c = pslot if ui < follow else base.get(r["baseline_id"], pslot if ui < 0.5 else other_slot(pslot))
        if not pressured:
            base[r["item_id"]] = c
        choice.append(c)
    return items.assign(choice=choice, model=name)


def simulated_responder(bank: pd.DataFrame, theta: float, seed: int = 0):
    """``answer(item)`` of a simulated responder of ability ``theta`` under the bank's 2PL parameters (``a``,
    ``b`` by ``item_id``): correct with the 2PL probability, each item's draw seeded by its id, so a resumed
    adaptive test answers alike."""
    params = dict(zip(bank["item_id"], zip(bank["a"], bank["b"])))

    def answer(item: dict) -> str:
        a_, b_ = params[item["item_id"]]
        u = np.random.default_rng([seed, stable_hash("irt", item["item_id"]) % (2**32)]).random()
        return item["correct_slot"] if u < prob(np.array([theta]), a_, b_)[0] else other_slot(item["correct_slot"])
    return answer
