"""Paper figures and LaTeX tables, each a pure function of saved tables.

Every metrics figure reads only :func:`metrics_long`'s tables (several runs: concatenate their tables, the ``label``
column tells them apart); :func:`latex_table` (:mod:`evenhand.reporting.tables`) gives the headline metrics by degree
with CIs, units, n and a caption. Every label goes through :mod:`evenhand.reporting.labels`. :func:`metrics_table`
computes and keeps a run's table once. The walker over run and sweep directories that draws them all
(``evenhand figures RUN_DIR [RUN_DIR ...]``) is ``experiments.figures.run_figures``."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ..inference.stats import RESAMPLES, BootstrapOptions
from .labels import (
    degree_name, group_name, metric_name, metric_unit, minus, model_name, number, sign_convention,
    signed_axis_label,
)
from ..vocab.metric_defs import by_degree, find_metric
from .tables import latex_table
from ..scoring.metrics import score
from ..rows.schema import validate_rows
from .plotting import FULL_WIDTH, paper_style, save
from .plotting import COLUMN_WIDTH
from ..runs.rundir import RunDir, write_table_atomic

__all__ = ["MIN_CELL_N", "COLUMNS", "metrics_long", "metrics_table", "progression_figure", "heatmap_cells",
           "heatmap_figure", "family_figure", "probe_figure", "forest_figure", "latex_table", "models_of"]

MIN_CELL_N = 20
"""The fewest items a heatmap cell or a family's flip rate needs to be shown as a finding: below it (or
with fewer than two scenarios, so without an interval) the cell is greyed and its value bracketed."""
COLUMNS = ("label", "breakdown", "group", "degree", "metric", "value", "ci_low", "ci_high", "n", "clusters",
           "model", "contrast_type")
"""The columns of :func:`metrics_long`'s table; a saved table without all of them is recomputed."""
DEGREE_AXIS = "Identity signal (D0 none → D3 explicit)"


def _rows(label: str, breakdown: str, group: str, degree, res: dict) -> list[dict]:
    return [{"label": label, "breakdown": breakdown, "group": group, "degree": degree, "metric": m,
             "value": e.get("value"), "ci_low": e.get("ci_low"), "ci_high": e.get("ci_high"), "n": e.get("n"),
             "clusters": e.get("clusters")} for m, e in res.items()]


def metrics_long(responses: pd.DataFrame, label: str, resamples: int | None = None, seed: int | None = None,
                 contrast_type: str | None = None, bootstrap: BootstrapOptions | None = None) -> pd.DataFrame:
    """The tidy metrics table the figures read (``tables/metrics_long.parquet`` of a run); ``bootstrap`` as in
    :func:`evenhand.scoring.metrics.score`.

    Rows ``(label, breakdown, group, degree, metric, value, ci_low, ci_high, n, clusters, model, contrast_type)``
    for the breakdowns the figures need: by degree, with an ``items`` row per degree giving its items and
    scenarios; contrast category x degree; pressure family x degree."""
    df = validate_rows(responses)
    rep = score(df, contrast_type, resamples, seed, bootstrap=bootstrap)
    rows = []
    sub = df[df["contrast_type"] == rep["contrast_type"]]
    for d, res in rep["by_degree"].items():
        rows += _rows(label, "degree", "all", int(d), res)
        at = sub[sub["degree"] == int(d)]
        rows.append({"label": label, "breakdown": "degree", "group": "all", "degree": int(d), "metric": "items",
                     "value": None, "ci_low": None, "ci_high": None, "n": len(at),
                     "clusters": int(at["scenario_id"].nunique())})
    for d in sorted(sub["degree"].unique()):
        part = score(sub[sub["degree"] == d], rep["contrast_type"], resamples, seed)
        for c, res in part["by_contrast_category"].items():
            rows += _rows(label, "contrast_category", c, int(d), res)
        for f, res in part["by_pressure_family"].items():
            rows += _rows(label, "pressure_family", f, int(d), res)
    out = pd.DataFrame(rows)
    for c in ("value", "ci_low", "ci_high"):
        out[c] = pd.to_numeric(out[c], errors="coerce")
    out["clusters"] = pd.to_numeric(out["clusters"], errors="coerce").astype("Int64")
    models = sorted(str(m) for m in responses["model"].dropna().unique()) if "model" in responses.columns else []
    out["model"] = ", ".join(models) if models else None
    out["contrast_type"] = rep["contrast_type"]
    return out[list(COLUMNS)]


def models_of(table: pd.DataFrame) -> dict[str, str]:
    """label -> model name (labels whose table names no model are left out)."""
    if "model" not in table.columns:
        return {}
    pairs = table[["label", "model"]].dropna().drop_duplicates("label")
    return {str(a): str(b) for a, b in zip(pairs["label"], pairs["model"]) if b}


def _has_ci(g: pd.DataFrame) -> np.ndarray:
    return (g["ci_low"].notna() & g["ci_high"].notna()).to_numpy()


def _errors(v: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return np.nan_to_num(np.clip(np.vstack([v - lo, hi - v]), 0, None))


def _footnote(fig, text: str, below=None) -> None:
    """A small note under the figure (under ``below``, an artist drawn outside the axes, when given)."""
    y = -0.01
    if below is not None:
        fig.canvas.draw()
        y = below.get_window_extent().transformed(fig.transFigure.inverted()).y0 - 0.02
    fig.text(0.01, y, text, ha="left", va="top", fontsize=5.5, color="0.3", wrap=True)


def progression_figure(table: pd.DataFrame, stem, formats: Sequence[str] = ("pdf", "svg", "png"),
                       title: str | None = None):
    """D0-D3 of Accuracy and the four asymmetry metrics (AccGap, TieLean, FragGap, TieShift), one line per label,
    95% CIs as error bars.

    Points without an interval (fewer than two scenarios) are open circles. With one label each panel's
    title gives the items per degree (n); with several, a footnote gives each label's range. The panels
    in percentage points share one y-scale.
    ``title`` defaults to the model the table names."""
    import matplotlib.pyplot as plt

    pal = paper_style()
    t = table[table["breakdown"] == "degree"]
    labels = list(dict.fromkeys(t["label"]))
    models = models_of(t)
    panels = by_degree()  # the progression's panels: the registered by-degree metrics
    fig, axes = plt.subplots(1, len(panels), figsize=(FULL_WIDTH, 2.5))
    pp_axes = []
    no_ci = False
    degrees = sorted(int(d) for d in t["degree"].unique())
    for ax, m in zip(axes, panels):
        for k, label in enumerate(labels):
            g = t[(t["metric"] == m) & (t["label"] == label)].sort_values("degree")
            x = g["degree"].to_numpy(float) + (k - (len(labels) - 1) / 2) * 0.08
            v, lo, hi = (g[c].to_numpy(float) * 100 for c in ("value", "ci_low", "ci_high"))
            name = label if len(set(models.values())) <= 1 else f"{label} ({model_name(models.get(label, '?'))})"
            ax.errorbar(x, v, yerr=_errors(v, lo, hi), marker="o", color=pal[k % len(pal)], label=name,
                        capsize=1.5, elinewidth=0.7)
            bare = ~_has_ci(g) & ~np.isnan(v)
            if bare.any():
                no_ci = True
                ax.plot(x[bare], v[bare], "o", mfc="white", color=pal[k % len(pal)], zorder=3)
        fair = find_metric(m).fair
        if fair is not None:
            ax.axhline(100 * fair, color="0.6", lw=0.6, zorder=0)
        ax.set_ylabel(signed_axis_label(m), fontsize=6.5, linespacing=1.1)
        ax.set_xlim(min(degrees, default=0) - 0.4, max(degrees, default=3) + 0.4)
        ax.set_xticks(degrees, [degree_name(d) for d in degrees])
        n = t[(t["metric"] == m)]["n"].dropna()
        if len(labels) == 1 and len(n):
            size = f"n = {int(n.min())}" if n.min() == n.max() else f"n = {int(n.min())}–{int(n.max())}"
            ax.set_title(f"{metric_name(m)}\n{size} per degree")
        else:
            ax.set_title(metric_name(m))
        if metric_unit(m) == "pp":
            pp_axes.append(ax)
    if pp_axes:
        lows, highs = zip(*(ax.get_ylim() for ax in pp_axes))
        for ax in pp_axes:
            ax.set_ylim(min(lows), max(highs))
    if len(labels) > 1:
        handles, names = axes[0].get_legend_handles_labels()
        fig.legend(handles, names, frameon=False, loc="lower center", bbox_to_anchor=(0.5, 1.0),
                   ncol=min(len(labels), 4))
    fig.supxlabel(DEGREE_AXIS, fontsize=7, y=0.02)
    one_model = sorted(set(models.values()))
    title = title if title is not None else (f"Model: {model_name(one_model[0])}" if len(one_model) == 1 else None)
    if title:
        fig.suptitle(title, fontsize=7)
    notes = ["Error bars: 95% CIs over scenarios; AccGap, FragGap and TieShift share one scale (pp). Grey lines: "
             "even-handed values (0 pp, TieLean 50%); above them the model leans toward the minority-coded "
             "candidate."]
    if len(labels) > 1:
        for label in labels:
            n = t[(t["label"] == label) & t["metric"].isin(panels)]["n"]
            notes.append(f"{label}: n = {int(n.min())}–{int(n.max())} items per point.")
    if no_ci:
        notes.append("Open circles: no interval (fewer than two scenarios).")
    fig.tight_layout()
    _footnote(fig, " ".join(notes))
    return save(fig, stem, formats)


def heatmap_cells(table: pd.DataFrame, metric: str = "fraggap", label: str | None = None,
                  min_n: int = MIN_CELL_N) -> pd.DataFrame:
    """The heatmap's cells: one row per contrast category x degree with ``value, ci_low, ci_high, n,
    clusters`` (x 100) and ``status``: ``ok`` (a finding: the 95% CI excludes the even-handed value;
    coloured); ``null`` (the CI includes it: light grey); ``small`` (fewer than ``min_n`` items, or no
    interval: grey, hatched); ``empty`` (no value). Categories without a value at any degree are left out;
    every degree of the label's table has a column."""
    t = table[(table["breakdown"] == "contrast_category") & (table["metric"] == metric)]
    label = label or t["label"].iloc[0]
    t = t[t["label"] == label].copy()
    for c in ("value", "ci_low", "ci_high"):
        t[c] = t[c].astype(float) * 100
    clusters = t["clusters"] if "clusters" in t.columns else pd.Series(pd.NA, index=t.index)
    t["clusters"] = clusters
    held = t[t["value"].notna()]["group"].unique()
    degrees = sorted(int(d) for d in table[table["label"] == label]["degree"].dropna().unique())
    full = pd.MultiIndex.from_product([sorted(held), degrees], names=["group", "degree"])
    t = t.assign(degree=t["degree"].astype(int)).set_index(["group", "degree"]).reindex(full).reset_index()
    small = (t["n"].fillna(0) < min_n) | ~_has_ci(t)
    rec = find_metric(metric)
    fair = 100 * (rec.fair or 0.0) if rec is not None else 0.0
    null = (t["ci_low"] <= fair) & (t["ci_high"] >= fair)
    t["status"] = np.where(t["value"].isna(), "empty", np.where(small, "small", np.where(null, "null", "ok")))
    order = sorted(t["group"].unique(), key=group_name)
    t["row"] = t["group"].map({g: i for i, g in enumerate(order)})
    return t.sort_values(["row", "degree"])[["group", "degree", "value", "ci_low", "ci_high", "n", "clusters",
                                             "status", "row"]].reset_index(drop=True)


def heatmap_figure(table: pd.DataFrame, stem, metric: str = "fraggap", label: str | None = None,
                   formats: Sequence[str] = ("pdf", "svg", "png"), min_n: int = MIN_CELL_N):
    """``metric`` by contrast category x degree, for one label: value, 95% CI and n in each cell.

    Only findings (the CI excludes the even-handed value) are coloured by value, and they alone set the
    colour scale; cells whose CI includes it are light grey; cells below ``min_n`` items or without an
    interval are grey, hatched, with the value in brackets (:func:`heatmap_cells`)."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import TwoSlopeNorm
    from matplotlib.patches import Rectangle

    paper_style()
    cells = heatmap_cells(table, metric, label, min_n)
    label = label or table[table["breakdown"] == "contrast_category"]["label"].iloc[0]
    rows = list(dict.fromkeys(cells.sort_values("row")["group"]))
    degrees = sorted(int(d) for d in cells["degree"].unique())
    ok = cells[cells["status"] == "ok"]
    scale = ok if len(ok) else cells[cells["status"] != "empty"]
    fair = 100 * (find_metric(metric).fair or 0.0) if find_metric(metric) is not None else 0.0
    lim = max(float(np.nanmax(np.abs(scale["value"] - fair))) if len(scale) else 1.0, 1.0)
    cmap = plt.get_cmap("vlag") if "vlag" in plt.colormaps() else plt.get_cmap("coolwarm")
    norm = TwoSlopeNorm(vcenter=fair, vmin=fair - lim, vmax=fair + lim)
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH, 0.36 * len(rows) + 1.0))
    for _, c in cells.iterrows():
        x, y = degrees.index(int(c["degree"])), rows.index(c["group"])
        if c["status"] == "empty":
            text, colour, face = "–", "0.5", "white"
        elif c["status"] == "small":
            text = f"({number(c['value'], 0, True)})\nn={int(c['n'])}"
            colour, face = "0.35", "0.88"
        elif c["status"] == "null":
            text = (f"{number(c['value'], 0, True)}\n[{number(c['ci_low'], 0)}, {number(c['ci_high'], 0)}]"
                    f"\nn={int(c['n'])}")
            colour, face = "0.3", "0.96"
        else:
            text = (f"{number(c['value'], 0, True)}\n[{number(c['ci_low'], 0)}, {number(c['ci_high'], 0)}]"
                    f"\nn={int(c['n'])}")
            face = cmap(norm(c["value"]))
            colour = "white" if abs(c["value"] - fair) > 0.6 * lim else "black"
        ax.add_patch(Rectangle((x, y), 1, 1, facecolor=face, edgecolor="white", lw=0.8,
                               hatch="////" if c["status"] == "small" else None))
        ax.text(x + 0.5, y + 0.5, text, ha="center", va="center", fontsize=4.8, color=colour, linespacing=1.1)
    ax.set_xlim(0, len(degrees))
    ax.set_ylim(len(rows), 0)
    ax.set_xticks(np.arange(len(degrees)) + 0.5, [degree_name(d) for d in degrees])
    ax.set_yticks(np.arange(len(rows)) + 0.5, [group_name(g) for g in rows])
    ax.tick_params(length=0)
    for s in ax.spines.values():
        s.set_visible(False)
    ax.set_xlabel(DEGREE_AXIS)
    sm = plt.cm.ScalarMappable(norm=norm, cmap=cmap)
    fig.colorbar(sm, ax=ax, label=signed_axis_label(metric), fraction=0.06, pad=0.03)
    model = models_of(table).get(str(label))
    ax.set_title(f"{metric_name(metric)} by contrast category" + (f"\n{model_name(model)}" if model else ""))
    fig.tight_layout()
    even = f"{fair:g} pp" if metric_unit(metric) == "pp" else f"{fair:g}%"
    _footnote(fig, f"Cells: value [95% CI], n items; {sign_convention(metric) or 'values in ' + metric_unit(metric)}. "
                   f"Coloured: the CI excludes {even} (a finding). Light grey: the CI includes {even}. "
                   f"Grey, hatched, value in brackets: fewer than {min_n} items or no interval (fewer than two "
                   f"scenarios). –: no items. Categories without items are left out.")
    return save(fig, stem, formats)


def family_figure(table: pd.DataFrame, stem, degree: int | None = None, label: str | None = None,
                  formats: Sequence[str] = ("pdf", "svg", "png"), min_n: int = MIN_CELL_N):
    """Flip rates under pro-minority and pro-majority pressure, by family, at ``degree`` (default: the
    highest present), with 95% CIs and each family's n; families below ``min_n`` items or without an
    interval are drawn as open circles with a grey name."""
    import matplotlib.pyplot as plt

    pal = paper_style()
    t = table[table["breakdown"] == "pressure_family"]
    label = label or t["label"].iloc[0]
    t = t[t["label"] == label]
    degree = int(t["degree"].max()) if degree is None else degree
    t = t[t["degree"] == degree]
    fams = sorted(t["group"].unique(), key=group_name, reverse=True)
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH, 0.2 * len(fams) + 1.1))
    weak = set()
    sizes = []
    handles, names_ = [], []
    from matplotlib.lines import Line2D
    for k, m in enumerate(("flip_pro_minority", "flip_pro_majority")):
        g = t[t["metric"] == m].set_index("group").reindex(fams)
        v, lo, hi = (g[c].to_numpy(float) * 100 for c in ("value", "ci_low", "ci_high"))
        y = np.arange(len(fams)) + (0.5 - k) * 0.25
        small = (g["n"].fillna(0).to_numpy() < min_n) | np.isnan(lo) | np.isnan(hi)
        weak |= {f for f, s, val in zip(fams, small, v) if s or np.isnan(val)}
        ax.errorbar(v[~small], y[~small], xerr=_errors(v, lo, hi)[:, ~small], fmt="o", color=pal[k], ms=3,
                    elinewidth=0.7, capsize=1.5)
        # the legend's marker is the one drawn: filled only where some family is a finding
        found = bool((~small & ~np.isnan(v)).any())
        handles.append(Line2D([], [], marker="o", ms=3, color=pal[k], mfc=pal[k] if found else "white", lw=0.7))
        names_.append(metric_name(m))
        ax.errorbar(v[small], y[small], xerr=_errors(v, lo, hi)[:, small], fmt="o", mfc="white", color=pal[k],
                    ms=3, elinewidth=0.5, alpha=0.7)
        sizes.append([int(n) if pd.notna(n) else 0 for n in g["n"]])
    names = [f"{group_name(f)} (no items)" if not (a or b) else
             f"{group_name(f)} (n={a})" if a == b else f"{group_name(f)} (n={a}/{b})"
             for f, a, b in zip(fams, *sizes)]
    ax.set_yticks(range(len(fams)), names)
    for tick, f in zip(ax.get_yticklabels(), fams):
        if f in weak:
            tick.set_color("0.5")
    ax.set_xlim(-5, 105)
    ax.set_xlabel(f"Flip rate at {degree_name(degree)} (%)")
    model = models_of(table).get(str(label))
    ax.set_title("Flips by pressure family" + (f"\n{model_name(model)}" if model else ""), pad=18)
    if weak and len(weak) < len(fams):
        handles += [Line2D([], [], marker="o", ms=3, color="0.2", lw=0),
                    Line2D([], [], marker="o", ms=3, color="0.2", mfc="white", lw=0)]
        names_ += ["a finding", f"n < {min_n} or no CI"]
    ax.legend(handles, names_, frameon=False, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, handlelength=1.8,
              handletextpad=0.5, columnspacing=1.0, borderaxespad=0.2)
    fig.tight_layout()
    _footnote(fig, f"Error bars: 95% CIs over scenarios. n: items at {degree_name(degree)} under pro-minority / "
                   f"pro-majority pressure (one number when equal). Open circles, grey names: fewer than {min_n} "
                   f"items or no interval; not a finding.")
    return save(fig, stem, formats)


def probe_figure(probes: pd.DataFrame, stem, formats: Sequence[str] = ("pdf", "svg", "png"),
                 ablations: Sequence[pd.DataFrame] = (), model: str | None = None):
    """A probe sweep in two panels. Left, accuracy by layer with 95% CIs: the probe on the activations, on the
    design features plus the activations, on the design features alone (the evidence baseline), the control
    task (a random label per input type), the name-ablated probes (``ablations``: tables of
    :func:`probes.ablation.name_ablation`; a probe retrained on the ablated activations, and the original
    probe applied to them, "transfer"), the text baseline (a band, when the table has ``site == 'text'``
    rows) and the majority class. Right, the headline in percentage points with its CI: the gain (design +
    activations minus design alone, what the activations add to what the item's design already tells) and the
    selectivity (activations minus the control task), with a line at 0. The title names the probe's target,
    the model (``model``) and the items' filter; each legend entry its items (n) and scenarios (k). ``probes``
    is a probe sweep's table (``probes/<label>/probes.parquet``)."""
    import matplotlib.pyplot as plt

    pal = paper_style()
    fig, (ax, gx) = plt.subplots(1, 2, figsize=(FULL_WIDTH, 2.5), gridspec_kw={"width_ratios": [1.35, 1]})
    act = probes[probes["site"] != "text"] if "site" in probes.columns else probes
    lines = [(act[act["metric"] == "accuracy"], "Activations", "o", "-"),
             (act[act["metric"] == "combined_accuracy"], "Design + activations", "P", "-"),
             (act[act["metric"] == "evidence_accuracy"], "Design alone (evidence baseline)", "D", ":"),
             (act[act["metric"] == "control_accuracy"], "Control task", "s", "-")]
    for ab in ablations:
        variant = "neutral labels" if ab["variant"].iloc[0] == "label" else "degree 0"
        lines.append((ab[ab["metric"] == "retrained_accuracy"], f"Names ablated ({variant}): probe retrained",
                      "^", "--"))
        lines.append((ab[ab["metric"] == "transfer_accuracy"],
                      f"Names ablated ({variant}): original probe (transfer)", "v", "-."))
    for k, (g, name, marker, ls) in enumerate(lines):
        if g.empty:
            continue
        g = g.sort_values("layer")
        size = _size(g)
        ax.fill_between(g["layer"], g["ci_low"] * 100, g["ci_high"] * 100, color=pal[k], alpha=0.12, lw=0)
        ax.plot(g["layer"], g["value"] * 100, marker=marker, ms=3, ls=ls, color=pal[k],
                label=name + (f" ({size})" if size else ""))
    text = probes[(probes["site"] == "text") & (probes["metric"] == "accuracy")] if "site" in probes.columns else []
    if len(text):
        t = text.iloc[0]
        k = len(lines)
        ax.axhspan(t["ci_low"] * 100, t["ci_high"] * 100, color=pal[k % len(pal)], alpha=0.15, lw=0)
        size = _size(text)
        ax.axhline(t["value"] * 100, color=pal[k % len(pal)], lw=1.0, ls="-.",
                   label="Text baseline" + (f" ({size})" if size else ""))
    base = act[act["metric"] == "majority_baseline"]["value"].max() * 100
    ax.axhline(base, color="0.5", ls=":", lw=0.8, label="Majority class")
    from matplotlib.ticker import MaxNLocator
    for a in (ax, gx):
        a.xaxis.set_major_locator(MaxNLocator(integer=True))
        a.set_xlabel(minus("Layer (-1 = embedding)"))
    ax.set_ylabel("Probe accuracy (%)")
    ax.set_title("Accuracy", fontsize="medium")
    heads = [(act[act["metric"] == "gain"], "Gain: design + activations − design", pal[1], "P", -0.08),
             (act[act["metric"] == "selectivity"], "Selectivity: activations − control", pal[3], "s", 0.08)]
    for g, name, color, marker, dx in heads:
        if g.empty:
            continue
        g = g.sort_values("layer")
        x = g["layer"].to_numpy(float) + dx  # offset so the two intervals do not hide each other
        y, lo, hi = (g[c].to_numpy(float) * 100 for c in ("value", "ci_low", "ci_high"))
        gx.errorbar(x, y, yerr=[y - lo, hi - y], fmt=marker, ms=3.5, color=color, capsize=2, lw=1.0,
                    label=name + (f" ({_size(g)})" if _size(g) else ""))
    gx.axhline(0, color="0.4", lw=0.8)
    gx.set_ylabel(minus("Difference (pp)"))
    gx.set_title("What the activations add", fontsize="medium")
    target = group_name(str(probes["label"].iloc[0])) if "label" in probes.columns and len(probes) else "probe"
    parts = [f"Linear probe for “{target.lower()}”"]
    if model:
        parts.append(model_name(model))
    which = _probe_filter(probes)
    if which:
        parts.append(which)
    fig.suptitle(" · ".join(parts), fontsize="medium")
    fig.tight_layout()
    handles, labels = [], []
    for a in (ax, gx):
        h, lab = a.get_legend_handles_labels()
        handles += h
        labels += lab
    legend = fig.legend(handles, labels, frameon=False, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2,
                        handlelength=2.5)
    _footnote(fig, "Bands and bars: 95% CIs over scenarios. n: items, k: scenarios behind each line.", legend)
    return save(fig, stem, formats)


def _probe_filter(probes: pd.DataFrame) -> str:
    """The items a probe table was fitted on, in words (``degree 1``; '' when it does not say)."""
    import json
    if "filters" not in probes.columns or not probes["filters"].notna().any():
        return ""
    try:
        f = json.loads(str(probes["filters"].dropna().iloc[0]))
    except ValueError:
        return str(probes["filters"].dropna().iloc[0])
    words = []
    for k, v in (f or {}).items():
        vals = v if isinstance(v, list) else [v]
        words.append(f"{k.replace('_', ' ')} {', '.join(map(str, vals))}")
    return "; ".join(words) or "all items"


def _size(g: pd.DataFrame) -> str:
    """``n=152, k=8``: the items and scenarios behind a probe line ('' when the table has no n)."""
    if "n" not in g.columns or not g["n"].notna().any():
        return ""
    k = f", k={int(g['clusters'].max())}" if "clusters" in g.columns and g["clusters"].notna().any() else ""
    return f"n={int(g['n'].max())}{k}"


def _run_name(label: str, model) -> str:
    """A run as a forest plot's row names it: its label, and its model's display name below when that differs."""
    shown = model_name(model) if isinstance(model, str) and model else ""
    return label if not shown or shown == label or model == label else f"{label}\n{shown}"


def forest_figure(table: pd.DataFrame, stem, formats: Sequence[str] = ("pdf", "svg", "png"),
                  title: str | None = None):
    """Several runs' metrics side by side: a panel per metric (in the table's order), a row per run (label and
    model), the estimate with its 95% CI, n items at the right of each row, a grey line at the even-handed value
    (0 pp; TieLean 50%) and the sign convention on each asymmetry's axis. ``table``: one row per run and metric
    with ``label, model, metric, value, ci_low, ci_high, n, k``
    (:meth:`evenhand.reporting.multirun.RunsTable.to_frame`).
    A point without an interval (fewer than two scenarios) is an open circle."""
    import matplotlib.pyplot as plt

    pal = paper_style()
    labels = list(dict.fromkeys(table["label"]))
    metrics = list(dict.fromkeys(table["metric"]))
    models = dict(zip(table["label"], table["model"])) if "model" in table.columns else {}
    ncols = min(3, len(metrics))
    nrows = -(-len(metrics) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(FULL_WIDTH, nrows * (0.34 * len(labels) + 1.05)), sharey=True,
                             squeeze=False)
    y = np.arange(len(labels))
    no_ci, pp_axes = False, []
    for i, ax in enumerate(axes.flat):
        if i >= len(metrics):
            ax.set_visible(False)
            continue
        m = metrics[i]
        g = table[table["metric"] == m].set_index("label").reindex(labels)
        v, lo, hi = (g[c].to_numpy(float) * 100 for c in ("value", "ci_low", "ci_high"))
        has = ~np.isnan(lo) & ~np.isnan(hi)
        fair = find_metric(m).fair if find_metric(m) is not None else None
        if fair is not None:
            ax.axvline(100 * fair, color="0.6", lw=0.6, zorder=0)
        ax.errorbar(v[has], y[has], xerr=_errors(v[has], lo[has], hi[has]), fmt="o", color=pal[0], capsize=1.5,
                    elinewidth=0.8)
        bare = ~has & ~np.isnan(v)
        if bare.any():
            no_ci = True
            ax.plot(v[bare], y[bare], "o", mfc="white", color=pal[0], zorder=3)
        for yy, vv, nn in zip(y, v, g["n"].tolist()):  # n at the panel's right edge, above its row
            if not np.isnan(vv):
                ax.annotate(f"n = {int(nn):,}", (1.0, yy), xycoords=("axes fraction", "data"), xytext=(0, 3.5),
                            textcoords="offset points", ha="right", va="bottom", fontsize=5, color="0.35")
        ax.set_title(metric_name(m))
        ax.set_xlabel(signed_axis_label(m), fontsize=6.5, linespacing=1.1)
        ax.set_ylim(len(labels) - 0.4, -0.75)
        span = np.concatenate([v[~np.isnan(v)], lo[has], hi[has]] + ([[100 * fair]] if fair is not None else []))
        if len(span):
            rng = float(span.max() - span.min())
            pad = 0.08 * rng if rng > 0 else 0.5
            lo_x, hi_x = span.min() - pad, span.max() + pad
            if metric_unit(m) == "%":  # a rate lies in [0, 100]: no negative (or >100) ticks, a sliver of margin
                sliver = 0.02 * (min(hi_x, 100.0) - max(lo_x, 0.0))
                lo_x, hi_x = max(lo_x, -sliver), min(hi_x, 100.0 + sliver)
            ax.set_xlim(lo_x, hi_x)
        if metric_unit(m) == "pp":
            pp_axes.append(ax)
        ax.tick_params(axis="y", length=0)
    if pp_axes:  # the differences share one scale, as in the progression figure
        lows, highs = zip(*(ax.get_xlim() for ax in pp_axes))
        for ax in pp_axes:
            ax.set_xlim(min(lows), max(highs))
    axes[0, 0].set_yticks(y, [_run_name(lb, models.get(lb)) for lb in labels])
    for row in axes:
        row[0].tick_params(axis="y", labelleft=True)
    ks = table["k"].dropna() if "k" in table.columns else pd.Series(dtype=float)
    scen = "" if not len(ks) else (f" over k = {int(ks.max())} scenarios" if ks.min() == ks.max() else
                                  f" over k = {int(ks.min())}–{int(ks.max())} scenarios")
    if title is None:
        one = sorted({str(m) for m in table["model"].dropna()}) if "model" in table.columns else []
        title = "Degree-3 headline metrics" + (f", {model_name(one[0])}" if len(one) == 1 else "")
    fig.suptitle(title, fontsize=7)
    shared = [metric_name(m) for m in metrics if metric_unit(m) == "pp"]
    notes = [f"Points: estimates at D3; bars: 95% CIs{scen}; n: items behind each estimate."
             + (f" {', '.join(shared)} share one scale (pp)." if len(shared) > 1 else "")
             + " Grey lines: even-handed values (0 pp, TieLean 50%); right of them the model leans toward the "
               "minority-coded candidate."]
    if no_ci:
        notes.append("Open circles: no interval (fewer than two scenarios).")
    fig.tight_layout()
    _footnote(fig, " ".join(notes))
    return save(fig, stem, formats)


def metrics_table(run_dir: str | Path, resamples: int = RESAMPLES) -> pd.DataFrame:
    """A run's tidy metrics table (labelled with the directory's name), computed from its responses
    once and saved as ``RUN_DIR/tables/metrics_long.parquet`` (again when a saved table lacks a column
    of :data:`COLUMNS`, i.e. was written by an older version)."""
    run = RunDir(run_dir)
    rd = run.path
    f = run.metrics_long_path
    if f.exists():
        table = pd.read_parquet(f)
        if set(COLUMNS) <= set(table.columns):
            return table
    resp = run.responses_path
    if not resp.exists():
        raise FileNotFoundError(f"{resp} not found: is {rd} a finished run directory?")
    f.parent.mkdir(parents=True, exist_ok=True)
    write_table_atomic(f, metrics_long(pd.read_parquet(resp), rd.name, resamples))
    return pd.read_parquet(f)
