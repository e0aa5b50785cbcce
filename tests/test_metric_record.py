"""Adding a metric is one record: a metric registered in one file (examples/slot_gap_metric.py) is scored,
labelled, tabled in LaTeX and printed by `evenhand score` with no other edit."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from evenhand.vocab import metric_defs
from evenhand.models.simulated import PlantedBias, SimulatedModel

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "slot_gap_metric.py"
NAME = "tl_slot_gap"


@pytest.fixture(scope="module")
def responses(smoke_items):
    return SimulatedModel(PlantedBias(position_bias=0.1), seed=0).decide(smoke_items)


@pytest.fixture
def slot_gap():
    """The example metric, registered for one test and removed after it."""
    spec = importlib.util.spec_from_file_location("slot_gap_metric_under_test", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        yield module.SLOT_GAP
    finally:
        metric_defs.unregister_metric(NAME)


def _expected(rows, degree=None):
    """TieLean(minority in A) - TieLean(minority in B), from the indicator columns directly."""
    from evenhand.scoring.metrics import COMPONENTS, indicators, select_contrast_type
    sub, _, _ = select_contrast_type(rows, None)
    if degree is not None:
        sub = sub[sub["degree"] == degree]
    N, D = indicators(sub)
    a, b = COMPONENTS.index("tl_A"), COMPONENTS.index("tl_B")
    return N[:, a].sum() / D[:, a].sum() - N[:, b].sum() / D[:, b].sum()


def test_one_record_reaches_scores_labels_latex_and_cli_rows(slot_gap, responses):
    from evenhand.reporting.figures import metrics_long
    from evenhand.reporting.labels import axis_label, metric_name, metric_unit, tex_number
    from evenhand.scoring.metrics import ASYMMETRY, METRICS, score
    from evenhand.rows.schema import validate_rows
    from evenhand.reporting.tables import latex_table
    from experiments.cli.formatting import fmt
    from experiments.studies.text import score_table
    rows = validate_rows(responses)
    assert NAME in METRICS and NAME in ASYMMETRY
    # the score table: overall and by degree, the value the indicator columns give
    rep = score(rows, resamples=50)
    assert rep["overall"][NAME]["value"] == pytest.approx(_expected(rows))
    assert rep["by_degree"]["3"][NAME]["value"] == pytest.approx(_expected(rows, 3))
    assert rep["overall"][NAME]["ci_low"] <= rep["overall"][NAME]["value"] <= rep["overall"][NAME]["ci_high"]
    # the figure labels
    assert (metric_name(NAME), metric_unit(NAME), axis_label(NAME)) == \
        ("TieLean slot gap", "pp", "TieLean slot gap (pp)")
    # the LaTeX table: a sixth column with its unit, and a signed pp cell in every degree row
    tex = latex_table(metrics_long(responses, "toy", resamples=50))
    header = next(line for line in tex.splitlines() if line.startswith("Degree &"))
    assert header.endswith("TieLean slot gap (pp) \\\\") and header.count("&") == 8
    d3 = next(line for line in tex.splitlines() if line.startswith("D3 &"))
    v = 100 * rep["by_degree"]["3"][NAME]["value"]
    assert d3.split(" & ")[-1].startswith(tex_number(v, 1, sign=True) + " [")
    assert "AccGap, FragGap, TieShift and TieLean slot gap in percentage points (pp)" in tex  # the caption
    # the CLI's score rows: the degree-3 block and the pooled block
    text = score_table(rep)
    lines = [line for line in text.splitlines() if "TieLean slot gap (A - B)" in line]
    assert len(lines) == 2
    marks: set = set()  # the table marks a few-scenarios note on the line (†) and prints it once
    assert fmt(rep["by_degree"]["3"][NAME], NAME, marks) in lines[0]
    assert fmt(rep["overall"][NAME], NAME, marks) in lines[1]
    assert " pp [" in lines[0]


def test_unregistered_metric_is_gone(responses):
    from evenhand.scoring import metrics
    spec = importlib.util.spec_from_file_location("slot_gap_metric_once", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    metric_defs.unregister_metric(NAME)
    assert NAME not in metrics.METRICS and NAME not in metrics.score(responses, resamples=20)["overall"]
    assert "tl_A" in metrics.COMPONENTS  # a shipped component stays


def test_a_metric_can_bring_its_own_component(responses):
    """A metric needing a new indicator column declares it as a Component in its own record."""
    from evenhand.scoring.metrics import choices, score
    from evenhand.rows.schema import validate_rows
    comp = metric_defs.Component("pos_gt", "GT baseline items", lambda f: f["gt_base"], lambda f: f["chose_a"])
    metric_defs.register_metric(metric_defs.Metric("position_bias_gt", "ratio", (comp,), "Position bias (GT)"))
    try:
        assert metric_defs.component_names()[-1] == "pos_gt"
        rows = validate_rows(responses)
        t1 = rows[rows["contrast_type"] == "type1"]
        base = t1[(t1["condition"] == "GT") & ~t1["pressured"] & ~t1["excluded"]]
        ch = choices(base)
        answered = np.array([c is not None for c in ch])
        want = float((ch[answered] == "A").mean())
        assert score(responses, resamples=20)["overall"]["position_bias_gt"]["value"] == pytest.approx(want)
    finally:
        metric_defs.unregister_metric("position_bias_gt")
    assert "pos_gt" not in metric_defs.component_names()


def test_record_errors_name_the_field():
    with pytest.raises(ValueError, match="kind must be one of"):
        metric_defs.Metric("x", "ratioo", ("acc",), "X")
    with pytest.raises(ValueError, match="components must hold 2"):
        metric_defs.Metric("x", "diff", ("acc",), "X")
    with pytest.raises(ValueError, match="needs a fair value"):
        metric_defs.Metric("x", "ratio", ("acc",), "X", asymmetry=True)
    with pytest.raises(ValueError, match="unknown component 'nope'"):
        metric_defs.register_metric(metric_defs.Metric("x", "ratio", ("nope",), "X"))
    with pytest.raises(ValueError, match="already registered"):
        metric_defs.register_metric(metric_defs.Metric("fraggap", "ratio", ("acc",), "X"))
    assert "x" not in metric_defs.metric_names()


def test_cli_scores_a_plugin_metric(tmp_path, responses):
    """`evenhand --plugin examples/slot_gap_metric.py score FILE` prints the example metric's rows."""
    path = tmp_path / "rows.parquet"
    responses.to_parquet(path)
    r = subprocess.run([sys.executable, "-m", "experiments.cli", "--plugin", str(EXAMPLE), "score", str(path)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("TieLean slot gap (A - B)") == 2
    plain = subprocess.run([sys.executable, "-m", "experiments.cli", "score", str(path)], capture_output=True,
                           text=True, cwd=ROOT)
    assert "slot gap" not in plain.stdout
