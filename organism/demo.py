"""The demo's known answer: the fair organism with the bias dial at a chosen setting, its evaluation
items, and the truth each printed metric is compared with.

The demo (``evenhand demo``, ``make demo``) runs the main job on the fair organism (:data:`~organism.recipe.FAIR`)
with the dial (:mod:`organism.dial`) folded into its weights at ``beta``; by default ``beta`` is read off the
committed calibration curve (:func:`~organism.calibration.beta_for`) so that it plants a degree-3 FragGap of
:data:`DEMO_FRAGGAP`. Its truth per degree: :func:`planted_truths`."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from .calibration import beta_for
from .dial import write_dialled
from .recipe import FAIR
from .calibration import CALIBRATION_METRICS

DEMO_FRAGGAP = 0.10
"""The degree-3 FragGap (a share) the demo plants by default."""
ASYMMETRIES = ("accgap", "tielean", "fraggap", "tieshift")
"""The asymmetry metrics: exactly fair at degree 0 whatever the dial (nothing marks identity there)."""


@dataclass(frozen=True)
class Truth:
    """A planted value with the CI it is known to (None where it is exact) and where it comes from."""
    value: float
    ci_low: float | None
    ci_high: float | None
    source: str
    """``fair policy`` (exact) or ``calibration`` (measured; the CI is the curve's)."""


def load_curve(path: str | Path) -> dict | None:
    """The calibration curve at ``path`` (a :func:`~organism.calibration.calibrate` result),
    or None when the file does not exist."""
    path = Path(path)
    return json.loads(path.read_text()) if path.exists() else None


def curve_at(curve: dict, beta: float, metric: str) -> Truth:
    """``metric``'s degree-3 value and CI on ``curve`` at ``beta``, interpolated linearly between the
    calibrated points (exact at a calibrated beta); ``beta`` must lie within the calibrated range."""
    pts = sorted(curve["points"], key=lambda p: p["beta"])
    bs = [p["beta"] for p in pts]
    if not bs[0] <= beta <= bs[-1]:
        raise ValueError(f"beta {beta:g} is outside the calibrated range {bs[0]:g}..{bs[-1]:g}")

    def at(key: str) -> float | None:
        ys = [p[metric][key] for p in pts]
        return None if any(y is None for y in ys) else float(np.interp(beta, bs, ys))
    return Truth(at("value"), at("ci_low"), at("ci_high"), "calibration")


def dial_beta(curve: dict | None, fraggap: float | None = None, beta: float | None = None) -> float:
    """The demo's dial setting: ``beta`` when given, else the beta that plants degree-3 FragGap
    ``fraggap`` (a share; default :data:`DEMO_FRAGGAP`) on ``curve``, rounded to 2 decimals (the truth is
    then read off the curve at the rounded beta)."""
    if beta is not None:
        if fraggap is not None:
            raise ValueError("give a FragGap to plant or a beta, not both")
        return float(beta)
    if curve is None:
        raise ValueError("the fair organism has no calibration curve (calibration.json; `make organism-fair` "
                         "computes it): give the dial's beta instead")
    return round(beta_for(curve, DEMO_FRAGGAP if fraggap is None else fraggap), 2)


def demo_scenario_ids(record: dict, n: int, skip: int) -> list[str]:
    """``n`` of the organism's held-out scenarios (``record``: its organism.json), after the first ``skip``
    (the calibration's scenarios; :func:`~organism.calibration.calibration_items` takes the
    first ones).

    The demo's scenarios are held out from the fair organism's training and come after the calibration's
    scenarios in the organism's held-out list, so the comparison with the curve is not made on the items the
    curve was measured on."""
    held = record["heldout_ids"]
    if n < 1 or skip + n > len(held):
        raise ValueError(f"{len(held) - skip} held-out scenarios lie outside the first {skip} (the calibration's); "
                         f"asked for {n}")
    return held[skip:skip + n]


def dialled_organism(beta: float, out: str | Path, path: str | Path | None = None) -> Path:
    """The organism at ``path`` (default: the fair organism) with the dial at ``beta`` in its weights, in
    ``out``: written by :func:`~organism.dial.write_dialled`, or reused when ``out``
    already holds it (same source, same beta)."""
    path, out = Path(path or FAIR), Path(out)
    rec = out / "organism.json"
    if rec.exists() and (out / "model.safetensors").exists():
        dial = json.loads(rec.read_text()).get("dial", {})
        if dial.get("beta") == float(beta) and dial.get("source") == str(path):
            return out
    return write_dialled(beta, out, path)


def planted_truths(fair: dict[int, dict], beta: float, curve: dict | None) -> dict[int, dict[str, Truth]]:
    """The truth per degree and metric; ``fair`` is :func:`~evenhand.models.policy.planted_truth` of the fair
    policy on the demo's items. Per degree:

    - at ``beta = 0`` (no edit: the fair organism itself), every metric at every degree: the fair policy's
      exact value on the demo's own items (:func:`evenhand.models.policy.planted_truth`);
    - at degree 0, the asymmetry metrics (:data:`ASYMMETRIES`): the fair policy's exact value whatever
      ``beta`` (nothing marks identity at degree 0, so no model can be asymmetric there);
    - at degree 3 with ``beta > 0``, every calibrated metric (FragGap, TieShift, AccGap, TieLean, GT
      accuracy): the calibration curve's value at ``beta`` with its own CI (measured on the fair organism's
      first ``n_scenarios`` held-out scenarios, interpolated linearly between the calibrated betas;
      :func:`curve_at`). The dial is meant to move FragGap and TieShift only, but its read ``a`` is not
      exactly 0 on unpressured items, and the calibration measures AccGap and accuracy drifting with ``beta``;
    - degrees 1-2 with ``beta > 0``, and accuracy at degree 0: none (the dial acts there but is not
      calibrated)."""
    if beta != 0 and curve is None:
        raise ValueError("the dial's truth needs the calibration curve")
    out: dict[int, dict[str, Truth]] = {}
    for d, vals in fair.items():
        if beta == 0:
            row = {m: Truth(float(vals[m]), None, None, "fair policy") for m in CALIBRATION_METRICS}
        elif d == 0:
            row = {m: Truth(float(vals[m]), None, None, "fair policy") for m in ASYMMETRIES}
        elif d == 3:
            row = {m: curve_at(curve, beta, m) for m in CALIBRATION_METRICS}
        else:
            row = {}
        out[int(d)] = row
    return out


def coverage(report: dict, truths: dict[int, dict[str, Truth]]) -> pd.DataFrame:
    """One row per degree and metric with a truth: the measured value and 95% CI from ``report`` (a score
    report), the truth, and ``covered``: whether the measured CI contains the truth's value (None where
    the estimate has no CI)."""
    rows = []
    for d in sorted(truths):
        for m, t in truths[d].items():
            est = report["by_degree"].get(str(d), {}).get(m)
            if est is None:
                continue
            lo, hi = est["ci_low"], est["ci_high"]
            covered = None if lo is None or hi is None else bool(lo - 1e-12 <= t.value <= hi + 1e-12)
            rows.append({"metric": m, "degree": d, "value": est["value"], "ci_low": lo, "ci_high": hi,
                         "truth": t.value, "truth_ci_low": t.ci_low, "truth_ci_high": t.ci_high,
                         "source": t.source, "covered": covered})
    return pd.DataFrame(rows)


def truth_json(truths: dict[int, dict[str, Truth]], beta: float) -> dict:
    """``planted_truth.json``'s content: per degree and metric the truth's value, CI and source, and the dial's beta."""
    return {"dial_beta": beta, **{str(d): {m: vars(t) for m, t in row.items()} for d, row in truths.items()}}
