"""One paper style for every EvenHand figure, and saving to PDF, SVG and PNG.

Figures are pure functions of saved tables: they read a DataFrame and write
files, nothing else. The style: seaborn's colour-blind-safe palette, 7 pt text
readable at a single column's width (3.3 in), TrueType fonts embedded in PDF
(``pdf.fonttype = 42``), no top/right spines.

Saving is byte-for-byte reproducible: no creation date in PDF or SVG metadata
and a fixed ``svg.hashsalt``, so re-drawing a figure from the same table gives
the same file in every format (tested).
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

COLUMN_WIDTH = 3.3   # inches, one column of a two-column paper
FULL_WIDTH = 6.9
FORMATS = ("pdf", "svg", "png")
DPI = 300  # of the saved PNGs (savefig.dpi)


def paper_style():
    """Apply the style; returns the palette (a list of colours)."""
    import matplotlib
    matplotlib.use("Agg", force=True)
    import seaborn as sns
    sns.set_theme(context="paper", style="ticks", palette="colorblind", font_scale=0.9)
    matplotlib.rcParams.update({
        "pdf.fonttype": 42, "ps.fonttype": 42, "svg.fonttype": "none", "font.size": 7, "axes.titlesize": 7,
        "axes.labelsize": 7, "xtick.labelsize": 6, "ytick.labelsize": 6, "legend.fontsize": 6,
        "axes.spines.top": False, "axes.spines.right": False, "figure.dpi": 150, "savefig.dpi": DPI,
        "savefig.bbox": "tight", "lines.linewidth": 1.0, "lines.markersize": 3, "svg.hashsalt": "evenhand"})
    return sns.color_palette("colorblind")


def save(fig, stem: str | Path, formats: Sequence[str] = FORMATS) -> list[Path]:
    """Write ``stem.<fmt>`` for each format (atomically); returns the paths."""
    import os

    import matplotlib.pyplot as plt
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    bad = [f for f in formats if f not in FORMATS]
    if bad:
        raise ValueError(f"figure formats must be among {', '.join(FORMATS)}, got {', '.join(bad)}")
    paths = []
    for fmt in formats:
        path = stem.with_suffix(f".{fmt}")
        tmp = path.with_name(f".{path.name}.tmp")
        meta = {"pdf": {"Creator": "EvenHand", "CreationDate": None, "ModDate": None},
                "svg": {"Creator": "EvenHand", "Date": None}}.get(fmt)
        fig.savefig(tmp, format=fmt, metadata=meta)
        os.replace(tmp, path)
        paths.append(path)
    plt.close(fig)
    return paths
