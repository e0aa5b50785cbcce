"""The intervention frontier: asymmetry reduction against accuracy loss, with CI crosshairs.

A pure function of the comparison table (``compare.parquet``): one point per
cell (intervention x options x seed), horizontal bar = accuracy-loss CI,
vertical bar = asymmetry-reduction CI; random-direction controls hollow; cells
of one swept intervention joined in sweep order (a strength curve). Good
methods sit up and to the left: asymmetry reduced, accuracy kept.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd


def frontier_points(table: pd.DataFrame, metric: str = "fraggap") -> pd.DataFrame:
    """One row per cell: reduction of |metric| and accuracy loss (pp), each with its CI."""
    red = table[(table["stat"] == "asymmetry_reduction") & (table["metric"] == metric)]
    loss = table[table["stat"] == "accuracy_loss"]
    cols = ["cell", "value", "ci_low", "ci_high"]
    m = red[cols + ["intervention", "control", "options", "seed"]].merge(loss[cols], on="cell",
                                                                         suffixes=("_red", "_loss"))
    for c in ("value_red", "ci_low_red", "ci_high_red", "value_loss", "ci_low_loss", "ci_high_loss"):
        m[c] = 100 * pd.to_numeric(m[c], errors="coerce")
    return m


def frontier_figure(table: pd.DataFrame, stem: str | Path, metric: str = "fraggap",
                    formats: Sequence[str] = ("pdf", "svg", "png")) -> list[Path]:
    """Draw and save the frontier for ``metric``; returns the written paths."""
    import matplotlib.pyplot as plt

    from evenhand.plotting import COLUMN_WIDTH, paper_style, save
    pal = paper_style()
    pts = frontier_points(table, metric)
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH, COLUMN_WIDTH * 0.75))
    ax.axhline(0, color="0.6", lw=0.6, zorder=0)
    ax.axvline(0, color="0.6", lw=0.6, zorder=0)
    names = list(dict.fromkeys(pts["intervention"]))
    for k, name in enumerate(names):
        colour = pal[k % len(pal)]
        for control in (False, True):
            sub = pts[(pts["intervention"] == name) & (pts["control"] == control)]
            if sub.empty:
                continue
            x, y = sub["value_loss"], sub["value_red"]
            xerr = [(x - sub["ci_low_loss"]).clip(lower=0), (sub["ci_high_loss"] - x).clip(lower=0)]
            yerr = [(y - sub["ci_low_red"]).clip(lower=0), (sub["ci_high_red"] - y).clip(lower=0)]
            ax.errorbar(x, y, xerr=xerr, yerr=yerr, fmt="none", ecolor=colour, elinewidth=0.6, alpha=0.7)
            ax.scatter(x, y, s=14, marker="o", facecolors="none" if control else colour, edgecolors=colour,
                       label=f"{name} (random dir.)" if control else name, zorder=3)
            if not control:  # a strength curve: cells of one seed that differ only in options
                for _, curve in sub.groupby("seed"):
                    if curve["options"].nunique() > 1:
                        ax.plot(curve["value_loss"], curve["value_red"], color=colour, lw=0.6, alpha=0.6)
    ax.set_xlabel("accuracy loss on GT items (pp)")
    ax.set_ylabel(f"|{metric}| reduction (pp)")
    ax.legend(frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=3, handletextpad=0.2,
              columnspacing=0.8)
    return save(fig, stem, formats)
