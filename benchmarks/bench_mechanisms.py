"""The dose-response benchmark across dial mechanisms, from runs already on disk (no decoding).

    python benchmarks/bench_mechanisms.py runs/dose_mechanisms                 # every <dir>/<mechanism>/summary.csv
    python benchmarks/bench_mechanisms.py runs/dose_mechanisms --mechanism last_layer names --out /tmp/across

Reads each run's ``summary.csv`` and writes ``across.parquet``/``.csv``, ``robustness.csv``, ``across.json`` and
the figure (``across.{pdf,svg,png}``; ``across_tieshift.*`` when TieShift was scored) to ``<dir>/across/``
(experiments.studies.dose_response.across). The runs come from ``bench_dose_response.py CONFIG --mechanism ...``.

More in docs/interventions/dose_response.md, "The benchmark across dial mechanisms"."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pandas as pd

from evenhand.runs.rundir import RunDir
from experiments.studies.dose_response.across import CLASSES, write_across
from organism.dials import load_builtin
from organism.mechanism import MECHANISMS


def found_runs(root: Path) -> list[str]:
    """The mechanisms with a scored run under ``root`` (``<root>/<name>/summary.csv``), the registered ones in
    registration order, then any other directory's name alphabetically."""
    load_builtin()
    names = [p.name for p in sorted(root.iterdir()) if p.is_dir() and RunDir(p).dose_summary_csv.exists()]
    known = [m for m in MECHANISMS if m in names]
    return known + [n for n in names if n not in known]


def main(argv: list[str] | None = None) -> int:
    """Write the across-mechanism outputs; print the robustness summary."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", help="the directory of the per-mechanism runs (the --output-dir of "
                    "bench_dose_response.py --mechanism)")
    ap.add_argument("--mechanism", nargs="+", metavar="M", help="these mechanisms' runs, in this order (default: "
                    "every subdirectory holding a summary.csv)")
    ap.add_argument("--out", help="where to write (default <runs>/across)")
    args = ap.parse_args(argv)
    root = Path(args.runs)
    if not root.is_dir():
        ap.error(f"runs: {root} is not a directory")
    mechs = args.mechanism or found_runs(root)
    if not mechs:
        ap.error(f"runs: no <mechanism>/summary.csv under {root}")
    out = Path(args.out) if args.out else RunDir(root).across_dir
    try:
        _, rob = write_across({m: root / m for m in mechs}, out)
    except (FileNotFoundError, ValueError) as exc:
        print(f"bench_mechanisms: error: {exc}", file=sys.stderr)
        return 2
    with pd.option_context("display.width", 250, "display.max_columns", None, "display.max_colwidth", 60):
        print(rob[["arm", "metric", "verdict", *CLASSES]].to_string(index=False))
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
