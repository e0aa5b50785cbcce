"""2PL recovery at leaderboard sizes (docs/IRT.md, "Recovery"): the default marginal-ML fit (log a ~ N(0, 0.5))
against girth's joint ML on smoke's 512 GT items with 20, 30, 40, 100 and 300 simulated runs (a ~ lognormal(0,
0.5), b ~ N(0, 1), theta ~ N(0, 1)); per cell the mean over ``--reps`` seeds of r(a), r(b), the share of
discriminations at a bound, the median fitted / planted a and the mean error of b, with the seeds' SD.

    OMP_NUM_THREADS=1 python benchmarks/bench_irt_recovery.py --reps 3 --out irt_recovery.csv
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pandas as pd  # noqa: E402

from evenhand.irt.validation import fitted_on_population, recovery  # noqa: E402
from evenhand.suite import items as suite_items  # noqa: E402


def show(df: pd.DataFrame, out: str | None) -> None:
    """Print a result table (3 decimals) and write it to ``out`` (.csv) when given: the IRT benchmarks' last step."""
    print(df.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if out:
        df.to_csv(out, index=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", default="20,30,40,100,300")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--methods", default="mml,jml")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    items = suite_items("smoke")
    rows = []
    for n in (int(x) for x in a.runs.split(",")):
        for method in a.methods.split(","):
            for rep in range(a.reps):
                t0 = time.perf_counter()
                table, _ = fitted_on_population(items, n, seed=rep, method=method)
                rows.append({"runs": n, "method": method, "seed": rep, **recovery(table),
                             "seconds": round(time.perf_counter() - t0, 2)})
                print(rows[-1], flush=True)
    df = pd.DataFrame(rows)
    summary = df.groupby(["runs", "method"]).agg(
        items=("items", "mean"), r_a=("r_a", "mean"), r_a_sd=("r_a", "std"), r_b=("r_b", "mean"),
        r_b_sd=("r_b", "std"), at_bound=("at_bound", "mean"), a_ratio=("a_ratio", "mean"),
        b_bias=("b_bias", "mean"), seconds=("seconds", "mean"), reps=("seed", "size")).reset_index()
    show(summary, a.out)


if __name__ == "__main__":
    main()
