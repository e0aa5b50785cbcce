"""Human-readable tables of score reports (percentage points, CIs and n everywhere)."""
from __future__ import annotations

SIGNED = {"accgap", "fraggap", "tieshift", "position_gap"}
LABELS = {"accuracy": "Accuracy (GT, no pressure)", "accgap": "AccGap", "tielean": "TieLean",
          "fraggap": "FragGap", "tieshift": "TieShift", "refusal": "Refusal",
          "flip_pro_minority": "  flip | pro-minority", "flip_pro_majority": "  flip | pro-majority",
          "shift_to_minority": "  shift to minority", "shift_to_majority": "  shift to majority",
          "position_bias": "P(choose A) on AMB", "position_gap": "  gap between arrangements"}
ROWS = ("accuracy", "accgap", "tielean", "fraggap", "flip_pro_minority", "flip_pro_majority", "tieshift",
        "shift_to_minority", "shift_to_majority", "refusal", "position_bias")


def fmt(est: dict, metric: str) -> str:
    """'+12.3 pp [4.1, 20.0] n=240' (TieLean and rates as %, gaps as signed pp)."""
    if est["value"] is None:
        return f"NaN ({est['note'] or 'insufficient'})"
    sign = "+" if metric in SIGNED else ""
    unit = "pp" if metric in SIGNED else "%"
    v, lo, hi = (None if x is None else 100 * x for x in (est["value"], est["ci_low"], est["ci_high"]))
    ci = f"[{lo:{sign}.1f}, {hi:{sign}.1f}]" if lo is not None else "[no CI]"
    return f"{v:{sign}.1f} {unit} {ci} n={est['n']}"


def score_table(report: dict, truth: dict | None = None) -> str:
    """The D3 headline and the D0->D3 progression; ``truth`` maps degree -> planted values."""
    lines = [f"Contrast type: {report['contrast_type']}  ({report['n_items']} items, {report['n_scenarios']} "
             f"scenarios; 95% cluster-bootstrap CIs over scenarios, {report['resamples']} resamples)"]
    if report.get("note"):
        lines.append(f"Note: {report['note']}")
    by_deg = report["by_degree"]
    if "3" in by_deg:
        lines += ["", "Headline (degree 3, explicit labels):"]
        for m in ROWS:
            t = ""
            if truth and 3 in truth and m in truth[3]:
                t = f"   planted {100 * truth[3][m]:{'+' if m in SIGNED else ''}.1f}"
            lines.append(f"  {LABELS[m]:<28} {fmt(by_deg['3'][m], m)}{t}")
    lines += ["", "D0 -> D3 progression:"]
    degrees = sorted(by_deg, key=int)
    for m in ("accuracy", "accgap", "tielean", "fraggap", "tieshift", "refusal"):
        lines.append(f"  {LABELS[m]}")
        for d in degrees:
            t = ""
            if truth and int(d) in truth and m in truth[int(d)]:
                t = f"   planted {100 * truth[int(d)][m]:{'+' if m in SIGNED else ''}.1f}"
            lines.append(f"    D{d}  {fmt(by_deg[d][m], m)}{t}")
    lines += ["", "All degrees pooled:"]
    for m in ("accuracy", "refusal", "position_bias", "position_gap"):
        lines.append(f"  {LABELS[m]:<28} {fmt(report['overall'][m], m)}")
    return "\n".join(lines)


def compare_table(result: dict) -> str:
    lines = [f"Paired comparison on {result['n_items']} shared items, {result['n_scenarios']} scenarios "
             f"({result['contrast_type']}); other - base, 95% paired cluster-bootstrap CIs"]
    for m in ("accuracy", "accgap", "tielean", "fraggap", "tieshift", "refusal"):
        lines.append(f"  {LABELS[m]:<28} {fmt(result['difference'][m], 'accgap')}")
    mc = result["mcnemar"]
    lines.append(f"  McNemar (GT baseline, n={mc['n']}): base-only correct {mc['base_only_correct']}, other-only "
                 f"correct {mc['other_only_correct']}, exact p = {mc['p_value']:.4g}")
    lines.append("Intervention score:")
    for m, est in result["score"]["asymmetry_reduction"].items():
        lines.append(f"  asymmetry reduction, {m:<10} {fmt(est, 'accgap')}")
    lines.append(f"  accuracy loss                  {fmt(result['score']['accuracy_loss'], 'accgap')}")
    return "\n".join(lines)
