"""`evenhand power`: how many scenarios (and contrasts per scenario) a target effect needs, from a pilot
run. The power and selection blocks that `evenhand compare` prints under its table are the comparison's own
(:mod:`experiments.studies.compare.text`)."""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from evenhand.vocab.metric_defs import power_metrics

from evenhand.inference.stats import RESAMPLES

from .common import json_flag, refused_bootstrap


def pilot_rows(path: str):
    """The responses of a pilot: a responses file, a run directory (``responses.parquet``) or a comparison
    directory (its baseline, ``cells/baseline/responses.parquet``)."""
    from evenhand.runs.rundir import RunDir  # deferred: keeps the CLI's start fast
    from evenhand.rows.schema import load_rows  # deferred: keeps the CLI's start fast
    p = Path(path)
    if p.is_dir():
        for cand in (RunDir(p).cell("baseline").responses_path, RunDir(p).responses_path):
            if cand.exists():
                return load_rows(cand)
        raise FileNotFoundError(f"{p} holds neither responses.parquet nor cells/baseline/responses.parquet")
    return load_rows(p)


def plan(base, other, metrics: list[str], target: float, contrasts: list[int], alpha: float, power: float,
         resamples: int, seed: int, pool: int | None) -> dict:
    """The power report of a pilot (``other`` None: the baseline alone) as a JSON-able dict."""
    from evenhand.scoring.power import design_se, mde, power_of, scenarios_needed, variance_parts
    from evenhand.rows.schema import ensure_valid  # deferred: keeps the CLI's start fast
    df = ensure_valid(base)
    df = df[df["contrast_type"] == "type1"] if "type1" in set(df["contrast_type"]) else df
    n0 = int(df["scenario_id"].nunique())
    k0 = float(df.groupby("scenario_id")["contrast_id"].nunique().mean())
    per_unit = len(df) / (n0 * k0)
    out = {"pilot": {"scenarios": n0, "contrasts_per_scenario": k0, "items": len(df),
                     "items_per_scenario_contrast": per_unit, "paired": other is not None},
           "target": target, "alpha": alpha, "power": power, "pool": pool, "metrics": {},
           **_suite_size(df)}
    for m, parts in variance_parts(base, other, metrics, resamples, seed).items():
        se = parts.pilot_se
        if not math.isfinite(se):
            out["metrics"][m] = {"se": None, "note": "undefined on the pilot"}
            continue
        needs = []
        for k in contrasts:
            n = scenarios_needed(target, parts, k, alpha, power)
            needs.append({"contrasts": k, "scenarios": n, "items": int(round(n * k * per_unit)),
                          "within_pool": None if pool is None else n <= pool,
                          "power_at_pool": None if pool is None else power_of(target, design_se(parts, pool, k), alpha,
                                                                              max(pool - 1, 1))})
        df = max(n0 - 1, 1)  # t on k-1 degrees of freedom, as the comparison's jackknife-t interval
        out["metrics"][m] = {"se": se, "mde": mde(se, alpha, power, df), "power_at_pilot": power_of(target, se, alpha, df),
                             "between": parts.between, "within": parts.within, "assumption": parts.assumption,
                             "needs": needs}
    return out


def _suite_size(df) -> dict:
    """The pilot's suite version and how many scenarios it has in all (empty when its content cannot be loaded)."""
    from evenhand.suite.content import ContentError, items_version, load_content
    try:
        version = items_version(df)
        return {"suite_version": version, "suite_scenarios": len(load_content(version).scenarios)}
    except ContentError:
        return {}


def plan_text(rep: dict) -> str:
    """The power report as text."""
    p = rep["pilot"]
    k0 = p["contrasts_per_scenario"]
    per = f"{k0:.0f} contrast" + ("s" if round(k0) != 1 else "") if abs(k0 - round(k0)) < 0.05 else \
        f"{k0:.1f} contrasts on average"
    lines = [f"pilot: {p['scenarios']} scenarios x {per} per scenario, {p['items']} items "
             f"({p['items_per_scenario_contrast']:.0f} per scenario-contrast); "
             f"{'paired SE from both runs' if p['paired'] else 'baseline only'}",
             f"target effect {100 * rep['target']:g} pp, alpha {rep['alpha']:g}, power {rep['power']:g}; "
             f"SE scaled as sqrt(var_between / n + var_within / (n k)) over n scenarios x k contrasts"]
    notes = set()
    for m, r in rep["metrics"].items():
        if r.get("se") is None:
            lines.append(f"{m:<10} {r['note']}")
            continue
        suite_n = rep.get("suite_scenarios")
        needs = "; ".join(f"k={x['contrasts']}: {x['scenarios']} scenarios ({x['items']} items)"
                          + (" > the suite's" if suite_n and x["scenarios"] > suite_n else "")
                          + ("" if x["within_pool"] is None else
                             f"{'' if x['within_pool'] else ' > pool'}, power at pool {100 * x['power_at_pool']:.0f}%")
                          for x in r["needs"])
        lines.append(f"{m:<10} SE {100 * r['se']:.2f} pp, MDE {100 * r['mde']:.1f} pp, power at pilot "
                     f"{100 * r['power_at_pilot']:.0f}%; needs {needs}")
        if r["assumption"]:
            notes.add(r["assumption"])
    if rep.get("suite_scenarios"):
        lines.append(f"the suite ({rep['suite_version']}) has {rep['suite_scenarios']} scenarios in all: a need above "
                     f"that cannot be met by more scenarios of it (more contrasts per scenario, k, or a larger target "
                     f"can)")
    if rep["pool"] is not None:
        lines.append(f"pool: {rep['pool']} scenarios available")
    lines += [f"assumption: {n}" for n in sorted(notes)]
    return "\n".join(lines)


def _power(a: argparse.Namespace) -> int:
    if a.target <= 0 or not 0 < a.alpha < 1 or not 0 < a.power < 1 or min(a.contrasts) < 1:
        raise ValueError("--target must be positive, --alpha and --power in (0, 1), --contrasts at least 1")
    base = pilot_rows(a.pilot)
    other = pilot_rows(a.other) if a.other else None
    rep = plan(base, other, a.metric or ["fraggap"], a.target, a.contrasts, a.alpha, a.power, RESAMPLES, 0,
               a.pool)
    print(json.dumps(rep, indent=2) if a.json else plan_text(rep))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add `power` to the top-level subparsers ``sub``."""
    s = sub.add_parser("power", help="scenarios and contrasts a target effect needs, from a pilot run")
    s.add_argument("pilot", help="the pilot's responses: a file, a run directory or a comparison directory")
    s.add_argument("other", nargs="?", default=None,
                   help="a method's responses on the same items (paired SE); without it the SE is the baseline's "
                        "x sqrt(2) (assumption printed)")
    s.add_argument("--target", type=float, default=0.05, help="the effect to detect, a fraction (0.05 = 5 pp)")
    s.add_argument("--metric", action="append", help="a metric (repeatable; default fraggap)",
                   choices=list(power_metrics()))
    s.add_argument("--contrasts", type=lambda v: [int(x) for x in v.split(",")], default=[1, 2, 4],
                   help="contrasts per scenario to size for, comma-separated (default 1,2,4)")
    s.add_argument("--alpha", type=float, default=0.05, help="the two-sided test's level (default 0.05)")
    s.add_argument("--power", type=float, default=0.8, help="the power wanted (default 0.8)")
    s.add_argument("--pool", type=int, default=None,
                   help="the scenarios you can still use (e.g. a comparison's held-out pool, or the organism's 70 "
                        "held-out scenarios); the suite's total is printed regardless")
    refused_bootstrap(s, what="the pilot's SEs and MDEs come from")
    json_flag(s)
    s.set_defaults(fn=_power)
