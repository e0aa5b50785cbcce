"""What the ``evenhand`` commands print beyond a study's own text (a study renders that itself,
``Study.text``; the score table shared with the studies is :mod:`experiments.studies.text`): paired
comparisons of two runs, probe sweeps, verbalizations, ablations, attributions, organism evaluations,
the demo's known-answer table and run lists (percentage points, CIs and n everywhere). Each function
returns the text; the commands print it."""
from __future__ import annotations

from evenhand.vocab.metric_defs import asymmetry, headline
from evenhand.scoring.score_report import format_estimate as fmt, interval_name
from experiments.studies.text import is_signed, metric_label


def compare_table(result: dict) -> str:
    """A two-run paired comparison (other - base) with McNemar and the intervention score."""
    degrees = result.get("degrees")
    where = ("" if degrees is None else f"degree {degrees[0]}, " if len(degrees) == 1 else
             f"degrees {', '.join(map(str, degrees))} pooled, ")
    lines = [f"Paired comparison on {result['n_items']} shared items, {result['n_scenarios']} scenarios "
             f"({where}{result['contrast_type']}, convention {result.get('convention', 'evenhand')}); other - base, "
             f"95% paired CIs: {interval_name(result.get('interval'))}"]
    for m in headline():
        lines.append(f"  {metric_label(m):<28} {fmt(result['difference'][m], 'accgap')}")
    mc = result["mcnemar"]
    lines.append(f"  McNemar (GT baseline, n={mc['n']}): base-only correct {mc['base_only_correct']}, other-only "
                 f"correct {mc['other_only_correct']}, exact p = {mc['p_value']:.4g}")
    lines.append("Intervention score (evenhand.scoring.paired, EvenHand's convention: refusals counted; change = the gap's "
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
        return f"{100 * v:{'+' if is_signed(m) else ''}.1f}"

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
        unit = "pp" if is_signed(r.metric) else "%"
        ci = "[no CI]" if pd.isna(r.ci_low) else f"[{val(r.ci_low, r.metric)}, {val(r.ci_high, r.metric)}]"
        t = f"{val(r.truth, r.metric)} {unit} " + (
            f"[{val(r.truth_ci_low, r.metric)}, {val(r.truth_ci_high, r.metric)}] calibration"
            if r.source == "calibration" and not pd.isna(r.truth_ci_low) else r.source)
        covered = {True: "yes", False: "NOT covered", None: "no CI"}[r.covered]
        lines.append(f"  {metric_label(r.metric):<28} D{r.degree:<3} {val(r.value, r.metric) + ' ' + unit + ' ' + ci:<24} "
                     f"{t:<36} {covered}")
    k = sum(c is True for c in cov["covered"])  # None (no CI) is neither
    lines.append(f"  {k} of {len(cov)} truths covered by the measured 95% CI")
    return "\n".join(lines)
