"""Several runs side by side (``evenhand table``, ``eh.table``): each run's degree-3 headline metrics (the
registry's headline, :func:`evenhand.vocab.metric_defs.headline`) with 95% CIs, n items and k scenarios, as text,
CSV, LaTeX and a forest plot (:func:`evenhand.reporting.figures.forest_figure`, a pure function of the table).

Runs are compared only on the same items: runs on different suite versions (the rows', else the manifest's)
or on different item sets (another subset, seed or limit) are refused, naming each run's version or subset."""
from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..files.atomic import atomic_open
from ..rows.conventions import DEFAULT_CONVENTION
from .figures import forest_figure
from .labels import CONTRAST_TYPES, fair_phrase, metric_name, metric_unit, tex_number, units_phrase
from ..vocab.metric_defs import get_metric, headline
from ..scoring.metrics import score, select_contrast_type
from ..runs.rundir import RunDir, run_with_responses, write_table_atomic
from ..rows.schema import ensure_valid
from ..scoring.score_report import HEADLINE_DEGREE, PrintsItsText, format_estimate, interval_name
from .tables import tex_escape

TABLE_COLUMNS = ("label", "model", "run", "metric", "degree", "value", "ci_low", "ci_high", "n", "k", "note",
                 "interval", "contrast_type", "convention", "suite_version", "subset", "items", "scenarios")
"""The columns of :meth:`RunsTable.to_frame` (one row per run and metric; fractions, gaps as differences)."""


@dataclass
class _Run:
    path: Path
    label: str | None
    rows: pd.DataFrame
    model: str
    suite_version: str
    subset: str


def split_label(text: str | os.PathLike) -> tuple[str, str | None]:
    """``RUN=label`` -> (RUN, label): split at the first ``=`` after which the path exists, else at the first
    (a label may hold ``=``: ``runs/b40=β = 40``); a path that exists as given has no label."""
    text = str(text)
    if Path(text).exists() or "=" not in text:
        return text, None
    cuts = [i for i, ch in enumerate(text) if ch == "="]
    cut = next((i for i in cuts if Path(text[:i]).exists()), cuts[0])
    path, label = text[:cut], text[cut + 1:]
    if not label.strip():
        raise ValueError(f"{text}: an empty label after '='")
    return path, label.strip()


def _subset(manifest: dict) -> str:
    """The subset a run's manifest records, in words (``organism_heldout seed 0 limit 12160``)."""
    cfg = manifest.get("config") or {}
    suite = cfg.get("suite") if isinstance(cfg.get("suite"), dict) else cfg
    name = suite.get("subset") if isinstance(suite, dict) else None
    if not name:
        return "not recorded"
    extra = [f"{k} {suite[k]}" for k in ("seed", "limit") if isinstance(suite, dict) and suite.get(k) is not None]
    return " ".join([str(name), *extra])


def _load(path: str | os.PathLike, label: str | None, own_suite: bool = False) -> _Run:
    if Path(path).is_file():  # an answers file (decide's, one's own, an own suite's with own_suite)
        from ..rows.schema import load_rows
        rows = load_rows(Path(path), own_suite=own_suite)
        versions = sorted(str(v) for v in rows["suite_version"].dropna().unique()) if "suite_version" in rows else []
        version = versions[0] if len(versions) == 1 else rows.attrs.get("joined") or (
            "own suite" if own_suite else "not recorded")
        models = sorted(str(m) for m in rows["model"].dropna().unique()) if "model" in rows else []
        return _Run(Path(path), label, rows, ", ".join(models) or Path(path).name, str(version), "answers file")
    run = run_with_responses(path)
    manifest = run.manifest() if run.exists() else {}
    rows = ensure_valid(run.read_responses())
    in_rows = sorted(str(v) for v in rows["suite_version"].dropna().unique()) if "suite_version" in rows else []
    if len(in_rows) > 1:
        raise ValueError(f"{run.path} mixes suite versions in its rows ({', '.join(in_rows)}): score each alone")
    version = in_rows[0] if in_rows else manifest.get("suite_version") or "not recorded"  # the rows' is exact
    models = sorted(str(m) for m in rows["model"].dropna().unique()) if "model" in rows else []
    model = ", ".join(models) or (manifest.get("model") or {}).get("name") or str(
        (manifest.get("config") or {}).get("model") or run.path.name)
    return _Run(run.path, label, rows, model, str(version), _subset(manifest))


def _labels(runs: list[_Run]) -> None:
    """Give each run a label: its own, else its model's name (with its directory when two runs share one)."""
    models = Counter(r.model for r in runs if r.label is None)
    for r in runs:
        if r.label is None:
            r.label = r.model if models[r.model] == 1 else f"{r.model} ({r.path.name})"
    seen = Counter(r.label for r in runs)
    dup = sorted(k for k, v in seen.items() if v > 1)
    if dup:
        raise ValueError(f"two runs share the label {dup[0]!r}: give each run its own (RUN=label or --labels)")


def same_version(a: str, b: str) -> bool:
    """Whether two recorded suite versions agree: equal, or one a bare major (``2``, what some manifests record)
    that the other (``2.0+a94e5fc473``) is of."""
    if a == b:
        return True
    if "not recorded" in (a, b):
        return False
    bare = [v for v in (a, b) if "." not in v and "+" not in v]
    return len(bare) == 1 and a.split(".")[0].split("+")[0] == b.split(".")[0].split("+")[0]


def check_comparable(runs: list[_Run], contrast_type: str | None = None) -> tuple[str, int, int]:
    """Refuse runs that are not on the same suite version and the same items (of the contrast type scored),
    naming each run's version or subset. Returns (contrast type, items, scenarios) shared by all."""
    if any(not same_version(a.suite_version, b.suite_version) for a in runs for b in runs):
        which = "; ".join(f"{r.label} ({r.path}): {r.suite_version}" for r in runs)
        raise ValueError(f"runs on different suite versions are not comparable ({which}); decide every model "
                         f"on the same suite's items")
    sets, ctype = [], contrast_type
    for r in runs:
        sub, ctype, _ = select_contrast_type(r.rows, ctype)
        if len(sub) == 0:
            raise ValueError(f"{r.label} ({r.path}) has no items of contrast type {ctype}")
        sets.append(frozenset(sub["item_id"]))
    if len(set(sets)) > 1:
        shared = frozenset.intersection(*sets)
        which = "; ".join(f"{r.label} ({r.path}): {len(s):,} {ctype} items, subset {r.subset}"
                          for r, s in zip(runs, sets))
        raise ValueError(f"runs on different items are not comparable ({which}; {len(shared):,} shared); decide "
                         f"every model on the same subset, seed and limit")
    scenarios = runs[0].rows[runs[0].rows["item_id"].isin(sets[0])]["scenario_id"].nunique()
    return ctype, len(sets[0]), int(scenarios)


def runs_table(runs: Sequence, labels: Sequence[str] | None = None, contrast_type: str | None = None,
               convention: str = DEFAULT_CONVENTION, metrics: Sequence[str] | None = None,
               own_suite: bool = False) -> RunsTable:
    """The degree-3 headline of several runs side by side (:class:`RunsTable`).

    ``runs``: run directories (a comparison's or sweep's cell is one) or answers files, each a path, a ``RunDir``
    or ``"PATH=label"`` (``own_suite``: the files are of a suite of one's own, as ``score --own-suite`` reads them); ``labels``: one per run (default: the label after ``=``, else the run's model name).
    ``contrast_type``/``convention``: as in :func:`evenhand.scoring.metrics.score`; ``metrics``: default the headline.
    Runs on different suite versions or items raise a ValueError naming each run's version or subset."""
    runs = list(runs)
    if not runs:
        raise ValueError("name at least one run directory")
    if labels is not None and len(labels) != len(runs):
        raise ValueError(f"{len(labels)} labels for {len(runs)} runs: give one label per run")
    loaded = []
    for i, r in enumerate(runs):
        path, label = (r.path, None) if isinstance(r, RunDir) else split_label(r)
        loaded.append(_load(path, labels[i] if labels is not None else label, own_suite))
    _labels(loaded)
    ctype, items, scenarios = check_comparable(loaded, contrast_type)
    metrics = tuple(metrics) if metrics is not None else headline()
    for m in metrics:
        get_metric(m)
    rows = []
    for r in loaded:
        rep = score(r.rows, contrast_type=ctype, convention=convention)
        d3 = rep["by_degree"].get(HEADLINE_DEGREE)
        if d3 is None:
            raise ValueError(f"{r.label} ({r.path}) has no degree-{HEADLINE_DEGREE} items: the headline is degree "
                             f"{HEADLINE_DEGREE} (explicit labels)")
        for m in metrics:
            e = d3[m]
            rows.append({"label": r.label, "model": r.model, "run": str(r.path), "metric": m,
                         "degree": int(HEADLINE_DEGREE), "value": e["value"], "ci_low": e["ci_low"],
                         "ci_high": e["ci_high"], "n": e["n"], "k": e.get("clusters"), "note": e.get("note"),
                         "interval": interval_name(rep.get("interval")), "contrast_type": ctype,
                         "convention": convention, "suite_version": r.suite_version, "subset": r.subset,
                         "items": items, "scenarios": scenarios})
    frame = pd.DataFrame(rows, columns=list(TABLE_COLUMNS))
    for c in ("value", "ci_low", "ci_high"):
        frame[c] = frame[c].astype(float)
    frame["k"] = frame["k"].astype("Int64")
    return RunsTable(frame)


class RunsTable(PrintsItsText):
    """Several runs' degree-3 headline: prints as text (``print(t)``), and gives :meth:`to_frame`,
    :meth:`to_csv`, :meth:`to_latex` and :meth:`figure` (a forest plot)."""

    def __init__(self, frame: pd.DataFrame):
        self.frame = frame

    def labels(self) -> list[str]:
        return list(dict.fromkeys(self.frame["label"]))

    def metrics(self) -> list[str]:
        return list(dict.fromkeys(self.frame["metric"]))

    def text(self) -> str:
        """A block per metric, a line per run: value [95% CI] n items k scenarios."""
        f = self.frame
        first = f.iloc[0]
        labels = self.labels()
        width = max(len(x) for x in labels)
        lines = [f"EvenHand table: {len(labels)} runs, degree-{HEADLINE_DEGREE} headline, "
                 f"{CONTRAST_TYPES.get(first['contrast_type'], first['contrast_type'])} contrasts "
                 f"({first['convention']} convention); 95% CIs: {first['interval']}; n items, k scenarios",
                 f"The same {first['items']:,} items in {first['scenarios']} scenarios in every run "
                 f"(suite {first['suite_version']})"]
        for m in self.metrics():
            lines += ["", get_metric(m).label]
            for _, r in f[f["metric"] == m].iterrows():
                est = {"value": _none(r["value"]), "ci_low": _none(r["ci_low"]), "ci_high": _none(r["ci_high"]),
                       "n": int(r["n"]), "clusters": None if pd.isna(r["k"]) else int(r["k"]),
                       "note": r["note"] if isinstance(r["note"], str) else None}
                model = "" if r["model"] == r["label"] else f"  ({r['model']})"
                lines.append(f"  {r['label']:<{width}}  {format_estimate(est, m)}{model}")
        lines += ["", "Signed metrics: positive = toward the minority-coded candidate; TieLean above 50% likewise"]
        return "\n".join(lines)

    def to_frame(self) -> pd.DataFrame:
        """The tidy table (:data:`TABLE_COLUMNS`): one row per run and metric."""
        return self.frame.copy()

    def to_csv(self, path: str | os.PathLike) -> Path:
        """Write the tidy table as CSV (atomically); returns the path."""
        path = Path(path)
        if path.suffix != ".csv":
            raise ValueError(f"{path}: the CSV file must end in .csv")
        write_table_atomic(path, self.frame)
        return path

    def to_latex(self, path: str | os.PathLike | None = None, caption: str | None = None,
                 tex_label: str = "tab:evenhand-models") -> str:
        """A booktabs ``table``: a row per run (its label, k scenarios), a column per metric with value
        [95% CI] and, on a second line, the run's model and n items; the caption names the units and the sign convention.
        Written to ``path`` when given."""
        f, metrics = self.frame, self.metrics()
        first = f.iloc[0]
        pct = r"\%"
        if caption is None:
            caption = (f"EvenHand degree-{HEADLINE_DEGREE} headline metrics "
                       f"({CONTRAST_TYPES.get(first['contrast_type'], first['contrast_type'])} contrasts) on the same "
                       f"{first['items']:,} items in {first['scenarios']} scenarios. Each cell: value [95{pct} CI over "
                       f"scenarios], $n$ items below it; $k$: scenarios. {units_phrase(metrics, pct)}; "
                       f"{fair_phrase(metrics, pct)} are even-handed; positive differences lean toward the "
                       f"minority-coded candidate.")
        unit = {"%": pct, "pp": "pp"}
        head = " & ".join(f"{tex_escape(metric_name(m))} ({unit[metric_unit(m)]})" for m in metrics)
        lines = [r"\begin{table}[t]", r"\centering", r"\small", f"\\caption{{{caption}}}", f"\\label{{{tex_label}}}",
                 r"\begin{tabular}{lr" + "c" * len(metrics) + "}", r"\toprule", f"Run & $k$ & {head} \\\\",
                 r"\midrule"]
        for label in self.labels():
            g = f[f["label"] == label].set_index("metric")
            ks = sorted({int(k) for k in g["k"].dropna()})
            k = "--" if not ks else str(ks[-1])
            cells = [_tex_cell(g.loc[m], m) for m in metrics]
            ns = [f"{{\\scriptsize $n={int(g.loc[m, 'n'])}$}}" for m in metrics]
            model = g["model"].iloc[0]
            under = f"{{\\scriptsize {tex_text(model)}}}" if isinstance(model, str) and model != label else ""
            lines += [f"{tex_text(label)} & {k} & " + " & ".join(cells) + r" \\",
                      f"{under} & & " + " & ".join(ns) + r" \\"]
        lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
        text = "\n".join(lines) + "\n"
        if path is not None:
            with atomic_open(Path(path), "wb") as (fh, _):
                fh.write(text.encode())
        return text

    def figure(self, stem: str | os.PathLike, formats: Sequence[str] = ("pdf", "svg", "png"),
               title: str | None = None) -> list[Path]:
        """The forest plot (:func:`evenhand.reporting.figures.forest_figure`) written to ``stem.<fmt>``."""
        return forest_figure(self.frame, stem, formats, title=title)


GREEK = {"α": r"$\alpha$", "β": r"$\beta$", "γ": r"$\gamma$", "δ": r"$\delta$", "λ": r"$\lambda$",
         "σ": r"$\sigma$", "τ": r"$\tau$"}
"""Greek letters a label may hold (``β = 40``), written as math so that pdfLaTeX takes them."""


def tex_text(text: str) -> str:
    """A label or model name for LaTeX: special characters escaped, the :data:`GREEK` letters as math."""
    return "".join(GREEK.get(ch, tex_escape(ch)) for ch in str(text))


def _none(v):
    return None if pd.isna(v) else float(v)


def _tex_cell(r, metric: str) -> str:
    if pd.isna(r["value"]):
        return "--"
    sign = metric_unit(metric) == "pp"
    v = tex_number(100 * r["value"], 1, sign)
    if pd.isna(r["ci_low"]) or pd.isna(r["ci_high"]):
        return f"{v} [--]"
    return f"{v} [{tex_number(100 * r['ci_low'])}, {tex_number(100 * r['ci_high'])}]"
