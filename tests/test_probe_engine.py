"""The torch probe engine at scale: float32 converges like float64 with the same answers, and the
features are held once while sites stream through the device within the stated memory budget."""
from __future__ import annotations

import tracemalloc
import warnings
import weakref
from dataclasses import replace

import numpy as np
import pytest
import torch

from probes import newton as kernels
from probes import solver
from probes.logistic import ProbeOptions, fit_sites, fit_torch, plan_fits
from probes.solver import memory_plan, torch_solve


def sites_data(sites: int, dim: int, rows: int, seed: int = 0):
    """float32 activations of ``sites`` sites, a planted direction per site of growing strength, and an
    offset the standardisation must remove; scenarios of 8 rows."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, rows)
    groups = np.repeat(np.arange(rows // 8 + 1), 8)[:rows]
    Xs = []
    for s in range(sites):
        u = rng.normal(size=dim)
        u /= np.linalg.norm(u)
        margin = 0.5 + 1.5 * s / max(1, sites - 1)
        Xs.append((rng.normal(size=(rows, dim)) + np.outer(2 * y - 1, u) * margin + 2.0).astype(np.float32))
    return Xs, y, groups


def solve_both(Xs, y, groups, opts: ProbeOptions):
    masks = [m for _, _, m in plan_fits(groups, opts)[1]]
    return (torch_solve(Xs, y, masks, opts.Cs, replace(opts, dtype="float64")),
            torch_solve(Xs, y, masks, opts.Cs, replace(opts, dtype="float32")))


@pytest.mark.parametrize("newton_max_dim,dim", [(128, 24), (2, 100)], ids=["newton", "truncated-newton"])
def test_float32_converges_in_about_float64s_steps_with_the_same_answers(newton_max_dim, dim):
    Xs, y, groups = sites_data(3, dim, 600)
    opts = ProbeOptions(solver="torch", folds=3, inner_folds=2, newton_max_dim=newton_max_dim)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)   # an unconverged problem warns: fail on it
        r64, r32 = solve_both(Xs, y, groups, opts)
    assert r64.converged and r32.converged and r32.unconverged == 0
    assert r32.plan.dtype == "float32" and r64.plan.dtype == "float64"
    assert r32.newton_steps <= 2 * r64.newton_steps
    assert r32.contractions <= 2 * r64.contractions
    dW = np.linalg.norm(r32.W - r64.W, axis=-1)
    assert (dW <= 0.01 * (1 + np.linalg.norm(r64.W, axis=-1))).all(), dW.max()
    p64, p32 = (1 / (1 + np.exp(-r.logits)) for r in (r64, r32))
    assert np.abs(p64 - p32).max() < 5e-3
    # through the cross-validation protocol, against scikit-learn on the same folds
    ref = fit_sites(Xs, y, groups, replace(opts, solver="sklearn"))
    got = fit_sites(Xs, y, groups, replace(opts, dtype="float32"))
    for a, b in zip(ref, got):
        assert b.solver["converged"] and b.solver["dtype"] == "float32"
        assert abs(((a.prob >= 0.5) == y).mean() - ((b.prob >= 0.5) == y).mean()) <= 0.01
        assert np.abs(a.prob - b.prob).max() < 5e-3


def test_float32_held_to_float64s_tolerance_runs_to_max_iter_and_says_so(monkeypatch):
    """The constructed failing case of the test above: the old settings (a relative gradient of 1e-8
    and float64's line-search and step floors) in float32 take every step to max_iter."""
    monkeypatch.setitem(solver.GRADIENT_FLOOR, "float32", 0.0)
    monkeypatch.setitem(kernels.STEP_FLOOR, "float32", kernels.STEP_FLOOR["float64"])
    monkeypatch.setitem(kernels.OBJECTIVE_SLACK, "float32", kernels.OBJECTIVE_SLACK["float64"])
    Xs, y, groups = sites_data(2, 100, 600)
    opts = ProbeOptions(solver="torch", folds=3, inner_folds=2, newton_max_dim=2, max_iter=15, Cs=(1.0, 10.0))
    with pytest.warns(RuntimeWarning, match="max_iter=15"):
        r64, r32 = solve_both(Xs, y, groups, opts)
    assert r64.converged
    assert not r32.converged and r32.unconverged > 0
    assert r32.contractions > 2 * r64.contractions


class TensorBytes:
    """Counts the bytes of live CPU tensor storage created by torch ops inside the block, and its peak
    (a ``TorchDispatchMode``: every op's outputs are registered by storage and released when the last
    tensor viewing the storage is freed)."""

    def __init__(self) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_leaves
        meter = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                for t in tree_leaves(out):
                    if isinstance(t, torch.Tensor) and t.device.type == "cpu":
                        meter.hold(t)
                return out

        self.mode = Mode()
        self.refs: dict[int, int] = {}
        self.sizes: dict[int, int] = {}
        self.live = self.peak = 0

    def hold(self, t) -> None:
        key = t.untyped_storage().data_ptr()
        if key == 0:
            return
        if key not in self.refs:
            self.refs[key] = 0
            self.sizes[key] = t.untyped_storage().nbytes()
            self.live += self.sizes[key]
            self.peak = max(self.peak, self.live)
        self.refs[key] += 1
        weakref.finalize(t, self.release, key)

    def release(self, key: int) -> None:
        self.refs[key] -= 1
        if self.refs[key] == 0:
            del self.refs[key]
            self.live -= self.sizes.pop(key)

    def __enter__(self):
        self.mode.__enter__()
        return self

    def __exit__(self, *exc):
        self.mode.__exit__(*exc)


def peak_bytes(fn) -> int:
    """An upper bound on the peak memory ``fn()`` allocates, from two calls: the peak of numpy's and
    Python's allocations (tracemalloc), plus the peak of torch's CPU tensor storage (:class:`TensorBytes`,
    measured apart so the meter's own bookkeeping is not counted)."""
    tracemalloc.start()
    try:
        fn()
        _, np_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    with TensorBytes():                   # the mode's first use imports a lot: not inside the measurement
        torch.as_tensor(np.ones(2, np.float32)).double() + 1
    with TensorBytes() as meter:
        fn()
    return np_peak + meter.peak


def test_the_meter_sees_a_full_copy():
    Xs, _, _ = sites_data(4, 50, 200)
    nbytes = sum(X.nbytes for X in Xs)

    def copy_numpy():
        return np.stack(Xs).astype(np.float64)

    def copy_torch():
        return torch.as_tensor(np.stack(Xs)).double() + 1

    assert peak_bytes(copy_numpy) >= 2 * nbytes
    assert peak_bytes(copy_torch) >= 2 * nbytes
    assert peak_bytes(lambda: None) < 0.1 * nbytes


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_features_are_held_once_and_streamed_within_the_stated_budget(dtype):
    """12 sites of float32 features (the 12B path: truncated Newton): with a budget of two sites a group,
    the engine's peak stays under the features' own size (so it never made a full copy, in any dtype),
    within the peak its plan states; with the default budget all sites share one group and the same
    measurement exceeds the bound (the constructed failing case)."""
    S, d, n = 12, 400, 480
    Xs, y, groups = sites_data(S, d, n)
    nbytes = sum(X.nbytes for X in Xs)
    opts = ProbeOptions(solver="torch", folds=3, inner_folds=2, Cs=(0.1, 1.0), newton_max_dim=2, dtype=dtype)
    P = len(plan_fits(groups, opts)[1])
    one = memory_plan(S, n, d, P, 2, dtype, False, 1)
    every = memory_plan(S, n, d, P, 2, dtype, False, 1 << 40)
    budget = one.expected_peak_bytes + (every.expected_peak_bytes - one.expected_peak_bytes) // (S - 1)  # two sites
    streamed = replace(opts, memory_budget=budget)
    plan = memory_plan(S, n, d, P, 2, dtype, False, budget)
    assert plan.sites_per_group == 2 and plan.groups == 6
    fit_torch(*sites_data(1, 4, 80), opts)            # lazy imports (scipy.special) outside the measurement
    got = {}
    peak = peak_bytes(lambda: got.setdefault("res", fit_torch(Xs, y, groups, streamed)))
    report = got["res"][0].solver
    assert report["sites_per_group"] == 2 and report["expected_peak_bytes"] == plan.expected_peak_bytes
    assert report["converged"]
    assert peak <= plan.expected_peak_bytes, (peak, plan)
    assert peak < nbytes, (peak, nbytes)
    # the same answers as one group of every site, which holds a full copy and fails the bound
    whole = {}
    peak_whole = peak_bytes(lambda: whole.setdefault("res", fit_torch(Xs, y, groups, opts)))
    assert whole["res"][0].solver["sites_per_group"] == S
    assert peak_whole >= nbytes
    for a, b in zip(got["res"], whole["res"]):
        assert np.abs(a.prob - b.prob).max() < 1e-6


def test_memory_plan_groups_by_budget_and_states_its_peak():
    small = memory_plan(49, 10_000, 3840, 21, 5, "float32", False, 4 << 30)
    assert 1 <= small.sites_per_group < 49 and small.groups == -(-49 // small.sites_per_group)
    assert small.expected_peak_bytes <= 4 << 30
    big = memory_plan(49, 10_000, 3840, 21, 5, "float32", False, 100 << 30)
    assert big.sites_per_group == 49 and big.groups == 1
    assert big.expected_peak_bytes > 49 * 10_000 * 3840 * 4                 # it holds every site's copy
    tiny = memory_plan(3, 1000, 500, 4, 2, "float64", False, 1)
    assert tiny.sites_per_group == 1 and tiny.expected_peak_bytes > tiny.budget_bytes   # one site never fits
    with pytest.raises(ValueError, match="memory_budget"):
        ProbeOptions(memory_budget=0)
    with pytest.raises(ValueError, match="dtype"):
        ProbeOptions(dtype="float16")


def test_sweep_manifest_records_the_engine_report(tmp_path):
    import json

    import pandas as pd

    from probes.dataset import ProbeDataset
    from probes.sweep import probe_sweep, write_sweep
    Xs, y, groups = sites_data(2, 6, 240)
    ds = ProbeDataset({f"blocks.{i}.resid_post": X for i, X in enumerate(Xs)}, y, groups,
                      pd.DataFrame({"item_id": range(len(y))}), "x")
    opts = ProbeOptions(solver="torch", folds=3, inner_folds=2, Cs=(1.0,))
    table, _ = probe_sweep(ds, opts, control=False, resamples=10)
    manifest = json.loads((write_sweep(table, tmp_path / "p", ds, opts) / "manifest.json").read_text())
    assert manifest["solver"]["converged"] and manifest["solver"]["dtype"] == "float64"
    assert manifest["solver"]["sites_per_group"] == 2 and manifest["solver"]["expected_peak_bytes"] > 0
    table, _ = probe_sweep(ds, replace(opts, solver="sklearn"), control=False, resamples=10)
    assert table.attrs["solver"] is None
