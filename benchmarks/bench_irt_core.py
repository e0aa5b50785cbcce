"""The IRT core against the stratified random core, with and without model x scenario interaction (docs/IRT.md,
"Select"): smoke (1,024 items, 512 GT in 30 scenarios), a 2PL fit (the default, marginal ML) on 30 or 300
simulated runs, cores of ``--items`` items, ``--reps`` replications of ``--test`` fresh models each. Per cell:
the mean Spearman correlation of the core's abilities with the planted ones (IRT core, random core), the share
of replications the IRT core ranks better, and the mean RMSE of each. The IRT core by information alone and
with ``per_scenario`` caps (rounds of at most that many groups per scenario).

    OMP_NUM_THREADS=1 python benchmarks/bench_irt_core.py --reps 20 --out irt_core.csv
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pandas as pd  # noqa: E402

from evenhand.irt.simulate import Population  # noqa: E402
from evenhand.irt.validation import compare_cores, fitted_on_population  # noqa: E402
from evenhand.suite import items as suite_items  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_irt_recovery import show  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fits", default="30,300")
    ap.add_argument("--interactions", default="0,0.7")
    ap.add_argument("--caps", default="none,1,2")
    ap.add_argument("--items", type=int, default=300)
    ap.add_argument("--test", type=int, default=100)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    items = suite_items("smoke")
    rows = []
    for n_fit in (int(x) for x in a.fits.split(",")):
        for sd in (float(x) for x in a.interactions.split(",")):
            pop = Population(interaction_sd=sd)
            table, planted = fitted_on_population(items, n_fit, pop, seed=0)
            for cap in a.caps.split(","):
                per = None if cap == "none" else int(cap)
                r = compare_cores(table, planted, a.items, a.test, a.reps, population=pop, per_scenario=per)
                rows.append({"fit_runs": n_fit, "interaction_sd": sd, "per_scenario": cap, "items": a.items,
                             "irt": r["irt"].mean(), "random": r["random"].mean(),
                             "irt_better": (r["gain"] > 0).mean(), "irt_rmse": r["irt_rmse"].mean(),
                             "random_rmse": r["random_rmse"].mean(), "reps": a.reps})
                print(rows[-1], flush=True)
    show(pd.DataFrame(rows), a.out)


if __name__ == "__main__":
    main()
