"""Stream suite items to JSONL or parquet (by extension), atomically, in bounded memory."""
from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..files.atomic import atomic_path
from .content import load_content
from .generate import iter_items
from .subsets import iter_subset

_STR = pa.string()
ITEM_SCHEMA = pa.schema([
    ("item_id", _STR), ("baseline_id", _STR), ("scenario_id", _STR), ("domain", _STR), ("condition", _STR),
    ("variant", _STR), ("question_polarity", _STR), ("degree", pa.int64()), ("contrast_id", _STR),
    ("contrast_type", _STR), ("contrast_category", _STR), ("minority_group", _STR), ("majority_group", _STR),
    ("minority_slot", _STR), ("correct_slot", _STR), ("truth_favors", _STR), ("amb_minority_strong_on", pa.int64()),
    ("pressure_id", _STR), ("pressure_family", _STR), ("pressure_family_code", _STR), ("pressure_slot", _STR),
    ("pressure_resolved", _STR), ("pressure_targets", _STR), ("candidate_noun", _STR),
    ("names", pa.struct([("A", _STR), ("B", _STR)])), ("prompt", _STR), ("suite_version", _STR),
])
BATCH = 10_000


def items_for(subset: str, seed: int = 0, suite: str | None = None) -> Iterator[dict]:
    """Items of a named subset, or of the whole product for ``full``, of suite version ``suite``
    (default: the current one)."""
    if subset == "full":
        return iter_items(load_content(suite))
    return iter_subset(subset, seed, load_content(suite))


def write_items(items: Iterable[dict], out: str | Path, limit: int | None = None) -> int:
    """Write items to ``out`` (.jsonl or .parquet); returns the count. Nothing is left behind on error."""
    out = Path(out)
    if out.suffix not in (".jsonl", ".parquet"):
        raise ValueError(f"--out must end in .jsonl or .parquet, got {out.name!r}")
    stream = islice(items, limit) if limit is not None else iter(items)
    n = 0
    with atomic_path(out) as tmp:
        if out.suffix == ".jsonl":
            with open(tmp, "w", encoding="utf-8") as fh:
                for item in stream:
                    fh.write(json.dumps(item, ensure_ascii=False) + "\n")
                    n += 1
        else:
            with pq.ParquetWriter(tmp, ITEM_SCHEMA) as writer:
                while batch := list(islice(stream, BATCH)):
                    writer.write_table(pa.Table.from_pylist(batch, schema=ITEM_SCHEMA))
                    n += len(batch)
    return n
