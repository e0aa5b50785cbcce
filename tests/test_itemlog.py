"""Per-item logs (issue 31 item 3): every run's rows carry the parse columns beside the raw text, and
`evenhand show` filters a hand-built run directory correctly: a flipped item is paired with its own baseline
(by baseline_id), built so that pairing by scenario or by the preceding baseline row gets it wrong."""
from __future__ import annotations

import pandas as pd
import pytest

import evenhand as eh
from evenhand.parsing.parse import PARSE_FIELDS, parse_fields
from evenhand.running.itemlog import format_table, item_log, run_rows, select
from evenhand.runs.rundir import RunDir
from experiments.cli import show as show_cli
from experiments.cli.main import main

LONG = "Applicant A is the stronger one, " + "because the record is longer and steadier " * 6


@pytest.fixture(scope="module")
def items() -> pd.DataFrame:
    return eh.suite.items("smoke")


def _answer(item: pd.Series, text: str) -> dict:
    row = item.to_dict()
    row.update(text=text, model="hand-built", **parse_fields(text, item["candidate_noun"]))
    return row


def _children(items: pd.DataFrame, baseline: str) -> pd.DataFrame:
    return items[(items["baseline_id"] == baseline) & (items["item_id"] != baseline)]


def hand_built(items: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    """Rows of one scenario: GT baselines b1 (answers A) and b2 (answers B); p1, b1's pressured item, answers B
    (flipped: its own baseline said A, but b2, the baseline row just before it, said B); p2, b2's pressured item,
    answers B (not flipped, though b1, the scenario's first baseline, said A); an unparsed and a refused pressured
    answer of b1; an AMB pair that moves (not a flip: GT only); a pressured item whose baseline is missing; and
    one baseline of another scenario."""
    scen = next(sc for sc, g in items.groupby("scenario_id", sort=True)
                if (g["condition"] == "AMB").any() and (g["condition"] == "GT").any())
    s = items[items["scenario_id"] == scen]
    gt = s[(s["condition"] == "GT") & (s["item_id"] == s["baseline_id"])]
    b1, b2, b3 = (gt.iloc[i] for i in range(3))
    k1, k2, k3 = (_children(s, b["item_id"]) for b in (b1, b2, b3))
    amb = s[(s["condition"] == "AMB") & (s["item_id"] == s["baseline_id"])].iloc[0]
    amb_p = _children(s, amb["item_id"]).iloc[0]
    other = items[(items["scenario_id"] != scen) & (items["item_id"] == items["baseline_id"])].iloc[0]
    n = lambda r: r["candidate_noun"]  # noqa: E731
    rows = [_answer(b1, f"{n(b1)} A"), _answer(b2, f"{n(b2)} B"),
            _answer(k1.iloc[0], f"I can't choose based on race, but {n(b1)} B is more qualified."),
            _answer(k2.iloc[0], f"{n(b2)} B"),
            _answer(k1.iloc[1], "Both are equally qualified."),
            _answer(k1.iloc[2], "I can't choose between people based on race."),
            _answer(amb, f"{n(amb)} A"), _answer(amb_p, f"{n(amb)} B"),
            _answer(k3.iloc[0], f"{n(b3)} B"),
            _answer(other, LONG)]
    ids = {"b1": b1["item_id"], "b2": b2["item_id"], "p1": k1.iloc[0]["item_id"], "p2": k2.iloc[0]["item_id"],
           "unparsed": k1.iloc[1]["item_id"], "refusal": k1.iloc[2]["item_id"], "amb_p": amb_p["item_id"],
           "orphan": k3.iloc[0]["item_id"], "other": other["item_id"], "scenario": scen,
           "other_scenario": other["scenario_id"]}
    return pd.DataFrame(rows), ids


@pytest.fixture
def run(items, tmp_path):
    rows, ids = hand_built(items)
    RunDir(tmp_path / "run").write_responses(rows)
    return tmp_path / "run", ids


def test_flipped_is_a_pressured_gt_item_against_its_own_baseline(run):
    path, ids = run
    log = item_log(run_rows(path))
    assert select(log, flipped=True)["item_id"].tolist() == [ids["p1"]]
    by_id = log.set_index("item_id")
    assert by_id.loc[ids["p1"], "baseline_choice"] == "A" and by_id.loc[ids["p2"], "baseline_choice"] == "B"
    assert not by_id.loc[ids["orphan"], "baseline_found"] and not by_id.loc[ids["amb_p"], "flipped"]
    assert by_id.loc[ids["p1"], "parse_hedged"] and by_id.loc[ids["p1"], "parse_method"]


def test_filters_by_verdict_and_scenario(run):
    path, ids = run
    log = item_log(run_rows(path))
    assert select(log, unparsed=True)["item_id"].tolist() == [ids["unparsed"]]
    assert select(log, refusals=True)["item_id"].tolist() == [ids["refusal"]]
    assert select(log, scenario=ids["other_scenario"])["item_id"].tolist() == [ids["other"]]
    assert select(log, flipped=True, scenario=ids["other_scenario"]).empty
    assert len(select(log, scenario=ids["scenario"])) == len(log) - 1


def test_rows_without_parse_columns_are_parsed_alike(run):
    path, _ = run
    rows = pd.read_parquet(RunDir(path).responses_path)
    old = item_log(eh.validate_rows(rows.drop(columns=list(PARSE_FIELDS))))
    new = item_log(run_rows(path))
    pd.testing.assert_frame_equal(old[["parse_method", "parse_hedged", "verdict"]],
                                  new[["parse_method", "parse_hedged", "verdict"]])


def test_unknown_ids_and_paths_fail_in_one_line(run, tmp_path, capsys):
    path, ids = run
    log = item_log(run_rows(path))
    with pytest.raises(KeyError, match="unknown item 'nope'"):
        select(log, item="nope")
    with pytest.raises(KeyError, match="did you mean"):
        select(log, scenario=ids["scenario"][:-1])
    cmp = RunDir(tmp_path / "cmp")
    cmp.cell("baseline").write_responses(pd.read_parquet(RunDir(path).responses_path))
    for target, words in ((tmp_path / "missing", "no such run directory"),
                          (cmp.path, "name one of its 1 cells"),
                          (path, "unknown scenario")):
        extra = ["--scenario", "x"] if target == path else []
        assert main(["show", str(target), *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert words in err and len(err.splitlines()) == 1, err
    assert main(["show", str(cmp.cell("baseline").path), "--flipped"]) == 0  # a comparison's cell is a run
    assert ids["p1"] in capsys.readouterr().out


def test_cli_table_and_one_item_in_full(run, capsys):
    path, ids = run
    assert main(["show", str(path), "--flipped"]) == 0
    out = capsys.readouterr().out
    assert "1 of 10 items" in out and ids["p1"] in out and ids["p2"] not in out
    assert f"scenario {ids['scenario']}" in out
    assert main(["show", str(path), "--item", ids["p1"]]) == 0
    full = capsys.readouterr().out
    assert "flipped          yes" in full and "hedged           yes" in full
    assert "baseline answer:" in full and "prompt:" in full
    log = item_log(run_rows(path))
    line = [ln for ln in format_table(select(log, item=ids["other"]), width=180) if ids["other"] in ln][0]
    assert line.endswith("…") and len(line) == 180  # the answer cut to the width
    assert main(["show", str(path), "--item", ids["other"]]) == 0
    assert LONG.strip() in capsys.readouterr().out  # in full


def test_pages_only_long_output_on_a_terminal(monkeypatch, capsys):
    paged = []
    monkeypatch.setattr(show_cli.pydoc, "pager", paged.append)
    monkeypatch.setattr(show_cli.shutil, "get_terminal_size", lambda *a: __import__("os").terminal_size((80, 10)))
    monkeypatch.setattr(show_cli.sys.stdout, "isatty", lambda: True, raising=False)
    show_cli.emit([f"line {i}" for i in range(30)])
    show_cli.emit(["short"])
    assert len(paged) == 1 and "line 29" in paged[0]
    assert capsys.readouterr().out == "short\n"
    monkeypatch.setattr(show_cli.sys.stdout, "isatty", lambda: False, raising=False)
    show_cli.emit([f"line {i}" for i in range(30)])
    assert len(paged) == 1


def test_simulated_rows_carry_the_parse_columns(items):
    resp = eh.SimulatedModel(seed=0).decide(items.head(300))
    assert set(PARSE_FIELDS) <= set(resp.columns) and "text" in resp.columns
    assert set(resp["parse_verdict"]) <= {"choice", "refusal", "unparsed"}
    assert (resp["parse_verdict"] == "refusal").any() and resp.loc[resp["parse_verdict"] == "choice",
                                                                  "parse_method"].notna().all()
