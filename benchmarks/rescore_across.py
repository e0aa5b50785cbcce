"""Re-read a committed across-mechanism table under the current decision rules (evenhand/inference/decision.py): pure
rescoring of its ``across.csv`` (each mechanism's summary rows), written to ``<dir>/rescored/`` (across.csv,
robustness.csv, across.md, across.png). The flags are kept as the runs recorded them (the committed summaries do not
carry the accuracy-loss CIs that set a flag's level).

    OMP_NUM_THREADS=1 python benchmarks/rescore_across.py benchmarks/results/dose_mechanisms
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evenhand.runs.rundir import write_table_atomic  # noqa: E402
from experiments.studies.dose_response.across import across_figure, across_markdown, across_table, robustness  # noqa: E402


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+", help="directories holding a committed across.csv")
    args = ap.parse_args(argv)
    for d in map(Path, args.dirs):
        old = pd.read_csv(d / "across.csv")
        summ = {m: g.drop(columns=["mechanism"]) for m, g in old.groupby("mechanism", sort=False)}
        table = across_table(summ)
        out = d / "rescored"
        out.mkdir(exist_ok=True)
        write_table_atomic(out / "across.csv", table)
        write_table_atomic(out / "robustness.csv", robustness(table))
        (out / "across.md").write_text(across_markdown(table))
        across_figure(table, out / "across", formats=("png",))
        renamed = old["class"].replace({"nothing": "none"}).where(old["class"] != "neither", old["side"])
        was = renamed.set_axis(pd.MultiIndex.from_frame(old[["mechanism", "arm", "metric"]]))  # old names, new words
        now = table.set_index(["mechanism", "arm", "metric"])["class"]
        print(f"{d}: {int((was != now.reindex(was.index)).sum())} of {len(was)} cells read otherwise (renamed classes mapped: nothing -> none, neither -> its side) -> {out}")


if __name__ == "__main__":
    main()
