"""Atomic writes: a file replaces its target only when it is complete.

Each file is written to a temporary file in the same directory, flushed, then renamed over its
target, so a crash never leaves a half-written file and never destroys an earlier complete one.
:mod:`evenhand.runs.rundir` writes every run file this way; the suite's item export too. When the disk is full,
:func:`rewrite_in_place` rewrites a small JSON file over its own blocks.
"""
from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .runlock import file_mode


@contextmanager
def atomic_path(path: Path, prefix: str | None = None):
    """Yield a temporary path beside ``path``; when the block succeeds, fsync it and rename it over
    ``path``; when it fails, remove it. Readers never see a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=prefix or f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, file_mode())  # mkstemp makes 0600; teammates on shared storage read what the umask allows
    finally:
        os.close(fd)
    try:
        yield tmp
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename is None:
            exc.filename = str(path)  # a full disk mid-write: name the file the message is about
        raise


@contextmanager
def atomic_open(path: Path, mode: str = "w"):
    """Yield ``(file, temporary path)`` opened with ``mode`` beside ``path``; the file replaces
    ``path`` when the block succeeds (:func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        with open(tmp, mode) as fh:
            yield fh, tmp


def write_json_atomic(path: Path, obj) -> None:
    with atomic_open(Path(path)) as (fh, _):
        json.dump(obj, fh, indent=2, sort_keys=True, default=str, allow_nan=False)
        fh.write("\n")


def rewrite_in_place(path: str | Path, obj: Any) -> None:
    """Overwrite the JSON file ``path`` with ``obj`` in place (no temporary file beside it).

    For when an atomic write fails on a full disk: a small file rewritten over its own blocks
    needs no new space, so a manifest can still say ``failed``."""
    data = (json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n").encode()
    fd = os.open(path, os.O_RDWR)
    try:
        os.ftruncate(fd, 0)
        while data:
            data = data[os.write(fd, data):]
    finally:
        os.close(fd)
