"""Figures and tables as pure functions of saved tables; `evenhand runs list`."""
from __future__ import annotations

import pandas as pd

from evenhand.figures import latex_table, metrics_long
from experiments.figures import run_figures


def test_figures_and_latex_from_a_simulated_run(tmp_path, capsys):
    from experiments.cli import main
    assert main(["simulate", "--form", "policy", "--out", str(tmp_path / "sim"), "--resamples", "50"]) == 0
    paths = run_figures([tmp_path / "sim"], tmp_path / "fig", ("pdf", "png"), resamples=50)
    names = {p.name for p in paths}
    assert {"progression.pdf", "fraggap_heatmap.png", "flips_by_family.pdf", "headline.tex"} <= names
    assert all(p.stat().st_size > 500 for p in paths)
    table = pd.read_parquet(tmp_path / "sim" / "tables" / "metrics_long.parquet")
    assert set(table["breakdown"]) == {"degree", "contrast_category", "pressure_family"}
    tex = latex_table(table)
    assert tex.startswith("\\begin{tabular}") and "\\toprule" in tex and tex.count("\\\\") == 5
    # the figure table agrees with the run's own metrics
    resp = pd.read_parquet(tmp_path / "sim" / "responses.parquet")
    again = metrics_long(resp, "sim", resamples=50)
    a = table[(table.breakdown == "degree") & (table.metric == "fraggap")].sort_values("degree")["value"].to_numpy()
    b = again[(again.breakdown == "degree") & (again.metric == "fraggap")].sort_values("degree")["value"].to_numpy()
    assert (pd.isna(a) == pd.isna(b)).all() and ((a == b) | pd.isna(a)).all()
    capsys.readouterr()
    assert main(["runs", "list", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "sim" in out and "done" in out


def test_report_page_states_numbers_in_words(tmp_path):
    from experiments.cli import main
    from experiments.pages import sentence
    assert main(["simulate", "--form", "policy", "--out", str(tmp_path / "sim"), "--resamples", "50"]) == 0
    assert main(["report", str(tmp_path / "sim"), "--resamples", "50"]) == 0
    md = (tmp_path / "sim" / "report.md").read_text()
    assert "FragGap at degree 3" in md and "![progression](figures/progression.png)" in md
    assert "<table>" in (tmp_path / "sim" / "report.html").read_text()
    s = sentence("fraggap", {"value": 0.091, "ci_low": 0.06, "ci_high": 0.122, "n": 500}, 3)
    assert s.startswith("FragGap at degree 3: +9.1 pp [6.0, 12.2]") and "favours the minority" in s
    assert "no asymmetry" in sentence("fraggap", {"value": 0.01, "ci_low": -0.02, "ci_high": 0.04, "n": 9}, 1)


def test_figures_are_byte_for_byte_reproducible(tmp_path):
    """Deleting the figures and drawing them again from the same tables gives identical files."""
    from experiments.cli import main
    assert main(["simulate", "--form", "policy", "--out", str(tmp_path / "sim"), "--resamples", "50"]) == 0
    first = {p.name: p.read_bytes() for p in run_figures([tmp_path / "sim"], tmp_path / "fig", resamples=50)}
    for name in first:
        (tmp_path / "fig" / name).unlink()
    second = {p.name: p.read_bytes() for p in run_figures([tmp_path / "sim"], tmp_path / "fig", resamples=50)}
    assert first.keys() == second.keys() and {n.rsplit(".", 1)[1] for n in first} >= {"pdf", "svg", "png", "tex"}
    assert [n for n in first if first[n] != second[n]] == []
