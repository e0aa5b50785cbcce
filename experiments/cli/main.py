"""The ``evenhand`` command's parser and entry point: each command group lives in its own module of
this package and adds its subcommands here, in the order ``evenhand --help`` lists them."""
from __future__ import annotations

import argparse
import sys

from evenhand import __version__

from . import demo, engine, organism, outputs, probe, run, score, studies, suite


def build_parser() -> argparse.ArgumentParser:
    """The full ``evenhand`` argument parser (every command, flag and default)."""
    p = argparse.ArgumentParser(prog="evenhand", description="Measure asymmetric demographic bias in LLM decisions.")
    p.add_argument("--version", action="version", version=f"evenhand {__version__}")
    p.add_argument("--plugin", action="append", default=[], metavar="MODULE_OR_FILE",
                   help="import a module or .py file that registers interventions of your own before the command "
                        "runs (repeatable; see docs/INTERVENTIONS.md)")
    sub = p.add_subparsers(dest="command", required=True)
    suite.register(sub)
    score.register_score(sub)
    studies.register_compare(sub)
    score.register_simulate(sub)
    run.register(sub)
    engine.register(sub)
    organism.register(sub)
    outputs.register_figures_report_runs(sub)
    studies.register_modes_bbq_interventions(sub)
    probe.register(sub)
    demo.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run one ``evenhand`` command; known errors print ``evenhand: error: ...`` and return 2."""
    args = build_parser().parse_args(argv)
    from evenhand.models.loading import ModelLoadError
    from evenhand.runs import RunError
    from evenhand.schema import RowError
    from evenhand.suite.content import ContentError
    try:
        if args.plugin:
            from interventions.registry import load_plugin
            for plugin in args.plugin:
                try:
                    load_plugin(plugin)
                except ImportError as exc:
                    raise ValueError(f"--plugin {plugin}: {exc}") from exc
        return args.fn(args)
    except (RowError, ContentError, RunError, ModelLoadError, KeyError, ValueError, TypeError,
            FileNotFoundError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"evenhand: error: {msg}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
