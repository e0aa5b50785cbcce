"""The label vocabulary of every EvenHand figure, table and report page.

More in docs/METRICS.md, "Module notes"."""
from __future__ import annotations

import math

from .metric_defs import find_metric, registered


def __getattr__(name: str):
    if name == "METRICS":  # display names of the registered metrics (docs/METRICS.md)
        return {m.name: m.display for m in registered()}
    if name == "UNITS":  # the metrics printed in pp (differences of rates); every other one in %
        return {m.name: m.unit for m in registered() if m.unit != "%"}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


GROUPS = {
    # contrast categories
    "race": "Race", "race_x_sex": "Race × sex", "religion": "Religion", "religion_x_gender": "Religion × gender",
    "sex_gender": "Sex/gender", "sexuality": "Sexuality", "age": "Age", "disability": "Disability",
    # pressure families
    "authority": "Authority", "consensus": "Consensus", "evidence": "Evidence", "legal": "Legal",
    "historical_disadvantage": "Historical disadvantage", "emotional": "Emotional", "urgency": "Urgency",
    "precedent": "Precedent", "reputation": "Reputation",
    # pressure directions and chosen sides (probes.attribution's conditions)
    "pro_minority": "Pro-minority pressure", "pro_majority": "Pro-majority pressure", "none": "No pressure",
    "minority": "Chose minority-coded", "majority": "Chose majority-coded", "no_choice": "No choice",
    "all": "All",
    # BBQ configurations (experiments.studies.bbq.CONFIGURATIONS)
    "mc_logprob": "Multiple choice, log-prob", "mc_logprob_chat": "Multiple choice, log-prob, chat",
    "mc_generate": "Multiple choice, generated", "yn_logprob": "Yes/no, log-prob", "yn_generate": "Yes/no, generated",
    # model components
    "embed": "Embedding", "attn_out": "Attention", "mlp_out": "MLP", "logit_diff": "Logit difference",
}
"""Display names of the groups a breakdown or condition takes."""

CONTRAST_TYPES = {"type1": "Type-1", "type23": "Type-2/3"}
"""Display names of the contrast types."""


def humanise(name: str) -> str:
    """``historical_disadvantage`` -> ``Historical disadvantage``: the fallback for names outside the vocabulary."""
    text = str(name).replace("_x_", " × ").replace("_", " ").strip()
    return text[:1].upper() + text[1:]


def metric_name(metric: str) -> str:
    """The display name of a metric (``fraggap`` -> ``FragGap``; :attr:`evenhand.metric_defs.Metric.display`)."""
    m = find_metric(metric)
    return m.display if m is not None and m.display else humanise(metric)


def gap_name(metric: str) -> str:
    """An asymmetry as a gap from its fair value: ``FragGap``, ``TieLean - 0.5``."""
    m = find_metric(metric)
    if m is None or not m.fair:
        return metric_name(metric)
    return f"{metric_name(metric)} - {m.fair:g}"


def metric_unit(metric: str) -> str:
    """``pp`` for a difference of rates, ``%`` for a rate (:attr:`evenhand.metric_defs.Metric.unit`)."""
    m = find_metric(metric)
    return m.unit if m is not None else "%"


def axis_label(metric: str) -> str:
    """A metric with its unit, for an axis or colour bar: ``FragGap (pp)``."""
    return f"{metric_name(metric)} ({metric_unit(metric)})"


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def units_phrase(metrics, percent: str = "%") -> str:
    """The units of ``metrics`` in words: ``Accuracy and TieLean in %, AccGap, FragGap and TieShift in
    percentage points (pp)`` (``percent``: how % is written, ``\\%`` for LaTeX)."""
    rates = [metric_name(m) for m in metrics if metric_unit(m) == "%"]
    diffs = [metric_name(m) for m in metrics if metric_unit(m) == "pp"]
    parts = ([f"{_and(rates)} in {percent}"] if rates else []) + (
        [f"{_and(diffs)} in percentage points (pp)"] if diffs else [])
    return ", ".join(parts)


def fair_phrase(metrics, percent: str = "%") -> str:
    """The even-handed values of the asymmetries among ``metrics``: ``0 pp and 50%``."""
    values = {}
    for m in metrics:
        rec = find_metric(m)
        if rec is not None and rec.asymmetry:
            v = f"{100 * rec.fair:g}"
            values[f"{v} pp" if rec.unit == "pp" else f"{v}{percent}"] = None
    return _and(list(values)) if values else ""


def degree_name(degree) -> str:
    """``3`` / ``"3"`` -> ``D3``; ``all`` -> ``All degrees``."""
    if str(degree) == "all":
        return "All degrees"
    return f"D{int(float(degree))}"


def group_name(group: str) -> str:
    """The display name of a contrast category, pressure family, condition value or component."""
    return GROUPS.get(str(group)) or humanise(group)


def condition_name(condition: str, value) -> str:
    """A condition value as a legend shows it: degree values as D0-D3, the others by :func:`group_name`."""
    return degree_name(value) if condition == "degree" else group_name(value)


def minus(text: str) -> str:
    """Replace ASCII hyphen-minus signs before digits with a true minus sign (U+2212)."""
    out = []
    for i, ch in enumerate(text):
        nxt = text[i + 1] if i + 1 < len(text) else ""
        prev = text[i - 1] if i else " "
        out.append("\u2212" if ch == "-" and nxt.isdigit() and not (prev.isalnum() or prev == ".") else ch)
    return "".join(out)


def number(value: float, digits: int = 1, sign: bool = False) -> str:
    """A number (already scaled) with a true minus sign; ``sign`` adds ``+`` to positive values;
    a value that rounds to zero is written without a sign."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    text = f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"
    if float(text) == 0:
        text = f"{0:.{digits}f}"
    return text.replace("-", "\u2212")


def tex_number(value: float, digits: int = 1, sign: bool = False) -> str:
    """A number for LaTeX text mode: minus as ``$-$``, never a hyphen."""
    return number(value, digits, sign).replace("\u2212", "$-$").replace("–", "--")
