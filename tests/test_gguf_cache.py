"""The dequantised-copy cache of a GGUF checkpoint (evenhand/models/gguf_cache.py), without the real model:
the dequantisation is replaced by a writer of small files, so what is checked is the cache's logic (one build,
then reads; a damaged, partial or stale copy detected and rebuilt; an interrupted build leaves nothing)."""
from __future__ import annotations

import io
import json

import pytest

from evenhand.models import gguf_cache
from evenhand.models.gguf_cache import MANIFEST, cache_problem, dequantised_copy, file_sha256


@pytest.fixture()
def fake(tmp_path, monkeypatch):
    """A GGUF-named file, the cache root under tmp_path, and a build that writes two files and counts calls."""
    monkeypatch.setenv("EVENHAND_CACHE", str(tmp_path / "cache"))
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + bytes(range(256)) * 64)
    calls = []

    def build(src, tmp, sha):
        calls.append(src)
        (tmp / "model.safetensors").write_bytes(b"weights-of-" + src.read_bytes()[:32])
        (tmp / "config.json").write_text("{}")
        files = {p.name: {"size": p.stat().st_size, "sha256": file_sha256(p)} for p in tmp.iterdir()}
        (tmp / MANIFEST).write_text(json.dumps({"format": gguf_cache.FORMAT, "source_sha256": sha, "files": files}))
    monkeypatch.setattr(gguf_cache, "_build", build)
    return gguf, calls


def test_built_once_then_read(fake):
    gguf, calls = fake
    log = io.StringIO()
    d = dequantised_copy(gguf, "m", log=log)
    assert d.name == f"m-{file_sha256(gguf)[:16]}" and (d / "model.safetensors").is_file()
    assert "dequantising m.gguf once" in log.getvalue()
    again = io.StringIO()
    assert dequantised_copy(gguf, "m", log=again) == d
    assert len(calls) == 1 and again.getvalue() == ""
    assert [p.name for p in d.parent.iterdir()] == [d.name]  # no temporary directory left


@pytest.mark.parametrize("damage, reason", [
    (lambda d: (d / "model.safetensors").write_bytes(b"weights-of-GGUF" + b"\x01" * 28), "does not match its sha256"),
    (lambda d: (d / "model.safetensors").write_bytes(b"short"), "bytes, the manifest says"),
    (lambda d: (d / "config.json").unlink(), "config.json is missing"),
    (lambda d: (d / MANIFEST).unlink(), "incomplete copy"),
    (lambda d: (d / MANIFEST).write_text("{\"format\": 1,"), "not valid JSON"),
])
def test_damaged_copy_is_rebuilt_with_a_message(fake, damage, reason):
    gguf, calls = fake
    d = dequantised_copy(gguf, "m", log=io.StringIO())
    good = (d / "model.safetensors").read_bytes()
    damage(d)
    assert reason in cache_problem(d, file_sha256(gguf))
    log = io.StringIO()
    assert dequantised_copy(gguf, "m", log=log) == d
    assert len(calls) == 2 and "unusable" in log.getvalue() and reason in log.getvalue()
    assert (d / "model.safetensors").read_bytes() == good and cache_problem(d, file_sha256(gguf)) is None


def test_another_gguf_gets_another_copy_and_a_copied_cache_is_stale(fake):
    gguf, calls = fake
    first = dequantised_copy(gguf, "m", log=io.StringIO())
    gguf.write_bytes(b"GGUF" + b"\x07" * 1000)
    second = dequantised_copy(gguf, "m", log=io.StringIO())
    assert second != first and len(calls) == 2
    assert "made from another GGUF" in cache_problem(first, file_sha256(gguf))


def test_failed_build_leaves_nothing(fake, monkeypatch):
    gguf, _ = fake

    def broken(src, tmp, sha):
        (tmp / "model.safetensors").write_bytes(b"half")
        raise RuntimeError("killed mid-write")
    monkeypatch.setattr(gguf_cache, "_build", broken)
    with pytest.raises(RuntimeError, match="killed"):
        dequantised_copy(gguf, "m", log=io.StringIO())
    assert list(gguf_cache.cache_root().iterdir()) == []


def test_existing_copy_only_when_usable(fake):
    from evenhand.models.gguf_cache import existing_copy
    gguf, calls = fake
    assert existing_copy(gguf, "m") is None and calls == []
    d = dequantised_copy(gguf, "m", log=io.StringIO())
    assert existing_copy(gguf, "m") == d
    (d / "config.json").unlink()
    assert existing_copy(gguf, "m") is None and len(calls) == 1
