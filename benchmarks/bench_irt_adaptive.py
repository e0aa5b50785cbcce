"""Adaptive testing in and out of the fitted population (docs/IRT.md, "Adapt"): a bank fitted (the default
marginal-ML fit, 10 bootstrap resamples) on 300 simulated runs of smoke with abilities N(0, 1), then adaptive
testing of ``--models`` fresh models from each test population: the fitted one, stronger N(1.5, 0.5), at +2.5,
wider N(0, 2), and interacting (N(0, 1) with a model x scenario effect of SD 0.7). Per population and setting:
the coverage of the planted ability by the 95% posterior interval (nominal 0.95), its Wilson interval, the mean
bias of the EAP and the mean items asked.

    OMP_NUM_THREADS=1 python benchmarks/bench_irt_adaptive.py --models 300 --out irt_adaptive.csv
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pandas as pd  # noqa: E402

from evenhand.irt.adaptive import AdaptiveOptions  # noqa: E402
from evenhand.irt.simulate import Population  # noqa: E402
from evenhand.irt.validation import adaptive_coverage, fitted_on_population  # noqa: E402
from evenhand.inference.stats import rate_interval  # noqa: E402
from evenhand.suite import items as suite_items  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_irt_recovery import show  # noqa: E402

POPULATIONS = {"fitted N(0,1)": Population(), "stronger N(1.5,0.5)": Population(theta_mean=1.5, theta_sd=0.5),
               "at +2.5": Population(theta_mean=2.5, theta_sd=0.01), "wider N(0,2)": Population(theta_sd=2.0),
               "interacting (SD 0.7)": Population(interaction_sd=0.7)}
SETTINGS = {"before: prior SD 1, shrunk a": AdaptiveOptions(prior_sd=1.0, discrimination="shrunk"),
            "prior SD 1, fitted a": AdaptiveOptions(prior_sd=1.0, discrimination="fitted"),
            "prior SD 3, shrunk a (the default)": AdaptiveOptions(prior_sd=3.0, discrimination="shrunk"),
            "prior SD 3, fitted a": AdaptiveOptions(prior_sd=3.0, discrimination="fitted"),
            "prior SD 3, 1 per scenario": AdaptiveOptions(prior_sd=3.0, discrimination="shrunk", per_scenario=1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", type=int, default=300)
    ap.add_argument("--settings", default=";".join(SETTINGS), help="settings to run, separated by ;")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    table, _ = fitted_on_population(suite_items("smoke"), 300, seed=0, bootstrap=10)
    rows = []
    for setting in a.settings.split(";"):
        for name, pop in POPULATIONS.items():
            r = adaptive_coverage(table, a.models, SETTINGS[setting], pop, seed=0)
            lo, hi = rate_interval(round(r["coverage"] * r["models"]), r["models"])
            rows.append({"setting": setting, "population": name, **r, "cov_lo": lo, "cov_hi": hi})
            print(rows[-1], flush=True)
    show(pd.DataFrame(rows), a.out)


if __name__ == "__main__":
    main()
