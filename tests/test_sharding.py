"""Sharding keeps a scenario's items together and the shards balanced; the prefix-share measure is a trie count."""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

from evenhand.running.shards import balanced_shards, scattered_units, shard_units

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_sharding import item_hash_shards, prefix_share, trie_nodes  # noqa: E402


@pytest.mark.parametrize("n_shards", [1, 8, 32])
def test_suite_items_are_sharded_by_whole_scenarios_and_balanced(smoke_items, n_shards):
    units = shard_units(smoke_items)
    shards = balanced_shards(units, n_shards)
    assert not scattered_units(units, shards)
    assert set(shards) <= set(range(n_shards))
    sizes = pd.Series(shards).value_counts()
    largest_unit = pd.Series(units).value_counts().max()
    # greedy largest-first: no shard exceeds the mean by more than one unit
    assert sizes.max() <= len(shards) / n_shards + largest_unit
    # the baseline unit (scenario x contrast type) is kept whole too
    b_units = shard_units(smoke_items, "baseline")
    assert not scattered_units(b_units, balanced_shards(b_units, n_shards))


def test_item_hash_sharding_scatters_scenarios(smoke_items):
    """The check above fails on the Ray backend's sharding before: a hash of the item id."""
    units = shard_units(smoke_items)
    assert scattered_units(units, item_hash_shards(list(smoke_items["item_id"]), 8))
    assert not scattered_units(units, item_hash_shards(list(smoke_items["item_id"]), 1))


def test_the_shard_of_an_item_does_not_depend_on_the_order_of_the_items(smoke_items):
    shuffled = smoke_items.sample(frac=1.0, random_state=3)
    a = dict(zip(smoke_items["item_id"], balanced_shards(shard_units(smoke_items), 8)))
    b = dict(zip(shuffled["item_id"], balanced_shards(shard_units(shuffled), 8)))
    assert a == b


def test_balance_is_largest_first_to_the_least_loaded_shard():
    units = ["a"] * 5 + ["b"] * 4 + ["c"] * 3 + ["d"] * 3
    assert balanced_shards(units, 2) == [0] * 5 + [1] * 4 + [1] * 3 + [0] * 3
    with pytest.raises(ValueError, match="at least 1"):
        balanced_shards(units, 0)


def test_units_fall_back_when_the_items_have_no_scenario():
    items = pd.DataFrame({"item_id": ["x1", "x2", "y1"], "baseline_id": ["x", "x", "y"]})
    assert shard_units(items) == [("x",), ("x",), ("y",)]
    assert shard_units(items.drop(columns="baseline_id")) == [("x1",), ("x2",), ("y1",)]
    with pytest.raises(ValueError, match="shard unit"):
        shard_units(items, "cell")


def test_prefix_share_counts_the_nodes_of_each_shards_token_trie():
    prompts = [[1, 2, 3], [1, 2, 4], [1, 5], [7]]

    def trie(ps):  # an explicit trie, for reference
        root, n = {}, 0
        for p in ps:
            node = root
            for t in p:
                if t not in node:
                    node[t], n = {}, n + 1
                node = node[t]
        return n

    assert trie_nodes(prompts) == trie(prompts) == 6
    assert prefix_share(prompts, [0, 0, 0, 0]) == pytest.approx(6 / 9)
    assert prefix_share(prompts, [0, 1, 0, 1]) == pytest.approx((4 + 4) / 9)
    assert prefix_share(prompts, [0, 1, 2, 3]) == 1.0
