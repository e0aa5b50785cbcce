"""eval.baselines: a comparison's evaluation cut to a few baselines per scenario, each with all its pressured items."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from evenhand.support.options import ConfigError
from experiments.studies.compare.study import keep_baselines, load_config, parse_config

ROOT = Path(__file__).resolve().parents[1]


def _items() -> pd.DataFrame:
    rows = []
    for s in ("s1", "s2"):
        for v in ("GTmin", "GTmaj", "AMB1", "AMB2"):
            for slot in "AB":
                b = f"{s}-{v}-{slot}"
                rows.append({"item_id": b, "baseline_id": b, "scenario_id": s, "variant": v})
                rows += [{"item_id": f"{b}-p{k}", "baseline_id": b, "scenario_id": s, "variant": v} for k in range(3)]
    return pd.DataFrame(rows)


def test_keeps_whole_baseline_groups_one_variant_at_a_time():
    items = _items()
    assert keep_baselines(items, None, 0).equals(items)
    two = keep_baselines(items, 2, 0)
    base = two[two.item_id == two.baseline_id]
    assert len(base) == 4 and len(two) == 16  # 2 per scenario, each with its 3 pressured items
    assert sorted(base.groupby("scenario_id")["variant"].apply(sorted).sum()) == ["GTmaj", "GTmaj", "GTmin", "GTmin"]
    assert set(two.baseline_id) == set(base.item_id)
    five = keep_baselines(items, 5, 0)
    per = five[five.item_id == five.baseline_id].groupby("scenario_id")["variant"].apply(list)
    assert all(len(v) == 5 and set(v) == {"GTmin", "GTmaj", "AMB1", "AMB2"} for v in per)
    assert keep_baselines(items, 2, 0).equals(keep_baselines(items, 2, 0))
    assert len(keep_baselines(items, 100, 0)) == len(items)


def test_config_field_and_manifest():
    cfg = load_config(ROOT / "experiments" / "configs" / "compare_gemma3_270m_smoke.yaml")
    assert cfg.eval_baselines == 2 and cfg.model == "gemma-3-270m-gguf"
    with pytest.raises(ConfigError, match="eval.baselines"):
        parse_config({"model": "m", "output_dir": "o", "interventions": [{"name": "caa"}],
                      "eval": {"baselines": 0}}, "cfg")
    plain = parse_config({"model": "m", "output_dir": "o", "interventions": [{"name": "caa"}]}, "cfg")
    assert plain.eval_baselines is None
