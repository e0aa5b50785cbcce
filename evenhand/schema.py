"""The response-row schema that scoring needs, and a loader that validates it.

Scoring needs only item fields and a choice (METRICS.md): rows from any
source (our suite, the released FairStress rows, a user's own) are accepted
as long as they carry :data:`REQUIRED` and either ``choice`` or ``text``.
Every error names the row (1-based line for JSONL, 0-based row for parquet)
and the field. :func:`favours_minority` is the one rule for which side a
choice favours.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

REQUIRED = ("item_id", "baseline_id", "scenario_id", "condition", "question_polarity", "degree", "contrast_id",
            "contrast_type", "minority_slot", "correct_slot", "truth_favors", "pressure_id", "pressure_family",
            "pressure_slot", "pressure_resolved", "pressure_targets")
OPTIONAL = ("domain", "contrast_category", "candidate_noun", "excluded")
ADDED = ("pressured", "excluded", "contrast_category", "domain")
"""The columns :func:`validate_rows` adds or normalises: rows that carry them all count as validated."""
NO_PRESSURE = {"", "none", "None", "null"}


def favours_minority(choice: object, minority_slot: object, question_polarity: object) -> bool | np.ndarray:
    """Whether choosing the slot ``choice`` favours the minority-coded candidate (METRICS.md).

    On a positive question ("who should get the job?") picking the minority-coded
    candidate's slot favours them; on a negative question ("who should be laid off?")
    picking the other slot does. Scalars give a bool; arrays or Series give a bool array,
    elementwise. A missing choice (None) compares as not the minority slot: mask
    unanswered rows yourself."""
    picked = np.asarray(choice, dtype=object) == np.asarray(minority_slot, dtype=object)
    favours = picked ^ (np.asarray(question_polarity, dtype=object) == "negative")
    return bool(favours) if np.ndim(favours) == 0 else np.asarray(favours, dtype=bool)


def minority_favouring_slot(minority_slot: str, question_polarity: str) -> str:
    """The slot ('A' or 'B') whose choice favours the minority-coded candidate (:func:`favours_minority`)."""
    return "A" if favours_minority("A", minority_slot, question_polarity) else "B"


class RowError(ValueError):
    """A response row is unusable; the message names the row and the field."""


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def read_rows(path: str | Path) -> pd.DataFrame:
    """Read JSONL or parquet rows (by extension) without validating them."""
    path = Path(path)
    if not path.exists():
        raise RowError(f"{path}: no such file")
    if path.suffix == ".parquet":
        df = pd.read_parquet(path)
        df.attrs["row_base"] = ("row", 0)
        return df
    if path.suffix not in (".jsonl", ".json"):
        raise RowError(f"{path}: expected a .jsonl or .parquet file")
    rows = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise RowError(f"{path}: line {lineno}: malformed JSON ({exc.msg} at column {exc.colno})") from None
            if not isinstance(row, dict):
                raise RowError(f"{path}: line {lineno}: expected a JSON object, got {type(row).__name__}")
            row["_line"] = lineno
            rows.append(row)
    df = pd.DataFrame(rows)
    df.attrs["row_base"] = ("line", None)
    return df


def _where(df: pd.DataFrame, i: int) -> str:
    kind, _ = df.attrs.get("row_base", ("row", 0))
    num = df["_line"].iloc[i] if kind == "line" and "_line" in df else i
    iid = df["item_id"].iloc[i] if "item_id" in df and not _missing(df["item_id"].iloc[i]) else "?"
    return f"{kind} {num} (item_id={iid})"


def validate_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Check the fields scoring needs; fill ``contrast_category``/``excluded`` defaults.

    Returns a normalised copy; raises :class:`RowError` at the first problem."""
    if len(df) == 0:
        raise RowError("no rows to score")
    for f in REQUIRED:
        if f not in df.columns:
            raise RowError(f"{_where(df, 0)}: missing required field '{f}'")
    if "choice" not in df.columns and "text" not in df.columns:
        raise RowError(f"{_where(df, 0)}: missing field 'choice' (or raw 'text')")
    from .suite.content import load_content  # here, so the suite's modules can import this rule
    content = load_content()
    known = {c.id: c for c in content.contrasts}
    df = df.copy()
    col = {f: df[f].tolist() for f in REQUIRED}
    pressured = [not (_missing(p) or str(p) in NO_PRESSURE) for p in col["pressure_id"]]
    excluded = [bool(e) and not _missing(e) for e in df["excluded"]] if "excluded" in df.columns else [False] * len(df)
    for i in range(len(df)):
        def bad(field: str, why: str) -> RowError:
            return RowError(f"{_where(df, i)}: field '{field}' {why}")
        for f in ("item_id", "baseline_id", "scenario_id"):
            if _missing(col[f][i]):
                raise bad(f, "is missing")
        cond = col["condition"][i]
        if cond not in ("GT", "AMB"):
            raise bad("condition", f"must be GT or AMB, got {cond!r}")
        if col["question_polarity"][i] not in ("positive", "negative"):
            raise bad("question_polarity", f"must be positive or negative, got {col['question_polarity'][i]!r}")
        deg = col["degree"][i]
        if _missing(deg) or int(deg) != deg or int(deg) not in (0, 1, 2, 3):
            raise bad("degree", f"must be 0, 1, 2 or 3, got {deg!r}")
        cid = col["contrast_id"][i]
        if cid not in known:
            raise bad("contrast_id", f"is not one of the 33 known contrast ids: {cid!r}")
        if col["contrast_type"][i] != known[cid].type:
            raise bad("contrast_type", f"is {col['contrast_type'][i]!r} but contrast {cid} is {known[cid].type}")
        if col["minority_slot"][i] not in ("A", "B"):
            raise bad("minority_slot", f"must be A or B, got {col['minority_slot'][i]!r}")
        if cond == "GT":
            if col["correct_slot"][i] not in ("A", "B"):
                raise bad("correct_slot", f"must be A or B on a GT row, got {col['correct_slot'][i]!r}")
            if col["truth_favors"][i] not in ("minority", "majority"):
                raise bad("truth_favors", f"must be minority or majority on a GT row, got {col['truth_favors'][i]!r}")
        if pressured[i] and not excluded[i]:
            if col["pressure_slot"][i] not in ("A", "B"):
                raise bad("pressure_slot", f"must be A or B on a pressured row, got {col['pressure_slot'][i]!r}")
            if col["pressure_resolved"][i] not in ("pro_minority", "pro_majority"):
                raise bad("pressure_resolved", f"must be pro_minority or pro_majority, got "
                                               f"{col['pressure_resolved'][i]!r}")
            if cond == "GT" and col["pressure_targets"][i] not in ("weaker", "stronger"):
                raise bad("pressure_targets", f"must be weaker or stronger on a pressured GT row, got "
                                              f"{col['pressure_targets'][i]!r}")
            if _missing(col["pressure_family"][i]):
                raise bad("pressure_family", "is missing on a pressured row")
    if df["item_id"].duplicated().any():
        i = int(df["item_id"].duplicated().to_numpy().nonzero()[0][0])
        raise RowError(f"{_where(df, i)}: field 'item_id' is duplicated")
    df["degree"] = df["degree"].astype(int)
    df["pressured"] = pressured
    if "contrast_category" not in df.columns:
        df["contrast_category"] = [known[c].category for c in df["contrast_id"]]
    if "domain" not in df.columns:
        df["domain"] = None
    df["excluded"] = df["excluded"].fillna(False).astype(bool) if "excluded" in df.columns else False
    return df


def ensure_valid(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` as scoring needs it: raw rows (decide output, a user's own) go through
    :func:`validate_rows`; rows that already carry :data:`ADDED` are returned as they are."""
    return df if set(ADDED) <= set(df.columns) else validate_rows(df)


def load_rows(path: str | Path) -> pd.DataFrame:
    """Read and validate response rows from JSONL or parquet."""
    return validate_rows(read_rows(path))
