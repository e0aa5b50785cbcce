"""Known answers that move many answers and can fail, and their slope CIs' coverage over independent replications
(simulated on the suite's items; the organism is not decoded here).

Per replication: fresh scenarios from the core subset (degree 3, Type 1) and a baseline whose planted FragGap grows
with beta (0, gap/2, gap; the same draws at every beta). ``oracle_randomised``: the gap removed (the beta-0 baseline
at every beta) with a share of its answers coin-flipped afresh at every beta
(:func:`evenhand.scoring.paired.scrambled`):
known slope 1, known agreement with the baseline at beta 0 ``1 - share/2``. ``partial_<f>``: a share f of each
planted flip undone; its known slope *measured* on independent calibration replications (any bend included).
Coverage: replications whose 95% jackknife-t slope CI (:func:`~experiments.studies.dose_response.scoring.score_dose`)
covers the known slope, with its Wilson interval. Results: docs/interventions/decision_rules.md, "Verdicts that hold".

    OMP_NUM_THREADS=1 python benchmarks/known_answer_coverage.py --reps 60 --calibration 60 --scenarios 24
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evenhand.scoring.paired import scrambled  # noqa: E402
from evenhand.rows.schema import validate_rows  # noqa: E402
from evenhand.inference.stats import rate_interval  # noqa: E402
from experiments.studies.dose_response.scoring import dose_data, score_dose  # noqa: E402


def _items() -> pd.DataFrame:
    from evenhand.suite.subsets import iter_subset
    rows = [it for it in iter_subset("core", 0) if it["degree"] == 3 and it["contrast_type"] == "type1"]
    return validate_rows(pd.DataFrame(rows).assign(choice=None))


def _baselines(items: pd.DataFrame, gaps, rng) -> tuple[list[pd.DataFrame], np.ndarray, list[np.ndarray]]:
    """The baseline at each beta (same per-item draws; the pro-minority flip rate raised by the beta's gap)."""
    scen = sorted(items["scenario_id"].unique())
    us = items["scenario_id"].map(dict(zip(scen, rng.uniform(0.05, 0.2, len(scen))))).to_numpy()
    gt, p = (items["condition"] == "GT").to_numpy(), items["pressured"].to_numpy()
    correct = items["correct_slot"].to_numpy(object)
    wrong = np.where(correct == "A", "B", "A")
    amb = np.where(rng.random(len(items)) < 0.5, "A", "B").astype(object)
    acc = np.where(rng.random(len(items)) < 0.9, correct, wrong)
    u = rng.random(len(items))
    pmin = (items["pressure_resolved"] == "pro_minority").to_numpy()
    weak = (items["pressure_targets"] == "weaker").to_numpy()
    out, flips = [], []
    for g in gaps:
        ch = amb.copy()
        ch[gt & ~p] = acc[gt & ~p]
        flip = gt & p & weak & (u < us + np.where(pmin, g, 0.0))
        ch[gt & p] = np.where(flip, wrong, correct)[gt & p]
        out.append(items.assign(choice=ch))
        flips.append(flip)
    return out, us, flips


def replication(items: pd.DataFrame, k: int, gap: float, share: float, fractions, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng([seed, 42])
    scen = rng.choice(sorted(items["scenario_id"].unique()), k, replace=False)
    sub = items[items["scenario_id"].isin(scen)].reset_index(drop=True)
    gaps = (0.0, gap / 2, gap)
    bases, us, flips = _baselines(sub, gaps, rng)
    cells = {("baseline", b): bases[b] for b in range(3)}
    for b in range(3):
        cells[("oracle_randomised", b)] = scrambled(bases[0], share, [seed, b, 7])
        for f in fractions:
            pmin = (bases[b]["pressure_resolved"] == "pro_minority").to_numpy()
            undo = flips[b] & pmin & (rng.random(len(sub)) < (f * gaps[b] / (us + gaps[b]) if gaps[b] else 0.0))
            ch = bases[b]["choice"].to_numpy(object).copy()
            ch[undo] = bases[b]["correct_slot"].to_numpy(object)[undo]
            cells[(f"partial_{f}", b)] = bases[b].assign(choice=ch)
    arms = ["baseline", "oracle_randomised", *(f"partial_{f}" for f in fractions)]
    t = score_dose(dose_data(cells, arms, gaps), seed=seed, metrics=("fraggap",), interval="jackknife-t")
    keep = t[(t["stat"] == "slope") | ((t["stat"] == "agreement") & (t["arm"] == "oracle_randomised"))]
    return keep.assign(replication=seed)[["replication", "arm", "stat", "value", "ci_low", "ci_high"]]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--calibration", type=int, default=40)
    ap.add_argument("--scenarios", type=int, default=24)
    ap.add_argument("--gap", type=float, default=0.2)
    ap.add_argument("--share", type=float, default=0.3)
    ap.add_argument("--fractions", default="0.25,0.5,0.75")
    args = ap.parse_args(argv)
    fractions = [float(x) for x in args.fractions.split(",")]
    items = _items()
    t0 = time.time()
    calib = pd.concat([replication(items, args.scenarios, args.gap, args.share, fractions, 10_000 + r)
                       for r in range(args.calibration)])
    known = calib[calib["stat"] == "slope"].groupby("arm")["value"].mean().to_dict()
    known["oracle_randomised"] = 1.0
    reps = pd.concat([replication(items, args.scenarios, args.gap, args.share, fractions, r) for r in range(args.reps)])
    print(f"{args.reps} independent replications x {args.scenarios} scenarios (known partial slopes measured on "
          f"{args.calibration} other replications), planted FragGap 0/{args.gap / 2:g}/{args.gap:g}, randomised "
          f"share {args.share}; {time.time() - t0:.0f} s")
    print("| arm | known (measured) | mean slope | mean CI width | coverage [Wilson 95%] | coverage of the construction's f |")
    print("|---|---|---|---|---|---|")
    for arm, g in reps[reps["stat"] == "slope"].groupby("arm", sort=False):
        cov = ((g["ci_low"] <= known[arm]) & (known[arm] <= g["ci_high"])).astype(bool)
        lo, hi = rate_interval(int(cov.sum()), len(cov))
        f = 1.0 if arm == "oracle_randomised" else float(arm.split("_")[1])
        cf = int(((g["ci_low"] <= f) & (f <= g["ci_high"])).sum())
        print(f"| {arm} slope | {known[arm]:.3f} | {g['value'].mean():.3f} | {(g['ci_high'] - g['ci_low']).mean():.2f} "
              f"| {int(cov.sum())}/{len(cov)} [{lo:.2f}, {hi:.2f}] | {cf}/{len(g)} |")
    ag = reps[reps["stat"] == "agreement"]
    truth = 1 - args.share / 2
    cov = ((ag["ci_low"] <= truth) & (truth <= ag["ci_high"])).astype(bool)
    lo, hi = rate_interval(int(cov.sum()), len(cov))
    print(f"| oracle_randomised agreement at beta 0 | {truth:.3f} | {ag['value'].mean():.3f} | "
          f"{(ag['ci_high'] - ag['ci_low']).mean():.3f} | {int(cov.sum())}/{len(cov)} [{lo:.2f}, {hi:.2f}] |")


if __name__ == "__main__":
    main()
