"""Append-only shard directories: resumable, crash-safe output for long runs.

A stage writes one shard per batch, atomically (temporary file, fsync, rename),
named ``{prefix}-{NNNNN}.{ext}`` in increasing order. A re-run reads the
item ids already present and skips them; a run killed with ``kill -9`` leaves
only whole shards (stray temporary files are removed on the next start). Since
work is planned over the remaining items in a fixed order and shards hold
whole batches, a resumed run computes exactly the batches it had not written.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq


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
        from .runs import atomic_path
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


def write_json(path: Path, obj) -> None:
    from .runs import write_json_atomic
    write_json_atomic(path, obj)


def read_json(path: Path):
    return json.loads(Path(path).read_text())
