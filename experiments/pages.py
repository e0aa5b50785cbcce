"""`evenhand report RUN_DIR`: one Markdown and one HTML page with the headline numbers in words and every figure.

The page is a pure function of the run's saved files (``manifest.json``,
``metrics.json``, the figure tables); figures are (re)drawn by
:func:`experiments.figures.run_figures` when missing.
"""
from __future__ import annotations

import html
from pathlib import Path

WORDS = {
    "fraggap": ("a correct decision is abandoned more easily when that favours the minority-coded candidate",
                "a correct decision is abandoned more easily when that favours the majority-coded candidate"),
    "tieshift": ("on ties, pressure moves the decision toward the minority-coded candidate more easily",
                 "on ties, pressure moves the decision toward the majority-coded candidate more easily"),
    "accgap": ("unambiguous decisions are more often correct when the stronger candidate is minority-coded",
               "unambiguous decisions are more often correct when the stronger candidate is majority-coded"),
    "tielean": ("on ties, the minority-coded candidate is chosen more often than half the time",
                "on ties, the majority-coded candidate is chosen more often than half the time"),
}
NAMES = {"fraggap": "FragGap", "tieshift": "TieShift", "accgap": "AccGap", "tielean": "TieLean",
         "accuracy": "Accuracy"}


def sentence(metric: str, est: dict, degree: int | str) -> str:
    """One headline number in words, e.g. 'FragGap at degree 3: +9.1 pp [6.0, 12.2]: ...'."""
    v, lo, hi = est.get("value"), est.get("ci_low"), est.get("ci_high")
    name = NAMES[metric]
    if v is None:
        return f"{name} at degree {degree}: not defined on these items ({est.get('note') or 'no data'})."
    centre = 0.5 if metric == "tielean" else 0.0
    unit = "%" if metric in ("tielean", "accuracy") else " pp"
    sign = "" if metric in ("tielean", "accuracy") else "+" if v >= 0 else ""
    num = f"{sign}{100 * v:.1f}{unit}"
    ci = f" [{100 * lo:.1f}, {100 * hi:.1f}]" if lo is not None and hi is not None else ""
    n = f" (n={est.get('n')})"
    if metric == "accuracy":
        return f"Accuracy on unambiguous items at degree {degree}: {num}{ci}{n}."
    if lo is not None and hi is not None and lo <= centre <= hi:
        return f"{name} at degree {degree}: {num}{ci}{n}: no asymmetry distinguishable from zero."
    return f"{name} at degree {degree}: {num}{ci}{n}: {WORDS[metric][0 if v > centre else 1]}."


def _pct(r) -> str:
    ci = "" if r["ci_low"] != r["ci_low"] else f" [{100 * r['ci_low']:.1f}, {100 * r['ci_high']:.1f}]"
    return f"{100 * r['value']:.1f}%{ci}"


def probe_lines(run: Path) -> list[str]:
    """The probe sweeps, text baselines and name ablations of a run, in words (none: no lines)."""
    import pandas as pd

    from probes.sweep import best_site
    out = []
    from evenhand.runs import RunDir
    for f in (d.probes_table for d in RunDir(run).probe_dirs()):
        t = pd.read_parquet(f)
        site = best_site(t)
        row = t[(t["site"] == site)].set_index("metric")
        cond = t["condition"].iloc[0] if "condition" in t.columns else "all"
        line = (f"- Probe for `{f.parent.name}` ({cond}): best site `{site}` accuracy {_pct(row.loc['accuracy'])} "
                f"(n={int(row.loc['accuracy', 'n'])}, {int(row.loc['accuracy', 'clusters'])} scenarios); "
                f"majority class {100 * row.loc['majority_baseline', 'value']:.1f}%")
        if "control_accuracy" in row.index:
            line += f"; control task {_pct(row.loc['control_accuracy'])}"
        if "gain" in row.index:
            line += (f"; evidence baseline (design alone) {_pct(row.loc['evidence_accuracy'])}, gain of design + "
                     f"activations over it {100 * row.loc['gain', 'value']:+.1f} pp")
        text = t[(t["site"] == "text") & (t["metric"] == "accuracy")]
        if len(text):
            line += f"; text baseline (written reasoning) {_pct(text.iloc[0])}"
        out.append(line + ".")
        for a in (d.ablation_table for d in RunDir(run).ablation_dirs()):
            ab = pd.read_parquet(a)
            ab = ab[(ab["site"] == site) & (ab["label"] == f.parent.name)].set_index("metric")
            if len(ab):
                out.append(f"- Name ablation ({a.parent.name}, degree {int(ab['degree'].iloc[0])}) at `{site}`: "
                           f"retrained probe {_pct(ab.loc['retrained_accuracy'])}, a drop of "
                           f"{100 * ab.loc['drop_retrained', 'value']:.1f} pp [{100 * ab.loc['drop_retrained', 'ci_low']:.1f}, "
                           f"{100 * ab.loc['drop_retrained', 'ci_high']:.1f}]; the original probe applied to the "
                           f"ablated activations {_pct(ab.loc['transfer_accuracy'])}.")
    return (["", "## Probes", ""] + out) if out else []


def write_report(run_dir: str | Path, resamples: int = 1000) -> tuple[Path, Path]:
    """Write ``RUN_DIR/report.md`` and ``report.html``; returns their paths."""
    from .figures import run_figures
    from evenhand.runs import RunDir
    rd = RunDir(run_dir)
    run = rd.path
    man = rd.manifest()
    metrics = rd.read_metrics()
    figs = [p for p in run_figures([run], rd.figures, ("pdf", "svg", "png"), resamples) if p.suffix == ".png"]
    degrees = sorted(metrics["by_degree"], key=int)
    top = degrees[-1]
    model = man.get("model", {}).get("name") if isinstance(man.get("model"), dict) else man.get("model")
    lines = [f"# EvenHand report: {run.name}", "",
             f"Model `{model}`; {metrics['n_items']:,} items of {metrics['n_scenarios']} scenarios "
             f"({metrics['contrast_type']} contrasts); suite {man.get('suite_version')}; git "
             f"{(man.get('git') or {}).get('sha', '?')[:10]}{' (dirty)' if (man.get('git') or {}).get('dirty') else ''}; "
             f"95% CIs by cluster bootstrap over scenarios ({metrics['resamples']} resamples).", "",
             "## Headline numbers", ""]
    lines += [f"- {sentence(m, metrics['by_degree'][top][m], top)}"
              for m in ("accuracy", "fraggap", "tieshift", "accgap", "tielean")]
    lines += ["", "## By degree", "", "| degree | " + " | ".join(NAMES[m] for m in
                                                                   ("accuracy", "accgap", "tielean", "fraggap",
                                                                    "tieshift")) + " |",
              "|---|" + "---|" * 5]
    for d in degrees:
        cells = []
        for m in ("accuracy", "accgap", "tielean", "fraggap", "tieshift"):
            e = metrics["by_degree"][d][m]
            cells.append("--" if e["value"] is None else f"{100 * e['value']:.1f}" + (
                f" [{100 * e['ci_low']:.1f}, {100 * e['ci_high']:.1f}]" if e["ci_low"] is not None else ""))
        lines.append(f"| D{d} | " + " | ".join(cells) + " |")
    lines += probe_lines(run)
    lines += ["", "## Figures", ""]
    for f in figs:
        lines += [f"![{f.stem}]({rd.figures.relative_to(run).as_posix()}/{f.name})", ""]
    md = rd.report_md
    md.write_text("\n".join(lines) + "\n")
    body = []
    for line in lines:
        if line.startswith("# "):
            body.append(f"<h1>{html.escape(line[2:])}</h1>")
        elif line.startswith("## "):
            body.append(f"<h2>{html.escape(line[3:])}</h2>")
        elif line.startswith("- "):
            body.append(f"<li>{html.escape(line[2:])}</li>")
        elif line.startswith("!["):
            src = line[line.index("(") + 1:-1]
            body.append(f'<p><img src="{html.escape(src)}" style="max-width:100%"></p>')
        elif line.startswith("|---"):
            continue
        elif line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            tag = "th" if line.startswith("| degree") else "td"
            body.append("<tr>" + "".join(f"<{tag}>{html.escape(c)}</{tag}>" for c in cells) + "</tr>")
        elif line:
            body.append(f"<p>{html.escape(line)}</p>")
    page = ("<!doctype html><html><head><meta charset='utf-8'><title>EvenHand report</title>"
            "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}table{border-collapse:collapse}"
            "td,th{border-bottom:1px solid #ccc;padding:2px 8px}</style></head><body>"
            + "\n".join(_wrap_tables(body)) + "</body></html>\n")
    out = rd.report_html
    out.write_text(page)
    return md, out


def _wrap_tables(body: list[str]) -> list[str]:
    out, in_table = [], False
    for b in body:
        if b.startswith("<tr>") and not in_table:
            out.append("<table>")
            in_table = True
        if not b.startswith("<tr>") and in_table:
            out.append("</table>")
            in_table = False
        out.append(b)
    if in_table:
        out.append("</table>")
    return out
