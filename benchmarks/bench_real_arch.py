"""The nine interventions on a real architecture: the Gemma-3 270M base weights through ``evenhand compare``.

Runs the comparison config (default ``experiments/configs/compare_gemma3_270m_smoke.yaml``; the preset
``gemma-3-270m-gguf``, the ``demo`` extra) into ``--out`` and reports, per method: items decided, fit and
decision seconds, whether the model's weights were bit-identical after the cell (``restore.json``: a sha256 of
every weight and buffer) and the share of answers that parse. It also times the model load beforehand (the
first load dequantises the GGUF into the cache, later ones read the copy) and states the machine's load
average. A base model does not follow the chat template: the parse rate is expected near 0 and nothing here
is a finding about the methods, only that each one's code runs at a real model's depth, width, tokenizer and
template.

    OMP_NUM_THREADS=1 python benchmarks/bench_real_arch.py [--config C] [--out DIR] [--eval-scenarios N]

Prints a table, then one JSON line (also written to ``--out``/bench_real_arch.json).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "experiments" / "configs" / "compare_gemma3_270m_smoke.yaml"


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=str(DEFAULT_CONFIG))
    ap.add_argument("--out", default=None, help="output directory (default: the config's output_dir)")
    ap.add_argument("--eval-scenarios", type=int, default=None, help="override eval.scenarios")
    a = ap.parse_args(argv)

    import pandas as pd

    from evenhand.support.messages import unparseable_share
    from evenhand.runs.rundir import RunDir
    from evenhand.models.loading import load_model
    from experiments.studies.compare import load_config, run_compare

    cfg = load_config(a.config)
    cfg = replace(cfg, output_dir=a.out or cfg.output_dir,
                  **({"eval_scenarios": a.eval_scenarios} if a.eval_scenarios else {}))
    load_before = os.getloadavg()
    t = time.perf_counter()
    lm = load_model(cfg.model)
    load_s = time.perf_counter() - t
    desc = lm.describe()
    del lm
    t = time.perf_counter()
    run_compare(cfg, progress=True)
    compare_s = time.perf_counter() - t
    run = RunDir(cfg.output_dir)
    rows = []
    base = pd.read_parquet(run.cell("baseline").responses_path)
    rows.append({"method": "baseline", "kind": "none", "items": len(base), "fit_s": None, "decide_s": None,
                 "restored_bit_exactly": None, "parse_rate": 1 - unparseable_share(base)})
    for cell in run.cells():
        if not cell.restore_path.exists():
            continue
        rec = json.loads(cell.restore_path.read_text())
        resp = pd.read_parquet(cell.responses_path)
        rows.append({"method": rec["intervention"], "kind": rec["kind"], "items": rec["items"],
                     "fit_s": rec["fit_seconds"], "decide_s": rec["decide_seconds"],
                     "restored_bit_exactly": rec["restored_bit_exactly"], "parse_rate": 1 - unparseable_share(resp)})
    result = {"model": desc["name"], "source": desc["source"], "chat_template": desc["chat_template"],
              "architecture": desc["architecture"], "load_s": round(load_s, 1), "compare_wall_s": round(compare_s, 1),
              "loadavg_before": [round(x, 2) for x in load_before], "loadavg_after": [round(x, 2) for x in
                                                                                     os.getloadavg()],
              "cpus": os.cpu_count(), "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
              "manifest_items": {k: run.manifest().get(k)
                                 for k in ("n_train_items", "n_validation_items", "n_eval_items")},
              "cells": rows}
    print(f"model {desc['name']} ({desc['architecture']}), template: {desc['chat_template']}; load {load_s:.1f} s; "
          f"compare {compare_s:.1f} s wall; load average {load_before[0]:.1f} -> {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs")
    print(f"{'method':20s} {'kind':10s} {'items':>5s} {'fit s':>7s} {'decide s':>8s} {'bit-exact':>9s} {'parsed':>6s}")
    for r in rows:
        fit = "" if r["fit_s"] is None else f"{r['fit_s']:.1f}"
        dec = "" if r["decide_s"] is None else f"{r['decide_s']:.1f}"
        ok = "" if r["restored_bit_exactly"] is None else str(r["restored_bit_exactly"])
        print(f"{r['method']:20s} {r['kind']:10s} {r['items']:5d} {fit:>7s} {dec:>8s} {ok:>9s} {r['parse_rate']:6.1%}")
    (run.path / "bench_real_arch.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
