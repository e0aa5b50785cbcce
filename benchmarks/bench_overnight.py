"""Engine openai through vLLM's own OpenAI-compatible server (CPU, the fair organism): the overnight scenario (a
server killed and restarted mid-run) and the rate against the hf engine.

    python benchmarks/bench_overnight.py --items 1000 --rate-items 300 --out benchmarks/results/overnight.json

1. rate: items/s of engine openai deciding ``--rate-items`` distinct-prompt items (answer mode, an empty cache)
   through vLLM's server at concurrency 1, 4 and 16, and of the hf engine in process on the same items (batch 16).
2. overnight: ``--items`` items decided resumably into a fresh directory through vLLM's server, which is killed
   (SIGKILL, its whole process group) once 30% are answered and started again on its port when the run's elapsed
   time reaches 40% of its projected length (the time to 30% / 0.3); the run's outage budget is ``--budget`` s
   (vLLM needs minutes to start on a loaded CPU). Reports wall time, requests sent per item, rows, failed items
   and the outage the engine saw.

vLLM's start time is reported too: on a shared CPU it dominates the outage.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.api_servers import NAME, VLLMServer  # noqa: E402


def distinct_items(n: int):
    """``n`` core items with distinct prompts (no two answered from one request)."""
    import pandas as pd
    from evenhand.suite.subsets import iter_subset
    rows, seen = [], set()
    for it in iter_subset("core", 0):
        if it["prompt"] not in seen:
            seen.add(it["prompt"])
            rows.append(it)
            if len(rows) == n:
                break
    return pd.DataFrame(rows)


def rate(server: VLLMServer, items, concurrency=(1, 4, 16)) -> dict:
    from evenhand.running.decisions import DecideOptions, decide
    from evenhand.engine.openai_engine import OpenAIOptions, load_api
    from evenhand.models.loading import load_model
    out = {"items": len(items)}
    decide(items.head(16), load_api(NAME, OpenAIOptions(base_url=server.url)), DecideOptions(engine="openai",
                                                                                           progress=False))
    for c in concurrency:
        api = load_api(NAME, OpenAIOptions(base_url=server.url, concurrency=c))
        t0 = time.perf_counter()
        got = decide(items, api, DecideOptions(engine="openai", progress=False, batch_size=max(16, c)))
        out[f"vllm_concurrency_{c}_items_per_s"] = round(len(items) / (time.perf_counter() - t0), 2)
        out[f"vllm_concurrency_{c}_requests"] = api.stats["requests"]
    lm = load_model(NAME)
    decide(items.head(16), lm, DecideOptions(progress=False))
    t0 = time.perf_counter()
    ref = decide(items, lm, DecideOptions(progress=False, batch_size=16))
    out["hf_engine_batch16_items_per_s"] = round(len(items) / (time.perf_counter() - t0), 2)
    out["choices_equal_hf"] = int((got["choice"].values == ref["choice"].values).sum())
    return out


def overnight(server: VLLMServer, items, budget: float) -> dict:
    from evenhand.running.decisions import DecideOptions, decide
    from evenhand.engine.openai_engine import OpenAIOptions, load_api
    n = len(items)
    with tempfile.TemporaryDirectory() as d:
        lm = load_api(NAME, OpenAIOptions(base_url=server.url, concurrency=4, outage_budget_s=budget), d)
        events: dict = {}
        t0 = time.monotonic()

        def chaos():
            deadline = t0 + 3600
            while len(lm.cache.hits) < 0.3 * n and time.monotonic() < deadline:
                time.sleep(0.05)
            events["killed_at_s"] = round(time.monotonic() - t0, 1)
            events["answered_at_kill"] = len(lm.cache.hits)
            server.kill()
            restart_at = t0 + (events["killed_at_s"] / 0.3) * 0.4
            time.sleep(max(0.0, restart_at - time.monotonic()))
            events["restart_begun_at_s"] = round(time.monotonic() - t0, 1)
            events["vllm_restart_s"] = round(server.start(), 1)
            events["back_at_s"] = round(time.monotonic() - t0, 1)
        watcher = threading.Thread(target=chaos, daemon=True)
        watcher.start()
        error = None
        try:
            got = decide(items, lm, DecideOptions(engine="openai", progress=False, batch_size=16), out_dir=d)
            rows = len(got)
        except Exception as exc:  # noqa: BLE001 (reported)
            error, rows = f"{type(exc).__name__}: {exc}", None
        wall = time.monotonic() - t0
        watcher.join(900)
        lines = Path(d, "openai_cache.jsonl").read_text().splitlines()
        return {"items": n, "wall_s": round(wall, 1), "rows": rows, "error": error,
                "requests": lm.stats["requests"], "requests_per_item": round(lm.stats["requests"] / n, 3),
                "retries": lm.stats["retries"], "failed": lm.stats["failed"], "outages": lm.health.outages,
                "cache_lines": len(lines), "cache_errors": sum('"error"' in x for x in lines),
                "outage_budget_s": budget, **events}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--items", type=int, default=1000)
    p.add_argument("--rate-items", type=int, default=300)
    p.add_argument("--budget", type=float, default=900.0)
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args()
    items = distinct_items(max(a.items, a.rate_items))
    server = VLLMServer(log=Path(tempfile.gettempdir()) / "evenhand_bench_vllm.log")
    result = {"vllm_first_start_s": round(server.start(), 1)}
    try:
        if a.rate_items:
            result["rate"] = rate(server, items.head(a.rate_items))
            print(json.dumps(result, indent=1), flush=True)
        result["overnight"] = overnight(server, items.head(a.items), a.budget)
    finally:
        server.kill()
    print(json.dumps(result, indent=1))
    if a.out:
        a.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
