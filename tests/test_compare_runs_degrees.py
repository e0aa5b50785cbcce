"""`evenhand compare-runs` compares degree 3 by default (as `score` and `table` report), `--degrees` picks others,
n and k are of the degrees compared, and nothing it prints reads ``nan`` (issue 45, point 5)."""
from __future__ import annotations

import json

import pytest

import evenhand as eh
from experiments.cli.main import main


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("cr")
    items = eh.suite.items("smoke")
    for name, seed in (("base", 0), ("other", 1)):
        eh.SimulatedModel(seed=seed).decide(items).to_json(d / f"{name}.jsonl", orient="records", lines=True)
    return d, items


def _hand_count(items, degrees) -> tuple[int, int]:
    t1 = items[(items["contrast_type"] == "type1") & items["degree"].isin(degrees)]
    return len(t1), t1["scenario_id"].nunique()


@pytest.mark.parametrize("degrees", [None, [3], [1, 2], [0, 1, 2, 3]])
def test_n_and_k_are_of_the_degrees_compared(two_runs, degrees, capsys):
    d, items = two_runs
    flag = [] if degrees is None else ["--degrees", *map(str, degrees)]
    assert main(["compare-runs", str(d / "base.jsonl"), str(d / "other.jsonl"), "--json", *flag]) == 0
    out = json.loads(capsys.readouterr().out)
    n, k = _hand_count(items, degrees or [3])
    assert (out["n_items"], out["n_scenarios"]) == (n, k)
    assert out["degrees"] == (degrees or [3])


def test_the_printout_names_the_degree_and_holds_no_nan(two_runs, capsys):
    d, items = two_runs
    assert main(["compare-runs", str(d / "base.jsonl"), str(d / "other.jsonl")]) == 0
    out = capsys.readouterr().out
    n, k = _hand_count(items, [3])
    assert out.startswith(f"Paired comparison on {n} shared items, {k} scenarios (degree 3, type1")
    assert "nan" not in out.lower(), out
    assert main(["compare-runs", str(d / "base.jsonl"), str(d / "other.jsonl"), "--degrees", "0", "3"]) == 0
    assert "degrees 0, 3 pooled" in capsys.readouterr().out


def test_a_degree_the_files_lack_is_one_line(two_runs, tmp_path, capsys):
    d, items = two_runs
    eh.SimulatedModel(seed=0).decide(items[items["degree"] < 3]).to_json(tmp_path / "d012.jsonl", orient="records",
                                                                         lines=True)
    assert main(["compare-runs", str(tmp_path / "d012.jsonl"), str(d / "other.jsonl")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no items of degree 3 (--degrees)" in err


def test_a_missing_estimate_is_not_printed_as_nan():
    from evenhand.scoring.score_report import format_estimate
    nan = float("nan")
    assert "nan" not in format_estimate({"value": 0.1, "ci_low": 0.0, "ci_high": 0.2, "n": 10, "note": nan},
                                        "fraggap").lower()
    assert format_estimate({"value": nan, "ci_low": nan, "ci_high": nan, "n": 0, "note": None},
                           "fraggap") == "not estimable (insufficient)"
    assert format_estimate({"value": 0.1, "ci_low": nan, "ci_high": nan, "n": 10.0, "clusters": nan,
                            "note": "few scenarios"}, "fraggap") == "+10.0 pp [no CI] n=10 (few scenarios)"


def test_simulate_planted_names_the_valid_keys(tmp_path, capsys):
    from experiments.cli.main import build_parser
    from experiments.cli.score import planted_keys
    assert main(["simulate", "--out", str(tmp_path / "s"), "--planted", "fraggap=0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "flip_pro_minority - flip_pro_majority" in err and "valid keys:" in err
    assert main(["simulate", "--out", str(tmp_path / "s"), "--planted", "flip_pro_minority"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err
    sub = build_parser()._subparsers._group_actions[0].choices["simulate"]
    help_text = " ".join(sub.format_help().split())
    assert all(k in help_text for k in planted_keys())  # --help lists every valid key
