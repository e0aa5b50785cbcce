"""The files floor: reading and writing files safely.

- ``rowfiles``: a file of rows in JSONL, JSON, CSV/TSV or parquet; ``atomic``: writes that replace their target
  only when complete; ``runlock``: file modes and the writer's lock for shared storage.
"""
