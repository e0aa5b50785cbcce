"""The report :func:`evenhand.scoring.metrics.score` returns: the plain dict of every estimate (``report["overall"]``,
``report["by_degree"]["3"]``, ... as before), that prints its degree-3 headline with 95% CIs, n items and k
scenarios (the numbers ``evenhand score`` prints) and gives a tidy table (:meth:`ScoreReport.to_frame`)."""
from __future__ import annotations

import re

from ..vocab.metric_defs import find_metric, get_metric, score_rows
from ..inference.stats import INTERVAL_NAMES

HEADLINE_DEGREE = "3"
"""The degree of the headline: explicit labels."""
FRAME_COLUMNS = ("metric", "degree", "estimate", "low", "high", "n", "k", "interval")
"""The columns of :meth:`ScoreReport.to_frame`."""


def interval_name(interval: str | None) -> str:
    """The words for an interval id (``jackknife-t`` -> ``jackknife-t over scenarios``)."""
    return INTERVAL_NAMES.get(interval, str(interval))


FEW_NOTES = ((re.compile(r"^only \d+ scenarios: the interval is approximate$"), "†",
              "† fewer than 10 scenarios (k on the line): the interval is approximate"),
             (re.compile(r"^no interval: .* rests on 1 scenario$"), "‡",
              "‡ one scenario: no interval (no between-scenario spread to estimate it from)"))
"""(note pattern, mark, footnote) of the notes every row of a small run would repeat: a table that passes
``few_once`` to :func:`format_estimate` marks those rows and prints each footnote once (:func:`footnotes`)."""


def footnotes(marks: set) -> list[str]:
    """The footnote lines of the marks ``format_estimate`` put on a table's rows, in a fixed order."""
    return [text for _, mark, text in FEW_NOTES if mark in marks]


def format_estimate(est: dict, metric: str, few_once: set | None = None) -> str:
    """'+12.3 pp [4.1, 20.0] n=240 k=31' (TieLean and rates as %, gaps as signed pp; n items, k scenarios;
    the estimate's note, such as a warning that it rests on few scenarios, in brackets). A missing field (None,
    or NaN as a table row holds it) is left out, never printed as ``nan``; no value: ``not estimable (why)``.
    ``few_once``: a set of marks (:data:`FEW_NOTES`) the caller prints the footnotes of once (:func:`footnotes`);
    a few-scenarios note is then a mark on the line instead of the sentence on every line."""
    value, note = _given(est.get("value")), _given(est.get("note"))
    if value is None:
        return f"not estimable ({note or 'insufficient'})"
    m = find_metric(metric)
    signed = m is not None and m.signed
    sign, unit = ("+", "pp") if signed else ("", "%")
    v, lo, hi = (None if x is None else 100 * x for x in (value, _given(est.get("ci_low")),
                                                           _given(est.get("ci_high"))))
    ci = f"[{lo:{sign}.1f}, {hi:{sign}.1f}]" if lo is not None and hi is not None else "[no CI]"
    n, k = _given(est.get("n")), _given(est.get("clusters"))
    few = f" ({note})" if note else ""
    for pattern, mark, _ in FEW_NOTES if few_once is not None and note else ():
        if pattern.match(str(note)):
            few_once.add(mark)
            few = f" {mark}"
    return (f"{v:{sign}.1f} {unit} {ci}" + (f" n={int(n)}" if n is not None else "")
            + (f" k={int(k)}" if k is not None else "") + few)


def _given(x):
    """``x``, or None when it is missing (None, NaN, pandas' NA, an empty string)."""
    if x is None or (isinstance(x, str) and not x):
        return None
    try:
        return None if x != x else x
    except TypeError:  # pandas' NA: its comparison is NA, which has no truth value
        return None


def headline_lines(report: dict) -> list[str]:
    """One line per row of ``evenhand score``'s degree-3 block (:func:`evenhand.vocab.metric_defs.score_rows`)."""
    d3 = report["by_degree"].get(HEADLINE_DEGREE)
    if d3 is None:
        return [f"  no degree-{HEADLINE_DEGREE} items: the headline is degree {HEADLINE_DEGREE} (explicit labels)"]
    few: set = set()  # a few-scenarios note: a mark on the line and its footnote once, as `evenhand score` prints
    lines = [f"  {get_metric(m).label:<28} {format_estimate(d3[m], m, few)}" for m in score_rows()]
    return lines + footnotes(few)


class PrintsItsText:
    """A result that prints as its ``text()`` (which the subclass defines): ``str``, ``repr`` and
    IPython/Jupyter's pretty printer."""

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return self.text()

    def _repr_pretty_(self, p, cycle) -> None:  # IPython and Jupyter
        p.text(self.text())


class ScoreReport(PrintsItsText, dict):
    """A score report: a dict (every key :func:`evenhand.scoring.metrics.score` documents) that prints as the
    degree-3 headline table (``print(report)``) and gives :meth:`to_frame`."""

    def text(self) -> str:
        """The headline: contrast type, items, scenarios, the interval, then each degree-3 row."""
        lines = [f"EvenHand score: {self['contrast_type']} contrasts, {self['n_items']:,} items in "
                 f"{self['n_scenarios']} scenarios ({self.get('convention', 'evenhand')} convention)",
                 f"Headline (degree {HEADLINE_DEGREE}, explicit labels); 95% CIs: "
                 f"{interval_name(self.get('interval'))}; n items, k scenarios"]
        lines += headline_lines(self)
        if self.get("note"):
            lines.append(f"Note: {self['note']}")
        lines.append("Every metric by degree: report.to_frame(); positive = toward the minority-coded candidate")
        return "\n".join(lines)

    def to_frame(self):
        """Every metric at every degree, then pooled over degrees (``degree`` <NA>), one row each:
        metric, degree, estimate, low, high (fractions; signed metrics as differences), n items, k
        scenarios, interval (its words)."""
        import pandas as pd
        name = interval_name(self.get("interval"))
        rows = []
        parts = [(int(d), self["by_degree"][d]) for d in sorted(self["by_degree"], key=int)]
        for degree, ests in parts + [(pd.NA, self["overall"])]:
            for metric, e in ests.items():
                rows.append((metric, degree, e["value"], e["ci_low"], e["ci_high"], e["n"], e.get("clusters"), name))
        df = pd.DataFrame(rows, columns=list(FRAME_COLUMNS))
        df["degree"] = df["degree"].astype("Int64")
        df["k"] = df["k"].astype("Int64")
        for c in ("estimate", "low", "high"):
            df[c] = df[c].astype(float)
        return df

    def to_dict(self) -> dict:
        """The plain dict (what ``metrics.json`` holds)."""
        return dict(self)
