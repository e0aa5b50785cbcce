"""`evenhand probe sweep | verbalize | ablation | attribution`: linear probes, activations described in
words, name ablation and direct logit attribution on a run's activation cache."""
from __future__ import annotations

import argparse
from pathlib import Path

from evenhand.support.messages import writable_dir
from evenhand.support.options import add_flags, alias_help, options_from_args
from evenhand.runs.rundir import RunDir
from evenhand.suite.subsets import CONDITIONS
from probes.ablation import VARIANTS
from probes.logistic import ProbeOptions
from probes.verbalize import VerbalizeOptions

from experiments.studies.run.config import AblationConfig, AttributionConfig, ProbeConfig

from .common import BARS_ONLY, bootstrap_flags, progress, progress_flag, renamed_flag
from .formatting import ablation_text, attribution_text, probe_text, verbalize_text

PROBE_FLAGS = ("solver", "device", "folds", "inner_folds", "seed")
"""The ProbeOptions fields that the probe commands take as flags."""
VERBALIZE_FLAGS = ("target_prompt", "position", "target_site", "max_new_tokens", "batch_size")
"""The VerbalizeOptions fields that `probe verbalize` takes as flags."""


def probe_filters(a: argparse.Namespace) -> dict:
    """The row filters of `probe sweep` (degree, condition, contrast, pressured)."""
    f = {}
    if a.degrees is not None:
        f["degree"] = a.degrees
    if a.condition:
        f["condition"] = a.condition
    if a.contrast:
        f["contrast_id"] = a.contrast
    if a.pressured is not None:
        f["pressured"] = a.pressured == "yes"
    return f


def probe_options(a: argparse.Namespace):
    """The :class:`~probes.logistic.ProbeOptions` the probe flags describe."""
    return options_from_args(ProbeOptions, a, PROBE_FLAGS)


def _probe_sweep(a) -> int:
    from probes.dataset import from_run  # deferred: keeps the CLI's start fast
    from probes.sweep import probe_sweep, write_sweep  # deferred: keeps the CLI's start fast
    ds = from_run(a.run_dir, a.label, a.sites, probe_filters(a))
    opts = probe_options(a)
    out = writable_dir(Path(a.out) if a.out else RunDir(a.run_dir).probe_dir(a.label).path)
    table, _ = probe_sweep(ds, opts, control=not a.no_control, resamples=a.resamples, text=a.text)
    write_sweep(table, out, ds, opts, run_dir=str(a.run_dir))
    print(probe_text(table, ds))
    print(f"\nwrote {out}/probes.parquet (+ .csv, manifest.json) in {table.attrs['seconds']:.1f}s")
    return 0


def _probe_verbalize(a) -> int:
    from probes.verbalize import verbalize_run  # deferred: keeps the CLI's start fast
    opts = options_from_args(VerbalizeOptions, a, VERBALIZE_FLAGS)
    out = writable_dir(Path(a.out) if a.out else RunDir(a.run_dir).verbalize_dir(a.label).path)
    reader = None
    if a.reader_model:
        from evenhand.framing.judge import load_judge  # deferred: loads an engine
        reader = load_judge(a.reader_model, a.reader_engine)
    table = verbalize_run(a.run_dir, out, a.sites, a.label, probe_filters(a), opts, probe_options(a), a.resamples,
                          progress=progress(a), reader=reader)
    print(verbalize_text(table))
    print(f"\nwrote {out}/verbalize.parquet (+ .csv, descriptions.parquet, manifest.json) in "
          f"{table.attrs['seconds']:.1f}s")
    return 0


def _probe_ablation(a) -> int:
    from evenhand.support.messages import not_a_run_message
    from probes.ablation import name_ablation
    if not RunDir(a.run_dir).responses_path.is_file():
        raise ValueError(not_a_run_message(a.run_dir, "probe ablation", RunDir(a.run_dir).manifest_path, "responses.parquet"))
    out = Path(a.out) if a.out else RunDir(a.run_dir).ablation_dir(a.variant).path
    if a.out or Path(a.run_dir).is_dir():  # before the compute; a missing RUN_DIR is named by the command
        writable_dir(out)
    table = name_ablation(a.run_dir, out, a.variant, a.label, a.degrees, a.sites, probe_options(a), a.resamples,
                          a.batch_size, minority_slot=a.minority_slot, progress=progress(a))
    text = ablation_text(table)
    if text:
        print(text)
    print(f"\nwrote {out}/ablation.parquet (+ .csv, manifest.json, responses.parquet, activations/)")
    return 0


def _probe_attribution(a) -> int:
    from probes.attribution import run_attribution  # deferred: keeps the CLI's start fast
    out = Path(a.out) if a.out else RunDir(a.run_dir).attribution_dir.path
    if a.out or Path(a.run_dir).is_dir():
        writable_dir(out)
    table = run_attribution(a.run_dir, out, a.degrees, a.batch_size, a.resamples, a.seed, progress=progress(a))
    print(attribution_text(table))
    print(f"\nwrote {out}/attribution.parquet (+ .csv, attribution_items.parquet, manifest.json, figures)")
    return 0


def _probe_args(x: argparse.ArgumentParser, sites: str = "default: every cached site") -> None:
    x.add_argument("run_dir", help="a run directory with an activation cache (cache: enabled)")
    add_flags(x, ProbeConfig, ["label"])
    x.add_argument("--sites", nargs="+", default=None, help=sites)
    add_flags(x, ProbeOptions, ["solver", "device", "folds", "inner_folds"])
    renamed_flag(x, "--engine", "--solver")
    bootstrap_flags(x, ["resamples"])
    add_flags(x, ProbeOptions, ["seed"])
    x.add_argument("--out", default=None, help="the output directory (default: under RUN_DIR)")


def _filter_args(s: argparse.ArgumentParser) -> None:
    """The row filters of `probe sweep` and `probe verbalize` (:func:`probe_filters`)."""
    s.add_argument("--degrees", "--degree", type=int, nargs="+", default=None,
                   help=alias_help("keep only these degrees", ["--degree"]))
    s.add_argument("--condition", nargs="+", default=None, choices=list(CONDITIONS), help="keep only these conditions")
    s.add_argument("--contrast", nargs="+", default=None, help="keep only these contrast ids")
    s.add_argument("--pressured", default=None, choices=["yes", "no"],
                   help="yes: pressured items only; no: baselines only (default both)")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `probe` command group to the top-level subparsers ``sub``."""
    pr = sub.add_parser("probe", help="linear probes on a run's activation cache").add_subparsers(
        dest="probe_command", required=True)
    s = pr.add_parser("sweep", help="one probe per site, with the evidence baseline, gain and control task")
    _probe_args(s)
    _filter_args(s)
    s.add_argument("--no-control", action="store_true", help="skip the control task")
    s.add_argument("--text", action="store_true",
                   help="also the text baseline: the label from the written reasoning (reasoning-mode runs)")
    s.set_defaults(fn=_probe_sweep)
    s = pr.add_parser("verbalize", help="activations described in words (Patchscope) and the label read off the "
                                        "descriptions, beside the linear probe, the evidence baseline and chance")
    _probe_args(s, "cached sites to describe (default: the middle cached resid_post)")
    _filter_args(s)
    add_flags(s, VerbalizeOptions, VERBALIZE_FLAGS)
    progress_flag(s, BARS_ONLY)
    s.add_argument("--reader-model", default=None,
                   help="an LLM judge asked which candidate each description says the model favours: the "
                        "headline (verbal_reader verbalized, on AMB rows); prompt evenhand.framing.judge.VERBALIZATION")
    s.add_argument("--reader-engine", default="hf", help="the reader's engine: hf, vllm, openai or one registered")
    s.set_defaults(fn=_probe_verbalize)
    s = pr.add_parser("ablation", help="name ablation: re-decide and re-cache without names, compare probes")
    _probe_args(s)
    s.add_argument("--variant", default="label", choices=list(VARIANTS),
                   help="label: names replaced by neutral labels; degree0: re-rendered without identity; degree2: "
                        "identity by the implicit cue (the control)")
    add_flags(s, AblationConfig, ["minority_slot"])
    add_flags(s, AblationConfig, ["degree"], flags={"degree": "--degrees"}, aliases={"degree": ["--degree"]},
              single={"degree": "the ablation re-decides one degree's items (names appear at degree 1)"})
    s.add_argument("--batch-size", type=int, default=32, help="items per forward pass when re-deciding and caching")
    progress_flag(s, BARS_ONLY)
    s.set_defaults(fn=_probe_ablation)
    s = pr.add_parser("attribution", help="direct logit attribution of the decision by layer (TransformerLens)")
    s.add_argument("run_dir", help="a run directory (its responses and model)")
    add_flags(s, AttributionConfig, ["degrees", "batch_size"], aliases={"degrees": ["--degree"]})
    bootstrap_flags(s)
    s.add_argument("--out", default=None, help="default: RUN_DIR/attribution")
    progress_flag(s, BARS_ONLY)
    s.set_defaults(fn=_probe_attribution)
