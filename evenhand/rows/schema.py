"""The response-row schema that scoring needs, and a loader that validates it.

Scoring needs only item fields and a choice (docs/METRICS.md): rows from any
source (our suite, the released FairStress rows, a user's own) are accepted
as long as they carry :data:`REQUIRED` and either ``choice`` or ``text``; a
file that lacks some of :data:`REQUIRED` is joined to the suite by ``item_id``
(:mod:`evenhand.suite.join`), so ``item_id`` + ``text`` is enough for the
suite's items. Files are read by :mod:`evenhand.files.rowfiles` (JSONL, JSON, CSV,
parquet, gzip'd or not). A suite of one's own (every item field, scenario and contrast ids of its own)
is scored with ``own_suite=True`` (``evenhand score --own-suite``); otherwise an id the suite does not
know is refused as a typo. Validation gathers every problem and raises one
:class:`RowError` naming the row and field of each (the first 20, with counts
per kind). Which side a choice favours: :mod:`evenhand.vocab.sides`.
"""
from __future__ import annotations

import difflib
import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..parsing.parse import VERDICTS
from ..vocab.problems import Problem, RowError, raise_problems
from ..files.rowfiles import ORDER, WHERE, read_rows, read_table  # noqa: F401 (read_rows re-exported)
from ..suite.content import ContentError, content_for, is_own_version, load_content

__all__ = ["REQUIRED", "OPTIONAL", "ADDED", "CHOICES", "RowError", "Problem", "read_rows", "validate_rows", "ensure_valid",
           "load_rows"]

REQUIRED = ("item_id", "baseline_id", "scenario_id", "condition", "question_polarity", "degree", "contrast_id",
            "contrast_type", "minority_slot", "correct_slot", "truth_favors", "pressure_id", "pressure_family",
            "pressure_slot", "pressure_resolved", "pressure_targets")
OPTIONAL = ("domain", "contrast_category", "candidate_noun", "excluded")
ADDED = ("pressured", "excluded", "contrast_category", "domain")
"""The columns :func:`validate_rows` adds or normalises: rows that carry them all count as validated."""
NO_PRESSURE = {"", "none", "None", "null"}
FAIRSTRESS = "fairstress"
"""The ``source`` of released FairStress rows (`evenhand suite import-fairstress`): their scenario ids are the
release's own, so they are not checked against the suite's."""
_TRUE, _FALSE = {"true", "1", "yes", "t", "y"}, {"false", "0", "no", "f", "n", ""}
CHOICES = ("A", "B", "")
"""The values a ``choice`` may hold (any case, blanks around ignored; empty or missing: no choice). A raw
answer goes in ``text``, where the parser reads it."""
OWN_SUITE_HINT = "; a suite of your own: score it with --own-suite (every item field needed)"


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _degree(v) -> int | None:
    """0-3 from 3, 3.0 or "3"; None for anything else (a bool, "two", 7)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, str):
        v = v.strip()
        if not v.isdigit():
            return None
    try:
        d = float(v)
    except (TypeError, ValueError):
        return None
    return int(d) if d in (0, 1, 2, 3) else None


def _flag(v) -> bool | None:
    """A bool from True/False, 0/1 or their spellings; None for anything else."""
    if _missing(v):
        return False
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, float, np.integer, np.floating)) and v in (0, 1):
        return bool(v)
    if isinstance(v, str) and v.strip().lower() in _TRUE | _FALSE:
        return v.strip().lower() in _TRUE
    return None


def _unknown(kind: str, value, known) -> str:
    close = difflib.get_close_matches(str(value), list(known), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"is not one of the {len(known)} {kind}s of the suite: {value!r}{hint}"


def _row_problems(r: dict, bad, known: dict, scenarios: frozenset, pressured: bool, excluded: bool,
                  own_suite: bool = False) -> None:
    """Append each problem of one row ``r`` (its fields by name) through ``bad(field, kind, why)``;
    ``own_suite``: scenario and contrast ids need not be the suite's."""
    for f in ("item_id", "baseline_id", "scenario_id"):
        if _missing(r[f]):
            bad(f, "missing value", "is missing")
    sid = r["scenario_id"]
    if not _missing(sid) and sid not in scenarios and r.get("source") != FAIRSTRESS and not own_suite:
        bad("scenario_id", "unknown scenario id", _unknown("scenario id", sid, scenarios) + OWN_SUITE_HINT)
    cond = r["condition"]
    if cond not in ("GT", "AMB"):
        bad("condition", "bad value", f"must be GT or AMB, got {cond!r}")
    if r["question_polarity"] not in ("positive", "negative"):
        bad("question_polarity", "bad value", f"must be positive or negative, got {r['question_polarity']!r}")
    if _degree(r["degree"]) is None:
        bad("degree", "bad value", f"must be 0, 1, 2 or 3, got {r['degree']!r}")
    cid = r["contrast_id"]
    if own_suite and cid not in known:
        if _missing(cid):
            bad("contrast_id", "missing value", "is missing")
        if r["contrast_type"] not in ("type1", "type23"):
            bad("contrast_type", "bad value", f"must be type1 or type23, got {r['contrast_type']!r}")
    elif cid not in known:
        bad("contrast_id", "unknown contrast id", _unknown("contrast id", cid, known) + OWN_SUITE_HINT)
    elif r["contrast_type"] != known[cid].type:
        bad("contrast_type", "bad value", f"is {r['contrast_type']!r} but contrast {cid} is {known[cid].type}")
    if r["minority_slot"] not in ("A", "B"):
        bad("minority_slot", "bad value", f"must be A or B, got {r['minority_slot']!r}")
    if cond == "GT":
        if r["correct_slot"] not in ("A", "B"):
            bad("correct_slot", "bad value", f"must be A or B on a GT row, got {r['correct_slot']!r}")
        if r["truth_favors"] not in ("minority", "majority"):
            bad("truth_favors", "bad value", f"must be minority or majority on a GT row, got {r['truth_favors']!r}")
    if pressured and not excluded:
        if r["pressure_slot"] not in ("A", "B"):
            bad("pressure_slot", "bad value", f"must be A or B on a pressured row, got {r['pressure_slot']!r}")
        if r["pressure_resolved"] not in ("pro_minority", "pro_majority"):
            bad("pressure_resolved", "bad value",
                f"must be pro_minority or pro_majority, got {r['pressure_resolved']!r}")
        if cond == "GT" and r["pressure_targets"] not in ("weaker", "stronger"):
            bad("pressure_targets", "bad value",
                f"must be weaker or stronger on a pressured GT row, got {r['pressure_targets']!r}")
        if _missing(r["pressure_family"]):
            bad("pressure_family", "missing value", "is missing on a pressured row")
    for f in ("choice", "text"):
        if f in r and not _missing(r[f]) and not isinstance(r[f], str):
            bad(f, "bad value", f"must be text, got {type(r[f]).__name__} {r[f]!r}")
    c = r.get("choice")
    if isinstance(c, str) and c.strip().upper() not in CHOICES and r.get("source") != FAIRSTRESS:
        bad("choice", "bad value", f"must be A, B or empty, got {c!r} (a raw answer goes in column 'text')")
    v = r.get("parse_verdict")
    if not _missing(v) and v not in VERDICTS:
        bad("parse_verdict", "bad value", f"must be one of {', '.join(VERDICTS)} or empty, got {v!r}")


def validate_rows(df: pd.DataFrame, source: str | None = None, own_suite: bool = False) -> pd.DataFrame:
    """Check the fields scoring needs; join rows to the suite when ``df`` lacks some of :data:`REQUIRED`;
    fill ``contrast_category``/``domain``/``excluded`` defaults. ``own_suite``: the rows are a suite of one's
    own: every field of :data:`REQUIRED` is needed (no join), scenario and contrast ids are not checked against
    the suite's (``contrast_type`` must still be type1 or type23; ``contrast_category`` defaults to empty).

    Returns a normalised copy. Raises :class:`RowError` naming every problem (row and field; the message
    lists the first 20 and counts them by kind); ``source`` (a file name) prefixes the message."""
    problems: list[Problem] = []
    if WHERE in df.columns:
        problems = list(df.attrs.get("read_problems", ()))
    if len(df) == 0:
        raise_problems(problems or [Problem(-1, "", None, "no rows", "no rows to score")], source)
    where = df[WHERE].tolist() if WHERE in df.columns else [f"row {i}" for i in range(len(df))]
    order = df[ORDER].tolist() if ORDER in df.columns else list(range(len(df)))
    if "item_id" in df.columns:
        where = [f"{w} (item_id={'?' if _missing(v) else v})" for w, v in zip(where, df["item_id"].tolist())]
    file_problems = []
    if "item_id" not in df.columns:
        file_problems.append(Problem(-1, "", None, "missing column",
                                     f"no column 'item_id' (columns: {', '.join(map(str, df.columns[:12]))})"))
    if "choice" not in df.columns and "text" not in df.columns:
        file_problems.append(Problem(-1, "", None, "missing column", "no column 'choice' (or raw 'text')"))
    if "item_id" not in df.columns:
        raise_problems(file_problems + problems, source)
    skip: set[int] = set()
    if "suite_version" in df.columns and any(is_own_version(v) for v in df["suite_version"].tolist()):
        own_suite = True  # rows rendered from a scenario file of one's own (evenhand.suite.own)
    joined = any(f not in df.columns for f in REQUIRED)
    if joined and own_suite:
        absent = ", ".join(f for f in REQUIRED if f not in df.columns)
        raise_problems(file_problems + problems + [Problem(-1, "", None, "missing column",
                       f"a suite of your own needs every item field; no column {absent} (docs/METRICS.md)")], source)
    if joined:
        from ..suite.join import join_suite  # here: the suite's modules import this one
        df, skip, join_problems = join_suite(df, REQUIRED, where, order)
        problems += join_problems
    try:
        content = content_for(df["suite_version"].tolist() if "suite_version" in df.columns else [])
    except ContentError:
        content = load_content()  # the join (or the checks below) name the rows of another version
    known = {c.id: c for c in content.contrasts}
    scenarios = frozenset(s.id for s in content.scenarios)
    df = df.copy()
    pressured = [not (_missing(p) or str(p) in NO_PRESSURE) for p in df["pressure_id"].tolist()]
    flags = [_flag(e) for e in df["excluded"].tolist()] if "excluded" in df.columns else [False] * len(df)
    for i, r in enumerate(df.to_dict("records")):
        def bad(field: str | None, kind: str, why: str) -> None:
            problems.append(Problem(order[i], where[i], field, kind, why))
        if i in skip:
            continue
        if flags[i] is None:
            bad("excluded", "bad value", f"must be true or false, got {r['excluded']!r}")
        _row_problems(r, bad, known, scenarios, pressured[i], bool(flags[i]), own_suite)
    dup = df["item_id"].duplicated(keep=False).to_numpy() & df["item_id"].notna().to_numpy()
    for i in dup.nonzero()[0]:
        problems.append(Problem(order[i], where[i], "item_id", "duplicate item_id", "is duplicated"))
    raise_problems(file_problems + problems, source)
    df["degree"] = [_degree(d) for d in df["degree"].tolist()]
    df["degree"] = df["degree"].astype(int)
    df["pressured"] = pressured
    if "contrast_category" not in df.columns:
        df["contrast_category"] = [known[c].category if c in known else None for c in df["contrast_id"]]
    if "domain" not in df.columns:
        df["domain"] = None
    df["excluded"] = [bool(f) for f in flags]
    df.attrs.pop("read_problems", None)
    df.attrs["joined"] = content.version if joined else None
    return df.drop(columns=[WHERE, ORDER], errors="ignore")


def ensure_valid(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` as scoring needs it: raw rows (decide output, a user's own) go through
    :func:`validate_rows`; rows that already carry :data:`ADDED` are returned as they are."""
    return df if set(ADDED) <= set(df.columns) else validate_rows(df)


def load_rows(path: str | Path, own_suite: bool = False) -> pd.DataFrame:
    """Read and validate response rows from a file (JSONL, JSON, CSV, parquet; gzip'd or not): every problem
    of reading and of validation is reported in one :class:`RowError`. ``own_suite``: as in
    :func:`validate_rows`."""
    df, problems = read_table(path)
    if len(df) == 0:
        raise_problems(problems or [Problem(-1, "", None, "no rows", "no rows to score")], str(path))
    df.attrs["read_problems"] = problems
    return validate_rows(df, source=str(path), own_suite=own_suite)
