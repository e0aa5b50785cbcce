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
    import importlib.util
    if importlib.util.find_spec("vllm") is not None:  # the vllm extra (make test installs it): HF generate vs vLLM
        assert [v["shape"] for v in res["vllm"]] == ["qwen2-tiny", "gemma3-tiny"]
        assert all(v["vllm_gen_tok_per_s"] > 0 and v["vllm_over_hf_gen"] > 0 for v in res["vllm"]), res["vllm"]


def test_real_shapes_are_the_published_ones():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from gpu_shapes import SHAPES
    q, g = SHAPES["qwen2.5-7b-instruct"], SHAPES["gemma-3-12b-it"]
    assert (q["hidden_size"], q["num_hidden_layers"], q["num_attention_heads"], q["num_key_value_heads"]) == (3584, 28, 28, 4)
    assert (g["hidden_size"], g["num_hidden_layers"], g["head_dim"], g["vocab_size"]) == (3840, 48, 256, 262208)


def test_bench_engines_prefix_share_and_estimate():
    """bench_engines' paper estimate: the prefix-cache share on constructed prompts, and the estimate's parts."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_engines import computed_share, estimate
    from gpu_shapes import SHAPES
    a, b = list(range(32)), list(range(32)) + [99] * 8
    assert computed_share([a, a], 16) == 0.5  # the second copy reads both blocks from the cache
    assert computed_share([a, b], 16) == (32 + 8) / 72
    assert computed_share([a, [7] + a[1:]], 16) == 1.0  # a differing first token: nothing shared
    counts = {m: {"mean_prompt_tokens": 170.0, "computed_share_with_prefix_cache": 0.3} for m in ("answer", "reasoning")}
    e = estimate("gemma-3-12b-it", SHAPES["gemma-3-12b-it"], counts)
    assert 10.5e9 < e["body_params"] < 11e9  # Gemma-3-12B's text tower without its embedding (12.2B with it)
    for run in e["runs"].values():
        assert run["minutes"] < run["minutes_without_prefix_cache"]
        assert abs(run["minutes"] - run["prefill_minutes"] - run["decode_minutes"]) <= 0.15  # each rounded
    assert e["runs"]["reasoning_gen512"]["decode_minutes"] > e["runs"]["reasoning_gen256"]["decode_minutes"]
