"""Error rates of the degradation flags (evenhand.inference.decision.degradation) at the study's sizes, on nulls and
planted
losses: how often an arm that loses no accuracy is flagged, and how often a planted loss is caught.

Simulated per item (GT items without pressure, refusals wrong): per scenario a baseline accuracy p_s drawn from
a Beta with mean ``--accuracy`` (scenario effects, as the suite has them), ``--items`` such items per scenario
(the organism comparison: 4). Arms: a *null* whose answers change correctness on a share ``churn`` of the
items, half right-to-wrong and half wrong-to-right (it moves answers, its expected loss is 0), and a *planted loss* L that turns each right answer wrong with
probability L / p_s. The loss's 95% CI is the comparison's (paired delete-one-scenario jackknife-t over
scenarios); flagged = point above the margin (``possibly degraded`` or ``degraded``), ``degraded`` = the CI's
low end above it. Pure numpy, seeded; prints one Markdown table.

    OMP_NUM_THREADS=1 python benchmarks/flag_error_rates.py --reps 2000
"""
from __future__ import annotations

import argparse

import numpy as np
from scipy.stats import t as student_t

from evenhand.inference.decision import ACCURACY_MARGIN


def simulate(k: int, items: int, accuracy: float, churn: float, loss: float, reps: int, seed: int,
             margin: float = ACCURACY_MARGIN, concentration: float = 20.0) -> tuple[float, float]:
    """(share flagged at either level, share ``degraded``) over ``reps`` simulated comparisons."""
    rng = np.random.default_rng([seed, k, items, int(1e4 * churn), int(1e4 * loss)])
    a, b = accuracy * concentration, (1 - accuracy) * concentration
    p = rng.beta(a, b, (reps, k, 1))
    base = rng.random((reps, k, items)) < p
    arm = base.copy()
    if churn:  # a share churn of the answers change correctness, half each way: expected loss 0
        u = rng.random(base.shape)
        flip = np.where(base, u < np.minimum(1, churn / 2 / p), u < np.minimum(1, churn / 2 / (1 - p)))
        arm = arm ^ flip
    if loss:
        arm = arm & ~(rng.random(base.shape) < loss / p)
    d = (base.astype(float) - arm).sum(2)  # per scenario: right before, wrong after, minus the reverse
    n = float(items)
    point = d.sum(1) / (k * n)
    loo = (d.sum(1, keepdims=True) - d) / ((k - 1) * n)
    se = np.sqrt((k - 1) / k * ((loo - loo.mean(1, keepdims=True)) ** 2).sum(1))
    low = point - student_t.ppf(0.975, k - 1) * se
    return float(np.mean(point > margin)), float(np.mean(low > margin))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--accuracy", type=float, default=0.9)
    ap.add_argument("--items", type=int, default=4, help="GT items without pressure per scenario")
    ap.add_argument("--scenarios", default="10,24,48,70,120")
    args = ap.parse_args(argv)
    ks = [int(x) for x in args.scenarios.split(",")]
    cases = [("null, 10% churn", 0.10, 0.0), ("null, 18% churn", 0.18, 0.0), ("5 pp loss", 0.0, 0.05),
             ("8 pp loss", 0.0, 0.08), ("8 pp loss + 10% churn", 0.10, 0.08)]
    print(f"| arm ({args.items} items/scenario, accuracy {args.accuracy}) | "
          + " | ".join(f"k = {k}: flagged / degraded" for k in ks) + " |")
    print("|---" * (len(ks) + 1) + "|")
    for name, churn, loss in cases:
        cells = []
        for k in ks:
            f, d = simulate(k, args.items, args.accuracy, churn, loss, args.reps, args.seed)
            cells.append(f"{100 * f:.1f}% / {100 * d:.1f}%")
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
