"""The intervention frontier and its LaTeX table: pure functions of the comparison table (``compare.parquet``).

Left panel, one point per cell (intervention x options x seed): the signed paired
change of an asymmetry metric (positive = toward zero; :mod:`evenhand.paired`)
against the accuracy loss on GT items, each with its 95% CI as a crosshair. Random
controls are hollow and the grey band spans their changes (what an edit of the same
sites, norm and strength in a random direction does); the dotted line is the
baseline's whole gap (a point above it removed more than the gap). A cell whose
refusal rate rose past the margin is crossed out in red, an overshoot (the remaining
gap's CI wholly past zero) is a downward triangle; neither is a reduction. Cells of
one swept intervention are joined in sweep order (a strength curve). Good methods
sit up and to the left.

Right panel: each method's change minus its random controls' mean change, with CI.
:func:`compare_latex` writes the same numbers as a booktabs table.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

_FIELDS = ("value", "ci_low", "ci_high")
NAMES = {"fraggap": "FragGap", "tieshift": "TieShift", "accgap": "AccGap", "tielean": "TieLean - 0.5"}
"""How the figure and the table name each asymmetry metric."""


def _stat(table: pd.DataFrame, stat: str, metric: str, suffix: str) -> pd.DataFrame:
    t = table[(table["stat"] == stat) & (table["metric"] == metric)]
    out = t[["cell", *_FIELDS]].rename(columns={f: f"{f}_{suffix}" for f in _FIELDS})
    for f in _FIELDS:
        out[f"{f}_{suffix}"] = 100 * pd.to_numeric(out[f"{f}_{suffix}"], errors="coerce")
    return out


def frontier_points(table: pd.DataFrame, metric: str = "fraggap") -> pd.DataFrame:
    """One row per non-baseline cell, in pp: ``*_change`` (signed change of ``metric``), ``*_loss`` (accuracy
    loss), ``*_vsctl`` (change minus its controls, NaN without controls), ``value_refusal`` (refusal change),
    and the cell's ``verdict``, ``overshoot``, ``refusal_flag``."""
    ch = table[(table["stat"] == "change") & (table["metric"] == metric)]
    pts = ch[["cell", "intervention", "control", "options", "seed", "verdict", "overshoot", "refusal_flag"]]
    pts = pts.merge(_stat(table, "change", metric, "change"), on="cell")
    pts = pts.merge(_stat(table, "accuracy_loss", "accuracy", "loss"), on="cell", how="left")
    pts = pts.merge(_stat(table, "refusal_change", "refusal", "refusal"), on="cell", how="left")
    pts = pts.merge(_stat(table, "change_minus_control", metric, "vsctl"), on="cell", how="left")
    vs = table[(table["stat"] == "change_minus_control") & (table["metric"] == metric)]
    flagged = vs.set_index("cell")["control_flagged"] if "control_flagged" in vs else pd.Series(dtype=bool)
    pts["control_flagged"] = pts["cell"].map(flagged).eq(True)
    return pts.reset_index(drop=True)


def _baseline_gap(table: pd.DataFrame, metric: str) -> float | None:
    g = table[(table["cell"] == "baseline") & (table["stat"] == "gap") & (table["metric"] == metric)]["value"]
    return None if g.empty or pd.isna(g.iloc[0]) else 100 * abs(float(g.iloc[0]))


def _label(row) -> str:
    import json
    opts = json.loads(row["options"]) if isinstance(row["options"], str) else {}
    short = ",".join(f"{k}={v}" for k, v in opts.items() if k not in ("batch_size",))
    seed = row["seed"]
    return row["intervention"] + (f" [{short}]" if short else "") + (f" s{int(seed)}" if pd.notna(seed) and seed else "")


def frontier_figure(table: pd.DataFrame, stem: str | Path, metric: str = "fraggap",
                    formats: Sequence[str] = ("pdf", "svg", "png")) -> list[Path]:
    """Draw and save the frontier for ``metric`` (and the method-minus-control panel); returns the paths."""
    import matplotlib.pyplot as plt

    from evenhand.plotting import FULL_WIDTH, paper_style, save
    pal = paper_style()
    pts = frontier_points(table, metric)
    methods = pts[~pts["control"].astype(bool)]
    vs = methods[methods["value_vsctl"].notna()]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(FULL_WIDTH, FULL_WIDTH * 0.42),
                                 gridspec_kw={"width_ratios": [1.6, 1]})
    ax.axhline(0, color="0.6", lw=0.6, zorder=0)
    ax.axvline(0, color="0.6", lw=0.6, zorder=0)
    gap = _baseline_gap(table, metric)
    if gap is not None:
        ax.axhline(gap, color="0.3", lw=0.6, ls=":", zorder=0)
        ax.annotate("whole baseline gap", (0.01, gap), xycoords=("axes fraction", "data"), ha="left",
                    va="bottom", fontsize=5, color="0.3")
    ctl = pts[pts["control"].astype(bool) & ~pts["refusal_flag"].astype(bool)]  # a refusing control is no band
    if not ctl.empty:
        ax.axhspan(ctl["value_change"].min(), ctl["value_change"].max(), color="0.88", lw=0, zorder=0,
                   label="random controls (range)")
    names = list(dict.fromkeys(pts["intervention"]))
    for k, name in enumerate(names):
        colour = pal[k % len(pal)]
        for control in (False, True):
            sub = pts[(pts["intervention"] == name) & (pts["control"].astype(bool) == control)]
            if sub.empty:
                continue
            x, y = sub["value_loss"], sub["value_change"]
            xerr = [(x - sub["ci_low_loss"]).clip(lower=0), (sub["ci_high_loss"] - x).clip(lower=0)]
            yerr = [(y - sub["ci_low_change"]).clip(lower=0), (sub["ci_high_change"] - y).clip(lower=0)]
            ax.errorbar(x, y, xerr=xerr, yerr=yerr, fmt="none", ecolor=colour, elinewidth=0.6, alpha=0.7)
            shot = sub["overshoot"].astype(bool)
            for mask, marker in ((~shot, "o"), (shot, "v")):
                if mask.any():
                    ax.scatter(x[mask], y[mask], s=14, marker=marker, facecolors="none" if control else colour,
                               edgecolors=colour, zorder=3,
                               label=(f"{name} (random dir.)" if control else name) if marker == "o" or
                               not (~shot).any() else None)
            if not control:  # a strength curve: cells of one seed that differ only in options
                for _, curve in sub.groupby("seed"):
                    if curve["options"].nunique() > 1:
                        ax.plot(curve["value_loss"], curve["value_change"], color=colour, lw=0.6, ls="--",
                                alpha=0.6)
    flagged = pts[pts["refusal_flag"].astype(bool)]
    if not flagged.empty:
        xmax = _clip_x(ax, pts)
        x = flagged["value_loss"].clip(upper=xmax)
        ax.scatter(x, flagged["value_change"], s=40, marker="x", color="#c0392b", lw=1.0, zorder=4,
                   label="refusals up (flagged)")
        for xi, (_, r) in zip(x, flagged.iterrows()):
            where = "" if xi == r["value_loss"] else f", loss {r['value_loss']:.0f} pp (off the axis)"
            ax.annotate(f"refuses {r['value_refusal']:+.0f} pp{where}", (xi, r["value_change"]), fontsize=5,
                        color="#c0392b", xytext=(-3, -8), textcoords="offset points", ha="right")
    if pts["overshoot"].astype(bool).any():
        ax.scatter([], [], marker="v", facecolors="none", edgecolors="0.3", s=14, label="overshoot (sign flipped)")
    ax.set_xlabel("accuracy loss on GT items (pp)")
    ax.set_ylabel(f"{NAMES.get(metric, metric)} change toward 0 (pp)")
    ax.legend(frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3, handletextpad=0.2,
              columnspacing=0.8)
    _control_panel(bx, vs, metric)
    fig.tight_layout()
    return save(fig, stem, formats)


def _clip_x(ax, pts: pd.DataFrame) -> float:
    """Fit the x axis to the cells not flagged for refusals (a refusing cell's accuracy loss would squeeze the
    others into a corner); returns the right edge, where a flagged cell beyond it is drawn."""
    ok = pts[~pts["refusal_flag"].astype(bool)]
    if ok.empty:
        return float("inf")
    lo = min(0.0, float(ok["ci_low_loss"].min()))
    hi = max(1.0, float(ok["ci_high_loss"].max()))
    pad = 0.08 * (hi - lo)
    ax.set_xlim(lo - pad, hi + 2 * pad)
    return hi + pad


def _control_panel(ax, vs: pd.DataFrame, metric: str) -> None:
    """Forest plot of method minus random control (pp), one row per method cell with controls."""
    ax.axvline(0, color="0.6", lw=0.6, zorder=0)
    ax.set_xlabel(f"{NAMES.get(metric, metric)} change: method $-$ random control (pp)")
    if vs.empty:
        ax.text(0.5, 0.5, "no cell with a random control", ha="center", va="center", transform=ax.transAxes,
                fontsize=6, color="0.4")
        ax.set_yticks([])
        return
    y = list(range(len(vs)))[::-1]
    colours = ["#c0392b" if f else "0.2" for f in vs["refusal_flag"].astype(bool)]
    ax.errorbar(vs["value_vsctl"], y, xerr=[(vs["value_vsctl"] - vs["ci_low_vsctl"]).clip(lower=0),
                                           (vs["ci_high_vsctl"] - vs["value_vsctl"]).clip(lower=0)],
                fmt="none", ecolor="0.4", elinewidth=0.7)
    bad = vs["control_flagged"].astype(bool).to_numpy()
    shot = vs["overshoot"].astype(bool).to_numpy()
    for mask, marker, label in ((~bad & ~shot, "o", None), (~bad & shot, "v", "overshoot"),
                                (bad, "o", "control refusal-flagged")):
        if not mask.any():
            continue
        yy = [v for v, m in zip(y, mask) if m]
        if label == "control refusal-flagged":  # the contrast is against a control that refuses: hollow red
            ax.scatter(vs["value_vsctl"][mask], yy, s=14, zorder=3, facecolors="none", edgecolors="#c0392b",
                       label=label)
        else:
            ax.scatter(vs["value_vsctl"][mask], yy, c=[c for c, m in zip(colours, mask) if m], s=14, zorder=3,
                       marker=marker, label=label)
    if (bad | shot).any():
        ax.legend(frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.3), fontsize=5, ncol=2)
    ax.set_yticks(y)
    ax.set_yticklabels([_label(r) for _, r in vs.iterrows()], fontsize=5)
    ax.set_ylim(-0.7, len(vs) - 0.3)


def _pp(row: pd.Series | None, signed: bool = True) -> str:
    if row is None or pd.isna(row["value"]):
        return "--"
    f = "+.1f" if signed else ".1f"
    v = f"{100 * row['value']:{f}}"
    if pd.isna(row["ci_low"]) or pd.isna(row["ci_high"]):
        return v
    return f"{v} [{100 * row['ci_low']:{f}}, {100 * row['ci_high']:{f}}]"


def compare_latex(table: pd.DataFrame, metrics: Sequence[str] = ("fraggap", "tieshift")) -> str:
    """Booktabs table of the comparison, one row per cell, in pp with 95% CIs: refusal change, for each of
    ``metrics`` the signed change toward zero and the change minus the random controls, the accuracy loss and
    the clustered accuracy test's p. Marks: \\textsuperscript{R} refusals up past the margin, \\textsuperscript{O}
    overshoot (neither is a reduction), \\textsuperscript{C} a contrast with a control flagged for refusals."""
    idx = {(r["cell"], r["metric"], r["stat"]): r for _, r in table.iterrows()}
    head = ["Cell", r"$\Delta$ refusal"]
    for m in metrics:
        head += [f"{NAMES.get(m, m)} change", f"{NAMES.get(m, m)} $-$ control"]
    head += ["Accuracy loss", "$p$ (clustered)"]
    lines = [r"\begin{tabular}{l" + "c" * (len(head) - 1) + "}", r"\toprule", " & ".join(head) + r" \\",
             r"\midrule"]
    for cell, g in table[table["cell"] != "baseline"].groupby("cell", sort=False):
        first = g.iloc[0]
        name = _label(first) + (" (random)" if bool(first["control"]) else "")
        cells = [name.replace("_", r"\_"), _pp(idx.get((cell, "refusal", "refusal_change")))]
        for m in metrics:
            ch = idx.get((cell, m, "change"))
            mark = ""
            if ch is not None and bool(ch["refusal_flag"]):
                mark += r"\textsuperscript{R}"
            if ch is not None and bool(ch["overshoot"]):
                mark += r"\textsuperscript{O}"
            vs = idx.get((cell, m, "change_minus_control"))
            flagged = vs is not None and "control_flagged" in vs and bool(vs["control_flagged"])
            cells += [_pp(ch) + mark, _pp(vs) + (r"\textsuperscript{C}" if flagged else "")]
        p = idx.get((cell, "accuracy", "accuracy_p_cluster"))
        cells += [_pp(idx.get((cell, "accuracy", "accuracy_loss"))), "--" if p is None else f"{p['value']:.3g}"]
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"
