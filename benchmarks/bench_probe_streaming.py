"""Probe datasets stream one site at a time: peak host memory against the number of sites.

A synthetic bfloat16 activation cache at FairStress's width (3,840 dims) over a stated number of core items
(default 5,000, a tenth of the core; sizes are linear in rows) with 1, 4, 16 and 49 sites. Each setting runs
in a fresh subprocess that builds the probe dataset and reads every site as a sweep's three fits do, and
reports the peak RSS (``getrusage``), the RSS before, one site's float32 matrix and the time. ``--old`` runs
the loader before streaming (every site loaded at once), whose peak grows with sites; ``--sweep`` adds a full
probe sweep (torch solver on the CPU) at a smaller shape. Goal: peak RSS within 1.5x of one site's matrix
plus a fixed overhead.

    python benchmarks/bench_probe_streaming.py --rows 5000 --sites 1 4 16 49 --old

More in docs/results/gpu_smoke.md, "Probe datasets stream one site at a time".
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def rss_bytes() -> int:
    """This process's resident set now (``/proc/self/status``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def peak_rss_bytes() -> int:
    """This process's peak resident set (``ru_maxrss``, kilobytes on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def synthetic_responses(rows: int, seed: int = 0):
    """The first ``rows`` core items with a random answer each (a responses table probes can label)."""
    import pandas as pd

    from evenhand.suite.subsets import iter_subset
    items = []
    for it in iter_subset("core", 0):
        items.append(it)
        if len(items) == rows:
            break
    df = pd.DataFrame(items)
    rng = np.random.default_rng(seed)
    return df.assign(choice=np.where(rng.random(len(df)) < 0.5, "A", "B"))


def site_names(n: int) -> list[str]:
    return ["embed"] + [f"blocks.{i}.resid_post" for i in range(n - 1)]


def write_synthetic_cache(path: str | Path, item_ids: list[str], sites: list[str], dim: int,
                          dtype: str = "bfloat16", shard_rows: int = 64, seed: int = 0, signal: np.ndarray | None = None):
    """A cache directory in :mod:`evenhand.running.activations`' format (manifest, ``acts-NNNNN.safetensors`` shards
    of ``shard_rows`` items, index) holding standard normal features per site, plus ``signal`` (0/1 per item,
    optional) times a site's own direction growing with the site. Written a shard at a time."""
    import torch
    from safetensors.torch import save_file

    from evenhand.running.activations import ActivationCache
    from evenhand.runs.rundir import RunDir
    from evenhand.running.shards import ShardDir, write_json
    out = Path(path)
    shards = ShardDir(out, "acts", "safetensors")
    shards.prepare()
    write_json(RunDir(out).manifest_path, {
        "model": {"name": "synthetic"}, "sites": sites, "stored_sites": sites, "dtype": dtype,
        "position": "last prompt token", "suite_version": None, "options": {}, "d_model": dim, "backend": "synthetic"})
    rng = np.random.default_rng(seed)
    dirs = rng.standard_normal((len(sites), dim)).astype(np.float32)
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    for lo in range(0, len(item_ids), shard_rows):
        ids = item_ids[lo:lo + shard_rows]
        tensors = {}
        for s, site in enumerate(sites):
            x = rng.standard_normal((len(ids), dim), dtype=np.float32)
            if signal is not None:
                x += np.outer(2.0 * signal[lo:lo + len(ids)] - 1, dirs[s]) * (0.2 + s / max(1, len(sites) - 1))
            tensors[site] = torch.from_numpy(x).to(getattr(torch, dtype))
        shards.atomic_write(lambda tmp, t=tensors, i=ids: save_file(t, tmp, metadata={"item_ids": json.dumps(i)}))
    write_json(RunDir(out).cache_index_path, {"n_items": len(item_ids), "item_ids": list(item_ids)})
    return ActivationCache(out)


def measure(cache_dir: str, rows: int, n_sites: int, old: bool) -> dict:
    """In this (fresh) process: build the dataset of the first ``n_sites`` sites and read every site as a
    sweep's three fits do (``old``: the loader before streaming); peak RSS and time."""
    import pandas as pd

    from evenhand.running.activations import ActivationCache
    from probes.dataset import build_dataset
    from probes.features import site_sequence
    responses = synthetic_responses(rows)
    cache = ActivationCache(cache_dir)
    sites = site_names(n_sites)
    pd.DataFrame().sum()                       # warm pandas, numpy and torch (the shard reader) outside the measurement
    cache.load(sites[0], responses["item_id"].tolist()[:1])
    base = rss_bytes()
    t0 = time.perf_counter()
    ds = build_dataset(responses, cache, "favours_minority", sites)
    if old:   # before: every site loaded as float32 into the dataset, then the sweep's list of every site
        ds.features = {s: cache.load(s, ds.meta["item_id"].tolist())[1] for s in sites}
    total = 0.0
    for _fit in range(3):                     # the probes, design + activations, the control task
        Xs = [ds.features[s] for s in ds.sites] if old else site_sequence(ds.features, ds.sites)
        for i in range(len(Xs)):
            total += float(Xs[i][:, 0].sum())
        del Xs
    seconds = time.perf_counter() - t0
    one_site = len(ds) * cache.manifest["d_model"] * 4
    peak = peak_rss_bytes()
    return {"sites": n_sites, "rows": len(ds), "dim": cache.manifest["d_model"], "loader": "old" if old else "streamed",
            "peak_rss_mb": round(peak / 2**20, 1), "base_rss_mb": round(base / 2**20, 1),
            "one_site_mb": round(one_site / 2**20, 1), "over_base_in_sites": round((peak - base) / one_site, 2),
            "seconds": round(seconds, 2), "checksum": round(total, 3)}


def measure_sweep(cache_dir: str, rows: int, n_sites: int, budget: int | None = None) -> dict:
    """In this (fresh) process: a full probe sweep (torch solver on the CPU, 3 x 2 folds, two Cs, memory
    budget ``budget``: None is the CPU's 4 GiB, which holds every site of this shape in one group) over the
    first ``n_sites`` sites; peak RSS and time."""
    from evenhand.running.activations import ActivationCache
    from probes.dataset import build_dataset
    from probes.logistic import ProbeOptions
    from probes.sweep import probe_sweep
    responses = synthetic_responses(rows)
    cache = ActivationCache(cache_dir)
    opts = ProbeOptions(solver="torch", device="cpu", folds=3, inner_folds=2, Cs=(0.1, 1.0), memory_budget=budget)
    from probes.logistic import fit_sites                # warm torch and the solver outside the measurement
    rng = np.random.default_rng(0)
    fit_sites([rng.standard_normal((60, 4))], rng.integers(0, 2, 60), np.repeat(np.arange(12), 5), opts)
    base = rss_bytes()
    t0 = time.perf_counter()
    ds = build_dataset(responses, cache, "favours_minority", site_names(n_sites))
    table, _ = probe_sweep(ds, opts, resamples=200)
    seconds = time.perf_counter() - t0
    peak = peak_rss_bytes()
    one_site = len(ds) * cache.manifest["d_model"] * 4
    acc = table[table["metric"] == "accuracy"]["value"]
    return {"sites": n_sites, "rows": len(ds), "dim": cache.manifest["d_model"],
            "loader": "sweep" + (f", budget {budget:,} B" if budget else ", budget 4 GiB"),
            "peak_rss_mb": round(peak / 2**20, 1), "base_rss_mb": round(base / 2**20, 1),
            "one_site_mb": round(one_site / 2**20, 1), "over_base_in_sites": round((peak - base) / one_site, 2),
            "seconds": round(seconds, 2), "max_accuracy": round(float(acc.max()), 3)}


def child(args: list[str]) -> dict:
    r = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(r.stderr[-3000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def table_text(rows: list[dict]) -> str:
    """The rows as a markdown table; ``growth`` is the peak over the same loader's peak at its fewest sites,
    in site matrices."""
    head = ("| loader | sites | rows x dims | one site (MB) | RSS before (MB) | peak RSS (MB) | (peak - before) / one site "
            "| growth over fewest sites, in sites | time (s) |")
    lines = [head, "|" + "---|" * 9]
    first = {}
    for r in rows:
        f = first.setdefault(r["loader"], r)
        growth = (r["peak_rss_mb"] - f["peak_rss_mb"]) / r["one_site_mb"]
        lines.append(f"| {r['loader']} | {r['sites']} | {r['rows']:,} x {r['dim']:,} | {r['one_site_mb']} | "
                     f"{r['base_rss_mb']} | {r['peak_rss_mb']} | {r['over_base_in_sites']} | {growth:.2f} | {r['seconds']} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=5000, help="core items in the synthetic cache (FairStress: 49,920)")
    ap.add_argument("--dim", type=int, default=3840)
    ap.add_argument("--sites", type=int, nargs="+", default=[1, 4, 16, 49])
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    ap.add_argument("--shard-rows", type=int, default=64, help="items per cache shard")
    ap.add_argument("--old", action="store_true", help="also measure the loader before streaming")
    ap.add_argument("--sweep", action="store_true", help="also a full probe sweep at --sweep-rows x --sweep-dim")
    ap.add_argument("--sweep-rows", type=int, default=1000)
    ap.add_argument("--sweep-dim", type=int, default=256)
    ap.add_argument("--sweep-budget", type=int, default=None,
                    help="the sweep's torch memory budget in bytes (default: the CPU's 4 GiB; 1: one site a group)")
    ap.add_argument("--no-read", action="store_true", help="skip the dataset-read settings (with --sweep)")
    ap.add_argument("--cache", default="/tmp/evenhand_bench_probe_streaming", help="where the synthetic caches go")
    ap.add_argument("--out", default=None, help="write the rows as JSON here")
    ap.add_argument("--_measure", nargs=4, metavar=("DIR", "ROWS", "SITES", "MODE"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a._measure:
        d, rows, sites, mode = a._measure
        if mode.startswith("sweep"):
            budget = int(mode.split(":")[1]) if ":" in mode else None
            res = measure_sweep(d, int(rows), int(sites), budget)
        else:
            res = measure(d, int(rows), int(sites), mode == "old")
        print(json.dumps(res))
        return
    root = Path(a.cache)
    from evenhand.runs.rundir import RunDir

    def build(rows: int, dim: int, name: str) -> Path:
        path = root / name
        if not RunDir(path).cache_index_path.exists():
            resp = synthetic_responses(rows)
            t = time.perf_counter()
            from probes.dataset import labels
            signal = labels(resp, "favours_minority")[0]
            write_synthetic_cache(path, resp["item_id"].tolist(), site_names(max(a.sites)), dim, a.dtype,
                                  a.shard_rows, signal=signal)
            print(f"wrote {path} ({max(a.sites)} sites, {rows:,} x {dim:,} {a.dtype}) in {time.perf_counter() - t:.0f} s",
                  flush=True)
        return path

    rows = []
    modes = [] if a.no_read else (["streamed", "old"] if a.old else ["streamed"])
    path = build(a.rows, a.dim, f"c{a.rows}x{a.dim}x{max(a.sites)}{a.dtype}") if modes else None
    for mode in modes:
        for n in a.sites:
            rows.append(child(["--_measure", str(path), str(a.rows), str(n), mode]))
            print(json.dumps(rows[-1]), flush=True)
    if a.sweep:
        spath = build(a.sweep_rows, a.sweep_dim, f"c{a.sweep_rows}x{a.sweep_dim}x{max(a.sites)}{a.dtype}")
        for n in a.sites:
            mode = "sweep" + (f":{a.sweep_budget}" if a.sweep_budget else "")
            rows.append(child(["--_measure", str(spath), str(a.sweep_rows), str(n), mode]))
            print(json.dumps(rows[-1]), flush=True)
    print(table_text(rows))
    if a.out:
        Path(a.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
