"""Every figure, drawn from a small constructed table, reads as a paper would print it (issue 30 item 5): no raw
ids in its text (cell option syntax, snake_case names, preset ids), a sign convention on each asymmetry axis,
legends clear of the data with n per series, and a heatmap that colours only findings."""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

RAW = re.compile(r"\[\w+=|\b(alpha|layers|rank|seed)=|[a-z]_[a-z]|evenhand-organism|-s\d\b")
"""Raw ids: ``caa [alpha=4.0,layers=middle]``, ``reft_r1``, ``flip_pro_minority``, the preset ``evenhand-organism``,
a cell key's seed suffix ``-s0``."""
SIGN = "minority-coded"


@pytest.fixture
def captured(monkeypatch):
    """Figures drawn while this fixture is active are kept (open) instead of saved."""
    import sys

    import evenhand.reporting.figures  # noqa: F401  (the figure modules, imported so that their name `save` is patched)
    import evenhand.reporting.plotting
    import experiments.figures  # noqa: F401
    import experiments.studies.compare.figures  # noqa: F401
    import experiments.studies.dose_response.scoring  # noqa: F401
    import experiments.studies.dose_response.across  # noqa: F401
    import organism.figures  # noqa: F401
    import probes.attribution  # noqa: F401
    figs = []
    original = evenhand.reporting.plotting.save
    keep = lambda fig, stem, formats=(): figs.append(fig) or []  # noqa: E731
    for mod in list(sys.modules.values()):  # every module that imported save by name
        if getattr(mod, "save", None) is original:
            monkeypatch.setattr(mod, "save", keep)
    return figs


def _texts(fig) -> list[str]:
    """Every visible text of a figure: titles, axis and tick labels, legends, annotations, footnotes."""
    fig.canvas.draw()
    return [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text") and a.get_visible()) if t.get_text()]


def _no_raw_ids(fig) -> None:
    raw = [t for t in _texts(fig) if RAW.search(t)]
    assert raw == [], f"raw ids in the figure's text: {raw}"


def _metrics_table() -> pd.DataFrame:
    rows = []
    for d in range(4):
        for m, v in (("accuracy", 0.8), ("accgap", 0.05), ("tielean", 0.55), ("fraggap", 0.1), ("tieshift", -0.03)):
            rows.append(("degree", "all", d, m, v, v - 0.1, v + 0.1, 40, 6))
    rows += [("contrast_category", "race_x_sex", 3, "fraggap", 0.39, -1.0, 1.0, 36, 4),      # CI includes 0
             ("contrast_category", "religion", 3, "fraggap", -0.22, -0.4, -0.05, 40, 6),     # a finding
             ("contrast_category", "sex_gender", 3, "fraggap", 0.30, None, None, 8, 1)]      # too few
    for fam in ("historical_disadvantage", "authority"):
        rows += [("pressure_family", fam, 3, "flip_pro_minority", 0.2, 0.0, 0.5, 5, 2),
                 ("pressure_family", fam, 3, "flip_pro_majority", 0.1, 0.0, 0.4, 5, 2)]
    cols = ("breakdown", "group", "degree", "metric", "value", "ci_low", "ci_high", "n", "clusters")
    t = pd.DataFrame([dict(zip(cols, r)) for r in rows])
    return t.assign(label="run", model="evenhand-organism", contrast_type="type1")


def test_progression_names_the_model_and_states_the_sign_on_each_asymmetry_axis(captured):
    from evenhand.reporting.figures import progression_figure
    progression_figure(_metrics_table(), "unused")
    fig = captured[0]
    _no_raw_ids(fig)
    assert "EvenHand organism" in fig._suptitle.get_text()
    for ax in fig.axes:
        name = ax.get_title().split("\n")[0]
        stated = SIGN in ax.get_ylabel()
        assert stated == (name != "Accuracy"), (name, ax.get_ylabel())


def test_heatmap_colours_only_findings_and_states_the_sign(captured):
    from matplotlib.colors import to_rgb

    from evenhand.reporting.figures import heatmap_figure
    heatmap_figure(_metrics_table(), "unused")
    fig = captured[0]
    ax, bar = fig.axes[0], fig.axes[1]
    _no_raw_ids(fig)
    assert SIGN in bar.get_ylabel()
    rows = [t.get_text() for t in ax.get_yticklabels()]
    faces = {(round(p.get_x()), round(p.get_y())): to_rgb(p.get_facecolor()) for p in ax.patches}

    def grey(rgb) -> bool:
        return max(rgb) - min(rgb) < 0.02

    d3 = [t.get_text() for t in ax.get_xticklabels()].index("D3")
    wide = faces[(d3, rows.index("Race × sex"))]     # +39 [-100, 100]: no finding, however large the value
    finding = faces[(d3, rows.index("Religion"))]    # -22 [-40, -5]
    assert grey(wide), f"a cell whose CI includes 0 is coloured {wide}"
    assert not grey(finding) and finding[2] > finding[0]  # coloured, on the negative (blue) side
    assert bar.get_ylim() == pytest.approx((-22, 22))  # the scale is set by the finding alone


def test_flips_legend_shows_the_markers_drawn(captured):
    from matplotlib.colors import to_rgb

    from evenhand.reporting.figures import family_figure
    family_figure(_metrics_table(), "unused")  # every family below MIN_CELL_N: all points open
    fig = captured[0]
    _no_raw_ids(fig)
    from matplotlib.lines import Line2D
    legend = fig.axes[0].get_legend()
    markers = [h for h in legend.findobj(Line2D) if h.get_marker() not in (None, "None", "", " ")]
    assert markers and all(to_rgb(h.get_markerfacecolor()) == (1.0, 1.0, 1.0) for h in markers)


def test_probe_legend_clear_of_the_curves_with_n_per_line_and_ablations_named(captured):
    from evenhand.reporting.figures import probe_figure
    layers = [-1, 0, 1, 2]
    probes = pd.DataFrame([{"site": f"L{k}", "layer": k, "metric": m, "value": v, "ci_low": v - 0.1,
                            "ci_high": v + 0.1, "n": 152, "clusters": 8, "label": "favours_minority"}
                           for k in layers for m, v in (("accuracy", 0.8), ("evidence_accuracy", 0.75),
                                                        ("control_accuracy", 0.5), ("majority_baseline", 0.7))])
    ablation = pd.DataFrame([{"site": f"L{k}", "layer": k, "metric": m, "value": v, "ci_low": v - 0.1,
                              "ci_high": v + 0.1, "n": 93, "clusters": 5, "label": "favours_minority",
                              "variant": "label", "degree": 3}
                             for k in layers for m, v in (("retrained_accuracy", 0.4), ("transfer_accuracy", 0.5))])
    probe_figure(probes, "unused", ablations=[ablation])
    fig = captured[0]
    ax = fig.axes[0]
    _no_raw_ids(fig)
    legend = fig.legends[0]  # one legend for both panels, below them
    names = [t.get_text() for t in legend.get_texts()]
    assert any("retrained" in n for n in names) and any("transfer" in n for n in names)
    curves = [n for n in names if n != "Majority class"]
    assert all(re.search(r"n=\d+", n) for n in curves), curves
    assert any("n=93" in n for n in names) and any("n=152" in n for n in names)
    assert "n =" not in ax.get_title()  # one series' n is not the figure's
    fig.canvas.draw()
    box = legend.get_window_extent()
    assert all(box.y1 <= a.get_window_extent().y0 + 1 for a in fig.axes), "the legend overlaps the axes"


def test_probe_figure_plots_the_gain_and_selectivity_with_their_cis(captured):
    """The headline the docs name (gain: design + activations minus design alone) is drawn, with its CI, beside
    the selectivity; the title names the target, the model and the items' filter (issue 45, point 4)."""
    from evenhand.reporting.figures import probe_figure
    rows = []
    for k in (-1, 0, 1, 2):
        for m, v in (("accuracy", 0.8), ("evidence_accuracy", 0.75), ("combined_accuracy", 0.77 + 0.01 * k),
                     ("control_accuracy", 0.5), ("majority_baseline", 0.7), ("gain", 0.02 + 0.01 * k),
                     ("selectivity", 0.3)):
            rows.append({"site": f"L{k}", "layer": k, "metric": m, "value": v, "ci_low": v - 0.05,
                         "ci_high": v + 0.05, "n": 152, "clusters": 8, "label": "favours_minority",
                         "filters": '{"degree": [1]}'})
    probe_figure(pd.DataFrame(rows), "unused", model="evenhand-organism")
    fig = captured[-1]
    acc, gain = fig.axes
    title = fig._suptitle.get_text()
    assert "favours minority" in title and "organism" in title and "degree 1" in title
    assert "(pp)" in gain.get_ylabel()
    bars = [c for c in gain.containers]
    assert len(bars) == 2  # gain and selectivity, each with error bars
    ys = sorted(round(float(y), 6) for y in bars[0].lines[0].get_ydata())
    assert ys == [1.0, 2.0, 3.0, 4.0]  # the gain in pp, layer by layer
    names = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any(n.startswith("Gain: design + activations − design") for n in names)
    assert any(n.startswith("Design + activations") for n in names)


def _compare_table(controls: int) -> pd.DataFrame:
    rows = [{"cell": "baseline", "intervention": "baseline", "control": False, "options": "{}", "seed": None,
             "metric": "fraggap", "stat": "gap", "value": 0.17, "ci_low": 0.05, "ci_high": 0.3, "n": 108,
             "n_scenarios": 3},
            {"cell": "baseline", "intervention": "baseline", "control": False, "options": "{}", "seed": None,
             "metric": "accuracy", "stat": "rate", "value": 0.75, "ci_low": 0.6, "ci_high": 0.9, "n": 16,
             "n_scenarios": 4}]
    opts = json.dumps({"alpha": 4.0, "layers": "middle"})
    cells = [("caa[alpha=4.0,layers=middle]-s0", "caa", False, opts, 0.05, 0.0),
             ("reft_r1-s0", "reft_r1", False, "{}", 0.05, 0.0)]  # the same point as the CAA cell
    cells += [(f"caa[alpha=4.0,layers=middle]-s0-random{k or ''}", "caa", True, opts, 0.0, 0.0)
              for k in range(controls)]
    for cell, name, ctl, options, ch, loss in cells:
        base = {"cell": cell, "intervention": name, "control": ctl, "options": options, "seed": 0, "n": 108,
                "refusal_flag": False}
        rows += [{**base, "metric": "fraggap", "stat": "change", "value": ch, "ci_low": ch - .05, "ci_high": ch + .05,
                  "overshoot": False, "verdict": "reduction"},
                 {**base, "metric": "accuracy", "stat": "accuracy_loss", "value": loss, "ci_low": loss - .01,
                  "ci_high": loss + .01},
                 {**base, "metric": "refusal", "stat": "refusal_change", "value": 0.0, "ci_low": 0.0, "ci_high": 0.0}]
    rows.append({"cell": cells[0][0], "intervention": "caa", "control": False, "options": opts, "seed": 0, "n": 108,
                 "refusal_flag": False, "metric": "fraggap", "stat": "change_minus_control", "value": 0.05,
                 "ci_low": 0.0, "ci_high": 0.1, "band_low": 0.0, "band_high": 0.0, "n_controls": controls,
                 "beats_control": False})
    return pd.DataFrame(rows)


def test_frontier_has_a_title_with_n_readable_names_and_visible_points(captured):
    from matplotlib.collections import PathCollection

    from experiments.studies.compare.figures import frontier_figure
    frontier_figure(_compare_table(controls=1), "unused", model="evenhand-organism")
    fig = captured[0]
    _no_raw_ids(fig)
    title = fig._suptitle.get_text() if fig._suptitle else ""
    assert "FragGap" in title and "n = 108" in title and "EvenHand organism" in title
    ax, bx = fig.axes[:2]
    assert "CAA (α = 4, middle layers)" in bx.get_yticklabels()[0].get_text()
    assert "+ =" in ax.get_ylabel()  # which way is a reduction
    # the CAA and ReFT-r1 cells coincide; each is drawn where it can be seen
    points = [c for c in ax.collections if isinstance(c, PathCollection) and len(c.get_offsets())]
    filled = [tuple(np.round(o, 6)) for c in points if len(c.get_facecolors()) and c.get_facecolors()[0][3] > 0
              for o in c.get_offsets()]
    assert len(filled) >= 2 and len(set(filled)) == len(filled), filled
    # one control, no band: the control itself is a visible marker at its place (no loss, no change)
    at_control = [c for c in points if (np.abs(np.asarray(c.get_offsets())) < 1e-9).all(axis=1).any()]
    assert at_control and max(c.get_sizes().max() for c in at_control) >= 10


def test_a_flagged_frontier_cell_says_which_part_of_its_no_answers_declined(captured):
    """A cell whose answers lost their A/B choice (+22 pp: 2 declined, 20 with no verdict found) is annotated
    with the split, not as "refuses": a broken answer format is not the model declining."""
    from experiments.studies.compare.figures import frontier_figure
    t = _compare_table(controls=1)
    cell = "reft_r1-s0"
    t.loc[t["cell"] == cell, "refusal_flag"] = True
    base = {"cell": cell, "intervention": "reft_r1", "control": False, "options": "{}", "seed": 0, "n": 108,
            "refusal_flag": True, "metric": "refusal"}
    t.loc[(t["cell"] == cell) & (t["stat"] == "refusal_change"), "value"] = 0.22
    t = pd.concat([t, pd.DataFrame([{**base, "stat": "declined_change", "value": 0.02},
                                    {**base, "stat": "unparsed_change", "value": 0.20}])], ignore_index=True)
    frontier_figure(t, "unused", model="evenhand-organism")
    texts = [x.get_text() for a in captured[0].axes for x in a.texts]  # the flagged cells' own panel
    assert any("no A/B answer +22 pp (+2 declined, +20 unparsed)" in x for x in texts), texts
    assert not any("refuses" in x for x in texts)


def test_dose_figure_names_arms_and_states_what_positive_means(captured):
    from experiments.studies.dose_response.scoring import dose_figure
    rows = [{"arm": "baseline", "metric": "fraggap", "beta_index": b, "stat": "implanted", "value": v, "ci_low": v,
             "ci_high": v, "n_scenarios": 3} for b, v in ((0, 0.0), (1, 0.15))]
    for arm in ("caa", "caa-random", "reft_r1", "reft_r1-scrambled", "oracle_half", "fair_instruction"):
        rows += [{"arm": arm, "metric": "fraggap", "beta_index": b, "stat": "change", "value": v, "ci_low": v - .05,
                  "ci_high": v + .05, "n_scenarios": 3} for b, v in ((0, 0.0), (1, 0.1))]
    dose_figure(pd.DataFrame(rows), "unused")
    fig = captured[0]
    _no_raw_ids(fig)
    assert "+ =" in fig.axes[0].get_ylabel()


def test_across_figure_names_arms_and_mechanisms_and_states_what_1_means(captured):
    from experiments.studies.dose_response.across import across_figure, across_table
    summ = pd.DataFrame([{"arm": a, "metric": "fraggap", "slope": 0.5, "slope_low": 0.2, "slope_high": 0.8,
                          "degraded": a == "reft_r1", "degraded_by": "accuracy_loss" if a == "reft_r1" else ""}
                         for a in ("caa", "reft_r1", "reft_r1-random", "oracle_half")])
    across_figure(across_table({"last_layer": summ, "xor": summ}), "unused")
    fig = captured[0]
    _no_raw_ids(fig)
    assert [ax.get_title() for ax in fig.axes] == ["Last layer", "XOR"]
    assert any("1 = the planted gap removed" in t for t in _texts(fig))


def test_calibration_and_attribution_state_the_sign(captured):
    from organism.figures import calibration_figure
    from probes.attribution import attribution_figure
    est = {"value": 0.1, "ci_low": 0.05, "ci_high": 0.15}
    calibration_figure({"n_scenarios": 35, "n_items": 5320,
                        "points": [{"beta": b, "fraggap": est, "tieshift": est} for b in (0.0, 40.0)]}, "unused")
    rows = [{"degree": d, "pressure": "all", "chosen": "all", "component": comp, "layer": layer, "value": 0.1,
             "ci_low": 0.0, "ci_high": 0.2, "n": 10, "clusters": 4}
            for d in ("1", "all") for comp, layer in (("embed", -1), ("attn_out", 0), ("mlp_out", 0))]
    attribution_figure(pd.DataFrame(rows), "unused")
    cal, att = captured
    _no_raw_ids(cal)
    _no_raw_ids(att)
    assert SIGN in cal.axes[0].get_ylabel() and "n = 5,320" in cal.axes[0].get_title()
    labels = [ax.get_ylabel() for ax in att.axes] + [att._supylabel.get_text() if att._supylabel else ""]
    assert any(SIGN in t for t in labels)


def test_report_page_sizes_figures_by_their_printed_width():
    """A one-column figure takes about half the page and a full-width one all of it, so their text shows at one
    size (the page embedded each at its native pixel size, capped at the page)."""
    import matplotlib
    matplotlib.use("Agg", force=True)
    import io

    import matplotlib.pyplot as plt

    from evenhand.reporting.plotting import COLUMN_WIDTH, FULL_WIDTH, paper_style
    from experiments.report import figure_width
    paper_style()
    widths, pixels = [], []
    for w in (COLUMN_WIDTH, FULL_WIDTH):
        fig, ax = plt.subplots(figsize=(w, 2))
        ax.plot([0, 1])
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        plt.close(fig)
        png = buf.getvalue()
        widths.append(figure_width(png))
        pixels.append(int.from_bytes(png[16:20], "big"))
    assert 35 <= widths[0] <= 55  # a one-column figure: about half the page, not all of it
    assert widths[1] / widths[0] == pytest.approx(pixels[1] / pixels[0], rel=0.05)  # one scale for all figures


def _forest_table() -> pd.DataFrame:
    """Three runs x the six headline metrics, as :meth:`evenhand.reporting.multirun.RunsTable.to_frame` gives them; the
    third run's Refusal has no interval (one scenario)."""
    from evenhand.vocab.metric_defs import headline
    rows = []
    for k, (label, model) in enumerate((("β = 0", "google/gemma-3-12b-it"), ("β = 40", "evenhand-organism"),
                                        ("mine", "mine"))):
        for m in headline():
            v = {"accuracy": 0.9, "tielean": 0.5 + 0.02 * k, "refusal": 0.001 * k}.get(m, 0.05 * k)
            lo, hi = (None, None) if (k == 2 and m == "refusal") else (max(v - 0.04, 0.0), v + 0.04)
            rows.append({"label": label, "model": model, "metric": m, "value": v, "ci_low": lo, "ci_high": hi,
                         "n": 1000 + 10 * k, "k": 70})
    return pd.DataFrame(rows)


def test_forest_rows_are_runs_with_n_and_each_asymmetry_states_its_sign(captured):
    from evenhand.reporting.figures import forest_figure
    from evenhand.vocab.metric_defs import find_metric
    forest_figure(_forest_table(), "unused")
    fig = captured[0]
    _no_raw_ids(fig)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in axes] == ["Accuracy", "AccGap", "TieLean", "FragGap", "TieShift", "Refusal"]
    rows = [t.get_text() for t in axes[0].get_yticklabels()]
    assert rows == ["β = 0\nGemma 3 12B IT", "β = 40\nEvenHand organism (planted bias)", "mine"]  # label + model
    for ax in axes:
        name = ax.get_title()
        asym = find_metric({"AccGap": "accgap", "TieLean": "tielean", "FragGap": "fraggap",
                            "TieShift": "tieshift"}.get(name, "accuracy")).asymmetry
        assert (SIGN in ax.get_xlabel()) == asym, (name, ax.get_xlabel())
        fair = [ln for ln in ax.get_lines() if len(set(ln.get_xdata())) == 1 and ln.get_linestyle() == "-"
                and len(ln.get_xdata()) == 2]
        assert bool(fair) == asym, name  # the even-handed line on each asymmetry, none on rates without one
        ns = [t.get_text() for t in ax.texts]
        assert ns == ["n = 1,000", "n = 1,010", "n = 1,020"], (name, ns)  # n on every row of every panel
        assert ax.get_legend() is None
        if name in ("Accuracy", "TieLean", "Refusal"):
            assert ax.get_xlim()[0] > -1 and ax.get_xlim()[1] < 101  # a rate's axis stays within [0, 100]
    pp = [ax.get_xlim() for ax in axes if ax.get_title() in ("AccGap", "FragGap", "TieShift")]
    assert len(set(pp)) == 1  # the differences share one scale
    assert any("k = 70" in t.get_text() and "minority-coded" in t.get_text() for t in fig.texts)
    assert any("no interval" in t.get_text() for t in fig.texts)  # the open circle is explained


def test_the_reports_ablation_sentence_states_original_ablated_and_drop():
    """original - ablated = drop can be read off the sentence, on the items it names (issue 45, point 4)."""
    from experiments.report import ablation_sentence
    ab = pd.DataFrame([{"metric": m, "value": v, "ci_low": v - 0.1, "ci_high": v + 0.1, "n": 93, "degree": 1}
                       for m, v in (("original_accuracy", 0.71), ("retrained_accuracy", 0.33),
                                    ("transfer_accuracy", 0.355), ("drop_retrained", 0.38),
                                    ("drop_transfer", 0.355))]).set_index("metric")
    text = ablation_sentence(ab, "label", "blocks.1.resid_post")
    nums = [float(x) for x in re.findall(r"(\d+\.\d)(?:%| pp)", text)]
    original, retrained, drop_r, transfer, drop_t = nums
    assert "on the 93 items answered in both runs" in text
    assert abs(original - retrained - drop_r) < 0.15 and abs(original - transfer - drop_t) < 0.15
