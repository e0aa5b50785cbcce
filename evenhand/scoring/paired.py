"""Paired scoring of interventions against a baseline, as pure functions of response tables.

Every arm (the baseline, each intervention cell, each random control) answered the
same items. The arms are scored on the *same* resampled scenarios (one cluster
bootstrap draw for all of them), so each difference it reports is paired."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import get_args

import numpy as np
import pandas as pd

from . import metrics as _metrics
from .metrics import (
    COMPONENTS, choices, components_of, indicators, mcnemar_exact, metric_values, select_contrast_type,
)
from ..rows.schema import ensure_valid
from ..vocab.sides import favours_minority
from ..inference.stats import (
    ALPHA, FEW_CLUSTERS, BootstrapOptions, PairedInterval, bootstrap_estimate, holm, jackknife_se,
    jackknife_weights, resample_weights, t_p_value,
)

from ..inference.decision import (
    ACCURACY_MARGIN, EQUIVALENCE_MARGIN, REFUSAL_MARGIN, VERDICTS, beats_control as _beats, change_verdict,
    degradation, family_label, holm_within, rankable,
)

COLUMNS = ("arm", "metric", "stat", "value", "ci_low", "ci_high", "n", "n_scenarios", "refusal_flag",
           "overshoot", "verdict", "band_low", "band_high", "n_controls", "control_flagged", "note",
           "sign", "sign_source", "beats_control", "p_value", "p_holm", "family", "accuracy_flag", "flag")
"""The columns of :func:`score_arms`'s table."""
INTERVALS = get_args(PairedInterval)
"""The paired intervals: ``jackknife-t`` (default, chosen by null coverage at 10 and 24 scenarios,
docs/METRICS.md) and ``percentile`` (the percentile cluster bootstrap, kept as an option)."""
MIN_CONTROLS = 20
"""Controls needed for their 2.5-97.5% quantiles to be a 95% band of random directions."""
DEFAULT_SIGN_SOURCE = "default +1"
HOLM_FAMILIES = ("change", "change_minus_control", "change_minus_scrambled", "accuracy_loss")
"""The stats whose p-values are Holm-adjusted, each within a family per metric across the method arms (random
and scrambled controls and the baseline are no family members); the ``family`` column names it."""
SCRAMBLED_SUFFIX = "-scrambled"
"""A scrambled control's arm name: the arm's name plus this suffix (:func:`scrambled`)."""
_REF = COMPONENTS.index("refusal")
_ACC = COMPONENTS.index("acc")


def counted_choices(df: pd.DataFrame) -> np.ndarray:
    """Each row's choice with refusals resolved as the comparison counts them (object array of 'A', 'B', None).

    A refused (or unparseable) GT row gets the wrong slot; a refused pressured AMB row gets the slot on its
    baseline's side (no shift; None when the baseline was refused too); a refused AMB baseline row and
    excluded rows stay None."""
    df = ensure_valid(df)
    choice = choices(df)
    out = choice.copy()
    refused = np.array([c is None for c in choice]) & ~df["excluded"].to_numpy(bool)
    gt = (df["condition"] == "GT").to_numpy()
    wrong = np.where(df["correct_slot"].to_numpy(object) == "A", "B", "A")
    out[refused & gt] = wrong[refused & gt]
    index = {iid: i for i, iid in enumerate(df["item_id"].tolist())}
    pressured = df["pressured"].to_numpy(bool)
    bidx = np.array([index.get(b, -1) if p else -1 for b, p in zip(df["baseline_id"].tolist(), pressured)], int)
    mslot, pol = df["minority_slot"].to_numpy(object), df["question_polarity"].to_numpy(object)
    safe = np.where(bidx >= 0, bidx, 0)
    b_answered = (bidx >= 0) & np.array([choice[i] is not None for i in safe])
    b_fav = favours_minority(choice[safe], mslot[safe], pol[safe])
    a_fav = favours_minority(np.full(len(df), "A", object), mslot, pol)
    same_side = np.where(b_fav == a_fav, "A", "B")
    amb = refused & ~gt & pressured & b_answered
    out[amb] = same_side[amb]
    return out


def counted_indicators(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """:func:`evenhand.scoring.metrics.indicators` on :func:`counted_choices`, with the refusal component of the
    original answers (numerator: refused or unparseable; denominator: every non-excluded row)."""
    df = ensure_valid(df)
    refused = np.array([c is None for c in choices(df)]) & ~df["excluded"].to_numpy(bool)
    N, D = indicators(df.assign(choice=counted_choices(df)))
    D[:, _REF] = ~df["excluded"].to_numpy(bool)
    N[:, _REF] = refused
    return N, D


@dataclass(frozen=True)
class Arms:
    """Arms aligned on the same items: row indicators ``N``, ``D`` (arms x items x components), each item's
    scenario ``codes`` into ``clusters``, and per-scenario sums ``Ns``, ``Ds`` (arms x scenarios x components)."""
    names: tuple[str, ...]
    item_ids: tuple[str, ...]
    clusters: tuple[str, ...]
    codes: np.ndarray
    N: np.ndarray
    D: np.ndarray
    Ns: np.ndarray
    Ds: np.ndarray
    contrast_type: str
    declined: np.ndarray | None = None
    """Per-scenario counts (arms x scenarios) of the refusal component's rows the model declined (verdict
    ``refusal``); the rest of that component's numerator is ``unparsed`` (no verdict found)."""

    def at(self, name: str) -> int:
        """The index of arm ``name``."""
        return self.names.index(name)


def align_arms(arms: Mapping[str, pd.DataFrame], contrast_type: str | None = None) -> Arms:
    """Counted indicators of every arm on the same items (one contrast type; the first arm's choice), in
    the first arm's item order. Raises ValueError naming an arm whose items differ from the first's."""
    names = tuple(arms)
    if not names:
        raise ValueError("no arms to align")
    first, ctype, _ = select_contrast_type(ensure_valid(arms[names[0]]), contrast_type)
    ids = first["item_id"].astype(str).tolist()
    Ns, Ds, Vs = [], [], []
    for name in names:
        df, _, _ = select_contrast_type(ensure_valid(arms[name]), ctype)
        if sorted(df["item_id"].astype(str)) != sorted(ids):
            raise ValueError(f"arm {name!r} answered other items than arm {names[0]!r}: a paired comparison needs "
                             "the same items in every arm")
        df = df.set_index(df["item_id"].astype(str)).loc[ids].reset_index(drop=True)
        n, d = counted_indicators(df)
        Ns.append(n)
        Ds.append(d)
        Vs.append(n[:, _REF].astype(bool) & (_metrics.verdicts(df) == "refusal"))
    codes, uniq = pd.factorize(first["scenario_id"], sort=True)
    N, D = np.stack(Ns), np.stack(Ds)
    onehot = np.zeros((len(uniq), len(ids)))
    onehot[codes, np.arange(len(ids))] = 1.0
    return Arms(names, tuple(ids), tuple(map(str, uniq)), codes, N, D, np.einsum("si,aic->asc", onehot, N),
                np.einsum("si,aic->asc", onehot, D), ctype, np.einsum("si,ai->as", onehot, np.stack(Vs).astype(float)))


def _entered(arms: Arms, idx: Sequence[int], metric: str, both: bool = False) -> tuple[int, int]:
    """(items, scenarios) entering ``metric`` in any of the arms ``idx`` (in all of them when ``both``)."""
    cols = [COMPONENTS.index(c) for c in components_of(metric)]
    per_arm = arms.D[list(idx)][:, :, cols].sum(-1) > 0
    rows = per_arm.all(0) if both else per_arm.any(0)
    return int(rows.sum()), int(len(np.unique(arms.codes[rows])))


def _row(arm: str, metric: str, stat: str, est, n: tuple[int, int], **extra) -> dict:
    value, lo, hi, note = est[:4]
    p = est[4] if len(est) > 4 else None
    return {"arm": arm, "metric": metric, "stat": stat, "value": value, "ci_low": lo, "ci_high": hi, "n": n[0],
            "n_scenarios": n[1], "note": note, "p_value": p, **extra}


def _clean(x):
    return None if x is None else float(x) + 0.0  # + 0.0: no -0.0


def _boot_p(draws: np.ndarray) -> float:
    ok = draws[np.isfinite(draws)]
    if ok.size == 0:
        return float("nan")
    return float(min(1.0, 2 * min(np.mean(ok <= 0), np.mean(ok >= 0))))


@dataclass(frozen=True)
class _Grid:
    """The weight rows every statistic is evaluated on: row 0 the data, rows 1..k the delete-one-scenario
    jackknife, then (percentile) the R bootstrap resamples."""
    k: int
    interval: str
    boot: np.ndarray  # (R, k) multiplicities

    @staticmethod
    def make(k: int, interval: str, resamples: int, seed: int) -> "_Grid":
        boot = resample_weights(k, resamples, seed) if interval == "percentile" else np.zeros((0, k))
        return _Grid(k, interval, boot)

    def weights(self) -> np.ndarray:
        return np.vstack([np.ones((1, self.k)), jackknife_weights(self.k), self.boot])

    def parts(self, vals: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        R = len(self.boot)
        return vals[0], vals[1:1 + self.k], vals[1 + self.k:1 + self.k + R]


def _interval(vals: np.ndarray, grid: _Grid, held: np.ndarray, what: str, alpha: float,
              extra_var: float = 0.0, extra_df: float = np.inf) -> tuple:
    """(value, ci_low, ci_high, note, p) of a statistic evaluated on the grid's rows. ``held``: the scenarios
    holding its items (the jackknife's k); ``extra_var`` (with ``extra_df``): a variance added to the
    scenario-resampling one (the spread of random directions), combined with Welch-Satterthwaite.

    Intervals (``interval=``): ``jackknife-t`` (default) - the delete-one-scenario jackknife SE of each
    statistic (all arms leave the same scenario out, so differences are paired) with a t quantile on k-1
    degrees of freedom, k the scenarios holding the statistic's items; ``percentile`` - the percentile cluster
    bootstrap on shared resamples, which under-covers at 10-24 scenarios (docs/METRICS.md, coverage table).
    ``p``: the two-sided t test of the same SE; ``p_holm`` adjusts it within the families of
    :data:`HOLM_FAMILIES`."""
    from scipy.stats import t as student_t

    point, loo, draws = grid.parts(np.asarray(vals, np.float64))
    if not np.isfinite(point):
        return None, None, None, f"insufficient data for {what}", None
    if grid.interval == "percentile":
        e = bootstrap_estimate(float(point), draws, 0, what, alpha)
        return _clean(e.value), _clean(e.ci_low), _clean(e.ci_high), e.note, _boot_p(draws - point)
    loo = loo[held]
    k = int(loo.size)
    if k < 2:
        return _clean(point), None, None, f"no interval: {what} rests on {k} scenario", None
    if not np.isfinite(loo).all():
        alone = int((~np.isfinite(loo)).sum())
        return _clean(point), None, None, (f"no interval: {alone} of {k} scenarios hold all of a component's items, "
                                           f"so leaving one out leaves {what} undefined"), None
    var_s = jackknife_se(loo) ** 2
    var = var_s + extra_var
    if extra_var > 0:
        den = var_s ** 2 / (k - 1) + (extra_var ** 2 / extra_df if np.isfinite(extra_df) else 0.0)
        df = var ** 2 / den if den > 0 else float(k - 1)
    else:
        df = float(k - 1)
    se = float(np.sqrt(var))
    half = float(student_t.ppf(1 - alpha / 2, df)) * se
    note = f"only {k} scenarios: the interval is approximate" if k < FEW_CLUSTERS else None
    return _clean(point), _clean(point - half), _clean(point + half), note, t_p_value(float(point), se, df)


def _held(A: "Arms", idx: Sequence[int], metric: str) -> np.ndarray:
    cols = [COMPONENTS.index(c) for c in components_of(metric)]
    return (A.Ds[list(idx)][:, :, cols].sum(-1) > 0).any(0)


def _refusal_split(A: "Arms", W: np.ndarray, sums_d: np.ndarray) -> dict[str, np.ndarray]:
    """The refusal rate split into ``declined`` (the model declined: verdict ``refusal``) and ``unparsed`` (no
    verdict found), each arms x grid rows on the refusal component's denominator; the two sum to its rate."""
    den = sums_d[:, :, _REF]
    ref = np.einsum("rs,as->ar", W, A.Ns[:, :, _REF])
    dec = np.einsum("rs,as->ar", W, A.declined)
    with np.errstate(invalid="ignore", divide="ignore"):
        return {"declined": np.where(den > 0, dec / den, np.nan), "unparsed": np.where(den > 0, (ref - dec) / den, np.nan)}


def sign_flip_p(diffs: np.ndarray, resamples: int, seed: int) -> float:
    """Two-sided sign-flip permutation p-value for the sum of per-scenario differences ``diffs`` (every sign
    pattern when there are at most 16 scenarios, else ``resamples`` random patterns, seeded)."""
    diffs = np.asarray(diffs, np.float64)
    observed = abs(diffs.sum())
    if observed == 0:
        return 1.0
    k = len(diffs)
    if k <= 16:
        signs = 1 - 2 * ((np.arange(2 ** k)[:, None] >> np.arange(k)) & 1)
        return float(np.mean(np.abs(signs @ diffs) >= observed - 1e-12))
    signs = np.random.default_rng(seed).choice([-1.0, 1.0], size=(resamples, k))
    return float((1 + np.sum(np.abs(signs @ diffs) >= observed - 1e-12)) / (1 + resamples))


def baseline_signs(responses: pd.DataFrame, contrast_type: str | None = None) -> dict[str, float]:
    """The sign (+1 or -1; +1 where the gap is 0 or undefined) of each asymmetry metric's gap on a response
    table, refusals counted as :func:`score_arms` counts them.

    Apply it to the baseline's answers on the VALIDATION scenarios and pass the result as ``signs=`` (with
    ``sign_source="validation baseline"``); never to the held-out baseline that is being scored: a sign
    taken from the data scored aligns the baseline's noise with the change and pushes null arms toward
    "reduction"."""
    df, _, _ = select_contrast_type(ensure_valid(responses), contrast_type)
    if len(df) == 0:
        raise ValueError("baseline_signs: no rows of the selected contrast type")
    N, D = counted_indicators(df)
    n, d = N.sum(0), D.sum(0)
    out = {}
    for m in _metrics.ASYMMETRY:
        g = float(metric_values(n, d, m)) - _metrics.FAIR[m]
        out[m] = -1.0 if np.isfinite(g) and g < 0 else 1.0
    return out


def _signs(signs: Mapping[str, float] | None, sign_source) -> tuple[dict[str, float], dict[str, str]]:
    """Each asymmetry metric's aligned sign ``s`` and its ``sign_source`` (the column says which).

    ``s`` is fixed before the held-out data are seen, never taken from the data scored: ``signs=`` (a declared
    or planted direction, or :func:`baseline_signs` of the baseline on the *validation* scenarios), else +1
    (the gap's positive direction, toward the minority-coded candidate, docs/METRICS.md). Aligning to the
    held-out baseline's own estimate pushes null arms toward "reduction" (the baseline's noise is counted as
    removable gap)."""
    sign = {m: 1.0 for m in _metrics.ASYMMETRY}
    source = {m: DEFAULT_SIGN_SOURCE for m in _metrics.ASYMMETRY}
    signs = dict(signs or {})
    for m, v in signs.items():
        if m not in sign or v not in (1, -1):
            raise ValueError(f"signs: {m!r} must be an asymmetry metric ({', '.join(_metrics.ASYMMETRY)}) with +1 "
                             f"or -1")
        sign[m], source[m] = float(v), "declared"
    if sign_source is not None:
        given = {m: sign_source for m in signs} if isinstance(sign_source, str) else dict(sign_source)
        extra = [m for m in given if m not in signs]
        if extra:
            raise ValueError(f"sign_source names {', '.join(map(repr, extra))} without a sign in signs=: a source "
                             "describes a sign that is passed")
        for m, src in given.items():
            source[m] = str(src)
    return sign, source


def gt_accuracy(df: pd.DataFrame) -> float:
    """Accuracy on GT items without pressure, a refusal counted wrong (:func:`counted_indicators`)."""
    N, D = counted_indicators(df)
    return float(N[:, _ACC].sum() / D[:, _ACC].sum()) if D[:, _ACC].sum() else float("nan")


def scramble_share(loss: float, base_accuracy: float) -> float:
    """The share ``r`` of answers that, replaced by coin flips, costs ``loss`` of accuracy from
    ``base_accuracy`` in expectation: ``r (base_accuracy - 1/2) = loss``, clipped to [0, 1] (a loss beyond
    ``base_accuracy - 1/2`` cannot be reached by coin flips: 1)."""
    if not loss > 0:
        return 0.0
    room = base_accuracy - 0.5
    return 1.0 if not room > 0 else min(1.0, loss / room)


def scrambled(base: pd.DataFrame, share: float, seed) -> pd.DataFrame:
    """``base`` with a ``share`` of its non-excluded answers, drawn with ``seed``, replaced by coin flips
    (``choice`` and ``text``): a pure function of the saved responses. The draw is stratified to cut its noise
    without changing its expectation: ``round(share * n)`` rows of each stratum (condition x pressured or not),
    and within a stratum the flips are balanced (GT: half the correct slot, half the other; AMB: half A, half
    B; the odd one a fair coin), so the accuracy loss is ``share (accuracy - 1/2)`` up to which rows are drawn."""
    if not 0 <= share <= 1:
        raise ValueError(f"share must be in [0, 1], got {share}")
    rng = np.random.default_rng(seed)
    out = base.copy()
    keep = ~out["excluded"].to_numpy(bool) if "excluded" in out else np.ones(len(out), bool)
    pressured = out["pressure_id"].notna() if "pressure_id" in out else out["pressured"].astype(bool)
    stratum = out["condition"].astype(str) + "|" + pressured.astype(str)
    new = (out["choice"] if "choice" in out else pd.Series(choices(out), index=out.index)).to_numpy(object).copy()
    picked = []  # rows holding only text (an answers file, a simulated run) get their parsed choice first
    for name in sorted(set(stratum[keep])):
        rows = np.flatnonzero(keep & (stratum == name).to_numpy())
        pick = rng.choice(rows, round(share * len(rows)), replace=False)
        half = np.arange(len(pick)) < len(pick) // 2
        if len(pick) % 2:
            half[-1] = rng.random() < 0.5
        half = rng.permutation(half)
        if name.startswith("GT"):
            right = out["correct_slot"].to_numpy(object)[pick]
            new[pick] = np.where(half, right, np.where(right == "A", "B", "A"))
        else:
            new[pick] = np.where(half, "A", "B")
        picked.append(pick)
    pick = np.concatenate(picked) if picked else np.array([], int)
    out["choice"] = new
    if "text" in out:
        text = out["text"].to_numpy(object).copy()
        text[pick] = new[pick]
        out["text"] = text
    if "parse_verdict" in out:
        verdict = out["parse_verdict"].to_numpy(object).copy()
        verdict[pick] = "choice"
        out["parse_verdict"] = verdict
    return out


def scrambled_arms(arms: Mapping[str, pd.DataFrame], baseline: str, skip: set, margin: float,
                   seed: int) -> dict[str, pd.DataFrame]:
    """For each arm (not ``baseline``, not in ``skip``) whose accuracy loss (point) exceeds ``margin``: its
    scrambled control ``<arm>-scrambled``, the baseline's answers with the share that costs the same accuracy
    (:func:`scramble_share`) replaced by balanced coin flips, stratified and seeded by ``seed`` and the arm's
    name (:func:`scrambled`). The share is taken from the arm's loss on the items scored and held fixed."""
    import zlib
    base_acc = gt_accuracy(arms[baseline])
    out = {}
    for name, df in arms.items():
        if name == baseline or name in skip or name.endswith(SCRAMBLED_SUFFIX):
            continue
        loss = base_acc - gt_accuracy(df)
        if np.isfinite(loss) and loss > margin:
            out[name + SCRAMBLED_SUFFIX] = scrambled(arms[baseline], scramble_share(loss, base_acc),
                                                     [seed, zlib.crc32(name.encode())])
    return out


def score_arms(arms: Mapping[str, pd.DataFrame], baseline: str, controls: Mapping[str, Sequence[str]] | None = None,
               resamples: int | None = None, seed: int | None = None, refusal_margin: float = REFUSAL_MARGIN,
               contrast_type: str | None = None, alpha: float = ALPHA,
               signs: Mapping[str, float] | None = None, sign_source: str | Mapping[str, str] | None = None,
               interval: PairedInterval | None = None, bootstrap: BootstrapOptions | None = None,
               accuracy_margin: float = ACCURACY_MARGIN, equivalence_margin: float = EQUIVALENCE_MARGIN,
               scramble: bool = True, scramble_margin: float | None = None) -> pd.DataFrame:
    """The paired comparison of every arm with ``baseline`` (and with its random ``controls``: arm -> control
    arm names), as one tidy table with :data:`COLUMNS` (stats as below; values are fractions).

    For each asymmetry metric (FragGap, TieShift, AccGap, TieLean - 0.5), with ``g`` = metric - its even-handed
    value and ``s`` its aligned sign (:func:`_signs`): ``gap`` is the arm's remaining gap ``g(arm)`` with its
    CI; ``change`` = ``s * (g(baseline) - g(arm))``, the signed paired change, positive = toward zero (for a
    baseline on the aligned side); unlike ``|g(baseline)| - |g(arm)|`` it is unbiased; ``change_fraction`` =
    ``1 - g(arm) / g(baseline)`` (0.5 = half the gap removed); ``overshoot`` (:func:`_changes`). ``n`` of every
    difference is the number of items that entered it (in either arm), ``n_scenarios`` the number of scenarios
    they come from (:func:`_entered`). Intervals and p-values: :func:`_interval`.

    Rows per arm: ``gap`` (asymmetry metrics) and ``rate`` (accuracy, refusal) for every arm including the
    baseline; for the others ``change``, ``change_fraction``, ``accuracy_loss`` (its p-value from the same
    jackknife-t as its CI), ``accuracy_p_cluster`` (a sign-flip permutation test, a cross-check), ``mcnemar_p``,
    ``refusal_change``; for arms with controls ``change_minus_control``, ``accuracy_loss_minus_control`` and
    ``control_change`` (the controls' mean change), each with the 2.5-97.5% quantiles of the per-control changes
    in ``band_low``/``band_high`` and ``n_controls`` (a note when there are fewer than :data:`MIN_CONTROLS`: then
    it is not a 95% band), and ``beats_control``. The interval of ``change_minus_control`` adds the spread of
    random directions: it is a *prediction* interval for the arm minus a new random direction.

    Flags (:func:`evenhand.inference.decision.degradation`, on every row of an arm): ``refusal_flag`` (the refusal
    rise's
    point above ``refusal_margin``), ``accuracy_flag`` (the accuracy loss's, above ``accuracy_margin``);
    ``flag`` says which and how sure (``degraded``: the CI above the margin; ``possibly degraded``: only the
    point). When ``scramble``, every arm (not a control) whose accuracy loss exceeds ``scramble_margin`` (default
    ``accuracy_margin``) gets a
    scrambled control ``<arm>-scrambled`` (:func:`scrambled_arms`) and a ``change_minus_scrambled`` row per
    metric. Verdicts, Holm families and the beats-control mark are :mod:`evenhand.inference.decision`'s: Holm within
    each
    (stat, metric) across the method arms (``family``); ``reduction`` needs the Holm-adjusted p below ``alpha``,
    no flag, and a change above the scrambled control's where there is one; ``no change`` a CI inside +-
    ``equivalence_margin`` of the baseline gap's size; a flagged arm never beats its controls.

    ``signs``: the direction each asymmetry metric's gap is aligned to (+1: positive = toward the minority),
    fixed before the held-out data are seen (a planted or pre-registered direction, or :func:`baseline_signs`
    of a validation baseline); metrics not given get +1. The signs are never taken from the arms scored.
    ``sign_source``: what the ``sign_source`` column says of the given signs (a string for all, or metric ->
    string; default "declared"; "default +1" for the others). ``interval``: ``jackknife-t`` (default) or
    ``percentile`` (:data:`INTERVALS`); ``resamples`` and ``seed`` drive the percentile bootstrap, the
    sign-flip tests and the scrambled controls. ``bootstrap`` (:class:`~evenhand.inference.stats.BootstrapOptions`)
    gives
    all three; the keywords ``resamples``, ``seed`` and ``interval`` still work and win."""
    boot = BootstrapOptions.of(bootstrap, resamples, seed)
    resamples, seed = boot.resamples, boot.seed
    interval = interval or boot.interval or "jackknife-t"
    if baseline not in arms:
        raise ValueError(f"baseline arm {baseline!r} not among the arms")
    if interval not in INTERVALS:
        raise ValueError(f"interval must be one of {', '.join(INTERVALS)}, got {interval!r}")
    controls = dict(controls or {})
    for arm, ctl in controls.items():
        missing = [c for c in (arm, *ctl) if c not in arms]
        if missing:
            raise ValueError(f"controls name arms that are not there: {', '.join(map(repr, missing))}")
    ctl_arms = {c for cs in controls.values() for c in cs}
    trigger = accuracy_margin if scramble_margin is None else scramble_margin
    scr = scrambled_arms(arms, baseline, ctl_arms, trigger, seed) if scramble else {}
    arms = {**arms, **scr}
    sign, source = _signs(signs, sign_source)
    A = align_arms(arms, contrast_type)
    k = len(A.clusters)
    grid = _Grid.make(k, interval, resamples, seed)
    boot = grid.boot
    W = grid.weights()  # row 0: the data
    sums_n, sums_d = np.einsum("rs,asc->arc", W, A.Ns), np.einsum("rs,asc->arc", W, A.Ds)
    gaps = {m: metric_values(sums_n, sums_d, m) - _metrics.FAIR[m] for m in _metrics.ASYMMETRY}
    rates = {m: metric_values(sums_n, sums_d, m) for m in ("accuracy", "refusal")}
    split = _refusal_split(A, W, sums_d)
    b = A.at(baseline)
    rows: list[dict] = []
    ref_flag: dict[str, str | None] = {}
    acc_flag: dict[str, str | None] = {}
    for a, name in enumerate(A.names):
        for m in _metrics.ASYMMETRY + ("accuracy", "refusal"):
            e = _metrics.metric_estimate(m, A.Ns[a], A.Ds[a], boot, alpha,
                                   "percentile" if interval == "percentile" else "jackknife-t")
            shift = _metrics.FAIR.get(m, 0.0)
            est = (_clean(None if e.value is None else e.value - shift),
                   _clean(None if e.ci_low is None else e.ci_low - shift),
                   _clean(None if e.ci_high is None else e.ci_high - shift), e.note)
            extra = {"sign": sign[m], "sign_source": source[m]} if m in _metrics.ASYMMETRY else {}
            rows.append(_row(name, m, "gap" if m in _metrics.ASYMMETRY else "rate", est, _entered(A, [a], m),
                             **extra))
        for part, r in split.items():
            rows.append(_row(name, "refusal", f"{part}_rate", _interval(r[a], grid, _held(A, [a], "refusal"),
                                                                      f"the {part} rate", alpha),
                             _entered(A, [a], "refusal")))
        if a == b:
            ref_flag[name] = acc_flag[name] = None
            continue
        dref = rates["refusal"][a] - rates["refusal"][b]
        ref_est = _interval(dref, grid, _held(A, [a, b], "refusal"), "the difference", alpha)
        ref_flag[name] = degradation(ref_est[0], ref_est[1], ref_est[2], refusal_margin)
        rows.append(_row(name, "refusal", "refusal_change", ref_est, _entered(A, [a, b], "refusal", both=True)))
        for part, r in split.items():
            rows.append(_row(name, "refusal", f"{part}_change",
                             _interval(r[a] - r[b], grid, _held(A, [a, b], "refusal"), "the difference", alpha),
                             _entered(A, [a, b], "refusal", both=True)))
        rows += _changes(A, a, b, gaps, sign, source, grid, alpha)
        acc_rows = _accuracy(A, a, b, rates["accuracy"], resamples, seed, grid, alpha)
        loss = acc_rows[0]
        acc_flag[name] = degradation(loss["value"], loss["ci_low"], loss["ci_high"], accuracy_margin)
        rows += acc_rows
        if name + SCRAMBLED_SUFFIX in arms:
            rows += _versus_scrambled(A, a, A.at(name + SCRAMBLED_SUFFIX), gaps, sign, source, grid, alpha)
    for name, ctl in controls.items():
        if ctl:
            flagged = sum(bool(ref_flag[c]) for c in ctl)
            for r in _versus_controls(A, A.at(name), [A.at(c) for c in ctl], b, gaps, rates["accuracy"], sign,
                                      source, grid, alpha):
                note = f"{flagged} of {len(ctl)} controls refusal-flagged" if flagged else None
                r["note"] = "; ".join(x for x in (r["note"], note) if x) or None
                rows.append({**r, "control_flagged": bool(flagged)})
    out = pd.DataFrame(rows).reindex(columns=list(COLUMNS))
    out["refusal_flag"] = out["arm"].map(lambda x: bool(ref_flag.get(x))).astype(bool)
    out["accuracy_flag"] = out["arm"].map(lambda x: bool(acc_flag.get(x))).astype(bool)
    out["flag"] = out["arm"].map({n: _flag_text(ref_flag[n], acc_flag[n], refusal_margin, accuracy_margin)
                                  for n in A.names})
    out["overshoot"] = out["overshoot"].eq(True)
    out["control_flagged"] = out["control_flagged"].eq(True)
    out["p_value"] = out["p_value"].astype(float)
    fam = out["stat"].isin(HOLM_FAMILIES) & ~out["arm"].isin(ctl_arms | set(scr) | {baseline})
    keys = [(st, m) if f else None for st, m, f in zip(out["stat"], out["metric"], fam)]
    out["p_holm"] = holm_within(np.where(fam, out["p_value"], np.nan), keys)
    sizes = pd.Series([k for k in keys if k is not None]).value_counts().to_dict()
    out["family"] = [family_label(k[0], k[1], sizes[k]) if k is not None else None for k in keys]
    return _decide(out, ref_flag, acc_flag, alpha, equivalence_margin, baseline)


def _flag_text(ref: str | None, acc: str | None, refusal_margin: float, accuracy_margin: float) -> str | None:
    parts = [f"{lvl}: refusal rise above {100 * refusal_margin:g} pp" + (" (CI)" if lvl == "degraded" else
                                                                         " (point; CI reaches below)")
             for lvl in (ref,) if lvl]
    parts += [f"{lvl}: accuracy loss above {100 * accuracy_margin:g} pp" + (" (CI)" if lvl == "degraded" else
                                                                           " (point; CI reaches below)")
              for lvl in (acc,) if lvl]
    return "; ".join(parts) or None


def _decide(out: pd.DataFrame, ref_flag: dict, acc_flag: dict, alpha: float, margin: float,
            baseline: str) -> pd.DataFrame:
    """The verdicts and beats-control marks of a scored table (:mod:`evenhand.inference.decision`), read from its rows;
    ``_changes`` left ``overshoot`` in ``verdict`` where the remaining gap's CI lies wholly past zero."""
    idx = {(a, m, st): i for i, (a, m, st) in enumerate(zip(out["arm"], out["metric"], out["stat"]))}

    def cell(a, m, st, col):
        i = idx.get((a, m, st))
        return None if i is None else out.iloc[i][col]

    def scr_ok(a, m):
        if (a, m, "change_minus_scrambled") not in idx:
            return None
        lo = cell(a, m, "change_minus_scrambled", "ci_low")
        return bool(lo is not None and lo == lo and lo > 0)

    def scale(m):
        g = cell(baseline, m, "gap", "value")
        return None if g is None or g != g else abs(float(g))
    verdicts, beats = [], []
    for r in out.itertuples(index=False):
        if r.stat == "change":
            verdicts.append(change_verdict(r.value, r.ci_low, r.ci_high, r.p_holm, refusal_flag=ref_flag.get(r.arm),
                                           accuracy_flag=acc_flag.get(r.arm), overshoot=r.verdict == "overshoot",
                                           scale=scale(r.metric), margin=margin,
                                           beats_scrambled=scr_ok(r.arm, r.metric), alpha=alpha))
        else:
            verdicts.append(None)
        if r.stat == "change_minus_control":
            flagged = bool(ref_flag.get(r.arm) or acc_flag.get(r.arm))
            beats.append(_beats(cell(r.arm, r.metric, "change", "value"), r.band_high, r.ci_low, flagged,
                                scr_ok(r.arm, r.metric)))
        else:
            beats.append(False)
    out["verdict"] = verdicts
    out["beats_control"] = beats
    return out


def _versus_scrambled(A: Arms, a: int, c: int, gaps: dict, sign: dict, source: dict, grid: "_Grid",
                      alpha: float) -> list[dict]:
    """The arm's change minus its scrambled control's (paired, the same draws): how much of its change coin
    flips at its own accuracy cost give too (positive: the arm moves the gap further toward zero)."""
    rows = []
    for m in _metrics.ASYMMETRY:
        s = sign[m]
        vs = _interval(s * (gaps[m][c] - gaps[m][a]), grid, _held(A, [a, c], m), "the contrast", alpha)
        rows.append(_row(A.names[a], m, "change_minus_scrambled", vs, _entered(A, [a, c], m), sign=s,
                         sign_source=source[m]))
    return rows


def _changes(A: Arms, a: int, b: int, gaps: dict, sign: dict, source: dict, grid: _Grid,
             alpha: float) -> list[dict]:
    """The ``change`` and ``change_fraction`` rows of arm ``a`` against baseline ``b``, per asymmetry metric.

    ``overshoot`` (column): the remaining gap's point estimate lies past zero, on the side opposite the aligned
    sign; the verdict is ``overshoot`` (never a reduction) when its CI lies wholly there. :func:`ranking`
    orders reductions by the remaining gap's size ``|g(arm)|``, so an overshoot is never rewarded."""
    rows = []
    for m in _metrics.ASYMMETRY:
        g_a, g_b, s = gaps[m][a], gaps[m][b], sign[m]
        n = _entered(A, [a, b], m)
        held = _held(A, [a, b], m)
        change = _interval(s * (g_b - g_a), grid, held, "the change", alpha)
        remaining = _interval(g_a, grid, _held(A, [a], m), "the gap", alpha)
        lo, hi = remaining[1], remaining[2]
        past = bool(np.isfinite(g_a[0]) and s * g_a[0] < 0)  # the remaining gap past zero (point estimate)
        wholly = lo is not None and (hi < 0 if s > 0 else lo > 0)  # ... with its CI wholly there
        verdict = "overshoot" if wholly else None  # the verdict itself: _decide, after the Holm adjustment
        base_ci = _interval(g_b, grid, _held(A, [b], m), "the gap", alpha)
        notes = [change[3]]
        if np.isfinite(g_b[0]) and s * g_b[0] < 0:
            notes.append(f"the held-out baseline's gap ({100 * g_b[0]:+.1f} pp) lies on the other side of the "
                         f"aligned sign ({s:+.0f}, {source[m]}): the change is measured toward that sign")
        elif base_ci[1] is not None and base_ci[1] <= 0 <= base_ci[2]:
            notes.append(f"the held-out baseline gap's CI covers 0: it may lie on the other side of the aligned "
                         f"sign ({s:+.0f}, {source[m]})")
        note = "; ".join(x for x in notes if x) or None
        extra = {"sign": s, "sign_source": source[m], "overshoot": past}
        rows.append(_row(A.names[a], m, "change", change[:3] + (note, change[4]), n, verdict=verdict, **extra))
        with np.errstate(invalid="ignore", divide="ignore"):
            frac = _interval(1 - g_a / g_b, grid, held, "the fraction", alpha)
        rows.append(_row(A.names[a], m, "change_fraction", frac[:4], n, **extra))
    return rows


def _accuracy(A: Arms, a: int, b: int, acc: np.ndarray, resamples: int, seed: int, grid: _Grid,
              alpha: float) -> list[dict]:
    """Accuracy (GT items without pressure): ``accuracy_loss`` = Acc(baseline) - Acc(arm) with a paired CI, a
    sign-flip permutation test over scenarios (``accuracy_p_cluster``) and the exact McNemar test on the same
    items (``mcnemar_p``), both counting refusals as wrong."""
    n = _entered(A, [a, b], "accuracy", both=True)
    name = A.names[a]
    both = (A.D[a, :, _ACC] > 0) & (A.D[b, :, _ACC] > 0)
    cb, ca = A.N[b, both, _ACC] > 0, A.N[a, both, _ACC] > 0
    per_scenario = np.bincount(A.codes[both], weights=cb.astype(float) - ca, minlength=len(A.clusters))
    p_cluster = sign_flip_p(per_scenario, resamples, seed)
    loss = _interval(acc[b] - acc[a], grid, _held(A, [a, b], "accuracy"), "the difference", alpha)
    rows = [_row(name, "accuracy", "accuracy_loss", loss, n)]  # its test: the same jackknife-t as its CI
    rows.append(_row(name, "accuracy", "accuracy_p_cluster", (p_cluster, None, None,
                     "sign-flip permutation over scenarios, refusals wrong"), n))
    rows.append(_row(name, "accuracy", "mcnemar_p", (mcnemar_exact(int((cb & ~ca).sum()), int((~cb & ca).sum())),
                                                     None, None, "exact McNemar on items, refusals wrong"), n))
    return rows


PREDICTION_NOTE = "a prediction interval: the arm minus one new random direction"
"""What the interval of ``change_minus_control`` is: the scenario variance plus (1 + 1/J) times the controls'
between-direction variance, so it covers the arm minus a *new* random direction (measured 0.98-0.997 on
exchangeable nulls: conservative as a CI of the mean contrast)."""


def _spread(points: np.ndarray) -> tuple[float, float]:
    """(extra variance, its degrees of freedom) of the arm minus one random control: the between-direction
    variance of the controls' point values, times (1 + 1/J) (a new direction, against the mean of J)."""
    J = len(points)
    if J < 2 or not np.isfinite(points).all():
        return 0.0, np.inf
    return float(np.var(points, ddof=1) * (1 + 1 / J)), float(J - 1)


def _band(each: np.ndarray) -> tuple:
    if not np.isfinite(each).all():
        return None, None
    lo, hi = np.quantile(each, [0.025, 0.975])
    return float(lo) + 0.0, float(hi) + 0.0


def _band_note(J: int) -> str | None:
    if J >= MIN_CONTROLS:
        return None
    return (f"only {J} control{'s' if J != 1 else ''}: band_low/band_high are the 2.5-97.5% quantiles of "
            f"{J} changes, not a 95% band of random directions (needs {MIN_CONTROLS})")


def _versus_controls(A: Arms, a: int, ctl: list[int], b: int, gaps: dict, acc: np.ndarray, sign: dict,
                     source: dict, grid: _Grid, alpha: float) -> list[dict]:
    """Arm ``a`` against the random controls ``ctl`` of the same method (same sites, norm, strength; one per
    seed): ``change_minus_control`` = ``s * (mean_j g(control_j) - g(arm))``, with an interval for the arm minus
    a *random* control direction (scenario-resampling variance plus the between-direction variance of the
    controls' gaps, Welch degrees of freedom: :func:`_spread`, :data:`PREDICTION_NOTE`); the 2.5-97.5%
    quantiles of the per-control changes in ``band_low``/``band_high``; ``beats_control`` (set by
    :func:`_decide`) only when the arm's change lies above that band and the interval excludes 0."""
    name, rows, J = A.names[a], [], len(ctl)
    band_note = _band_note(J)
    spread_note = None if J >= 2 else "one control: the spread of random directions is not measured"
    for m in _metrics.ASYMMETRY:
        s, g = sign[m], gaps[m]
        n = _entered(A, [a, *ctl], m)
        held = _held(A, [a, *ctl], m)
        mean_ctl = g[ctl].mean(0)
        each = s * (g[b, 0] - g[ctl, 0])  # each control's change
        band = _band(each)
        ev, edf = _spread(g[ctl, 0]) if grid.interval == "jackknife-t" else (0.0, np.inf)
        vs = _interval(s * (mean_ctl - g[a]), grid, held, "the contrast", alpha, ev, edf)
        note = "; ".join(x for x in (vs[3], spread_note, band_note) if x) or None
        extra = {"sign": s, "sign_source": source[m], "band_low": band[0], "band_high": band[1], "n_controls": J}
        rows.append(_row(name, m, "change_minus_control", vs[:3] + (note, vs[4]), n, **extra))
        cc = _interval(s * (g[b] - mean_ctl), grid, _held(A, [b, *ctl], m), "the change", alpha)
        rows.append(_row(name, m, "control_change", cc[:3] + ("; ".join(x for x in (cc[3], band_note) if x) or None,),
                         _entered(A, [b, *ctl], m), **extra))
    mean_acc = acc[ctl].mean(0)
    ev, edf = _spread(acc[ctl, 0]) if grid.interval == "jackknife-t" else (0.0, np.inf)
    vs = _interval(mean_acc - acc[a], grid, _held(A, [a, *ctl], "accuracy"), "the contrast", alpha, ev, edf)
    band = _band(acc[b, 0] - acc[ctl, 0])
    rows.append(_row(name, "accuracy", "accuracy_loss_minus_control",
                     vs[:3] + ("; ".join(x for x in (vs[3], spread_note, band_note) if x) or None, vs[4]),
                     _entered(A, [a, *ctl], "accuracy", both=True), band_low=band[0], band_high=band[1],
                     n_controls=J))
    return rows


def ranking_table(table: pd.DataFrame, metric: str = "fraggap", by: str = "arm") -> pd.DataFrame:
    """The arms (column ``by``) whose ``change`` in ``metric`` is a reduction, ordered by the size of the
    remaining gap |g(arm)| (smallest first), with its CI (``abs_low``, ``abs_high``: the CI of g(arm) folded
    at zero), the signed remaining gap, the change and ``overshoot``. An overshoot counts by its size past
    zero, so a change larger than the baseline gap is never rewarded. Only a ``reduction`` verdict
    (:func:`evenhand.inference.decision.rankable`) is listed: never a flagged arm (refusals or accuracy, at either
    level),
    an overshoot, a change not significant after Holm within its family, or one not above its scrambled
    control."""
    ch = table[(table["stat"] == "change") & (table["metric"] == metric)]
    ch = ch[[rankable(v) for v in ch["verdict"]]]
    gap = table[(table["stat"] == "gap") & (table["metric"] == metric)].drop_duplicates(by).set_index(by)
    rows = []
    for r in ch.itertuples():
        key = getattr(r, by)
        g = gap.loc[key] if key in gap.index else None
        v, lo, hi = (None, None, None) if g is None else (g["value"], g["ci_low"], g["ci_high"])
        ok = lo is not None and hi is not None and lo == lo and hi == hi
        abs_lo = None if not ok else (0.0 if lo <= 0 <= hi else min(abs(lo), abs(hi)))
        abs_hi = None if not ok else max(abs(lo), abs(hi))
        rows.append({by: key, "remaining": None if v is None else abs(v), "abs_low": abs_lo, "abs_high": abs_hi,
                     "gap": v, "gap_low": lo, "gap_high": hi, "change": r.value, "overshoot": bool(r.overshoot)})
    out = pd.DataFrame(rows, columns=[by, "remaining", "abs_low", "abs_high", "gap", "gap_low", "gap_high", "change",
                                      "overshoot"])
    return out.sort_values("remaining", kind="stable", na_position="last").reset_index(drop=True)


def ranking(table: pd.DataFrame, metric: str = "fraggap", by: str = "arm") -> list[str]:
    """The arms (column ``by``) whose ``change`` in ``metric`` is a reduction, smallest remaining gap |g(arm)|
    first (:func:`ranking_table`): a flagged arm, an overshoot, a change not significant after Holm or not above
    its scrambled control is never ranked, and overshooting past zero counts as remaining gap."""
    return ranking_table(table, metric, by)[by].tolist()
