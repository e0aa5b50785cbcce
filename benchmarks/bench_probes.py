"""Probe sweep speed: the batched torch engine against the scikit-learn reference, as a ratio."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from probes.logistic import ProbeOptions, fit_sites  # noqa: E402


def data(sites: int, dim: int, rows: int, per_group: int, seed: int):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, rows)
    groups = np.repeat(np.arange(rows // per_group + 1), per_group)[:rows]
    Xs = []
    for s in range(sites):
        u = rng.normal(size=dim)
        u /= np.linalg.norm(u)
        margin = 1.5 * s / max(1, sites - 1)
        Xs.append((rng.normal(size=(rows, dim)) + np.outer(2 * y - 1, u) * margin).astype(np.float32))
    return Xs, y, groups


def main() -> None:
    """One full sweep (every site, nested grouped CV: outer folds x (inner folds + refit) x every C) on the same
    synthetic activations with planted directions of increasing strength per site (:func:`data`), both engines
    in the same process after a warm-up (imports and first calls excluded), each ``--reps`` times (the median is
    reported). Prints a JSON line: seconds per engine (median and every rep), the ratio sklearn/torch of the
    medians, and the largest accuracy difference between the engines over the sites (the acceptance bar is 1
    point); the torch engine's report (compute dtype, sites per group, the peak it expects, Newton steps,
    contractions, converged) and the process's measured peak resident memory during its last sweep above what
    it held before (``torch_rss_peak_mib``, Linux); CPU seconds per engine (``*_cpu_s``, fairer than wall time on
    a shared machine) and the load average at the start and end. ``--sklearn-sites k`` times scikit-learn on
    the first k sites only and scales its time to all sites (``sklearn_extrapolated``: at 3,840 features it takes
    minutes per site); accuracies are then compared on those k sites. Not part of the test run::

        python benchmarks/bench_probes.py                                    # organism shape (5 sites, d=64)
        python benchmarks/bench_probes.py --sites 13 --dim 256 --rows 1200  # a wider model
        python benchmarks/bench_probes.py --sites 49 --dim 3840 --rows 10000 --device cuda --reps 1 --sklearn-sites 2
        python benchmarks/bench_probes.py --run runs/quickstart --degrees 1      # a real run's cache and labels
    """
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sites", type=int, default=5)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--per-group", type=int, default=8, help="rows per scenario")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-sklearn", action="store_true")
    ap.add_argument("--run", default=None, help="a run directory: its cached activations and favours_minority labels")
    ap.add_argument("--degrees", "--degree", dest="degree", type=int, nargs="+", default=None,
                    help="with --run: keep these degrees (alias: --degree)")
    ap.add_argument("--reps", type=int, default=3, help="sweeps per engine; the median time is reported")
    ap.add_argument("--dtype", default="auto", help="torch engine compute dtype: auto | float32 | float64")
    ap.add_argument("--memory-budget-gib", type=float, default=None, help="torch engine memory budget (default: 4)")
    ap.add_argument("--sklearn-sites", type=int, default=None, help="time scikit-learn on this many sites, scaled")
    a = ap.parse_args()
    import torch
    torch.set_num_threads(max(1, torch.get_num_threads()))
    if a.run:
        from probes.dataset import from_run
        ds = from_run(a.run, "favours_minority", None, {"degree": a.degree} if a.degree else None)
        Xs, y, groups = [ds.features[s] for s in ds.sites], ds.y, ds.groups
        a.sites, a.dim, a.rows = len(Xs), Xs[0].shape[1], len(y)
    else:
        Xs, y, groups = data(a.sites, a.dim, a.rows, a.per_group, a.seed)
    base = ProbeOptions(device=a.device, solver="torch", dtype=a.dtype)
    if a.memory_budget_gib is not None:
        base = replace(base, memory_budget=int(a.memory_budget_gib * (1 << 30)))
    # warm-up: imports, first kernels
    wx, wy, wg = data(1, 8, 80, 4, 1)
    fit_sites(wx, wy, wg, base)
    fit_sites(wx, wy, wg, ProbeOptions(solver="sklearn"))

    def timed(opts, sites):
        times, cpu = [], []
        for _ in range(max(1, a.reps)):
            rss0 = reset_peak_rss()
            t, c = time.perf_counter(), time.process_time()
            res = fit_sites(sites, y, groups, opts)
            if a.device.startswith("cuda"):
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
        out[f"{opts.solver}_cpu_s"] = round(float(np.median(cpu)) * a.sites / len(sites), 3)
        return res, float(np.median(times)), times, peak_rss() - rss0

    if a.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    out = {"loadavg_start": [round(v, 2) for v in os.getloadavg()]}
    rt, t_torch, all_t, rss = timed(base, Xs)
    out.update({"sites": a.sites, "dim": a.dim, "rows": a.rows, "device": a.device, "reps": a.reps,
           "fits_per_site": None, "torch_s": round(t_torch, 3), "torch_all_s": [round(v, 3) for v in all_t],
           "features_mib": round(sum(X.nbytes for X in Xs) / 2**20, 1), "torch_rss_peak_mib": round(rss / 2**20, 1),
           "torch_report": rt[0].solver})
    if a.device.startswith("cuda"):
        out["torch_cuda_peak_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    k = min(base.folds, len(np.unique(groups)))
    out["fits_per_site"] = k * (base.inner_folds + 1) * len(base.Cs)
    acc_t = [float(((r.prob >= 0.5) == y).mean()) for r in rt]
    out["torch_accuracy"] = [round(v, 4) for v in acc_t]
    if not a.skip_sklearn:
        n_sk = min(a.sites, a.sklearn_sites or a.sites)
        rs, t_sk, all_s, _ = timed(ProbeOptions(solver="sklearn"), Xs[:n_sk])
        t_sk *= a.sites / n_sk
        acc_s = [float(((r.prob >= 0.5) == y).mean()) for r in rs]
        out.update(sklearn_s=round(t_sk, 3), sklearn_all_s=[round(v, 3) for v in all_s],
                   sklearn_sites_timed=n_sk, sklearn_extrapolated=n_sk < a.sites,
                   ratio_sklearn_over_torch=round(t_sk / t_torch, 2),
                   ratio_cpu_sklearn_over_torch=round(out["sklearn_cpu_s"] / max(out["torch_cpu_s"], 1e-9), 2),
                   sklearn_accuracy=[round(v, 4) for v in acc_s],
                   max_accuracy_diff_points=round(100 * max(abs(p - q) for p, q in zip(acc_s, acc_t)), 3))
    out["loadavg_end"] = [round(v, 2) for v in os.getloadavg()]
    print(json.dumps(out))


def reset_peak_rss() -> int:
    """Reset the process's peak resident memory (Linux ``clear_refs``) and return the current one (bytes)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass
    return _status_kib("VmRSS") * 1024


def peak_rss() -> int:
    """The process's peak resident memory since the last reset (bytes; 0 where /proc is missing)."""
    return _status_kib("VmHWM") * 1024


def _status_kib(field: str) -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    main()
