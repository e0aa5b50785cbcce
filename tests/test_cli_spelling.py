"""One spelling per concept across every `evenhand` command (``--degrees``, ``--quiet``, ``--limit``; the older
spellings parse as aliases to the same field), and no option recorded that the computation does not use: a
command whose every interval is the jackknife-t refuses ``--resamples`` naming the interval, and its study's
manifest no longer records resamples or a bootstrap seed."""
from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from evenhand.support.options import ConfigError

PRIMARY = {"--degree": "--degrees", "--no-progress": "--quiet", "--n": "--limit", "-n": "--limit",
           "--max-items": "--limit", "--n-items": "--limit"}
"""Each older spelling -> the concept's one primary spelling (an older one may only follow it, as an alias)."""


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(command path, action) for every visible option of every (sub)command."""
    for act in parser._actions:  # argparse has no public accessor for its subparsers
        if isinstance(act, argparse._SubParsersAction):
            for name, sub in act.choices.items():
                yield from _walk(sub, path + (name,))
        elif act.option_strings and act.help != argparse.SUPPRESS:
            yield " ".join(path) or "evenhand", act


def spelling_problems(parser: argparse.ArgumentParser) -> list[str]:
    """Every option whose first (primary) spelling is an older one of :data:`PRIMARY`, or that carries an older
    spelling without the primary one before it."""
    bad = []
    for cmd, act in _walk(parser):
        first, strings = act.option_strings[0], act.option_strings
        for old in set(strings) & set(PRIMARY):
            if first == old or PRIMARY[old] != first:
                bad.append(f"{cmd} {'/'.join(strings)}: primary spelling is {PRIMARY[old]}")
    return bad


@pytest.fixture(scope="module")
def parser():
    from experiments.cli.main import build_parser
    return build_parser()


def test_every_command_spells_a_concept_one_way(parser):
    assert not spelling_problems(parser)
    seen = {a.option_strings[0] for _, a in _walk(parser)}
    assert {"--degrees", "--quiet", "--limit"} <= seen


def _parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(command path, parser) for the top-level parser and every (sub)command."""
    yield " ".join(path) or "evenhand", parser
    for act in parser._actions:
        if isinstance(act, argparse._SubParsersAction):
            for name, sub in act.choices.items():
                yield from _parsers(sub, path + (name,))


def test_every_help_page_renders(parser):
    """`evenhand --help` raised ValueError: a subcommand's help said "95% CIs", which argparse reads as a format."""
    broken = []
    for cmd, p in _parsers(parser):
        try:
            p.format_help()
        except (ValueError, TypeError) as exc:
            broken.append(f"{cmd}: {exc}")
    assert not broken
    assert "--degrees DEGREES [DEGREES ...], --degree DEGREES" in dict(_parsers(parser))["probe sweep"].format_help()


def test_the_check_fails_on_an_old_primary_spelling():
    """The tree before the change: `probe sweep --degree`, `demo --no-progress`, and an alias put first."""
    p = argparse.ArgumentParser()
    sub = p.add_subparsers()
    sub.add_parser("sweep").add_argument("--degree", nargs="+", help="keep only these degrees")
    sub.add_parser("demo").add_argument("--no-progress", action="store_true", help="no progress bars")
    sub.add_parser("run").add_argument("--no-progress", "--quiet", action="store_true", help="quiet")
    sub.add_parser("odd").add_argument("--count", "-n", type=int, help="how many")
    assert len(spelling_problems(p)) == 4


@pytest.mark.parametrize("new, old", [
    (["probe", "sweep", "r", "--degrees", "1", "3"], ["probe", "sweep", "r", "--degree", "1", "3"]),
    (["probe", "ablation", "r", "--degrees", "2"], ["probe", "ablation", "r", "--degree", "2"]),
    (["probe", "attribution", "r", "--degrees", "1", "2"], ["probe", "attribution", "r", "--degree", "1", "2"]),
    (["coverage", "--degrees", "2"], ["coverage", "--degree", "2"]),
    (["organism", "items", "--out", "x.jsonl", "--degrees", "3"], ["organism", "items", "--out", "x.jsonl", "--degree", "3"]),
    (["organism", "dial-probe", "--betas", "0", "--degrees", "1"], ["organism", "dial-probe", "--betas", "0", "--degree", "1"]),
    (["run", "c.yaml", "--quiet"], ["run", "c.yaml", "--no-progress"]),
    (["demo", "--quiet"], ["demo", "--no-progress"]),
    (["decide", "--model", "m", "--out", "o", "--quiet"], ["decide", "--model", "m", "--out", "o", "--no-progress"]),
    (["suite", "validate", "--quiet"], ["suite", "validate", "--no-progress"]),
    (["probe", "attribution", "r", "--quiet"], ["probe", "attribution", "r", "--no-progress"]),
])
def test_an_old_spelling_parses_to_the_same_field(parser, new, old):
    a, b = vars(parser.parse_args(new)), vars(parser.parse_args(old))
    assert a == b and ("degrees" in a or a["quiet"] is True)
    assert "degree" not in a and "no_progress" not in a  # one field per concept, named after the primary spelling


@pytest.mark.parametrize("argv, why", [
    (["probe", "ablation", "r", "--degrees", "1", "2"], "one degree's items"),
    (["coverage", "--degree", "2", "3"], "run it once per degree"),
])
def test_a_one_degree_command_refuses_several(parser, capsys, argv, why):
    with pytest.raises(SystemExit):
        parser.parse_args(argv)
    err = capsys.readouterr().err
    assert "takes one value here" in err and why in err


def test_limit_is_the_python_spelling_too():
    import evenhand as eh
    assert eh.suite.items("smoke", limit=40).equals(eh.suite.items("smoke", n=40))
    assert len(eh.suite.items("smoke", limit=40)) <= 40
    with pytest.raises(ValueError, match="limit or n"):
        eh.suite.items("smoke", limit=40, n=40)


@pytest.mark.parametrize("argv", [
    ["simulate", "--resamples", "10"],
    ["modes", "--model", "m", "--out", "o", "--resamples", "10"],
    ["figures", "r", "--resamples", "10"],
    ["report", "r", "--resamples", "10"],
    ["power", "p", "--resamples", "10"],
    ["power", "p", "--seed", "1"],
    ["organism", "calibrate", "--betas", "0", "--resamples", "10"],
    ["score", "f.jsonl", "--resamples", "10"],
])
def test_resamples_that_nothing_reads_are_refused_naming_the_interval(parser, capsys, argv):
    with pytest.raises(SystemExit):
        parser.parse_args(argv)
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "jackknife-t over scenarios, which resamples nothing" in err and "drop --" in err


def test_coverage_and_eval_take_resamples_only_where_a_bootstrap_reads_them(capsys):
    from experiments.cli import main
    assert main(["coverage", "--subset", "smoke", "--seeds", "1", "--resamples", "10"]) == 2
    assert "jackknife-t over scenarios interval resamples nothing" in capsys.readouterr().err
    assert main(["organism", "eval", "--no-probe", "--resamples", "10"]) == 2
    assert "--no-probe leaves only the known-answer checks" in capsys.readouterr().err


def test_a_simulate_run_records_no_resamples(tmp_path, capsys):
    from experiments.cli import main
    from evenhand.runs.rundir import RunDir
    assert main(["simulate", "--out", str(tmp_path / "sim"), "--form", "policy"]) == 0
    m = RunDir(tmp_path / "sim").manifest()
    assert m["status"] == "done" and "resamples" not in m["config"] and "bootstrap" not in m["seeds"]
    assert "resamples" not in json.loads((tmp_path / "sim" / "metrics.json").read_text())


@pytest.mark.parametrize("kind, data, key", [
    ("simulate", {"output_dir": "o", "resamples": 20}, "resamples"),
    ("modes", {"model": "m", "output_dir": "o", "resamples": 20}, "resamples"),
    ("modes", {"model": "m", "output_dir": "o", "seed": 1}, "seed"),
    ("calibration", {"output_dir": "o", "betas": [0], "resamples": 20}, "resamples"),
])
def test_a_config_setting_unused_resamples_is_refused_naming_the_interval(kind, data, key):
    from experiments.studies.base import get
    with pytest.raises(ConfigError, match=rf"config field '{key}' does nothing here: .*jackknife-t over scenarios"):
        get(kind).parse({"kind": kind, **data})


def test_compare_records_resamples_only_for_a_bootstrap_interval(smoke_items, monkeypatch):
    from evenhand.scoring import metrics
    rng = np.random.default_rng(0)
    df = smoke_items.assign(choice=rng.choice(np.array(["A", "B"], dtype=object), size=len(smoke_items)))
    other = df.assign(choice=rng.choice(np.array(["A", "B"], dtype=object), size=len(df)))
    assert "resamples" not in metrics.compare(df, other, resamples=50) and "seed" not in metrics.compare(df, other)
    monkeypatch.setattr(metrics, "INTERVAL", "percentile")
    assert metrics.compare(df, other, resamples=50, seed=2)["resamples"] == 50
