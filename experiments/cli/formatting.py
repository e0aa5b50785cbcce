"""What the ``evenhand`` commands print: human-readable tables of score reports, comparisons, probe
sweeps, BBQ and mode-switch tables, organism evaluations and run lists (percentage points, CIs and n
everywhere). Each function returns the text; the commands print it."""
from __future__ import annotations

from evenhand.labels import metric_name
from evenhand.metric_defs import asymmetry, find_metric, get_metric, headline, pooled, score_rows
from evenhand.score_report import footnotes, format_estimate as fmt, interval_name


def _signed(metric: str) -> bool:
    """Whether a metric is printed signed, in pp (:attr:`evenhand.metric_defs.Metric.signed`)."""
    m = find_metric(metric)
    return m is not None and m.signed


def _label(metric: str) -> str:
    """A metric's row label (:attr:`evenhand.metric_defs.Metric.label`)."""
    return get_metric(metric).label


def _no_choice_line(counts: dict | None) -> list[str]:
    """The Refusal row's split: the model declined vs no verdict found (``report["no_choice"]``)."""
    if not counts or not counts["n"]:
        return []
    return [f"  {'  declined (refusal)':<28} {100 * counts['refusal_rate']:.1f} % ({counts['refusal']:,} of "
            f"{counts['n']:,})",
            f"  {'  unparsed (no verdict)':<28} {100 * counts['unparsed_rate']:.1f} % ({counts['unparsed']:,} of "
            f"{counts['n']:,})"]


def score_table(report: dict, truth: dict | None = None) -> str:
    """The D3 headline and the D0->D3 progression; ``truth`` maps degree -> planted values. The Refusal rows
    (no A/B choice) are followed by their split into declined and unparsed answers where the report has it."""
    split = report.get("no_choice") or {}
    few: set = set()  # the few-scenarios note: a mark on the line, said once at the end
    how = f"CIs: {interval_name(report.get('interval'))} (n items, k scenarios)"
    lines = [f"Contrast type: {report['contrast_type']}  ({report['n_items']} items, {report['n_scenarios']} "
             f"scenarios; 95% {how})",
             f"Convention: {report.get('convention', 'evenhand')}"]
    if report.get("note"):
        lines.append(f"Note: {report['note']}")
    by_deg = report["by_degree"]
    if "3" in by_deg:
        lines += ["", "Headline (degree 3, explicit labels):"]
        for m in score_rows():
            t = ""
            if truth and 3 in truth and m in truth[3]:
                t = f"   planted {100 * truth[3][m]:{'+' if _signed(m) else ''}.1f}"
            lines.append(f"  {_label(m):<28} {fmt(by_deg['3'][m], m, few)}{t}")
            if m == "refusal":
                lines += _no_choice_line(split.get("by_degree", {}).get("3"))
    lines += ["", "D0 -> D3 progression:"]
    degrees = sorted(by_deg, key=int)
    for m in headline():
        lines.append(f"  {_label(m)}")
        for d in degrees:
            t = ""
            if truth and int(d) in truth and m in truth[int(d)]:
                t = f"   planted {100 * truth[int(d)][m]:{'+' if _signed(m) else ''}.1f}"
            lines.append(f"    D{d}  {fmt(by_deg[d][m], m, few)}{t}")
    lines += ["", "All degrees pooled:"]
    for m in pooled():
        lines.append(f"  {_label(m):<28} {fmt(report['overall'][m], m, few)}")
        if m == "refusal":
            lines += _no_choice_line(split.get("overall"))
    if few:
        lines += ["", *footnotes(few)]
    return "\n".join(lines)


def compare_table(result: dict) -> str:
    """A two-run paired comparison (other - base) with McNemar and the intervention score."""
    degrees = result.get("degrees")
    where = ("" if degrees is None else f"degree {degrees[0]}, " if len(degrees) == 1 else
             f"degrees {', '.join(map(str, degrees))} pooled, ")
    lines = [f"Paired comparison on {result['n_items']} shared items, {result['n_scenarios']} scenarios "
             f"({where}{result['contrast_type']}, convention {result.get('convention', 'evenhand')}); other - base, "
             f"95% paired CIs: {interval_name(result.get('interval'))}"]
    for m in headline():
        lines.append(f"  {_label(m):<28} {fmt(result['difference'][m], 'accgap')}")
    mc = result["mcnemar"]
    lines.append(f"  McNemar (GT baseline, n={mc['n']}): base-only correct {mc['base_only_correct']}, other-only "
                 f"correct {mc['other_only_correct']}, exact p = {mc['p_value']:.4g}")
    lines.append("Intervention score (evenhand.paired, EvenHand's convention: refusals counted; change = the gap's "
                 "move toward zero for a gap of the aligned sign, +1 by default (toward the minority); CIs: "
                 f"{interval_name('jackknife-t')}):")
    rows = {(r["metric"], r["stat"]): r for r in result["score"]}
    for m in asymmetry():
        r = rows.get((m, "change"))
        if r is not None:
            lines.append(f"  change toward zero, {m:<10} {fmt(r, 'accgap')}  {r.get('verdict') or ''}")
    for m, stat, label in (("accuracy", "accuracy_loss", "accuracy loss"),
                           ("refusal", "refusal_change", "refusal change"),
                           ("refusal", "declined_change", "  of which declined"),
                           ("refusal", "unparsed_change", "  of which unparsed")):
        r = rows.get((m, stat))
        if r is not None:
            flag = "  FLAGGED: refusals rose by more than the margin" if r.get("refusal_flag") else ""
            lines.append(f"  {label:<30} {fmt(r, 'accgap')}{flag}")
    return "\n".join(lines)


def compare_text(table, metric: str = "fraggap") -> str:
    """An intervention comparison, one line per cell (:mod:`evenhand.paired`; pp, 95% paired CIs): the refusal
    change, ``metric``'s remaining gap, its signed change toward zero with its Holm-adjusted p and the verdict
    (:mod:`evenhand.decision`), the change minus the scrambled control (where the cell lost accuracy beyond the
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
                 "verdict found (evenhand.parse). p Holm: the change's p-value, Holm-adjusted within its family ("
                 + "; ".join(families) + "); - scrambled: the change minus that of the baseline with the same "
                 "share of answers coin-flipped (a reduction must beat it); - control [PI]: a prediction interval "
                 "for the cell minus a new random direction; control band: the 2.5-97.5% range of the random "
                 "controls' changes (n controls), B: the cell beats its controls (unflagged, its change above the "
                 "band, the contrast above 0, and above its scrambled control where it has one). Verdicts and "
                 "flags: evenhand.decision (a flag: degraded when the CI lies above the 5 pp margin, possibly "
                 "degraded when only the point does; either withholds the verdict).")
    return "\n".join(lines)


def _est(r, pct: bool = True, signed: bool = False) -> str:
    """A table row's value with its CI (percent points when ``pct``), ``-`` for a missing row."""
    if r is None:
        return "-"
    k, f = (100, ".1f") if pct else (1, ".2f")
    sg = "+" if signed else ""
    if r.ci_low != r.ci_low:
        return f"{k * r.value:{sg}{f}}"
    return f"{k * r.value:{sg}{f}} [{k * r.ci_low:{sg}{f}}, {k * r.ci_high:{sg}{f}}]"


def probe_text(table, ds) -> str:
    """A probe sweep, per site: the activation probe's accuracy, the evidence baseline (design features
    alone), the gain of design + activations over it with its CI (the headline), the control task and
    selectivity with its CI, and the majority class (percent; AUROC in the table files)."""
    import numpy as np
    lines = [f"probe {ds.label}: n={len(ds)} rows, {len(np.unique(ds.groups))} scenarios"
             f"{' (filters ' + str(ds.filters) + ')' if ds.filters else ''}; {ds.dropped} unlabelled rows dropped",
             "  probe: activations alone; evidence: the item design alone; gain: design+activations minus "
             "evidence (95% CI);\n  control: Hewitt & Liang control task (a random label per input type); "
             "selectivity: probe - control",
             f"  95% CIs: probe {interval_name('percentile')}; gain and selectivity {interval_name('jackknife-t')}",
             PROBE_HEADER]
    return "\n".join(lines + _probe_site_lines(table))


PROBE_HEADER = (f"{'site':<22}{'probe [95% CI]':>21}{'evidence':>10}{'gain [95% CI]':>22}{'control':>9}"
                f"{'selectivity [95% CI]':>23}{'majority':>9}")
"""The column header of :func:`probe_text` and :func:`dial_probe_text`."""


def _probe_site_lines(table) -> list[str]:
    """One line per site of a probe sweep's table: probe, evidence, gain, control, selectivity, majority."""
    wide = {(r.site, r.metric): r for r in table.itertuples()}
    lines = []
    for site in dict.fromkeys(table["site"]):
        def g(m):
            return wide.get((site, m))
        ev, ctl, maj = g("evidence_accuracy"), g("control_accuracy"), g("majority_baseline")
        lines.append(f"{site:<22}{_est(g('accuracy')):>21}{'-' if ev is None else f'{100 * ev.value:.1f}':>10}"
                     f"{_est(g('gain'), signed=True):>22}{'-' if ctl is None else f'{100 * ctl.value:.1f}':>9}"
                     f"{_est(g('selectivity'), signed=True):>23}{'-' if maj is None else f'{100 * maj.value:.1f}':>9}")
    return lines


VERBALIZE_ORDER = ("linear_probe", "evidence", "decodability", "verbal_rules", "shuffled_control",
                   "majority_baseline", "chance")
"""The methods of a verbalization table, in the order :func:`verbalize_text` prints them."""


def verbalize_text(table) -> str:
    """A verbalization (:func:`probes.verbalize.verbalize_table`), per site: each method's accuracy with its CI
    (percent), the rules' coverage, and the differences with their jackknife-t CIs."""
    lines = ["activations described in words (Patchscope); accuracy of the label read off the descriptions",
             f"  95% CIs over scenarios: accuracies {interval_name('percentile')}; differences "
             f"{interval_name('jackknife-t')}; a rule naming no candidate scores 50"]
    for site, t in table.groupby("site", sort=False):
        first = t.iloc[0]
        lines.append(f"\n{site}: n={first.n} rows, {first.clusters} scenarios, {first.distinct_descriptions} "
                     f"distinct descriptions ({first.label}, {first.condition})")
        amb = t[t["rows"] == "AMB"] if "rows" in t.columns else t.iloc[:0]
        if len(amb):
            lines.append("  headline, AMB rows only (the design does not predict the side there):")
            for r in amb.itertuples():
                lines.append(f"  {r.method + ' ' + r.metric:<34}{_est(r):>22}  n={r.n}")
        t = t[t["rows"] != "AMB"] if "rows" in t.columns else t
        wide = {(r.method, r.metric): r for r in t.itertuples()}
        r = wide.get(("verbal_reader", "verbalized"))
        if r is not None:
            lines.append(f"  {'verbal_reader verbalized (all rows)':<34}{_est(r):>22}")
        for m in VERBALIZE_ORDER:
            r = wide.get((m, "accuracy"))
            if r is not None:
                lines.append(f"  {m:<34}{_est(r):>22}")
        for metric in ("rules_coverage", "accuracy_named"):
            r = wide.get(("verbal_rules", metric))
            if r is not None:
                lines.append(f"  {'verbal_rules ' + metric:<34}{_est(r):>22}")
        for r in t[t["metric"] == "accuracy_difference"].itertuples():
            lines.append(f"  {r.method:<34}{_est(r, signed=True):>22}")
    return "\n".join(lines)


def dial_probe_text(study) -> str:
    """A probe study of the fair organism with the bias dial (:func:`probes.organism.dial_probe_study`):
    per target and beta, the rows, scenarios and share labelled 1, then :func:`probe_text`'s line per site."""
    lines = [("probe study of the fair organism with the bias dial; probe: activations alone; evidence: the item "
              "design alone;\n  gain: design+activations minus evidence (95% CI); control: Hewitt & Liang control "
              "task; selectivity: probe - control"), PROBE_HEADER]
    for (target, beta), t in study.groupby(["target", "beta"], sort=False):
        first = t.iloc[0]
        lines.append(f"{target} at beta {beta:g}: n={int(first['n'])} rows, {int(first['clusters'])} scenarios, "
                     f"{100 * first['positive_rate']:.1f}% labelled 1, {100 * first['answered']:.1f}% of items answered"
                     + (f" ({first['note']})" if "note" in t.columns and isinstance(first["note"], str) else ""))
        lines += ["  " + line for line in _probe_site_lines(t[t["site"] != "all"])]
    return "\n".join(lines)


def eval_text(res: dict) -> str:
    """An organism's held-out evaluation against its planted policy."""
    lines = []
    if "heldout_scenarios" in res:  # absent from a probe-only result
        lines.append(f"held-out: {res['heldout_scenarios']} scenarios, {res['n_items']:,} items; agreement with the "
                     f"planted policy {res['agreement_with_policy']:.1%} (GT baseline items "
                     f"{res['agreement_gt_baseline']:.1%}); answered {res['answered']:.1%}")
    if "gt_accuracy" in res:
        e, t = res["gt_accuracy"]["measured"], res["gt_accuracy"]["planted"]
        lines.append(f"  GT accuracy without pressure, all degrees: {100 * e['value']:.1f} [{100 * e['ci_low']:.1f}, "
                     f"{100 * e['ci_high']:.1f}] (planted {100 * t:.1f}, n={e['n']})")
    for d, row in res.get("by_degree", {}).items():
        parts = []
        for m, v in row.items():
            e, t = v["measured"], v["planted"]
            val = "NaN" if e["value"] is None else f"{100 * e['value']:.1f}"
            ci = "" if e["ci_low"] is None else f" [{100 * e['ci_low']:.1f}, {100 * e['ci_high']:.1f}]"
            pl = "NaN" if t is None else f"{100 * t:.1f}"
            parts.append(f"{m} {val}{ci} (planted {pl}, n={e['n']})")
        lines.append(f"  D{d}: " + "; ".join(parts))
    if "probe" not in res:
        return "\n".join(lines)
    p = res["probe"]
    b = p["best"]
    lines.append(f"  probe favours_minority (degree {p['degree']}, n={p['n']}): best site {p['best_site']} accuracy "
                 f"{100 * b['accuracy']['value']:.1f} [{100 * b['accuracy']['ci_low']:.1f}, "
                 f"{100 * b['accuracy']['ci_high']:.1f}], AUROC {b['auroc']['value']:.2f}"
                 + (f", evidence baseline {100 * b['evidence_accuracy']['value']:.1f}, gain "
                    f"{100 * b['gain']['value']:+.1f} [{100 * b['gain']['ci_low']:+.1f}, {100 * b['gain']['ci_high']:+.1f}]"
                    if b.get("gain") else "")
                 + f", {'control task' if b.get('gain') else 'shuffled-label control (a record from before the control task)'} "
                   f"{100 * b['control_accuracy']['value']:.1f}, majority baseline "
                   f"{100 * b['majority_baseline']['value']:.1f}")
    return "\n".join(lines)


def bbq_text(table, model: str) -> str:
    """BBQ's pooled accuracy and bias scores by configuration (95% CIs over templates)."""
    t = table[(table["category"] == "all")]
    lines = [f"BBQ on {model}: all categories pooled (95% CIs: cluster bootstrap over templates)",
             f"{'configuration':<18}{'acc ambig':>12}{'acc disamb':>12}{'bias ambig [CI]':>24}{'bias disamb [CI]':>24}"]
    for conf, g in t.groupby("configuration", sort=False):
        v = g.set_index("metric")

        def ci(m):
            r = v.loc[m]
            return f"{r['value']:+.3f} [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]" if r["value"] == r["value"] else "NaN"
        lines.append(f"{conf:<18}{v.loc['acc_ambig', 'value']:>12.3f}{v.loc['acc_disambig', 'value']:>12.3f}"
                     f"{ci('bias_ambig'):>24}{ci('bias_disambig'):>24}")
    return "\n".join(lines)


def modes_text(table, model: str, n_items: int) -> str:
    """The answer-mode vs logprob-mode comparison, one line per metric."""
    lines = [f"{model}: {n_items:,} items decided in answer and logprob mode (95% CIs; difference paired)"]
    for metric, g in table.groupby("metric", sort=False):
        parts = []
        for r in g.itertuples():
            v = "NaN" if r.value is None or r.value != r.value else f"{100 * r.value:+.1f}"
            ci = "" if r.ci_low is None or r.ci_low != r.ci_low else f" [{100 * r.ci_low:+.1f}, {100 * r.ci_high:+.1f}]"
            parts.append(f"{r.stat} {v}{ci}")
        lines.append(f"  {metric:<9} " + "; ".join(parts))
    lines.append(f"  TieLean on opposite sides of 0.5 (CIs excluding it): {'yes' if table.attrs['flips'] else 'no'}")
    return "\n".join(lines)


def runs_text(rows: list[tuple]) -> str:
    """The `runs list` table: (run, status, model, items, time, git) per row."""
    lines = [f"{'run':<44}{'status':<9}{'model':<28}{'items':>8}{'time':>8}  git"]
    for r in rows:
        lines.append(f"{r[0]:<44}{r[1]:<9}{str(r[2])[:27]:<28}{str(r[3]):>8}{r[4]:>8}  {r[5]}")
    return "\n".join(lines)


def ablation_text(table) -> str:
    """A name ablation: original, transferred and retrained probe accuracy and the drops, per site, then the
    evidence baselines and the prompt ceilings (0.5 on the ablated prompts: the drop is fixed by construction)."""
    lines = []
    t = None
    for site in dict.fromkeys(table["site"]):
        t = table[table["site"] == site].set_index("metric")
        parts = [f"{m.replace('_accuracy', '')} {100 * t.loc[m, 'value']:.1f} "
                 f"[{100 * t.loc[m, 'ci_low']:.1f}, {100 * t.loc[m, 'ci_high']:.1f}]"
                 for m in ("original_accuracy", "transfer_accuracy", "retrained_accuracy", "drop_transfer",
                           "drop_retrained") if m in t.index]
        lines.append(f"{site:<22}" + "; ".join(parts) + f" (n={int(t.loc['original_accuracy', 'n'])})")
    if t is not None and "ceiling_ablated" in t.index:
        lines.append(f"evidence baseline (design only): original {100 * t.loc['evidence_original', 'value']:.1f}, "
                     f"ablated {100 * t.loc['evidence_ablated', 'value']:.1f}; best any probe can do on the prompts: "
                     f"original {100 * t.loc['ceiling_original', 'value']:.1f}, "
                     f"ablated {100 * t.loc['ceiling_ablated', 'value']:.1f}")
        if t.loc["ceiling_ablated", "value"] <= 0.5 + 1e-9:
            lines.append("  the ablated prompts of the two identity arrangements are identical with opposite labels: "
                         "the retrained drop is fixed by construction (use --minority-slot A)")
    return "\n".join(lines)


def attribution_text(table) -> str:
    """Direct logit attribution: the total logit difference and the largest per-layer contributions."""
    t = table[(table["degree"] == "all") & (table["pressure"] == "all") & (table["chosen"] == "all")]
    total = t[t["component"] == "logit_diff"]
    lines = []
    if len(total):
        r = total.iloc[0]
        lines.append(f"logit difference (favoured-minority label minus the other): {r['value']:+.3f} "
                     f"[{r['ci_low']:+.3f}, {r['ci_high']:+.3f}] (n={int(r['n'])})")
    top = t[t["component"].isin(["attn_out", "mlp_out"])].assign(mag=lambda d: d["value"].abs())
    lines.append("largest direct contributions:")
    for r in top.sort_values("mag", ascending=False).head(6).itertuples():
        lines.append(f"  {r.site:<22}{r.value:+.3f} [{r.ci_low:+.3f}, {r.ci_high:+.3f}]")
    return "\n".join(lines)


def truth_text(cov, beta: float, curve: dict | None) -> str:
    """The demo's known-answer table (:func:`organism.demo.coverage`): per degree and metric the measured
    value and 95% CI, the planted truth (exact from the fair policy, or the calibration curve's value with
    its own CI) and whether the measured CI covers it; ``beta``: the dial's setting."""
    import pandas as pd

    def val(v, m: str) -> str:
        return f"{100 * v:{'+' if _signed(m) else ''}.1f}"

    if beta == 0:
        lines = [("Against the planted truth: the fair organism, dial off (beta 0): every metric's truth is the fair "
                  "policy's exact value on these items.")]
    else:
        lines = [(f"Against the planted truth: the fair organism with the bias dial at beta {beta:g}. Degree 3: the "
                  f"calibration curve at beta {beta:g} with its own 95% CI (measured on the fair organism's first "
                  f"{curve['n_scenarios']} held-out scenarios, not these; interpolated between calibrated betas)."),
                 ("Degree 0: nothing marks identity, every asymmetry is exactly the fair policy's. Degrees 1-2: the "
                  "dial acts but is not calibrated, no truth.")]
    lines += [f"  {'metric':<28} {'deg':<4} {'measured [95% CI]':<24} {'truth':<36} CI covers truth"]
    for r in cov.itertuples():
        unit = "pp" if _signed(r.metric) else "%"
        ci = "[no CI]" if pd.isna(r.ci_low) else f"[{val(r.ci_low, r.metric)}, {val(r.ci_high, r.metric)}]"
        t = f"{val(r.truth, r.metric)} {unit} " + (
            f"[{val(r.truth_ci_low, r.metric)}, {val(r.truth_ci_high, r.metric)}] calibration"
            if r.source == "calibration" and not pd.isna(r.truth_ci_low) else r.source)
        covered = {True: "yes", False: "NOT covered", None: "no CI"}[r.covered]
        lines.append(f"  {_label(r.metric):<28} D{r.degree:<3} {val(r.value, r.metric) + ' ' + unit + ' ' + ci:<24} "
                     f"{t:<36} {covered}")
    k = sum(c is True for c in cov["covered"])  # None (no CI) is neither
    lines.append(f"  {k} of {len(cov)} truths covered by the measured 95% CI")
    return "\n".join(lines)
