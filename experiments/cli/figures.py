"""`evenhand figures`: paper figures and a LaTeX table drawn from finished run directories."""
from __future__ import annotations

import argparse
from pathlib import Path

from .common import bootstrap_flags


def writable_dir(path: str | Path) -> Path:
    """Create the directory ``path`` and prove it can be written, before any long work; an OSError
    naming the path otherwise (the command prints it on one line)."""
    p = Path(path)
    p.mkdir(parents=True, exist_ok=True)
    probe = p / ".evenhand-write-test"
    probe.write_text("ok")
    probe.unlink()
    return p


def _figures(a) -> int:
    from experiments.figures import run_figures  # deferred: keeps the CLI's start fast
    if a.out:
        writable_dir(a.out)
    formats = [f.strip() for f in a.format.split(",") if f.strip()]
    paths = run_figures(a.run_dirs, a.out, formats, a.resamples)
    for p in paths:
        print(p)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add `figures` to the top-level subparsers ``sub``."""
    s = sub.add_parser("figures", help="paper figures and a LaTeX table from one or more run directories")
    s.add_argument("run_dirs", nargs="+", help="run directories (each with responses.parquet), or a sweep's")
    s.add_argument("--format", default="pdf,svg,png", help="file formats, comma-separated (default pdf,svg,png)")
    s.add_argument("--out", default=None, help="default: RUN_DIR/figures")
    bootstrap_flags(s, ["resamples"])
    s.set_defaults(fn=_figures)
