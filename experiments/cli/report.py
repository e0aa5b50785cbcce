"""`evenhand report`: the Markdown and HTML page of a finished run directory."""
from __future__ import annotations

import argparse

from .common import refused_bootstrap


def _report_page(a) -> int:
    from evenhand.support.messages import not_a_run_message, writable_dir
    from evenhand.runs.rundir import RunDir
    from experiments.report import write_report
    if not RunDir(a.run_dir).metrics_path.is_file():
        raise ValueError(not_a_run_message(a.run_dir, "report", RunDir(a.run_dir).manifest_path))
    writable_dir(a.run_dir)
    md, page = write_report(a.run_dir)
    print(md.read_text().split("## By degree")[0].rstrip())
    print(f"\nwrote {md} and {page}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add `report` to the top-level subparsers ``sub``."""
    s = sub.add_parser("report", help="a Markdown and HTML page: headline numbers in words and every figure")
    s.add_argument("run_dir", help="a finished run directory")
    refused_bootstrap(s, ["--resamples"], what="the page's 95% CIs are")
    s.set_defaults(fn=_report_page)
