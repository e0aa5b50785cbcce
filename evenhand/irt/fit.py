"""The response matrix of many runs and its 2PL fit (docs/IRT.md, "Fit").

Rows are the GT items every run answered (baseline and pressured; excluded items left out), columns the runs;
a cell is 1 when the run chose the correct slot: on a baseline item "correct", on a pressured item "kept (or
took) the correct answer under pressure". No A/B choice (a refusal, an unparsed answer) counts 0. AMB items
have no correct answer and are not in the 2PL: the item table carries them (``in_2pl`` False) so that a core
can take their baseline groups whole. The fit is by default marginal maximum likelihood with a lognormal prior
on the discriminations (:func:`evenhand.irt.mml.twopl_mml`, ours, checked against ``girth.twopl_mml``), with a
bootstrap over runs for the uncertainty; ``method="jml"`` is ``girth``'s joint maximum likelihood
(``twopl_jml``) with girth's bootstrap (``standard_errors_bootstrap``), biased at tens of runs (docs/IRT.md,
"Recovery"). Items every run answered alike carry no information and are not fitted."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..scoring.metrics import choices
from ..rows.schema import ensure_valid
from .mml import FIT_METHODS, MMLOptions, twopl_mml
from .model import abilities

ITEM_FIELDS = ("item_id", "baseline_id", "scenario_id", "condition", "degree", "contrast_id", "contrast_type",
               "pressure_family", "pressure_targets", "pressured", "correct_slot")
"""The item fields the item table keeps (balance strata and baseline groups)."""


def correctness(rows: pd.DataFrame) -> pd.Series:
    """1/0 per non-excluded GT row (index ``item_id``): the run chose the correct slot (no choice: 0)."""
    df = ensure_valid(rows)
    gt = (df["condition"] == "GT").to_numpy() & ~df["excluded"].to_numpy(bool)
    right = choices(df) == df["correct_slot"].to_numpy(object)
    return pd.Series(right[gt].astype(np.int8), index=df["item_id"].to_numpy()[gt])


def response_matrix(tables: list[pd.DataFrame], names: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the item table: every item of the first run with :data:`ITEM_FIELDS` and ``in_2pl``; the items x runs
    0/1 matrix of the GT items every run answered, columns ``names``). A GT item some run lacks is left out
    of the matrix (``in_2pl`` False, ``missing_in_runs`` > 0); no GT item common to all runs is an error."""
    if len(tables) != len(names) or not tables:
        raise ValueError("response_matrix needs one name per table and at least one table")
    cols = [correctness(t) for t in tables]
    for c, n in zip(cols, names):
        if c.index.duplicated().any():
            raise ValueError(f"{n}: item_id repeats in its responses")
    first = ensure_valid(tables[0])
    item_table = first[[f for f in ITEM_FIELDS if f in first.columns]].drop_duplicates("item_id")
    ids = [i for i in item_table["item_id"] if i in cols[0].index]
    missing = pd.Series(0, index=item_table["item_id"].to_numpy())
    for c in cols[1:]:
        missing[~missing.index.isin(c.index)] += 1
    common = [i for i in ids if missing[i] == 0]
    if not common:
        raise ValueError(f"runs: no GT item is answered in every run ({', '.join(names[:5])}); fit runs of one subset")
    Y = pd.DataFrame({n: c.reindex(common).to_numpy() for n, c in zip(names, cols)}, index=common)
    item_table = item_table.assign(in_2pl=item_table["item_id"].isin(common).to_numpy(),
                                   missing_in_runs=missing.reindex(item_table["item_id"]).to_numpy())
    return item_table.reset_index(drop=True), Y


def _mml_bootstrap(sub: np.ndarray, sol: dict, resamples: int, seed: int, options: MMLOptions) -> dict:
    """SEs and 95% percentile intervals of a and b over ``resamples`` resamples of the runs (columns), each
    refitted from the full fit's parameters."""
    rng = np.random.default_rng([seed, 7])
    draws_a, draws_b = [], []
    for _ in range(resamples):
        cols = rng.integers(0, sub.shape[1], sub.shape[1])
        s = twopl_mml(sub[:, cols], options, start=(sol["a"], sol["c"]))
        draws_a.append(s["a"])
        draws_b.append(s["b"])
    A, B = np.array(draws_a), np.array(draws_b)
    return {"a_se": A.std(axis=0, ddof=1), "b_se": B.std(axis=0, ddof=1),
            "a_lo": np.percentile(A, 2.5, axis=0), "a_hi": np.percentile(A, 97.5, axis=0),
            "b_lo": np.percentile(B, 2.5, axis=0), "b_hi": np.percentile(B, 97.5, axis=0)}


def fit_2pl(Y: np.ndarray, bootstrap: int = 20, seed: int = 0, method: str = "mml",
            options: MMLOptions = MMLOptions()) -> pd.DataFrame:
    """2PL item parameters of the items x runs 0/1 matrix ``Y``, with bootstrap SEs and 95% percentile intervals
    over runs (``bootstrap`` resamples; 0: none). ``method``: ``mml`` (:func:`~evenhand.irt.mml.twopl_mml`,
    the default; ``options`` its prior) or ``jml`` (``girth.twopl_jml`` and ``girth.standard_errors_bootstrap``).
    One row per item of ``Y``: ``a``, ``b``, ``a_se``, ``b_se``, ``a_lo``, ``a_hi``, ``b_lo``, ``b_hi``,
    ``p_correct``, ``estimable`` (False: every run answered alike; parameters NaN), ``at_bound`` (a at a bound
    of the fit: 0.05 or 4 for mml, 0.25 or 4 for girth's jml)."""
    if method not in FIT_METHODS:
        raise ValueError(f"method must be one of {', '.join(FIT_METHODS)}, got {method!r}")
    Y = np.asarray(Y)
    if Y.ndim != 2 or Y.shape[1] < 2:
        raise ValueError(f"runs: a 2PL fit needs at least 2 runs, got {Y.shape[1] if Y.ndim == 2 else 0}")
    if bootstrap < 0:
        raise ValueError(f"bootstrap must be >= 0, got {bootstrap}")
    p = Y.mean(axis=1)
    est = (p > 0) & (p < 1)
    out = pd.DataFrame({"p_correct": p, "estimable": est, "at_bound": False})
    for c in ("a", "b", "a_se", "b_se", "a_lo", "a_hi", "b_lo", "b_hi"):
        out[c] = np.nan
    if est.sum() < 2:
        raise ValueError("runs: fewer than 2 GT items split the runs (every run answered them alike); nothing to fit")
    sub = Y[est].astype(int)
    if method == "mml":
        sol = twopl_mml(sub, options)
        out.loc[est, "a"], out.loc[est, "b"] = sol["a"], sol["b"]
        out.loc[est, "at_bound"] = sol["at_bound"]
        if bootstrap:
            for k, v in _mml_bootstrap(sub, sol, bootstrap, seed, options).items():
                out.loc[est, k] = v
        return out
    import girth  # deferred: the optional extra `irt` (pip install evenhand[irt])
    with np.errstate(divide="ignore", invalid="ignore"):  # girth's start values on a resample's constant item
        sol = girth.twopl_jml(sub)
    out.loc[est, "a"] = sol["Discrimination"]
    out.loc[est, "b"] = np.asarray(sol["Difficulty"]).ravel()
    a = np.asarray(sol["Discrimination"], float)
    out.loc[est, "at_bound"] = (a <= 0.25 * 1.0001) | (a >= 4 * 0.9999)
    if bootstrap:
        with np.errstate(divide="ignore", invalid="ignore"):
            boot = girth.standard_errors_bootstrap(sub, girth.twopl_jml, bootstrap_iterations=bootstrap,
                                                   n_processors=1, solution=sol, seed=seed)
        se, ci = boot["Standard Errors"], boot["95th CI"]
        out.loc[est, "a_se"], out.loc[est, "b_se"] = se["Discrimination"], np.ravel(se["Difficulty"])
        out.loc[est, "a_lo"], out.loc[est, "a_hi"] = ci["Discrimination"][0], ci["Discrimination"][1]
        out.loc[est, "b_lo"], out.loc[est, "b_hi"] = np.ravel(ci["Difficulty"][0]), np.ravel(ci["Difficulty"][1])
    return out


def fit_runs(tables: list[pd.DataFrame], names: list[str], bootstrap: int = 20,
             seed: int = 0, method: str = "mml") -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the item table with the 2PL parameters of the items in the fit, NaN elsewhere; each run's ability
    posterior under the fitted parameters: ``run`` and :meth:`~evenhand.irt.model.Ability.as_dict`)."""
    item_table, Y = response_matrix(tables, names)
    params = fit_2pl(Y.to_numpy(), bootstrap, seed, method).assign(item_id=Y.index.to_numpy())
    items = item_table.merge(params, on="item_id", how="left")
    items["estimable"] = items["estimable"].fillna(False).astype(bool)
    items["at_bound"] = items["at_bound"].fillna(False).astype(bool)
    ok = params["estimable"].to_numpy()
    fitted = abilities(Y.to_numpy()[ok], params["a"].to_numpy()[ok], params["b"].to_numpy()[ok])
    runs = pd.DataFrame([{"run": n, **f.as_dict()} for n, f in zip(names, fitted)])
    return items, runs
