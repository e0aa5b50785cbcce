"""`evenhand compare`, `bbq`, `modes` and `interventions list`: the studies that compare
configurations of one model."""
from __future__ import annotations

import argparse
import json

from evenhand.options import options_from_args

from .common import SUITE_FLAGS, boot_args, model_args, model_spec
from .formatting import compare_table, compare_text


def _compare(a) -> int:
    if a.other is None:
        if not str(a.base).endswith((".yaml", ".yml")):
            raise ValueError("compare takes a comparison config (.yaml) or two response files (BASE OTHER)")
        if a.convention != "evenhand":
            raise ValueError("--convention applies to two response files (BASE OTHER); a comparison config is "
                             "scored with EvenHand's convention")
        return _compare_interventions(a)
    from evenhand.metrics import compare
    from evenhand.paired import score_arms
    from evenhand.schema import load_rows
    base, other = load_rows(a.base), load_rows(a.other)
    result = compare(base, other, contrast_type=a.contrast_type, resamples=a.resamples, seed=a.seed,
                     convention=a.convention)
    common = set(base["item_id"]) & set(other["item_id"])  # the items compare() paired
    paired = score_arms({"base": base[base["item_id"].isin(common)], "other": other[other["item_id"].isin(common)]},
                        "base", resamples=a.resamples, seed=a.seed, contrast_type=result["contrast_type"])
    result["score"] = paired[paired["arm"] == "other"].to_dict("records")  # EvenHand's convention, refusals counted
    print(json.dumps(result, indent=2, default=str) if a.json else compare_table(result))
    return 0


def _compare_interventions(a) -> int:
    from interventions.compare import load_config
    return run_comparison(load_config(a.base), progress=not a.no_progress)


def run_comparison(cfg, progress: bool) -> int:
    """Run a parsed comparison config and print its table (`compare CONFIG.yaml`, `run CONFIG.yaml`)."""
    from interventions.compare import run_compare
    from .power import power_text, selection_text
    table = run_compare(cfg, progress=progress)
    print(compare_text(table))
    for block in (selection_text(table), power_text(table)):
        if block:
            print("\n" + block)
    print(f"\nwrote {cfg.output_dir}/compare.parquet (+ .csv), frontier.pdf/.svg/.png, cells/, fitted/")
    return 0


def bbq(a: argparse.Namespace) -> int:
    """`evenhand bbq CONFIG.yaml` (also `run` on a BBQ config): run it and print the pooled table."""
    from experiments.studies import get
    from experiments.studies.bbq import load_config
    study, cfg = get("bbq"), load_config(a.config)
    print(study.text(cfg, study.run(cfg, progress=not a.no_progress)))
    return 0


def _modes(a) -> int:
    from experiments.studies import get
    from experiments.studies.modes import ModesConfig
    from experiments.studies.run_config import SuiteConfig
    cfg = ModesConfig(model=model_spec(a), output_dir=a.out, suite=options_from_args(SuiteConfig, a, SUITE_FLAGS),
                      batch_size=a.batch_size, resamples=a.resamples)
    study = get("modes")
    print(study.text(cfg, study.run(cfg, progress=not a.no_progress)))
    return 0


def _interventions_list(a) -> int:
    from interventions.registry import registered
    rows = registered()
    if a.json:
        print(json.dumps(rows, indent=2))
    else:
        for r in rows:
            print(f"{r['name']:<18}{r['kind']:<12}{r['description']}")
    return 0


def register_compare(sub: argparse._SubParsersAction) -> None:
    """Add `compare` to the top-level subparsers ``sub``."""
    s = sub.add_parser("compare", help="interventions against the baseline (CONFIG.yaml), or two runs (BASE OTHER)")
    s.add_argument("base", help="a comparison config (.yaml), or the base run's responses")
    s.add_argument("other", nargs="?", default=None, help="the other run's responses (two-run form)")
    s.add_argument("--no-progress", action="store_true")
    boot_args(s)
    s.set_defaults(fn=_compare)


def register_modes_bbq_interventions(sub: argparse._SubParsersAction) -> None:
    """Add `modes`, `bbq` and `interventions list` to the top-level subparsers ``sub``."""
    s = sub.add_parser("modes", help="the suite decided in answer and in logprob mode on one model, compared")
    model_args(s)
    s.add_argument("--resamples", type=int, default=1000)
    s.add_argument("--no-progress", action="store_true")
    s.set_defaults(fn=_modes)
    s = sub.add_parser("bbq", help="BBQ asked five ways on one model (CONFIG.yaml)")
    s.add_argument("config")
    s.add_argument("--no-progress", action="store_true")
    s.set_defaults(fn=bbq)
    iv = sub.add_parser("interventions", help="the registered debiasing interventions").add_subparsers(
        dest="interventions_command", required=True)
    s = iv.add_parser("list", help="name, kind and description of each")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=_interventions_list)
