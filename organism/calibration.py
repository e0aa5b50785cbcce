"""Calibrating the bias dial's mechanisms (:mod:`organism.mechanism`) and the dial's per-scenario random effects.

:func:`calibrate` decides the fair organism's held-out items of a mechanism's ``eval_degree`` (3, or 1 for
``names``) with it at each ``beta`` of a grid (the edit in the weights, the ordinary ``decide`` in answer mode)
and records FragGap, TieShift, AccGap, TieLean and GT accuracy with their CIs, plus the edit's gain ``k``: the
mean change of the letter-A-minus-B logit at the letter position, signed by ``c``
(:func:`~organism.dial.pressure_sign`), per unit ``beta``, on the items with ``c != 0``. :func:`beta_for`
reads the curve backwards; :func:`degree_effects` checks which degrees a mechanism moves, and why.

More in docs/ORGANISM.md."""
from __future__ import annotations

import itertools
import json
import math
import random
from pathlib import Path

import numpy as np
import pandas as pd


from .dial import DIAL_FILE, Dial, dialled, letter_position_batches, pressure_sign
from .dials import load_mechanism
from .mechanism import DEFAULT_MECHANISM, Mechanism
from .recipe import FAIR
from evenhand.engine.positions import answer_tokens
from evenhand.running.decisions import DecideOptions, decide
from evenhand.models.loading import load_model
from evenhand.rows.schema import validate_rows
from .evaluation import heldout_items
from evenhand.scoring.metrics import score

CALIBRATION_FILE = "calibration.json"
"""The committed calibration curve's file name, next to the fair organism's weights."""
CALIBRATION_METRICS = ("fraggap", "tieshift", "accgap", "tielean", "accuracy")
"""The degree-3 metrics a calibration point records."""


def letter_logit_diff(lm, items: pd.DataFrame, batch_size: int = 64) -> np.ndarray:
    """The logit of A minus that of B at the position that predicts the answer's letter (the prompt,
    then the candidate noun), one value per item. The noun is declared the pass's one answer token
    (:func:`evenhand.engine.positions.answer_tokens`), as it is when decoding generates it, so an edit that
    acts at ``generated`` (or ``prompt``, ``last``) positions acts where it would in decoding."""
    import torch

    tok, model = lm.tokenizer, lm.model
    ia, ib = tok.convert_tokens_to_ids("A"), tok.convert_tokens_to_ids("B")
    out = []
    with torch.inference_mode():
        for ids, mask, pos in letter_position_batches(lm, items, batch_size):
            with answer_tokens([1] * len(ids)):
                logits = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits[:, -1].float()
            out.append((logits[:, ia] - logits[:, ib]).numpy())
    return np.concatenate(out)


def scenario_multipliers(scenario_ids, icc: float, beta: float, gain: float, seed: int = 0) -> dict[str, float]:
    """``1 + sigma * z_s`` per scenario (``z_s`` standard normal from ``seed`` and the scenario id), with
    ``sigma = tau / (gain * beta)`` and ``tau^2 = icc / (1 - icc) * pi^2 / 3`` (the module docstring);
    all 1 when ``icc`` or ``beta`` is 0."""
    if not 0 <= icc < 1:
        raise ValueError(f"icc must be in [0, 1), got {icc}")
    if icc == 0 or beta == 0:
        return {s: 1.0 for s in scenario_ids}
    if gain <= 0:
        raise ValueError(f"the dial's gain must be positive, got {gain}")
    tau = math.sqrt(icc / (1 - icc) * math.pi ** 2 / 3)
    sigma = tau / (gain * abs(beta))
    return {s: 1.0 + sigma * random.Random(f"dial-effect|{seed}|{s}").gauss(0.0, 1.0) for s in scenario_ids}


def dialled_decisions(items: pd.DataFrame, beta: float, path: str | Path = FAIR, dial: Mechanism | None = None,
                      multipliers: dict[str, float] | None = None, batch_size: int = 64, lm=None) -> pd.DataFrame:
    """``decide`` (answer mode) on ``items`` by the organism at ``path`` with the dial mechanism ``dial``
    (default its ``dial.json``) at ``beta`` in its weights, scenario ``s`` at ``beta * multipliers[s]`` when given; the weights are restored after.
    Returns the validated responses in the items' order."""

    dial = dial or Dial.load(Path(path) / DIAL_FILE)
    lm = lm or load_model(str(path))
    opts = DecideOptions(mode="answer", batch_size=batch_size, progress=False)
    groups = [(beta, items)] if multipliers is None else [
        (beta * multipliers[s], g) for s, g in items.groupby("scenario_id", sort=False)]
    parts = []
    for b, g in groups:
        with dialled(lm.model, dial, b):
            parts.append(decide(g, lm, opts))
    out = pd.concat(parts).set_index("item_id").loc[items["item_id"]].reset_index()
    return validate_rows(out)


def calibration_items(path: str | Path = FAIR, n_scenarios: int | None = None, degree: int = 3,
                      seed: int = 0) -> pd.DataFrame:
    """The fair organism's matched held-out items at ``degree`` (the first ``n_scenarios`` held-out
    scenarios, or all)."""
    record = json.loads((Path(path) / "organism.json").read_text())
    return heldout_items(record, n_scenarios, degrees=[degree], seed=seed)


def calibrate(betas, path: str | Path = FAIR, n_scenarios: int | None = None, resamples: int | None = None,
              seed: int = 0, batch_size: int = 64, progress: bool = True, lm=None,
              mechanism: str = DEFAULT_MECHANISM) -> dict:
    """The calibration curve of the dial mechanism ``mechanism`` (its fitted file next to the organism,
    :func:`~organism.dials.load_mechanism`): per ``beta``, the :data:`CALIBRATION_METRICS` (value and CI) at
    its ``eval_degree`` of the dialled organism on :func:`calibration_items`, and the gain ``k`` (the module
    docstring) measured with the same mechanism. ``progress``: a bar over the betas (each one decides every
    item); ``lm``: the organism at ``path``, already loaded. ``resamples`` is accepted and unused (the
    metrics' CIs are the jackknife-t): not recorded."""
    from tqdm.auto import tqdm

    dial = load_mechanism(path, mechanism)
    degree = dial.eval_degree
    items = calibration_items(path, n_scenarios, degree=degree, seed=seed)
    lm = lm or load_model(str(path))
    c = pressure_sign(items)
    on = c != 0
    base_diff = letter_logit_diff(lm, items[on], batch_size)
    points = []
    for beta in tqdm(list(betas), desc=f"calibrate {mechanism} ({len(items)} items per beta)", unit="beta",
                     disable=not progress):
        resp = dialled_decisions(items, float(beta), path, dial, batch_size=batch_size, lm=lm)
        rep = score(resp, contrast_type="type1")["by_degree"][str(degree)]
        with dialled(lm.model, dial, float(beta)):
            diff = letter_logit_diff(lm, items[on], batch_size)
        shift = float(np.mean((diff - base_diff) * c[on]))
        points.append({"beta": float(beta), "gain": (shift / beta) if beta else None, "logit_shift": shift,
                       "answered": float(resp["choice"].notna().mean()),
                       **{m: {k: rep[m][k] for k in ("value", "ci_low", "ci_high")} for m in CALIBRATION_METRICS}})
    if isinstance(dial, Dial):
        where = {"layer": dial.layer, "weight": dial.weight_name}
    elif dial.in_weights:
        where = {"weights": sorted(dial.weight_deltas(0.0))}
    else:  # a forward hook: no weight to name
        where = {"hook": dial.summary}
    return {"path": str(path), "degree": degree, "n_items": len(items), "n_scenarios": int(items["scenario_id"].nunique()),
            "seed": seed, **({} if mechanism == DEFAULT_MECHANISM else {"mechanism": mechanism}), **where,
            "points": points}


def degree_effects(mech: Mechanism, betas, path: str | Path = FAIR, n_scenarios: int | None = 12, seed: int = 0,
                   batch_size: int = 64, lm=None) -> dict:
    """Which degrees the mechanism ``mech`` moves, and why: the organism's held-out items of degrees 0-3
    decided at beta 0 and at each of ``betas``; per degree and beta, FragGap and TieShift (value and CI,
    jackknife-t over scenarios), the share answered, the c-signed letter-logit shift per unit beta on the items
    with ``c != 0`` (the gain; degree 0 has none) and the mean absolute shift per unit beta on all its items;
    per degree (``"diagnostics"``), the mean gate (``mech.reads`` where it has one) per class of ``c``, the
    baseline c-signed letter margin (mean and median: how far the pressured answer already leans to the side
    the pressure argues for) and the share of pressured items whose answer a push of ``gain * beta`` would
    flip at first order (margin in ``(-gain * beta, 0)``). A mechanism's ``degrees`` must move; the others not."""
    record = json.loads((Path(path) / "organism.json").read_text())
    items = heldout_items(record, n_scenarios, degrees=[0, 1, 2, 3], seed=seed)
    lm = lm or load_model(str(path))
    c = pressure_sign(items)
    deg = items["degree"].to_numpy()
    base = letter_logit_diff(lm, items, batch_size)
    reads = mech.reads(lm, items, batch_size) if mech.in_weights and hasattr(mech, "reads") else None  # a hook's reads take activations
    diag = {}
    for d in (0, 1, 2, 3):
        sel = deg == d
        on = sel & (c != 0)
        diag[str(d)] = {"items": int(sel.sum()), "pressured_toward_minority": int(on.sum()),
                        "mean_read_by_c": None if reads is None else {
                            str(k): (round(float(reads[sel & (c == k)].mean()), 4) if (sel & (c == k)).any() else None)
                            for k in (-1, 0, 1)},
                        "margin_mean": round(float((c * base)[on].mean()), 4) if on.any() else None,
                        "margin_median": round(float(np.median((c * base)[on])), 4) if on.any() else None}
    points = []
    for beta in [0.0] + [float(b) for b in betas if b]:
        resp = dialled_decisions(items, beta, path, mech, batch_size=batch_size, lm=lm)
        rep = score(resp, contrast_type="type1")["by_degree"]
        with dialled(lm.model, mech, beta):
            diff = letter_logit_diff(lm, items, batch_size)
        shift = diff - base
        for d in (0, 1, 2, 3):
            sel = deg == d
            on = sel & (c != 0)
            gain = float(np.mean(shift[on] * c[on]) / beta) if beta and on.any() else None
            row = {"beta": beta, "degree": d, "answered": float(resp["choice"][sel].notna().mean()),
                   "gain": gain, "abs_shift": float(np.mean(np.abs(shift[sel])) / beta) if beta else None,
                   "flippable": (float(np.mean(((c * base)[on] < 0) & ((c * base)[on] > -gain * beta)))
                                 if gain is not None else None)}
            for m in ("fraggap", "tieshift"):
                got = rep.get(str(d), {}).get(m) or {}
                row[m] = {k: got.get(k) for k in ("value", "ci_low", "ci_high")}
            points.append(row)
    return {"mechanism": mech.name, "degrees": list(mech.degrees), "n_scenarios": int(items["scenario_id"].nunique()),
            "n_items": len(items), "seed": seed, "diagnostics": diag, "points": points}


def degree_table(effects: dict) -> pd.DataFrame:
    """:func:`degree_effects`'s points as a table: one row per beta and degree (FragGap and TieShift flattened)."""
    rows = [{k: v for k, v in p.items() if k not in ("fraggap", "tieshift")}
            | {f"{m}_{k}": p[m][k] for m in ("fraggap", "tieshift") for k in ("value", "ci_low", "ci_high")}
            for p in effects["points"]]
    return pd.DataFrame(rows)


def beta_for(curve: dict, fraggap: float) -> float:
    """The ``beta`` whose degree-3 FragGap on ``curve`` (a :func:`calibrate` result) is ``fraggap``
    (a share, 0.05 = 5 pp), by linear interpolation between the calibrated points, which must bracket it."""
    pts = sorted((p["beta"], p["fraggap"]["value"]) for p in curve["points"])
    for (b0, f0), (b1, f1) in itertools.pairwise(pts):
        if min(f0, f1) <= fraggap <= max(f0, f1):
            return b0 if f1 == f0 else b0 + (fraggap - f0) * (b1 - b0) / (f1 - f0)
    raise ValueError(f"FragGap {fraggap} is outside the calibrated range "
                     f"{min(f for _, f in pts):.3f}..{max(f for _, f in pts):.3f}")


def gain_at(curve: dict, beta: float) -> float:
    """The edit's gain ``k`` at ``beta``, interpolated between the calibrated points (beta > 0)."""
    pts = sorted((p["beta"], p["gain"]) for p in curve["points"] if p["beta"] > 0)
    if not pts:
        raise ValueError("the curve has no point with beta > 0")
    bs, ks = zip(*pts)
    return float(np.interp(abs(beta), bs, ks))


def curve_json(curve: dict) -> str:
    """The text of a ``calibration.json`` holding ``curve`` (the committed file's layout)."""
    return json.dumps(curve, indent=1) + "\n"


def curve_table(curve: dict) -> pd.DataFrame:
    """``curve`` (a :func:`calibrate` result) as a tidy table: one row per beta and metric of
    :data:`CALIBRATION_METRICS` (``value``, ``ci_low``, ``ci_high``) with the beta's ``gain``,
    ``logit_shift`` and ``answered``, in the curve's order."""
    rows = [{"beta": p["beta"], "degree": curve["degree"], "metric": m,
             **{k: p[m][k] for k in ("value", "ci_low", "ci_high")},
             "gain": p["gain"], "logit_shift": p["logit_shift"], "answered": p["answered"]}
            for p in curve["points"] for m in CALIBRATION_METRICS]
    return pd.DataFrame(rows)
