"""`evenhand runs list`: the run directories under a folder with their status."""
from __future__ import annotations

import argparse
from pathlib import Path

from .formatting import runs_text


def _runs_list(a) -> int:
    root = Path(a.directory)
    if not root.is_dir():
        raise ValueError(f"{root} is not a directory")
    from evenhand.runs.rundir import RunDir  # deferred: keeps the CLI's start fast
    rows = []
    for run in RunDir.find(root):
        man, m = run.manifest(), run.manifest_path
        model = (man.get("model") or {}).get("name") if isinstance(man.get("model"), dict) else man.get("model")
        secs = sum(v for v in (man.get("timings") or {}).values() if isinstance(v, (int, float)))
        rows.append((str(m.parent.relative_to(root)) or ".", man.get("status"), model or "-",
                     man.get("n_items", man.get("n_eval_items", "-")), f"{secs:.0f}s",
                     ((man.get("git") or {}).get("sha") or "-")[:10] if isinstance(man.get("git"), dict) else "-"))
    if not rows:
        print(f"no runs under {root}")
        return 0
    print(runs_text(rows))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add `runs list` to the top-level subparsers ``sub``."""
    rl = sub.add_parser("runs", help="run directories").add_subparsers(dest="runs_command", required=True)
    s = rl.add_parser("list", help="the runs under a directory with their status")
    s.add_argument("directory", nargs="?", default="runs", help="where to look, recursively (default runs)")
    s.set_defaults(fn=_runs_list)
