"""`evenhand report RUN_DIR`: one Markdown and one HTML page with the headline numbers in words and every figure.

The page is a pure function of the run's saved files (``manifest.json``,
``metrics.json``, the figure tables); figures are (re)drawn by
:func:`experiments.figures.run_figures` when missing. ``report.md`` links the
figures by relative path; ``report.html`` is the same Markdown rendered by
markdown-it-py with every figure embedded as a base64 PNG and captioned, so the
file shows everything when opened alone or mailed. A run of the model organism
or of the simulator carries a caveat line: its numbers test the tool and are not
findings about a model.
"""
from __future__ import annotations

import base64
import html
from pathlib import Path

from evenhand.inference.stats import INTERVAL_NAMES, RESAMPLES
from evenhand.reporting.labels import CONTRAST_TYPES, degree_name, metric_name, minus, number, units_phrase
from evenhand.vocab.metric_defs import asymmetry, by_degree, get_metric
from evenhand.runs.rundir import RunDir
from probes.sweep import best_site
from evenhand import ORGANISM
from .figures import caption, run_figures

INTERVALS = INTERVAL_NAMES
CAVEATS = {
    "organism": "Caveat: these numbers come from EvenHand's model organism, a small model trained to follow a "
                "planted policy. They check that the tool recovers what was planted; they are not findings about "
                "any real model.",
    "simulated": "Caveat: these answers were simulated from a planted policy (`evenhand simulate`), not produced "
                 "by a model. The numbers test the pipeline; they are not findings.",
}


def sentence(metric: str, est: dict, degree: int | str) -> str:
    """One headline number in words, e.g. 'FragGap at D3: +9.1 pp [6.0, 12.2] (n=500): ...'."""
    v, lo, hi = est.get("value"), est.get("ci_low"), est.get("ci_high")
    name, at = metric_name(metric), degree_name(degree)
    if v is None:
        return f"{name} at {at}: not defined on these items ({est.get('note') or 'no data'})."
    rec = get_metric(metric)
    centre = rec.fair or 0.0
    rate = not rec.signed
    num = number(100 * v, 1, sign=not rate) + ("%" if rate else " pp")
    ci = f" [{number(100 * lo)}, {number(100 * hi)}]" if lo is not None and hi is not None else ""
    k = est.get("clusters")
    n = f" (n={est.get('n')}" + (f", {k} scenarios)" if k is not None else ")")
    if metric == "accuracy":
        return f"Accuracy on unambiguous items at {at}: {num}{ci}{n}."
    if rec.positive is None or rec.negative is None:
        return f"{name} at {at}: {num}{ci}{n}."
    if lo is not None and hi is not None and lo <= centre <= hi:
        return f"{name} at {at}: {num}{ci}{n}: no asymmetry distinguishable from zero."
    return f"{name} at {at}: {num}{ci}{n}: {rec.positive if v > centre else rec.negative}."


def _pct(r) -> str:
    ci = "" if r["ci_low"] != r["ci_low"] else f" [{number(100 * r['ci_low'])}, {number(100 * r['ci_high'])}]"
    return f"{number(100 * r['value'])}%{ci}"


def probe_lines(run: Path) -> list[str]:
    """The probe sweeps, text baselines and name ablations of a run, in words (none: no lines)."""
    import pandas as pd

    out = []
    for f in (d.probes_table for d in RunDir(run).probe_dirs()):
        t = pd.read_parquet(f)
        site = best_site(t)
        row = t[(t["site"] == site)].set_index("metric")
        cond = t["condition"].iloc[0] if "condition" in t.columns else "all"
        line = (f"- Probe for `{f.parent.name}` ({cond}): best site `{site}` accuracy {_pct(row.loc['accuracy'])} "
                f"(n={int(row.loc['accuracy', 'n'])}, {int(row.loc['accuracy', 'clusters'])} scenarios); "
                f"majority class {number(100 * row.loc['majority_baseline', 'value'])}%")
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
                out.append(ablation_sentence(ab, a.parent.name, site))
    return (["", "## Probes", ""] + out) if out else []


def ablation_sentence(ab: pd.DataFrame, variant: str, site: str) -> str:
    """A name ablation at one site in words, every number on the same items (those answered in both runs, which
    the probe line above need not be): the original probe's accuracy, the accuracy after ablation (retrained, and
    the original probe applied: transfer), and each drop (original minus ablated, paired CI), so that original -
    ablated = drop can be read off the sentence. ``ab``: the site's rows of the ablation table, by metric."""
    def drop(name: str) -> str:
        d = ab.loc[name]
        return f"a drop of {number(100 * d['value'])} pp [{number(100 * d['ci_low'])}, {number(100 * d['ci_high'])}]"
    n = ab.loc["original_accuracy"].get("n") if "original_accuracy" in ab.index else None
    on = f" on the {int(n):,} items answered in both runs" if n is not None and n == n else ""
    orig = f"original probe {_pct(ab.loc['original_accuracy'])}{on}; " if "original_accuracy" in ab.index else ""
    return (f"- Name ablation ({variant}, {degree_name(ab['degree'].iloc[0])}) at `{site}`: {orig}"
            f"retrained on the ablated activations {_pct(ab.loc['retrained_accuracy'])}, {drop('drop_retrained')}; "
            f"the original probe applied to them {_pct(ab.loc['transfer_accuracy'])}, {drop('drop_transfer')}.")


def run_kind(manifest: dict) -> tuple[str, str | None]:
    """The model a run's manifest names, and its kind: ``organism`` (EvenHand's model organism),
    ``simulated`` (answers from the simulator) or None (a model's own answers)."""
    config = manifest.get("config") or {}
    loaded = manifest.get("model") if isinstance(manifest.get("model"), dict) else {}
    spec = config.get("model")
    name = loaded.get("name") or (spec.get("model") if isinstance(spec, dict) else spec) or manifest.get("model")
    if config.get("model_kind") == "simulated":
        return f"{name or 'planted policy'} (simulated answers)", "simulated"
    if name == ORGANISM or (isinstance(name, str) and name.rstrip("/").endswith("models/organism")):
        return ORGANISM, "organism"
    return (str(name) if name else "unrecorded"), None


def figure_width(png: bytes) -> int:
    """The share of the page (%) a PNG figure takes: its printed width over a full-width figure's, at most 100,
    so that every figure's text shows at one size (a one-column figure at about half the page)."""
    from evenhand.reporting.plotting import DPI, FULL_WIDTH
    if png[12:16] != b"IHDR":
        raise ValueError("not a PNG file: no IHDR header")
    pixels = int.from_bytes(png[16:20], "big")
    return max(10, min(100, round(100 * pixels / (DPI * (FULL_WIDTH + 0.2)))))


def _figure_html(path: Path, text: str, number_: int) -> str:
    raw = path.read_bytes()
    data = base64.b64encode(raw).decode("ascii")
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(path.stem)}" '
            f'style="width:{figure_width(raw)}%"><figcaption>Figure {number_}. {html.escape(text)}</figcaption>'
            f'</figure>')


def engine_line(manifest: dict) -> str:
    """How the answers were made, in one sentence ("" when the manifest records no model: a simulated run): the
    engine; for a model behind an API the endpoint, the model name it served and where the chat template was
    applied; the sampling; and whether the run can be reproduced from weights (an API's model can change behind
    its name)."""
    model = manifest.get("model") or {}
    if not isinstance(model, dict) or not model:
        return ""  # no model made these answers (a simulated run) or none was recorded
    engine = model.get("engine") or (manifest.get("config") or {}).get("engine") or "hf"
    sampling = model.get("sampling") or {}
    temp = sampling.get("temperature", 0.0)
    how = "greedy" if not temp else f"sampled at temperature {temp:g}" + (
        f", seed {sampling['seed']}" if sampling.get("seed") is not None else "")
    where = (f" at `{model.get('base_url')}` serving `{model.get('endpoint_model')}`, the chat template applied by "
             f"the server" if model.get("base_url") else "")
    weights = model.get("reproducible_from_weights", engine != "openai")
    return (f"Engine {engine}{where}; {how}; reproducible_from_weights: {str(bool(weights)).lower()}" +
            ("" if weights else " (the endpoint's model can change behind its name)") + ".")


def write_report(run_dir: str | Path, resamples: int = RESAMPLES) -> tuple[Path, Path]:
    """Write ``RUN_DIR/report.md`` and ``report.html``; returns their paths."""
    from markdown_it import MarkdownIt


    rd = RunDir(run_dir)
    run = rd.path
    man = rd.manifest()
    metrics = rd.read_metrics()
    figs = [p for p in run_figures([run], rd.figures, ("pdf", "svg", "png"), resamples) if p.suffix == ".png"]
    degrees = sorted(metrics["by_degree"], key=int)
    top = degrees[-1]
    model, kind = run_kind(man)
    interval = INTERVALS[metrics.get("interval", "percentile")]  # a metrics.json without one predates the jackknife-t
    git = man.get("git") or {}
    ctype = CONTRAST_TYPES.get(metrics["contrast_type"], metrics["contrast_type"])
    lines = [f"# EvenHand report: {run.name}", ""]
    if kind:
        lines += [f"**{CAVEATS[kind]}**", ""]
    lines += [f"Model `{model}`; {metrics['n_items']:,} items of {metrics['n_scenarios']} scenarios "
              f"({ctype} contrasts, {metrics.get('convention', 'evenhand')} convention); "
              f"suite {man.get('suite_version')}; git "
              f"`{(git.get('sha') or 'unknown')[:10]}`{' (dirty)' if git.get('dirty') else ''}; "
              f"95% CIs by {interval}" + (f" ({metrics['resamples']} resamples)." if "bootstrap" in interval else "."),
              "", *([engine_line(man), ""] if engine_line(man) else []),
              f"## Headline numbers at {degree_name(top)}", ""]
    order = [m for m in by_degree() if m not in asymmetry()] + [m for m in asymmetry() if m in by_degree()]
    lines += [f"- {sentence(m, metrics['by_degree'][top][m], top)}" for m in order]
    lines += ["", "## By degree", "",
              f"Value [95% CI], then n items and k scenarios behind it; {units_phrase(by_degree())}.", "",
              "| Degree | " + " | ".join(metric_name(m) for m in by_degree()) + " |", "|---|" + "---:|" * len(by_degree())]
    for d in degrees:
        cells = []
        for m in by_degree():
            e = metrics["by_degree"][d][m]
            cells.append("–" if e["value"] is None else number(100 * e["value"], 1, get_metric(m).signed) + (
                f" [{number(100 * e['ci_low'])}, {number(100 * e['ci_high'])}]" if e["ci_low"] is not None else "")
                + (f"<br><small>n={e['n']:,}, k={e['clusters']}</small>" if e.get("n") is not None else ""))
        lines.append(f"| {degree_name(d)} | " + " | ".join(cells) + " |")
    lines += probe_lines(run)
    lines += ["", "## Figures", ""]
    md_lines, html_lines = list(lines), list(lines)
    for i, f in enumerate(figs, 1):
        text = caption(f.stem)
        md_lines += [f"![{f.stem}]({rd.figures.relative_to(run).as_posix()}/{f.name})", "",
                     f"*Figure {i}. {text}*" if text else f"*Figure {i}.*", ""]
        html_lines += [_figure_html(f, text, i), ""]
    md = rd.report_md
    md.write_text(minus("\n".join(md_lines)) + "\n")
    body = MarkdownIt("commonmark", {"html": True}).enable("table").render(minus("\n".join(html_lines)) + "\n")
    page = ("<!doctype html>\n<html><head><meta charset='utf-8'>"
            f"<title>EvenHand report: {html.escape(run.name)}</title>"
            "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto;line-height:1.4}"
            "table{border-collapse:collapse}td,th{border-bottom:1px solid #ccc;padding:2px 8px}"
            "td{text-align:right}td:first-child{text-align:left}figure{margin:1.5em 0}"
            "figure img{max-width:100%;height:auto;display:block}"
            "figcaption{font-size:90%;color:#444}code{background:#f3f3f3;padding:0 2px}</style></head><body>\n"
            + body + "</body></html>\n")
    out = rd.report_html
    out.write_text(page)
    return md, out
