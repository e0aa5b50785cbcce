"""Faults end in one line naming the file and what to do (exit code 2), never a traceback: damaged
weights (checked before any weight is read), unwritable output paths, a full disk, non-UTF-8 input;
a failed run's manifest says failed with the reason; a run whose answers mostly cannot be parsed is
warned about loudly and the warning is recorded."""
from __future__ import annotations

import errno
import json
import os

import pytest

from evenhand.models.loading import ModelLoadError, check_weight_files
from evenhand.runs.rundir import RunDir, write_table_atomic
from experiments.cli import main


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory, smoke_items):
    from evenhand.models.tiny import save_tiny_model
    return save_tiny_model(tmp_path_factory.mktemp("errors") / "m", "qwen2", smoke_items["prompt"].tolist(), seed=1)


def _copy(src, dst):
    import shutil
    return shutil.copytree(src, dst)


def _one_line(capsys, alone: bool = True) -> str:
    """The error line; ``alone``: the only line on stderr (else the last, after progress output)."""
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("evenhand: error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0] and (len(lines) == 1 or not alone), err
    return errors[0]


def test_a_truncated_safetensors_file_is_refused_before_any_weight_is_read(tmp_path, tiny_dir, monkeypatch):
    d = _copy(tiny_dir, tmp_path / "m")
    f = d / "model.safetensors"
    check_weight_files(d)  # the intact file passes
    os.truncate(f, f.stat().st_size - 1)
    import transformers
    loaded = []
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained",
                        classmethod(lambda cls, *a, **k: loaded.append(1)))
    from evenhand.models.loading import load_model
    with pytest.raises(ModelLoadError, match=r"model\.safetensors is truncated"):
        load_model(str(d))
    assert not loaded  # refused before the long load


def test_a_damaged_header_and_a_missing_shard_name_the_file(tmp_path, tiny_dir):
    d = _copy(tiny_dir, tmp_path / "m")
    f = d / "model.safetensors"
    f.write_bytes((10**9).to_bytes(8, "little") + b"{}")
    with pytest.raises(ModelLoadError, match=r"model\.safetensors is not a readable safetensors file"):
        check_weight_files(d)
    f.unlink()
    (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"w": "model-00001.safetensors"}}))
    with pytest.raises(ModelLoadError, match=r"model-00001\.safetensors, missing"):
        check_weight_files(d)


def test_damage_the_header_check_cannot_see_still_ends_in_a_model_load_error(tmp_path, tiny_dir):
    """A header of the right length whose tensor does not fit its offsets: safetensors' own error at load
    time becomes a ModelLoadError naming the directory."""
    import struct

    from evenhand.models.loading import load_model
    d = _copy(tiny_dir, tmp_path / "m")
    header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}).encode()
    (d / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + bytes(4))
    check_weight_files(d)
    with pytest.raises(ModelLoadError, match=f"cannot load model from local directory {d}.*copy it again"):
        load_model(str(d))


def test_an_empty_or_foreign_gguf_file_is_refused(tmp_path):
    g = tmp_path / "m.gguf"
    g.write_bytes(b"")
    with pytest.raises(ModelLoadError, match=r"m\.gguf is empty"):
        check_weight_files(tmp_path, "m.gguf")
    g.write_bytes(b"<html>not found</html>")
    with pytest.raises(ModelLoadError, match=r"m\.gguf is not a GGUF file"):
        check_weight_files(tmp_path, "m.gguf")
    g.write_bytes(b"GGUF\x03\x00\x00\x00")
    check_weight_files(tmp_path, "m.gguf")


def test_the_cli_says_so_in_one_line_and_makes_no_output_directory(tmp_path, tiny_dir, capsys):
    d = _copy(tiny_dir, tmp_path / "m")
    os.truncate(d / "model.safetensors", 1000)
    out = tmp_path / "out"
    assert main(["decide", "--model", str(d), "--subset", "smoke", "--limit", "2", "--out", str(out)]) == 2
    line = _one_line(capsys)
    assert str(d / "model.safetensors") in line and "copy it again" in line
    assert not out.exists()


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory):
    from experiments.studies.simulate import simulate_run
    run, _ = simulate_run(tmp_path_factory.mktemp("sim") / "run", "smoke", resamples=20)
    return run.path


@pytest.mark.parametrize("command", ["export", "figures"])
def test_an_output_path_under_a_regular_file_names_the_path(tmp_path, sim_run, capsys, command):
    (tmp_path / "afile").write_text("x")
    out = tmp_path / "afile" / "sub" / ("items.jsonl" if command == "export" else "figs")
    argv = (["suite", "export", "--subset", "smoke", "--out", str(out)] if command == "export"
            else ["figures", str(sim_run), "--out", str(out)])
    assert main(argv) == 2
    line = _one_line(capsys)
    assert str(tmp_path / "afile") in line and "choose another path" in line


@pytest.mark.parametrize("command", ["export", "figures"])
def test_an_unwritable_output_path_names_the_path(tmp_path, sim_run, capsys, monkeypatch, command):
    """A read-only directory (simulated: the tests may run as root, who can write anywhere)."""
    import pathlib
    ro = tmp_path / "ro"
    real_mkdir = pathlib.Path.mkdir

    def mkdir(self, *args, **kwargs):
        if self == ro or ro in self.parents:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(self))
        return real_mkdir(self, *args, **kwargs)
    monkeypatch.setattr(pathlib.Path, "mkdir", mkdir)
    out = ro / ("items.jsonl" if command == "export" else "figs")
    argv = (["suite", "export", "--subset", "smoke", "--out", str(out)] if command == "export"
            else ["figures", str(sim_run), "--out", str(out)])
    assert main(argv) == 2
    line = _one_line(capsys)
    assert str(ro) in line and "Permission denied" in line and "another --out" in line


def test_a_file_that_is_not_utf8_is_named(tmp_path, capsys):
    bad = tmp_path / "config.yaml"
    bad.write_bytes(b"model: \xff\xfe\n")
    assert main(["run", str(bad)]) == 2
    line = _one_line(capsys)
    assert str(bad) in line and "UTF-8" in line


def _run_cfg(tmp_path, smoke_items, model_dir):
    from experiments.studies.run.config import CacheConfig, RunConfig, SuiteConfig
    from evenhand.models.loading import ModelSpec
    write_table_atomic(tmp_path / "items.parquet", smoke_items.head(6))
    return RunConfig(model=ModelSpec(str(model_dir)), output_dir=str(tmp_path / "run"),
                     suite=SuiteConfig(subset=str(tmp_path / "items.parquet")), batch_size=4, resamples=20,
                     cache=CacheConfig(enabled=True, dtype="float32"))


def test_a_full_disk_in_the_cache_stage_fails_the_run_and_a_rerun_resumes(tmp_path, smoke_items, tiny_dir,
                                                                          monkeypatch, capsys):
    """ENOSPC mid-write in the cache stage: the manifest says failed with the reason (even though the disk
    is too full for an atomic manifest write), the CLI prints one line naming the file, a rerun resumes."""
    import dataclasses

    import yaml

    import evenhand.running.activations as activations
    import evenhand.runs.rundir as runs
    cfg = _run_cfg(tmp_path, smoke_items, tiny_dir)
    shard = tmp_path / "run" / "activations" / "shard-0.npy"
    real_cache, real_write = activations.cache_activations, runs.write_json_atomic

    def full_disk(*args, **kwargs):
        def no_space(*a, **k):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        monkeypatch.setattr(runs, "write_json_atomic", no_space)  # the manifest cannot be written atomically
        with runs.atomic_open(shard, "wb"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(activations, "cache_activations", full_disk)
    config = tmp_path / "run.yaml"
    data = json.loads(json.dumps(dataclasses.asdict(cfg)))
    config.write_text(yaml.safe_dump(data))
    assert main(["run", str(config), "--quiet"]) == 2
    line = _one_line(capsys, alone=False)
    assert str(shard) in line and "No space left on device" in line and "free space" in line
    man = RunDir(tmp_path / "run").manifest()
    assert man["status"] == "failed" and man["error"]["stage"] == "cache"
    assert "No space left on device" in man["error"]["message"]
    assert man["stages_done"] == ["load_model", "decide", "score"]

    monkeypatch.setattr(activations, "cache_activations", real_cache)
    monkeypatch.setattr(runs, "write_json_atomic", real_write)
    assert main(["run", str(config), "--quiet"]) == 0
    man = RunDir(tmp_path / "run").manifest()
    assert man["status"] == "done" and man["stages_done"] == ["load_model", "decide", "score", "cache"]


def test_mostly_unparseable_answers_are_warned_about_and_recorded(tmp_path, smoke_items, tiny_dir, capsys):
    """A random tiny model answers nothing parseable: a loud warning on stderr and in the manifest."""
    from dataclasses import replace

    from experiments.studies.run.local import run_config
    cfg = replace(_run_cfg(tmp_path, smoke_items, tiny_dir), cache=replace(_run_cfg(
        tmp_path, smoke_items, tiny_dir).cache, enabled=False))
    run, _ = run_config(cfg, progress=False)
    err = capsys.readouterr().err
    assert "WARNING:" in err and "no parseable A/B choice" in err and "!!!!" in err
    (w,) = run.manifest()["warnings"]
    assert w["kind"] == "unparseable" and w["share"] > 0.5 and w["n"] == 6


def test_mostly_parseable_answers_are_not_warned_about(tmp_path, capsys):
    import pandas as pd

    from evenhand.support.messages import warn_unparseable
    run = RunDir.create(tmp_path / "r", {"a": 1}, "1", {"suite": 0})
    assert warn_unparseable(pd.DataFrame({"choice": ["A", "B", None, "A"]}), run) is None
    assert "warnings" not in run.manifest() and capsys.readouterr().err == ""
    assert warn_unparseable(pd.DataFrame({"choice": ["A", None, None]}), run).startswith("67% of 3 answers")


def test_unparseable_warnings_are_kept_per_part_of_a_run(tmp_path, capsys):
    """A comparison warns per cell and `modes` per mode: one manifest entry per part, a repeat replaces its own."""
    import pandas as pd

    from evenhand.support.messages import warn_unparseable
    run = RunDir.create(tmp_path / "r", {"a": 1}, "1", {"suite": 0})
    bad = pd.DataFrame({"choice": [None, None, "A"]})
    assert "of cells/caa-s0" in warn_unparseable(bad, run, part="cells/caa-s0")
    warn_unparseable(bad, run, part="cells/leace-s0")
    warn_unparseable(pd.DataFrame({"choice": [None] * 4}), run, part="cells/caa-s0")  # the cell decided again
    parts = {w["part"]: w["n"] for w in run.manifest()["warnings"]}
    assert parts == {"cells/caa-s0": 4, "cells/leace-s0": 3}
    assert capsys.readouterr().err.count("WARNING:") == 3

