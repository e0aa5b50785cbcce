"""Which interval do the suite's metrics need? A coverage study of the candidates.

For each interval method (``percentile``: the percentile cluster bootstrap; ``jackknife-t``: the
delete-one-scenario jackknife SE with a t quantile on k-1 degrees of freedom; ``iid``: the binomial
SE of independent items, which ignores scenarios and is here only as the counter-example) and each seed:

- **null**: without scenario effects, random A/B answers (no refusals) to a subset's type-1 items;
  with them (``--scenario-sd``, ``--scenario-contrast-sd``), the simulated model with no planted
  asymmetry and those effects, which is fair in expectation at every degree. Every asymmetry
  metric's true value is its fair value (0; TieLean 0.5), so an interval that excludes it is a
  false positive. Counted per degree and metric, as ``evenhand score`` reports them.
- **planted**: the simulated model (evenhand/models/simulated.py) with its default planted biases
  (and the scenario effects, if any); an interval covering the planted value at degree 3 (with
  effects: the expectation over them, ``PlantedBias.truth``) counts as covered.

Each seed's answers are drawn once and scored with every method. Prints the rates and writes them
as JSON (``--out``). The method whose null exclusion stays at or below 7% per metric and whose planted
coverage is at least 90% is the one evenhand.metrics uses.

    python benchmarks/interval_coverage.py --subset smoke --seeds 50
    python benchmarks/interval_coverage.py --subset smoke --seeds 50 --scenario-sd 0.6 --methods percentile jackknife-t iid
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np
import pandas as pd

from evenhand import metrics
from evenhand.metrics import ASYMMETRY, FAIR, compute_metrics
from evenhand.models.simulated import PlantedBias, SimulatedModel
from evenhand.schema import validate_rows
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
    """Null false-positive rates per degree and planted coverage at degree 3 of each interval ``method``."""
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--subset", default="smoke", choices=["smoke", "core"])
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--resamples", type=int, default=400)
    ap.add_argument("--methods", nargs="+", default=["percentile", "jackknife-t"], choices=list(metrics.INTERVALS))
    ap.add_argument("--scenario-sd", type=float, default=0.0, help="per-scenario random intercept SD (logit scale)")
    ap.add_argument("--scenario-contrast-sd", type=float, default=0.0, help="per-(scenario, contrast) intercept SD")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    t0 = time.perf_counter()
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
