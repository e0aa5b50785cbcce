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


def test_no_signal_gives_chance_and_a_shuffled_control_removes_signal():
    X, y, groups = planted(800, 8, 0.0, seed=1)
    res = fit_torch([X], y, groups)[0]
    est = accuracy_ci((res.prob >= 0.5) == (y == 1), groups)
    assert est.ci_low <= 0.5 <= est.ci_high
    X, y, groups = planted(800, 8, 1.5, seed=2)
    ds = ProbeDataset({"blocks.0.resid_post": X}, y, groups, pd.DataFrame({"item_id": range(len(y))}), "x")
    table, _ = probe_sweep(ds, ProbeOptions(folds=4, inner_folds=2, Cs=(0.1, 1.0)), resamples=300)
    t = table.set_index("metric")["value"]
    assert t["accuracy"] > 0.85 and abs(t["control_accuracy"] - 0.5) < 0.08
    assert t["selectivity"] == pytest.approx(t["accuracy"] - t["control_accuracy"])


@pytest.mark.parametrize("newton_max_dim,products_budget", [(128, None), (128, 1), (2, None)],
                         ids=["newton-cached-products", "newton-chunked-products", "truncated-newton"])
def test_torch_engine_matches_sklearn_on_every_site(newton_max_dim, products_budget, monkeypatch):
    """Every path of the torch engine (Newton with the rows' outer products cached, or rebuilt per
    step and site by site when they exceed the budget; truncated Newton) against scikit-learn."""
    import probes.solver as solver
    if products_budget is not None:
        monkeypatch.setattr(solver, "PRODUCTS_BUDGET", products_budget)
    rng = np.random.default_rng(3)
    Xs, ys = [], None
    X0, y, groups = planted(600, 24, 0.0, seed=3)
    for m in (0.0, 0.4, 1.0, 2.0):
        u = rng.normal(size=24)
        Xs.append(X0 + np.outer(2 * y - 1, u / np.linalg.norm(u)) * m)
    opts = ProbeOptions(folds=4, inner_folds=3, engine="torch", newton_max_dim=newton_max_dim)
    a = fit_sites(Xs, y, groups, ProbeOptions(**{**opts.__dict__, "engine": "sklearn"}))
    b = fit_sites(Xs, y, groups, opts)
    for ra, rb in zip(a, b):
        acc_a = ((ra.prob >= 0.5) == y).mean()
        acc_b = ((rb.prob >= 0.5) == y).mean()
        assert abs(acc_a - acc_b) <= 0.01
        assert ra.chosen_C == rb.chosen_C
        assert np.abs(ra.prob - rb.prob).max() < 1e-3


def test_auto_engine_follows_the_measured_rule():
    from probes.logistic import resolved_engine
    assert resolved_engine(ProbeOptions(device="cuda")) == "torch"
    assert resolved_engine(ProbeOptions(), dim=64) == "torch"
    assert resolved_engine(ProbeOptions(), dim=256) == "sklearn"
    assert resolved_engine(ProbeOptions(engine="sklearn"), dim=8) == "sklearn"


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
    with pytest.raises(ValueError, match="engine"):
        ProbeOptions(engine="jax")


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
        "choice": ["A", "B", "A", None], "minority_slot": ["A", "A", "B", "A"],
        "question_polarity": ["positive", "positive", "negative", "positive"],
        "condition": ["GT", "AMB", "GT", "GT"], "correct_slot": ["A", None, "B", "A"],
        "pressure_slot": ["B", None, "A", "A"], "excluded": [False] * 4})
    y, ok = labels(df, "favours_minority")
    assert list(ok) == [True, True, True, False] and list(y[:3]) == [1, 0, 1]  # negative question: A favours B
    y, ok = labels(df, "correct")
    assert list(ok) == [True, False, True, False] and y[0] == 1 and y[2] == 0
    y, ok = labels(df, "pressure_followed")
    assert list(ok) == [True, False, True, False] and list(y[[0, 2]]) == [0, 1]
    y, ok = labels(df, "slot_a_minority")
    assert ok.all() and list(y) == [1, 1, 0, 1]
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
