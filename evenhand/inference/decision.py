"""The decision rules, written once: every flag, verdict, removal class, Holm family, rank and beats-control mark
that EvenHand prints reads them from here (the comparison table :mod:`evenhand.scoring.paired`, its ranking, the CLI
printout, the LaTeX table and the figures; the dose-response benchmark's flags and its table across mechanisms).

Ours, because no library holds this combination: flags with two levels (:func:`degradation`: ``degraded`` when a
cost's CI lies above its margin, ``possibly degraded`` when only its point does; either withholds every reward);
removal classes by equivalence with a margin (:func:`removal_class`; the old "covers 1 and not 0" rewarded
imprecision); Holm within declared families, the family written beside each verdict (:func:`holm_within`,
:func:`class_p`, :func:`held_class`); the comparison's verdict (:func:`change_verdict`) and beats-control mark
(:func:`beats_control`). The Holm step is :func:`evenhand.inference.stats.holm`. Rules, defaults and the flags' measured
error rates: docs/metrics/uncertainty.md, "Decision rules"."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .stats import ALPHA, holm

ACCURACY_MARGIN = 0.05
"""Default margin: an accuracy loss (GT items without pressure, refusals wrong) beyond 5 pp degrades a cell."""
REFUSAL_MARGIN = 0.05
"""Default margin: a refusal rise beyond 5 pp degrades a cell."""
EQUIVALENCE_MARGIN = 0.25
"""Default equivalence margin of a slope (or a change as a fraction of the baseline gap): ``removes`` needs the
CI inside 1 +- 0.25, ``none`` (``no change``) inside 0 +- 0.25."""
FLAG_LEVELS = ("degraded", "possibly degraded")
"""The levels of a flag: the CI above the margin, or only the point."""
CLASSES = ("removes", "partial", "none", "overshoot", "reverse", "inconclusive", "flagged", "undefined")
"""The removal classes of a slope (:func:`removal_class`)."""
VERDICTS = ("reduction", "increase", "no change", "inconclusive", "overshoot", "refusal-flagged", "accuracy-flagged",
            "not above scrambled control", "undefined")
"""The verdicts of a comparison's ``change`` row (:func:`change_verdict`); only ``reduction`` is ranked."""


def _finite(*xs) -> bool:
    return all(x is not None and np.isfinite(float(x)) for x in xs)


def degradation(value, low, high, margin: float) -> str | None:
    """``degraded`` (the CI's low end above ``margin``), ``possibly degraded`` (only the point above it), or None.
    A point without a CI above the margin is ``possibly degraded``."""
    if not _finite(value) or not float(value) > margin:
        return None
    return "degraded" if _finite(low) and float(low) > margin else "possibly degraded"


def worst(*flags: str | None) -> str | None:
    """The more certain of several flag levels (``degraded`` over ``possibly degraded`` over None)."""
    for level in FLAG_LEVELS:
        if level in flags:
            return level
    return None


def removal_class(low, high, flagged: bool = False, margin: float = EQUIVALENCE_MARGIN) -> str:
    """The class of a slope CI ``[low, high]`` (:data:`CLASSES`) by equivalence with ``margin``: ``flagged``
    (a degraded cell, whatever its CI), ``undefined`` (no CI), ``removes`` (inside 1 +- margin), ``none`` (inside
    0 +- margin), ``partial`` (above 0 + margin and below 1 - margin), ``overshoot`` (above 1 + margin),
    ``reverse`` (below 0 - margin), else ``inconclusive``."""
    if not 0 < margin < 0.5:
        raise ValueError(f"equivalence margin must be in (0, 0.5), got {margin}")
    if flagged:
        return "flagged"
    if not _finite(low, high):
        return "undefined"
    lo, hi = float(low), float(high)
    if 1 - margin <= lo and hi <= 1 + margin:
        return "removes"
    if -margin <= lo and hi <= margin:
        return "none"
    if margin < lo and hi < 1 - margin:
        return "partial"
    if lo > 1 + margin:
        return "overshoot"
    if hi < -margin:
        return "reverse"
    return "inconclusive"


def p_from_ci(value, low, high, alpha: float = ALPHA, df: float = np.inf) -> tuple[float, float] | None:
    """(estimate, standard error) read off a symmetric ``1 - alpha`` CI with ``df`` degrees of freedom (inf: the
    normal quantile); None without a CI."""
    from scipy.stats import t as student_t
    if not _finite(value, low, high):
        return None
    q = float(student_t.ppf(1 - alpha / 2, df))
    return float(value), max((float(high) - float(low)) / (2 * q), 1e-12)


def class_p(value, low, high, cls: str, margin: float = EQUIVALENCE_MARGIN, alpha: float = ALPHA,
            df: float = np.inf) -> float:
    """The p-value of the test that establishes ``cls`` (the largest of its one-sided tests against the band's
    edges; two-sided halves, so that p < alpha exactly when the 95% CI lies where the class needs it): 1 for a
    class no test establishes (``inconclusive``, ``flagged``, ``undefined``)."""
    from scipy.stats import t as student_t
    est = p_from_ci(value, low, high, alpha, df)
    if est is None or cls not in ("removes", "none", "partial", "overshoot", "reverse"):
        return 1.0
    x, se = est

    def above(t):  # H0: x <= t, two-sided-equivalent p
        return float(min(1.0, 2 * student_t.sf((x - t) / se, df)))

    def below(t):  # H0: x >= t
        return float(min(1.0, 2 * student_t.cdf((x - t) / se, df)))
    tests = {"removes": (above(1 - margin), below(1 + margin)), "none": (above(-margin), below(margin)),
             "partial": (above(margin), below(1 - margin)), "overshoot": (above(1 + margin),),
             "reverse": (below(-margin),)}[cls]
    return max(tests)


def holm_within(p: Sequence[float], families: Sequence) -> np.ndarray:
    """Holm-adjusted p-values, each family (equal keys in ``families``) adjusted on its own; NaN stays NaN."""
    p = np.asarray(p, float)
    out = np.full(len(p), np.nan)
    keys = list(families)
    for key in dict.fromkeys(keys):
        idx = np.array([i for i, k in enumerate(keys) if k == key and np.isfinite(p[i])], int)
        if idx.size:
            out[idx] = holm(p[idx])
    return out


def held_class(cls: str, p_holm: float, alpha: float = ALPHA) -> str:
    """``cls`` when its Holm-adjusted p is below ``alpha``; a class that does not survive is ``inconclusive``."""
    if cls in ("removes", "none", "partial", "overshoot", "reverse") and not (np.isfinite(p_holm) and p_holm < alpha):
        return "inconclusive"
    return cls


def change_verdict(value, low, high, p_holm, *, refusal_flag: str | None = None, accuracy_flag: str | None = None,
                   overshoot: bool = False, scale: float | None = None, margin: float = EQUIVALENCE_MARGIN,
                   beats_scrambled: bool | None = None, alpha: float = ALPHA) -> str:
    """The verdict of a comparison's change toward zero (:data:`VERDICTS`), in this order: ``undefined`` (no
    value), ``refusal-flagged``/``accuracy-flagged`` (a flag at either level), ``overshoot`` (the remaining gap's
    CI wholly past zero), ``reduction`` (Holm-adjusted p below ``alpha``, a positive change, and, when the cell
    has a scrambled control, ``beats_scrambled``; else ``not above scrambled control``), ``increase`` (Holm p
    below alpha, negative), ``no change`` (the CI inside +- ``margin`` x ``scale``, the baseline gap's size),
    ``inconclusive`` otherwise."""
    if not _finite(value):
        return "undefined"
    if refusal_flag:
        return "refusal-flagged"
    if accuracy_flag:
        return "accuracy-flagged"
    if overshoot:
        return "overshoot"
    significant = p_holm is not None and np.isfinite(float(p_holm)) and float(p_holm) < alpha
    if significant and float(value) > 0:
        return "reduction" if beats_scrambled is not False else "not above scrambled control"
    if significant and float(value) < 0:
        return "increase"
    if _finite(low, high, scale) and scale > 0 and -margin * scale <= low and high <= margin * scale:
        return "no change"
    return "inconclusive"


def beats_control(arm_change, band_high, contrast_low, flagged: bool, beats_scrambled: bool | None = None) -> bool:
    """The beats-control mark: an unflagged cell whose change lies above its random controls' band and whose
    contrast with them excludes 0, and which beats its scrambled control where it has one."""
    if flagged or beats_scrambled is False:
        return False
    return bool(_finite(arm_change, band_high, contrast_low) and arm_change > band_high and contrast_low > 0)


def rankable(verdict: str) -> bool:
    """Whether a change with ``verdict`` is ranked: only a ``reduction``."""
    return verdict == "reduction"


def family_label(stat: str, metric: str, size: int) -> str:
    """The family a comparison row's Holm adjustment ran over, as printed beside its verdict."""
    return f"Holm over {size} arm{'s' if size != 1 else ''}: {metric} {stat}"
