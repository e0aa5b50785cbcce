"""`evenhand figures`, `report` and `runs list`: what is drawn and written from finished run
directories."""
from __future__ import annotations

import argparse
from pathlib import Path

from .common import bootstrap_flags
from .formatting import runs_text


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
    from experiments.figures import run_figures
    if a.out:
        writable_dir(a.out)
    formats = [f.strip() for f in a.format.split(",") if f.strip()]
    paths = run_figures(a.run_dirs, a.out, formats, a.resamples)
    for p in paths:
        print(p)
    return 0


def _report_page(a) -> int:
    from experiments.pages import write_report
    md, page = write_report(a.run_dir, a.resamples)
    print(md.read_text().split("## By degree")[0].rstrip())
    print(f"\nwrote {md} and {page}")
    return 0


def _runs_list(a) -> int:
    root = Path(a.directory)
    if not root.is_dir():
        raise ValueError(f"{root} is not a directory")
    from evenhand.runs import RunDir
    rows = []
    for run in RunDir.find(root):
        man, m = run.manifest(), run.manifest_path
        model = (man.get("model") or {}).get("name") if isinstance(man.get("model"), dict) else man.get("model")
        secs = sum(v for v in (man.get("timings") or {}).values() if isinstance(v, (int, float)))
        rows.append((str(m.parent.relative_to(root)) or ".", man.get("status"), model or "-",
                     man.get("n_items", man.get("n_eval_items", "-")), f"{secs:.0f}s",
                     (man.get("git") or {}).get("sha", "-")[:10] if isinstance(man.get("git"), dict) else "-"))
    if not rows:
        print(f"no runs under {root}")
        return 0
    print(runs_text(rows))
    return 0


def register_figures_report_runs(sub: argparse._SubParsersAction) -> None:
    """Add `figures`, `report` and `runs list` to the top-level subparsers ``sub``."""
    s = sub.add_parser("figures", help="paper figures and a LaTeX table from one or more run directories")
    s.add_argument("run_dirs", nargs="+", help="run directories (each with responses.parquet), or a sweep's")
    s.add_argument("--format", default="pdf,svg,png", help="file formats, comma-separated (default pdf,svg,png)")
    s.add_argument("--out", default=None, help="default: RUN_DIR/figures")
    bootstrap_flags(s, ["resamples"])
    s.set_defaults(fn=_figures)
    s = sub.add_parser("report", help="a Markdown and HTML page: headline numbers in words and every figure")
    s.add_argument("run_dir", help="a finished run directory")
    bootstrap_flags(s, ["resamples"])
    s.set_defaults(fn=_report_page)
    rl = sub.add_parser("runs", help="run directories").add_subparsers(dest="runs_command", required=True)
    s = rl.add_parser("list", help="the runs under a directory with their status")
    s.add_argument("directory", nargs="?", default="runs", help="where to look, recursively (default runs)")
    s.set_defaults(fn=_runs_list)
