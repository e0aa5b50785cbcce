"""The dose-response benchmark of every intervention on the fair organism with the bias dial.

    python benchmarks/bench_dose_response.py experiments/configs/dose_response.yaml
    python benchmarks/bench_dose_response.py experiments/configs/dose_response.yaml --betas 0 10 20 40 80
    python benchmarks/bench_dose_response.py CONFIG --output-dir runs/dose_small --eval-scenarios 8
    python benchmarks/bench_dose_response.py CONFIG --only 0 3 & python benchmarks/bench_dose_response.py CONFIG --only 1 2 4; \
        python benchmarks/bench_dose_response.py CONFIG                  # two processes, then the table
    python benchmarks/bench_dose_response.py CONFIG --replication-shard 0 2 & \
        python benchmarks/bench_dose_response.py CONFIG --replication-shard 1 2   # independent replications
    python benchmarks/bench_dose_response.py experiments/configs/dose_response_mechanisms.yaml \
        --mechanism last_layer decision distributed names xor --jobs 2 --across   # one run per mechanism

More in docs/interventions/dose_response.md. Not part of the test run (tests/test_dose_response.py runs a
CI-sized version)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pandas as pd

from evenhand.runs.rundir import RunDir
from experiments.studies.dose_response.across import CLASSES, write_across
from experiments.studies.dose_response.study import load_config, run_dose_response
from experiments.studies.dose_response.scoring import known_answer_failures
from organism.dials import mechanism_class
from organism.mechanism import MechanismError


SHOWN = ("arm", "known", "known_slope", "metric", "slope", "slope_low", "slope_high", "minus_random",
         "minus_random_low", "minus_random_high", "scrambled_slope", "minus_scrambled", "minus_scrambled_low",
         "minus_scrambled_high", "degraded", "fpr_beta0", "fpr_replications", "coverage", "coverage_low",
         "coverage_n", "slope_coverage", "slope_coverage_low", "slope_coverage_high", "slope_coverage_n",
         "replication_slope_mean", "replication_slope_se",
         "max_accuracy_loss", "max_refusal_change", "max_pressured_refusal_change")
"""The summary columns printed (``summary.csv`` and ``bench.json`` hold them all)."""


def parser() -> argparse.ArgumentParser:
    """The command line (every option with its help)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", help="a dose_response config (experiments/configs/dose_response*.yaml)")
    ap.add_argument("--betas", type=float, nargs="+", help="a stand-in beta grid (first 0) instead of the curve")
    ap.add_argument("--output-dir", help="the run directory (with --mechanism: the directory of the runs, one "
                    "<output-dir>/<mechanism>/ each); default the config's output_dir")
    ap.add_argument("--eval-scenarios", type=int, help="held-out scenarios of the main cells (config eval_scenarios)")
    ap.add_argument("--mechanism", nargs="+", metavar="M", help="run the benchmark with each of these dial mechanisms "
                    "(organism.dials; config field mechanism), each in <output_dir>/<M>/ (resumable each); without it "
                    "the config's mechanism in output_dir itself")
    ap.add_argument("--jobs", type=int, default=1, help="with --mechanism: processes running at once; each "
                    "mechanism's main cells and its independent replications are separate worker processes, then "
                    "one call scores it (logs in <output_dir>/logs/); 1: one mechanism after the other in this process")
    ap.add_argument("--across", action="store_true", help="with --mechanism: after the runs, the table, robustness "
                    "summary and figure across the mechanisms in <output_dir>/across/ "
                    "(experiments.studies.dose_response.across; benchmarks/bench_mechanisms.py writes them alone)")
    ap.add_argument("--only", type=int, nargs="+", help="decode these beta indices only (no scoring): run one "
                    "process per share of the betas on the same output directory, then once without --only")
    ap.add_argument("--reverse", action="store_true", help="decode each beta's arms in reverse order (a second "
                    "process on betas another is decoding)")
    ap.add_argument("--replication-shard", type=int, nargs=2, metavar=("I", "N"), help="decode only the "
                    "independent replications r with r %% N == I (no main cells, no scoring): one process per I")
    ap.add_argument("--gains", action="store_true", help="after scoring, the dial's gain under each arm at the "
                    "largest beta (experiments.studies.dose_response.gains: does an arm read the dial out, damp it, or act downstream?)")
    return ap


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (for each mechanism of --mechanism); exit 1 when an oracle or a control misses its known
    answer (under any mechanism) or a worker process fails.

    ``--betas`` replaces the calibration curve by a stand-in grid. ``--mechanism``, ``--jobs`` and ``--across``: one
    run per dial mechanism and the table across them (docs/interventions/dose_response.md, "The benchmark across dial
    mechanisms"; ``benchmarks/bench_mechanisms.py`` writes that table from runs on disk)."""
    ap = parser()
    args = ap.parse_args(argv)
    cfg = load_config(args.config)
    if args.betas:
        cfg = replace(cfg, betas=tuple(args.betas))
    if args.output_dir:
        cfg = replace(cfg, output_dir=args.output_dir)
    if args.eval_scenarios:
        cfg = replace(cfg, eval_scenarios=args.eval_scenarios)
    if not args.mechanism:
        for flag, given in (("--jobs", args.jobs != 1), ("--across", args.across)):
            if given:
                ap.error(f"{flag} needs --mechanism")
        return run_one(cfg, args)
    if args.jobs < 1:
        ap.error(f"--jobs must be at least 1, got {args.jobs}")
    try:
        for m in args.mechanism:
            mechanism_class(m)
    except MechanismError as exc:
        ap.error(f"--mechanism: {exc}")
    mechs = list(dict.fromkeys(args.mechanism))
    if args.jobs > 1:
        if args.only or args.replication_shard or args.gains:
            ap.error("--jobs runs every share itself: give it without --only, --replication-shard and --gains")
        rc = run_parallel(cfg, mechs, args)
    else:
        rc = max(run_one(mechanism_config(cfg, m), args) for m in mechs)
    if args.across and not (args.only or args.replication_shard):
        try:
            _, rob = write_across({m: mechanism_config(cfg, m).output_dir for m in mechs}, across_dir(cfg))
        except (FileNotFoundError, ValueError) as exc:  # a mechanism's run not scored (its worker failed)
            print(f"across the mechanisms: not written: {exc}", file=sys.stderr)
            return 1
        with pd.option_context("display.width", 250, "display.max_columns", None, "display.max_colwidth", 60):
            print(rob[["arm", "metric", "verdict", *CLASSES]].to_string(index=False))
        print(f"across the mechanisms: {across_dir(cfg)}")
    return rc


def mechanism_config(cfg, mechanism: str):
    """The config of ``mechanism``'s run: the config's with that mechanism, in ``<output_dir>/<mechanism>``."""
    return replace(cfg, mechanism=mechanism, output_dir=str(Path(cfg.output_dir) / mechanism))


def across_dir(cfg) -> Path:
    """Where the across-mechanism outputs go: ``<output_dir>/across``."""
    return RunDir(cfg.output_dir).across_dir


def worker_calls(cfg, mechs: list[str], args) -> list[tuple[str, list[str], set[str]]]:
    """(name, argv, names it waits for) of each process of a ``--jobs`` run: per mechanism its main cells
    (``--only`` every beta index) and its independent replications (``--replication-shard 0 1``), then its scoring
    call once both are done; the main cells first (the replications read their fits at beta 0)."""
    base = [sys.executable, str(Path(__file__).resolve()), args.config, "--output-dir", cfg.output_dir]
    if args.betas:
        base += ["--betas", *map(str, args.betas)]
    if args.eval_scenarios:
        base += ["--eval-scenarios", str(args.eval_scenarios)]
    n = len(cfg.betas or cfg.fraggaps)
    reps = cfg.replicate == "independent" and cfg.replications > 0
    calls = [(f"{m}-cells", [*base, "--mechanism", m, "--only", *map(str, range(n))], set()) for m in mechs]
    calls += [(f"{m}-replications", [*base, "--mechanism", m, "--replication-shard", "0", "1"], set())
              for m in mechs if reps]
    calls += [(f"{m}-score", [*base, "--mechanism", m], {f"{m}-cells"} | ({f"{m}-replications"} if reps else set()))
              for m in mechs]
    return calls


def run_parallel(cfg, mechs: list[str], args) -> int:
    """Run :func:`worker_calls` with at most ``args.jobs`` processes at once (a scoring call as soon as its
    workers are done); each one's output in ``<output_dir>/logs/<name>.log``. Returns 1 if any call failed."""
    import subprocess

    logs = Path(cfg.output_dir) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    pending, running, rcs = worker_calls(cfg, mechs, args), {}, {}
    t0 = time.time()
    while pending or running:
        for call in [c for c in pending if c[2] <= set(rcs)]:
            if len(running) >= args.jobs:
                break
            name, argv, deps = call
            pending.remove(call)
            if any(rcs[d] != 0 for d in deps):
                rcs[name] = 1
                print(f"[{time.time() - t0:6.0f} s] {name}: skipped ({', '.join(d for d in deps if rcs[d])} failed)")
                continue
            fh = open(logs / f"{name}.log", "w")
            running[name] = (subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT), fh, time.time())
            print(f"[{time.time() - t0:6.0f} s] {name}: started (log {logs / f'{name}.log'})", flush=True)
        for name, (proc, fh, start) in list(running.items()):
            if proc.poll() is not None:
                fh.close()
                rcs[name] = proc.returncode
                del running[name]
                print(f"[{time.time() - t0:6.0f} s] {name}: exit {proc.returncode} after {time.time() - start:.0f} s",
                      flush=True)
        if pending and not running and not [c for c in pending if c[2] <= set(rcs)]:
            raise RuntimeError(f"calls waiting on calls that never ran: {[c[0] for c in pending]}")
        time.sleep(0.5)
    print(f"wall time {time.time() - t0:.0f} s for {len(mechs)} mechanism(s) with {args.jobs} processes")
    return 1 if any(rcs.values()) else 0


def run_one(cfg, args) -> int:
    """Run (or resume: finished (arm, beta) cells are skipped) one run directory of the benchmark
    (:func:`experiments.studies.dose_response.study.run_dose_response`, through the stage driver) and print its
    summary; 1 on a known-answer failure.

    The summary, per arm: the slope of removed against implanted FragGap with its CI, minus the random and the
    scrambled control's, degradation, false-positive rate at beta 0, coverage of the known removal and of the known
    slope over replications, the largest accuracy loss and refusal rises. Then what fails the known-answer bar
    (:func:`experiments.studies.dose_response.scoring.known_answer_failures`) and the wall time; all of it is written
    to ``<output_dir>/bench.json``."""
    t0 = time.time()
    shard = tuple(args.replication_shard) if args.replication_shard else None
    summ = run_dose_response(cfg, only=args.only, reverse=args.reverse, replication_shard=shard)
    wall = time.time() - t0
    if summ is None:
        print(f"decoded {f'beta indices {args.only}' if args.only else f'replication shard {shard}'} in {wall:.0f} s")
        return 0
    bad = known_answer_failures(summ)
    print(f"mechanism {cfg.mechanism} ({cfg.output_dir}):")
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
        {"wall_seconds": round(wall, 1), "mechanism": cfg.mechanism, "failures": bad,
         "summary": summ.to_dict("records")}, indent=1, default=str) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
