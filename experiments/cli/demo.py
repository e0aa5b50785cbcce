"""`evenhand demo`: the main job on the embedded model organism (decisions, metrics with CIs against
the planted truth, the residual cache and a probe sweep)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from .formatting import probe_text, score_table


def _demo(a) -> int:
    from experiments.config import CacheConfig, RunConfig, SuiteConfig
    from experiments.runner import run_config, suite_items

    from evenhand.models.loading import ModelSpec
    from evenhand.models.organism import COMMITTED, heldout_items
    from evenhand.models.policy import PlantedPolicy, planted_truth
    from evenhand.runs import write_table_atomic
    print("EvenHand demo: the model organism (a small Gemma3ForCausalLM trained from scratch to follow a planted,\n"
          "known policy) answers held-out scenarios through the real pipeline: loading, chat template, batched\n"
          "greedy decisions, parsing, metrics with CIs, the residual cache and a probe sweep. Its numbers validate\n"
          "the tool against known answers; they say nothing about any real model.\n")
    record = json.loads((COMMITTED / "organism.json").read_text())
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    items_file = out / "items.parquet"
    if not items_file.exists():
        write_table_atomic(items_file, heldout_items(record, a.scenarios, seed=0))
    cfg = RunConfig(model=ModelSpec("evenhand-organism"), output_dir=str(out / "run"),
                    suite=SuiteConfig(subset=str(items_file)), mode="answer", batch_size=64,
                    cache=CacheConfig(enabled=True, dtype="float32"))
    run, report = run_config(cfg, progress=not a.no_progress)
    truth = planted_truth(PlantedPolicy.from_dict(record["recipe"]["policy"]), suite_items(cfg.suite),
                          report["contrast_type"])
    print(score_table(report, truth=truth))
    from evenhand.runs import write_json_atomic
    write_json_atomic(run.planted_truth_path, {str(k): v for k, v in truth.items()})
    print("'planted' is the policy's own value on these same items.\n")
    from probes.dataset import from_run
    from probes.logistic import ProbeOptions
    from probes.sweep import probe_sweep, write_sweep
    ds = from_run(run.path, "favours_minority", filters={"degree": 3, "pressured": False})
    table, _ = probe_sweep(ds, ProbeOptions(), resamples=1000)
    write_sweep(table, run.probe_dir("favours_minority").path, ds, ProbeOptions(), run_dir=str(run.path))
    print(probe_text(table, ds))
    print(f"\nrun directory: {run.path} (manifest.json, responses.parquet, metrics.json, activations/, probes/)")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add `demo` to the top-level subparsers ``sub``."""
    s = sub.add_parser("demo", help="the main job on the embedded default")
    s.add_argument("--out", default="runs/demo")
    s.add_argument("--scenarios", type=int, default=20, help="held-out scenarios to run (default 20)")
    s.add_argument("--no-progress", action="store_true")
    s.set_defaults(fn=_demo)
