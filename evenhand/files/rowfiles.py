"""Read a file of rows: JSONL, JSON (an array of objects, or JSON lines), CSV/TSV or parquet, each
also gzip'd (``.gz``); a UTF-8 byte-order mark is skipped.

Rows are numbered as an editor or pandas shows them: ``line N`` (1-based, the header is line 1 of
a CSV) for JSONL and CSV, ``row N`` (0-based) for a JSON array and parquet. What a reader can see
(malformed JSON, a value that is not an object, bytes that are not UTF-8, a CSV row with more
values than its header) is gathered as :class:`~evenhand.vocab.problems.Problem` s, not raised, so that
it is reported together with what validation finds. Empty CSV cells are missing values.
"""
from __future__ import annotations

import csv
import gzip
import io
import json
import zlib
from pathlib import Path

import pandas as pd

from ..vocab.problems import Problem, RowError, raise_problems

TEXT_FORMATS = (".jsonl", ".ndjson", ".json", ".csv", ".tsv")
FORMATS = TEXT_FORMATS + (".parquet",)
WHERE, ORDER = "_where", "_order"
"""Internal columns: each row's label (``line 4``) and its place in the file, for problems."""
_BOM = b"\xef\xbb\xbf"


def row_format(path: Path) -> tuple[str, bool]:
    """(format suffix, gzip'd) of ``path`` by its name: ``answers.csv.gz`` -> (``.csv``, True)."""
    gz = path.suffix == ".gz"
    suffix = Path(path.stem).suffix if gz else path.suffix
    if suffix not in FORMATS:
        raise RowError(f"{path}: expected one of {', '.join(FORMATS)} (each optionally .gz), got {path.name!r}")
    return suffix, gz


def _bytes(path: Path, gz: bool) -> bytes:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise RowError(f"{path}: no such file") from None
    except (IsADirectoryError, PermissionError) as exc:
        raise RowError(f"{path}: cannot read it ({exc.strerror})") from None
    if gz or data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise RowError(f"{path}: not a complete gzip file ({exc})") from None
    return data


def _decode(data: bytes, path: Path) -> tuple[str, dict[int, str]]:
    """The text and, for each line (1-based) holding bytes that are not UTF-8, what they are."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise RowError(f"{path}: the file is UTF-16; save it as UTF-8")
    if data.startswith(_BOM):
        data = data[len(_BOM):]
    try:
        return data.decode("utf-8"), {}
    except UnicodeDecodeError:
        pass
    bad = {}
    for n, line in enumerate(data.split(b"\n"), 1):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad[n] = f"byte 0x{line[exc.start]:02x} at column {exc.start + 1} of line {n} is not UTF-8"
    return data.decode("utf-8", errors="replace"), bad


def _utf8_problems(row: dict, order: int, where: str, why: str) -> list[Problem]:
    fields = [k for k, v in row.items() if isinstance(v, str) and "\ufffd" in v]
    if row.get("item_id") is not None:
        where += f" (item_id={row['item_id']})"
    msg = f"has bytes that are not UTF-8 ({why}): save the file as UTF-8"
    if not fields:
        return [Problem(order, where, None, "not UTF-8", msg)]
    return [Problem(order, where, f, "not UTF-8", msg) for f in fields]


def _json_lines(text: str, bad: dict[int, str]) -> tuple[list[dict], list[Problem]]:
    rows, problems = [], []
    for n, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        where = f"line {n}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(Problem(n, where, None, "malformed JSON", f"malformed JSON ({exc.msg} at column {exc.colno})"))
            continue
        if not isinstance(row, dict):
            problems.append(Problem(n, where, None, "not an object", f"expected a JSON object, got {type(row).__name__}"))
            continue
        if n in bad:
            problems += _utf8_problems(row, n, where, bad[n])
        rows.append({**row, WHERE: where, ORDER: n})
    return rows, problems


def _json_array(text: str, bad: dict[int, str]) -> tuple[list[dict], list[Problem]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return [], [Problem(exc.lineno, f"line {exc.lineno}", None, "malformed JSON",
                            f"malformed JSON ({exc.msg} at column {exc.colno})")]
    rows, problems = [], []
    for i, row in enumerate(data):
        where = f"row {i}"
        if not isinstance(row, dict):
            problems.append(Problem(i, where, None, "not an object", f"expected a JSON object, got {type(row).__name__}"))
            continue
        if bad and any(isinstance(v, str) and "\ufffd" in v for v in row.values()):
            problems += _utf8_problems(row, i, where, next(iter(bad.values())))
        rows.append({**row, WHERE: where, ORDER: i})
    return rows, problems


def _csv(text: str, bad: dict[int, str], tab: bool) -> tuple[list[dict], list[Problem]]:
    first = text.split("\n", 1)[0]
    delimiter = "\t" if tab or ("\t" in first and "," not in first) else ";" if ";" in first and "," not in first \
        else ","
    csv.field_size_limit(2 ** 31 - 1)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    rows, problems = [], []
    try:
        header = [h.strip() for h in next(reader, [])]
        dupes = sorted({h for h in header if header.count(h) > 1})
        if dupes:
            problems.append(Problem(1, "line 1", None, "bad header", f"header names {', '.join(dupes)} twice"))
        prev = reader.line_num
        for values in reader:
            start, prev = prev + 1, reader.line_num
            if not any(v.strip() for v in values):
                continue
            where = f"line {start}"
            if len(values) > len(header):
                problems.append(Problem(start, where, None, "bad CSV row",
                                        f"has {len(values)} values but the header names {len(header)} columns"))
                continue
            row = {h: (v if v.strip() else None) for h, v in zip(header, values)}
            hit = [bad[k] for k in range(start, prev + 1) if k in bad]
            if hit:
                problems += _utf8_problems(row, start, where, hit[0])
            rows.append({**row, WHERE: where, ORDER: start})
    except csv.Error as exc:
        problems.append(Problem(reader.line_num, f"line {reader.line_num}", None, "bad CSV row", f"unreadable CSV ({exc})"))
    return rows, problems


def read_table(path: str | Path) -> tuple[pd.DataFrame, list[Problem]]:
    """The rows of ``path`` (any of :data:`FORMATS`, optionally gzip'd) with the internal columns
    :data:`WHERE` and :data:`ORDER`, and the problems seen while reading.

    Raises :class:`RowError` only when the file as a whole cannot be read (missing, unknown
    format, broken gzip or parquet, UTF-16)."""
    path = Path(path)
    fmt, gz = row_format(path)
    data = _bytes(path, gz)
    if fmt == ".parquet":
        try:
            df = pd.read_parquet(io.BytesIO(data))
        except Exception as exc:  # pyarrow raises several types for a file that is not parquet
            raise RowError(f"{path}: not a readable parquet file ({exc})") from None
        df[WHERE] = [f"row {i}" for i in range(len(df))]
        df[ORDER] = range(len(df))
        return df, []
    text, bad = _decode(data, path)
    if fmt in (".csv", ".tsv"):
        rows, problems = _csv(text, bad, fmt == ".tsv")
    elif fmt == ".json" and text.lstrip().startswith("["):
        rows, problems = _json_array(text, bad)
    else:
        rows, problems = _json_lines(text, bad)
    return pd.DataFrame(rows), problems


def read_rows(path: str | Path) -> pd.DataFrame:
    """Read rows from any format :func:`read_table` reads, without validating them; raises
    :class:`RowError` listing every problem seen while reading (malformed JSON, bytes that are not UTF-8).
    The internal columns ``_where``/``_order`` name each row's place for
    :func:`~evenhand.rows.schema.validate_rows`, which drops them."""
    df, problems = read_table(path)
    raise_problems(problems, str(path))
    return df
