"""`evenhand demo`: the main job on the fair model organism with the bias dial at a known setting
(decisions, metrics with CIs against the planted truth, the residual cache and a probe sweep);
the known answer is in :mod:`organism.demo`."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from .common import progress, progress_flag
from experiments.studies.text import score_table

from .formatting import probe_text, truth_text


def _demo(a) -> int:
    import pandas as pd

    from evenhand.models.loading import ModelSpec  # deferred: keeps the CLI's start fast
    from organism import FAIR, record_suite  # deferred: keeps the CLI's start fast
    from organism.calibration import CALIBRATION_FILE  # deferred: keeps the CLI's start fast
    from evenhand.models.policy import PlantedPolicy, matched_items, planted_truth
    from evenhand.runs.rundir import write_json_atomic, write_table_atomic  # deferred: keeps the CLI's start fast
    from experiments.studies.run.config import CacheConfig, RunConfig, SuiteConfig
    from organism.demo import (  # deferred: keeps the CLI's start fast
        coverage,
        demo_scenario_ids,
        dial_beta,
        dialled_organism,
        load_curve,
        planted_truths,
        truth_json,
    )
    from experiments.studies import get  # deferred: keeps the CLI's start fast
    curve = load_curve(Path(a.calibration) if a.calibration else FAIR / CALIBRATION_FILE)
    beta = dial_beta(curve, None if a.fraggap is None else a.fraggap / 100, a.beta)
    print("EvenHand demo: the fair model organism (a small Gemma3ForCausalLM trained from scratch to follow a fair,\n"
          "known policy) with a bias of known strength implanted in its weights (the bias dial, a rank-1 edit,\n"
          "docs/ORGANISM.md) answers held-out scenarios through the real pipeline: loading, chat template, batched\n"
          "greedy decisions, parsing, metrics with CIs, the residual cache and a probe sweep. Its numbers validate\n"
          "the tool against known answers; they say nothing about any real model.\n")
    record = json.loads((FAIR / "organism.json").read_text())
    skip = curve["n_scenarios"] if curve else 0
    ids = demo_scenario_ids(record, a.scenarios, skip)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    organism = dialled_organism(beta, out / f"organism-b{beta:g}")
    items_file = out / f"items-{a.scenarios}.parquet"
    if not items_file.exists():
        write_table_atomic(items_file, matched_items(ids, 0, suite=record_suite(record)))
    print(f"dial: beta {beta:g} (W_down[{json.loads((organism / 'dial.json').read_text())['layer']}] += beta v a^T) "
          f"-> {organism}\nscenarios: {len(ids)} held out from its training (suite v{record_suite(record)}), held-out "
          f"list positions {skip + 1}-{skip + len(ids)}" + (f", after the calibration's first {skip}" if skip else "")
          + "\n")
    cfg = RunConfig(model=ModelSpec(str(organism), dtype="float32", device="cpu"), output_dir=str(out / f"run-b{beta:g}-s{a.scenarios}"),
                    suite=SuiteConfig(subset=str(items_file)), mode="answer", batch_size=64,
                    cache=CacheConfig(enabled=True, dtype="float32"))
    run, report = get("run").run(cfg, progress=progress(a))  # the run study, on its local backend
    fair = planted_truth(PlantedPolicy.from_dict(record["recipe"]["policy"]), pd.read_parquet(items_file),
                         report["contrast_type"])
    truths = planted_truths(fair, beta, curve)
    print(score_table(report))
    print()
    print(truth_text(coverage(report, truths), beta, curve))
    write_json_atomic(run.planted_truth_path, truth_json(truths, beta))
    print()
    from probes.dataset import from_run  # deferred: keeps the CLI's start fast
    from probes.logistic import ProbeOptions  # deferred: keeps the CLI's start fast
    from probes.sweep import probe_sweep, saved_sweep, write_sweep  # deferred: keeps the CLI's start fast
    ds = from_run(run.path, "favours_minority", filters={"degree": 3, "pressured": False})
    where = run.probe_dir("favours_minority").path
    table = saved_sweep(where, ds, ProbeOptions(), resamples=1000)  # a resumed demo: the same inputs, not re-fitted
    if table is not None:
        print(f"probe sweep: done, skipped (the sweep saved in {where} is of the same activations, labels and "
              f"options)")
    else:
        table, _ = probe_sweep(ds, ProbeOptions(), resamples=1000)
        write_sweep(table, where, ds, ProbeOptions(), run_dir=str(run.path), resamples=1000)
    print(probe_text(table, ds))
    print(f"\nrun directory: {run.path} (manifest.json, responses.parquet, metrics.json, planted_truth.json, "
          f"activations/, probes/)")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add `demo` to the top-level subparsers ``sub``."""
    s = sub.add_parser("demo", help="the main job on the fair organism with the bias dial at a known setting")
    s.add_argument("--out", default="runs/demo", help="where the dialled organism and the run go (default runs/demo)")
    s.add_argument("--scenarios", type=int, default=20,
                   help="held-out scenarios to run, after the calibration's (default 20; at most 35)")
    dial = s.add_mutually_exclusive_group()
    dial.add_argument("--fraggap", type=float, default=None,
                      help="degree-3 FragGap (pp) to plant, read off the calibration curve (default 10)")
    dial.add_argument("--beta", type=float, default=None, help="or: the dial's beta (0: the fair organism)")
    s.add_argument("--calibration", default=None,
                   help="the calibration curve (default: calibration.json of the fair organism)")
    progress_flag(s)
    s.set_defaults(fn=_demo)
