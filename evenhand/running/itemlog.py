"""Per-item logs of a run (``evenhand show``): every item with its choice, the baseline it is paired with,
whether it is correct, its verdict, how its answer was parsed and the raw answer, as a tidy table
(:func:`item_log`), filtered (:func:`select`) and printed as a terminal table or one item in full.

A pressured item is paired with its baseline by ``baseline_id``, as the metrics pair them
(:func:`evenhand.scoring.metrics.indicators`); a *flipped* item is a pressured GT item whose choice differs from its
baseline's choice (both answered). Rows written before the parse columns existed are parsed here."""
from __future__ import annotations

import difflib
import os
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd

from ..rows.conventions import DEFAULT_CONVENTION
from ..scoring.metrics import choices, verdicts
from ..parsing.parse import PARSE_FIELDS, parse_fields
from ..runs.rundir import run_with_responses
from ..rows.schema import ensure_valid, load_rows

LOG_COLUMNS = ("item_id", "scenario_id", "degree", "condition", "pressured", "pressure", "baseline_id", "choice",
               "baseline_choice", "baseline_found", "correct", "flipped", "verdict", "parse_method", "parse_hedged",
               "text")
"""The columns of :func:`item_log`'s table."""
TABLE_HEAD = ("item", "D", "cond", "pressure", "choice", "base", "correct", "verdict", "parse", "answer")
"""The columns of :func:`format_table` (the scenario heads its items)."""
MIN_ANSWER = 16
"""The fewest characters of an answer a table row shows, however narrow the terminal."""


def run_rows(path: str | os.PathLike, own_suite: bool = False) -> pd.DataFrame:
    """The validated rows of a run directory (its ``responses.parquet``; a comparison's or sweep's cell is one
    too) or of an answers file (:func:`evenhand.rows.schema.load_rows`; ``own_suite``: a suite of one's own, as
    ``evenhand score --own-suite`` reads it). A path that is neither raises a
    :class:`~evenhand.runs.rundir.RunError` that says what it is and, for a comparison or sweep, names its cells."""
    if Path(path).is_file():
        return load_rows(Path(path), own_suite=own_suite)
    run = run_with_responses(path)
    return ensure_valid(run.read_responses())


def _parse_columns(df: pd.DataFrame) -> pd.DataFrame:
    """``parse_method`` and ``parse_hedged`` as written, or parsed from ``text`` for rows written without them
    (a ``choice`` given without text: method ``given``)."""
    have = [c for c in PARSE_FIELDS if c in df.columns]
    texts = df["text"].tolist() if "text" in df.columns else [None] * len(df)
    nouns = df["candidate_noun"].tolist() if "candidate_noun" in df.columns else [None] * len(df)
    method = df["parse_method"].tolist() if "parse_method" in have else [None] * len(df)
    hedged = df["parse_hedged"].tolist() if "parse_hedged" in have else [None] * len(df)
    out_m, out_h = [], []
    for m, h, t, n in zip(method, hedged, texts, nouns):
        if "parse_method" not in have:
            if isinstance(t, str):
                f = parse_fields(t, n if isinstance(n, str) else None)
                m, h = f["parse_method"], f["parse_hedged"]
            else:
                m = "given"
        out_m.append(m if isinstance(m, str) and m else None)  # NaN (a row without a choice, read back): none
        out_h.append(bool(h) if isinstance(h, (bool, np.bool_)) else False)
    return pd.DataFrame({"parse_method": out_m, "parse_hedged": out_h}, index=df.index)


def _pressure(row) -> str:
    if not row["pressured"]:
        return ""
    side = {"pro_minority": "pro-min", "pro_majority": "pro-maj"}.get(row["pressure_resolved"], "?")
    target = _text(row["pressure_targets"])  # stronger/weaker on a GT item; none on an AMB item (a tie)
    return f"{_text(row['pressure_family'])} {side}" + (f"→{target}" if target else "")


def item_log(rows: pd.DataFrame, convention: str = DEFAULT_CONVENTION) -> pd.DataFrame:
    """One row per item (:data:`LOG_COLUMNS`), in the rows' order: ``choice`` as scoring reads it
    (:func:`evenhand.scoring.metrics.choices`), ``verdict`` (``choice``, ``refusal``, ``unparsed``;
    :func:`evenhand.scoring.metrics.verdicts`), ``baseline_choice`` (a pressured item's baseline's choice, by
    ``baseline_id``; None for a baseline, an unanswered baseline or one not in the rows: ``baseline_found``
    says which), ``correct`` (GT items
    with a choice; None otherwise), ``flipped`` (a pressured GT item whose choice differs from its baseline's,
    both answered), the parse columns and the raw ``text``."""
    df = ensure_valid(rows).reset_index(drop=True)
    choice = choices(df, convention)
    verdict = verdicts(df, choice, convention)
    pressured = df["pressured"].to_numpy(bool)
    index = {iid: i for i, iid in enumerate(df["item_id"].tolist())}
    base = [index.get(b) if p else None for b, p in zip(df["baseline_id"].tolist(), pressured)]
    base = [b if b is not None and not pressured[b] else None for b in base]  # a baseline is unpressured
    base_choice = [choice[b] if b is not None else None for b in base]
    found = [b is not None for b in base]
    gt = (df["condition"] == "GT").to_numpy()
    correct = [bool(c == s) if g and c is not None else None
               for c, s, g in zip(choice, df["correct_slot"].tolist(), gt)]
    flipped = [bool(p and g and c is not None and b is not None and c != b)
               for p, g, c, b in zip(pressured, gt, choice, base_choice)]
    out = pd.DataFrame({
        "item_id": df["item_id"], "scenario_id": df["scenario_id"], "degree": df["degree"].astype(int),
        "condition": df["condition"], "pressured": pressured,
        "pressure": [_pressure(r) for r in df.to_dict("records")], "baseline_id": df["baseline_id"],
        "choice": list(choice), "baseline_choice": base_choice, "baseline_found": found, "correct": correct,
        "flipped": flipped, "verdict": list(verdict)})
    out = pd.concat([out, _parse_columns(df)], axis=1)
    out["text"] = df["text"] if "text" in df.columns else None
    extra = [c for c in ("prompt", "pressure_id", "correct_slot", "minority_slot", "contrast_id", "model")
             if c in df.columns]
    return pd.concat([out[list(LOG_COLUMNS)], df[extra]], axis=1)


def _unknown(kind: str, value: str, known) -> str:
    close = difflib.get_close_matches(value, sorted(set(known)), n=3, cutoff=0.6)
    return (f"unknown {kind} {value!r}: the run has {len(set(known)):,} {kind}s"
            + (f"; did you mean {', '.join(close)}?" if close else ""))


def select(log: pd.DataFrame, flipped: bool = False, unparsed: bool = False, refusals: bool = False,
           scenario: str | None = None, item: str | None = None) -> pd.DataFrame:
    """The items of ``log`` that pass every filter given: ``flipped`` items, ``unparsed`` answers, ``refusals``,
    one ``scenario`` id, one ``item`` id. An id the run does not hold raises a KeyError naming it (and the
    closest ids)."""
    if scenario is not None and scenario not in set(log["scenario_id"]):
        raise KeyError(_unknown("scenario", scenario, log["scenario_id"]))
    if item is not None and item not in set(log["item_id"]):
        raise KeyError(_unknown("item", item, log["item_id"]))
    keep = np.ones(len(log), bool)
    if flipped:
        keep &= log["flipped"].to_numpy(bool)
    if unparsed:
        keep &= (log["verdict"] == "unparsed").to_numpy()
    if refusals:
        keep &= (log["verdict"] == "refusal").to_numpy()
    if scenario is not None:
        keep &= (log["scenario_id"] == scenario).to_numpy()
    if item is not None:
        keep &= (log["item_id"] == item).to_numpy()
    return log[keep]


def _flat(text, width: int) -> str:
    """An answer on one line (line breaks as ⏎), cut to ``width`` characters with …."""
    if not isinstance(text, str):
        return ""
    flat = text.strip().replace("\r\n", "\n").replace("\n", " ⏎ ")
    return flat if len(flat) <= width else flat[: max(width - 1, 0)] + "…"


def _cells(r) -> list[str]:
    correct = "" if r["correct"] is None or pd.isna(r["correct"]) else ("yes" if r["correct"] else "no")
    if r["condition"] != "GT":
        correct = "tie"
    base = "" if not r["pressured"] else _text(r["baseline_choice"]) or ("-" if r["baseline_found"] else "?")
    parse = _text(r["parse_method"]) + (" hedged" if r["parse_hedged"] else "")
    return [str(r["item_id"]), f"D{r['degree']}", str(r["condition"]), _text(r["pressure"]) or "none",
            _text(r["choice"]) or "-", _text(base), correct, str(r["verdict"]), parse]


def _text(v) -> str:
    """A cell's text: a string as it is, anything missing (None, NaN, pd.NA) as empty."""
    return v if isinstance(v, str) else ""


def format_table(log: pd.DataFrame, width: int = 160) -> list[str]:
    """The items of ``log`` as table lines (:data:`TABLE_HEAD`), a line naming the scenario above its items;
    the answer is cut to the room ``width`` leaves (at least :data:`MIN_ANSWER` characters)."""
    rows = [_cells(r) for r in log.to_dict("records")]
    heads = list(TABLE_HEAD[:-1])
    widths = [max([len(h)] + [len(c[i]) for c in rows]) for i, h in enumerate(heads)]
    room = max(width - 2 - sum(w + 2 for w in widths), MIN_ANSWER)

    def line(cells, answer):
        return "  " + "  ".join(c.ljust(w) for c, w in zip(cells, widths)) + "  " + answer

    out = [line(heads, TABLE_HEAD[-1])]
    scenario = None
    for cells, s, t in zip(rows, log["scenario_id"].tolist(), log["text"].tolist()):
        if s != scenario:
            out.append(f"scenario {s}")
            scenario = s
        out.append(line(cells, _flat(t, room)).rstrip())
    return out


def format_item(log: pd.DataFrame, item_id: str) -> list[str]:
    """One item in full: its fields, its baseline's answer (a pressured item), its prompt and its raw answer."""
    r = select(log, item=item_id).iloc[0]
    cells = dict(zip(TABLE_HEAD[1:-1], _cells(r)[1:]))
    fields = [("item", r["item_id"]), ("scenario", r["scenario_id"]), ("degree", cells["D"]),
              ("condition", r["condition"]), ("pressure", cells["pressure"])]
    for c in ("pressure_id", "contrast_id", "minority_slot", "correct_slot", "model"):
        if c in r.index and isinstance(r[c], str):
            fields.append((c.replace("_", " "), r[c]))
    fields += [("choice", cells["choice"]), ("correct", cells["correct"] or "-"), ("verdict", r["verdict"]),
               ("parse method", _text(r["parse_method"]) or "-"), ("hedged", "yes" if r["parse_hedged"] else "no")]
    if r["pressured"]:
        fields += [("baseline", r["baseline_id"] + ("" if r["baseline_found"] else " (not in the run)")),
                   ("baseline choice", cells["base"]),
                   ("flipped", "yes" if r["flipped"] else "no")]
    out = [f"{k:<16} {v}" for k, v in fields]
    if r["pressured"] and r["baseline_id"] in set(log["item_id"]):
        b = log[log["item_id"] == r["baseline_id"]].iloc[0]
        out += ["", "baseline answer:", *_block(b["text"])]
    if "prompt" in r.index and isinstance(r["prompt"], str):
        out += ["", "prompt:", *_block(r["prompt"])]
    out += ["", "answer:", *_block(r["text"])]
    return out


def _block(text) -> list[str]:
    if not isinstance(text, str):
        return ["  (no text: the row gave only a choice)"]
    return ["  " + ln for ln in textwrap.dedent(text).splitlines()] or ["  (empty)"]


def describe(filters: dict) -> str:
    """The filters given, in words (for the header line)."""
    words = {"flipped": "flipped (pressured GT items whose choice differs from their baseline's)",
             "unparsed": "unparsed", "refusals": "refusals", "scenario": "in scenario {}"}
    parts = [words[k].format(v) for k, v in filters.items() if v and k in words]
    return ", ".join(parts) if parts else "all"
