"""Smaller items of issue 45 (point 8): warnings print as one line naming their category; `interventions list`
keeps its columns apart; `report`'s unwritable-output error names no flag it lacks."""
from __future__ import annotations

import re
import sys
from pathlib import Path

from experiments.cli.main import main

ROOT = Path(__file__).resolve().parents[1]


SCRIPT = """
import sys, warnings
import experiments.cli.studies as studies
from experiments.cli.main import main
def warns(a):
    warnings.warn("the organism was trained on suite 1,\\n  these items are suite 2", UserWarning)
    return 0
studies._interventions_list = warns
sys.exit(main(["interventions", "list"]))
"""


def test_a_warning_is_one_line_with_its_category():
    """In a process of its own: pytest records warnings instead of printing them."""
    import subprocess
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "evenhand: warning (UserWarning): the organism was trained on suite 1, these items are suite 2\n"


def test_interventions_list_keeps_its_columns_apart(capsys):
    assert main(["interventions", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert re.split(r"\s{2,}", lines[0]) == ["name", "kind", "description"]
    starts = {m.end() for ln in lines for m in [re.search(r"(?<=\S)\s{2,}(?=\S)", ln)] if m}
    assert len(starts) == 1  # the kind column starts at the same place on every line
    assert all(len(re.split(r"\s{2,}", ln, maxsplit=2)) == 3 for ln in lines)


def test_report_cannot_write_names_no_out_flag(tmp_path, monkeypatch, capsys):
    """`report` has no --out: its unwritable-directory error says what to do instead of naming one."""
    import errno

    import evenhand.support.messages as messages

    def refuse(path):
        raise messages.NotWritableError(path, PermissionError(errno.EACCES, "Permission denied"))
    assert main(["simulate", "--out", str(tmp_path / "sim")]) == 0
    capsys.readouterr()
    monkeypatch.setattr(messages, "writable_dir", refuse)
    assert main(["report", str(tmp_path / "sim")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--out" not in err and "copy the run directory" in err, err


def test_power_says_the_suite_size_and_rounds_contrasts(tmp_path, capsys):
    import evenhand as eh
    assert main(["simulate", "--out", str(tmp_path / "sim")]) == 0
    capsys.readouterr()
    assert main(["power", str(tmp_path / "sim"), "--target", "0.05"]) == 0
    out = capsys.readouterr().out
    n = len(eh.suite.load_content().scenarios)
    assert f"has {n} scenarios in all" in out and "> the suite's" in out
    assert not re.search(r"\d\.\d{3,} contrasts", out), out


def test_the_few_scenarios_note_is_said_once(tmp_path, capsys):
    import evenhand as eh
    items = eh.suite.items("smoke")
    t1 = items[items["contrast_type"] == "type1"]
    keep = t1["scenario_id"].value_counts().index[:6].tolist()  # the 6 scenarios with most type-1 items
    rows = eh.SimulatedModel(seed=0).decide(items[items["scenario_id"].isin(keep)])
    rows.to_json(tmp_path / "few.jsonl", orient="records", lines=True)
    assert main(["score", str(tmp_path / "few.jsonl")]) == 0
    out = capsys.readouterr().out
    assert out.count("the interval is approximate") == 1 and out.count(" †") > 3, out
    assert "\n† fewer than 10 scenarios (k on the line): the interval is approximate\n" in out


def test_an_unknown_model_names_the_flag_and_the_config_field(tmp_path, capsys):
    assert main(["decide", "--model", "someone/not-cached-model", "--out", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err
    assert "--model /path/to/not-cached-model on the command line" in err and "in a config" in err


def test_figures_of_several_runs_need_out_and_take_labels(tmp_path, capsys, monkeypatch):
    import evenhand.reporting.figures as figs
    for parent, seed in (("a", "0"), ("b", "1")):
        assert main(["simulate", "--out", str(tmp_path / parent / "run"), "--model-seed", seed]) == 0
    a, b = str(tmp_path / "a" / "run"), str(tmp_path / "b" / "run")
    capsys.readouterr()
    assert main(["figures", a, b]) == 2  # not into the first run's figures/
    assert "--out" in capsys.readouterr().err and not (tmp_path / "a" / "run" / "figures" / "progression.png").exists()
    assert main(["figures", a, b, "--out", str(tmp_path / "f")]) == 2  # both labelled 'run'
    assert "RUN=label" in capsys.readouterr().err
    seen = []
    real = figs.progression_figure
    monkeypatch.setattr("experiments.figures.progression_figure", lambda t, *x, **k: seen.append(t) or real(t, *x, **k))
    assert main(["figures", f"{a}=seed 0", f"{b}=seed 1", "--out", str(tmp_path / "f"), "--format", "png"]) == 0
    assert list(dict.fromkeys(seen[0]["label"])) == ["seed 0", "seed 1"]
    assert (tmp_path / "f" / "progression.png").is_file()
