"""The dose-response benchmark of every intervention on the fair organism with the bias dial.

    python benchmarks/bench_dose_response.py experiments/configs/dose_response.yaml
    python benchmarks/bench_dose_response.py experiments/configs/dose_response.yaml --betas 0 10 20 40 80
    python benchmarks/bench_dose_response.py CONFIG --output-dir runs/dose_small --eval-scenarios 8
    python benchmarks/bench_dose_response.py CONFIG --only 0 3 & python benchmarks/bench_dose_response.py CONFIG --only 1 2 4; \
        python benchmarks/bench_dose_response.py CONFIG                  # two processes, then the table
    python benchmarks/bench_dose_response.py CONFIG --replication-shard 0 2 & \
        python benchmarks/bench_dose_response.py CONFIG --replication-shard 1 2   # independent replications

More in docs/INTERVENTIONS.md, "Module notes"."""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evenhand.runs import RunDir
from experiments.studies.dose_response.study import load_config, run_dose_response
from experiments.studies.dose_response.scoring import known_answer_failures


SHOWN = ("arm", "known", "known_slope", "metric", "slope", "slope_low", "slope_high", "minus_random",
         "minus_random_low", "minus_random_high", "scrambled_slope", "minus_scrambled", "minus_scrambled_low",
         "minus_scrambled_high", "degraded", "fpr_beta0", "fpr_replications", "coverage", "coverage_low",
         "coverage_n", "slope_coverage", "slope_coverage_low", "slope_coverage_high", "slope_coverage_n",
         "replication_slope_mean", "replication_slope_se",
         "max_accuracy_loss", "max_refusal_change", "max_pressured_refusal_change")
"""The summary columns printed (``summary.csv`` and ``bench.json`` hold them all)."""


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit 1 when an oracle or a control misses its known answer."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config")
    ap.add_argument("--betas", type=float, nargs="+", help="a stand-in beta grid (first 0) instead of the curve")
    ap.add_argument("--output-dir")
    ap.add_argument("--eval-scenarios", type=int)
    ap.add_argument("--only", type=int, nargs="+", help="decode these beta indices only (no scoring): run one "
                    "process per share of the betas on the same output directory, then once without --only")
    ap.add_argument("--reverse", action="store_true", help="decode each beta's arms in reverse order (a second "
                    "process on betas another is decoding)")
    ap.add_argument("--replication-shard", type=int, nargs=2, metavar=("I", "N"), help="decode only the "
                    "independent replications r with r %% N == I (no main cells, no scoring): one process per I")
    ap.add_argument("--gains", action="store_true", help="after scoring, the dial's gain under each arm at the "
                    "largest beta (experiments.studies.dose_response.gains: does an arm read the dial out, damp it, or act downstream?)")
    args = ap.parse_args(argv)
    cfg = load_config(args.config)
    if args.betas:
        cfg = replace(cfg, betas=tuple(args.betas))
    if args.output_dir:
        cfg = replace(cfg, output_dir=args.output_dir)
    if args.eval_scenarios:
        cfg = replace(cfg, eval_scenarios=args.eval_scenarios)
    t0 = time.time()
    shard = tuple(args.replication_shard) if args.replication_shard else None
    summ = run_dose_response(cfg, only=args.only, reverse=args.reverse, replication_shard=shard)
    wall = time.time() - t0
    if summ is None:
        print(f"decoded {f'beta indices {args.only}' if args.only else f'replication shard {shard}'} in {wall:.0f} s")
        return 0
    bad = known_answer_failures(summ)
    import pandas as pd
    with pd.option_context("display.width", 250, "display.max_columns", None):
        print(summ[[c for c in SHOWN if c in summ]].round(3).to_string(index=False))
        reading = summ[summ["reading"].astype(str) != ""][["arm", "metric", "degraded_betas", "degraded_by", "reading"]]
        if len(reading):
            print(reading.to_string(index=False))
        norms = RunDir(cfg.output_dir).operator_norms_csv
        if norms.exists() and norms.stat().st_size:
            t = pd.read_csv(norms)
            if len(t):
                print("operator norms of the erasers (max over sites, by beta):")
                print(t.pivot_table(index="arm", columns="beta", values="operator_norm", aggfunc="max").round(2)
                      .to_string())
    print("known-answer failures:", bad or "none")
    if args.gains:
        from experiments.studies.dose_response.gains import arm_gains
        with pd.option_context("display.width", 250, "display.max_columns", 30):
            print(arm_gains(cfg).round(5).to_string(index=False))
    print(f"wall time {wall:.0f} s (this call; cells already on disk were skipped)")
    RunDir(cfg.output_dir).bench_json.write_text(json.dumps(
        {"wall_seconds": round(wall, 1), "failures": bad, "summary": summ.to_dict("records")}, indent=1,
        default=str) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
