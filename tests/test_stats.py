"""Properties of evenhand.inference.stats: the cluster bootstrap, percentile intervals and paired differences."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evenhand.inference.stats import (Estimate, bootstrap_estimate, cluster_sums, paired_difference,
                                      percentile_interval, resample_weights, row_weights)
from probes.scores import accuracy_ci, paired_drop_ci

# group labels of 1-40 rows over 1-8 clusters
groups_st = st.lists(st.integers(0, 7), min_size=1, max_size=40).map(lambda g: np.array([f"s{x}" for x in g]))


def weighted_mean(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    return (weights @ values) / weights.sum(1)


def test_resampling_scheme_is_pinned() -> None:
    """The draws are numpy's multinomial(k, 1/k) from default_rng(seed): changing them changes every quoted CI."""
    assert resample_weights(4, 3, 0).astype(int).tolist() == [[1, 0, 0, 3], [0, 2, 2, 0], [1, 1, 1, 1]]
    assert resample_weights(3, 2, [7, 11]).astype(int).tolist() == [[0, 1, 2], [1, 1, 1]]
    rng = np.random.default_rng(5)
    same = np.random.default_rng(5).multinomial(6, np.full(6, 1 / 6), size=4)
    assert np.array_equal(resample_weights(6, 4, rng), same)


@settings(max_examples=60, deadline=None)
@given(k=st.integers(1, 30), resamples=st.integers(0, 50), seed=st.integers(0, 2**32 - 1))
def test_each_resample_draws_every_cluster_slot_once(k: int, resamples: int, seed: int) -> None:
    w = resample_weights(k, resamples, seed)
    assert w.shape == (resamples, k) and w.dtype == np.float64
    assert (w >= 0).all() and (w.sum(1) == k).all()
    assert np.array_equal(w, resample_weights(k, resamples, seed))


@settings(max_examples=60, deadline=None)
@given(groups=groups_st, seed=st.integers(0, 1000))
def test_rows_of_one_cluster_share_their_weight(groups: np.ndarray, seed: int) -> None:
    w = row_weights(groups, 25, seed)
    for g in np.unique(groups):
        cols = w[:, groups == g]
        assert (cols == cols[:, :1]).all()
    # each draw resamples as many clusters as there are
    uniq = np.unique(groups)
    per_cluster = np.stack([w[:, groups == g][:, 0] for g in uniq], axis=1)
    assert (per_cluster.sum(1) == len(uniq)).all()


@settings(max_examples=60, deadline=None)
@given(groups=groups_st, c=st.sampled_from([0.0, 0.125, 0.5, 0.75, 1.0, 3.0]), seed=st.integers(0, 1000))
def test_bootstrap_ci_of_a_constant_is_that_constant(groups: np.ndarray, c: float, seed: int) -> None:
    values = np.full(len(groups), c)
    est = bootstrap_estimate(float(values.mean()), weighted_mean(values, row_weights(groups, 200, seed)), len(values))
    assert est.value == est.ci_low == est.ci_high == c and est.note is None
    if c in (0.0, 1.0):
        e = accuracy_ci(values.astype(bool), groups, 200, seed)
        assert e.value == e.ci_low == e.ci_high == c and e.clusters == len(np.unique(groups))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_clustering_widens_the_ci_when_clusters_are_correlated(seed: int) -> None:
    """30 clusters of 10 identical rows: the cluster CI is about sqrt(10) times the iid one."""
    rng = np.random.default_rng(seed)
    cluster_value = rng.permutation(np.repeat([0.0, 1.0], 15))
    values = np.repeat(cluster_value, 10)
    groups = np.repeat(np.arange(30), 10)
    clustered = accuracy_ci(values, groups, 1000, seed)
    iid = accuracy_ci(values, np.arange(len(values)), 1000, seed)
    assert clustered.value == iid.value == 0.5
    width_c, width_i = clustered.ci_high - clustered.ci_low, iid.ci_high - iid.ci_low
    assert width_c > 2 * width_i, (width_c, width_i)
    assert clustered.ci_low < 0.5 < clustered.ci_high


@settings(max_examples=60, deadline=None)
@given(groups=groups_st, seed=st.integers(0, 1000), data=st.data())
def test_paired_difference_of_identical_arms_is_exactly_zero(groups: np.ndarray, seed: int, data) -> None:
    values = np.array(data.draw(st.lists(st.floats(0, 1), min_size=len(groups), max_size=len(groups))))
    w = row_weights(groups, 100, seed)

    def arm(weights):
        return weighted_mean(values, weights)
    est = paired_difference(arm, arm, w, len(values))
    assert (est.value, est.ci_low, est.ci_high, est.note) == (0.0, 0.0, 0.0, None)
    correct = values > 0.5
    drop = paired_drop_ci(correct, correct, groups, 100, seed)
    if len(np.unique(groups)) < 2:  # the probes' paired interval (jackknife-t) needs two scenarios
        assert drop.value == 0.0 and np.isnan(drop.ci_low) and np.isnan(drop.ci_high)
    else:
        assert (drop.value, drop.ci_low, drop.ci_high) == (0.0, 0.0, 0.0)


def test_pairing_cancels_what_the_arms_share() -> None:
    """Two arms that share a large cluster effect: the paired CI of their difference is far
    narrower than an interval from independent resamples of each arm."""
    rng = np.random.default_rng(0)
    k = 40
    groups = np.repeat(np.arange(k), 5)
    shared = np.repeat(rng.normal(0, 1, k), 5)
    a = shared + 0.1 + rng.normal(0, 0.05, len(groups))
    b = shared + rng.normal(0, 0.05, len(groups))
    w = row_weights(groups, 500, 0)
    paired = paired_difference(lambda x: weighted_mean(a, x), lambda x: weighted_mean(b, x), w, len(a))
    unpaired = weighted_mean(a, w) - weighted_mean(b, row_weights(groups, 500, 1))
    lo, hi = percentile_interval(unpaired)
    assert paired.ci_low < 0.1 < paired.ci_high
    assert (paired.ci_high - paired.ci_low) * 5 < hi - lo


def test_undefined_draws_are_left_out_and_counted() -> None:
    draws = np.array([np.nan, 1.0, 2.0, 3.0, np.nan, np.inf])
    assert percentile_interval(draws) == percentile_interval(np.array([1.0, 2.0, 3.0]))
    est = bootstrap_estimate(2.0, draws, 7)
    assert est.note == "CI from the 3 of 6 resamples that define it" and est.ci_low < est.ci_high
    none = bootstrap_estimate(2.0, np.full(4, np.nan), 7, what="the difference")
    assert (none.value, none.ci_low, none.ci_high) == (2.0, None, None)
    assert none.note == "no bootstrap resample defined the difference"
    assert percentile_interval(np.array([])) is None


def test_an_undefined_arm_leaves_the_difference_undefined() -> None:
    w = resample_weights(3, 10, 0)
    est = paired_difference(lambda x: np.full(len(x), np.nan), lambda x: x.sum(1), w, 9)
    assert est == Estimate(None, None, None, 9, "insufficient data in one of the runs")


@settings(max_examples=40, deadline=None)
@given(groups=groups_st, seed=st.integers(0, 1000), data=st.data())
def test_interval_ignores_row_order(groups: np.ndarray, seed: int, data) -> None:
    """Clusters, not rows, are resampled: shuffling the rows leaves a 0/1 accuracy CI unchanged."""
    correct = np.array(data.draw(st.lists(st.booleans(), min_size=len(groups), max_size=len(groups))))
    perm = np.random.default_rng(seed).permutation(len(groups))
    a = accuracy_ci(correct, groups, 100, seed)
    b = accuracy_ci(correct[perm], groups[perm], 100, seed)
    assert a == b


def test_cluster_sums_and_estimate_fields() -> None:
    sums = cluster_sums(np.array([0, 2, 0, 1]), np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]), 4)
    assert sums.tolist() == [[6.0, 8.0], [7.0, 8.0], [3.0, 4.0], [0.0, 0.0]]
    e = Estimate(0.5, 0.25, 0.75, 10, clusters=3)
    assert e.as_dict() == {"value": 0.5, "ci_low": 0.25, "ci_high": 0.75, "n": 10, "note": None}
    assert e.as_dict("value", "clusters") == {"value": 0.5, "clusters": 3}


def test_rate_interval_is_wilsons() -> None:
    from evenhand.inference.stats import rate_interval
    lo, hi = rate_interval(0, 40)
    assert lo == 0.0 and hi == pytest.approx(0.0876, abs=5e-4)  # not the Wald interval's [0, 0]
    lo, hi = rate_interval(2, 40)
    assert (lo, hi) == (pytest.approx(0.0138, abs=5e-4), pytest.approx(0.1650, abs=5e-4))
    assert rate_interval(40, 40)[1] == 1.0 and rate_interval(0, 0) is None
    with pytest.raises(ValueError, match="k=5, n=4"):
        rate_interval(5, 4)
