"""The label vocabulary of every EvenHand figure, table and report page.

Tables keep machine names (``fraggap``, ``race_x_sex``, ``historical_disadvantage``, ``pro_minority``,
degree ``3``); what a reader sees goes through this module, so that a figure, the LaTeX table and the report
page name a thing the same way. Unknown names fall back to :func:`humanise` (underscores to spaces, first
letter capitalised), so a new category or family is never shown in snake_case."""
from __future__ import annotations

import math

from ..vocab.metric_defs import find_metric, registered


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
    """The display name of a metric (``fraggap`` -> ``FragGap``; :attr:`evenhand.vocab.metric_defs.Metric.display`)."""
    m = find_metric(metric)
    return m.display if m is not None and m.display else humanise(metric)


def gap_name(metric: str) -> str:
    """An asymmetry as a gap from its fair value: ``FragGap``, ``TieLean - 0.5``."""
    m = find_metric(metric)
    if m is None or not m.fair:
        return metric_name(metric)
    return f"{metric_name(metric)} - {m.fair:g}"


def metric_unit(metric: str) -> str:
    """``pp`` for a difference of rates, ``%`` for a rate (:attr:`evenhand.vocab.metric_defs.Metric.unit`):
    ``fraggap`` in ``pp``; ``tielean`` in ``%``; flips and shifts as rates in ``%``."""
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
    """``3`` / ``"3"`` -> ``D3``; ``all`` -> ``All degrees``. Degrees are always written D0-D3."""
    if str(degree) == "all":
        return "All degrees"
    return f"D{int(float(degree))}"


def group_name(group: str) -> str:
    """The display name of a contrast category (``race_x_sex`` -> ``Race × sex``), pressure family
    (``historical_disadvantage`` -> ``Historical disadvantage``), pressure direction, chosen side, condition
    value or model component."""
    return GROUPS.get(str(group)) or humanise(group)


def condition_name(condition: str, value) -> str:
    """A condition value as a legend shows it: degree values as D0-D3, the others by :func:`group_name`."""
    return degree_name(value) if condition == "degree" else group_name(value)


def minus(text: str) -> str:
    """Replace ASCII hyphen-minus signs before digits with a true minus sign (U+2212), for figures and pages
    (:func:`tex_number` writes ``$-$`` for LaTeX)."""
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


MINORITY_SIDE = "toward minority-coded"
"""What a positive asymmetry (or a TieLean above 50%) means, as an axis or colour bar states it."""

MODELS = {
    "evenhand-organism": "EvenHand organism (planted bias)",
    "evenhand-organism-fair": "EvenHand organism (fair)",
    "gemma-3-12b-it": "Gemma 3 12B IT",
    "qwen2.5-7b-instruct": "Qwen2.5 7B Instruct",
    "gemma-3-270m-gguf": "Gemma 3 270M (GGUF)",
    "planted-policy": "Simulated planted policy",
}
"""Display names of the model presets (:data:`evenhand.models.loading.PRESETS`) and the simulator."""

INTERVENTIONS = {
    "baseline": "Baseline", "fair_instruction": "Fair instruction", "identity_blind": "Identity-blind prompt",
    "self_critique": "Self-critique", "counterfactual_cot": "Counterfactual CoT", "caa": "CAA", "ace": "ACE",
    "leace": "LEACE", "loreft": "LoReFT", "reft_r1": "ReFT-r1", "oracle_inverse": "Oracle (inverse)",
    "oracle_project": "Oracle (projection)", "oracle_half": "Oracle (half)",
}
"""Display names of the interventions (:mod:`interventions`) and the dose-response study's oracles."""

OPTIONS = {"alpha": "α", "layers": "layers", "rank": "rank", "critique_max_new_tokens": "critique tokens",
           "reason_max_new_tokens": "reasoning tokens"}
"""Short names of intervention options in a figure's cell names."""


def model_name(model) -> str:
    """A model as a figure title shows it: a preset id by its display name (:data:`MODELS`), a Hugging Face
    id or a path by its last part (``google/gemma-3-12b-it`` -> ``gemma-3-12b-it``)."""
    text = str(model).rstrip("/")
    if text in MODELS:
        return MODELS[text]
    last = text.rsplit("/", 1)[-1]
    return MODELS.get(last, last)


def sign_convention(metric: str) -> str:
    """Which values of an asymmetry lean toward the minority-coded candidate: ``+ = toward minority-coded``
    (``> 50% = ...`` for TieLean); '' for a metric that is not an asymmetry."""
    m = find_metric(metric)
    if m is None or not m.asymmetry:
        return ""
    return f"+ = {MINORITY_SIDE}" if not m.fair else f"> {100 * m.fair:g}% = {MINORITY_SIDE}"


def signed_axis_label(metric: str) -> str:
    """:func:`axis_label` with the :func:`sign_convention` of an asymmetry on a second line."""
    sign = sign_convention(metric)
    return axis_label(metric) + (f"\n{sign}" if sign else "")


def intervention_name(name: str) -> str:
    """An intervention or dose-response arm as a legend shows it: ``caa-random`` -> ``CAA, random control``,
    ``leace-scrambled`` -> ``LEACE, scrambled control``."""
    text = str(name)
    for suffix, words in (("-random", "random control"), ("-scrambled", "scrambled control")):
        if text.endswith(suffix):
            return f"{intervention_name(text[: -len(suffix)])}, {words}"
    return INTERVENTIONS.get(text) or humanise(text)


def cell_name(intervention: str, options: dict | None = None, seed=None) -> str:
    """A comparison cell as a figure shows it: ``CAA (α = 4, middle layers)``, with ``seed 2`` for a
    seed other than 0; options with a default-like role (batch size) are left out."""
    parts = []
    for k, v in (options or {}).items():
        if k == "batch_size":
            continue
        if k == "layers" and isinstance(v, str):
            parts.append(f"{v} layers")
            continue
        v = f"{v:g}" if isinstance(v, float) else v
        parts.append(f"{OPTIONS.get(k, humanise(k).lower())} = {v}")
    if seed is not None and seed == seed and int(seed):
        parts.append(f"seed {int(seed)}")
    return intervention_name(intervention) + (f" ({', '.join(parts)})" if parts else "")
