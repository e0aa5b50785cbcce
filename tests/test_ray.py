"""The Ray backend: two local workers, one killed mid-run; the merged table equals a local run's."""
from __future__ import annotations

import json
import os
import signal

import numpy as np
import pandas as pd
import pytest

ray = pytest.importorskip("ray")


def test_ray_run_equals_local_run_with_a_worker_killed(tmp_path):
    """Four scenarios in four shards over two workers: the worker killed after the first shard is done
    still has a shard to decide, so Ray retries it; the decisions and the cache (made on the workers)
    equal a local run's."""
    from experiments.studies.run.config import CacheConfig, RunConfig, SuiteConfig
    from experiments.studies.run.ray import run_config_ray, shard_of
    from experiments.studies.run.local import run_config
    from evenhand.running.activations import ActivationCache
    from evenhand.models.loading import ModelSpec
    from organism import COMMITTED, heldout_items
    from evenhand.runs.rundir import write_table_atomic
    from evenhand.running.shards import ParquetShards, scattered_units, shard_units

    record = json.loads((COMMITTED / "organism.json").read_text())
    items = heldout_items(record, 4, degrees=[3])
    assert items["scenario_id"].nunique() == 4
    write_table_atomic(tmp_path / "items.parquet", items)
    base = dict(model=ModelSpec("evenhand-organism"), suite=SuiteConfig(subset=str(tmp_path / "items.parquet")),
                batch_size=16, resamples=100,
                cache=CacheConfig(enabled=True, sites=("embed", "blocks.1.resid_post"), dtype="float32"))
    local, _ = run_config(RunConfig(output_dir=str(tmp_path / "local"), **base), progress=False)
    killed = []

    def kill_once(done, actors):
        if not killed:
            pid = ray.get(actors[0].pid.remote())
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    run, report = run_config_ray(RunConfig(output_dir=str(tmp_path / "ray"), **base), workers=2, shards_per_worker=2,
                                 progress=False, _delay=0.5, _on_progress=kill_once)
    assert killed, "no worker was killed"
    a = pd.read_parquet(tmp_path / "local" / "responses.parquet")
    b = pd.read_parquet(tmp_path / "ray" / "responses.parquet")
    cols = ["item_id", "choice", "text", "parse_method"]
    pd.testing.assert_frame_equal(a[cols], b[cols])
    # nothing duplicated, nothing lost: every item written exactly once over the shard directories
    parts = [ParquetShards(p / "decisions").read_all()
             for p in sorted((tmp_path / "ray" / "decisions").glob("ray-*"))]
    written = pd.concat(parts)["item_id"]
    assert len(written) == len(items) and written.is_unique
    # one scenario per shard: no scenario's items were scattered
    shards = sorted((tmp_path / "ray" / "decisions").glob("ray-*"))
    assert len(shards) == 4
    for p in shards:
        assert ParquetShards(p / "decisions").read_all()["item_id"].map(
            items.set_index("item_id")["scenario_id"]).nunique() == 1
    assert not scattered_units(shard_units(items), shard_of(items, 4))
    # the cache was made on the workers, shard by shard, and gathered into one cache equal to the local one
    local_cache, ray_cache = ActivationCache(tmp_path / "local" / "activations"), ActivationCache(run.activations)
    assert not list(run.activations.glob("ray-*")) and (run.activations / "index.json").exists()
    assert sorted(ray_cache.item_ids()) == sorted(items["item_id"])
    for site in local_cache.sites:
        ids, a_acts = local_cache.load(site)
        _, b_acts = ray_cache.load(site, ids)
        np.testing.assert_allclose(a_acts, b_acts, rtol=0, atol=1e-5)
    man = json.loads((tmp_path / "ray" / "manifest.json").read_text())
    assert man["status"] == "done" and man["backend"]["workers"] == 2
    local_man = json.loads((tmp_path / "local" / "manifest.json").read_text())
    assert man["model"]["weights"] == local_man["model"]["weights"] is not None  # the same weight fingerprint
    assert report["overall"]["accuracy"]["value"] == pytest.approx(
        json.loads((tmp_path / "local" / "metrics.json").read_text())["overall"]["accuracy"]["value"])


def test_sweep_on_ray_gives_the_local_sweep_table(tmp_path):
    """A sweep's run cells are sharded over the Ray workers the same way; the table equals the local one."""
    from experiments.studies.sweep import run_sweep

    def config(where):
        return {"model": "evenhand-organism", "output_dir": str(tmp_path / where),
                "suite": {"subset": "organism_heldout", "degrees": [3], "limit": 64},
                "batch_size": 16, "resamples": 40, "sweep": {"mode": ["answer", "logprob"]}}

    _, local = run_sweep(config("local"), progress=False)
    _, on_ray = run_sweep(config("ray"), backend="ray", progress=False,
                          ray_options={"workers": 2, "gpus_per_worker": 0.0})
    pd.testing.assert_frame_equal(local, on_ray)
    man = json.loads((tmp_path / "ray" / "cells" / "mode=logprob" / "manifest.json").read_text())
    assert man["backend"]["name"] == "ray" and man["status"] == "done"
