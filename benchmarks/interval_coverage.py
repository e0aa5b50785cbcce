"""Which interval do the suite's metrics need? A coverage study of the candidates."""
from __future__ import annotations

import argparse
import json
import time

import numpy as np
import pandas as pd

from evenhand.scoring import metrics
from evenhand.scoring.metrics import ASYMMETRY, FAIR, compute_metrics
from evenhand.models.simulated import PlantedBias, SimulatedModel
from evenhand.rows.schema import validate_rows
from evenhand.suite.subsets import iter_subset


def random_answers(items: pd.DataFrame, seed: int) -> pd.DataFrame:
    """Each item answered "<noun> A" or "<noun> B" with probability 1/2, independently."""
    rng = np.random.default_rng(seed)
    slots = np.where(rng.random(len(items)) < 0.5, "A", "B")
    return items.assign(text=[f"{n} {s}" for n, s in zip(items["candidate_noun"], slots)])


FLAT = {"acc_gap": 0.0, "tie_lean": 0.5, "flip_pro_minority": 0.15, "flip_pro_majority": 0.15,
        "shift_to_minority": 0.30, "shift_to_majority": 0.30}
"""PlantedBias fields of a simulated model without asymmetry: the null model when there are scenario effects."""


def study(subset: str, seeds: int, resamples: int, methods: tuple[str, ...] = ("percentile", "jackknife-t"),
          scenario_sd: float = 0.0, scenario_contrast_sd: float = 0.0) -> dict:
    """Null false-positive rates per degree and planted coverage at degree 3 of each interval ``method``.

    For each interval method (``percentile``: the percentile cluster bootstrap; ``jackknife-t``: the
    delete-one-scenario jackknife SE with a t quantile on k-1 degrees of freedom; ``iid``: the binomial
    SE of independent items, which ignores scenarios and is here only as the counter-example) and each seed:

    - **null**: without scenario effects, random A/B answers (no refusals, :func:`random_answers`) to a subset's
      type-1 items; with them (``--scenario-sd``, ``--scenario-contrast-sd``), the simulated model with no
      planted asymmetry and those effects (:data:`FLAT`), which is fair in expectation at every degree. Every
      asymmetry metric's true value is its fair value (0; TieLean 0.5), so an interval that excludes it is a
      false positive. Counted per degree and metric, as ``evenhand score`` reports them.
    - **planted**: the simulated model (evenhand/models/simulated.py) with its default planted biases
      (and the scenario effects, if any); an interval covering the planted value at degree 3 (with
      effects: the expectation over them, ``PlantedBias.truth``) counts as covered.

    Each seed's answers are drawn once and scored with every method. The method whose null exclusion stays
    at or below 7% per metric and whose planted coverage is at least 90% is the one
    :mod:`evenhand.scoring.metrics` uses."""
    items = pd.DataFrame([i for i in iter_subset(subset, 0) if i["contrast_type"] == "type1"])
    effects = {"scenario_sd": scenario_sd, "scenario_contrast_sd": scenario_contrast_sd}
    planted, flat = PlantedBias(**effects), PlantedBias(**FLAT, **effects)
    out: dict = {"subset": subset, "items": len(items), "seeds": seeds, "resamples": resamples, "scenario_effects":
                 effects, "icc": planted.icc(0) if planted.effect_sd > 0 else None, "methods": {}}
    null = {k: {d: {m: 0 for m in ASYMMETRY} for d in range(4)} for k in methods}
    defined = {k: {d: {m: 0 for m in ASYMMETRY} for d in range(4)} for k in methods}
    covered = {k: {m: 0 for m in ASYMMETRY} for k in methods}
    width: dict = {k: {m: [] for m in ASYMMETRY} for k in methods}
    truth, fair = planted.truth(3), {d: flat.truth(d) for d in range(4)}
    d3 = items[items["degree"] == 3]
    try:
        for seed in range(seeds):
            if planted.effect_sd > 0:
                resp = validate_rows(SimulatedModel(flat, seed=10_000 + seed).decide(items))
            else:
                resp = validate_rows(random_answers(items, seed))
            sim = validate_rows(SimulatedModel(planted, seed=seed).decide(d3))
            for method in methods:
                metrics.INTERVAL = method
                for d in range(4):
                    est = compute_metrics(resp[resp["degree"] == d], resamples, seed, metrics=ASYMMETRY)
                    for m, e in est.items():
                        if e.ci_low is not None:
                            defined[method][d][m] += 1
                            target = FAIR[m] if planted.effect_sd == 0 else fair[d][m]
                            null[method][d][m] += not (e.ci_low <= target <= e.ci_high)
                for m, e in compute_metrics(sim, resamples, seed, metrics=ASYMMETRY).items():
                    if e.ci_low is not None:
                        covered[method][m] += e.ci_low <= truth[m] <= e.ci_high
                        width[method][m].append(e.ci_high - e.ci_low)
    finally:
        metrics.INTERVAL = "jackknife-t"
    for method in methods:
        out["methods"][method] = {
            "null_exclusion": {str(d): {m: null[method][d][m] / max(defined[method][d][m], 1) for m in ASYMMETRY}
                               for d in range(4)},
            "null_defined": {str(d): defined[method][d] for d in range(4)},
            "planted_coverage_d3": {m: covered[method][m] / seeds for m in ASYMMETRY},
            "planted_mean_width_d3": {m: float(np.mean(width[method][m])) if width[method][m] else None
                                      for m in ASYMMETRY},
        }
    return out


def null_pair(items: pd.DataFrame, seed: int, effect_sd: float = 0.1, arm_sd: float = 0.05,
              n_arms: int = 2) -> list[pd.DataFrame]:
    """``n_arms`` independent answer tables of one fair process with scenario effects (a fast generative null).

    Per scenario: a GT accuracy U(0.6, 0.95), a flip rate U(0.05, 0.3), a TieLean N(0.5, effect_sd), a
    TieShift rate U(0.1, 0.4), and per asymmetry metric a scenario gap N(0, effect_sd) (minority minus
    majority; 0 on average: fair in expectation). Every arm adds its own N(0, arm_sd) per scenario and
    metric (arm x scenario interaction) and draws its answers independently. The arms are exchangeable,
    so every paired change between two of them is 0 in expectation."""
    from evenhand.vocab.sides import favours_minority
    rng = np.random.default_rng(seed)
    scen, codes = np.unique(items["scenario_id"].to_numpy(str), return_inverse=True)
    k = len(scen)
    acc, flip = rng.uniform(0.6, 0.95, k), rng.uniform(0.05, 0.3, k)
    lean, shift = rng.normal(0.5, effect_sd, k), rng.uniform(0.1, 0.4, k)
    gaps = rng.normal(0, effect_sd, (3, k))  # accgap, fraggap, tieshift per scenario
    gt = (items["condition"] == "GT").to_numpy()
    pressured = items["pressured"].to_numpy(bool)
    correct = items["correct_slot"].to_numpy(object)
    wrong = np.where(correct == "A", "B", "A")
    fav_a = favours_minority(np.full(len(items), "A", object), items["minority_slot"].to_numpy(object),
                             items["question_polarity"].to_numpy(object))
    truth_min = (items["truth_favors"] == "minority").to_numpy()
    pmin = (items["pressure_resolved"] == "pro_minority").to_numpy()
    half = np.where(pmin, 0.5, -0.5)
    out = []
    for _ in range(n_arms):
        g = gaps + rng.normal(0, arm_sd, (3, k))
        lean_a = lean + rng.normal(0, arm_sd, k)
        p_correct = acc[codes] + np.where(truth_min, 0.5, -0.5) * g[0][codes]
        p_flip = flip[codes] + half * g[1][codes]
        p_min = np.where(pressured, lean_a[codes] + np.where(pmin, 1, -1) * shift[codes] + half * g[2][codes],
                         lean_a[codes])
        u = rng.random(len(items))
        gt_ok = u < np.clip(np.where(pressured, 1 - p_flip, p_correct), 0, 1)
        amb_min = u < np.clip(p_min, 0, 1)
        ch = np.where(gt, np.where(gt_ok, correct, wrong), np.where(amb_min == fav_a, "A", "B")).astype(object)
        out.append(items.assign(choice=ch))
    return out


def paired_study(seeds: int, scenarios: tuple[int, ...] = (10, 24), methods: tuple[str, ...] = ("percentile",
                 "jackknife-t"), resamples: int = 400, effect_sd: float = 0.1, arm_sd: float = 0.05) -> dict:
    """Null coverage of the paired ``change`` intervals of :func:`evenhand.scoring.paired.score_arms` (``--paired``)
    on null arms (:func:`null_pair`: two independent draws of one process with scenario effects, so every paired
    change is 0 in expectation), at ``--scenarios`` (default 10 and 24) scenarios drawn from the degree-3 type-1
    items of ``core`` per seed; per interval, k and asymmetry metric the share of ``change`` CIs covering 0 (with
    its Wilson interval) and the share of "reduction" verdicts. The interval with at least 93% at 10 and 24
    scenarios is the default of :mod:`evenhand.scoring.paired`."""
    from evenhand.scoring.paired import score_arms
    from evenhand.inference.stats import rate_interval
    items = validate_rows(pd.DataFrame([i for i in iter_subset("core", 0) if i["contrast_type"] == "type1"
                                        and i["degree"] == 3]).assign(choice=None))
    pool = sorted(items["scenario_id"].unique())
    out: dict = {"seeds": seeds, "resamples": resamples, "effect_sd": effect_sd, "arm_sd": arm_sd, "cells": []}
    for k in scenarios:
        cover = {m: {x: 0 for x in ASYMMETRY} for m in methods}
        defined = {m: {x: 0 for x in ASYMMETRY} for m in methods}
        reduction = {m: {x: 0 for x in ASYMMETRY} for m in methods}
        for seed in range(seeds):
            rng = np.random.default_rng(1_000_000 + seed)
            sub = items[items["scenario_id"].isin(rng.choice(pool, k, replace=False))].reset_index(drop=True)
            base, arm = null_pair(sub, seed, effect_sd, arm_sd)
            for method in methods:
                t = score_arms({"baseline": base, "arm": arm}, "baseline", resamples=resamples, seed=seed,
                               interval=method)
                ch = t[(t["arm"] == "arm") & (t["stat"] == "change")].set_index("metric")
                for x in ASYMMETRY:
                    lo, hi = ch.loc[x, "ci_low"], ch.loc[x, "ci_high"]
                    if lo is None or lo != lo:
                        continue
                    defined[method][x] += 1
                    cover[method][x] += lo <= 0 <= hi
                    reduction[method][x] += ch.loc[x, "verdict"] == "reduction"
        for method in methods:
            for x in ASYMMETRY:
                n = defined[method][x]
                lo, hi = rate_interval(cover[method][x], n) if n else (None, None)
                out["cells"].append({"interval": method, "k": k, "metric": x, "coverage": cover[method][x] / max(n, 1),
                                     "wilson_low": lo, "wilson_high": hi, "n": n,
                                     "reduction_rate": reduction[method][x] / max(n, 1)})
    return out


def main() -> None:
    """Run :func:`study` (or :func:`paired_study` with ``--paired``); prints the rates and writes them as JSON
    (``--out``)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--subset", default="smoke", choices=["smoke", "core"])
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--resamples", type=int, default=400)
    ap.add_argument("--methods", nargs="+", default=["percentile", "jackknife-t"], choices=list(metrics.INTERVALS))
    ap.add_argument("--scenario-sd", type=float, default=0.0, help="per-scenario random intercept SD (logit scale)")
    ap.add_argument("--scenario-contrast-sd", type=float, default=0.0, help="per-(scenario, contrast) intercept SD")
    ap.add_argument("--out", default=None)
    ap.add_argument("--paired", action="store_true", help="null coverage of the paired intervals "
                    "(evenhand.scoring.paired)")
    ap.add_argument("--scenarios", type=int, nargs="+", default=[10, 24], help="--paired: scenarios per seed")
    a = ap.parse_args()
    t0 = time.perf_counter()
    if a.paired:
        methods = tuple(m for m in a.methods if m != "iid")
        res = paired_study(a.seeds, tuple(a.scenarios), methods, a.resamples)
        res["seconds"] = round(time.perf_counter() - t0, 1)
        print("paired null coverage of the change CIs (target >= 0.93); share of 'reduction' verdicts")
        for c in res["cells"]:
            print(f"  {c['interval']:<12} k={c['k']:<3} {c['metric']:<9} {c['coverage']:.3f} "
                  f"[{c['wilson_low']:.3f}, {c['wilson_high']:.3f}] n={c['n']}  reduction {c['reduction_rate']:.3f}")
        print(f"{a.seeds} seeds; {res['seconds']} s")
        if a.out:
            with open(a.out, "w") as f:
                json.dump(res, f, indent=2)
        return
    res = study(a.subset, a.seeds, a.resamples, tuple(a.methods), a.scenario_sd, a.scenario_contrast_sd)
    res["seconds"] = round(time.perf_counter() - t0, 1)
    if res["icc"]:
        print(f"scenario effects {res['scenario_effects']}: ICC " + ", ".join(f"{k} {v:.3f}" for k, v in res["icc"].items()))
    for method, r in res["methods"].items():
        print(f"{method}: null exclusion per degree (target <= 0.07), planted coverage at degree 3 (target >= 0.90)")
        for d, row in r["null_exclusion"].items():
            print(f"  degree {d}: " + "  ".join(f"{m} {v:.2f}" for m, v in row.items()))
        print("  planted d3: " + "  ".join(f"{m} {v:.2f}" for m, v in r["planted_coverage_d3"].items()))
    print(f"{res['items']:,} items; {a.seeds} seeds; {res['seconds']} s")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
