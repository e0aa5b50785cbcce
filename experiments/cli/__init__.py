"""The ``evenhand`` command line, one module per command group (suite, score/simulate, compare/bbq/modes,
run, decide/cache, probe, organism, figures/report/runs, demo) and the text they print in
:mod:`experiments.cli.formatting` (a study's text is its own, ``Study.text``). Run it as ``evenhand ...`` or
``python -m experiments.cli ...``. The CLI imports the studies; no study imports the CLI (setup.cfg)."""
from .main import build_parser, main

__all__ = ["build_parser", "main"]
