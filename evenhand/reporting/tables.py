"""LaTeX tables a paper can take unedited, as pure functions of :func:`evenhand.reporting.figures.metrics_long`'s table.

:func:`latex_table` writes a floating ``table`` with ``\\caption`` and ``\\label``, a booktabs
``tabular`` with the unit of every column in its header (% for rates, pp for differences of rates),
the items (n) and scenarios (k) of every row, true minus signs (``$-$``, never a hyphen) and ``--``
for a value the data do not define. It needs ``\\usepackage{booktabs}``.
"""
from __future__ import annotations

import pandas as pd

from .labels import (
    CONTRAST_TYPES, degree_name, fair_phrase, metric_name, metric_unit, tex_number, units_phrase,
)
from ..vocab.metric_defs import by_degree

_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
            "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def tex_escape(text: str) -> str:
    """Text with LaTeX's special characters escaped."""
    return "".join(_SPECIAL.get(ch, ch) for ch in str(text))


def _unit(metric: str) -> str:
    return r"\%" if metric_unit(metric) == "%" else "pp"


def _cell(r: pd.DataFrame) -> str:
    if r.empty or pd.isna(r["value"].iloc[0]):
        return "--"
    v, lo, hi = (100 * float(r[c].iloc[0]) if pd.notna(r[c].iloc[0]) else float("nan")
                 for c in ("value", "ci_low", "ci_high"))
    sign = metric_unit(r["metric"].iloc[0]) == "pp"
    if pd.isna(lo) or pd.isna(hi):
        return f"{tex_number(v, 1, sign)} [--]"
    return f"{tex_number(v, 1, sign)} [{tex_number(lo)}, {tex_number(hi)}]"


def latex_table(table: pd.DataFrame, label: str | None = None, caption: str | None = None,
                tex_label: str = "tab:evenhand-headline") -> str:
    """The headline metrics by degree for one run label: value [95% CI], n items and k scenarios per row.

    ``caption`` replaces the default caption (which names the model, the contrast type and the units);
    ``tex_label`` is the ``\\label``."""
    t = table[table["breakdown"] == "degree"]
    label = label or t["label"].iloc[0]
    t = t[t["label"] == label]
    model = t["model"].dropna().iloc[0] if "model" in t.columns and t["model"].notna().any() else None
    ctype = t["contrast_type"].dropna().iloc[0] if "contrast_type" in t.columns and t["contrast_type"].notna().any() \
        else None
    columns = by_degree()  # the registered metrics marked by_degree
    if caption is None:
        pct = r"\%"
        who = f"\\texttt{{{tex_escape(model)}}}" if model else f"run \\texttt{{{tex_escape(label)}}}"
        kind = f", {CONTRAST_TYPES.get(ctype, tex_escape(ctype))} contrasts" if ctype else ""
        caption = (f"EvenHand headline metrics by identity-signalling degree (D0: no cue; D3: explicit label) for "
                   f"{who}{kind}. Each cell: value [95\\% CI over scenarios]; "
                   f"{units_phrase(columns, pct)}; {fair_phrase(columns, pct)} are even-handed. "
                   f"$n$: items at that degree, $k$: scenarios; each metric uses the subset of items it is "
                   f"defined on.")
    header = " & ".join(f"{tex_escape(metric_name(m))} ({_unit(m)})" for m in columns)
    lines = [r"\begin{table}[t]", r"\centering", r"\small", f"\\caption{{{caption}}}", f"\\label{{{tex_label}}}",
             r"\begin{tabular}{lrr" + "c" * len(columns) + "}", r"\toprule",
             f"Degree & $n$ & $k$ & {header} \\\\", r"\midrule"]
    for d in sorted(t["degree"].unique()):
        at = t[t["degree"] == d]
        items = at[at["metric"] == "items"]
        n = str(int(items["n"].iloc[0])) if len(items) else "--"
        k = str(int(items["clusters"].iloc[0])) if len(items) and pd.notna(items["clusters"].iloc[0]) else "--"
        cells = [_cell(at[at["metric"] == m]) for m in columns]
        lines.append(f"{degree_name(d)} & {n} & {k} & " + " & ".join(cells) + " \\\\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"
