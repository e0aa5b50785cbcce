"""Golden runs: every registered study's small run on a given source tree, its tables normalised and digested, so
that a restructuring can show the same inputs give the same tables (run it on the old tree and on the new one, then
``--compare`` the two digests).

    python benchmarks/golden_runs.py --tree OLD_TREE --out /tmp/golden/before
    python benchmarks/golden_runs.py --tree NEW_TREE --out /tmp/golden/after
    python benchmarks/golden_runs.py --compare /tmp/golden/before/digest.json /tmp/golden/after/digest.json

Each run is ``python -m experiments.cli ...`` in a subprocess with cwd and PYTHONPATH set to ``--tree``. Every
parquet/csv/json/jsonl table of a run directory is written normalised (timing columns and keys, SHAs, dates, hosts
and absolute paths dropped or replaced, frames sorted) under ``OUT/normalised/``; ``OUT/digest.json`` maps each to the
sha256 of its normalised bytes, and ``OUT/runtimes.json`` holds each run's wall time.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

TABLE_SUFFIXES = (".parquet", ".csv", ".json", ".jsonl", ".tex")
"""The files of a run directory that are digested (figures are listed by name only: their bytes carry renderer
metadata; a .tex table is digested as text)."""

VOLATILE = re.compile(r"(^|_)(seconds|secs|elapsed|duration|wall|time|timing|timings|timestamp|started|finished|"
                      r"created|updated|date|sha|sha256|git|commit|host|hostname|pid|throughput|"
                      r"tokens_per_s|items_per_s)($|_)|(_s|_at|_sec|_ms)$", re.IGNORECASE)
"""A column or key whose name matches is dropped: wall times, rates, dates, SHAs, hosts (nothing a restructuring
may change)."""

SMALL_SUITE = {"subset": "organism_heldout", "degrees": [3], "limit": 96}

RUNS: dict[str, dict] = {
    "run": {"kind": "run", "model": "evenhand-organism",
            "suite": {"subset": "organism_heldout", "seed": 0, "degrees": [1], "limit": 608},
            "mode": "answer", "batch_size": 64, "resamples": 40, "cache": {"enabled": True, "dtype": "float32"},
            "probe": {"label": "favours_minority", "degrees": [1], "folds": 2, "inner_folds": 2},
            "ablation": {"variants": ["label"], "label": "favours_minority", "degree": 1, "minority_slot": "A"},
            "attribution": {"degrees": [1], "batch_size": 32}, "figures": True},
    "sweep": {"model": "evenhand-organism", "suite": SMALL_SUITE, "batch_size": 32, "resamples": 40,
              "sweep": {"mode": ["answer", "logprob"]}},
    "modes": {"kind": "modes", "model": "evenhand-organism", "suite": SMALL_SUITE, "batch_size": 64},
    "simulate": {"kind": "simulate", "subset": "smoke"},
    "bbq": {"kind": "bbq", "model": "evenhand-organism", "per_category": 10, "seed": 0, "batch_size": 32,
            "max_new_tokens": 4, "resamples": 100,
            "configurations": ["mc_logprob", "mc_logprob_chat", "mc_generate", "yn_logprob", "yn_generate"]},
    "calibration": {"kind": "calibration", "betas": [0, 40], "scenarios": 1},
    "compare": {"kind": "compare", "model": "evenhand-organism", "split": {"seed": 0, "heldout_fraction": 0.2},
                "train": {"scenarios": 2, "max_items": 24}, "eval": {"scenarios": 1, "baselines": 2},
                "validation": {"scenarios": 1}, "mode": "logprob", "batch_size": 32, "resamples": 20,
                "controls": False, "signs": {"fraggap": 1},
                "interventions": [{"name": "fair_instruction"},
                                  {"name": "caa", "sweep": {"layers": [1], "alpha": [1.0, 4.0]}},
                                  {"name": "leace", "options": {"batch_size": 16},
                                   "sweep": {"layers": ["all"], "strength": [1.0]}}]},
    "dose_response": {"kind": "dose_response", "model": "evenhand/models/organism_fair", "mechanism": "last_layer",
                      "fraggaps": [0, 20], "icc": 0.1, "eval_scenarios": 2, "eval_contrasts": 1,
                      "conditions": ["GT"], "train_scenarios": 2, "train_max_items": 120,
                      "methods": [{"name": "caa", "options": {"layers": "middle", "alpha": 4.0}}],
                      "controls": True, "control_seed": 0, "replications": 2, "replicate": "independent",
                      "replication_scenarios": 2, "replication_conditions": ["GT"], "resamples": 100,
                      "interval": "jackknife-t", "accuracy_margin": 0.05, "refusal_margin": 0.05, "seed": 0,
                      "batch_size": 64},
}
"""One small config per registered study (the tests' sizes; dose_response is
experiments/configs/dose_response_mechanisms_tiny.yaml). ``output_dir`` is filled in per run."""

FIGURES_OF = "run"
"""The finished run ``evenhand figures`` redraws into a fresh folder (figures from saved tables alone)."""


def volatile(name: str) -> bool:
    """Whether a column or key called ``name`` holds a timing, rate, date, SHA or host."""
    return bool(VOLATILE.search(str(name)))


def scrub(value, roots: dict[str, str]):
    """``value`` with every occurrence of an absolute root replaced by its placeholder (``roots``: path ->
    placeholder, longest first) and volatile keys of mappings dropped, recursively."""
    if isinstance(value, dict):
        return {k: scrub(v, roots) for k, v in value.items() if not volatile(k)}
    if isinstance(value, list):
        return [scrub(v, roots) for v in value]
    if isinstance(value, str):
        for root, mark in roots.items():
            value = value.replace(root, mark)
        return value
    return value


def normal_frame(df: pd.DataFrame, roots: dict[str, str]) -> pd.DataFrame:
    """``df`` without volatile columns, paths replaced, columns in name order and rows sorted on every column."""
    df = df[[c for c in df.columns if not volatile(c)]]
    df = df.reindex(columns=sorted(df.columns, key=str)).reset_index(drop=True)
    out = pd.DataFrame({c: [json.dumps(scrub(_plain(v), roots), sort_keys=True, default=str) for v in df[c]]
                        for c in df.columns}, columns=df.columns)
    return out.sort_values(list(out.columns)).reset_index(drop=True) if len(out.columns) else out


def _plain(v):
    """A cell as plain Python (numpy scalars and arrays to numbers and lists; floats kept at full precision)."""
    if hasattr(v, "tolist"):
        v = v.tolist()
    if isinstance(v, float) and v != v:
        return "nan"
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def normal_bytes(path: Path, roots: dict[str, str]) -> bytes:
    """The normalised text of one table file: frames as sorted CSV of JSON cells, JSON as sorted-key JSON."""
    if path.suffix == ".parquet":
        return normal_frame(pd.read_parquet(path), roots).to_csv(index=False).encode()
    if path.suffix == ".csv":
        return normal_frame(pd.read_csv(path), roots).to_csv(index=False).encode()
    if path.suffix == ".tex":
        return scrub(path.read_text(), roots).encode()
    if path.suffix == ".jsonl":
        lines = [json.dumps(scrub(json.loads(s), roots), sort_keys=True) for s in path.read_text().splitlines()
                 if s.strip()]
        return ("\n".join(sorted(lines)) + "\n").encode()
    return (json.dumps(scrub(json.loads(path.read_text()), roots), sort_keys=True, indent=1) + "\n").encode()


def digest_run(run_dir: Path, roots: dict[str, str], dest: Path) -> dict[str, str]:
    """Write every table of ``run_dir`` normalised under ``dest`` (same relative paths, ``.txt`` added); return
    relative path -> sha256 of the normalised bytes (figures: their sorted names under ``figures``)."""
    digests, figures = {}, []
    for p in sorted(run_dir.rglob("*")):
        if not p.is_file():
            continue
        rel = p.relative_to(run_dir).as_posix()
        if p.suffix not in TABLE_SUFFIXES:
            if p.suffix in (".png", ".pdf", ".svg"):
                figures.append(rel)
            continue
        data = normal_bytes(p, roots)
        out = dest / (rel + ".txt")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
        digests[rel] = hashlib.sha256(data).hexdigest()
    listing = ("\n".join(figures) + "\n").encode()
    (dest / "figures.list.txt").parent.mkdir(parents=True, exist_ok=True)
    (dest / "figures.list.txt").write_bytes(listing)
    digests["figures.list"] = hashlib.sha256(listing).hexdigest()
    return digests


def cli(tree: Path, args: list[str], log: Path) -> float:
    """Run ``python -m experiments.cli ARGS`` in ``tree``; return its wall seconds (raises when it fails)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    t0 = time.perf_counter()
    with log.open("a") as fh:
        fh.write(f"$ evenhand {' '.join(args)}\n")
        fh.flush()
        rc = subprocess.run([sys.executable, "-m", "experiments.cli", *args], cwd=tree, env=env, stdout=fh,
                            stderr=subprocess.STDOUT).returncode
    if rc:
        raise RuntimeError(f"evenhand {' '.join(args)} exited {rc} (log: {log})")
    return time.perf_counter() - t0


def golden(tree: Path, out: Path, only: list[str] | None = None, digest_only: bool = False) -> dict:
    """Every golden run on ``tree`` into ``out``: run directories under ``out/runs``, normalised tables under
    ``out/tables``, ``out/digest.json`` (study -> file -> sha256) and ``out/runtimes.json``. ``digest_only``:
    digest the run directories already there, running nothing."""
    import yaml
    tree, out = tree.resolve(), out.resolve()
    (out / "configs").mkdir(parents=True, exist_ok=True)
    log = out / "golden.log"
    digest_path, times_path = out / "digest.json", out / "runtimes.json"
    digests = json.loads(digest_path.read_text()) if digest_path.exists() else {}
    times = json.loads(times_path.read_text()) if times_path.exists() else {}
    names = [n for n in RUNS if only is None or n in only] + (["figures"] if only is None or "figures" in only
                                                              else [])
    for name in names:
        run_dir = out / "runs" / name
        if name == "figures":
            args = ["figures", str(out / "runs" / FIGURES_OF), "--out", str(run_dir), "--format", "png"]
        else:
            cfg = out / "configs" / f"{name}.yaml"
            cfg.write_text(yaml.safe_dump({**RUNS[name], "output_dir": str(run_dir)}, sort_keys=False))
            args = ["run", str(cfg), "--quiet"]
        if not digest_only:
            print(f"golden {name}: running", flush=True)
            try:
                times[name] = round(cli(tree, args, log), 1)
            except RuntimeError as e:   # the other studies still run; --only NAME reruns this one into the same OUT
                print(f"golden {name}: FAILED: {e}", flush=True)
                continue
        elif not run_dir.is_dir():
            continue
        roots = dict(sorted({str(run_dir): "<RUN>", str(out): "<OUT>", str(tree): "<TREE>"}.items(),
                            key=lambda kv: -len(kv[0])))
        digests[name] = digest_run(run_dir, roots, out / "normalised" / name)
        print(f"golden {name}: {len(digests[name])} tables, {times.get(name)} s", flush=True)
        digest_path.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n")
        times_path.write_text(json.dumps(times, indent=1) + "\n")
    return digests


def first_differences(a: str, b: str, n: int = 5) -> list[str]:
    """The first ``n`` lines that differ between two normalised texts, as ``-``/``+`` pairs with their line."""
    la, lb = a.splitlines(), b.splitlines()
    out = []
    for i in range(max(len(la), len(lb))):
        x = la[i] if i < len(la) else "<absent>"
        y = lb[i] if i < len(lb) else "<absent>"
        if x != y:
            out += [f"  line {i + 1}:", f"  - {x}", f"  + {y}"]
            if len(out) >= 3 * n:
                break
    return out


def compare(a: Path, b: Path) -> list[str]:
    """Every table whose digest differs between two digest files (each beside its ``tables/`` folder), with its
    first differing rows; empty when all agree."""
    da, db = json.loads(a.read_text()), json.loads(b.read_text())
    lines = []
    for study in sorted(set(da) | set(db)):
        fa, fb = da.get(study, {}), db.get(study, {})
        for rel in sorted(set(fa) | set(fb)):
            if fa.get(rel) == fb.get(rel):
                continue
            if rel not in fa or rel not in fb:
                lines.append(f"{study}/{rel}: only in {a if rel in fa else b}")
                continue
            lines.append(f"{study}/{rel}: differs")
            name = "figures.list.txt" if rel == "figures.list" else rel + ".txt"
            pa, pb = a.parent / "normalised" / study / name, b.parent / "normalised" / study / name
            if pa.exists() and pb.exists():
                lines += first_differences(pa.read_text(), pb.read_text())
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", type=Path, help="the source tree to run (its root: experiments/, evenhand/, ...)")
    ap.add_argument("--out", type=Path, help="where run directories, normalised tables and digest.json go")
    ap.add_argument("--only", default=None, help=f"comma-separated subset of {', '.join([*RUNS, 'figures'])}")
    ap.add_argument("--digest-only", action="store_true", help="digest OUT's run directories again, running nothing")
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"), help="two digest.json files to diff")
    a = ap.parse_args(argv)
    if a.compare:
        diff = compare(*a.compare)
        print("\n".join(diff) if diff else "all tables agree")
        return 1 if diff else 0
    if not (a.tree and a.out):
        ap.error("--tree and --out are required (or --compare A B)")
    t0 = time.perf_counter()
    digests = golden(a.tree, a.out, a.only.split(",") if a.only else None, a.digest_only)
    print(f"{sum(len(v) for v in digests.values())} tables digested in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
