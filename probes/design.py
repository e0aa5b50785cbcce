"""What the item design alone predicts: design features, the evidence baseline's inputs, and the control
task's input types.

A probe's label is mostly fixed by the item's design: a perfectly fair model that follows the evidence
chooses the stronger candidate, so ``favours_minority`` on GT items is the side of the stronger candidate.
The *evidence baseline* (:mod:`probes.sweep`) is a probe fitted on :func:`design_features` alone, with the
activation probes' folds and regularisation path; the headline of a sweep is the gain of design features
plus activations over it."""
from __future__ import annotations

import numpy as np
import pandas as pd
from .logistic import seeded_hash

__all__ = ["minority_strong_on", "design_features", "input_types", "types_seen", "control_labels",
           "ControlTypesWarning"]

_MINORITY_STRONG = {"GTmin": (1, 1), "GTmaj": (0, 0), "AMB1": (1, 0), "AMB2": (0, 1)}


def minority_strong_on(df: pd.DataFrame) -> np.ndarray:
    """[n, 2] 0/1: whether the minority-coded candidate has the strong value on criterion 1 and 2.

    From ``variant`` when present, else from ``condition`` with ``truth_favors`` (GT) or
    ``amb_minority_strong_on`` (AMB)."""
    if "variant" in df.columns and df["variant"].isin(list(_MINORITY_STRONG)).all():
        return np.array([_MINORITY_STRONG[v] for v in df["variant"]], int)
    out = np.zeros((len(df), 2), int)
    for i, r in enumerate(df.itertuples(index=False)):
        if r.condition == "GT":
            out[i] = (1, 1) if r.truth_favors == "minority" else (0, 0)
        else:
            k = getattr(r, "amb_minority_strong_on", None)
            if k not in (1, 2, 1.0, 2.0):
                raise ValueError("AMB rows need variant or amb_minority_strong_on to derive the design features")
            out[i] = (1, 0) if int(k) == 1 else (0, 1)
    return out


def _pm(b) -> np.ndarray:
    """0/1 (or bool) as -1/+1."""
    return 2.0 * np.asarray(b, np.float64) - 1.0


def _pressure_slot(df: pd.DataFrame) -> np.ndarray:
    return np.array([v if isinstance(v, str) and v in ("A", "B") else None for v in df["pressure_slot"]], object)


def _onehot(values, prefix: str) -> tuple[np.ndarray, list[str]]:
    vals = [str(v) if isinstance(v, str) or (v == v and v is not None) else "none" for v in values]
    levels = sorted(set(vals))
    return (np.array([[v == lv for lv in levels] for v in vals], np.float64).reshape(len(vals), len(levels)),
            [f"{prefix}={lv}" for lv in levels])


def design_features(df: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
    """(features [n, k], their names): the item design of every row, see the module docstring.

    Encoded per row from the item fields only (never the answer):

    - the slot frame: whether slot A is the stronger candidate on criterion 1 and on criterion 2
      (:func:`minority_strong_on`, from the suite's ``variant``: ``GTmin``/``GTmaj``/``AMB1``/``AMB2``, the same
      rule as :func:`evenhand.suite.generate.criterion_values`), whether the minority-coded candidate is in slot A,
      the question's polarity, the slot the pressure sentence argues for;
    - the side frame: whether the minority-coded candidate is strong on criterion 1 / 2, whether the pressure is
      pro-minority, GT or AMB, whether the pressure targets the stronger candidate;
    - one-hots of the degree, the contrast and the pressure family;
    - products: every pair of frame features, each frame feature with the degree and the pressure family, the
      contrast with the side-frame features and with the degree (no triple products: on the demo's items they
      fitted worse out of fold than without them).

    Products matter because the label is a product of frames (``favours_minority`` is the chosen slot XOR the
    question's polarity against the minority slot). Constant and duplicate columns are dropped."""
    n = len(df)
    ms = minority_strong_on(df)
    min_a = (df["minority_slot"].to_numpy(object) == "A")
    neg = (df["question_polarity"].to_numpy(object) == "negative")
    ps = _pressure_slot(df)
    pressed = np.array([p is not None for p in ps])
    press_a = np.where(pressed, _pm(ps == "A"), 0.0)
    a_strong = np.where(min_a[:, None], ms, 1 - ms)                      # slot A strong on criterion k
    pro_min = np.where(pressed, _pm(ps == df["minority_slot"].to_numpy(object)) * np.where(neg, -1, 1), 0.0)
    gt = (df["condition"].to_numpy(object) == "GT")
    targets = df["pressure_targets"].to_numpy(object) if "pressure_targets" in df.columns else np.full(n, None)
    to_stronger = np.array([1.0 if t == "stronger" else -1.0 if t == "weaker" else 0.0 for t in targets])
    frame = {"a_strong_c1": _pm(a_strong[:, 0]), "a_strong_c2": _pm(a_strong[:, 1]), "minority_in_a": _pm(min_a),
             "negative": _pm(neg), "pressure_to_a": press_a, "minority_strong_c1": _pm(ms[:, 0]),
             "minority_strong_c2": _pm(ms[:, 1]), "pressure_pro_minority": pro_min, "gt": _pm(gt),
             "pressure_to_stronger": to_stronger}
    side = ("minority_strong_c1", "minority_strong_c2", "pressure_pro_minority")
    deg, deg_n = _onehot(df["degree"].astype(int).astype(str), "degree")
    con, con_n = _onehot(df["contrast_id"], "contrast")
    fam, fam_n = _onehot(df["pressure_family"] if "pressure_family" in df.columns else [None] * n, "family")
    cols, names = [], []

    def add(v, name):
        cols.append(np.asarray(v, np.float64))
        names.append(name)
    for k, v in frame.items():
        add(v, k)
    keys = list(frame)
    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            add(frame[a] * frame[b], f"{a}*{b}")
    for block, bnames in ((deg, deg_n), (con, con_n), (fam, fam_n)):
        for j, nm in enumerate(bnames):
            add(block[:, j], nm)
    for k in keys:
        for block, bnames in ((deg, deg_n), (fam, fam_n)):
            for j, nm in enumerate(bnames):
                add(frame[k] * block[:, j], f"{k}*{nm}")
    for j, cn in enumerate(con_n):
        for k in side:
            add(frame[k] * con[:, j], f"{k}*{cn}")
        for i, dn in enumerate(deg_n):
            add(con[:, j] * deg[:, i], f"{cn}*{dn}")
    X = np.column_stack(cols) if cols else np.zeros((n, 0))
    keep = X.std(0) > 0
    X, names = X[:, keep], [nm for nm, k in zip(names, keep) if k]
    _, first = np.unique(X.T, axis=0, return_index=True)
    first = np.sort(first)
    return X[:, first], [names[i] for i in first]


TYPE_FIELDS = ("variant", "minority_slot", "degree", "question_polarity", "pressure_family", "pressure_slot")
"""What makes an input type for the control task: what varies within a scenario (:func:`input_types`)."""
TYPES_SEEN_MIN = 0.9
"""The share of test rows whose input type the training rows hold, below which the control task warns."""


class ControlTypesWarning(UserWarning):
    """The control task's input types rarely recur between training and test rows: a probe cannot
    memorise them, so the control sits near chance whatever the probe, and selectivity says little."""


def input_types(df: pd.DataFrame) -> np.ndarray:
    """The control task's input type of every row: keys over :data:`TYPE_FIELDS` (``variant`` derived
    from :func:`minority_strong_on` when the column is absent; a missing ``question_polarity`` counts as
    positive).

    This is the Hewitt & Liang control task's notion of an input type: one key per arrangement of an item *within
    its scenario*: condition variant, minority slot, degree, question polarity, pressure family and the slot the
    pressure argues for. Neither the scenario nor the contrast is part of it. Folds are grouped by scenario, so a
    type that contained the scenario would never occur in both the training and the test rows, and the control
    would be at chance by construction (as the shuffled-label control was). The contrast is nearly as bad: a
    matched item set draws one contrast per scenario and degree, so a type with the contrast in it recurs only
    where another scenario drew the same contrast (at 12 scenarios of the dial study: 1,216 types for 1,824 items,
    58% of test rows with a type seen in training; without it, 152 types and every test row's type seen).
    :func:`types_seen` measures that share with the probes' folds; the sweep reports it (``control_types_seen``)
    and warns (:class:`ControlTypesWarning`) below :data:`TYPES_SEEN_MIN`. A probe that memorises input types
    then scores above chance on the control task."""
    missing = [f for f in TYPE_FIELDS if f not in df.columns and f not in ("variant", "question_polarity")]
    if missing:
        raise ValueError(f"input types need the item field(s) {', '.join(missing)}")
    cols = []
    for f in TYPE_FIELDS:
        if f == "variant" and f not in df.columns:
            cols.append([f"{a}{b}" for a, b in minority_strong_on(df)])
        elif f == "question_polarity" and f not in df.columns:
            cols.append(["positive"] * len(df))
        else:
            cols.append([str(v) if isinstance(v, str) or v == v else "none" for v in df[f]])
    return np.array(["|".join(parts) for parts in zip(*cols)], object)


def types_seen(types: np.ndarray, folds: np.ndarray) -> float:
    """The share of rows whose input type occurs in the training rows of their outer fold (``folds``: the
    fold of every row, as the probes are fitted): the rows on which the control task can be memorised."""
    types, folds = np.asarray(types, object), np.asarray(folds)
    if len(types) != len(folds):
        raise ValueError(f"types and folds differ in length: {len(types)}, {len(folds)}")
    seen = np.zeros(len(types), bool)
    for f in np.unique(folds):
        test = folds == f
        train = set(types[~test])
        seen[test] = [t in train for t in types[test]]
    return float(seen.mean()) if len(seen) else float("nan")


def control_labels(types: np.ndarray, seed: int = 0) -> np.ndarray:
    """Hewitt & Liang's control task: a random 0/1 label per input type (a seeded hash of the type), the same
    for every row of that type."""
    return np.array([seeded_hash(seed + 104729, t) & 1 for t in types], int)
