"""Which interval do the suite's metrics need? A coverage study of the two candidates.

For each interval method (``percentile``: the percentile cluster bootstrap; ``jackknife-t``: the
delete-one-scenario jackknife SE with a t quantile on k-1 degrees of freedom) and each seed:

- **null**: random A/B answers (no refusals) to a subset's type-1 items; every asymmetry metric's
  true value is its fair value (0; TieLean 0.5), so an interval that excludes it is a false positive.
  Counted per degree and metric, as ``evenhand score`` reports them.
- **planted**: the simulated model (evenhand/models/simulated.py) with its default planted biases;
  an interval covering the planted value at degree 3 counts as covered.

Prints the rates and writes them as JSON (``--out``). The method whose null exclusion stays at or
below 7% per metric and whose planted coverage is at least 90% is the one evenhand.metrics uses.

    python benchmarks/interval_coverage.py --subset smoke --seeds 50
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


def study(subset: str, seeds: int, resamples: int, methods: tuple[str, ...] = ("percentile", "jackknife-t")) -> dict:
    items = pd.DataFrame([i for i in iter_subset(subset, 0) if i["contrast_type"] == "type1"])
    out: dict = {"subset": subset, "items": len(items), "seeds": seeds, "resamples": resamples, "methods": {}}
    for method in methods:
        metrics.INTERVAL = method
        null = {d: {m: 0 for m in ASYMMETRY} for d in range(4)}
        defined = {d: {m: 0 for m in ASYMMETRY} for d in range(4)}
        covered = {m: 0 for m in ASYMMETRY}
        width = {m: [] for m in ASYMMETRY}
        truth = PlantedBias().truth(3)
        for seed in range(seeds):
            resp = validate_rows(random_answers(items, seed))
            for d in range(4):
                est = compute_metrics(resp[resp["degree"] == d], resamples, seed, metrics=ASYMMETRY)
                for m, e in est.items():
                    if e.ci_low is not None:
                        defined[d][m] += 1
                        null[d][m] += not (e.ci_low <= FAIR[m] <= e.ci_high)
            sim = validate_rows(SimulatedModel(PlantedBias(), seed=seed).decide(items[items["degree"] == 3]))
            for m, e in compute_metrics(sim, resamples, seed, metrics=ASYMMETRY).items():
                if e.ci_low is not None:
                    covered[m] += e.ci_low <= truth[m] <= e.ci_high
                    width[m].append(e.ci_high - e.ci_low)
        out["methods"][method] = {
            "null_exclusion": {str(d): {m: null[d][m] / max(defined[d][m], 1) for m in ASYMMETRY} for d in range(4)},
            "null_defined": {str(d): defined[d] for d in range(4)},
            "planted_coverage_d3": {m: covered[m] / seeds for m in ASYMMETRY},
            "planted_mean_width_d3": {m: float(np.mean(width[m])) if width[m] else None for m in ASYMMETRY},
        }
    metrics.INTERVAL = "jackknife-t"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--subset", default="smoke", choices=["smoke", "core"])
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--resamples", type=int, default=400)
    ap.add_argument("--methods", nargs="+", default=["percentile", "jackknife-t"], choices=["percentile", "jackknife-t"])
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    t0 = time.perf_counter()
    res = study(a.subset, a.seeds, a.resamples, tuple(a.methods))
    res["seconds"] = round(time.perf_counter() - t0, 1)
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
