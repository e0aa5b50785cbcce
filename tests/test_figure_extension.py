"""Adding a figure: one new file (below, written to a temporary module) holding one :class:`Figure` record and its
one ``register_figure`` line; ``evenhand --plugin FILE figures RUN`` then draws it beside the built-in figures,
and the report finds its caption. Nothing in ``run_figures``, the CLI or the registry names it.

Fails when ``run_figures`` chooses its figures by a list of its own instead of walking the registry (the plugin's
files are then missing), or when a second figure may take a registered name."""
from __future__ import annotations

import pytest

from experiments import figures
from experiments.cli import main

PLUGIN = '''
"""A figure of one table: accuracy by degree, as bars."""
from pathlib import Path

from evenhand.reporting.plotting import paper_style, save
from experiments.figures import Figure, FigureInput, register_figure


def accuracy_bars(f: FigureInput, stem: Path) -> list[Path]:
    import matplotlib.pyplot as plt
    t = f.metrics[(f.metrics["metric"] == "accuracy") & (f.metrics["breakdown"] == "overall")]
    paper_style()
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.bar(t["degree"].astype(str), t["value"])
    return save(fig, stem, f.formats)


register_figure(Figure("accuracy_bars", ("metrics",), accuracy_bars, "Accuracy by degree."))
'''


@pytest.fixture
def registry(monkeypatch):
    """The figure registry, restored after the test (the plugin's figure is dropped)."""
    monkeypatch.setattr(figures, "FIGURES", figures.FIGURES.copy())
    return figures.FIGURES


def test_a_plugin_figure_is_drawn_by_evenhand_figures(registry, tmp_path, capsys):
    plugin = tmp_path / "accuracy_bars_plugin.py"
    plugin.write_text(PLUGIN)
    run, out = tmp_path / "run", tmp_path / "fig"
    assert main(["simulate", "--out", str(run)]) == 0
    assert main(["--plugin", str(plugin), "figures", str(run), "--out", str(out), "--format", "png"]) == 0
    printed = capsys.readouterr().out.split()
    assert str(out / "accuracy_bars.png") in printed and (out / "accuracy_bars.png").stat().st_size > 500
    assert printed.index(str(out / "accuracy_bars.png")) < printed.index(str(out / "headline.tex"))
    assert {"progression.png", "fraggap_heatmap.png", "flips_by_family.png"} <= {p.name for p in out.iterdir()}
    assert registry.get("accuracy_bars").reads == ("metrics",)
    assert figures.caption("accuracy_bars") == "Accuracy by degree."


def test_a_figure_name_is_taken_once(registry):
    with pytest.raises(ValueError, match="figure 'progression' is already registered"):
        figures.register_figure(figures.Figure("progression", ("metrics",), lambda f, stem: []))
    with pytest.raises(ValueError, match="unknown figure 'nope'; registered: progression, fraggap_heatmap"):
        registry.get("nope")
    with pytest.raises(ValueError, match="reads must name the table"):
        figures.register_figure(figures.Figure("empty", (), lambda f, stem: []))
