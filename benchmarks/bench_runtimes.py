"""The runtimes the README and the configs state, measured: each job in a fresh process, with the machine.

    python benchmarks/bench_runtimes.py --out /tmp/runtimes.json            # demo, quickstart, the API block
    python benchmarks/bench_runtimes.py --jobs demo --out /tmp/demo.json

Each job runs from a clean output directory (nothing to resume), in a subprocess of this Python, and is
timed by wall clock and by the CPU time of its processes. Before each job it waits (up to 4 min) for the
1-minute load average to fall below half the cores. The record says which machine it ran on (CPU model,
cores, memory) and the load before and after each job: a job that started on a busy machine, or that shared
it (load after above the cores it can use itself), is marked not idle, and the README quotes only idle ones.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def machine() -> dict:
    """CPU model, cores, memory and Python/torch versions of this machine."""
    cpu = platform.processor() or ""
    try:
        text = Path("/proc/cpuinfo").read_text()
        cpu = re.search(r"model name\s*:\s*(.+)", text).group(1).strip()
    except (OSError, AttributeError):
        pass
    mem = None
    try:
        mem = round(int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1)) / 2**20, 1)
    except (OSError, AttributeError):
        pass
    import torch
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": mem, "python": platform.python_version(),
            "torch": torch.__version__, "platform": platform.platform()}


def _readme_api_block() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("## Python API")
    return re.search(r"```python\n(.*?)```", text[start:], re.S).group(1)


def jobs(work: Path) -> dict[str, list[str]]:
    """The timed commands, each writing under ``work``."""
    cli = [sys.executable, "-m", "experiments.cli"]
    quick = work / "quickstart.yaml"
    cfg = (ROOT / "experiments/configs/quickstart.yaml").read_text()
    quick.write_text(re.sub(r"(?m)^output_dir: .*$", f"output_dir: {work / 'quickstart'}", cfg))
    api = work / "api.py"
    api.write_text(_readme_api_block())
    return {"demo": cli + ["demo", "--out", str(work / "demo"), "--quiet"],
            "quickstart": cli + ["run", str(quick), "--quiet"],
            "api_block": [sys.executable, str(api)]}


def settle(limit: float, wait_s: float = 240.0) -> float:
    """Wait (at most ``wait_s``) until the 1-minute load average is below ``limit``; return it."""
    t0 = time.monotonic()
    while os.getloadavg()[0] >= limit and time.monotonic() - t0 < wait_s:
        time.sleep(5)
    return os.getloadavg()[0]


def run_job(name: str, cmd: list[str], cwd: Path) -> dict:
    cores = os.cpu_count() or 1
    load_before = settle(0.5 * cores)  # the previous job's own load decays first
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    load_after = os.getloadavg()[0]
    if r.returncode != 0:
        raise SystemExit(f"{name} failed (exit {r.returncode}):\n{r.stderr[-3000:]}")
    return {"job": name, "command": " ".join(cmd[1:]), "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
            "load_before": round(load_before, 2), "load_after": round(load_after, 2),
            "idle": load_before < 0.5 * cores and load_after <= cores + 0.5}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", nargs="+", default=["demo", "quickstart", "api_block"],
                    choices=["demo", "quickstart", "api_block"])
    ap.add_argument("--out", required=True, help="JSON file for the results")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="eh-runtimes-") as tmp:
        work = Path(tmp)
        cmds = jobs(work)
        results = []
        for name in a.jobs:
            res = run_job(name, cmds[name], work)
            results.append(res)
            mark = "" if res["idle"] else "  (machine NOT idle: do not quote)"
            print(f"{name:<11} wall {res['wall_s']:7.1f} s  cpu {res['cpu_s']:7.1f} s  load {res['load_before']:.2f} -> "
                  f"{res['load_after']:.2f}{mark}", flush=True)
    record = {"machine": machine(), "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "jobs": results}
    Path(a.out).write_text(json.dumps(record, indent=2))
    print(f"machine: {record['machine']['cpu']}, {record['machine']['cores']} cores, "
          f"{record['machine']['memory_gib']} GiB; wrote {a.out}")


if __name__ == "__main__":
    main()
