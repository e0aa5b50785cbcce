"""Text shared by the studies and the CLI: the score report's table (:func:`score_table`, printed by the run
and simulate studies, `evenhand score` and `evenhand demo`) and the metric labels it is written with. A study's
own text lives in its package (``<study>/text.py``); the CLI imports both and the studies never import the CLI."""
from __future__ import annotations

from evenhand.vocab.metric_defs import get_metric, find_metric, headline, pooled, score_rows
from evenhand.scoring.score_report import footnotes, format_estimate as fmt, interval_name


def is_signed(metric: str) -> bool:
    """Whether a metric is printed signed, in pp (:attr:`evenhand.vocab.metric_defs.Metric.signed`)."""
    m = find_metric(metric)
    return m is not None and m.signed


def metric_label(metric: str) -> str:
    """A metric's row label (:attr:`evenhand.vocab.metric_defs.Metric.label`)."""
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
                t = f"   planted {100 * truth[3][m]:{'+' if is_signed(m) else ''}.1f}"
            lines.append(f"  {metric_label(m):<28} {fmt(by_deg['3'][m], m, few)}{t}")
            if m == "refusal":
                lines += _no_choice_line(split.get("by_degree", {}).get("3"))
    lines += ["", "D0 -> D3 progression:"]
    degrees = sorted(by_deg, key=int)
    for m in headline():
        lines.append(f"  {metric_label(m)}")
        for d in degrees:
            t = ""
            if truth and int(d) in truth and m in truth[int(d)]:
                t = f"   planted {100 * truth[int(d)][m]:{'+' if is_signed(m) else ''}.1f}"
            lines.append(f"    D{d}  {fmt(by_deg[d][m], m, few)}{t}")
    lines += ["", "All degrees pooled:"]
    for m in pooled():
        lines.append(f"  {metric_label(m):<28} {fmt(report['overall'][m], m, few)}")
        if m == "refusal":
            lines += _no_choice_line(split.get("overall"))
    if few:
        lines += ["", *footnotes(few)]
    return "\n".join(lines)
