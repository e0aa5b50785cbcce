"""`evenhand organism train | eval | items | fit-dial | dial | calibrate | dial-probe`: the model organisms (the
biased one with planted rules, the fair one) and the fair organism's bias dial."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from evenhand.support.messages import writable_dir, writable_file

from evenhand.scoring.metrics import INTERVAL
from evenhand.support.options import alias_help
from evenhand.inference.stats import INTERVAL_NAMES, RESAMPLES

from .common import BARS_ONLY, bootstrap_flags, json_flag, progress, progress_flag, refused_bootstrap
from .formatting import eval_text


def _organism_train(a) -> int:
    from dataclasses import replace

    from organism import COMMITTED, FAIR, RECIPES, train  # deferred: keeps the CLI's start fast
    from organism.evaluation import record_eval  # deferred: keeps the CLI's start fast
    from organism.probe import evaluate  # deferred: keeps the CLI's start fast
    recipe = replace(RECIPES[a.recipe], seed=a.seed)
    recipe = recipe if a.steps is None else replace(recipe, steps=a.steps)
    out = Path(a.out) if a.out else {"planted": COMMITTED, "fair": FAIR}[a.recipe]
    writable_dir(out)
    record = train(recipe, out)
    print(f"trained in {record['train_seconds']:.0f}s ({record['parameters']:,} parameters, "
          f"{record['train_examples']:,} examples); final answer loss {record['curve'][-1]['loss']:.4f}; wrote {out}")
    if not a.no_eval:
        res = evaluate(out, n_scenarios=a.eval_scenarios)
        print(eval_text(res))
        record_eval(out, res)
    return 0


def _organism_eval(a) -> int:
    from organism import COMMITTED  # deferred: keeps the CLI's start fast
    from organism.evaluation import record_eval  # deferred: keeps the CLI's start fast
    from organism.probe import evaluate  # deferred: keeps the CLI's start fast
    path = Path(a.path) if a.path else COMMITTED
    if a.no_probe and a.probe_only:
        raise SystemExit("--no-probe and --probe-only exclude each other")
    if a.no_probe and a.resamples is not None:
        raise ValueError(f"--resamples sets the probe's cluster bootstrap, and --no-probe leaves only the "
                         f"known-answer checks, whose 95% CIs are the {INTERVAL_NAMES[INTERVAL]}: drop --resamples")
    resamples = RESAMPLES if a.resamples is None else a.resamples
    if a.no_probe:
        from organism import heldout_responses, known_answer_checks
        res = known_answer_checks(heldout_responses(path, a.scenarios))
    elif a.probe_only:
        from organism import heldout_responses
        from organism.probe import side_probe
        res = {"probe": side_probe(heldout_responses(path, a.scenarios), resamples=resamples)}
    else:
        res = evaluate(path, n_scenarios=a.scenarios, resamples=resamples)
    if a.record:
        record_eval(path, res)
    if a.json:
        print(json.dumps(res, indent=2, default=str))
    else:
        print(eval_text(res))
    return 0


def _organism_items(a) -> int:
    from evenhand.runs.rundir import write_table_atomic
    from organism import COMMITTED, heldout_items
    writable_file(a.out)
    record = json.loads((Path(a.path) if a.path else COMMITTED).joinpath("organism.json").read_text())
    items = heldout_items(record, a.scenarios, a.degrees, a.seed)
    out = Path(a.out)
    write_table_atomic(out, items)
    print(f"wrote {len(items):,} items of {items['scenario_id'].nunique()} held-out scenarios to {out}")
    return 0


def _organism_fit_dial(a) -> int:
    from organism import FAIR  # deferred: keeps the CLI's start fast
    from organism.mechanism import dial_file  # deferred: keeps the CLI's start fast
    from organism.dials import fit_mechanism  # deferred: keeps the CLI's start fast
    path = Path(a.path) if a.path else FAIR
    out = Path(a.out) if a.out else path / dial_file(a.mechanism)
    writable_file(out)
    dial = fit_mechanism(a.mechanism, path, layer=a.layer, seed=a.seed, n_fit=a.fit_scenarios,
                         n_check=a.check_scenarios)
    dial.save(out)
    fit = dial.fit_record
    stats = {k: fit[k] for k in ("items", "r2", "heldout_r2", "mean_read_by_c", "heldout_mean_read_by_c") if k in fit}
    if isinstance(fit.get("heldout"), dict):  # a hook's record: its reads checked on held-out scenarios
        stats.update({f"heldout {k}": v for k, v in fit["heldout"].items() if k.startswith(("r2", "accuracy", "mean_gate"))})
    if isinstance(fit.get("degree"), dict):  # names: its pooled degree read checked on held-out scenarios
        stats["heldout degree read"] = {k: fit["degree"]["heldout"][k] for k in ("accuracy_d", "mean_d_by_degree")}
    print(f"dial mechanism {dial.name}: {dial.summary}\n  fit: {json.dumps(stats)}\n  wrote {out}")
    return 0


def _organism_dial(a) -> int:
    from organism import FAIR  # deferred: keeps the CLI's start fast
    from organism.calibration import beta_for  # deferred: keeps the CLI's start fast
    from organism.dial import write_dialled  # deferred: keeps the CLI's start fast
    from organism.dials import load_mechanism  # deferred: keeps the CLI's start fast
    from organism.mechanism import calibration_file  # deferred: keeps the CLI's start fast
    path = Path(a.path) if a.path else FAIR
    if (a.beta is None) == (a.fraggap is None):
        raise SystemExit("give exactly one of --beta and --fraggap")
    beta = a.beta if a.beta is not None else beta_for(
        json.loads((path / calibration_file(a.mechanism)).read_text()), a.fraggap / 100)
    writable_dir(a.out)
    out = write_dialled(beta, a.out, path, load_mechanism(path, a.mechanism))
    print(f"wrote the organism at {path} with the dial mechanism {a.mechanism} at beta={beta:.4g} folded into its "
          f"weights to {out}")
    return 0


def _organism_calibrate(a) -> int:
    from organism import FAIR  # deferred: keeps the CLI's start fast
    from organism.calibration import calibrate  # deferred: keeps the CLI's start fast
    from organism.figures import calibration_figure  # deferred: keeps the CLI's start fast
    from organism.mechanism import calibration_file  # deferred: keeps the CLI's start fast

    from experiments.studies.calibration import calibration_text, write_curve  # deferred: keeps the CLI's start fast
    path = Path(a.path) if a.path else FAIR
    out = Path(a.out) if a.out else path / calibration_file(a.mechanism)
    writable_file(out)
    curve = calibrate(a.betas, path, n_scenarios=a.scenarios, seed=a.seed, progress=progress(a), mechanism=a.mechanism)
    write_curve(curve, out)
    fig = calibration_figure(curve, out.with_suffix(""))
    print(calibration_text(curve))
    print(f"wrote {out} and {', '.join(map(str, fig))}")
    return 0


def _organism_dial_probe(a) -> int:
    from evenhand.runs.rundir import write_table_atomic  # deferred: keeps the CLI's start fast
    from organism.probe import DIAL_TARGETS, dial_probe_study  # deferred: keeps the CLI's start fast
    from probes.logistic import ProbeOptions  # deferred: keeps the CLI's start fast

    from .formatting import dial_probe_text
    if a.out:
        writable_dir(a.out)
    study = dial_probe_study(a.betas, a.path, n_scenarios=a.scenarios, degrees=a.degrees,
                             targets=a.targets or DIAL_TARGETS,
                             sites=a.sites, opts=ProbeOptions(seed=a.seed), resamples=a.resamples, seed=a.seed,
                             progress=progress(a))
    print(dial_probe_text(study))
    if a.out:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        write_table_atomic(out / "dial_probes.parquet", study)
        write_table_atomic(out / "dial_probes.csv", study)
        print(f"wrote {out / 'dial_probes.parquet'} and .csv")
    return 0


def mechanism_flag(s: argparse.ArgumentParser) -> None:
    """``--mechanism NAME`` (choices: the registered dial mechanisms; default the first)."""
    from organism.dials import load_builtin  # deferred: registering imports the model code
    from organism.mechanism import DEFAULT_MECHANISM, MECHANISMS
    load_builtin()
    s.add_argument("--mechanism", choices=sorted(MECHANISMS), default=DEFAULT_MECHANISM,
                   help="the dial mechanism (docs/ORGANISM.md, 'Dial mechanisms'): "
                        + "; ".join(f"{n}: {MECHANISMS[n].summary}" for n in sorted(MECHANISMS))
                        + f" (default {DEFAULT_MECHANISM})")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `organism` command group to the top-level subparsers ``sub``."""
    org = sub.add_parser("organism", help="the model organism with planted biases").add_subparsers(
        dest="organism_command", required=True)
    s = org.add_parser("train", help="train it from its recipe (deterministic from --seed)")
    s.add_argument("--recipe", choices=("planted", "fair"), default="planted",
                   help="planted: the biased organism on suite v1; fair: the fair organism on suite v2")
    s.add_argument("--seed", type=int, default=0, help="the training seed (data order and initialisation)")
    s.add_argument("--out", default=None, help="default: the recipe's committed directory")
    s.add_argument("--steps", type=int, default=None, help="training steps (default: the recipe's)")
    s.add_argument("--eval-scenarios", type=int, default=None, help="held-out scenarios to evaluate (default all)")
    s.add_argument("--no-eval", action="store_true", help="skip the held-out evaluation after training")
    s.set_defaults(fn=_organism_train)
    s = org.add_parser("eval", help="known-answer checks on held-out scenarios")
    s.add_argument("--path", default=None, help="default: the committed planted organism")
    s.add_argument("--scenarios", type=int, default=None, help="held-out scenarios (default all)")
    bootstrap_flags(s, ["resamples"], defaults={"resamples": None})  # the probe's; refused with --no-probe
    json_flag(s)
    s.add_argument("--no-probe", action="store_true", help="the known-answer checks only (no probe sweep)")
    s.add_argument("--probe-only", action="store_true",
                   help="the probe sweep only; with --record it replaces only the record's probe part")
    s.add_argument("--record", action="store_true",
                   help="store the result in the organism's organism.json (as `organism train` does)")
    s.set_defaults(fn=_organism_eval)
    s = org.add_parser("items", help="write the matched item set of its held-out scenarios (.jsonl/.parquet)")
    s.add_argument("--out", required=True, help="FILE.jsonl or FILE.parquet")
    s.add_argument("--path", default=None, help="default: the committed planted organism")
    s.add_argument("--scenarios", type=int, default=None, help="held-out scenarios (default all)")
    s.add_argument("--degrees", "--degree", type=int, nargs="+", default=None,
                   help=alias_help("keep only these degrees (default all)", ["--degree"]))
    s.add_argument("--seed", type=int, default=0, help="seed of the matched item set")
    s.set_defaults(fn=_organism_items)
    s = org.add_parser("fit-dial", help="fit the bias dial's directions a and v on the fair organism")
    s.add_argument("--path", default=None, help="default: the committed fair organism")
    s.add_argument("--layer", type=int, default=None,
                   help="the edited layer (last_layer: default the last) or the read layer (decision: default "
                        "the recipe's side_layer; xor, names: default 1); distributed edits every layer and refuses one")
    s.add_argument("--seed", type=int, default=0, help="seed of the fitting and checking items")
    s.add_argument("--fit-scenarios", type=int, default=24, help="train scenarios the read a is fitted on")
    s.add_argument("--check-scenarios", type=int, default=12, help="held-out scenarios the fit is checked on")
    s.add_argument("--out", default=None, help="default: the mechanism's dial file in the organism's directory "
                                               "(dial.json for last_layer, dial_NAME.json otherwise)")
    mechanism_flag(s)
    s.set_defaults(fn=_organism_fit_dial)
    s = org.add_parser("dial", help="write the fair organism with the bias dial folded into its weights")
    s.add_argument("--beta", type=float, default=None, help="the edit's strength")
    s.add_argument("--fraggap", type=float, default=None,
                   help="or: the FragGap (pp, at the mechanism's eval degree) to plant, read off its committed "
                        "calibration curve")
    s.add_argument("--out", required=True, help="the directory of the dialled organism")
    s.add_argument("--path", default=None, help="default: the committed fair organism")
    mechanism_flag(s)
    s.set_defaults(fn=_organism_dial)
    s = org.add_parser("calibrate", help="the dial's calibration curve: degree-3 FragGap by beta (JSON + figure) in "
                                         "the organism's folder (a run directory: a config of kind: calibration)")
    s.add_argument("--betas", type=float, nargs="+", required=True, help="the dial strengths measured")
    s.add_argument("--path", default=None, help="default: the committed fair organism")
    s.add_argument("--scenarios", type=int, default=None, help="held-out scenarios (default all)")
    refused_bootstrap(s, ["--resamples"], what="the curve's 95% CIs are")
    s.add_argument("--seed", type=int, default=0, help="seed of the held-out items")
    s.add_argument("--out", default=None, help="default: the mechanism's calibration file in the organism's "
                                               "directory (calibration.json for last_layer)")
    mechanism_flag(s)
    progress_flag(s, "no progress bar")
    s.set_defaults(fn=_organism_calibrate)
    from probes.dataset import LABELS  # deferred: keeps the CLI's start fast
    s = org.add_parser("dial-probe", help="the probe study of the fair organism at several dial strengths")
    s.add_argument("--betas", type=float, nargs="+", required=True, help="the dial strengths probed")
    s.add_argument("--path", default=None, help="default: the committed fair organism")
    s.add_argument("--scenarios", type=int, default=None, help="held-out scenarios (default all)")
    s.add_argument("--degrees", "--degree", type=int, nargs="+", default=[3],
                   help=alias_help("degrees of the items probed (default 3)", ["--degree"]))
    s.add_argument("--targets", nargs="+", default=None, choices=LABELS,
                   help="labels to probe (default: amb_side departed flipped side_residual favours_minority)")
    s.add_argument("--sites", nargs="+", default=["residual"], help="cache sites (default: embed and every block)")
    bootstrap_flags(s, ["resamples"])
    s.add_argument("--seed", type=int, default=0, help="seed of the probes' folds and of the bootstrap")
    s.add_argument("--out", default=None, help="a directory for dial_probes.parquet and .csv")
    progress_flag(s, BARS_ONLY)
    s.set_defaults(fn=_organism_dial_probe)
