"""Allowed values and the bootstrap's options are declared once: a ``Literal[...]`` field is what both the
YAML builder and the flag generator read, every flag of every command has help, and ``--resamples`` comes
from :class:`evenhand.inference.stats.BootstrapOptions` in every command."""
from __future__ import annotations

import argparse
import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

import numpy as np
import pandas as pd
import pytest

from evenhand.running.activations import CacheDtype
from evenhand.models.loading import ModelDtype, ModelSpec
from evenhand.support.options import ConfigError, add_flags, build, field_docs
from evenhand.inference.stats import BootstrapOptions

ROOT = Path(__file__).resolve().parents[1]


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(command path, action) for every argument of every (sub)command."""
    for act in parser._actions:
        if isinstance(act, argparse._SubParsersAction):
            for name, sub in act.choices.items():
                yield from _walk(sub, path + (name,))
        elif not isinstance(act, (argparse._HelpAction, argparse._VersionAction)):
            yield " ".join(path) or "evenhand", act


@pytest.fixture(scope="module")
def parser():
    from experiments.cli.main import build_parser
    return build_parser()


def test_a_literal_field_rejects_a_bad_yaml_value_naming_the_field_and_the_values(tmp_path):
    # no Rules: the allowed values are the field's Literal (the old builder took any string here)
    with pytest.raises(ConfigError, match=r"config field 'dtype' must be one of auto, float32, bfloat16, float16, "
                                          r"got 'float8'"):
        build(ModelSpec, {"model": "m", "dtype": "float8"})
    from experiments.studies.run.config import load_config
    cfg = tmp_path / "run.yaml"
    cfg.write_text("model: {model: m, chat_template: never}\noutput_dir: o\n")
    with pytest.raises(ConfigError, match=r"config field 'model.chat_template' must be one of auto, none, "
                                          r"got 'never'"):
        load_config(cfg)
    cfg.write_text("model: m\noutput_dir: o\nsuite: {contrast_types: [type1, type4]}\n")
    with pytest.raises(ConfigError, match=r"'suite.contrast_types\[1\]' must be one of type1, type23, got 'type4'"):
        load_config(cfg)
    assert build(ModelSpec, {"model": "m", "dtype": "float16"}).dtype == "float16"


def test_a_literal_field_is_a_flags_choices(parser):
    p = argparse.ArgumentParser()
    add_flags(p, ModelSpec, ["dtype"])  # no choices= given: they come from the Literal
    (act,) = [a for a in p._actions if a.dest == "dtype"]
    assert act.choices == list(get_args(ModelDtype))
    with pytest.raises(SystemExit):
        p.parse_args(["--dtype", "float8"])
    cache = {a.dest: a for cmd, a in _walk(parser) if cmd == "cache"}
    assert cache["cache_dtype"].choices == list(get_args(CacheDtype))


def test_a_literal_of_ints_parses_ints_and_a_bool_is_not_an_int():
    @dataclass(frozen=True)
    class Opts:
        degree: Literal[0, 1, 2, 3] = 1
        """A degree."""
    p = argparse.ArgumentParser()
    add_flags(p, Opts, ["degree"])
    assert p.parse_args(["--degree", "3"]).degree == 3
    with pytest.raises(ConfigError, match="'degree' must be one of 0, 1, 2, 3, got True"):
        build(Opts, {"degree": True})


def test_every_option_of_every_command_has_help(parser):
    missing = [f"{cmd} {','.join(a.option_strings) or a.dest}" for cmd, a in _walk(parser) if not a.help]
    assert not missing, f"options without help: {missing}"


def test_a_generated_flag_needs_a_field_docstring():
    @dataclass(frozen=True)
    class Bare:
        n: int = 1
    with pytest.raises(ValueError, match="Bare.n has no docstring"):
        add_flags(argparse.ArgumentParser(), Bare, ["n"])


def test_resamples_is_declared_once_on_bootstrap_options(parser):
    doc = field_docs(BootstrapOptions)["resamples"]
    flags = [(cmd, a) for cmd, a in _walk(parser) if "--resamples" in a.option_strings
             and a.help != argparse.SUPPRESS]  # not `compare`'s hidden refusal that points to compare-runs
    assert len(flags) >= 7  # compare-runs, coverage, probe sweep/ablation/attribution, organism eval/dial-probe
    # (score, simulate, modes, figures, report, power and organism calibrate refuse --resamples: every interval
    # they compute is the jackknife-t, which resamples nothing; tests/test_cli_spelling.py)
    for cmd, a in flags:
        assert (a.help, a.type) == (doc, int), cmd
        # coverage and organism eval take it only with a bootstrap (--interval percentile; the probe part)
        conditional = cmd in ("coverage", "organism eval")
        assert a.default == (None if conditional else BootstrapOptions.resamples), cmd
    # no module writes the flag by hand: the string "--resamples" is no argument of any call
    by_hand = []
    for sub in ("experiments", "evenhand", "probes", "interventions", "steering"):
        for path in (ROOT / sub).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call) and any(isinstance(x, ast.Constant) and x.value == "--resamples"
                                                      for x in node.args):
                    by_hand.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not by_hand, by_hand


def test_bootstrap_options_and_the_old_keywords_give_the_same_scores(smoke_items):
    from evenhand.scoring.metrics import compare, score
    from evenhand.scoring.paired import score_arms
    rng = np.random.default_rng(0)
    df = smoke_items.assign(choice=rng.choice(np.array(["A", "B"], dtype=object), size=len(smoke_items)))
    other = df.assign(choice=rng.choice(np.array(["A", "B"], dtype=object), size=len(df)))
    assert score(df, resamples=50, seed=3) == score(df, bootstrap=BootstrapOptions(resamples=50, seed=3))
    # the metrics' jackknife-t reads neither resamples nor seed, and the report records neither
    assert score(df, bootstrap=BootstrapOptions(resamples=50, seed=3), resamples=60) == score(df, resamples=7, seed=1)
    assert compare(df, other, resamples=50, seed=2) == compare(df, other, bootstrap=BootstrapOptions(50, 2))
    with pytest.raises(ValueError, match="interval is jackknife-t, got interval 'percentile'"):
        score(df, bootstrap=BootstrapOptions(interval="percentile"))
    arms = {"base": df, "other": other}
    old = score_arms(arms, "base", resamples=50, seed=2, interval="percentile")
    new = score_arms(arms, "base", bootstrap=BootstrapOptions(50, 2, "percentile"))
    pd.testing.assert_frame_equal(old, new)
    assert not old.equals(score_arms(arms, "base", resamples=50, seed=2))  # the interval reaches it
