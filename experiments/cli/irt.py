"""`evenhand irt`: fit 2PL item parameters on many runs (`fit`), choose an informative core subset (`core`),
evaluate a new model adaptively (`adapt`), and write a simulated population of runs with known parameters
(`simulate`). docs/IRT.md."""
from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from evenhand.running.decisions import DecideOptions
from evenhand.irt.adaptive import AdaptiveOptions
from evenhand.irt.mml import FIT_METHODS
from evenhand.irt.select import METHODS
from evenhand.irt.simulate import Population
from evenhand.models.loading import ModelSpec
from evenhand.support.options import add_flags, options_from_args

from .common import MODEL_FLAGS, json_flag, model_spec

DECIDE_FLAGS = ("mode", "engine")
"""The DecideOptions fields `irt adapt --model` takes (their choices and help declared once, on DecideOptions)."""
ADAPT_FLAGS = ("target_se", "budget", "prior_sd", "min_items", "per_scenario", "discrimination")
POPULATION_FLAGS = ("a_sd", "b_mean", "b_sd", "theta_sd")


def _run_rows(path: str):
    """The validated responses of a run directory (``responses.parquet``) or a responses file."""
    from evenhand.runs.rundir import RunDir  # deferred: keeps the CLI's start fast
    from evenhand.rows.schema import load_rows  # deferred: keeps the CLI's start fast
    p = Path(path)
    if p.is_dir():
        if not RunDir(p).responses_path.exists():
            raise FileNotFoundError(f"{p} holds no responses.parquet (a run directory of `evenhand run`/`decide`)")
        return load_rows(RunDir(p).responses_path)
    return load_rows(p)


def _fit(a: argparse.Namespace) -> int:
    from evenhand.irt.fit import fit_runs  # deferred: pulls in girth and the scorer
    from evenhand.runs.rundir import write_table_atomic  # deferred: keeps the CLI's start fast
    # deferred: keeps the CLI's start fast
    from evenhand.running.stages import FnStage, finished_with, open_run, run_stages
    from evenhand.suite.content import items_version  # deferred: keeps the CLI's start fast
    if len(a.runs) < 2:
        raise ValueError("runs: `evenhand irt fit` needs at least 2 runs")
    names = [str(Path(r)) for r in a.runs]
    if len(set(names)) != len(names):
        raise ValueError("runs: a run is given twice")
    tables = [_run_rows(r) for r in a.runs]
    version = items_version(tables[0]) if "suite_version" in tables[0].columns else None
    model = {"mml": "2PL, marginal ML, log a ~ N(0, 0.5) (evenhand.irt.mml)", "jml": "2PL, girth.twopl_jml"}
    config = {"kind": "irt_fit", "runs": names, "bootstrap": a.bootstrap, "seed": a.seed,
              "method": a.method, "model": model[a.method]}

    def fit(run):
        items, runs = fit_runs(tables, names, a.bootstrap, a.seed, a.method)
        write_table_atomic(run.irt_items_path, items)
        write_table_atomic(run.irt_items_csv, items)
        write_table_atomic(run.irt_runs_path, runs)
        write_table_atomic(run.irt_runs_csv, runs)
        return items, runs
    stage = FnStage("fit", fit, finished_with(lambda r: r.irt_items_path, lambda r: r.irt_runs_path))
    run = run_stages(open_run(a.out, config, suite_version=version, seeds={"bootstrap": a.seed}), [stage])
    items, runs = stage.result if stage.result is not None else _read_fit(a.out)
    fitted = items["estimable"].sum()
    print(f"2PL on {int(items['in_2pl'].sum()):,} GT items x {len(runs)} runs: {int(fitted):,} fitted, "
          f"{int(items['in_2pl'].sum() - fitted):,} answered alike by every run (not fitted); "
          f"{int((items['condition'] == 'AMB').sum()):,} AMB items carried, not in the 2PL")
    print(f"item table: {run.irt_items_path} (+ .csv); run abilities: {run.irt_runs_path} (+ .csv)")
    return 0


def _read_fit(path: str):
    """(item table, runs table) of a fit directory."""
    import pandas as pd
    from evenhand.runs.rundir import RunDir  # deferred: keeps the CLI's start fast
    run = RunDir(path)
    if not run.irt_items_path.exists():
        raise FileNotFoundError(f"{path} holds no irt_items.parquet: run `evenhand irt fit RUN... --out {path}` first")
    return pd.read_parquet(run.irt_items_path), pd.read_parquet(run.irt_runs_path)


def _theta_range(text: str | None, runs) -> tuple[float, float]:
    if text is None:
        q = runs["theta_eap"].quantile([0.1, 0.9])
        return float(q.iloc[0]), float(q.iloc[1])
    try:
        lo, hi = (float(x) for x in text.split(","))
    except ValueError:
        raise ValueError(f"--theta must be LO,HI (two numbers), got {text!r}") from None
    if not lo <= hi:
        raise ValueError(f"--theta needs LO <= HI, got {text!r}")
    return lo, hi


def _core(a: argparse.Namespace) -> int:
    import pandas as pd
    from evenhand.irt.select import select_core  # deferred: keeps the CLI's start fast
    from evenhand.runs.rundir import RunDir, write_table_atomic  # deferred: keeps the CLI's start fast
    from evenhand.suite.content import load_content  # deferred: keeps the CLI's start fast
    from evenhand.suite.generate import item_by_id  # deferred: keeps the CLI's start fast
    if not a.out.endswith((".parquet", ".jsonl")):
        raise ValueError(f"--out must end in .parquet or .jsonl (an items file), got {a.out!r}")
    items, runs = _read_fit(a.fit)
    theta = _theta_range(a.theta, runs)
    ids, summary = select_core(items, a.items, theta, a.method, a.seed, a.per_scenario)
    content = load_content(RunDir(a.fit).manifest().get("suite_version"))
    write_table_atomic(Path(a.out), pd.DataFrame([item_by_id(i, content) for i in ids]))
    summary["out"] = a.out
    if a.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"{summary['method']} core: {summary['items']:,} items ({summary['gt_items']:,} GT, "
              f"{summary['amb_items']:,} AMB) in {summary['groups']:,} whole baseline groups, "
              f"{summary['cells']}/{summary['cells_in_table']} degree x contrast type x condition x pressure family "
              f"cells; mean GT information {summary['mean_information']:.3f} over theta "
              f"[{theta[0]:.2f}, {theta[1]:.2f}]")
        print(f"wrote {a.out}: use it where a subset name goes (--subset {a.out}, suite.subset in a run config)")
    return 0


def _adapt(a: argparse.Namespace) -> int:
    from evenhand.irt.adaptive import adaptive_test, bank_of  # deferred: keeps the CLI's start fast
    from evenhand.irt.simulate import simulated_responder  # deferred: keeps the CLI's start fast
    from evenhand.runs.rundir import RunDir  # deferred: keeps the CLI's start fast
    # deferred: keeps the CLI's start fast
    from evenhand.running.stages import FnStage, finished_with, open_run, run_stages
    from evenhand.suite.content import load_content  # deferred: keeps the CLI's start fast
    from evenhand.suite.generate import item_by_id  # deferred: keeps the CLI's start fast
    if (a.model is None) == (a.simulate_theta is None):
        raise ValueError("give exactly one of --model (a model to evaluate) and --simulate-theta (a simulated responder)")
    options = options_from_args(AdaptiveOptions, a, ADAPT_FLAGS)
    items, _ = _read_fit(a.fit)
    bank = bank_of(items)
    content = load_content(RunDir(a.fit).manifest().get("suite_version"))
    if a.model is not None:
        answer, who = _model_answer(a), model_spec(a).model
    else:
        answer, who = simulated_responder(bank, a.simulate_theta, a.seed), f"simulated theta={a.simulate_theta:g}"
    config = {"kind": "irt_adapt", "fit": str(Path(a.fit)), "responder": who, "options": asdict(options),
              "seed": a.seed}

    def adapt(run):
        return adaptive_test(bank, answer, options, lambda i: item_by_id(i, content), run.adaptive_path)
    stage = FnStage("adapt", adapt, finished_with(lambda r: r.adaptive_path))
    run = run_stages(open_run(a.out, config, suite_version=content.version, seeds={"simulate": a.seed}), [stage])
    state = stage.result if stage.result is not None else json.loads(run.adaptive_path.read_text())
    ab = state["ability"]
    if a.json:
        print(json.dumps(state["ability"] | {"stopped": state["stopped"]}, indent=2))
    else:
        print(f"ability {ab['theta_map']:.2f} (MAP; EAP {ab['theta_eap']:.2f}, posterior SD {ab['theta_sd']:.2f}, "
              f"95% [{ab['theta_lo']:.2f}, {ab['theta_hi']:.2f}]) after {ab['n_items']} items; stopped: "
              f"{state['stopped']}; state: {run.adaptive_path}")
    return 0


def _model_answer(a: argparse.Namespace):
    """``answer(item)`` through the decide path: the model loaded once, each item decided alone."""
    from evenhand.running.decisions import decide  # deferred: pulls in the engines
    from evenhand.engine.registry import load  # deferred: pulls in torch
    from evenhand.models.loading import locate, resolve_spec  # deferred: keeps the CLI's start fast
    spec = resolve_spec(model_spec(a))
    locate(spec)
    opts = options_from_args(DecideOptions, a, DECIDE_FLAGS, chat_template=spec.chat_template, progress=False)
    lm = load(spec, opts.engine)

    def answer(item: dict):
        choice = decide([item], lm, opts)["choice"].iloc[0]
        return choice if isinstance(choice, str) else None
    return answer


def _simulate(a: argparse.Namespace) -> int:
    import pandas as pd
    from evenhand.irt.simulate import plant_abilities, plant_items, simulated_rows  # deferred: keeps start fast
    from evenhand.runs.rundir import write_table_atomic  # deferred: keeps the CLI's start fast
    # deferred: keeps the CLI's start fast
    from evenhand.running.stages import FnStage, finished_with, open_run, run_stages
    from evenhand.suite import items as suite_items  # deferred: keeps the CLI's start fast
    if a.models < 2:
        raise ValueError(f"--models must be at least 2, got {a.models}")
    population = options_from_args(Population, a, POPULATION_FLAGS)
    items = suite_items(a.subset, seed=a.suite_seed)
    planted = plant_items(items, population, a.seed)
    theta = plant_abilities(a.models, population, a.seed + 1)
    out = Path(a.out)
    for m, t in enumerate(theta):
        config = {"kind": "irt_simulate", "model": f"irt-sim-{m:03d}", "subset": a.subset, "theta": float(t),
                  "population": asdict(population), "seed": a.seed}

        def decide(run, m=m, t=t):
            run.write_responses(simulated_rows(items, planted, t, a.seed + 10 + m, f"irt-sim-{m:03d}"))
        run_stages(open_run(out / f"m{m:03d}", config, suite_version=str(items["suite_version"].iloc[0]),
                            seeds={"simulate": a.seed}),
                   [FnStage("decide", decide, finished_with(lambda r: r.responses_path))])
    write_table_atomic(out / "planted_items.csv", planted)
    write_table_atomic(out / "planted_abilities.csv",
                       pd.DataFrame({"run": [str(out / f"m{m:03d}") for m in range(a.models)], "theta": theta}))
    print(f"{a.models} simulated runs of {len(items):,} items in {out}/m000 ... ; planted parameters in "
          f"{out}/planted_items.csv and planted_abilities.csv")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add `irt` (fit, core, adapt, simulate) to the top-level subparsers ``sub``."""
    irt = sub.add_parser("irt", help="item response theory: fit item parameters, an informative core, "
                                     "adaptive evaluation (docs/IRT.md)").add_subparsers(dest="irt_command",
                                                                                         required=True)
    s = irt.add_parser("fit", help="fit 2PL item parameters (girth) on the GT items of several runs")
    s.add_argument("runs", nargs="+", help="run directories (responses.parquet) or responses files, of one subset")
    s.add_argument("--out", required=True, help="the output directory (irt_items.parquet/.csv, irt_runs, manifest)")
    s.add_argument("--bootstrap", type=int, default=20,
                   help="bootstrap resamples over runs for the parameters' SEs and 95%% intervals (0: none)")
    s.add_argument("--seed", type=int, default=0, help="seed of the bootstrap")
    s.add_argument("--method", choices=list(FIT_METHODS), default="mml",
                   help="mml: marginal maximum likelihood with a lognormal prior on the discriminations (default); "
                        "jml: girth's joint maximum likelihood (biased with tens of runs; docs/IRT.md)")
    s.set_defaults(fn=_fit)

    s = irt.add_parser("core", help="choose an informative core subset under the suite's balance constraints")
    s.add_argument("--fit", required=True, help="a directory written by `evenhand irt fit`")
    s.add_argument("--items", type=int, required=True, help="the most items the core holds (whole baseline groups)")
    s.add_argument("--out", required=True, help="the items file written (.parquet or .jsonl), usable as a subset")
    s.add_argument("--theta", default=None, metavar="LO,HI",
                   help="the ability range to be informative over, e.g. --theta=-1,1 (default: the fitted runs' 10th-90th "
                        "percentile)")
    s.add_argument("--method", choices=list(METHODS), default="information",
                   help="information (default) or random: the stratified random core of the same constraints")
    s.add_argument("--seed", type=int, default=0, help="seed of the tie-breaks, the AMB groups' order and --method random")
    s.add_argument("--per-scenario", type=int, default=None, metavar="K",
                   help="information: rank GT groups in rounds of at most K per scenario (default: by information alone)")
    json_flag(s)
    s.set_defaults(fn=_core)

    s = irt.add_parser("adapt", help="evaluate a model adaptively on a fitted item bank (resumable)")
    s.add_argument("--fit", required=True, help="a directory written by `evenhand irt fit`")
    s.add_argument("--out", required=True, help="the output directory (adaptive.json, rewritten after each item)")
    add_flags(s, ModelSpec, MODEL_FLAGS, defaults={"model": None})
    add_flags(s, AdaptiveOptions, ADAPT_FLAGS)
    add_flags(s, DecideOptions, DECIDE_FLAGS)
    s.add_argument("--simulate-theta", type=float, default=None,
                   help="instead of a model: a simulated responder of this ability under the fitted parameters")
    s.add_argument("--seed", type=int, default=0, help="seed of the simulated responder")
    json_flag(s)
    s.set_defaults(fn=_adapt)

    s = irt.add_parser("simulate", help="write simulated runs with planted 2PL parameters (known-answer checks)")
    s.add_argument("--out", required=True, help="the output root: one run directory per simulated model")
    s.add_argument("--models", type=int, default=50, help="simulated models (runs), at least 2")
    s.add_argument("--subset", default="smoke", help="the suite subset the runs answer (smoke, core or an items file)")
    s.add_argument("--suite-seed", type=int, default=0, help="seed of the subset")
    s.add_argument("--seed", type=int, default=0, help="seed of the planted parameters and the answers")
    add_flags(s, Population, POPULATION_FLAGS)
    s.set_defaults(fn=_simulate)
