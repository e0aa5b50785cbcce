"""`evenhand compare` (an interventions comparison config), `compare-runs` (two response files), `bbq`,
`modes` and `interventions list`: the studies that compare configurations of one model."""
from __future__ import annotations

import argparse
import json

from evenhand.scoring.metrics import INTERVAL
from evenhand.support.options import options_from_args
from evenhand.inference.stats import INTERVAL_NAMES

from .common import (SUITE_FLAGS, boot_args, bootstrap_options, json_flag, model_args, model_spec, progress,
                     progress_flag, refused_bootstrap)
from .formatting import compare_table


RUNS_FLAGS = ("contrast_type", "convention", "json", "resamples", "seed")
"""The flags of `compare-runs` that an old two-file `compare` call may still pass (refused with a pointer)."""


def _compare(a) -> int:
    """`evenhand compare CONFIG.yaml`: run an interventions comparison and print its table."""
    if a.other is not None or not str(a.config).endswith((".yaml", ".yml")):
        raise ValueError("`evenhand compare` runs an interventions comparison config (CONFIG.yaml); two response "
                         "files are compared with `evenhand compare-runs BASE OTHER`")
    given = [f"--{f.replace('_', '-')}" for f in RUNS_FLAGS if getattr(a, f"runs_{f}") not in (None, False)]
    if given:
        raise ValueError(f"{', '.join(given)} applies to two response files (`evenhand compare-runs BASE OTHER`); "
                         f"a comparison config is scored with EvenHand's convention, with the resamples and seed it "
                         f"sets")
    from experiments.studies.compare import load_config  # deferred: keeps the CLI's start fast
    return run_comparison(load_config(a.config), progress=progress(a))


def _compare_runs(a) -> int:
    """`evenhand compare-runs BASE OTHER`: two response files, paired item by item."""
    from evenhand.scoring.metrics import compare  # deferred: keeps the CLI's start fast
    from evenhand.scoring.paired import score_arms  # deferred: keeps the CLI's start fast
    from evenhand.rows.schema import load_rows  # deferred: keeps the CLI's start fast
    base, other = load_rows(a.base), load_rows(a.other)
    degrees = sorted(set(a.degrees))
    base, other = (at_degrees(r, degrees, name) for r, name in ((base, a.base), (other, a.other)))
    boot = bootstrap_options(a)
    result = compare(base, other, contrast_type=a.contrast_type, bootstrap=boot, convention=a.convention)
    common = set(base["item_id"]) & set(other["item_id"])  # the items compare() paired
    paired = score_arms({"base": base[base["item_id"].isin(common)], "other": other[other["item_id"].isin(common)]},
                        "base", bootstrap=boot, contrast_type=result["contrast_type"])
    result["score"] = paired[paired["arm"] == "other"].to_dict("records")  # EvenHand's convention, refusals counted
    result["degrees"] = degrees
    print(json.dumps(result, indent=2, default=str) if a.json else compare_table(result))
    return 0


def at_degrees(rows, degrees: list[int], name: str):
    """The rows of the identity ``degrees`` (`compare-runs --degrees`; default 3, the headline's, as `score` and
    `table` report); none there: a ValueError naming the file and the degrees it has."""
    kept = rows[rows["degree"].isin(degrees)]
    if kept.empty:
        has = ", ".join(str(d) for d in sorted(rows["degree"].unique()))
        raise ValueError(f"{name}: no items of degree {', '.join(map(str, degrees))} (--degrees); it has degree(s) "
                         f"{has}")
    return kept


def run_comparison(cfg, progress: bool) -> int:
    """Run a parsed comparison config and print its table (`compare CONFIG.yaml`, `run CONFIG.yaml`)."""
    from experiments.studies import get  # deferred: keeps the CLI's start fast
    study = get("compare")
    print(study.text(cfg, study.run(cfg, progress=progress)))
    return 0


def bbq(a: argparse.Namespace) -> int:
    """`evenhand bbq CONFIG.yaml` (also `run` on a BBQ config): run it and print the pooled table."""
    from experiments.studies import get  # deferred: keeps the CLI's start fast
    from experiments.studies.bbq import load_config  # deferred: keeps the CLI's start fast
    study, cfg = get("bbq"), load_config(a.config)
    print(study.text(cfg, study.run(cfg, progress=progress(a))))
    return 0


def _modes(a) -> int:
    from experiments.studies import get  # deferred: keeps the CLI's start fast
    from experiments.studies.modes import ModesConfig  # deferred: keeps the CLI's start fast
    from experiments.studies.run.config import SuiteConfig  # deferred: keeps the CLI's start fast
    cfg = ModesConfig(model=model_spec(a), output_dir=a.out, suite=options_from_args(SuiteConfig, a, SUITE_FLAGS),
                      batch_size=a.batch_size)
    study = get("modes")
    print(study.text(cfg, study.run(cfg, progress=progress(a))))
    return 0


def _interventions_list(a) -> int:
    from interventions.registry import registered  # deferred: keeps the CLI's start fast
    rows = registered()
    if a.json:
        print(json.dumps(rows, indent=2))
    else:
        wn = max([len("name")] + [len(r["name"]) for r in rows]) + 2
        wk = max([len("kind")] + [len(r["kind"]) for r in rows]) + 2
        print(f"{'name':<{wn}}{'kind':<{wk}}description")
        for r in rows:
            print(f"{r['name']:<{wn}}{r['kind']:<{wk}}{r['description']}")
    return 0


def register_compare(sub: argparse._SubParsersAction) -> None:
    """Add `compare` and `compare-runs` to the top-level subparsers ``sub``."""
    s = sub.add_parser("compare", help="interventions against the baseline: run a comparison config (CONFIG.yaml)")
    s.add_argument("config", help="a comparison config (.yaml; experiments/configs/compare_interventions.yaml)")
    s.add_argument("other", nargs="?", default=None, help=argparse.SUPPRESS)  # the old two-file form, refused
    progress_flag(s)
    for f in RUNS_FLAGS:  # compare-runs' flags, refused with a pointer to it
        flag = f"--{f.replace('_', '-')}"
        if f == "json":
            s.add_argument(flag, dest=f"runs_{f}", action="store_true", help=argparse.SUPPRESS)
        else:
            s.add_argument(flag, dest=f"runs_{f}", default=None, help=argparse.SUPPRESS)
    s.set_defaults(fn=_compare)
    s = sub.add_parser("compare-runs", help="two response files (BASE OTHER) paired item by item: the difference "
                                            "of every metric (other - base), McNemar and the intervention score",
                       description="Compare two runs' responses on their shared items: each metric's paired "
                                   f"difference (other - base) with a paired 95% CI ({INTERVAL_NAMES[INTERVAL]}), McNemar "
                                   "on the GT baseline items, and the intervention score (change toward zero, accuracy "
                                   "loss, refusal change; evenhand.scoring.paired). --resamples and --seed set only the "
                                   "random sign patterns of the accuracy loss's sign-flip test (more than 16 "
                                   "scenarios). Degree 3 by default (--degrees). An interventions comparison "
                                   "config is run with "
                                   "`evenhand compare CONFIG.yaml`.")
    s.add_argument("base", help="the base run's responses (.parquet, .jsonl or .csv; a run directory's "
                                "responses.parquet)")
    s.add_argument("other", help="the other run's responses, the same items decided another way")
    s.add_argument("--degrees", "--degree", type=int, nargs="+", choices=[0, 1, 2, 3], default=[3],
                   help="the identity degrees compared (default 3: the headline's explicit labels, as `score` and "
                        "`table` report; 0 1 2 3 pools every degree)")
    boot_args(s)
    s.set_defaults(fn=_compare_runs)


def register_modes_bbq_interventions(sub: argparse._SubParsersAction) -> None:
    """Add `modes`, `bbq` and `interventions list` to the top-level subparsers ``sub``."""
    s = sub.add_parser("modes", help="the suite decided in answer and in logprob mode on one model, compared")
    model_args(s)
    refused_bootstrap(s, ["--resamples"], what="both modes' 95% CIs and their paired differences are")  # --seed: the subset's
    s.set_defaults(fn=_modes)
    s = sub.add_parser("bbq", help="BBQ asked five ways on one model (CONFIG.yaml)")
    s.add_argument("config", help="a BBQ config (.yaml; experiments/configs/bbq_organism.yaml)")
    progress_flag(s)
    s.set_defaults(fn=bbq)
    iv = sub.add_parser("interventions", help="the registered debiasing interventions").add_subparsers(
        dest="interventions_command", required=True)
    s = iv.add_parser("list", help="name, kind and description of each")
    json_flag(s)
    s.set_defaults(fn=_interventions_list)
