"""Probe datasets and sweeps read one site at a time from the cache, with the results of loading every site;
the probes run on CUDA when torch sees one, with a budget from the device's free memory.

The constructed failing cases: the loader before (every site read into the dataset at once) holds as many
site matrices as there are sites, and its peak grows with them; ``auto`` on a machine with a GPU picked
scikit-learn at 3,840 dims (the device defaulted to the CPU) and a 4 GiB budget that counted the host-side
outputs."""
from __future__ import annotations

import sys
import tracemalloc
import weakref
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evenhand.running.activations import ActivationCache
from probes import options as probe_options
from probes.dataset import build_dataset, labels
from probes.features import SiteFeatures, SiteSequence, site_sequence, widths
from probes.logistic import ProbeOptions, fit_sites, resolved_solver
from probes.logistic import time_solver
from probes.solver import compute_dtype, memory_plan
from probes.sweep import probe_sweep

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_probe_streaming import site_names, write_synthetic_cache  # noqa: E402


@pytest.fixture(scope="module")
def responses(smoke_items):
    """180 smoke items (18 scenarios) with a random answer each."""
    items = pd.DataFrame(smoke_items)
    items = items[items["scenario_id"].isin(sorted(set(items["scenario_id"]))[:18])].reset_index(drop=True)
    rng = np.random.default_rng(4)
    return items.assign(choice=np.where(rng.random(len(items)) < 0.5, "A", "B"))


@pytest.fixture(scope="module")
def cache(responses, tmp_path_factory):
    """Eight sites of 48 dims over the responses' items, bfloat16 shards of 16 items, a planted direction."""
    signal = labels(responses, "favours_minority")[0]
    return write_synthetic_cache(tmp_path_factory.mktemp("cache") / "c", responses["item_id"].tolist(), site_names(8),
                                 48, "bfloat16", 16, seed=1, signal=signal)


class Alive:
    """Counts the site matrices :meth:`ActivationCache.load` returned that are still alive, and the most at once."""

    def __init__(self, cache, monkeypatch):
        self.now = self.most = self.loads = 0
        real = cache.load

        def load(site, item_ids=None):
            ids, mat = real(site, item_ids)
            self.now += 1
            self.loads += 1
            self.most = max(self.most, self.now)
            weakref.finalize(mat, self._gone)
            return ids, mat
        monkeypatch.setattr(cache, "load", load)

    def _gone(self):
        self.now -= 1


@pytest.fixture(scope="module")
def wide_cache(responses, tmp_path_factory):
    """The same items at 1,024 dims (a site matrix of 1.1 MB, above the fits' own bookkeeping)."""
    signal = labels(responses, "favours_minority")[0]
    return write_synthetic_cache(tmp_path_factory.mktemp("wide") / "c", responses["item_id"].tolist(), site_names(8),
                                 1024, "bfloat16", 64, seed=2, signal=signal)


pytestmark = pytest.mark.filterwarnings("ignore::probes.design.ControlTypesWarning")  # few scenarios: beside the point
OPTS = ProbeOptions(solver="torch", device="cpu", folds=3, inner_folds=2, Cs=(0.1, 1.0))


@pytest.mark.parametrize("opts", [OPTS, replace(OPTS, solver="sklearn")], ids=["torch", "sklearn"])
def test_a_sweep_holds_one_site_matrix_at_a_time(responses, cache, opts, monkeypatch):
    alive = Alive(cache, monkeypatch)
    ds = build_dataset(responses, cache, "favours_minority")
    assert alive.loads == 0                          # building the dataset reads no site
    probe_sweep(ds, opts, resamples=20)
    assert alive.most == 1, alive.most
    assert alive.loads == 3 * 8                      # the probes, design + activations, the control: once each
    # the loader before: every site read into the dataset at once
    before = Alive(cache, monkeypatch)
    ids = ds.meta["item_id"].tolist()
    eager = {s: cache.load(s, ids)[1] for s in ds.sites}
    assert before.most == 8
    del eager


def peak_traced(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_peak_memory_does_not_grow_with_the_number_of_sites(responses, wide_cache):
    """Building the dataset and fitting every site (torch solver, one site a group): the peak with 8 sites is
    within a third of a site matrix of the peak with 2; the loader before grows by about 6 matrices."""
    cache = wide_cache
    ids = responses["item_id"].tolist()
    one = len(ids) * 1024 * 4
    opts = replace(OPTS, memory_budget=1, Cs=(1.0,))  # one site a group: the solver's own share is one site too

    def streamed(n):
        def run():
            ds = build_dataset(responses, cache, "favours_minority", site_names(n))
            fit_sites(site_sequence(ds.features, ds.sites), ds.y, ds.groups, opts)
        return run

    def old(n):
        def run():
            ds = build_dataset(responses, cache, "favours_minority", site_names(n))
            feats = {s: cache.load(s, ds.meta["item_id"].tolist())[1] for s in ds.sites}
            fit_sites([feats[s] for s in ds.sites], ds.y, ds.groups, opts)
        return run
    streamed(1)()                                      # imports and first kernels outside the measurement
    new2, new8 = peak_traced(streamed(2)), peak_traced(streamed(8))
    old2, old8 = peak_traced(old(2)), peak_traced(old(8))
    assert new8 - new2 < one / 3, (new2, new8, one)
    assert old8 - old2 > 5 * one, (old2, old8, one)


@pytest.mark.parametrize("solver,budget", [("torch", 1), ("torch", None), ("sklearn", None)])
def test_the_streamed_sweep_equals_the_sweep_on_every_site_loaded(responses, cache, solver, budget):
    """The same table, value for value, as the sweep on a dataset holding every site (as build_dataset did)."""
    opts = replace(OPTS, solver=solver, memory_budget=budget)
    ds = build_dataset(responses, cache, "favours_minority")
    assert isinstance(ds.features, SiteFeatures)
    eager = replace(ds, features={s: cache.load(s, ds.meta["item_id"].tolist())[1] for s in ds.sites})
    got, res = probe_sweep(ds, opts, resamples=50)
    want, res_want = probe_sweep(eager, opts, resamples=50)
    pd.testing.assert_frame_equal(got, want)
    for s in ds.sites:
        assert np.array_equal(res[s].prob, res_want[s].prob)
    assert got[got["metric"] == "accuracy"]["value"].max() > 0.65      # the planted direction is found


def test_site_features_read_on_demand_and_keep_the_last():
    class Counting:
        manifest = {"d_model": 3}

        def __init__(self):
            self.reads = []

        def load(self, site, ids):
            self.reads.append(site)
            return ids, np.full((len(ids), 3), float(len(self.reads)), np.float32)
    c = Counting()
    f = SiteFeatures(c, ["a", "b"], ["s1", "s2"])
    assert list(f) == ["s1", "s2"] and len(f) == 2 and f.width("s1") == 3 and c.reads == []
    x = f["s1"]
    assert f["s1"] is x and c.reads == ["s1"]
    f["s2"]
    f["s1"]
    assert c.reads == ["s1", "s2", "s1"]
    with pytest.raises(KeyError):
        f["nope"]
    seq = site_sequence(f, ["s2", "s1"], lambda X: X * 2, 1)
    assert widths(seq) == [4, 4] and len(seq) == 2 and seq[-1].shape == (2, 3)
    with pytest.raises(IndexError):
        seq[2]
    assert widths([np.zeros((2, 5))]) == [5] and len(SiteSequence(lambda i: None, 3)[0:2]) == 2


def test_the_cache_reader_fills_one_matrix_in_the_asked_order(cache, responses):
    ids = responses["item_id"].tolist()
    _, whole = cache.load("embed")
    order = ids[::-1][:37] + ids[5:9]
    got_ids, part = cache.load("embed", order)
    pos = {k: i for i, k in enumerate(ids)}
    assert got_ids == order and np.array_equal(part, whole[[pos[k] for k in order]]) and part.dtype == np.float32
    with pytest.raises(KeyError, match="not in the cache"):
        cache.load("embed", ["missing"])


@pytest.fixture
def gpu(monkeypatch):
    """A machine where torch sees a CUDA device with 100 GiB free (nothing runs on it here)."""
    monkeypatch.setattr(probe_options, "cuda_available", lambda: True)
    monkeypatch.setattr(probe_options, "device_free_bytes", lambda device: 100 << 30)


def test_auto_runs_the_torch_solver_on_cuda_with_a_budget_from_free_memory(gpu, monkeypatch):
    opts = ProbeOptions()
    assert probe_options.probe_device(opts) == "cuda"
    assert resolved_solver(opts, 3840) == "torch"                      # not scikit-learn's nested CV at 3,840 dims
    assert compute_dtype(opts) == "float32"
    assert probe_options.memory_budget(opts) == int(0.8 * (100 << 30))
    assert probe_options.memory_budget(replace(opts, memory_budget=123)) == 123
    assert probe_options.probe_device(replace(opts, device="cpu")) == "cpu"
    assert resolved_solver(replace(opts, device="cpu"), 3840) == "sklearn"
    called = []
    from probes import logistic
    monkeypatch.setattr(logistic, "fit_torch", lambda *a, **k: called.append("torch") or [])
    monkeypatch.setattr(logistic, "fit_sklearn", lambda *a, **k: called.append("sklearn"))
    fit_sites(SiteSequence(lambda i: np.zeros((4, 3840)), 2, [3840, 3840]), np.zeros(4), np.zeros(4), opts)
    assert called == ["torch"]
    # FairStress at 50k rows: the device budget takes many sites a group; the CPU's 4 GiB took one
    P = 20
    cuda = memory_plan(49, 50_000, 3840, P, 5, "float32", False, probe_options.memory_budget(opts), "cuda")
    cpu = memory_plan(49, 50_000, 3840, P, 5, "float32", False, 4 << 30, "cpu")
    assert cuda.sites_per_group >= 10 and cuda.device == "cuda" and cuda.expected_peak_bytes <= cuda.budget_bytes
    assert cpu.sites_per_group <= 3


def test_without_cuda_nothing_changes(monkeypatch):
    monkeypatch.setattr(probe_options, "cuda_available", lambda: False)
    opts = ProbeOptions()
    assert probe_options.probe_device(opts) == "cpu" and compute_dtype(opts) == "float64"
    assert resolved_solver(opts, 3840) == "sklearn" and resolved_solver(opts, 64) == "torch"
    assert probe_options.memory_budget(opts) == 4 << 30
    with pytest.raises(ValueError, match="memory_budget"):
        ProbeOptions(memory_budget=-1)


def test_time_solver_reports_time_and_peak(monkeypatch):
    monkeypatch.setattr(probe_options, "cuda_available", lambda: False)
    out = time_solver(sites=3, dim=12, rows=240, device="auto", opts=ProbeOptions(folds=3, inner_folds=2, Cs=(1.0,)))
    assert out["device"] == "cpu" and out["seconds"] > 0 and out["peak_bytes"] > 0 and not out["peak_measured"]
    assert out["solver"]["converged"] and (out["sites"], out["dim"], out["rows"]) == (3, 12, 240)
