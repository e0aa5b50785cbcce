"""Append-only shard directories: resumable, crash-safe output for long runs.

A stage writes one shard per batch, atomically (temporary file, fsync, rename),
named ``{prefix}-{NNNNN}.{ext}`` in increasing order. A re-run reads the
item ids already present and skips them; a run killed with ``kill -9`` leaves
only whole shards (stray temporary files are removed on the next start). Since
work is planned over the remaining items in a fixed order and shards hold
whole batches, a resumed run computes exactly the batches it had not written.

It also says which items go to which shard of a distributed run (:func:`balanced_shards`): whole units
(scenarios by default, :func:`shard_units`), so that the items sharing a prompt prefix and a baseline
stay together, with the shards about equally full.
"""
from __future__ import annotations

import heapq
import json
import re
from collections.abc import Hashable, Sequence
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
from ..runs.rundir import atomic_path
from ..runs.rundir import write_json_atomic


class ShardDir:
    def __init__(self, path: str | Path, prefix: str, ext: str):
        self.path = Path(path)
        self.prefix, self.ext = prefix, ext
        self._re = re.compile(rf"^{re.escape(prefix)}-(\d{{5}})\.{re.escape(ext)}$")

    def prepare(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        for p in self.path.glob(f".{self.prefix}-*.tmp"):
            p.unlink()

    def shards(self) -> list[Path]:
        if not self.path.exists():
            return []
        found = [(int(m.group(1)), p) for p in self.path.iterdir() if (m := self._re.match(p.name))]
        return [p for _, p in sorted(found)]

    def next_path(self) -> Path:
        shards = self.shards()
        n = int(self._re.match(shards[-1].name).group(1)) + 1 if shards else 0
        return self.path / f"{self.prefix}-{n:05d}.{self.ext}"

    def atomic_write(self, writer) -> Path:
        """Call ``writer(tmp_path)``, then rename the result to the next shard name."""
        target = self.next_path()
        with atomic_path(target, prefix=f".{self.prefix}-") as tmp:
            writer(tmp)
        return target


class ParquetShards(ShardDir):
    def __init__(self, path: str | Path, prefix: str = "shard"):
        super().__init__(path, prefix, "parquet")

    def done_ids(self) -> set[str]:
        done: set[str] = set()
        for p in self.shards():
            done.update(pq.read_table(p, columns=["item_id"]).column("item_id").to_pylist())
        return done

    def write(self, df: pd.DataFrame) -> Path:
        return self.atomic_write(lambda tmp: df.to_parquet(tmp, index=False))

    def read_all(self) -> pd.DataFrame:
        parts = [pd.read_parquet(p) for p in self.shards()]
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


SHARD_UNITS = {"scenario": ("scenario_id",), "baseline": ("scenario_id", "contrast_type"), "item": ("item_id",)}
"""What :func:`shard_units` keeps together in one shard: ``scenario`` (every item of a scenario: they share
the scenario's text, the start of every prompt), ``baseline`` (scenario x contrast type: each pressured item
with its baseline and its contrast partner) or ``item`` (no grouping)."""


def shard_units(items: pd.DataFrame, by: str = "scenario") -> list[tuple]:
    """Each item's sharding unit (:data:`SHARD_UNITS`), as a tuple of its unit columns. Items that lack a
    unit column (a custom subset without ``scenario_id``) fall back to ``baseline_id``, then ``item_id``."""
    if by not in SHARD_UNITS:
        raise ValueError(f"shard unit must be one of {', '.join(SHARD_UNITS)}, got {by!r}")
    cols = [c for c in SHARD_UNITS[by] if c in items.columns]
    if len(cols) < len(SHARD_UNITS[by]):
        cols = ["baseline_id"] if "baseline_id" in items.columns else ["item_id"]
    return list(items[cols].astype(str).itertuples(index=False, name=None))


def balanced_shards(units: Sequence[Hashable], n_shards: int) -> list[int]:
    """The shard (0 .. ``n_shards - 1``) of each position of ``units``: every item of a unit goes to one
    shard, and the units are spread so the shards hold about the same number of items (largest unit first,
    each to the least loaded shard; ties go to the lower shard, and units of equal size are taken in the
    order of their keys). A function of the multiset of units only: not of the order the items come in."""
    if n_shards < 1:
        raise ValueError("n_shards must be at least 1")
    sizes: dict[Hashable, int] = {}
    for u in units:
        sizes[u] = sizes.get(u, 0) + 1
    loads = [(0, k) for k in range(n_shards)]
    where: dict[Hashable, int] = {}
    for unit in sorted(sizes, key=lambda u: (-sizes[u], str(u))):
        load, k = heapq.heappop(loads)
        where[unit] = k
        heapq.heappush(loads, (load + sizes[unit], k))
    return [where[u] for u in units]


def scattered_units(units: Sequence[Hashable], shards: Sequence[int]) -> list[Hashable]:
    """The units whose items were put in more than one shard (empty when sharding kept every unit whole)."""
    seen: dict[Hashable, set[int]] = {}
    for u, k in zip(units, shards):
        seen.setdefault(u, set()).add(k)
    return [u for u, ks in seen.items() if len(ks) > 1]


def write_json(path: Path, obj) -> None:
    write_json_atomic(path, obj)


def read_json(path: Path):
    return json.loads(Path(path).read_text())
