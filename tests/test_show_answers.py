"""`evenhand show` and `evenhand table` on every kind of answers (issue 45, point 2): a run, an answers file (CSV
and JSONL, where a row without a choice reads back with ``parse_method`` NaN), an own-suite file and a simulated
run, with every filter; an unexpected internal error prints one line naming the file its traceback went to."""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

import evenhand as eh
from experiments.cli.main import main
from tests.test_itemlog import hand_built

FILTERS = ([], ["--refusals"], ["--unparsed"], ["--flipped"], ["--limit", "2"])


@pytest.fixture(scope="module")
def answers(tmp_path_factory):
    rows, ids = hand_built(eh.suite.items("smoke"))
    d = tmp_path_factory.mktemp("answers")
    rows.to_csv(d / "answers.csv", index=False)
    rows.to_json(d / "answers.jsonl", orient="records", lines=True)
    own = rows.copy()  # the same answers as a suite of one's own: scenario and contrast ids of its own
    own["scenario_id"] = "mine-" + own["scenario_id"].astype(str)
    own["contrast_id"] = "my-" + own["contrast_id"].astype(str)
    own.to_json(d / "own.jsonl", orient="records", lines=True)
    return d, ids


def test_a_csv_answers_file_reads_back_parse_method_nan():
    rows, _ = hand_built(eh.suite.items("smoke"))
    assert rows["parse_method"].isna().any()  # the refusal and the unparsed answer have no method


@pytest.mark.parametrize("name", ["answers.csv", "answers.jsonl"])
def test_show_every_filter_on_an_answers_file(answers, name, capsys):
    d, ids = answers
    for extra in FILTERS:
        assert main(["show", str(d / name), *extra]) == 0, extra
        out = capsys.readouterr().out
        assert "nan" not in out.lower().split(), out
    assert main(["show", str(d / name), "--refusals"]) == 0
    out = capsys.readouterr().out
    assert "1 of 10 items: refusals" in out and ids["refusal"] in out
    assert main(["show", str(d / name), "--unparsed"]) == 0
    assert ids["unparsed"] in capsys.readouterr().out
    assert main(["show", str(d / name), "--item", ids["refusal"]]) == 0
    assert "parse method     -" in capsys.readouterr().out


def test_show_and_table_take_an_own_suite_file(answers, capsys):
    d, ids = answers
    assert main(["show", str(d / "own.jsonl"), "--refusals"]) == 2  # without the flag: refused, one line
    assert "--own-suite" in capsys.readouterr().err
    assert main(["show", str(d / "own.jsonl"), "--refusals", "--own-suite"]) == 0
    assert ids["refusal"] in capsys.readouterr().out


def test_table_takes_answers_files(answers, tmp_path, capsys):
    d, _ = answers
    sim = eh.SimulatedModel(seed=0).decide(eh.suite.items("smoke"))
    sim.to_json(tmp_path / "a.jsonl", orient="records", lines=True)
    sim.to_json(tmp_path / "b.jsonl", orient="records", lines=True)
    assert main(["table", f"{tmp_path / 'a.jsonl'}=one", f"{tmp_path / 'b.jsonl'}=two"]) == 0
    out = capsys.readouterr().out
    assert "one" in out and "two" in out and "nan" not in out


def test_show_every_filter_on_a_simulated_run(tmp_path, capsys):
    out_dir = tmp_path / "sim"
    assert main(["simulate", "--out", str(out_dir), "--subset", "smoke"]) == 0
    capsys.readouterr()
    for extra in FILTERS:
        assert main(["show", str(out_dir), *extra]) == 0, extra
        assert "nan" not in capsys.readouterr().out.lower().split()


def test_an_internal_error_prints_one_line_and_keeps_the_traceback(answers, monkeypatch, capsys):
    d, _ = answers
    import evenhand.running.itemlog as itemlog

    def broken(*a, **k):
        return 1.0 + "x"  # the bug the issue met: a float where a string was expected
    monkeypatch.setattr(itemlog, "format_table", broken)
    assert main(["show", str(d / "answers.csv")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("evenhand: internal error: TypeError: unsupported operand")
    path = Path(re.search(r"the full traceback is in (\S+) ", err).group(1))
    text = path.read_text()
    assert "Traceback (most recent call last)" in text and "in broken" in text and "command: evenhand show" in text
    path.unlink()
