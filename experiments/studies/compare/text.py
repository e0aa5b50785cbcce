"""What `evenhand compare` (and `evenhand run` on a comparison config) prints: one line per cell
(:func:`compare_text`), the chosen setting of every swept arm (:func:`selection_text`) and the power block
(:func:`power_text`)."""
from __future__ import annotations

from evenhand.reporting.labels import metric_name


def compare_text(table, metric: str = "fraggap") -> str:
    """An intervention comparison, one line per cell (:mod:`evenhand.scoring.paired`; pp, 95% paired CIs): the refusal
    change, ``metric``'s remaining gap, its signed change toward zero with its Holm-adjusted p and the verdict
    (:mod:`evenhand.inference.decision`), the change minus the scrambled control (where the cell lost accuracy
    beyond the
    margin), the change minus the cell's random controls (a prediction interval) with their band, the accuracy
    loss and its p (the same jackknife-t). Refusals count as wrong answers and flips; a flagged cell (refusals or
    accuracy, ``degraded`` or ``possibly degraded``) is never a reduction and never marked B."""
    def f(r, ci=True):
        if r is None or r["value"] is None or r["value"] != r["value"]:
            return "-"
        lo, hi = r["ci_low"], r["ci_high"]
        return f"{100 * r['value']:+.1f}" + ("" if not ci or lo is None or lo != lo else
                                             f" [{100 * lo:+.1f}, {100 * hi:+.1f}]")

    def p_of(r, col):
        v = None if r is None else r.get(col)
        return "-" if v is None or v != v else ("<0.001" if v < 0.001 else format(v, ".3g"))
    name = metric_name(metric)
    lines = [f"{'cell':<40}{'refusal +':>10}{'declined/unparsed +':>20}{name + ' gap':>12}{name + ' change [CI]':>26}"
             f"{'p Holm':>8}  {'verdict':<28}{'- scrambled [CI]':>22}{'- control [PI]':>22}{'control band (n)':>22}"
             f"{'accuracy loss [CI]':>24}{'p':>8}{'n items/scen.':>15}"]
    flags, families = {}, {}
    for cell, g in table.groupby("cell", sort=False):
        idx = {(r.metric, r.stat): r._asdict() for r in g.itertuples()}
        ch = idx.get((metric, "change"))
        loss = idx.get(("accuracy", "accuracy_loss"))
        n = "" if ch is None else f"{int(ch['n'])}/{int(ch['n_scenarios'])}"
        verdict = "" if ch is None else str(ch["verdict"])
        vs = idx.get((metric, "change_minus_control"))
        band = "-"
        if vs is not None and vs.get("band_low") is not None and vs["band_low"] == vs["band_low"]:
            band = (f"[{100 * vs['band_low']:+.1f}, {100 * vs['band_high']:+.1f}] ({int(vs['n_controls'])})"
                    + (" B" if vs.get("beats_control") is True else ""))
        split = f"{f(idx.get(('refusal', 'declined_change')), False)}/{f(idx.get(('refusal', 'unparsed_change')), False)}"
        lines.append(f"{cell:<40}{f(idx.get(('refusal', 'refusal_change')), False):>10}{split:>20}"
                     f"{f(idx.get((metric, 'gap')), False):>12}{f(ch):>26}{p_of(ch, 'p_holm'):>8}  {verdict:<28}"
                     f"{f(idx.get((metric, 'change_minus_scrambled'))):>22}{f(vs):>22}{band:>22}{f(loss):>24}"
                     f"{p_of(loss, 'p_value'):>8}{n:>15}")
        flag = None if ch is None else ch.get("flag")
        if isinstance(flag, str) and flag:
            flags[cell] = flag
        if ch is not None and isinstance(ch.get("family"), str):
            families[ch["family"]] = True
    lines += [f"  {cell}: {flag}" for cell, flag in flags.items()]
    lines.append("declined/unparsed: the refusal change split into answers that declined and answers with no "
                 "verdict found (evenhand.parsing.parse). p Holm: the change's p-value, Holm-adjusted within its family ("
                 + "; ".join(families) + "); - scrambled: the change minus that of the baseline with the same "
                 "share of answers coin-flipped (a reduction must beat it); - control [PI]: a prediction interval "
                 "for the cell minus a new random direction; control band: the 2.5-97.5% range of the random "
                 "controls' changes (n controls), B: the cell beats its controls (unflagged, its change above the "
                 "band, the contrast above 0, and above its scrambled control where it has one). Verdicts and "
                 "flags: evenhand.inference.decision (a flag: degraded when the CI lies above the 5 pp margin, possibly "
                 "degraded when only the point does; either withholds the verdict).")
    return "\n".join(lines)


def power_text(table) -> str:
    """The power block under `evenhand compare`'s table: per cell, the paired SE and MDE of each metric."""
    sub = table[table["stat"].isin(["paired_se", "mde"])]
    if sub.empty:
        return ""
    metrics = list(dict.fromkeys(sub["metric"]))
    head = f"{'paired SE / MDE (80% power, alpha 0.05), pp':<44}" + "".join(f"{m:>16}" for m in metrics)
    lines = [head]
    for cell, g in sub.groupby("cell", sort=False):
        v = {(r.metric, r.stat): r.value for r in g.itertuples()}
        def f(m):
            se, md = v.get((m, "paired_se")), v.get((m, "mde"))
            return "-" if se is None or se != se else f"{100 * se:.1f} / {100 * md:.1f}"
        name = cell + (" (assumed)" if cell == "baseline" else "")
        lines.append(f"{name:<44}" + "".join(f"{f(m):>16}" for m in metrics))
    notes = [n for n in sub.get("note", []).dropna().unique()] if "note" in sub else []
    lines += [f"baseline row: {n}" for n in notes]
    return "\n".join(lines)


def selection_text(table) -> str:
    """The chosen setting of every swept arm and why (the table's ``selection`` column)."""
    if "selection" not in table:
        return ""
    sel = table[table["selection"].fillna("") != ""].drop_duplicates("intervention")
    return "\n".join(f"selected {r.intervention}: {r.selection}" for r in sel.itertuples())
