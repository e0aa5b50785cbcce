"""Power of a paired comparison: the standard error of a paired difference, the minimum detectable
effect (MDE) and the evaluation size a target effect needs.

A comparison tests a paired difference (a method minus the baseline, on the same items) with a
two-sided test at level ``alpha``. With the difference's standard error ``se`` over k scenarios, an
effect of size

    MDE = (t_{k-1, 1 - alpha/2} + t_{k-1, power}) * se

is detected with probability ``power`` (the t on k-1 degrees of freedom of the comparison's own
jackknife-t interval, :mod:`evenhand.scoring.paired`; with unlimited degrees of freedom it is the normal
2.80 * se at alpha 0.05 and 80% power, and at 10 scenarios 3.14 * se).

Pure functions of response tables and arrays; no model is loaded here."""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import pandas as pd

from ..inference.stats import RESAMPLES
from ..vocab.metric_defs import power_metrics
from .metrics import metric_values, select_contrast_type
from .paired import counted_indicators
from ..rows.schema import ensure_valid
from ..inference.stats import ALPHA
from ..inference.stats import cluster_sums as _sum_by_cluster
from .metrics import components_of
from .metrics import COMPONENTS
from ..inference.stats import jackknife_se, jackknife_weights

POWER = 0.8
"""The default power: an effect of the MDE's size is detected four times in five."""
BASELINE_ONLY_ASSUMPTION = ("baseline only: SE(paired) = sqrt(2) x SE(baseline), assuming the method's metric "
                            "varies as much as the baseline's and independently of it across scenarios")
"""What the SE of a paired difference assumes when only the baseline was run."""
SINGLE_CONTRAST_ASSUMPTION = ("one contrast per scenario in the pilot: all variance counted between scenarios, so "
                              "more contrasts per scenario are assumed not to shrink the SE")
"""What the sizing assumes when the pilot cannot separate contrasts from scenarios."""


def z_sum(alpha: float = ALPHA, power: float = POWER) -> float:
    """z_{1 - alpha/2} + z_{power} (2.8016 at alpha 0.05 and power 0.8)."""
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise ValueError(f"alpha and power must be in (0, 1), got {alpha}, {power}")
    nd = NormalDist()
    return nd.inv_cdf(1 - alpha / 2) + nd.inv_cdf(power)


def t_sum(df: float | None, alpha: float = ALPHA, power: float = POWER) -> float:
    """t_{df, 1 - alpha/2} + t_{df, power}; :func:`z_sum` when ``df`` is None or infinite."""
    if df is None or not math.isfinite(df):
        return z_sum(alpha, power)
    if df <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    z_sum(alpha, power)  # checks alpha and power
    from scipy.stats import t
    return float(t.ppf(1 - alpha / 2, df) + t.ppf(power, df))


def mde(se: float, alpha: float = ALPHA, power: float = POWER, df: float | None = None) -> float:
    """The minimum detectable effect of a two-sided test with standard error ``se``: (t + t) * se on ``df``
    degrees of freedom (k - 1 for k scenarios), the normal z + z when ``df`` is None."""
    return t_sum(df, alpha, power) * se


def power_of(effect: float, se: float, alpha: float = ALPHA, df: float | None = None) -> float:
    """The probability that a two-sided test at level ``alpha`` detects ``effect`` (both tails): a t test on
    ``df`` degrees of freedom (shifted-t approximation, so that the MDE is detected with its power), a z test
    when ``df`` is None."""
    if se <= 0:
        return 1.0 if effect != 0 else alpha
    t = abs(effect) / se
    if df is None or not math.isfinite(df):
        nd, z = NormalDist(), NormalDist().inv_cdf(1 - alpha / 2)
        return nd.cdf(t - z) + nd.cdf(-t - z)
    from scipy.stats import t as student_t
    crit = float(student_t.ppf(1 - alpha / 2, df))
    return float(student_t.cdf(t - crit, df) + student_t.cdf(-t - crit, df))


@dataclass(frozen=True)
class VarianceParts:
    """The variance of a metric (or a paired difference) split into scenario and contrast parts."""
    between: float
    """sigma_b^2: variance between scenarios (per scenario)."""
    within: float
    """sigma_w^2: variance between contrasts within a scenario (per contrast)."""
    n_scenarios: int
    """Scenarios in the pilot."""
    contrasts: float
    """Contrasts per scenario in the pilot (mean)."""
    assumption: str | None = None
    """What the split assumes, where the pilot could not identify it."""

    @property
    def pilot_se(self) -> float:
        """The SE at the pilot's own size."""
        return design_se(self, self.n_scenarios, self.contrasts)


def design_se(parts: VarianceParts, n: int, k: float) -> float:
    """The SE with ``n`` scenarios and ``k`` contrasts each: sqrt(sigma_b^2 / n + sigma_w^2 / (n k))."""
    if n < 1 or k < 1:
        raise ValueError(f"scenarios and contrasts must be at least 1, got {n}, {k}")
    return math.sqrt(parts.between / n + parts.within / (n * k))


def scenarios_needed(effect: float, parts: VarianceParts, k: float, alpha: float = ALPHA,
                     power: float = POWER) -> int:
    """The fewest scenarios (``k`` contrasts each) at which ``effect`` is detected with ``power``: the fewest n
    with (t_{n-1} + t_{n-1}) * SE(n) <= the effect (:func:`design_se`, :func:`t_sum`)."""
    if effect == 0:
        raise ValueError("the target effect must not be 0")
    var_unit = parts.between + parts.within / k  # Var = var_unit / n
    n = max(2, math.ceil(var_unit * (z_sum(alpha, power) / abs(effect)) ** 2))  # t > z: never fewer
    while t_sum(n - 1, alpha, power) * math.sqrt(var_unit / n) > abs(effect):
        n += 1
    return n


def _codes(df: pd.DataFrame, by: Sequence[str]) -> tuple[np.ndarray, int]:
    keys = df[list(by)].astype(str).agg("\x1f".join, axis=1) if len(by) > 1 else df[by[0]].astype(str)
    codes, uniq = pd.factorize(keys, sort=True)
    return codes, len(uniq)


def _aligned(base: pd.DataFrame, other: pd.DataFrame | None, contrast_type: str | None):
    base, ctype, _ = select_contrast_type(ensure_valid(base), contrast_type)
    if other is None:
        return base.reset_index(drop=True), None
    other, _, _ = select_contrast_type(ensure_valid(other), ctype)
    common = sorted(set(base["item_id"]) & set(other["item_id"]))
    if not common:
        raise ValueError("the two runs share no item_id")
    return (base.set_index("item_id").loc[common].reset_index(),
            other.set_index("item_id").loc[common].reset_index())


def jackknife_variances(base: pd.DataFrame, other: pd.DataFrame | None, metrics: Iterable[str],
                        by: Sequence[str] = ("scenario_id",),
                        contrast_type: str | None = None) -> dict[str, tuple[float, int]]:
    """Per metric, (the delete-one-cluster jackknife variance of ``other - base`` on their common items (of
    ``base`` alone when ``other`` is None), the clusters holding the metric's items); clusters are the
    distinct values of the columns ``by``. The variance behind the comparison's jackknife-t interval."""
    a, b = _aligned(base, other, contrast_type)
    codes, k = _codes(a, by)
    sums = [(_sum_by_cluster(codes, n, k), _sum_by_cluster(codes, d, k))
            for n, d in [counted_indicators(x) for x in ((a,) if b is None else (a, b))]]
    out = {}
    for m in metrics:
        cols = [COMPONENTS.index(c) for c in components_of(m)]
        held = np.zeros(k, bool)
        for _, Ds in sums:
            held |= Ds[:, cols].sum(1) > 0
        J = jackknife_weights(int(held.sum()))
        vals = [metric_values(J @ Ns[held], J @ Ds[held], m) for Ns, Ds in sums]
        loo = vals[0] if b is None else vals[1] - vals[0]
        out[m] = (jackknife_se(loo) ** 2, int(held.sum()))
    return out


@dataclass(frozen=True)
class PairedSE:
    """The SE of a paired difference and its MDE."""
    metric: str
    se: float
    """Standard error of the paired difference (NaN where the metric is undefined)."""
    mde: float
    """The minimum detectable effect at ``alpha`` and ``power``."""
    n_scenarios: int
    assumption: str | None = None
    """What the SE assumes (the baseline-only case), None when measured from both runs."""
    df: float | None = None
    """The degrees of freedom of the MDE's t (scenarios holding the metric's items - 1)."""


def paired_se(base: pd.DataFrame, other: pd.DataFrame | None = None, metrics: Iterable[str] | None = None,
              resamples: int = RESAMPLES, seed: int = 0, alpha: float = ALPHA, power: float = POWER,
              contrast_type: str | None = None) -> dict[str, PairedSE]:
    """Per metric, the SE of ``other - base``, the delete-one-scenario jackknife SE (both runs leaving the same
    scenario out, as the comparison's interval), and its MDE with t on k-1 degrees of freedom; with ``other``
    None, from the baseline alone: ``sqrt(2)`` times the baseline's own jackknife SE
    (:data:`BASELINE_ONLY_ASSUMPTION` says what that assumes). The SE comes from the data at hand and is the
    one the comparison's interval uses. ``resamples`` and ``seed`` are unused (kept for callers)."""
    metrics = power_metrics() if metrics is None else tuple(metrics)
    var = jackknife_variances(base, other, metrics, ("scenario_id",), contrast_type)
    n = int(ensure_valid(base)["scenario_id"].nunique())
    factor, note = (1.0, None) if other is not None else (math.sqrt(2), BASELINE_ONLY_ASSUMPTION)
    out = {}
    for m in metrics:
        v, k = var[m]
        se = factor * math.sqrt(v) if math.isfinite(v) else float("nan")
        df = float(k - 1) if k >= 2 else None
        ok = math.isfinite(se) and df is not None
        out[m] = PairedSE(m, se, mde(se, alpha, power, df) if ok else float("nan"), n, note, df)
    return out


def variance_parts(base: pd.DataFrame, other: pd.DataFrame | None = None, metrics: Iterable[str] | None = None,
                   resamples: int = RESAMPLES, seed: int = 0, contrast_type: str | None = None) -> dict[str, VarianceParts]:
    """Per metric, the pilot's variance split of ``other - base`` (or of the baseline alone, scaled by 2 as in
    :data:`BASELINE_ONLY_ASSUMPTION`), from jackknife variances over scenarios and over (scenario, contrast)
    units. ``resamples`` and ``seed`` are unused (kept for callers).

    The variance of a metric over ``n`` scenarios with ``k`` contrasts each is modelled as

        Var = sigma_b^2 / n + sigma_w^2 / (n k)

    (sigma_b^2: between scenarios; sigma_w^2: between contrasts within a scenario, item noise included), so the
    SE scales as ``sqrt(n_pilot / n)`` in scenarios at a fixed number of contrasts (:func:`design_se`). The two
    components are estimated from a pilot with ``k >= 2`` contrasts per scenario, once over scenarios and once
    over (scenario, contrast) units; with one contrast per scenario they cannot be told apart, and all the
    variance is put between scenarios (more contrasts per scenario then buy nothing: the conservative choice,
    :data:`SINGLE_CONTRAST_ASSUMPTION`). The two variances are jackknife ones (one unit left out at a time), as
    the paired SE; ratio metrics enter through them, so the model is a first-order (linearised)
    approximation."""
    metrics = power_metrics() if metrics is None else tuple(metrics)
    df, _ = _aligned(base, None, contrast_type)
    n = int(df["scenario_id"].nunique())
    k0 = float(df.groupby("scenario_id")["contrast_id"].nunique().mean())
    by_s = jackknife_variances(base, other, metrics, ("scenario_id",), contrast_type)
    by_u = jackknife_variances(base, other, metrics, ("scenario_id", "contrast_id"), contrast_type) \
        if k0 > 1 else by_s
    scale = 1.0 if other is not None else 2.0
    notes = [BASELINE_ONLY_ASSUMPTION] if other is None else []
    out = {}
    for m in metrics:
        a = scale * by_s[m][0] * n  # sigma_b^2 + sigma_w^2 / k0
        if not math.isfinite(a):
            out[m] = VarianceParts(float("nan"), float("nan"), n, k0, "undefined on the pilot")
        elif k0 > 1:
            b = scale * by_u[m][0] * n * k0  # sigma_b^2 + sigma_w^2
            within = max(0.0, (b - a) / (1 - 1 / k0))
            between = max(0.0, a - within / k0)
            if between == 0.0:
                within = a * k0
            out[m] = VarianceParts(between, within, n, k0, "; ".join(notes) or None)
        else:
            out[m] = VarianceParts(a, 0.0, n, k0, "; ".join(notes + [SINGLE_CONTRAST_ASSUMPTION]))
    return out
