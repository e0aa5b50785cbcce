"""benchmarks/figures_walk.py counts a step once however often it recurs, reads a call between two modules of
one folder as no folder step, and traces only calls a project module makes (the bad case: a step from a test
or a library, or a repeated call counted again)."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import figures_walk as fw  # noqa: E402


def test_summary_counts_folders_and_crossings():
    steps = [("experiments.figures", "evenhand.reporting.figures", "run"),
             ("evenhand.reporting.figures", "evenhand.reporting.plotting", "save"),
             ("evenhand.reporting.figures", "evenhand.reporting.plotting", "paper_style"),
             ("evenhand.reporting.plotting", "evenhand.reporting.figures", "cb"),
             ("experiments.figures", "probes.attribution", "attribution_figure"),
             ("probes.attribution", "probes.sweep", "x")]
    s = fw.summary(steps)
    assert (s["modules"], s["module_steps"], s["function_steps"]) == (5, 5, 6)
    assert (s["folders"], s["folder_steps"], s["folder_function_steps"]) == (3, 2, 2)
    assert s["into_probes"] == 1
    assert s["crossings"][0] == (("evenhand.reporting.figures", "evenhand.reporting.plotting"), 3)


def test_a_repeated_call_is_one_step_and_a_call_from_outside_is_none():
    from evenhand.reporting import labels

    steps = fw.trace_steps(lambda: [labels.metric_name("flip_asymmetry") for _ in range(3)])
    # this test calling labels is no step (tests is not a project package); labels -> metric_defs is one step
    # though it is taken three times
    assert ("evenhand.reporting.labels", "evenhand.vocab.metric_defs", "find_metric") in steps
    assert not [s for s in steps if s[1] == "evenhand.reporting.labels"]
    assert len(steps) == len(set(steps))
