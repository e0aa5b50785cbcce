"""The GPU benchmark keeps working: its --tiny mode runs the same code path on CPU."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_gpu_shapes_tiny(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_shapes.py"), "--tiny", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=600, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads((tmp_path / "gpu_shapes.json").read_text())
    assert [s["shape"] for s in res["shapes"]] == ["qwen2-tiny", "gemma3-tiny"]
    for s in res["shapes"]:
        assert s["plain_tok_per_s"] > 0 and s["cache_over_plain"] > 0 and s["steering_over_plain"] > 0
    for p in res["probes"]:
        assert p["max_accuracy_diff_points"] <= 1.0
    assert "probe sk/torch" in r.stdout


def test_real_shapes_are_the_published_ones():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from gpu_shapes import SHAPES
    q, g = SHAPES["qwen2.5-7b-instruct"], SHAPES["gemma-3-12b-it"]
    assert (q["hidden_size"], q["num_hidden_layers"], q["num_attention_heads"], q["num_key_value_heads"]) == (3584, 28, 28, 4)
    assert (g["hidden_size"], g["num_hidden_layers"], g["head_dim"], g["vocab_size"]) == (3840, 48, 256, 262208)
