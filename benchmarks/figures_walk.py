"""The walk of the figures path: which modules ``evenhand figures RUN`` passes through, traced as it runs.

Every Python call from one module of the project into a function of another (a "step": caller module ->
callee module and function, counted once however often it recurs) is recorded with :func:`sys.setprofile` while the CLI redraws a
finished run's figures; calls made by a library (pandas calling a project lambda) are not steps. It prints
the steps in the order first taken, then the modules and folders visited, the steps between them, the
functions of ``probes/`` called from outside it, and the module pairs crossed most often (a pair crossed by
seven functions is a reader going back and forth seven times). Run it on two trees to compare a layout::

    python benchmarks/figures_walk.py RUN_DIR --tree OLD_TREE
    python benchmarks/figures_walk.py RUN_DIR --tree NEW_TREE

RUN_DIR is a finished ``kind: run`` directory (``benchmarks/golden_runs.py`` makes one: OUT/runs/run).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("evenhand", "probes", "steering", "interventions", "organism", "experiments")


def _module(frame) -> str | None:
    name = frame.f_globals.get("__name__", "") if frame is not None else ""
    return name if name.split(".")[0] in PACKAGES else None


def folder(module: str) -> str:
    """The folder a module sits in: ``evenhand.X`` for the core (a floor folder, or a flat module in older
    trees), the top-level package otherwise."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "evenhand" else parts[0]


def trace_steps(fn, *args, **kwargs) -> list[tuple[str, str, str]]:
    """The cross-module steps ``fn(*args, **kwargs)`` takes inside the project, in the order first taken: (caller
    module, callee module, callee function), each once however often it recurs."""
    seen: dict[tuple[str, str, str], None] = {}

    def profile(frame, event, arg):
        if event != "call":
            return
        callee, caller = _module(frame), _module(frame.f_back)
        if callee and caller and callee != caller:
            seen.setdefault((caller, callee, frame.f_code.co_qualname), None)

    sys.setprofile(profile)
    try:
        fn(*args, **kwargs)
    finally:
        sys.setprofile(None)
    return list(seen)


def summary(steps: list[tuple[str, str, str]], top: int = 5) -> dict:
    """Counts over the steps. ``crossings``: for each pair of modules, the distinct functions called across it
    (either way), the most-crossed ``top`` pairs; ``folder_*``: the same read at folder level, where a call
    between two modules of one folder is no step."""
    pairs: dict[tuple[str, str], int] = {}
    for a, b, _ in steps:
        key = tuple(sorted((a, b)))
        pairs[key] = pairs.get(key, 0) + 1
    fsteps = [(folder(a), folder(b), f) for a, b, f in steps if folder(a) != folder(b)]
    return {"modules": len({m for a, b, _ in steps for m in (a, b)}),
            "module_steps": len({(a, b) for a, b, _ in steps}), "function_steps": len(steps),
            "folders": len({folder(m) for a, b, _ in steps for m in (a, b)}),
            "folder_steps": len({(a, b) for a, b, _ in fsteps}), "folder_function_steps": len(fsteps),
            "into_probes": len({(b, f) for a, b, f in steps if b.startswith("probes.") and not a.startswith("probes.")}),
            "crossings": sorted(pairs.items(), key=lambda kv: -kv[1])[:top]}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path, help="a finished kind: run directory")
    ap.add_argument("--tree", type=Path, default=ROOT, help="the source tree to trace (default: this one)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(args.tree.resolve()))
    from experiments.cli import main as cli

    with tempfile.TemporaryDirectory() as out, contextlib.redirect_stdout(io.StringIO()):
        steps = trace_steps(cli, ["figures", str(args.run_dir), "--out", out, "--format", "png"])
    for a, b, f in steps:
        print(f"  {a} -> {b}.{f}")
    counts = summary(steps)
    print(", ".join(f"{k}: {v}" for k, v in counts.items() if k != "crossings"))
    print("most crossed: " + "; ".join(f"{a} <-> {b}: {n}" for (a, b), n in counts["crossings"]))
    return counts


if __name__ == "__main__":
    main()
