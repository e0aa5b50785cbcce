"""False-positive rate of the explanation measures' interval on the scenario-confounded null (docs/EXPLANATIONS.md,
"Why within scenarios"): the within-scenario contrast (``paired_differences``) against the pooled estimator it
replaced (``pooled_differences``), 200 seeds x 6 measures, side shares U(0.2, 0.8) and U(0.35, 0.65).

    OMP_NUM_THREADS=1 python benchmarks/bench_explanation_null.py      # about 2 min on 2 shared cores
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evenhand.inference.stats import rate_interval  # noqa: E402
from probes.explanations import paired_differences, pooled_differences  # noqa: E402
from tests.test_explanations import scenario_confounded_null  # noqa: E402


def main(seeds: int = 200) -> None:
    for shares in ((0.2, 0.8), (0.35, 0.65)):
        for name, f in (("within-scenario", paired_differences), ("pooled", pooled_differences)):
            miss = total = 0
            for seed in range(seeds):
                t = f(scenario_confounded_null(seed, shares=shares))
                miss += int(((t["ci_low"] > 0) | (t["ci_high"] < 0)).sum())
                total += len(t)
            lo, hi = rate_interval(miss, total)
            print(f"shares U{shares} {name:>15}: {miss}/{total} = {miss / total:.3f} [{lo:.3f}, {hi:.3f}]", flush=True)


if __name__ == "__main__":
    main()
