"""Figures and tables as pure functions of saved tables; the report page; `evenhand runs list`."""
from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pandas as pd
import pytest

from evenhand.reporting import labels
from evenhand.reporting.figures import MIN_CELL_N, heatmap_cells, heatmap_figure, metrics_long, progression_figure
from evenhand.reporting.tables import latex_table
from experiments.figures import run_figures

SNAKE = re.compile(r"\b[a-z]+_[a-z_]+\b")
HYPHEN_MINUS = re.compile(r"(?<![\w$.])-\d")  # a hyphen used as a minus sign


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    """One simulated run (the planted policy on the smoke subset) with its metrics table, shared."""
    from evenhand.reporting.figures import metrics_table
    from experiments.studies.simulate import simulate_run
    out = tmp_path_factory.mktemp("figs") / "sim"
    simulate_run(out, form="policy", resamples=50)
    return out, metrics_table(out, resamples=50)


@pytest.fixture
def captured(monkeypatch):
    """Figures drawn while this fixture is active are kept (open) instead of saved."""
    import evenhand.reporting.plotting
    figs = []
    import sys

    import evenhand.reporting.figures  # noqa: F401  (the figure modules, so that their name `save` is patched too)
    import probes.attribution  # noqa: F401
    original = evenhand.reporting.plotting.save
    keep = lambda fig, stem, formats=(): figs.append(fig) or []  # noqa: E731
    for mod in [evenhand.reporting.plotting, *[m for m in list(sys.modules.values()) if isinstance(getattr(m, "__dict__", None), dict) and m.__dict__.get("save") is original]]:
        monkeypatch.setattr(mod, "save", keep)
    return figs


def _texts(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text")) if t.get_text()]


def _table(rows) -> pd.DataFrame:
    cols = ("label", "breakdown", "group", "degree", "metric", "value", "ci_low", "ci_high", "n", "clusters", "model")
    return pd.DataFrame([dict(zip(cols, r)) for r in rows])


def test_figures_and_latex_from_a_simulated_run(sim, tmp_path, capsys):
    run, table = sim
    paths = run_figures([run], tmp_path / "fig", ("pdf", "png"), resamples=50)
    names = {p.name for p in paths}
    assert {"progression.pdf", "fraggap_heatmap.png", "flips_by_family.pdf", "headline.tex"} <= names
    assert all(p.stat().st_size > 500 for p in paths)
    assert set(table["breakdown"]) == {"degree", "contrast_category", "pressure_family"}
    assert table["model"].eq("planted-policy").all() and table[table["n"] > 0]["clusters"].notna().all()
    tex = latex_table(table)
    assert tex.startswith("\\begin{table}") and "\\toprule" in tex and tex.count("\\\\") == 5
    assert "\\caption{" in tex and "\\label{tab:evenhand-headline}" in tex and "\\texttt{planted-policy}" in tex
    assert "AccGap (pp)" in tex and "TieLean (\\%)" in tex and "$n$ & $k$" in tex
    assert "$-$" in tex and not HYPHEN_MINUS.search(tex)
    d3 = next(line for line in tex.splitlines() if line.startswith("D3 & "))
    items = table[(table.metric == "items") & (table.degree == 3)].iloc[0]
    assert d3.startswith(f"D3 & {items['n']} & {items['clusters']} & ")
    # the figure table agrees with the run's own metrics
    resp = pd.read_parquet(run / "responses.parquet")
    again = metrics_long(resp, "sim", resamples=50)
    a = table[(table.breakdown == "degree") & (table.metric == "fraggap")].sort_values("degree")["value"].to_numpy()
    b = again[(again.breakdown == "degree") & (again.metric == "fraggap")].sort_values("degree")["value"].to_numpy()
    assert (pd.isna(a) == pd.isna(b)).all() and ((a == b) | pd.isna(a)).all()
    from experiments.cli import main
    capsys.readouterr()
    assert main(["runs", "list", str(run.parent)]) == 0
    out = capsys.readouterr().out
    assert "sim" in out and "done" in out


def test_latex_table_minus_signs_units_and_missing_intervals():
    t = _table([("r", "degree", "all", 3, "fraggap", -0.052, -0.101, -0.004, 40, 5, "m_x"),
                ("r", "degree", "all", 3, "accgap", 0.02, None, None, 8, 1, "m_x"),
                ("r", "degree", "all", 3, "items", None, None, None, 120, 5, "m_x")])
    tex = latex_table(t, caption="C", tex_label="tab:x")
    row = next(line for line in tex.splitlines() if line.startswith("D3"))
    assert row.startswith("D3 & 120 & 5 & -- & +2.0 [--] & -- & $-$5.2 [$-$10.1, $-$0.4] & --")
    assert "\\caption{C}" in tex and "\\label{tab:x}" in tex and not HYPHEN_MINUS.search(tex)
    assert "\\texttt{m\\_x}" in latex_table(t)  # the model name escaped for LaTeX


def test_label_vocabulary_covers_the_suite():
    from experiments.studies.bbq import CONFIGURATIONS
    from evenhand.suite import load_content
    assert set(CONFIGURATIONS) <= set(labels.GROUPS)
    assert [labels.degree_name(d) for d in (0, "1", 2.0, 3)] == ["D0", "D1", "D2", "D3"]
    assert labels.group_name("race_x_sex") == "Race × sex" and labels.metric_name("fraggap") == "FragGap"
    assert labels.group_name("a_new_family") == "A new family"  # never snake_case, even outside the vocabulary
    assert labels.axis_label("tieshift") == "TieShift (pp)" and labels.axis_label("tielean") == "TieLean (%)"
    assert labels.number(-1.25) == "\u22121.2" and labels.number(-0.01) == "0.0" and labels.number(3, 0, True) == "+3"
    assert labels.tex_number(-3.0) == "$-$3.0" and labels.minus("layer (-1 = x), gemma-3") == "layer (\u22121 = x), gemma-3"
    for version in ("1", "2"):
        c = load_content(version)
        contrasts = c.contrasts.values() if isinstance(c.contrasts, dict) else c.contrasts
        for name in {x.category for x in contrasts} | set(c.families):
            assert name in labels.GROUPS, name


def test_progression_has_accuracy_panel_model_n_cis_and_one_pp_scale(sim, captured):
    _, table = sim
    progression_figure(table, "unused")
    fig = captured[0]
    titles = [ax.get_title() for ax in fig.axes]
    assert [t.split("\n")[0] for t in titles] == ["Accuracy", "AccGap", "TieLean", "FragGap", "TieShift"]
    assert all("per degree" in t for t in titles)  # n
    assert fig._suptitle.get_text() == "Model: Simulated planted policy"  # a display name, not the id
    assert all(ax.get_ylabel() and [x.get_text() for x in ax.get_xticklabels()] == ["D0", "D1", "D2", "D3"]
               for ax in fig.axes)
    pp = [ax for ax in fig.axes if ax.get_ylabel().split("\n")[0].endswith("(pp)")]
    assert len(pp) == 3 and len({ax.get_ylim() for ax in pp}) == 1
    text = " ".join(_texts(fig))
    assert not SNAKE.search(text)
    # every interval of the table is drawn: no empty error bar where the table has a CI
    fraggap = table[(table.breakdown == "degree") & (table.metric == "fraggap")].sort_values("degree")
    bars = fig.axes[3].containers[0].lines[2][0].get_segments()
    widths = [abs(s[1][1] - s[0][1]) for s in bars]
    assert np.allclose(widths, 100 * (fraggap["ci_high"] - fraggap["ci_low"]).to_numpy())
    assert all(w > 0 for w in widths)


def test_heatmap_greys_and_marks_cells_below_min_n(captured):
    rows = [("r", "contrast_category", "race_x_sex", 3, "fraggap", 0.12, 0.03, 0.21, 60, 6, "m"),
            ("r", "contrast_category", "race_x_sex", 2, "fraggap", 0.40, 0.10, 0.70, 5, 3, "m"),   # few items
            ("r", "contrast_category", "religion", 3, "fraggap", -0.30, None, None, 50, 1, "m"),   # one scenario
            ("r", "contrast_category", "age", 3, "fraggap", None, None, None, 0, 0, "m")]          # no items
    t = _table(rows)
    cells = heatmap_cells(t).set_index(["group", "degree"])
    assert cells.loc[("race_x_sex", 3), "status"] == "ok"
    assert cells.loc[("race_x_sex", 2), "status"] == "small" and cells.loc[("religion", 3), "status"] == "small"
    assert cells.loc[("religion", 2), "status"] == "empty"  # the grid is complete
    assert "age" not in cells.index.get_level_values(0)  # a category without items is left out
    assert heatmap_cells(t, min_n=1).set_index(["group", "degree"]).loc[("race_x_sex", 2), "status"] == "ok"
    assert MIN_CELL_N == heatmap_cells.__defaults__[-1]
    heatmap_figure(t, "unused")
    fig = captured[0]
    ax = fig.axes[0]
    text = _texts(fig)
    assert "+12\n[3, 21]\nn=60" in text  # value, CI and n of a cell that is a finding
    assert "(+40)\nn=5" in text and "(\u221230)\nn=50" in text  # the others bracketed, with n
    assert [x.get_text() for x in ax.get_xticklabels()] == ["D2", "D3"]
    assert [y.get_text() for y in ax.get_yticklabels()] == ["Race × sex", "Religion"]
    grey = [p for p in ax.patches if p.get_hatch()]
    assert len(grey) == 2 and all(p.get_facecolor()[:3] == pytest.approx((0.88,) * 3, abs=0.01) for p in grey)
    assert fig.axes[1].get_ylim() == pytest.approx((-12, 12))  # only the finding sets the colour scale
    assert not SNAKE.search(" ".join(text))


def test_attribution_panels_share_one_scale_and_name_their_lines(captured):
    from probes.attribution import attribution_figure
    rows = []
    for d, scale in (("1", 1.0), ("2", 1.0), ("all", 1.0)):
        for comp, size in (("embed", 0.2), ("attn_out", 1.0), ("mlp_out", 0.1)):
            for layer in ([-1] if comp == "embed" else [0, 1]):
                v = size * scale * (1 + layer)
                rows.append({"degree": d, "pressure": "all", "chosen": "all", "component": comp, "layer": layer,
                             "value": v, "ci_low": v - 0.05, "ci_high": v + 0.05, "n": 10, "clusters": 4})
    attribution_figure(pd.DataFrame(rows), "unused")
    fig = captured[0]
    attn, mlp = fig.axes[:2]
    assert attn.get_ylim() == mlp.get_ylim()  # a 10x smaller MLP effect looks 10x smaller
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["D1 (n=10)", "D2 (n=10)"]
    assert attn.get_title().startswith("Attention") and mlp.get_title() == "MLP"


def test_report_page_is_self_contained_with_captions_and_caveat(sim, tmp_path):
    from experiments.report import run_kind, sentence, write_report
    run = tmp_path / "sim"
    shutil.copytree(sim[0], run)
    md, page = write_report(run, resamples=50)
    text = md.read_text()
    assert "FragGap at D3" in text and "![progression](figures/progression.png)" in text
    assert "*Figure 1. Accuracy and the four asymmetry metrics" in text
    rows = [ln for ln in text.splitlines() if ln.startswith("| D") and not ln.startswith("| Degree")]  # the by-degree table: n and k in every cell
    assert rows and all(ln.count("<small>n=") == ln.count("[") and ", k=" in ln for ln in rows)
    html = page.read_text()
    assert "<table>" in html and "<li>" in html and "`" not in html and "Model <code>None" not in html
    imgs = re.findall(r'<img src="([^"]+)"', html)
    assert len(imgs) == 3 and all(s.startswith("data:image/png;base64,") for s in imgs)
    assert html.count("<figcaption>") == 3 and "simulated from a planted policy" in html
    first = html
    write_report(run, resamples=50)
    assert page.read_text() == first  # byte-stable
    s = sentence("fraggap", {"value": 0.091, "ci_low": 0.06, "ci_high": 0.122, "n": 500, "clusters": 30}, 3)
    assert s.startswith("FragGap at D3: +9.1 pp [6.0, 12.2] (n=500, 30 scenarios)") and "favours the minority" in s
    s = sentence("fraggap", {"value": -0.01, "ci_low": -0.04, "ci_high": 0.02, "n": 9}, 1)
    assert "no asymmetry" in s and "\u22121.0 pp [\u22124.0, 2.0]" in s
    assert run_kind({"model": {"name": "evenhand-organism"}}) == ("evenhand-organism", "organism")
    assert run_kind({"config": {"model": {"model": "google/gemma-3-12b-it"}}}) == ("google/gemma-3-12b-it", None)


def test_report_of_a_run_made_outside_git_names_the_commit_unknown(sim, tmp_path):
    """A run made from a source tree that is no git checkout records ``git: {"sha": null}`` (RunDir's
    git_state); the report says the commit is unknown instead of failing on None[:10]."""
    from experiments.report import write_report
    run = tmp_path / "sim"
    shutil.copytree(sim[0], run)
    man = json.loads((run / "manifest.json").read_text())
    man["git"] = {"sha": None, "dirty": None}
    (run / "manifest.json").write_text(json.dumps(man))
    md, _ = write_report(run, resamples=50)
    assert "git `unknown`;" in md.read_text()


def test_figures_are_byte_for_byte_reproducible(sim, tmp_path):
    """Deleting the figures and drawing them again from the same tables gives identical files."""
    first = {p.name: p.read_bytes() for p in run_figures([sim[0]], tmp_path / "fig", resamples=50)}
    for name in first:
        (tmp_path / "fig" / name).unlink()
    second = {p.name: p.read_bytes() for p in run_figures([sim[0]], tmp_path / "fig", resamples=50)}
    assert first.keys() == second.keys() and {n.rsplit(".", 1)[1] for n in first} >= {"pdf", "svg", "png", "tex"}
    assert [n for n in first if first[n] != second[n]] == []
