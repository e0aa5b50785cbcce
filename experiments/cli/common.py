"""What several commands share: the bootstrap flags (generated from
:class:`~evenhand.inference.stats.BootstrapOptions`; refused where the interval resamples nothing), the model-and-items
flags, ``--json`` and ``--quiet``, and the start of a model run (cheap checks first, then the items and the
model). One spelling per concept: ``--degrees``, ``--quiet``, ``--limit``; older ones are aliases."""
from __future__ import annotations

import argparse

from collections.abc import Iterable, Mapping

from evenhand.rows.conventions import CONVENTIONS, DEFAULT_CONVENTION
from evenhand.running.decisions import DecideOptions
from evenhand.engine.registry import DEFAULT
from evenhand.models.loading import ModelSpec
from evenhand.support.options import add_flags, alias_help, options_from_args
from evenhand.scoring.metrics import INTERVAL
from evenhand.inference.stats import INTERVAL_NAMES, BootstrapOptions
from evenhand.suite.subsets import CONTRAST_TYPES
from experiments.studies.run.config import SuiteConfig

MODEL_FLAGS = ("model", "dtype", "device", "attn_implementation", "trust_remote_code", "chat_template")
"""The ModelSpec fields that the model commands take as flags."""
SUITE_FLAGS = ("subset", "seed", "limit")
"""The SuiteConfig fields that the model commands take as flags."""
BOOTSTRAP_FLAGS = ("resamples", "seed")
"""The BootstrapOptions fields most commands take as flags (--interval where a command chooses one)."""


def bootstrap_flags(x: argparse.ArgumentParser, names: Iterable[str] = BOOTSTRAP_FLAGS,
                    defaults: Mapping[str, object] | None = None, choices: Mapping[str, Iterable] | None = None) -> None:
    """``--resamples``, ``--seed`` and ``--interval`` (the fields ``names``), generated from
    :class:`~evenhand.inference.stats.BootstrapOptions`: the one place any command declares them."""
    add_flags(x, BootstrapOptions, names, defaults=defaults, choices=choices)


def bootstrap_options(a: argparse.Namespace, names: Iterable[str] = BOOTSTRAP_FLAGS) -> BootstrapOptions:
    """The :class:`~evenhand.inference.stats.BootstrapOptions` the bootstrap flags ``names`` describe."""
    return options_from_args(BootstrapOptions, a, names)


def json_flag(x: argparse.ArgumentParser) -> None:
    """``--json``: print the result as JSON."""
    x.add_argument("--json", action="store_true", help="print the result as JSON instead of text")


QUIET_HELP = "no progress bars and no stage headers (the results are still printed)"
"""What ``--quiet`` means in every command that has it (where a command prints no stage headers: BARS_ONLY)."""
BARS_ONLY = "no progress bars (the results are still printed)"
"""``--quiet`` in the commands that print no stage headers."""


def progress_flag(x: argparse.ArgumentParser, what: str = QUIET_HELP) -> None:
    """``--quiet`` (alias ``--no-progress``): no progress bars or stage headers; ``what`` says what it silences
    where that is less."""
    x.add_argument("--quiet", "--no-progress", dest="quiet", action="store_true",
                   help=alias_help(what, ["--no-progress"]))


def quiet_libraries() -> None:
    """Turn off the progress bars the model libraries draw themselves (loading weights, downloads)."""
    try:
        from huggingface_hub.utils import disable_progress_bars  # deferred: a model library, only when quiet
        disable_progress_bars()
        from transformers.utils import logging as hf_logging  # deferred: a model library, only when quiet
        hf_logging.disable_progress_bar()
    except ImportError:
        pass


def progress(a: argparse.Namespace) -> bool:
    """Whether to show progress (not ``--quiet``); when quiet, the model libraries' own bars are off too."""
    if a.quiet:
        quiet_libraries()
    return not a.quiet


def boot_args(x: argparse.ArgumentParser, resampled: bool = True) -> None:
    """The flags of the commands that score the metrics (`score`, `compare-runs`); their intervals are the
    jackknife-t over scenarios. ``resampled``: whether something the command prints still resamples (the
    sign-flip test of `compare-runs`), so that ``--resamples``/``--seed`` are taken; else they are refused."""
    x.add_argument("--contrast-type", choices=list(CONTRAST_TYPES), default=None,
                   help="never pooled; default type1 when present")
    x.add_argument("--convention", choices=list(CONVENTIONS), default=DEFAULT_CONVENTION,
                   help="evenhand (default): directions are about who is favoured; ai2: Ai2's reference scorer "
                        "(naming the minority counts as leaning toward it on negative questions too; docs/METRICS.md)")
    json_flag(x)
    if resampled:
        bootstrap_flags(x)
        return
    refused_bootstrap(x)


def refused_bootstrap(x: argparse.ArgumentParser, flags: Iterable[str] = ("--resamples", "--seed"),
                      what: str = "the metrics' 95% CIs are") -> None:
    """Refuse ``--resamples`` (and ``--seed``) where every interval the command computes is the jackknife-t,
    which resamples nothing: one line naming the interval, not an option recorded and ignored."""
    for flag in flags:
        refused_flag(x, flag, f"{flag} sets the cluster bootstrap, and {what} the "
                              f"{INTERVAL_NAMES[INTERVAL]}, which resamples nothing: drop {flag}")


def model_args(x: argparse.ArgumentParser) -> None:
    """The flags of the commands that load a model and decide a subset (`decide`, `cache`, `modes`)."""
    add_flags(x, ModelSpec, MODEL_FLAGS)
    add_flags(x, SuiteConfig, SUITE_FLAGS)
    x.add_argument("--out", required=True, help="the output directory (a re-run resumes it)")
    add_flags(x, DecideOptions, ["batch_size"])
    progress_flag(x, BARS_ONLY)


def model_spec(a: argparse.Namespace):
    """The :class:`~evenhand.models.loading.ModelSpec` the model flags describe."""
    return options_from_args(ModelSpec, a, MODEL_FLAGS)


def items(a: argparse.Namespace):
    """The suite items the subset flags select."""
    from experiments.studies.run.config import suite_items  # deferred: keeps the CLI's start fast
    return suite_items(options_from_args(SuiteConfig, a, SUITE_FLAGS))


def refused_flag(x: argparse.ArgumentParser, flag: str, why: str) -> None:
    """Make ``flag`` (one that would do nothing here) an error saying ``why``, not an unknown flag; hidden
    from help."""
    class Refused(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            parser.error(why)
    x.add_argument(flag, action=Refused, help=argparse.SUPPRESS)


def renamed_flag(x: argparse.ArgumentParser, old: str, new: str) -> None:
    """Make ``old`` (a flag renamed ``new``) an error that names ``new``, not an unknown flag; hidden from help."""
    class Renamed(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            parser.error(f"{old} is now {new}")
    x.add_argument(old, action=Renamed, help=argparse.SUPPRESS)


def prepare(a: argparse.Namespace, engine: str = DEFAULT, options=None):
    """The shared start of `decide`, `cache` and `modes`: cheap checks first, then items and the model
    (loaded for ``engine``, :func:`evenhand.engine.registry.load`; an engine that takes ``options`` gets them
    and the output directory, where it keeps its response cache).
    Returns (output directory, resolved spec, items, loaded model)."""
    from evenhand.engine.registry import get, has_local_weights, load  # deferred: keeps the CLI's start fast
    from evenhand.models.loading import locate, resolve_spec  # deferred: keeps the CLI's start fast
    from experiments.studies.common import check_output_dir  # deferred: keeps the CLI's start fast
    from pathlib import Path  # deferred: keeps the CLI's start fast
    spec = resolve_spec(model_spec(a))
    if has_local_weights(engine):
        locate(spec)  # a missing or damaged model fails before the output directory is made
    made = [p for p in (Path(a.out), *Path(a.out).parents) if not p.exists()]
    out = check_output_dir(a.out)
    try:
        chosen = items(a)
        if getattr(get(engine), "Options", None) is not None:
            return out, spec, chosen, load(spec, engine, options=options, run_dir=out)
        return out, spec, chosen, load(spec, engine)
    except BaseException:  # a failed start leaves no empty directories behind
        for p in made:
            try:
                p.rmdir()
            except OSError:
                break
        raise
