"""The intervention frontier and its LaTeX table: pure functions of the comparison table (``compare.parquet``).

Left panel, one point per unflagged method cell (intervention x options x seed): the signed paired change of an
asymmetry metric (positive = toward zero) against the accuracy loss on GT items, 95% CIs as crosshairs;
each method's random controls as hollow squares in a shaded 2.5-97.5% box; overshoots as downward triangles;
cells at one point drawn a little apart. Flagged cells (refusals or accuracy, :mod:`evenhand.inference.decision`) are
listed in their own panel below. Good methods sit up and
to the left. The full description is in :func:`frontier_figure`."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from evenhand.reporting.labels import cell_name, gap_name, intervention_name, metric_name, model_name
from evenhand.reporting.plotting import FULL_WIDTH, paper_style, save

_FIELDS = ("value", "ci_low", "ci_high")


def _stat(table: pd.DataFrame, stat: str, metric: str, suffix: str) -> pd.DataFrame:
    t = table[(table["stat"] == stat) & (table["metric"] == metric)]
    out = t[["cell", *_FIELDS]].rename(columns={f: f"{f}_{suffix}" for f in _FIELDS})
    for f in _FIELDS:
        out[f"{f}_{suffix}"] = 100 * pd.to_numeric(out[f"{f}_{suffix}"], errors="coerce")
    return out


def _no_answer(r) -> str:
    """The annotation of a refusal-flagged cell: its rise in answers without an A/B choice, and which part of it
    the model declined and which had no verdict found (where the table has the split)."""
    d, u = r.get("value_declined"), r.get("value_unparsed")
    if d is None or u is None or d != d or u != u:
        return f"no A/B answer {r['value_refusal']:+.0f} pp"
    return f"no A/B answer {r['value_refusal']:+.0f} pp\n({d:+.0f} declined, {u:+.0f} unparsed)"


def frontier_points(table: pd.DataFrame, metric: str = "fraggap") -> pd.DataFrame:
    """One row per non-baseline cell, in pp: ``*_change`` (signed change of ``metric``), ``*_loss`` (accuracy
    loss), ``*_vsctl`` (change minus its controls, NaN without controls), ``value_refusal`` (refusal change;
    ``value_declined`` and ``value_unparsed``, its two parts, where the table has them),
    ``band_low``/``band_high`` (its controls' 2.5-97.5% band of change, NaN without controls), ``n_controls``,
    and the cell's ``verdict``, ``overshoot``, ``refusal_flag``, ``accuracy_flag``, ``beats_control``."""
    ch = table[(table["stat"] == "change") & (table["metric"] == metric)]
    cols = ["cell", "intervention", "control", "options", "seed", "verdict", "overshoot", "refusal_flag"]
    pts = ch[cols + [c for c in ("accuracy_flag", "control_kind") if c in ch]].copy()
    if "accuracy_flag" not in pts:  # tables written before the accuracy flag
        pts["accuracy_flag"] = False
    pts["accuracy_flag"] = pts["accuracy_flag"].eq(True)
    pts = pts.merge(_stat(table, "change", metric, "change"), on="cell")
    pts = pts.merge(_stat(table, "accuracy_loss", "accuracy", "loss"), on="cell", how="left")
    pts = pts.merge(_stat(table, "refusal_change", "refusal", "refusal"), on="cell", how="left")
    for part in ("declined", "unparsed"):
        if (table["stat"] == f"{part}_change").any():  # tables written before the split lack these rows
            pts = pts.merge(_stat(table, f"{part}_change", "refusal", part)[["cell", f"value_{part}"]], on="cell",
                            how="left")
    pts = pts.merge(_stat(table, "change_minus_control", metric, "vsctl"), on="cell", how="left")
    vs = table[(table["stat"] == "change_minus_control") & (table["metric"] == metric)]
    flagged = vs.set_index("cell")["control_flagged"] if "control_flagged" in vs else pd.Series(dtype=bool)
    pts["control_flagged"] = pts["cell"].map(flagged).eq(True)
    band = table[table["stat"].isin(["change_minus_control", "control_change"]) & (table["metric"] == metric)]
    for col in ("band_low", "band_high"):
        v = band.dropna(subset=[col]).drop_duplicates("cell").set_index("cell")[col] if col in band else None
        pts[col] = 100 * pd.to_numeric(pts["cell"].map(v), errors="coerce") if v is not None else float("nan")
    n = band.dropna(subset=["n_controls"]).drop_duplicates("cell").set_index("cell")["n_controls"] \
        if "n_controls" in band else None
    pts["n_controls"] = pts["cell"].map(n) if n is not None else float("nan")
    beats = table[(table["metric"] == metric) & (table["stat"] == "change_minus_control")]  # where paired decides it
    b = beats.dropna(subset=["beats_control"]).drop_duplicates("cell").set_index("cell")["beats_control"] \
        if "beats_control" in beats else None
    pts["beats_control"] = pts["cell"].map(b).eq(True) if b is not None else False
    return pts.reset_index(drop=True)


def controls_by_method(pts: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Each method cell's random-control points (:func:`frontier_points` rows): the control cells of the same
    intervention and options, every seed (as :func:`experiments.studies.compare.study.controls_of` pairs them)."""
    ctl = pts[pts["control"].astype(bool)]
    if "control_kind" in ctl:  # a scrambled control is no random direction
        ctl = ctl[ctl["control_kind"].ne("scrambled")]
    out = {}
    for _, r in pts[~pts["control"].astype(bool)].iterrows():
        mine = ctl[(ctl["intervention"] == r["intervention"]) & (ctl["options"] == r["options"])]
        if not mine.empty:
            out[r["cell"]] = mine
    return out


def _baseline_gap(table: pd.DataFrame, metric: str) -> float | None:
    g = table[(table["cell"] == "baseline") & (table["stat"] == "gap") & (table["metric"] == metric)]["value"]
    return None if g.empty or pd.isna(g.iloc[0]) else 100 * abs(float(g.iloc[0]))


def _label(row) -> str:
    """A cell's name in the LaTeX table: ``caa [alpha=4.0,layers=middle] s2``."""
    import json
    opts = json.loads(row["options"]) if isinstance(row["options"], str) else {}
    short = ",".join(f"{k}={v}" for k, v in opts.items() if k not in ("batch_size",))
    seed = row["seed"]
    return row["intervention"] + (f" [{short}]" if short else "") + (f" s{int(seed)}" if pd.notna(seed) and seed else "")


def _name(row) -> str:
    """A cell's readable name in the figure (:func:`evenhand.reporting.labels.cell_name`): ``CAA (α = 4, middle
    layers)``."""
    import json
    opts = json.loads(row["options"]) if isinstance(row["options"], str) else {}
    return cell_name(row["intervention"], opts, row["seed"])


def _sizes(table: pd.DataFrame, metric: str) -> str:
    """The baseline's items (and scenarios) behind ``metric`` and behind accuracy, for the title."""
    out = []
    for m, stat, what in ((metric, "gap", metric_name(metric)), ("accuracy", "rate", "accuracy (GT items)")):
        r = table[(table["cell"] == "baseline") & (table["metric"] == m) & (table["stat"] == stat)]
        if len(r) and pd.notna(r["n"].iloc[0]):
            k = r["n_scenarios"].iloc[0] if "n_scenarios" in r else None
            out.append(f"{what}: n = {int(r['n'].iloc[0])} items" + (f", {int(k)} scenarios" if pd.notna(k) else ""))
    return "; ".join(out)


def _dodge(x: pd.Series, y: pd.Series, step: float) -> pd.Series:
    """x moved sideways by ``step`` for each earlier point at the same (x, y), so coinciding points stay visible."""
    seen: dict = {}
    out = []
    for xi, yi in zip(x, y):
        key = (round(float(xi), 6), round(float(yi), 6)) if pd.notna(xi) and pd.notna(yi) else None
        k = seen.get(key, 0)
        seen[key] = k + 1
        out.append(xi + step * k if key is not None else xi)
    return pd.Series(out, index=x.index)


MIN_SIGN_SCENARIOS = 10
"""A sign decided on fewer validation scenarios than this gets a warning under the frontier."""


def sign_text(table: pd.DataFrame, metric: str) -> tuple[str, str | None]:
    """(where the sign of ``metric``'s change came from, a warning when it rests on fewer than
    :data:`MIN_SIGN_SCENARIOS` validation scenarios, else None), read from the table's ``sign_source``."""
    import re
    r = table[(table["stat"] == "change") & (table["metric"] == metric)]
    src = r["sign_source"].dropna() if "sign_source" in r else pd.Series(dtype=object)
    if src.empty:
        return "sign +1 (default: positive = toward the minority)", None
    text = str(src.iloc[0])
    m = re.search(r"validation baseline, (\d+) scenarios", text)
    if m and int(m.group(1)) < MIN_SIGN_SCENARIOS:
        return text, (f"Warning: the sign rests on {m.group(1)} validation scenarios (< {MIN_SIGN_SCENARIOS}); "
                      "if it is wrong, a move away from zero plots as positive.")
    return text, None


def _flag_line(r) -> str:
    """One flagged cell in the flagged panel: its name, what flagged it, its change and costs (pp)."""
    what = []
    if bool(r.get("refusal_flag")):
        what.append(_no_answer(r).replace("\n", " "))
    if bool(r.get("accuracy_flag")):
        what.append(f"accuracy loss {r['value_loss']:+.0f} pp")
    ch = r["value_change"]
    ci = "" if pd.isna(r["ci_low_change"]) else f" [{r['ci_low_change']:+.1f}, {r['ci_high_change']:+.1f}]"
    return f"{_name(r)}: {'; '.join(what)}; change {ch:+.1f}{ci} pp (withheld)"


def frontier_figure(table: pd.DataFrame, stem: str | Path, metric: str = "fraggap",
                    formats: Sequence[str] = ("pdf", "svg", "png"), model: str | None = None) -> list[Path]:
    """Draw and save the frontier for ``metric`` (and the method-against-its-controls panel); returns the paths.
    The title names ``metric``, the ``model`` (when given) and the baseline's items; method cells at the same
    point are moved sideways so that each stays visible. Flagged method cells (refusals or accuracy,
    :mod:`evenhand.inference.decision`) are not drawn among the others: they are listed in their own panel below, with
    what flagged them. No text is written over the data: the baseline gap is a legend entry, the sign
    convention and its source (with a warning when it rests on fewer than :data:`MIN_SIGN_SCENARIOS` validation
    scenarios) are written under the panels. A point beyond the axes is drawn as an arrow at the edge with its
    value.

    Left panel, one point per method cell (intervention x options x seed): the signed paired change of an asymmetry
    metric (positive = toward zero; :mod:`evenhand.scoring.paired`) against the accuracy loss on GT items, each with
    its 95% CI as a crosshair. Each method's random controls (what an edit of the same sites, norm and strength in a
    random direction does) are hollow squares inside a shaded box in the method's colour: their 2.5-97.5% range of
    change and of accuracy loss (no box where the controls coincide). Method cells at the same point are drawn a
    little apart (a note under the legend says by how much). The dotted line is the baseline's whole gap (a point
    above it removed more than the gap). A control whose refusal rate rose past the margin is crossed out in red; an
    overshoot (the remaining gap's CI wholly past zero) is a downward triangle; neither is a reduction. Cells of one
    swept intervention are joined in sweep order (a strength curve). Good methods sit up and to the left.

    Right panel (:func:`_control_panel`), one row per method cell with random controls."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch, Rectangle

    pal = paper_style()
    pts = frontier_points(table, metric)
    is_ctl = pts["control"].astype(bool)
    flag_of = pts["refusal_flag"].astype(bool) | pts["accuracy_flag"].astype(bool)
    flagged = pts[flag_of & ~is_ctl]
    methods = pts[~is_ctl & ~flag_of]
    by_method = {c: v for c, v in controls_by_method(pts).items() if c in set(methods["cell"])}
    sign, warning = sign_text(table, metric)
    n_flag = len(flagged)
    height = FULL_WIDTH * 0.46 + (0.25 + 0.13 * n_flag if n_flag else 0.0)
    fig = plt.figure(figsize=(FULL_WIDTH, height))
    grid = fig.add_gridspec(2 if n_flag else 1, 2, width_ratios=[1.5, 1],
                            height_ratios=[FULL_WIDTH * 0.46, 0.25 + 0.13 * n_flag] if n_flag else None)
    ax, bx = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1])
    ax.axhline(0, color="0.6", lw=0.6, zorder=0)
    ax.axvline(0, color="0.6", lw=0.6, zorder=0)
    gap = _baseline_gap(table, metric)
    if gap is not None:
        ax.axhline(gap, color="0.3", lw=0.6, ls=":", zorder=0)
    names = list(dict.fromkeys(pts["intervention"]))
    colour_of = {name: pal[k % len(pal)] for k, name in enumerate(names)}
    boxed = set()
    for cell, ctl in by_method.items():  # the controls' 2.5-97.5% box, once per intervention and options
        row = methods[methods["cell"] == cell].iloc[0]
        key = (row["intervention"], row["options"])
        if key in boxed:
            continue
        boxed.add(key)
        colour = colour_of[row["intervention"]]
        lo, hi = _band(row, ctl["value_change"])
        xlo, xhi = ctl["value_loss"].quantile([0.025, 0.975]).tolist()
        if hi - lo > 0.5 and xhi - xlo > 0.5:
            ax.add_patch(Rectangle((xlo, lo), xhi - xlo, hi - lo, facecolor=colour, alpha=0.18,
                                   edgecolor=colour, lw=0.6, ls="--", zorder=1))
        # each control as a hollow square, visible also where the controls coincide (no band to draw)
        ax.scatter(ctl["value_loss"], ctl["value_change"], s=12, marker="s", facecolors="none", edgecolors=colour,
                   lw=0.6, zorder=2)
    random_ctl = pts[is_ctl & pts["cell"].isin([c for v in by_method.values() for c in v["cell"]])]
    xmax = _clip_x(ax, pd.concat([methods, random_ctl]))
    ctl_flagged = pts[is_ctl & pts["refusal_flag"].astype(bool) & pts["cell"].isin(random_ctl["cell"])]
    if not ctl_flagged.empty:  # a control whose refusals rose past the margin: its change is no edit's effect
        ax.scatter(ctl_flagged["value_loss"].clip(upper=xmax), ctl_flagged["value_change"], s=10, marker="x",
                   color="#c0392b", lw=0.6, zorder=3, label="Control: no A/B answer up")
    span = (float(methods["value_loss"].max()) - float(methods["value_loss"].min())) if len(methods) else 0.0
    step = 0.03 * (span or 1.0)
    dodged = _dodge(methods["value_loss"], methods["value_change"], step)
    moved = bool((dodged != methods["value_loss"]).any())
    methods = methods.assign(value_loss=dodged)
    for name in names:
        colour = colour_of[name]
        sub = methods[methods["intervention"] == name]
        if sub.empty:
            continue
        x, y = sub["value_loss"], sub["value_change"]
        xerr = [(x - sub["ci_low_loss"]).clip(lower=0), (sub["ci_high_loss"] - x).clip(lower=0)]
        yerr = [(y - sub["ci_low_change"]).clip(lower=0), (sub["ci_high_change"] - y).clip(lower=0)]
        ax.errorbar(x, y, xerr=xerr, yerr=yerr, fmt="none", ecolor=colour, elinewidth=0.5, alpha=0.45)
        shot = sub["overshoot"].astype(bool)
        for mask, marker in ((~shot, "o"), (shot, "v")):
            if mask.any():
                ax.scatter(x[mask], y[mask], s=14, marker=marker, facecolors=colour, edgecolors=colour, zorder=3,
                           label=intervention_name(name) if marker == "o" or not (~shot).any() else None)
        for _, curve in sub.groupby("seed"):  # a strength curve: cells of one seed that differ only in options
            if curve["options"].nunique() > 1:
                ax.plot(curve["value_loss"], curve["value_change"], color=colour, lw=0.6, ls="--", alpha=0.6)
    ax.autoscale_view()
    _arrows_past(ax, methods)
    handles, labels = ax.get_legend_handles_labels()
    if gap is not None:
        handles.append(Line2D([], [], color="0.3", lw=0.6, ls=":"))
        labels.append(f"Whole baseline gap ({gap:.1f} pp)")
    if by_method:
        handles.append(Patch(facecolor="0.5", alpha=0.3, edgecolor="0.4", ls="--", lw=0.6))
        labels.append("Random controls, 2.5–97.5%")
        handles.append(ax.scatter([], [], s=12, marker="s", facecolors="none", edgecolors="0.4", lw=0.6))
        labels.append("Each random control")
    if methods["overshoot"].astype(bool).any():
        handles.append(ax.scatter([], [], marker="v", facecolors="none", edgecolors="0.3", s=14))
        labels.append("Overshoot (sign flipped)")
    ax.set_xlabel("Accuracy loss on GT items (pp; + = less accurate)")
    ax.set_ylabel(f"{gap_name(metric)} reduction (pp)\n+ = gap moved toward 0")
    ax.legend(handles, labels, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.27), ncol=3,
              handletextpad=0.3, columnspacing=0.8)
    _control_panel(bx, methods, by_method, metric)
    if n_flag:
        fx = fig.add_subplot(grid[1, :])
        fx.set_axis_off()
        fx.set_xlim(0, 1)
        fx.set_ylim(n_flag + 0.6, -0.9)
        fx.text(0.0, -0.5, "Flagged cells (refusals or accuracy loss past the 5 pp margin): not drawn above, never a "
                "reduction, never ranked", fontsize=6, color="#c0392b", va="center", ha="left")
        for i, (_, r) in enumerate(flagged.iterrows()):
            fx.scatter([0.008], [i + 0.5], s=22, marker="x", color="#c0392b", lw=1.0, clip_on=False)
            scr = pts[pts["cell"] == f"{r['cell']}-scrambled"]
            extra = "" if scr.empty else f"; its scrambled control (same accuracy cost, coin flips): change " \
                f"{scr['value_change'].iloc[0]:+.1f} pp"
            fx.text(0.02, i + 0.5, _flag_line(r) + extra, fontsize=5.5, va="center", ha="left", color="0.15")
    title = f"Intervention frontier: {metric_name(metric)}" + (f", {model_name(model)}" if model else "")
    sizes = _sizes(table, metric)
    fig.suptitle(title + (f"\nBaseline {sizes}" if sizes else ""), fontsize=7)
    fig.tight_layout()
    notes = [f"Sign of the change: {sign}."]
    if moved:
        notes.append(f"Method cells at the same point are drawn {step:.1f} pp apart along the x axis.")
    if warning:
        notes.append(warning)
    fig.subplots_adjust(bottom=fig.subplotpars.bottom + 0.04 * len(notes))
    for i, note in enumerate(notes):
        fig.text(0.01, 0.01 + 0.028 * (len(notes) - 1 - i), note, ha="left", va="bottom", fontsize=5.5,
                 color="#c0392b" if note is warning else "0.3")
    return save(fig, stem, formats)


def _arrows_past(ax, methods: pd.DataFrame) -> None:
    """A method cell beyond the axes' limits: an arrow at the edge, with its value beside it (inside the axes,
    away from the edge it points at)."""
    xlo, xhi = ax.get_xlim()
    ylo, yhi = ax.get_ylim()
    for _, r in methods.iterrows():
        x, y = r["value_loss"], r["value_change"]
        if pd.isna(x) or pd.isna(y) or (xlo <= x <= xhi and ylo <= y <= yhi):
            continue
        cx, cy = min(max(x, xlo), xhi), min(max(y, ylo), yhi)
        marker = ">" if x > xhi else "<" if x < xlo else "^" if y > yhi else "v"
        ax.plot([cx], [cy], marker=marker, ms=5, color="#c0392b", clip_on=False, zorder=5)
        ax.annotate(f"({x:+.0f}, {y:+.0f})", (cx, cy), xytext=(-6 if x > xhi else 6, -6 if y > yhi else 6),
                    textcoords="offset points", fontsize=5, ha="right" if x > xhi else "left",
                    va="top" if y > yhi else "bottom", color="#c0392b")


def _band(row: pd.Series, changes: pd.Series) -> tuple[float, float]:
    """A method's control band (pp): the table's ``band_low``/``band_high``, else the 2.5-97.5 percentiles of
    its controls' changes."""
    if pd.notna(row.get("band_low")) and pd.notna(row.get("band_high")):
        return float(row["band_low"]), float(row["band_high"])
    lo, hi = changes.quantile([0.025, 0.975]).tolist()
    return float(lo), float(hi)


def _clip_x(ax, pts: pd.DataFrame) -> float:
    """Fit the x axis to ``pts`` (the cells drawn: a flagged cell's accuracy loss would squeeze the others into a
    corner); returns the right edge."""
    ok = pts
    if ok.empty:
        return float("inf")
    lo = min(0.0, float(ok["ci_low_loss"].min()))
    hi = max(1.0, float(ok["ci_high_loss"].max()))
    pad = 0.08 * (hi - lo)
    ax.set_xlim(lo - pad, hi + 2 * pad)
    return hi + pad


def _control_panel(ax, methods: pd.DataFrame, by_method: dict[str, pd.DataFrame], metric: str) -> None:
    """One row per method cell with random controls: the controls' 2.5-97.5% band (grey bar, the table's
    ``band_low``/``band_high``), each control's change (grey dots), the method's change with its CI (filled when it
    beats its controls, ``beats_control``: its change above the band and the method-minus-control CI excluding 0;
    hollow otherwise; red when the method is refusal-flagged, a triangle for an overshoot)."""
    from matplotlib.patches import Patch
    ax.axvline(0, color="0.6", lw=0.6, zorder=0)
    ax.set_xlabel(f"{gap_name(metric)} reduction (pp; + = toward 0)")
    vs = methods[methods["cell"].isin(list(by_method))]
    if vs.empty:
        ax.text(0.5, 0.5, "no cell with a random control", ha="center", va="center", transform=ax.transAxes,
                fontsize=6, color="0.4")
        ax.set_yticks([])
        return
    y = list(range(len(vs)))[::-1]
    for yi, (_, r) in zip(y, vs.iterrows()):
        ctl = by_method[r["cell"]]
        lo, hi = _band(r, ctl["value_change"])
        if pd.notna(lo) and pd.notna(hi):
            ax.barh(yi, max(hi - lo, 0.0), left=lo, height=0.55, color="0.82", edgecolor="0.55", lw=0.5, zorder=1)
        ax.scatter(ctl["value_change"], [yi] * len(ctl), s=14, marker="s", facecolors="none", edgecolors="0.35",
                   lw=0.6, zorder=2)
        colour = "#c0392b" if bool(r["refusal_flag"]) else "0.1"
        x = r["value_change"]
        ax.errorbar([x], [yi], xerr=[[max(x - r["ci_low_change"], 0)], [max(r["ci_high_change"] - x, 0)]],
                    fmt="none", ecolor=colour, elinewidth=0.7, zorder=3)
        ax.scatter([x], [yi], s=18, marker="v" if bool(r["overshoot"]) else "o", zorder=4, edgecolors=colour,
                   facecolors=colour if bool(r["beats_control"]) else "white", lw=0.8)
    handles = [Patch(facecolor="0.82", edgecolor="0.55", lw=0.5),
               ax.scatter([], [], s=14, marker="s", facecolors="none", edgecolors="0.35", lw=0.6),
               ax.scatter([], [], s=18, color="0.1"), ax.scatter([], [], s=18, facecolors="white", edgecolors="0.1")]
    labels = ["Controls, 2.5–97.5%", "Each control", "Beats its controls", "Does not beat them"]
    ax.legend(handles, labels, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.27), fontsize=5, ncol=2,
              handletextpad=0.2, columnspacing=0.8)
    ax.set_yticks(y)
    ax.set_yticklabels([f"{_name(r)}\n{_controls(by_method[r['cell']])}" for _, r in vs.iterrows()], fontsize=5,
                       linespacing=1.0)
    ax.set_ylim(-0.7, len(vs) - 0.3)


def _controls(ctl: pd.DataFrame) -> str:
    """``2 random controls``, saying how many have no value (a control whose metric is undefined)."""
    n, usable = len(ctl), int(ctl["value_change"].notna().sum())
    text = f"{n} random control{'s' if n != 1 else ''}"
    return text + (f", {n - usable} without a value" if usable < n else "")


CLIP = 100.0
"""An interval end beyond +-100 pp is printed clipped there and marked (\\textsuperscript{\\dag})."""


def _pp(row: pd.Series | None, signed: bool = True) -> str:
    if row is None or pd.isna(row["value"]):
        return "--"
    f = "+.1f" if signed else ".1f"
    v = f"{100 * row['value']:{f}}"
    if pd.isna(row["ci_low"]) or pd.isna(row["ci_high"]):
        return v
    lo, hi = 100 * row["ci_low"], 100 * row["ci_high"]
    clipped = lo < -CLIP or hi > CLIP
    lo, hi = max(lo, -CLIP), min(hi, CLIP)
    return f"{v} [{lo:{f}}, {hi:{f}}]" + (r"\textsuperscript{\dag}" if clipped else "")


def _band_cell(row: pd.Series | None) -> str:
    """``[low, high] (n)`` of a row's control band in pp, ``--`` without one."""
    if row is None or "band_low" not in row or pd.isna(row["band_low"]) or pd.isna(row["band_high"]):
        return "--"
    n = f" ({int(row['n_controls'])})" if "n_controls" in row and pd.notna(row["n_controls"]) else ""
    return f"[{100 * row['band_low']:+.1f}, {100 * row['band_high']:+.1f}]{n}"


def compare_latex(table: pd.DataFrame, metrics: Sequence[str] = ("fraggap", "tieshift")) -> str:
    """A booktabs table of the comparison in a ``table`` float with caption and notes, one row per method cell
    and one summarised row per set of random controls (their count and 2.5-97.5% band) and per scrambled control,
    in pp with 95% CIs: refusal change, for each of ``metrics`` the signed change toward zero and the change minus
    the random controls (a prediction interval), the accuracy loss and its p. Marks, each explained in the notes
    (all from :mod:`evenhand.inference.decision`): \\textsuperscript{R} refusals up past the margin,
    \\textsuperscript{A}
    accuracy loss past it (either level), \\textsuperscript{O} overshoot, \\textsuperscript{C} a contrast with a
    control flagged for refusals, \\textsuperscript{B} beats its controls (never on a flagged cell),
    \\textsuperscript{S} not above its scrambled control, \\textsuperscript{\\dag} an interval clipped at +-100 pp."""
    idx = {(r["cell"], r["metric"], r["stat"]): r for _, r in table.iterrows()}
    head = ["Cell", r"$\Delta$ refusal"]
    for m in metrics:
        head += [f"{gap_name(m)} change", f"{gap_name(m)} $-$ control (PI)"]
    head += ["Accuracy loss", "$p$"]
    lines = [r"\begin{table}[t]", r"\centering", r"\small", r"\begin{tabular}{l" + "c" * (len(head) - 1) + "}",
             r"\toprule", " & ".join(head) + r" \\", r"\midrule"]
    kind = table["control_kind"] if "control_kind" in table else pd.Series([None] * len(table), index=table.index)
    random_ctl = table["control"].astype(bool) & (kind != "scrambled")
    used = set()
    for cell, g in table[(table["cell"] != "baseline") & ~random_ctl].groupby("cell", sort=False):
        first = g.iloc[0]
        scr = isinstance(first.get("control_kind"), str) and first.get("control_kind") == "scrambled"
        name = _label(first) + (" (scrambled control)" if scr else "")
        cells = [name.replace("_", r"\_"), _pp(idx.get((cell, "refusal", "refusal_change")))]
        for m in metrics:
            ch = idx.get((cell, m, "change"))
            mark = ""
            if ch is not None and bool(ch["refusal_flag"]):
                mark += r"\textsuperscript{R}"
            if ch is not None and bool(ch.get("accuracy_flag", False)) and ch.get("accuracy_flag") == ch.get(
                    "accuracy_flag"):
                mark += r"\textsuperscript{A}"
            if ch is not None and (ch.get("verdict") == "overshoot" if "verdict" in ch else bool(ch["overshoot"])):
                mark += r"\textsuperscript{O}"
            if ch is not None and ch.get("verdict") == "not above scrambled control":
                mark += r"\textsuperscript{S}"
            vs = idx.get((cell, m, "change_minus_control"))
            flagged = vs is not None and "control_flagged" in vs and bool(vs["control_flagged"])
            beats = None if vs is None else vs.get("beats_control")
            if beats is not None and pd.notna(beats) and bool(beats):
                mark += r"\textsuperscript{B}"
            used.update(c for c in "RAOSBC" if f"{{{c}}}" in mark + (r"\textsuperscript{C}" if flagged else ""))
            cells += [_pp(ch) + mark, _pp(vs) + (r"\textsuperscript{C}" if flagged else "")]
        loss = idx.get((cell, "accuracy", "accuracy_loss"))
        p = None if loss is None else loss.get("p_value")
        cells += [_pp(loss), "--" if p is None or pd.isna(p) else f"{p:.3g}"]
        lines.append(" & ".join(cells) + r" \\")
        vs = idx.get((cell, metrics[0], "change_minus_control"))
        if vs is not None and pd.notna(vs.get("band_low")):
            band = [f"[{100 * idx[(cell, m, 'change_minus_control')]['band_low']:+.1f}, "
                    f"{100 * idx[(cell, m, 'change_minus_control')]['band_high']:+.1f}]"
                    if (cell, m, "change_minus_control") in idx else "--" for m in metrics]
            n = int(vs["n_controls"]) if pd.notna(vs.get("n_controls")) else 0
            row = [rf"\quad {n} random controls (2.5--97.5\% band)", "--"]
            for b in band:
                row += [b, "--"]
            lines.append(" & ".join(row + ["--", "--"]) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    notes = {"R": "refusals rose past the margin (5 pp)", "A": "accuracy loss past the margin (5 pp; point or CI)",
             "O": "overshoot: the remaining gap's CI lies past zero", "S": "not above its scrambled control",
             "B": "beats its random controls (unflagged, change above their band, contrast above 0)",
             "C": "a random control was itself flagged for refusals"}
    base = idx.get(("baseline", metrics[0], "gap"))
    sign = "" if base is None else str(base.get("sign_source") or "")
    caption = (r"\caption{Interventions against the baseline on held-out scenarios: pp, 95\% paired CIs over "
               r"scenarios (jackknife-$t$); change = the gap's move toward zero (sign: " + sign.replace("_", r"\_")
               + r"); PI = prediction interval for the cell minus a new random direction; $p$ = the accuracy "
               r"loss's (same jackknife-$t$). Verdicts: \texttt{evenhand/inference/decision.py}. "
               + " ".join(rf"\textsuperscript{{{k}}}\,{v}." for k, v in notes.items() if k in used)
               + (r" \textsuperscript{\dag}\,interval clipped at $\pm$100 pp." if r"\dag" in "\n".join(lines) else "")
               + "}")
    lines += [caption, r"\end{table}"]
    return "\n".join(lines) + "\n"
