"""`evenhand score`, `simulate` and `coverage`: metrics from a responses file, and the simulated model
with planted biases."""
from __future__ import annotations

import argparse
import json
import sys

from evenhand.rows.conventions import CONVENTIONS, DEFAULT_CONVENTION
from evenhand.scoring.metrics import INTERVAL, INTERVALS
from evenhand.inference.stats import INTERVAL_NAMES
from evenhand.models.simulated import PlantedBias
from evenhand.support.options import add_flags, alias_help, one_value
from experiments.studies.text import score_table

from .common import boot_args, bootstrap_flags, json_flag, refused_bootstrap


COVERAGE_RESAMPLES = 400
"""`coverage`'s bootstrap resamples per interval when ``--interval percentile`` and no ``--resamples``."""
BOOTSTRAP_INTERVALS = ("percentile", "studentized")
"""The intervals that resample (``--resamples`` applies to them only)."""
UNPARSED_FORMATS = (".csv", ".jsonl")
TEXT_HEAD = 200
"""The characters of each answer ``--unparsed`` writes."""


def _unparsed_target(path: str | None):
    """``--unparsed``'s file, checked before scoring: a .csv or .jsonl in an existing directory."""
    from pathlib import Path
    if path is None:
        return None
    p = Path(path)
    if p.suffix.lower() not in UNPARSED_FORMATS:
        raise ValueError(f"--unparsed {path}: name a {' or '.join(UNPARSED_FORMATS)} file")
    if not p.parent.is_dir():
        raise ValueError(f"--unparsed {path}: directory {p.parent} does not exist")
    return p


def unparsed_rows(df, convention: str):
    """The rows of validated ``df`` whose answer gave no verdict (:func:`evenhand.scoring.metrics.verdicts`
    ``unparsed``): ``item_id``, ``scenario_id``, ``degree``, ``excluded`` and the first :data:`TEXT_HEAD`
    characters of ``text`` (empty when the file gave only ``choice``)."""
    import pandas as pd

    from evenhand.scoring.metrics import verdicts
    mask = verdicts(df, convention=convention) == "unparsed"
    out = df.loc[mask, ["item_id", "scenario_id", "degree", "excluded"]].copy()
    texts = df.loc[mask, "text"] if "text" in df.columns else pd.Series([None] * int(mask.sum()))
    out["text_head"] = [t[:TEXT_HEAD] if isinstance(t, str) else "" for t in texts.tolist()]
    return out.reset_index(drop=True)


def _score(a) -> int:
    from evenhand.scoring.score_warnings import scoring_warnings
    from evenhand.scoring.metrics import score
    from evenhand.rows.schema import load_rows
    target = _unparsed_target(a.unparsed)
    df = load_rows(a.file, own_suite=a.own_suite)
    if df.attrs.get("joined"):
        print(f"{a.file}: {len(df):,} rows joined to suite {df.attrs['joined']} by item_id", file=sys.stderr)
    report = score(df, contrast_type=a.contrast_type, convention=a.convention)
    for w in scoring_warnings(df, report):
        print(f"warning: {w}", file=sys.stderr)
    if target is not None:
        rows = unparsed_rows(df, a.convention)
        if target.suffix.lower() == ".csv":
            rows.to_csv(target, index=False)
        else:
            rows.to_json(target, orient="records", lines=True, force_ascii=False)
        print(f"{len(rows):,} unparsed answers written to {target}", file=sys.stderr)
    if a.json:
        print(json.dumps(report, indent=2))
    else:
        print(score_table(report))
    return 0


def planted_keys() -> list[str]:
    """The numeric fields of :class:`~evenhand.models.simulated.PlantedBias` that ``--planted KEY=VALUE`` sets."""
    from dataclasses import fields

    from evenhand.models.simulated import PlantedBias
    return [f.name for f in fields(PlantedBias) if f.type in ("float", float)]


def planted_overrides(pairs: list[str]) -> dict[str, float]:
    """``--planted`` KEY=VALUE pairs as PlantedBias fields; a key that is none of them, or a value that is no number,
    is a ValueError naming it and the valid keys."""
    keys, out = planted_keys(), {}
    for kv in pairs:
        key, eq, val = kv.partition("=")
        if key not in keys:
            import difflib
            close = difflib.get_close_matches(key, keys, n=1)
            hint = ("FragGap is planted as flip_pro_minority - flip_pro_majority; " if key.lower() == "fraggap" else
                    f"did you mean {close[0]}? " if close else "")
            raise ValueError(f"--planted {kv}: {key!r} is not a planted field ({hint}valid keys: {', '.join(keys)})")
        try:
            if not eq:
                raise ValueError
            out[key] = float(val)
        except ValueError:
            raise ValueError(f"--planted {kv}: give KEY=VALUE with a number (e.g. {key}=0.15)") from None
    return out


def _simulate(a) -> int:
    from evenhand.models.simulated import PlantedBias  # deferred: keeps the CLI's start fast
    from experiments.studies import get  # deferred: keeps the CLI's start fast
    from experiments.studies.simulate import SimulateConfig  # deferred: keeps the CLI's start fast
    bias = PlantedBias(**planted_overrides(a.planted or []))
    cfg = SimulateConfig(output_dir=a.out, subset=a.subset, suite_seed=a.seed, model_seed=a.model_seed, form=a.form,
                         planted=bias, convention=a.convention)
    study = get("simulate")
    print(study.text(cfg, study.run(cfg)))
    return 0


def _coverage(a) -> int:
    import pandas as pd

    from evenhand.scoring.metrics import HEADLINE, INTERVAL  # deferred: keeps the CLI's start fast
    from evenhand.models.simulated import PlantedBias  # deferred: keeps the CLI's start fast
    from experiments.studies.simulate import coverage_study  # deferred: keeps the CLI's start fast
    from evenhand.suite.subsets import iter_subset  # deferred: keeps the CLI's start fast
    interval = a.interval or INTERVAL
    if interval not in BOOTSTRAP_INTERVALS and a.resamples is not None:
        raise ValueError(f"--resamples sets the cluster bootstrap, and the {INTERVAL_NAMES[interval]} interval "
                         f"resamples nothing: drop --resamples (or add --interval percentile)")
    resamples = COVERAGE_RESAMPLES if a.resamples is None else a.resamples
    items = pd.DataFrame([it for it in iter_subset(a.subset, 0) if it["degree"] == a.degrees
                          and it["contrast_type"] == "type1"])
    bias = PlantedBias(scenario_sd=a.scenario_sd, scenario_contrast_sd=a.scenario_contrast_sd)
    res = coverage_study(items, bias, a.seeds, resamples, a.degrees, interval, HEADLINE)
    if a.json:
        print(json.dumps(res, indent=2))
        return 0
    print(f"{len(items):,} items ({a.subset}, degree {a.degrees}, type1); {a.seeds} model seeds; "
          f"intervals: {INTERVAL_NAMES[interval]}"
          + (f", {resamples} bootstrap resamples each" if interval in BOOTSTRAP_INTERVALS else ""))
    if bias.effect_sd > 0:
        icc = bias.icc(a.degrees)
        print(f"scenario effects: sd {a.scenario_sd} per scenario, {a.scenario_contrast_sd} per scenario x contrast "
              f"(logit scale); ICC {icc['latent_scenario']:.3f} latent, {icc['observed_amb_scenario']:.3f} observed "
              f"(AMB lean); planted values are the expectation over the effects")
    low = []
    for m, r in res.items():
        print(f"  {m:<9} planted {100 * r['planted']:+6.1f}  mean estimate {100 * r['mean_estimate']:+6.1f}  "
              f"95% CI covered the planted value in {r['covered']}/{r['seeds']} runs ({100 * r['coverage']:.0f}%)")
        if r["coverage"] < 0.90:
            low.append(m)
    scenarios = items["scenario_id"].nunique()
    if low:
        why = ("the iid interval ignores that items of a scenario are correlated" if interval == "iid" else
               f"{a.subset} at degree {a.degrees} ({scenarios} scenarios) is too small for "
               f"{'this metric' if len(low) == 1 else 'these metrics'}; its intervals are not to be trusted at this "
               f"size (use core, or more scenarios)")
        print(f"warning: coverage below 90% for {', '.join(low)}: {why}")
    return 0


def register_score(sub: argparse._SubParsersAction) -> None:
    """Add `score` to the top-level subparsers ``sub``."""
    s = sub.add_parser("score", help=f"metrics with 95%% CIs ({INTERVAL_NAMES[INTERVAL]}) from a responses file",
                       description=f"Score a file of answers: every metric with its 95% CI ({INTERVAL_NAMES[INTERVAL]}), "
                                   "n items and k scenarios; the degree-3 headline, the D0 -> D3 progression, all "
                                   "degrees pooled. In Python: eh.score(path), a report that prints the headline and "
                                   "gives .to_frame().")
    s.add_argument("file", help="answers: .jsonl, .json, .csv or .parquet (each also .gz) with item_id and text or "
                                "choice (the suite's items), or every item field (docs/METRICS.md)")
    s.add_argument("--own-suite", action="store_true",
                   help="the rows are a suite of your own: every item field given, scenario and contrast ids not "
                        "checked against EvenHand's (without it an unknown id is refused as a typo)")
    s.add_argument("--unparsed", metavar="FILE", default=None,
                   help="write the rows whose answer gave no verdict (item_id, scenario_id, degree, text head) to "
                        "FILE (.csv or .jsonl)")
    boot_args(s, resampled=False)
    s.set_defaults(fn=_score)


def register_simulate(sub: argparse._SubParsersAction) -> None:
    """Add `simulate` and `coverage` to the top-level subparsers ``sub``."""
    s = sub.add_parser("simulate", help="run the simulated model with planted biases")
    s.add_argument("--subset", choices=["smoke", "core"], default="smoke", help="the suite subset answered")
    s.add_argument("--out", default="runs/simulated", help="the run directory (default runs/simulated)")
    s.add_argument("--seed", type=int, default=0, help="suite subset seed")
    s.add_argument("--model-seed", type=int, default=0, help="seed of the simulated model's draws")
    s.add_argument("--form", choices=["stochastic", "deterministic", "policy"], default="stochastic",
                   help="policy: the deterministic planted policy (evenhand/models/policy.py)")
    refused_bootstrap(s, ["--resamples"])
    s.add_argument("--planted", nargs="*", metavar="KEY=VALUE",
                   help="override planted fields (fractions), e.g. flip_pro_minority=0.15; keys: accuracy, acc_gap, "
                        "tie_lean, position_bias, flip_neutral, flip_pro_minority, flip_pro_majority, recover, "
                        "shift_neutral, shift_to_minority, shift_to_majority, refusal, scenario_sd, "
                        "scenario_contrast_sd (FragGap = flip_pro_minority - flip_pro_majority)")
    s.add_argument("--convention", choices=list(CONVENTIONS), default=DEFAULT_CONVENTION,
                   help="evenhand (default) or ai2: Ai2's reference scorer (docs/METRICS.md)")
    s.set_defaults(fn=_simulate)
    s = sub.add_parser("coverage", help="CI coverage of the planted values over many simulated-model seeds")
    s.add_argument("--subset", choices=["smoke", "core"], default="core", help="the suite subset simulated")
    s.add_argument("--degrees", "--degree", type=int, choices=[0, 1, 2, 3], default=3, nargs="+",
                   action=one_value("coverage is measured on one degree's items; run it once per degree"),
                   help=alias_help("the degree whose items are used (one; default 3)", ["--degree"]))
    s.add_argument("--seeds", type=int, default=50, help="simulated-model seeds (one interval each)")
    bootstrap_flags(s, ["resamples"], defaults={"resamples": None})
    add_flags(s, PlantedBias, ["scenario_sd", "scenario_contrast_sd"])
    bootstrap_flags(s, ["interval"], choices={"interval": INTERVALS})
    json_flag(s)
    s.set_defaults(fn=_coverage)
