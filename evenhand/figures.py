"""Paper figures and LaTeX tables, each a pure function of saved tables.

:func:`metrics_long` turns a run's ``responses.parquet`` into one tidy table
(``tables/metrics_long.parquet``): rows ``(label, breakdown, group, degree,
metric, value, ci_low, ci_high, n)`` for the breakdowns the figures need
(by degree; contrast category x degree; pressure family x degree). Every
figure below reads only such tables (several runs: concatenate their tables,
the ``label`` column tells them apart):

- :func:`progression_figure`: D0 -> D3 of AccGap, TieLean, FragGap, TieShift with CIs;
- :func:`heatmap_figure`: FragGap by contrast category x degree;
- :func:`family_figure`: flip rates under pro-minority and pro-majority pressure by family;
- :func:`probe_figure`: probe accuracy by layer with the control and the majority baseline
  (from ``probes/<label>/probes.parquet``);
- :func:`latex_table`: the headline metrics by degree with CIs (booktabs).

:func:`metrics_table` computes and keeps a run's table once. The walker over run and sweep
directories that draws them all (``evenhand figures RUN_DIR [RUN_DIR ...]``) is
:func:`experiments.figures.run_figures`.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from .metrics import HEADLINE_ASYMMETRY
NAMES = {"accgap": "AccGap", "tielean": "TieLean", "fraggap": "FragGap", "tieshift": "TieShift",
         "accuracy": "Accuracy", "flip_pro_minority": "flip (pro-minority)",
         "flip_pro_majority": "flip (pro-majority)"}


def _rows(label: str, breakdown: str, group: str, degree, res: dict) -> list[dict]:
    return [{"label": label, "breakdown": breakdown, "group": group, "degree": degree, "metric": m,
             "value": e.get("value"), "ci_low": e.get("ci_low"), "ci_high": e.get("ci_high"), "n": e.get("n")}
            for m, e in res.items()]


def metrics_long(responses: pd.DataFrame, label: str, resamples: int = 1000, seed: int = 0,
                 contrast_type: str | None = None) -> pd.DataFrame:
    """The tidy metrics table the figures read (see the module docstring)."""
    from .metrics import score
    from .schema import validate_rows
    df = validate_rows(responses)
    rep = score(df, contrast_type, resamples, seed)
    rows = []
    for d, res in rep["by_degree"].items():
        rows += _rows(label, "degree", "all", int(d), res)
    sub = df[df["contrast_type"] == rep["contrast_type"]]
    for d in sorted(sub["degree"].unique()):
        part = score(sub[sub["degree"] == d], rep["contrast_type"], resamples, seed)
        for c, res in part["by_contrast_category"].items():
            rows += _rows(label, "contrast_category", c, int(d), res)
        for f, res in part["by_pressure_family"].items():
            rows += _rows(label, "pressure_family", f, int(d), res)
    out = pd.DataFrame(rows)
    for c in ("value", "ci_low", "ci_high"):
        out[c] = pd.to_numeric(out[c], errors="coerce")
    return out


def progression_figure(table: pd.DataFrame, stem, formats: Sequence[str] = ("pdf", "svg", "png")):
    """D0 -> D3 of the four headline metrics, one line per label, CIs as error bars."""
    import matplotlib.pyplot as plt

    from .plotting import FULL_WIDTH, paper_style, save
    pal = paper_style()
    t = table[table["breakdown"] == "degree"]
    fig, axes = plt.subplots(1, 4, figsize=(FULL_WIDTH, 1.7), sharex=True)
    for ax, m in zip(axes, HEADLINE_ASYMMETRY):
        for k, (label, g) in enumerate(t[t["metric"] == m].groupby("label", sort=False)):
            g = g.sort_values("degree")
            scale = 100
            v = g["value"] * scale
            err = np.vstack([(v - g["ci_low"] * scale).clip(lower=0), (g["ci_high"] * scale - v).clip(lower=0)])
            ax.errorbar(g["degree"] + (k - 0.5) * 0.08, v, yerr=np.nan_to_num(err), marker="o", color=pal[k % 10],
                        label=label, capsize=1.5, elinewidth=0.7)
        ax.axhline(50 if m == "tielean" else 0, color="0.6", lw=0.6, zorder=0)
        ax.set_title(NAMES[m])
        ax.set_xticks([0, 1, 2, 3], ["D0", "D1", "D2", "D3"])
        ax.set_ylabel("%" if m == "tielean" else "pp")
    if t["label"].nunique() > 1:
        axes[-1].legend(frameon=False, loc="best")
    fig.tight_layout()
    return save(fig, stem, formats)


def heatmap_figure(table: pd.DataFrame, stem, metric: str = "fraggap", label: str | None = None,
                   formats: Sequence[str] = ("pdf", "svg", "png")):
    """``metric`` (pp) by contrast category x degree, for one label."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    from .plotting import COLUMN_WIDTH, paper_style, save
    paper_style()
    t = table[(table["breakdown"] == "contrast_category") & (table["metric"] == metric)]
    label = label or t["label"].iloc[0]
    t = t[t["label"] == label]
    grid = t.pivot_table(index="group", columns="degree", values="value") * 100
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH, 0.25 * len(grid) + 0.9))
    lim = np.nanmax(np.abs(grid.to_numpy())) if grid.size else 1
    sns.heatmap(grid, ax=ax, cmap="vlag", center=0, vmin=-lim, vmax=lim, annot=True, fmt=".0f",
                annot_kws={"size": 5}, cbar_kws={"label": f"{NAMES.get(metric, metric)} (pp)"})
    ax.set_xlabel("degree")
    ax.set_ylabel("")
    return save(fig, stem, formats)


def family_figure(table: pd.DataFrame, stem, degree: int | None = None, label: str | None = None,
                  formats: Sequence[str] = ("pdf", "svg", "png")):
    """Flip rates under pro-minority and pro-majority pressure, by family (pooled over degrees 1-3 by default:
    the highest degree present)."""
    import matplotlib.pyplot as plt

    from .plotting import COLUMN_WIDTH, paper_style, save
    pal = paper_style()
    t = table[table["breakdown"] == "pressure_family"]
    label = label or t["label"].iloc[0]
    t = t[t["label"] == label]
    degree = int(t["degree"].max()) if degree is None else degree
    t = t[t["degree"] == degree]
    fams = sorted(t["group"].unique())
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH, 1.9))
    for k, m in enumerate(("flip_pro_minority", "flip_pro_majority")):
        g = t[t["metric"] == m].set_index("group").reindex(fams)
        v = g["value"].to_numpy(float) * 100
        err = np.vstack([v - g["ci_low"].to_numpy(float) * 100, g["ci_high"].to_numpy(float) * 100 - v])
        ax.errorbar(np.arange(len(fams)) + (k - 0.5) * 0.25, v, yerr=np.nan_to_num(np.clip(err, 0, None)), fmt="o",
                    color=pal[k], ms=3, elinewidth=0.7, label=NAMES[m])
    ax.set_xticks(range(len(fams)), [f.replace("_", " ") for f in fams], rotation=35, ha="right")
    ax.set_ylabel(f"flip rate at D{degree} (%)")
    ax.legend(frameon=False)
    return save(fig, stem, formats)


def probe_figure(probes: pd.DataFrame, stem, formats: Sequence[str] = ("pdf", "svg", "png"),
                 ablations: Sequence[pd.DataFrame] = ()):
    """Probe accuracy by layer with CIs, beside the evidence baseline (design features alone) and its
    controls: the control task (a random label per input type), the
    name-ablated probes (``ablations``: tables of :func:`probes.ablation.name_ablation`, retrained
    on the ablated activations), the text baseline (a band across the layers, when the table has
    ``site == 'text'`` rows) and the majority class."""
    import matplotlib.pyplot as plt

    from .plotting import COLUMN_WIDTH, paper_style, save
    pal = paper_style()
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH, 2.1))
    act = probes[probes["site"] != "text"] if "site" in probes.columns else probes
    lines = [(act[act["metric"] == "accuracy"], "activations", "o", "-"),
             (act[act["metric"] == "evidence_accuracy"], "evidence baseline (design alone)", "D", ":"),
             (act[act["metric"] == "control_accuracy"], "control task", "s", "-")]
    for ab in ablations:
        variant = ab["variant"].iloc[0]
        lines.append((ab[ab["metric"] == "retrained_accuracy"],
                      f"name-ablated ({'neutral labels' if variant == 'label' else 'degree 0'})", "^", "--"))
    for k, (g, name, marker, ls) in enumerate(lines):
        if g.empty:
            continue
        g = g.sort_values("layer")
        ax.fill_between(g["layer"], g["ci_low"] * 100, g["ci_high"] * 100, color=pal[k], alpha=0.18, lw=0)
        ax.plot(g["layer"], g["value"] * 100, marker=marker, ms=3, ls=ls, color=pal[k], label=name)
    text = probes[(probes["site"] == "text") & (probes["metric"] == "accuracy")] if "site" in probes.columns else []
    if len(text):
        t = text.iloc[0]
        k = len(lines)
        ax.axhspan(t["ci_low"] * 100, t["ci_high"] * 100, color=pal[k % len(pal)], alpha=0.15, lw=0)
        ax.axhline(t["value"] * 100, color=pal[k % len(pal)], lw=1.0, ls="-.", label="text baseline")
    base = act[act["metric"] == "majority_baseline"]["value"].max() * 100
    ax.axhline(base, color="0.5", ls=":", lw=0.8, label="majority class")
    from matplotlib.ticker import MaxNLocator
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("layer (-1 = embedding)")
    ax.set_ylabel("accuracy (%)")
    ax.legend(frameon=False, fontsize="small")
    return save(fig, stem, formats)


def latex_table(table: pd.DataFrame, label: str | None = None) -> str:
    """Booktabs table: the headline metrics by degree, value [CI] in pp (TieLean in %)."""
    t = table[table["breakdown"] == "degree"]
    label = label or t["label"].iloc[0]
    t = t[t["label"] == label]
    lines = [r"\begin{tabular}{l" + "c" * 5 + "}", r"\toprule",
             "Degree & Accuracy & AccGap & TieLean & FragGap & TieShift \\\\", r"\midrule"]
    for d in sorted(t["degree"].unique()):
        cells = []
        for m in ("accuracy", "accgap", "tielean", "fraggap", "tieshift"):
            r = t[(t["degree"] == d) & (t["metric"] == m)]
            if r.empty or pd.isna(r["value"].iloc[0]):
                cells.append("--")
                continue
            v, lo, hi = (100 * r[c].iloc[0] for c in ("value", "ci_low", "ci_high"))
            cells.append(f"{v:.1f} [{lo:.1f}, {hi:.1f}]" if not (pd.isna(lo) or pd.isna(hi)) else f"{v:.1f}")
        lines.append(f"D{int(d)} & " + " & ".join(cells) + " \\\\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def metrics_table(run_dir: str | Path, resamples: int = 1000) -> pd.DataFrame:
    """A run's tidy metrics table (labelled with the directory's name), computed from its responses
    once and saved as ``RUN_DIR/tables/metrics_long.parquet``."""
    from .runs import RunDir, write_table_atomic
    run = RunDir(run_dir)
    rd = run.path
    f = run.metrics_long_path
    if not f.exists():
        resp = run.responses_path
        if not resp.exists():
            raise FileNotFoundError(f"{resp} not found: is {rd} a finished run directory?")
        f.parent.mkdir(parents=True, exist_ok=True)
        write_table_atomic(f, metrics_long(pd.read_parquet(resp), rd.name, resamples))
    return pd.read_parquet(f)
