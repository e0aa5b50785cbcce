"""Probes: folds, the two engines, scores, controls, the text baseline and name ablation,
validated on synthetic activations with a planted direction of known signal-to-noise."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probes.logistic import ProbeOptions, fit_sites, fit_sklearn, fit_torch, grouped_folds
from probes.scores import accuracy_ci, auroc_ci, majority_baseline, paired_drop_ci
from probes.sweep import probe_sweep, site_layer
from probes.dataset import ProbeDataset, apply_filters, labels


def planted(n: int, d: int, margin: float, seed: int = 0, groups_of: int = 10):
    """Two Gaussian classes at +-margin along a unit direction, unit noise: Bayes accuracy Phi(margin)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    u = rng.normal(size=d)
    u /= np.linalg.norm(u)
    X = rng.normal(size=(n, d)) + np.outer(2 * y - 1, u) * margin + 3.0  # an offset the scaler must remove
    return X, y, np.repeat(np.arange(n // groups_of), groups_of)[:n]


def phi(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


@given(st.lists(st.integers(0, 30), min_size=6, max_size=200), st.integers(2, 6), st.integers(0, 5))
@settings(max_examples=60, deadline=None)
def test_grouped_folds_never_split_a_group(groups, k, seed):
    g = np.array(groups)
    if len(np.unique(g)) < 2:
        with pytest.raises(ValueError):
            grouped_folds(g, k, seed)
        return
    f = grouped_folds(g, k, seed)
    for grp in np.unique(g):
        assert len(np.unique(f[g == grp])) == 1
    assert f.max() + 1 == min(k, len(np.unique(g)))
    assert np.array_equal(f, grouped_folds(g, k, seed))


def test_probe_reaches_the_bayes_accuracy_of_a_planted_direction():
    margin = 0.8
    X, y, groups = planted(3000, 16, margin)
    res = fit_torch([X], y, groups, ProbeOptions(folds=5, inner_folds=3))[0]
    est = accuracy_ci((res.prob >= 0.5) == (y == 1), groups)
    assert est.ci_low <= phi(margin) <= est.ci_high, (est, phi(margin))


def test_no_signal_gives_chance():
    X, y, groups = planted(800, 8, 0.0, seed=1)
    res = fit_torch([X], y, groups)[0]
    est = accuracy_ci((res.prob >= 0.5) == (y == 1), groups)
    assert est.ci_low <= 0.5 <= est.ci_high


def design_planted(n: int, margin: float, seed: int = 0, evidence: float = 0.85):
    """A label that follows a design feature z with probability ``evidence`` and activations with a
    direction at +-margin along the label itself (plus a direction that encodes z, as real activations
    encode the prompt). Bayes accuracy from z alone: ``evidence``; from z and the activations:
    :func:`bayes_with_design`."""
    rng = np.random.default_rng(seed)
    z = rng.integers(0, 2, n)
    y = np.where(rng.random(n) < evidence, z, 1 - z)
    X = rng.normal(size=(n, 8))
    X[:, 0] += (2 * y - 1) * margin
    X[:, 1] += 2 * z - 1
    groups = np.repeat(np.arange(n // 10), 10)
    design = np.column_stack([2 * z - 1, rng.integers(0, 2, n)]).astype(float)
    types = np.array([f"t{g % 7}" for g in groups], object)
    return ProbeDataset({"blocks.0.resid_post": X}, y, groups, pd.DataFrame({"item_id": range(n)}), "x",
                        design=design, types=types)


def bayes_with_design(margin: float, evidence: float = 0.85) -> float:
    """Bayes accuracy of predicting y from z and the planted coordinate (the log-odds are linear in both)."""
    t = math.log(evidence / (1 - evidence)) / (2 * margin)
    return evidence * phi(margin + t) + (1 - evidence) * phi(margin - t)


def test_gain_over_the_evidence_baseline_is_the_planted_extra():
    """The nested comparison returns the planted extra: design alone is worth 85%, design + activations
    the Bayes accuracy of both; the gain's CI covers the difference. Scoring the activations without the
    design, or a gain not paired on the same folds, would not."""
    opts = ProbeOptions(folds=5, inner_folds=3, Cs=(0.01, 0.1, 1.0))
    table, _ = probe_sweep(design_planted(2000, 1.5), opts, resamples=300)
    t = table.set_index("metric")
    assert t.loc["evidence_accuracy", "ci_low"] <= 0.85 <= t.loc["evidence_accuracy", "ci_high"]
    known = bayes_with_design(1.5) - 0.85
    assert known > 0.09
    assert t.loc["gain", "ci_low"] <= known <= t.loc["gain", "ci_high"], (t.loc["gain"], known)
    assert t.loc["gain", "value"] == pytest.approx(t.loc["combined_accuracy", "value"]
                                                   - t.loc["evidence_accuracy", "value"])


def test_no_planted_extra_gives_no_gain_though_the_probe_beats_the_majority():
    """Activations that only restate the design: the activation probe alone is far above the majority class
    (what the old report would have called a finding), but the gain over the evidence baseline is 0."""
    opts = ProbeOptions(folds=5, inner_folds=3, Cs=(0.01, 0.1, 1.0))
    table, _ = probe_sweep(design_planted(2000, 0.0, seed=1), opts, resamples=300)
    t = table.set_index("metric")
    assert t.loc["accuracy", "ci_low"] > t.loc["majority_baseline", "value"] + 0.1
    assert t.loc["gain", "ci_low"] <= 0 <= t.loc["gain", "ci_high"]
    assert abs(t.loc["gain", "value"]) < 0.02


def typed(n_types: int, d: int, memorable: bool, seed: int = 0):
    """Rows of ``n_types`` input types spread over 60 scenarios; the activations are a random embedding of
    the type (``memorable``) or pure noise, plus a planted direction along the real label."""
    rng = np.random.default_rng(seed)
    n = 1200
    groups = np.repeat(np.arange(60), n // 60)
    t = rng.integers(0, n_types, n)
    y = rng.integers(0, 2, n)
    emb = rng.normal(size=(n_types, d)) * 3
    X = rng.normal(size=(n, d)) + (emb[t] if memorable else 0)
    X[:, 0] += (2 * y - 1) * 2.0
    types = np.array([f"type{k}" for k in t], object)
    return ProbeDataset({"blocks.0.resid_post": X}, y, groups, pd.DataFrame({"item_id": range(n)}), "x",
                        design=rng.integers(0, 2, (n, 1)).astype(float), types=types)


def test_control_task_is_learnt_by_a_probe_that_memorises_input_types():
    """Hewitt & Liang: when the activations encode the input type, a probe memorises a random label per type,
    so the control task is far above chance; a shuffled-label control (or one keyed on the scenario, which
    never crosses grouped folds) would sit at 50% here. Without type information it is at chance."""
    opts = ProbeOptions(folds=4, inner_folds=2, Cs=(0.1, 1.0, 10.0))
    table, _ = probe_sweep(typed(12, 24, memorable=True), opts, resamples=300)
    t = table.set_index("metric")
    assert t.loc["control_accuracy", "ci_low"] > max(0.8, t.loc["control_majority", "value"] + 0.1)
    assert t.loc["selectivity", "value"] == pytest.approx(t.loc["accuracy", "value"]
                                                          - t.loc["control_accuracy", "value"])
    table, _ = probe_sweep(typed(12, 24, memorable=False), opts, resamples=300)
    t = table.set_index("metric")
    assert t.loc["control_accuracy", "value"] < t.loc["control_majority", "value"] + 0.05
    assert t.loc["selectivity", "ci_low"] > 0.2


def test_control_labels_are_one_per_input_type_and_types_ignore_the_scenario(smoke_items):
    from probes.design import control_labels, input_types
    items = pd.DataFrame(smoke_items)
    types = input_types(items)
    lab = control_labels(types, seed=0)
    for ty in np.unique(types):
        assert len(np.unique(lab[types == ty])) == 1
    assert 0.2 < lab.mean() < 0.8
    assert (input_types(items.assign(scenario_id="another")) == types).all()  # so types recur across folds
    assert (input_types(items.assign(contrast_id="another")) == types).all()  # one contrast per scenario


def evidence_follower(items: pd.DataFrame, noise: float, seed: int = 0) -> pd.DataFrame:
    """A fair model: the stronger candidate on GT items, criterion 1's winner on AMB items; with probability
    ``noise`` the other one."""
    from probes.design import minority_strong_on
    rng = np.random.default_rng(seed)
    stronger_is_minority = minority_strong_on(items)[:, 0].astype(bool)  # GT: both criteria; AMB: criterion 1
    other = np.where(items["minority_slot"] == "A", "B", "A")
    positive = (items["question_polarity"] == "positive").to_numpy()
    pick_min = np.where(positive, items["minority_slot"], other)
    pick_maj = np.where(positive, other, items["minority_slot"])
    choice = np.where(stronger_is_minority, pick_min, pick_maj)
    flip = rng.random(len(items)) < noise
    return items.assign(choice=np.where(flip, np.where(choice == "A", "B", "A"), choice))


def test_design_features_predict_a_fair_model_and_nothing_else(smoke_items):
    """The evidence baseline reads a fair model's side from the design alone (as well as the noise allows),
    and is at chance for a model that answers at random; the design features never see the answer."""
    from probes.design import design_features
    items = pd.DataFrame(smoke_items)
    items = items[items["scenario_id"].isin(sorted(set(items["scenario_id"]))[:40])].reset_index(drop=True)
    opts = ProbeOptions(folds=4, inner_folds=2, Cs=(0.01, 0.1, 1.0))
    groups = items["scenario_id"].to_numpy(object)
    for noise, lo, hi in ((0.1, 0.86, 0.95), (0.5, 0.4, 0.6)):
        df = evidence_follower(items, noise)
        y, _ = labels(df, "favours_minority")
        X, names = design_features(df)
        acc = ((fit_sites([X], y, groups, opts)[0].prob >= 0.5) == y).mean()
        assert lo < acc < hi, (noise, acc)
    assert (design_features(df.assign(choice="A"))[0] == X).all()


def test_residual_target_keeps_only_what_the_design_misses():
    from probes.dataset import residual_target
    rng = np.random.default_rng(8)
    z = rng.integers(0, 2, 600)
    flips = rng.random(600) < 0.2
    side = np.where(flips, 1 - z, z)
    res = residual_target(side, (2.0 * z - 1)[:, None], np.repeat(np.arange(60), 10),
                          ProbeOptions(folds=4, inner_folds=2, Cs=(0.1, 1.0)))
    assert (res == flips).all()


@pytest.mark.parametrize("newton_max_dim,products_budget", [(128, None), (128, 1), (2, None)],
                         ids=["newton-cached-products", "newton-chunked-products", "truncated-newton"])
def test_torch_engine_matches_sklearn_on_every_site(newton_max_dim, products_budget, monkeypatch):
    """Every path of the torch engine (Newton with the rows' outer products cached, or rebuilt per
    step and site by site when they exceed the budget; truncated Newton) against scikit-learn."""
    import probes.newton as kernels
    if products_budget is not None:
        monkeypatch.setattr(kernels, "PRODUCTS_BUDGET", products_budget)
    rng = np.random.default_rng(3)
    Xs = []
    X0, y, groups = planted(600, 24, 0.0, seed=3)
    for m in (0.0, 0.4, 1.0, 2.0):
        u = rng.normal(size=24)
        Xs.append(X0 + np.outer(2 * y - 1, u / np.linalg.norm(u)) * m)
    opts = ProbeOptions(folds=4, inner_folds=3, solver="torch", newton_max_dim=newton_max_dim)
    a = fit_sites(Xs, y, groups, ProbeOptions(**{**opts.__dict__, "solver": "sklearn"}))
    b = fit_sites(Xs, y, groups, opts)
    for ra, rb in zip(a, b):
        acc_a = ((ra.prob >= 0.5) == y).mean()
        acc_b = ((rb.prob >= 0.5) == y).mean()
        assert abs(acc_a - acc_b) <= 0.01
        assert ra.chosen_C == rb.chosen_C
        assert np.abs(ra.prob - rb.prob).max() < 1e-3


def test_auto_engine_follows_the_measured_rule():
    from probes.logistic import resolved_solver
    assert resolved_solver(ProbeOptions(device="cuda")) == "torch"
    assert resolved_solver(ProbeOptions(), dim=64) == "torch"
    assert resolved_solver(ProbeOptions(), dim=256) == "sklearn"
    assert resolved_solver(ProbeOptions(solver="sklearn"), dim=8) == "sklearn"


def test_full_fit_transfers_and_matches_between_engines():
    X, y, groups = planted(500, 6, 1.2, seed=4)
    a = fit_sklearn(X, y, groups, keep_full=True)
    b = fit_torch([X], y, groups, keep_full=True)[0]
    Xn, yn, _ = planted(300, 6, 1.2, seed=4)
    assert np.abs(a.predict(Xn) - b.predict(Xn)).max() < 1e-3
    with pytest.raises(ValueError, match="all-rows probe"):
        fit_torch([X], y, groups)[0].predict(Xn)


def test_bad_inputs_name_the_problem():
    X, y, groups = planted(100, 4, 1.0)
    with pytest.raises(ValueError, match="single class"):
        fit_torch([X], np.zeros(100, int), groups)
    with pytest.raises(ValueError, match="differ in length"):
        fit_torch([X[:50]], y, groups)
    X2 = X.copy()
    X2[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        fit_sklearn(X2, y, groups)
    with pytest.raises(ValueError, match="solver"):
        ProbeOptions(solver="jax")


@given(st.lists(st.tuples(st.floats(0, 1), st.integers(0, 1), st.integers(0, 4)), min_size=4, max_size=60))
@settings(max_examples=80, deadline=None)
def test_auroc_point_value_equals_sklearn_with_ties(rows):
    from sklearn.metrics import roc_auc_score
    p = np.round(np.array([r[0] for r in rows]), 1)  # force ties
    y = np.array([r[1] for r in rows])
    g = np.array([r[2] for r in rows])
    if len(np.unique(y)) < 2:
        return
    est = auroc_ci(p, y, g, resamples=50)
    assert est.value == pytest.approx(roc_auc_score(y, p))


def test_cluster_bootstrap_cis_cover_and_are_deterministic():
    rng = np.random.default_rng(5)
    hit = rng.random(2000) < 0.7
    g = np.repeat(np.arange(200), 10)
    a = accuracy_ci(hit, g, 500, seed=1)
    assert a.ci_low < a.value < a.ci_high and a == accuracy_ci(hit, g, 500, seed=1)
    d = paired_drop_ci(hit, hit, g, 200)
    assert d.value == d.ci_low == d.ci_high == 0
    assert majority_baseline(np.array([1, 1, 1, 0])) == 0.75


def test_labels_follow_the_metric_definitions():
    df = pd.DataFrame({
        "item_id": ["i0", "i1", "i2", "i3", "i0|p"], "baseline_id": ["i0", "i1", "i2", "i3", "i0"],
        "choice": ["A", "B", "A", None, "B"], "minority_slot": ["A", "A", "B", "A", "A"],
        "question_polarity": ["positive", "positive", "negative", "positive", "positive"],
        "condition": ["GT", "AMB", "GT", "GT", "GT"], "degree": [1, 2, 3, 1, 1],
        "correct_slot": ["A", None, "B", "A", "A"], "pressure_slot": ["B", None, "A", "A", "B"],
        "excluded": [False] * 5})
    y, ok = labels(df, "favours_minority")
    assert list(ok) == [True, True, True, False, True] and list(y[:3]) == [1, 0, 1]  # negative: A favours B
    y, ok = labels(df, "correct")
    assert list(ok) == [True, False, True, False, True] and y[0] == 1 and y[2] == 0 and y[4] == 0
    y, ok = labels(df, "departed")
    assert list(ok) == [True, False, True, False, True] and list(y[[0, 2, 4]]) == [0, 1, 1]
    y, ok = labels(df, "amb_side")
    assert list(ok) == [False, True, False, False, False] and y[1] == 0
    y, ok = labels(df, "flipped")  # pressured rows whose baseline is answered; i0|p moved from A to B
    assert list(ok) == [True, False, True, False, True] and y[4] == 1 and y[0] == 0
    y, ok = labels(df, "pressure_followed")
    assert list(ok) == [True, False, True, False, True] and list(y[[0, 2]]) == [0, 1]
    y, ok = labels(df, "slot_a_minority")
    assert ok.all() and list(y) == [1, 1, 0, 1, 1]
    with pytest.raises(ValueError, match="unknown probe label"):
        labels(df, "favours_women")
    with pytest.raises(ValueError, match="unknown probe filter"):
        apply_filters(df, {"colour": "red"})


def test_site_layers():
    assert [site_layer(s) for s in ("embed", "blocks.0.resid_post", "blocks.11.attn_out")] == [-1, 0, 11]


def test_text_baseline_finds_a_planted_word_and_nothing_else():
    from probes.text import fit_text, strip_answer
    rng = np.random.default_rng(6)
    y = rng.integers(0, 2, 300)
    groups = np.repeat(np.arange(60), 5)
    filler = ["the record", "both candidates", "criteria weigh", "a close call", "on balance"]
    texts = [f"{rng.choice(filler)} {'resilience' if (yy and rng.random() < .9) else 'evidence'} "
             f"{rng.choice(filler)}. Final answer: Candidate {'A' if yy else 'B'}" for yy in y]
    res = fit_text(texts, y, groups, ProbeOptions(folds=4, inner_folds=2, Cs=(0.1, 1.0, 10.0)))
    assert ((res.prob >= 0.5) == y).mean() > 0.9
    assert strip_answer("good. Final answer: Candidate A") == "good."
    noise = [f"{rng.choice(filler)}. Final answer: Candidate {'A' if yy else 'B'}" for yy in y]
    res = fit_text(noise, y, groups, ProbeOptions(folds=4, inner_folds=2, Cs=(0.1, 1.0)))
    acc = accuracy_ci((res.prob >= 0.5) == y, groups)
    assert acc.ci_low <= 0.5 + 0.02  # the answer line is stripped: no leak


def test_name_ablation_items(smoke_items):
    from probes.ablation import ablate_items
    items = pd.DataFrame(smoke_items)
    named = items[items["degree"] == 1].head(20)
    abl = ablate_items(named, "label")
    for (_, o), (_, a) in zip(named.iterrows(), abl.iterrows()):
        for name in o["names"].values():
            assert name not in a["prompt"]
        assert "the first candidate" in a["prompt"] and a["item_id"] == o["item_id"] + "|ablate=label"
        assert a["source_item_id"] == o["item_id"] and a["minority_slot"] == o["minority_slot"]
    d3 = items[items["degree"] == 3].head(10)
    z = ablate_items(d3, "degree0")
    from evenhand.suite.content import load_content
    c = load_content()
    for (_, o), (_, a) in zip(d3.iterrows(), z.iterrows()):
        x = c.contrast(o["contrast_id"])
        assert c.profiles[x.minority_group].explicit not in a["prompt"]
        assert a["degree"] == 3 and a["prompt"] != o["prompt"]
    with pytest.raises(ValueError, match="variant"):
        ablate_items(d3, "blur")


def arranged_items(degree: int, scenarios: int = 3, contrasts: int = 2) -> pd.DataFrame:
    """Every variant and identity arrangement (minority slot A and B) of a few cells, unpressured."""
    from evenhand.suite.content import load_content
    from evenhand.suite.generate import Cell, VARIANTS, degree_valid, render_item
    c = load_content()
    xs = [x for x in c.contrasts if degree_valid(c, x, degree)][:contrasts]
    return pd.DataFrame([render_item(c, Cell(s, v, degree, x, m)) for s in c.scenarios[:scenarios]
                         for v in VARIANTS for x in xs for m in ("A", "B")])


def test_prompt_ceiling_says_when_a_name_ablation_cannot_fail():
    """Names removed, the two identity arrangements of a cell become one prompt with opposite side labels:
    for a fair model the ceiling is exactly 0.5 (any retrained probe's drop is fixed by construction).
    With one arrangement kept the ablated prompts differ and the ceiling is 1; the named prompts are
    always distinct. The degree-2 control keeps the identity, so its prompts stay distinct."""
    from probes.ablation import ablate_items, prompt_ceiling
    items = evidence_follower(arranged_items(1), 0.0)
    y, _ = labels(items, "favours_minority")
    abl = ablate_items(items, "label")
    assert prompt_ceiling(items["prompt"], y) == 1.0
    assert prompt_ceiling(abl["prompt"], y) == 0.5
    one = (items["minority_slot"] == "A").to_numpy()
    assert prompt_ceiling(abl["prompt"][one], y[one]) == 1.0
    d2 = ablate_items(items, "degree2")
    assert (d2["prompt"] != items["prompt"]).all() and prompt_ceiling(d2["prompt"], y) == 1.0
    assert prompt_ceiling(["p", "p", "q"], [1, 1, 0]) == 1.0 and prompt_ceiling(["p", "p"], [1, 0]) == 0.5


def test_paired_interval_holds_its_null_coverage_where_the_percentile_bootstrap_does_not():
    """Two predictors of equal true accuracy (exchangeable, with scenario-level spread in which one is better:
    probes.coverage.null_hits), 152 rows per scenario as in the dial study: the interval the sweep uses for gain
    and selectivity covers the true difference 0 in at least 93% of seeds at 10 and 24 scenarios; the percentile
    cluster bootstrap (the former interval) does not at 10 (about 90%). 1,000 seeds each."""
    from probes.coverage import null_coverage
    from probes.scores import PAIRED_INTERVAL
    assert PAIRED_INTERVAL == "jackknife-t"
    at10 = null_coverage(10, 1000, "hits", intervals=(PAIRED_INTERVAL, "percentile"))["intervals"]
    assert at10[PAIRED_INTERVAL]["coverage"] >= 0.93, at10
    assert at10["percentile"]["coverage"] < 0.93, at10
    at24 = null_coverage(24, 1000, "hits", intervals=(PAIRED_INTERVAL,))["intervals"]
    assert at24[PAIRED_INTERVAL]["coverage"] >= 0.93, at24


def test_sweep_names_the_interval_of_every_row_and_gain_uses_the_jackknife():
    from probes.scores import PAIRED_INTERVAL
    opts = ProbeOptions(folds=4, inner_folds=2, Cs=(0.1, 1.0))
    ds = design_planted(400, 1.0, seed=2)
    table, res = probe_sweep(ds, opts, resamples=200)
    t = table.set_index("metric")
    assert t.loc["gain", "interval"] == t.loc["selectivity", "interval"] == PAIRED_INTERVAL
    assert t.loc["accuracy", "interval"] == "percentile" and t.loc["majority_baseline", "interval"] == "none"
    hit = (res["blocks.0.resid_post"].prob >= 0.5) == (ds.y == 1)
    from probes.sweep import control_task
    from probes.logistic import fit_sites as fit
    y_c = control_task(ds, opts.seed)
    k_hit = (fit([ds.features["blocks.0.resid_post"]], y_c, ds.groups, opts)[0].prob >= 0.5) == (y_c == 1)
    want = paired_drop_ci(hit, k_hit, ds.groups, interval="jackknife-t")
    assert (t.loc["selectivity", "ci_low"], t.loc["selectivity", "ci_high"]) == pytest.approx((want.ci_low,
                                                                                               want.ci_high))


def test_jackknife_paired_interval_is_the_t_interval_of_scenario_means_with_equal_scenarios():
    """With equal rows per scenario the jackknife SE of a mean difference is the SE of the scenario means'
    differences, so the interval is the textbook paired t interval on k - 1 degrees of freedom."""
    from scipy import stats
    rng = np.random.default_rng(11)
    g = np.repeat(np.arange(12), 30)
    a, b = rng.random(len(g)) < 0.8, rng.random(len(g)) < 0.7
    est = paired_drop_ci(a, b, g, interval="jackknife-t")
    d = np.array([a[g == s].mean() - b[g == s].mean() for s in range(12)])
    half = stats.t.ppf(0.975, 11) * d.std(ddof=1) / np.sqrt(12)
    assert (est.ci_low, est.ci_high) == pytest.approx((d.mean() - half, d.mean() + half))
    with pytest.raises(ValueError, match="interval"):
        paired_drop_ci(a, b, g, interval="bca")


@pytest.mark.parametrize("solver", ["sklearn", "torch"])
def test_out_of_fold_prediction_reproduces_the_out_of_fold_probabilities(solver):
    X, y, groups = planted(400, 6, 1.0, seed=9)
    r = fit_sites([X], y, groups, ProbeOptions(folds=4, inner_folds=2, Cs=(0.1, 1.0), solver=solver))[0]
    assert np.abs(r.predict_out_of_fold(X) - r.prob).max() < 1e-9
    with pytest.raises(ValueError, match="same 400 rows"):
        r.predict_out_of_fold(X[:10])


def planted_names(k: int = 30, m: int = 10, d: int = 1500, margin: float = 2.0, seed: int = 0):
    """Items whose label is carried by one name-linked direction of d >> n activations; the ablation removes it
    and keeps most of each item's own activation noise (correlation 0.9). True transfer accuracy: 0.5."""
    rng = np.random.default_rng(seed)
    n = k * m
    y = rng.integers(0, 2, n)
    u = rng.normal(size=d)
    u /= np.linalg.norm(u)
    noise = rng.normal(size=(n, d))
    ablated = 0.9 * noise + math.sqrt(1 - 0.81) * rng.normal(size=(n, d))
    return noise + np.outer(2 * y - 1, u) * margin, ablated, y, np.repeat(np.arange(k), m)


def test_name_ablation_transfer_is_out_of_fold_and_recovers_a_planted_drop():
    """With d >> n a probe fitted on all rows memorises each item's own activation noise; applied to the same
    items' ablated activations it still scores ~100% although no label information is left (true transfer
    accuracy 0.5): the in-sample transfer turns a ~40 pp drop into a gain. The table's out-of-fold transfer
    (each fold's probe on its own held-out rows) finds the drop."""
    from probes.ablation import ablation_table
    Xo, Xa, y, g = planted_names()
    opts = ProbeOptions(folds=5, inner_folds=3, Cs=(0.001, 0.01, 0.1, 1.0), solver="sklearn")
    t = ablation_table(["blocks.0.resid_post"], [Xo], [Xa], y, y, g, opts, resamples=300).set_index("metric")
    orig = t.loc["original_accuracy", "value"]
    assert orig > 0.8
    assert t.loc["transfer_accuracy", "ci_low"] <= 0.5 <= t.loc["transfer_accuracy", "ci_high"]
    planted_drop = orig - 0.5
    assert t.loc["drop_transfer", "ci_low"] <= planted_drop <= t.loc["drop_transfer", "ci_high"]
    assert t.loc["drop_transfer", "interval"] == "jackknife-t" and (t["transfer"] == "out-of-fold").all()
    in_sample = fit_sites([Xo], y, g, opts, keep_full=True)[0].predict(Xa)
    assert ((in_sample >= 0.5) == (y == 1)).mean() > orig  # what the former in-sample transfer reported


def test_control_types_recur_across_scenario_folds_at_study_scale():
    """The dial study's items (12 held-out scenarios of the fair organism at degree 3, 1,824 matched items):
    with the types over what varies within a scenario every test row's type is in its training folds; with the
    contrast in the type (the former definition, one contrast per scenario) only 58% are."""
    from organism import FAIR
    from organism.calibration import calibration_items
    from probes.design import input_types, types_seen
    items = calibration_items(FAIR, 12, degree=3, seed=0)
    assert len(items) == 1824
    folds = grouped_folds(items["scenario_id"].to_numpy(object), 5, 0)
    types = input_types(items)
    assert types_seen(types, folds) >= 0.9
    with_contrast = np.array([f"{c}|{t}" for c, t in zip(items["contrast_id"], types)], object)
    assert len(set(with_contrast)) == 1216 and types_seen(with_contrast, folds) < 0.6


def test_sweep_reports_the_share_of_seen_control_types_and_warns_when_they_do_not_recur():
    from probes.design import ControlTypesWarning
    opts = ProbeOptions(folds=4, inner_folds=2, Cs=(0.1, 1.0))
    ds = typed(12, 8, memorable=False)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", ControlTypesWarning)
        table, _ = probe_sweep(ds, opts, resamples=100)
    assert table.set_index("metric").loc["control_types_seen", "value"] == 1.0
    own = ProbeDataset(ds.features, ds.y, ds.groups, ds.meta, ds.label, design=ds.design,
                       types=np.array([f"s{g}|{t}" for g, t in zip(ds.groups, ds.types)], object))
    with pytest.warns(ControlTypesWarning, match="0.0% of rows"):
        table, _ = probe_sweep(own, opts, resamples=100)
    assert table.set_index("metric").loc["control_types_seen", "value"] == 0.0
