"""Shared run directories: file modes follow the umask; one writer at a time (a live holder refuses a
second writer, naming its pid and host; a dead one's stale lock is taken over); answer-neutral config
fields may change on resume, the others are refused by name."""
from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys

import pandas as pd
import pytest

from evenhand.files.runlock import RunLock, current_umask, file_mode
from evenhand.runs.rundir import RunDir, RunError, write_json_atomic, write_table_atomic
from evenhand.running.shards import ParquetShards
from evenhand.running.stages import FnStage, finished_with, run_study


@pytest.fixture
def umask():
    """Set the umask for one test and restore it after."""
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("mask, expected", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_every_written_file_follows_the_umask(tmp_path, umask, mask, expected):
    umask(mask)
    assert current_umask() == mask and file_mode() == expected
    write_json_atomic(tmp_path / "m.json", {"a": 1})
    write_table_atomic(tmp_path / "t.parquet", pd.DataFrame({"x": [1, 2]}))
    write_table_atomic(tmp_path / "t.csv", pd.DataFrame({"x": [1, 2]}))
    shards = ParquetShards(tmp_path / "decisions")
    shards.prepare()
    shard = shards.write(pd.DataFrame({"item_id": ["a"]}))
    run = RunDir.create(tmp_path / "run", {"k": 1}, "v", {})
    files = [tmp_path / "m.json", tmp_path / "t.parquet", tmp_path / "t.csv", shard, run.manifest_path,
             run.path / ".lock"]
    assert {str(f.relative_to(tmp_path)): oct(_mode(f)) for f in files} == \
        {str(f.relative_to(tmp_path)): oct(expected) for f in files}
    run.finish()


def _lock_file(directory, pid: int, host: str | None = None) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / ".lock").write_text(json.dumps({"pid": pid, "host": host or socket.gethostname(),
                                                 "since": "2026-01-01T00:00:00+00:00"}))


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _steps(calls: list):
    def make(name):
        def go(run):
            calls.append(name)
            assert RunLock(run.path).holder()["pid"] == os.getpid()  # held while the stages write
            write_json_atomic(run.path / f"{name}.json", {"ok": True})
        return FnStage(name, go, finished_with(lambda r: r.path / f"{name}.json"))
    return [make("decide"), make("score")]


def test_a_second_writer_is_refused_naming_the_holders_pid_and_host(tmp_path):
    calls: list = []
    run_study(tmp_path / "r", {"k": 1}, _steps(calls))
    before = (tmp_path / "r" / "manifest.json").read_text()
    holder = os.getppid()  # a live process that is not this one
    _lock_file(tmp_path / "r", holder)
    with pytest.raises(RunError, match=rf"being written by pid {holder} on host {socket.gethostname()}"):
        run_study(tmp_path / "r", {"k": 1}, _steps(calls))
    # the refused writer touched nothing: not the manifest, not the holder's lock
    assert (tmp_path / "r" / "manifest.json").read_text() == before and calls == ["decide", "score"]
    assert RunLock(tmp_path / "r").holder()["pid"] == holder
    with pytest.raises(RunError, match="being written by pid"):  # a new directory too
        _lock_file(tmp_path / "new", holder)
        run_study(tmp_path / "new", {"k": 1}, _steps(calls))
    assert not (tmp_path / "new" / "manifest.json").exists()


def test_a_second_writer_in_another_process_is_refused(tmp_path):
    run = RunDir.create(tmp_path / "r", {"k": 1}, "v", {})  # holds the lock until finish()
    code = ("import sys; from evenhand.running.stages import run_study\n"
            "from evenhand.runs.rundir import RunError\n"
            "try:\n    run_study(sys.argv[1], {'k': 1}, [])\n"
            "except RunError as e:\n    print(e); sys.exit(3)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    out = subprocess.run([sys.executable, "-c", code, str(run.path)], capture_output=True, text=True, env=env)
    assert out.returncode == 3 and f"pid {os.getpid()} on host {socket.gethostname()}" in out.stdout
    run.finish()
    assert not (run.path / ".lock").exists()
    out = subprocess.run([sys.executable, "-c", code, str(run.path)], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_stale_lock_is_taken_over_and_said_so(tmp_path, capsys):
    calls: list = []
    dead = _dead_pid()
    _lock_file(tmp_path / "r", dead)
    run = run_study(tmp_path / "r", {"k": 1}, _steps(calls))
    assert f"taking over a stale lock of pid {dead}" in capsys.readouterr().err
    assert run.status == "done" and calls == ["decide", "score"] and not (tmp_path / "r" / ".lock").exists()


def test_a_lock_from_another_host_is_never_taken_over(tmp_path):
    _lock_file(tmp_path / "r", _dead_pid(), host="elsewhere.example")
    with pytest.raises(RunError, match="pid .* on host elsewhere.example"):
        run_study(tmp_path / "r", {"k": 1}, [])


def test_the_lock_is_given_back_when_a_stage_fails(tmp_path):
    def broken(run):
        raise ValueError("broke")
    with pytest.raises(ValueError):
        run_study(tmp_path / "r", {"k": 1}, [FnStage("x", broken)])
    assert RunDir(tmp_path / "r").status == "failed" and not (tmp_path / "r" / ".lock").exists()


def test_answer_neutral_fields_may_change_on_resume_and_are_recorded(tmp_path):
    calls: list = []
    config = {"mode": "answer", "resamples": 1000, "model": "m"}
    neutral = {"may_change": ("resamples",), "keep_stages": ("decide",)}
    run_study(tmp_path / "r", config, _steps(calls), **neutral)
    run = run_study(tmp_path / "r", {**config, "resamples": 200}, _steps(calls), **neutral)
    m = run.manifest()
    assert calls == ["decide", "score", "score"]  # the answers are kept, the scoring runs again
    assert m["config"]["resamples"] == 200 and m["status"] == "done" and m["stages_done"] == ["decide", "score"]
    assert m["config_changes"][0]["fields"] == {"resamples": {"old": 1000, "new": 200}}
    with pytest.raises(RunError, match=r"fields that differ: mode\)") as err:
        run_study(tmp_path / "r", {**config, "resamples": 50, "mode": "logprob"}, _steps(calls), **neutral)
    assert "resamples may change" in str(err.value)
    assert RunDir(tmp_path / "r").manifest()["config"]["resamples"] == 200  # refused: nothing recorded
    with pytest.raises(RunError, match=r"fields that differ: resamples\)"):  # only when the study allows it
        run_study(tmp_path / "r", {**config, "resamples": 50}, _steps(calls))


def test_a_run_config_resumes_with_new_resamples_and_refuses_a_new_mode(tmp_path, smoke_items, monkeypatch):
    """The runner: changing ``resamples`` resumes without deciding again and rescores with the new value;
    changing ``mode`` is refused naming ``mode``."""
    import importlib
    from dataclasses import replace

    from experiments.studies.run.config import RunConfig, SuiteConfig
    from experiments.studies.run.local import run_config
    from evenhand.models.loading import ModelSpec
    from evenhand.models.tiny import save_tiny_model

    model_dir = save_tiny_model(tmp_path / "m", "qwen2", smoke_items["prompt"].tolist(), seed=1)
    write_table_atomic(tmp_path / "items.parquet", smoke_items.head(6))
    cfg = RunConfig(model=ModelSpec(str(model_dir)), output_dir=str(tmp_path / "run"),
                    suite=SuiteConfig(subset=str(tmp_path / "items.parquet")), batch_size=4, resamples=50)
    engine = importlib.import_module("experiments.studies.run.local")  # decide as the runner bound it
    decided, real = [], engine.decide
    monkeypatch.setattr(engine, "decide", lambda *a, **k: decided.append(1) or real(*a, **k))
    run, _ = run_config(cfg, progress=False)
    scored = run.metrics_path.stat().st_mtime_ns
    run, report = run_config(replace(cfg, resamples=80), progress=False)
    m = run.manifest()
    assert run.metrics_path.stat().st_mtime_ns > scored  # rescored (the jackknife-t records no resamples)
    assert "resamples" not in report and m["intervals"] == {"metrics": "jackknife-t over scenarios"}
    assert len(decided) == 1 and m["config"]["resamples"] == 80 and m["status"] == "done"
    assert m["config_changes"][-1]["fields"] == {"resamples": {"old": 50, "new": 80}} and "score" in m["stages_done"]
    with pytest.raises(RunError, match=r"fields that differ: mode\)"):
        run_config(replace(cfg, mode="logprob"), progress=False)
    assert len(decided) == 1 and not (run.path / ".lock").exists()
