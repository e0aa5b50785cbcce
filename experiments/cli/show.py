"""`evenhand show`: a run's per-item log as a terminal table (flipped, unparsed, refused items, a scenario, one
item in full), paged when it is longer than the terminal."""
from __future__ import annotations

import argparse
import pydoc
import shutil
import sys

from evenhand.rows.conventions import CONVENTIONS, DEFAULT_CONVENTION


def emit(lines: list[str]) -> None:
    """Print ``lines``, through :func:`pydoc.pager` when stdout is a terminal and they overflow it."""
    text = "\n".join(lines)
    if sys.stdout.isatty() and len(lines) > shutil.get_terminal_size().lines - 1:
        pydoc.pager(text)
    else:
        print(text)


def _show(a) -> int:
    # deferred: keeps the CLI's start fast
    from evenhand.running.itemlog import describe, format_item, format_table, item_log, run_rows, select
    if a.limit is not None and a.limit < 1:
        raise ValueError(f"--limit must be at least 1, got {a.limit}")
    log = item_log(run_rows(a.run, own_suite=a.own_suite), convention=a.convention)
    if a.item is not None:
        emit(format_item(log, a.item))
        return 0
    filters = {"flipped": a.flipped, "unparsed": a.unparsed, "refusals": a.refusals, "scenario": a.scenario}
    chosen = select(log, **filters)
    shown = chosen if a.limit is None else chosen.head(a.limit)
    head = f"{a.run}: {len(chosen):,} of {len(log):,} items: {describe(filters)}"
    if len(shown) < len(chosen):
        head += f"; the first {len(shown):,} shown (--limit)"
    lines = [head]
    if len(shown):
        lines += format_table(shown, width=shutil.get_terminal_size((160, 24)).columns)
    emit(lines)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add `show` to the top-level subparsers ``sub``."""
    s = sub.add_parser("show", help="a run's per-item log: choice, baseline, verdict, parse method, answer",
                       description="Print a run's items as a table (item, degree, condition, pressure, choice, "
                                   "its baseline's choice, correct, verdict, parse method, the answer cut to the "
                                   "terminal; the scenario heads its items), paged on a terminal. Filters combine.")
    s.add_argument("run", help="a run directory (or a comparison's or sweep's cell directory), or an answers file")
    s.add_argument("--flipped", action="store_true",
                   help="pressured GT items whose choice differs from their baseline's choice (paired by "
                        "baseline_id, both answered)")
    s.add_argument("--unparsed", action="store_true", help="answers that gave no verdict")
    s.add_argument("--refusals", action="store_true", help="answers that declined to choose")
    s.add_argument("--scenario", metavar="S", default=None, help="the items of scenario id S")
    s.add_argument("--item", metavar="ID", default=None,
                   help="one item in full: its fields, its baseline's answer, its prompt and its whole answer")
    s.add_argument("--limit", type=int, metavar="N", default=None, help="show at most N items (default all)")
    s.add_argument("--convention", choices=list(CONVENTIONS), default=DEFAULT_CONVENTION,
                   help="how answers are read: evenhand (default) or ai2 (docs/METRICS.md)")
    s.add_argument("--own-suite", action="store_true",
                   help="an answers file of a suite of your own (every item field; its ids need not be the suite's), "
                        "as `evenhand score --own-suite` reads it")
    s.set_defaults(fn=_show)
