"""The dose-response benchmark across dial mechanisms: pure functions of the per-mechanism ``summary.csv`` files.

A run per mechanism (``<output_dir>/<mechanism>/``, :mod:`.study`, config field ``mechanism``) scores every arm's
slope (removed against implanted gap) with its CI and flags. :func:`across_table` stacks them (arm x metric x
mechanism); :func:`classify` reads each cell by equivalence (:func:`evenhand.inference.decision.removal_class`, margin
+-0.25): ``removes``, ``partial``, ``none``, ``overshoot``, ``reverse``, ``inconclusive`` (each class held only
when its test survives Holm within the arm's family across mechanisms), ``flagged`` (a
degraded cell: accuracy loss or refusals beyond the run's margins; never read as removal) or ``undefined``;
:func:`robustness` lists per arm the mechanisms of each class; :func:`across_figure` draws the slopes, methods as
rows and mechanisms as columns, :func:`across_markdown` tabulates them. :func:`write_across` writes them with
``across.json`` (the runs read).

More in docs/INTERVENTIONS.md, "The benchmark across dial mechanisms"."""
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from evenhand.reporting.labels import humanise, intervention_name, metric_name
from evenhand.reporting.plotting import FORMATS, FULL_WIDTH, paper_style, save
from evenhand.runs.rundir import RunDir, write_json_atomic, write_table_atomic
from organism.mechanism import DEFAULT_MECHANISM
from evenhand.inference.decision import EQUIVALENCE_MARGIN, class_p, held_class, holm_within, removal_class
from .scoring import CONTROL_SUFFIX, SCRAMBLED_SUFFIX, known_removal, known_share

CLASSES = ("removes", "partial", "none", "overshoot", "reverse", "inconclusive", "flagged", "undefined")
"""The readings of a cell (arm, metric, mechanism), in the robustness summary's column order
(:data:`evenhand.inference.decision.CLASSES`)."""
RULE = ("flagged: the cell is degraded or possibly degraded (accuracy loss or refusals beyond the run's margins), "
        "whatever its CI; undefined: no slope CI; else by equivalence with margin m (default 0.25) on the slope's "
        "95% CI: removes (inside 1 +- m), none (inside 0 +- m), partial (between m and 1 - m), overshoot (above "
        "1 + m), reverse (below -m), inconclusive otherwise; a class stands only when its test's p, Holm-adjusted "
        "within its family (the arm and metric across mechanisms), is below 0.05, else inconclusive")
"""The classification rule in words (``across.json``)."""
COLUMNS = ("mechanism", "arm", "metric", "known", "known_slope", "slope", "slope_low", "slope_high",
           "minus_random", "minus_random_low", "minus_random_high", "fpr_beta0", "fpr_replications", "coverage",
           "coverage_n", "degraded", "flag_accuracy", "flag_refusal", "degraded_betas", "degraded_by",
           "max_accuracy_loss", "max_refusal_change", "max_pressured_refusal_change")
"""The across table's columns taken from (or derived from) a run's summary, before the reading's."""


def _num(x) -> float | None:
    v = pd.to_numeric(x, errors="coerce")
    return None if pd.isna(v) else float(v)


def _flag(x) -> bool:
    return str(x).strip().lower() in ("true", "1", "yes")


def classify(low, high, flagged: bool, margin: float = EQUIVALENCE_MARGIN) -> tuple[str, str | None]:
    """``(class, side)`` of a slope CI ``[low, high]`` by :func:`evenhand.inference.decision.removal_class`
    (equivalence with
    ``margin``); ``side`` is kept for the tables written before the classes: the class itself for ``partial``,
    ``overshoot`` and ``reverse``, else None."""
    cls = removal_class(_num(low), _num(high), flagged, margin)
    return cls, cls if cls in ("partial", "overshoot", "reverse") else None


def across_table(summaries: Mapping[str, pd.DataFrame], margin: float = EQUIVALENCE_MARGIN) -> pd.DataFrame:
    """One row per (mechanism, arm, metric) of the runs' summaries (``{mechanism: summary}``, the
    :func:`.scoring.summary` table or its ``summary.csv``): the slope and, for a method with a random control,
    the slope minus it (CIs); the known answer (``known``, ``known_slope`` from the arm's name) and whether the CI
    covers it (``covers_known``, None without one); the flags (``degraded``; ``flag_accuracy``, ``flag_refusal``:
    which stats degraded it; ``degraded_level`` where the summary has it); the false-positive rate at beta 0 and
    the coverage; ``covers_0``, ``covers_1``; ``class_ci`` (:func:`classify` of the 95% CI), ``p_class`` (its
    test's p), ``p_holm`` (Holm within ``family``: the arm and metric across the mechanisms) and ``class`` (the
    CI's class where it survives Holm, else ``inconclusive``) and ``side``."""
    rows = []
    for mech, summ in summaries.items():
        for r in summ.to_dict("records"):
            arm, metric = str(r["arm"]), str(r["metric"])
            lo, hi = _num(r.get("slope_low")), _num(r.get("slope_high"))
            by = "" if pd.isna(r.get("degraded_by")) else str(r.get("degraded_by") or "")
            degraded = _flag(r.get("degraded"))
            cls, side = classify(lo, hi, degraded, margin)
            ks = known_share(arm, metric)
            rows.append({
                "mechanism": mech, "arm": arm, "metric": metric, "known": known_removal(arm), "known_slope": ks,
                "slope": _num(r.get("slope")), "slope_low": lo, "slope_high": hi,
                **{c: _num(r.get(c)) for c in ("minus_random", "minus_random_low", "minus_random_high", "fpr_beta0",
                                               "fpr_replications", "coverage", "coverage_n")},
                "degraded": degraded, "degraded_level": None if pd.isna(r.get("degraded_level")) else
                r.get("degraded_level"), "flag_accuracy": "accuracy_loss" in by, "flag_refusal": "refusal" in by,
                "degraded_betas": "" if pd.isna(r.get("degraded_betas")) else str(r.get("degraded_betas") or ""),
                "degraded_by": by,
                **{c: _num(r.get(c)) for c in ("max_accuracy_loss", "max_refusal_change",
                                               "max_pressured_refusal_change")},
                "covers_0": None if lo is None else bool(lo <= 0 <= hi),
                "covers_1": None if lo is None else bool(lo <= 1 <= hi),
                "covers_known": None if ks is None or lo is None else bool(lo <= ks <= hi) and not degraded,
                "class_ci": cls, "p_class": class_p(_num(r.get("slope")), lo, hi, cls, margin),
                "family": f"Holm over the mechanisms: {arm} {metric}"})
    out = pd.DataFrame(rows, columns=[*COLUMNS, "degraded_level", "covers_0", "covers_1", "covers_known", "class_ci",
                                      "p_class", "family"])
    out["p_holm"] = holm_within(out["p_class"].astype(float), out["family"])
    out["class"] = [held_class(c, p) for c, p in zip(out["class_ci"], out["p_holm"])]
    out["side"] = [c if c in ("partial", "overshoot", "reverse") else None for c in out["class"]]
    return out


def robustness(table: pd.DataFrame) -> pd.DataFrame:
    """One row per (arm, metric) of :func:`across_table`'s table: per class of :data:`CLASSES` the mechanisms whose
    cell reads so (comma-separated, the table's order), their count ``n_<class>``, the mechanisms whose CI covers
    the arm's known slope unflagged (``known_met``; arms with a known answer only), ``n_mechanisms`` and a
    ``verdict``: ``removes under all``, ``removes under none`` (``flagged under all`` when every cell is flagged)
    or ``removes under k of n``."""
    out = []
    mechs = list(dict.fromkeys(table["mechanism"]))
    for (arm, metric), t in table.groupby(["arm", "metric"], sort=False):
        t = t.set_index("mechanism").reindex([m for m in mechs if m in set(t["mechanism"])])
        row = {"arm": arm, "metric": metric, "known": known_removal(arm), "known_slope": known_share(arm, metric),
               "n_mechanisms": len(t)}
        for c in CLASSES:
            hit = [m for m in t.index if t.loc[m, "class"] == c]
            row[c], row[f"n_{c}"] = ", ".join(hit), len(hit)
        row["known_met"] = (", ".join(m for m in t.index if t.loc[m, "covers_known"] is True)
                            if row["known"] is not None else None)
        n, k = row["n_mechanisms"], row["n_removes"]
        row["verdict"] = ("removes under all" if n and k == n else
                          "flagged under all" if n and row["n_flagged"] == n else
                          "removes under none" if k == 0 else f"removes under {k} of {n}")
        out.append(row)
    return pd.DataFrame(out)


def arm_order(arms: Sequence[str]) -> list[str]:
    """The figure's rows: the methods, their scrambled controls, the random controls, the oracles."""
    arms = list(dict.fromkeys(arms))

    def rank(a: str) -> int:
        if a.endswith(SCRAMBLED_SUFFIX):
            return 1
        if a.endswith(CONTROL_SUFFIX):
            return 2
        return 3 if known_removal(a) is not None else 0
    return sorted(arms, key=lambda a: (rank(a), arms.index(a)))


MECHANISM_NAMES = {"xor": "XOR"}
"""Display names of mechanisms that :func:`~evenhand.reporting.labels.humanise` would spell wrong."""


def mechanism_name(name: str) -> str:
    """A mechanism as the figure shows it (``last_layer`` -> ``Last layer``, ``xor`` -> ``XOR``)."""
    return MECHANISM_NAMES.get(name) or humanise(name)


CLASS_STYLE = {"removes": 2, "partial": 1, "none": 0, "inconclusive": 4, "overshoot": 3, "reverse": 5}
"""The palette index of each unflagged class (flagged cells: hollow grey)."""


def across_figure(table: pd.DataFrame, stem, metric: str = "fraggap", xlim: tuple[float, float] = (-1.0, 2.0),
                  formats: Sequence[str] = FORMATS, margin: float = EQUIVALENCE_MARGIN) -> list[Path]:
    """The slopes of :func:`across_table`'s table on ``metric``, a pure function of it: one row per arm
    (:func:`arm_order`), one panel per mechanism; the point and its 95% CI coloured by class, a flagged cell hollow
    grey and marked "flagged", a slope without CI written "undefined", a CI beyond ``xlim`` ending in an arrow (a
    point beyond it: an arrow and its value); reference lines at 0 (nothing removed) and 1 (the planted gap
    removed) with their equivalence bands +- ``margin`` shaded, the arm's known slope as a black tick."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    pal = paper_style()
    t = table[table["metric"] == metric]
    if t.empty:
        raise ValueError(f"the across table has no {metric!r} rows")
    mechs = list(dict.fromkeys(t["mechanism"]))
    arms = arm_order(t["arm"])
    lo_x, hi_x = xlim
    height = 1.2 + 0.16 * len(arms)
    fig, axes = plt.subplots(1, len(mechs), sharey=True, squeeze=False, figsize=(FULL_WIDTH, height))
    for ax, mech in zip(axes[0], mechs):
        tm = t[t["mechanism"] == mech].set_index("arm")
        ax.axvline(0, color="0.55", lw=0.6, zorder=0)
        ax.axvline(1, color="0.55", lw=0.6, ls="--", zorder=0)
        for centre in (0, 1):  # the equivalence bands the classes read
            ax.axvspan(centre - margin, centre + margin, color="0.93", lw=0, zorder=-1)
        for y, arm in enumerate(arms):
            if arm not in tm.index:
                ax.text(0.5, y, "not run", fontsize=5, color="0.5", ha="center", va="center")
                continue
            r = tm.loc[arm]
            if r["known_slope"] is not None and not pd.isna(r["known_slope"]):
                ax.plot([r["known_slope"]] * 2, [y - 0.35, y + 0.35], color="black", lw=0.9, zorder=1)
            v, lo, hi = r["slope"], r["slope_low"], r["slope_high"]
            if v is None or pd.isna(v) or lo is None or pd.isna(lo):
                ax.text(0.5, y, "undefined" + (" (flagged)" if r["degraded"] else ""), fontsize=5, color="0.4",
                        ha="center", va="center")
                continue
            flagged = bool(r["degraded"])
            col = "0.6" if flagged else pal[CLASS_STYLE.get(r["class"], 7) % len(pal)]
            a, b = max(lo, lo_x), min(hi, hi_x)
            if a < b:
                ax.plot([a, b], [y, y], color=col, lw=1.1, zorder=2)
            for end, edge, marker in ((lo, lo_x, "<"), (hi, hi_x, ">")):
                if (end < edge) if marker == "<" else (end > edge):
                    ax.plot([edge], [y], marker=marker, ms=3, color=col, zorder=3, clip_on=False)
            x = min(max(v, lo_x), hi_x)
            if x != v:  # the point itself is off the axis: an arrow at the edge and its value, not a dot there
                ax.plot([x], [y], marker=">" if v > x else "<", ms=4, zorder=4, clip_on=False, color=col)
                ax.text(x - 0.08 if v > x else x + 0.08, y + 0.3, f"{v:+.2f}", fontsize=4.5, color="0.35",
                        ha="right" if v > x else "left", va="center")
            else:
                ax.plot([x], [y], marker="o", ms=3.2, zorder=4, clip_on=False,
                        mfc="white" if flagged else col, mec=col, mew=0.9)
            if flagged:
                ax.text(x, y - 0.2, "flagged", fontsize=4.5, color="0.35", ha="center", va="bottom")
        ax.set_xlim(lo_x, hi_x)
        ax.set_title(mechanism_name(mech))
        ax.set_xticks([x for x in range(int(np.floor(lo_x)), int(np.ceil(hi_x)) + 1) if lo_x <= x <= hi_x])
        ax.grid(axis="y", color="0.93", lw=0.5)
    axes[0][0].set_yticks(range(len(arms)), [intervention_name(a) for a in arms])
    axes[0][0].set_ylim(len(arms) - 0.5, -0.5)
    name = metric_name(metric)
    handles = [Line2D([], [], color=pal[CLASS_STYLE[c] % len(pal)], marker="o", ms=3, lw=1.1,
                      label={"removes": "removes: CI in 1 ± m", "partial": "partial: CI in (m, 1 − m)",
                             "none": "none: CI in 0 ± m", "inconclusive": "inconclusive (or not past Holm)",
                             "overshoot": "overshoot: CI above 1 + m", "reverse": "reverse: CI below −m"}[c])
               for c in CLASS_STYLE]
    handles += [Line2D([], [], color="0.6", marker="o", mfc="white", ms=3, lw=1.1,
                       label="flagged: accuracy loss or refusals"),
                Line2D([], [], color="black", lw=0.9, marker="|", ms=5, ls="none", label="known slope")]
    fig.suptitle(f"Dose-response slope on {name} across dial mechanisms", fontsize=7)
    fig.tight_layout(rect=(0, 0.8 / height, 1, 1))
    y0 = axes[0][0].get_position().y0  # the axes' bottom (figure fraction): the label and legend go below it
    fig.text(0.5, y0 - 0.24 / height, f"Slope: removed / implanted {name} (1 = the planted gap removed, "
             f"0 = nothing removed; 95% CI)\nshaded: the equivalence bands 0 ± m and 1 ± m, m = {margin:g}",
             ha="center", va="top", fontsize=7)
    fig.legend(handles=handles, loc="upper center", ncol=3, frameon=False, fontsize=6,
               bbox_to_anchor=(0.5, y0 - 0.55 / height))
    return save(fig, stem, formats)


def across_markdown(table: pd.DataFrame, metric: str = "fraggap") -> str:
    """``metric``'s slopes as a Markdown table (arms as rows in :func:`arm_order`, mechanisms as columns in the
    table's order): ``+0.93 [+0.65, +1.21]``, with `` flagged`` for a degraded cell, ``undefined`` without a CI
    and ``not run`` where the arm has no row under that mechanism."""
    t = table[table["metric"] == metric]
    mechs = list(dict.fromkeys(t["mechanism"]))
    cells = {(r["arm"], r["mechanism"]): r for r in t.to_dict("records")}

    def cell(arm: str, mech: str) -> str:
        r = cells.get((arm, mech))
        if r is None:
            return "not run"
        flag = " flagged" if r["degraded"] else ""
        if r["slope_low"] is None or pd.isna(r["slope_low"]):
            return "undefined" + ("," + flag if flag else "")
        return f"{r['slope']:+.2f} [{r['slope_low']:+.2f}, {r['slope_high']:+.2f}]{flag}"
    lines = ["| arm | " + " | ".join(f"`{m}`" for m in mechs) + " |", "|---" * (len(mechs) + 1) + "|"]
    lines += [f"| {a} | " + " | ".join(cell(a, m) for m in mechs) + " |" for a in arm_order(list(t["arm"]))]
    return "\n".join(lines) + "\n"


def read_summaries(runs: Mapping[str, str | Path]) -> tuple[dict[str, pd.DataFrame], list[dict]]:
    """Each run's summary (``{mechanism: run directory}``) and what ``across.json`` records of it: the path, the
    summary's SHA-256, and from its manifest the status, the betas, the targets, the scenario counts and the
    replications. A run without ``summary.csv`` is an error naming it; so is a run of another mechanism than its
    key (its manifest's config field ``mechanism``; a run from before the field counts as ``last_layer``)."""
    summaries, records = {}, []
    for mech, path in runs.items():
        run = RunDir(path)
        if not run.dose_summary_csv.exists():
            raise FileNotFoundError(f"{run.dose_summary_csv}: no summary for mechanism {mech!r} (run "
                                    f"bench_dose_response.py CONFIG --mechanism {mech} first)")
        man = json.loads(run.manifest_path.read_text()) if run.manifest_path.exists() else {}
        recorded = (man.get("config") or {}).get("mechanism", DEFAULT_MECHANISM)
        if man and recorded != mech:
            raise ValueError(f"{run.path}: a run of mechanism {recorded!r}, read as {mech!r}")
        summaries[mech] = pd.read_csv(run.dose_summary_csv)
        cfg = man.get("config") or {}
        records.append({"mechanism": mech, "path": str(run.path), "summary": run.dose_summary_csv.name,
                        "summary_sha256": hashlib.sha256(run.dose_summary_csv.read_bytes()).hexdigest(),
                        "status": man.get("status"), "betas": man.get("betas"), "targets": man.get("targets"),
                        "eval_degree": (man.get("mechanism") or {}).get("eval_degree"),
                        "n_eval_scenarios": man.get("n_eval_scenarios"), "n_eval_items": man.get("n_eval_items"),
                        "replications": cfg.get("replications"), "replicate": cfg.get("replicate"),
                        "replication_scenarios": cfg.get("replication_scenarios")})
    return summaries, records


def write_across(runs: Mapping[str, str | Path], out: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read the runs (:func:`read_summaries`), write ``across.parquet``/``.csv``, ``robustness.csv``, the figure
    and the Markdown table per metric (``across.*`` for FragGap, ``across_tieshift.*``) and ``across.json`` to
    ``out``; returns the across table and the robustness summary."""
    summaries, records = read_summaries(runs)
    table = across_table(summaries)
    rob = robustness(table)
    d = RunDir(out)
    d.path.mkdir(parents=True, exist_ok=True)
    write_table_atomic(d.across_table, table)
    write_table_atomic(d.across_csv, table)
    write_table_atomic(d.robustness_csv, rob)
    figures = []
    for metric in [m for m in dict.fromkeys(table["metric"]) if isinstance(m, str)]:
        stem = d.across_figure_stem if metric == "fraggap" else d.path / f"{d.across_figure_stem.name}_{metric}"
        figures += [p.name for p in across_figure(table, stem, metric)]
        (d.path / f"{stem.name}.md").write_text(across_markdown(table, metric))
    write_json_atomic(d.across_json, {"runs": records, "classes": list(CLASSES), "figures": figures,
                                      "rows": len(table), "rule": RULE})
    return table, rob
