"""`evenhand figures`: paper figures and a LaTeX table drawn from finished run directories."""
from __future__ import annotations

import argparse
from evenhand.support.messages import writable_dir

from .common import refused_bootstrap


def _figures(a) -> int:
    from experiments.figures import run_figures  # deferred: keeps the CLI's start fast
    if a.out:
        writable_dir(a.out)
    formats = [f.strip() for f in a.format.split(",") if f.strip()]
    paths = run_figures(a.run_dirs, a.out, formats)
    for p in paths:
        print(p)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add `figures` to the top-level subparsers ``sub``."""
    s = sub.add_parser("figures", help="paper figures and a LaTeX table from one or more run directories")
    s.add_argument("run_dirs", nargs="+", metavar="RUN[=LABEL]",
                   help="run directories (each with responses.parquet), or a sweep's; RUN=LABEL names a run's series "
                        "(default: its directory's name)")
    s.add_argument("--format", default="pdf,svg,png", help="file formats, comma-separated (default pdf,svg,png)")
    s.add_argument("--out", default=None, help="default: RUN_DIR/figures (one run; several runs need --out)")
    refused_bootstrap(s, ["--resamples"], what="the figures' 95% CIs are")
    s.set_defaults(fn=_figures)
