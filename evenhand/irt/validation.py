"""Known-answer validation on a simulated population (:mod:`.simulate`; docs/IRT.md, "Validation"): the fitted
parameters against the planted ones, the IRT core's ranking of held-out models against a stratified random
core's of the same size, and the coverage of adaptive ability intervals. ``benchmarks/bench_irt.py`` prints
the table; the tests run smaller versions."""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

from ..suite.generate import other_slot
from .adaptive import AdaptiveOptions, adaptive_test, bank_of
from .fit import fit_2pl
from .model import abilities
from .select import select_core
from .simulate import Population, plant_abilities, plant_items, simulate_correct, simulated_rows


def fitted_on_population(items: pd.DataFrame, n_models: int, population: Population = Population(), seed: int = 0,
                         bootstrap: int = 0, method: str = "mml") -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the item table fitted on ``n_models`` simulated models' GT responses, with ``a_true``/``b_true``; the
    planted items). The fit is :func:`evenhand.irt.fit.fit_2pl` (``method``) on the simulated matrix."""
    planted = plant_items(items, population, seed)
    Y = simulate_correct(planted, plant_abilities(n_models, population, seed + 1), seed + 2, population.interaction_sd)
    gt = (items["condition"] == "GT").to_numpy()
    params = fit_2pl(Y, bootstrap, seed, method)
    table = items.copy()
    for c in params.columns:
        col = np.full(len(items), np.nan if params[c].dtype.kind == "f" else False, dtype=params[c].dtype)
        col[gt] = params[c].to_numpy()
        table[c] = col
    table["a_true"], table["b_true"] = planted["a"].to_numpy(), planted["b"].to_numpy()
    return table, planted


def recovery(table: pd.DataFrame) -> dict:
    """Over the estimable items: Pearson correlations of fitted with planted ``a`` and ``b``, the share of
    discriminations at a bound of the fit (``at_bound``), the median ratio fitted / planted a (1: unbiased
    scale; JML's inflation shows here) and the mean error of b."""
    ok = table["estimable"].astype(bool) & table["a"].notna()
    t = table[ok]
    return {"items": int(ok.sum()), "r_a": float(np.corrcoef(t["a"], t["a_true"])[0, 1]),
            "r_b": float(np.corrcoef(t["b"], t["b_true"])[0, 1]),
            "at_bound": float(t["at_bound"].astype(bool).mean()) if "at_bound" in t.columns else float("nan"),
            "a_ratio": float(np.median(t["a"] / t["a_true"])), "b_bias": float(np.mean(t["b"] - t["b_true"]))}


def core_abilities(table: pd.DataFrame, ids: list[str], Y: np.ndarray) -> np.ndarray:
    """EAP abilities of the models (columns of ``Y``, the GT items x models responses) from the core ``ids``'
    GT items alone, under the fitted parameters."""
    gt = table[table["condition"] == "GT"].reset_index(drop=True)
    keep = gt["item_id"].isin(set(ids)).to_numpy() & gt["a"].notna().to_numpy()
    return np.array([x.eap for x in abilities(Y[keep], gt["a"].to_numpy()[keep], gt["b"].to_numpy()[keep])])


def compare_cores(table: pd.DataFrame, planted: pd.DataFrame, n_items: int, n_test: int, replications: int,
                  theta_range: tuple[float, float] = (-1.0, 1.0), population: Population = Population(),
                  seed: int = 0, champion: str = "information", per_scenario: int | None = None) -> pd.DataFrame:
    """Per replication: the Spearman correlation with planted abilities of ``n_test`` fresh simulated models
    ranked by the core ``champion`` chooses (``information``: the IRT core; ``random`` shows the check failing)
    and by the stratified random core of the same size (a new seed each replication), and the RMSE of their
    EAP abilities against the planted ones on the fitted scale (``irt_rmse``, ``random_rmse``; :func:`linking`).
    Both score the same responses; ``population.interaction_sd`` > 0 adds model x scenario effects to them, and
    ``per_scenario`` caps the champion's GT groups per scenario (:func:`select_core`)."""
    ids, _ = select_core(table, n_items, theta_range, champion, seed, per_scenario)
    A, B = linking(table)
    rows = []
    for r in range(replications):
        other, _ = select_core(table, n_items, theta_range, "random", seed + 1000 + r)
        theta = plant_abilities(n_test, population, seed + 100 + r)
        Y = simulate_correct(planted, theta, seed + 200 + r, population.interaction_sd)
        est = {k: core_abilities(table, c, Y) for k, c in (("irt", ids), ("random", other))}
        rows.append({"replication": r, **{k: float(pd.Series(e).corr(pd.Series(theta), method="spearman"))
                                          for k, e in est.items()},
                     **{f"{k}_rmse": float(np.sqrt(np.mean((e - A * theta - B) ** 2))) for k, e in est.items()}})
    out = pd.DataFrame(rows)
    return out.assign(gain=out["irt"] - out["random"])


def core_wins(result: pd.DataFrame, share: float = 0.8) -> bool:
    """The check the validation applies: the IRT core ranks better on average and in at least ``share`` of the
    replications (a core chosen at random in its place wins about half: the check fails)."""
    return bool(result["gain"].mean() > 0 and (result["gain"] > 0).mean() >= share)


def linking(table: pd.DataFrame) -> tuple[float, float]:
    """(A, B) with theta on the fitted scale = A theta_planted + B: mean-sigma linking on the difficulties of the
    fitted items (a 2PL scale is identified only up to such a map; JML fixes it by standardising the fitted
    runs' estimated abilities, which are noisy, so it is not the planted scale). With bootstrap SEs (``b_se``)
    the fitted difficulties' variance is first corrected for their estimation noise, var(b) - mean(b_se^2):
    uncorrected, the noise inflates A (by 3% on the 300-model smoke fit)."""
    ok = table["b"].notna() & table["b_true"].notna()
    fit, true = table.loc[ok, "b"].to_numpy(float), table.loc[ok, "b_true"].to_numpy(float)
    var = fit.var()
    if "b_se" in table.columns and table.loc[ok, "b_se"].notna().all():
        var = max(var - float(np.mean(table.loc[ok, "b_se"].to_numpy(float) ** 2)), 0.25 * var)
    A = float(np.sqrt(var) / true.std())
    return A, float(fit.mean() - A * true.mean())


def adaptive_coverage(table: pd.DataFrame, n_models: int, options: AdaptiveOptions = AdaptiveOptions(),
                      population: Population = Population(), seed: int = 0) -> dict:
    """Adaptive testing of ``n_models`` fresh simulated models on the fitted bank (answers drawn from the
    planted parameters): how often the 95% posterior interval covers the planted ability (mapped onto the fitted
    scale, :func:`linking`), mean items, and the ability estimates' correlation with the planted ones."""
    bank = bank_of(table)
    truth = dict(zip(table["item_id"], zip(table["a_true"], table["b_true"])))
    theta = plant_abilities(n_models, population, seed + 300)
    rng = np.random.default_rng([seed, 5])
    A, B = linking(table)
    covered, n_items, est, errors = 0, [], [], []
    for t in theta:
        effect: dict = {}  # this model's scenario effects (population.interaction_sd), drawn when first met

        def answer(item: dict, t=t, effect=effect) -> str:
            a, b = truth[item["item_id"]]
            s = item.get("scenario_id")
            if s not in effect:
                effect[s] = rng.normal(0.0, population.interaction_sd) if population.interaction_sd > 0 else 0.0
            p = 1.0 / (1.0 + np.exp(-(a * (t - b) + effect[s])))
            return item["correct_slot"] if rng.random() < p else other_slot(item["correct_slot"])
        ab = adaptive_test(bank, answer, options)["ability"]
        covered += ab["theta_lo"] <= A * t + B <= ab["theta_hi"]
        n_items.append(ab["n_items"])
        est.append(ab["theta_map"])
        errors.append(ab["theta_eap"] - (A * t + B))
    return {"models": n_models, "coverage": covered / n_models, "mean_items": float(np.mean(n_items)),
            "max_items": int(np.max(n_items)), "r_theta": float(np.corrcoef(est, theta)[0, 1]),
            "bias": float(np.mean(errors))}


def timed(fn, *args, **kwargs):
    """(fn's result, seconds)."""
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def metric_agreement(items: pd.DataFrame, table: pd.DataFrame, planted: pd.DataFrame, n_models: int, n_items: int,
                     theta_range: tuple[float, float] = (-1.0, 1.0), population: Population = Population(),
                     seed: int = 0, metrics: tuple[str, ...] = ("accuracy", "accgap", "tielean", "fraggap",
                                                                 "tieshift")) -> pd.DataFrame:
    """What a smaller core costs the headline metrics: ``n_models`` fresh simulated models (abilities from the
    population; a tie lean ~ U(0.4, 0.7) and a shift under pro-minority pressure ~ U(0.2, 0.5), 0.3 under
    pro-majority) scored on the full item set, the IRT core and a stratified random core of ``n_items``
    (type1 rows, degrees pooled). Per subset and metric: the Spearman correlation across models with the
    full set's values and with the planted per-model quantity (accuracy: ability; tielean: lean; tieshift:
    the shift gap; none planted for accgap and fraggap, which are 0 for every model), and the mean CI width."""
    from ..scoring.metrics import compute_metrics  # deferred: the scorer is only needed here
    rng = np.random.default_rng([seed, 6])
    theta = plant_abilities(n_models, population, seed + 400)
    lean, shift = rng.uniform(0.4, 0.7, n_models), rng.uniform(0.2, 0.5, n_models)
    subsets = {"full": list(items["item_id"]),
               "irt core": select_core(table, n_items, theta_range, "information", seed)[0],
               "random core": select_core(table, n_items, theta_range, "random", seed + 1)[0]}
    planted_of = {"accuracy": theta, "tielean": lean, "tieshift": shift - 0.3}
    values: dict = {}
    for m in range(n_models):
        rows = simulated_rows(items, planted, theta[m], seed + 500 + m, lean=lean[m], shift_min=shift[m])
        rows = rows[rows["contrast_type"] == "type1"]
        for name, ids in subsets.items():
            est = compute_metrics(rows[rows["item_id"].isin(set(ids))], metrics=list(metrics))
            for k, e in est.items():
                width = np.nan if e.ci_low is None or e.ci_high is None else e.ci_high - e.ci_low
                values.setdefault((name, k), []).append((np.nan if e.value is None else e.value, width))
    out = []
    for (name, k), v in values.items():
        val, width = np.array(v, float).T
        full = np.array(values[("full", k)], float)[:, 0]
        row = {"subset": name, "items": len(subsets[name]), "metric": k, "mean_ci_width": float(np.nanmean(width)),
               "spearman_full": float(pd.Series(val).corr(pd.Series(full), method="spearman")),
               "spearman_planted": (float(pd.Series(val).corr(pd.Series(planted_of[k]), method="spearman"))
                                    if k in planted_of else None)}
        out.append(row)
    return pd.DataFrame(out)
