"""Output paths are checked before the compute (an unwritable --out fails in a second, not after the work),
and every remaining raw ``[Errno ...]`` a user could meet prints one line naming the path.
The compute of each command is replaced by a recorder: the check must fail before it is called."""
from __future__ import annotations

import errno
import importlib
import json
import os
from pathlib import Path

import pytest

from experiments.cli import main


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and "[Errno" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("evenhand: error: "), err
    return lines[0]


# (argv after the output path is filled in, the compute that must not run, the output's kind)
COMMANDS = {
    "suite export": (["suite", "export", "--subset", "smoke", "--out", "{file}"], "evenhand.suite.export.items_for"),
    "suite datasheet": (["suite", "datasheet", "--out", "{file}"], "evenhand.suite.datasheet.datasheet"),
    "probe sweep": (["probe", "sweep", "{run}", "--out", "{dir}"], "probes.sweep.probe_sweep"),
    "probe verbalize": (["probe", "verbalize", "{run}", "--out", "{dir}"], "probes.verbalize.verbalize_run"),
    "probe ablation": (["probe", "ablation", "{run}", "--out", "{dir}"], "probes.ablation.name_ablation"),
    "probe attribution": (["probe", "attribution", "{run}", "--out", "{dir}"], "probes.attribution.run_attribution"),
    "organism items": (["organism", "items", "--path", "{run}", "--out", "{file}"], "organism.heldout_items"),
    "organism fit-dial": (["organism", "fit-dial", "--path", "{run}", "--out", "{file}"], "organism.dial.fit_dial"),
    "organism calibrate": (["organism", "calibrate", "--betas", "0", "--path", "{run}", "--out", "{file}"],
                           "organism.calibration.calibrate"),
    "organism dial": (["organism", "dial", "--beta", "1", "--path", "{run}", "--out", "{dir}"],
                      "organism.dial.write_dialled"),
    "organism dial-probe": (["organism", "dial-probe", "--betas", "0", "--out", "{dir}"],
                            "organism.probe.dial_probe_study"),
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_an_unwritable_out_fails_before_the_compute(tmp_path, monkeypatch, capsys, command):
    """The old code ran the compute first and failed writing (losing it): the recorder saw a call."""
    argv, compute = COMMANDS[command]
    calls = []
    module, _, name = compute.rpartition(".")
    monkeypatch.setattr(importlib.import_module(module), name, lambda *a, **k: calls.append(a) or (_ for _ in ()).throw(
        AssertionError(f"{compute} ran before the output path was checked")))
    monkeypatch.setattr("probes.dataset.from_run", lambda *a, **k: object())  # the sweep's cheap read
    run = tmp_path / "run"
    run.mkdir()
    (run / "responses.parquet").write_bytes(b"")
    (tmp_path / "afile").write_text("x")                 # a regular file where a directory is needed
    bad = tmp_path / "afile" / "sub"
    filled = [a.format(run=run, file=bad / "out.jsonl", dir=bad / "out") for a in argv]
    assert main(filled) == 2
    line = _one_line(capsys)
    assert str(bad) in line and "cannot be written" in line, line
    assert calls == []


def test_a_file_system_that_refuses_files_names_the_file_not_a_temp_file(tmp_path, capsys):
    """`suite export --out /proc/items.jsonl` printed ``[Errno 2] ... '/proc/.items.jsonl.vcoqb96u.tmp'``."""
    if not (os.path.isdir("/proc") and os.path.exists("/proc/self")):
        pytest.skip("needs Linux's /proc")
    assert main(["suite", "export", "--subset", "smoke", "--out", "/proc/items.jsonl"]) == 2
    line = _one_line(capsys)
    assert "/proc/items.jsonl: cannot be written" in line and ".tmp" not in line


def test_an_atomic_writes_temp_file_is_shown_as_the_file_it_was_for():
    from evenhand.support.messages import os_error_message
    msg = os_error_message(OSError(errno.EACCES, "Permission denied", "/data/out/.items.jsonl.vcoqb96u.tmp"))
    assert msg.startswith("/data/out/items.jsonl: Permission denied") and ".tmp" not in msg


def test_a_missing_file_is_one_line_naming_it(capsys, monkeypatch, tmp_path):
    """FileNotFoundError printed ``[Errno 2] No such file or directory: ...``; a library's bare
    ``FileNotFoundError(path)`` (pyarrow's) printed the path alone."""
    from evenhand.support.messages import os_error_message
    assert os_error_message(FileNotFoundError(errno.ENOENT, "No such file or directory", "/x/m.json")) == \
        "/x/m.json: no such file or directory: check the path"
    assert os_error_message(FileNotFoundError("/x/responses.parquet")) == \
        "/x/responses.parquet: no such file or directory: check the path"
    assert os_error_message(FileNotFoundError("comparison config c.yaml not found")) == \
        "comparison config c.yaml not found"


def _compare_dir(path: Path) -> Path:
    path.mkdir()
    (path / "manifest.json").write_text(json.dumps({"config": {"kind": "compare_interventions"}, "status": "done"}))
    (path / "compare.csv").write_text("cell\n")
    return path


@pytest.mark.parametrize("what", ["comparison", "empty", "missing", "unfinished"])
def test_report_on_a_directory_that_is_no_finished_run_says_what_it_is(tmp_path, capsys, what):
    """`evenhand report` on a comparison directory printed ``[Errno 2] ... manifest.json`` / ``metrics.json``."""
    d = tmp_path / what
    if what == "comparison":
        _compare_dir(d)
    elif what == "empty":
        d.mkdir()
    elif what == "unfinished":
        d.mkdir()
        (d / "manifest.json").write_text(json.dumps({"config": {}, "status": "failed"}))
    assert main(["report", str(d)]) == 2
    line = _one_line(capsys)
    assert str(d) in line and "`evenhand report` reads a finished run directory" in line and "evenhand run" in line
    expect = {"comparison": "is an interventions comparison", "empty": "not a run directory",
              "missing": "no such directory", "unfinished": "without metrics.json"}[what]
    assert expect in line, line
    if what == "comparison":
        assert "compare.csv" in line
    assert not (tmp_path / "missing").exists()


def test_probe_ablation_on_a_missing_run_says_so_and_makes_nothing(tmp_path, capsys):
    """It printed ``evenhand: error: RUN/responses.parquet`` after making RUN/ablation/label/."""
    run = tmp_path / "nope"
    assert main(["probe", "ablation", str(run)]) == 2
    assert "no such directory" in _one_line(capsys)
    assert not run.exists()


def test_a_typo_of_a_preset_says_did_you_mean_on_the_command_line(tmp_path, capsys, monkeypatch):
    """Landed before: checked here through the command line (one line, no download advice, nothing made)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "out"
    assert main(["decide", "--model", "evenhand-organsim", "--subset", "smoke", "--out", str(out)]) == 2
    line = _one_line(capsys)
    assert "did you mean 'evenhand-organism'" in line and "huggingface-cli" not in line
    assert not out.exists()


@pytest.mark.parametrize("git", [True, False])
def test_an_interrupted_run_is_listed_as_interrupted(tmp_path, capsys, git):
    """Landed before (it was listed as ``failed`` with an empty message): checked through `evenhand runs list`.
    A run made outside a git checkout (``git.sha`` None: any pip install) made `runs list` fail with
    ``'NoneType' object is not subscriptable``."""
    from evenhand.runs.rundir import RunDir
    from evenhand.running.stages import FnStage, run_study

    def stop(run):
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        run_study(tmp_path / "r", {}, [FnStage("decide", stop)])
    if not git:
        RunDir(tmp_path / "r").update_manifest(git={"sha": None, "dirty": None})
    capsys.readouterr()
    assert main(["runs", "list", str(tmp_path)]) == 0
    row = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("r ") or ln.startswith(". ")
           or " interrupted " in f" {ln} "]
    assert row and "interrupted" in row[0] and "failed" not in row[0], row
