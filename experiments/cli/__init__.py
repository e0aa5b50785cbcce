"""The ``evenhand`` command line, one module per command group (suite, score/simulate, compare/bbq/modes,
run, decide/cache, probe, organism, figures/report/runs, demo) and the text they print in
:mod:`experiments.cli.formatting`. Run it as ``evenhand ...`` or ``python -m experiments.cli ...``."""
from .main import build_parser, main

__all__ = ["build_parser", "main"]
