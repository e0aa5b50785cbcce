"""`evenhand table`: several runs' degree-3 headline metrics side by side (text, CSV, LaTeX, a forest plot)."""
from __future__ import annotations

import argparse

from evenhand.rows.conventions import CONVENTIONS, DEFAULT_CONVENTION
from evenhand.support.messages import writable_dir
from evenhand.reporting.plotting import FORMATS
from evenhand.suite.subsets import CONTRAST_TYPES


def _table(a) -> int:
    from pathlib import Path

    from evenhand.reporting.multirun import runs_table  # deferred: keeps the CLI's start fast
    labels = [x.strip() for x in a.labels.split(",")] if a.labels else None
    formats = [f.strip() for f in a.format.split(",") if f.strip()]
    bad = [f for f in formats if f not in FORMATS]
    if bad:
        raise ValueError(f"--format: figure formats must be among {', '.join(FORMATS)}, got {', '.join(bad)}")
    for out in (a.csv, a.latex, a.figure):
        if out:
            writable_dir(str(Path(out).parent) or ".")
    t = runs_table(a.runs, labels=labels, contrast_type=a.contrast_type, convention=a.convention,
                   own_suite=a.own_suite)
    print(t.text())
    if a.csv:
        print(f"table: {t.to_csv(a.csv)}")
    if a.latex:
        t.to_latex(a.latex)
        print(f"LaTeX: {a.latex}")
    if a.figure:
        for p in t.figure(a.figure, formats):
            print(f"figure: {p}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add `table` to the top-level subparsers ``sub``."""
    s = sub.add_parser("table", help="several runs' degree-3 headline metrics side by side, with CIs, n and k",
                       description="The degree-3 headline metrics of several runs on the same items, each with its "
                                   "95% CI, n items and k scenarios: as text, CSV, LaTeX and a forest plot. Runs on "
                                   "different suite versions or items are refused. In Python: eh.table(runs).")
    s.add_argument("runs", nargs="+", metavar="RUN[=LABEL]",
                   help="run directories (a comparison's or sweep's cell is one) or answers files; RUN=LABEL "
                        "labels a run (default: its model's name)")
    s.add_argument("--labels", default=None, help="comma-separated labels, one per run, in order (instead of =LABEL)")
    s.add_argument("--csv", metavar="FILE", default=None, help="write the tidy table (one row per run and metric)")
    s.add_argument("--latex", metavar="FILE", default=None, help="write a booktabs table (a row per run)")
    s.add_argument("--figure", metavar="STEM", default=None,
                   help="write the forest plot to STEM.pdf/.svg/.png (--format)")
    s.add_argument("--format", default="pdf,svg,png",
                   help="the figure's formats, comma-separated (default pdf,svg,png)")
    s.add_argument("--contrast-type", choices=list(CONTRAST_TYPES), default=None,
                   help="never pooled; default type1 when present")
    s.add_argument("--convention", choices=list(CONVENTIONS), default=DEFAULT_CONVENTION,
                   help="evenhand (default) or ai2: Ai2's reference scorer (docs/METRICS.md)")
    s.add_argument("--own-suite", action="store_true",
                   help="the answers files are of a suite of your own (every item field), as `score --own-suite` "
                        "reads them")
    s.set_defaults(fn=_table)
