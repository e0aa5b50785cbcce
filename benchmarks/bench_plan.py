"""`evenhand plan`'s predictions against measurements on tiny random models on the CPU.

Three measurements, each against :mod:`evenhand.models.plan`'s prediction from the model's config.json:
weights (the parameters' bytes in memory and the safetensors bytes on disk, for Qwen2ForCausalLM and
Gemma3ForConditionalGeneration with a vision tower), the activation cache's bytes on disk (evenhand's own cache of
tiny Gemma 3 on smoke items), and the peak host memory of a CPU forward (VmHWM of a fresh process, less its RSS
after importing torch and transformers, against ``HOST_RUNTIME`` + weights + :func:`forward_bytes`).

    python benchmarks/bench_plan.py            # the table in docs/results/gpu_smoke.md, "Plan: predicted against measured"
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

RSS_SCRIPT = r"""
import json, sys, torch, transformers
# imported before the baseline, so that compiling their bytecode (a fresh checkout has none) is not counted
from evenhand.models.loading import load_model
transformers.AutoModelForCausalLM, transformers.Qwen2ForCausalLM, transformers.AutoTokenizer
def status(key):
    return int(open("/proc/self/status").read().split(key + ":")[1].split()[0]) * 1024
with open("/proc/self/clear_refs", "w") as f:  # reset VmHWM: the imports' own transient peak is not the forward's
    f.write("5")
base = status("VmRSS")
lm = load_model(sys.argv[1])
b, t = int(sys.argv[2]), int(sys.argv[3])
ids = torch.randint(5, 200, (b, t))
with torch.inference_mode():
    lm.model(input_ids=ids, logits_to_keep=1)
print(json.dumps({"peak": status("VmHWM") - base}))
"""


def texts(n: int = 2000) -> list[str]:
    return [f"word{i} alpha beta gamma" for i in range(n)]


def multimodal_gemma3(out: Path, hidden: int = 64, layers: int = 6) -> Path:
    """A random Gemma3ForConditionalGeneration (SigLIP tower without a head, as the real one) saved to ``out``."""
    import torch
    import transformers as tf
    tc = tf.Gemma3TextConfig(vocab_size=512, hidden_size=hidden, intermediate_size=2 * hidden,
                             num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                             head_dim=hidden // 4, sliding_window=32)
    vc = tf.SiglipVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                               image_size=56, patch_size=14, vision_use_head=False)
    torch.manual_seed(0)
    tf.Gemma3ForConditionalGeneration(tf.Gemma3Config(text_config=tc.to_dict(), vision_config=vc.to_dict(),
                                                      mm_tokens_per_image=4)).save_pretrained(out)
    return out


def qwen2(out: Path, hidden: int = 64, layers: int = 3) -> Path:
    """A random Qwen2ForCausalLM with its tokenizer saved to ``out``."""
    from evenhand.models.tiny import save_tiny_model
    return save_tiny_model(out, "qwen2", texts(), seed=0, hidden=hidden, layers=layers, heads=8, kv_heads=2,
                           intermediate=3 * hidden)


def measure_weights(model_dir: Path, dtype: str) -> dict:
    """Predicted weight bytes against the loaded parameters' bytes and the safetensors files' bytes."""
    import transformers as tf

    from evenhand.models.plan import DTYPE_BYTES, model_config, shapes_from_config
    import torch
    cfg = model_config(str(model_dir))
    model = tf.AutoModel.from_pretrained(model_dir, dtype=getattr(torch, dtype)) if "vision_config" in cfg else \
        tf.AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype))
    predicted = shapes_from_config(cfg, dtype).params * DTYPE_BYTES[dtype]
    memory = sum(p.numel() * p.element_size() for p in model.parameters())
    disk = sum(f.stat().st_size for f in model_dir.glob("*.safetensors"))
    return {"what": f"weights, {cfg.get('architectures', ['?'])[0]} {dtype}", "predicted": predicted,
            "measured": memory, "disk_float32": disk}


def measure_cache(lm, items, dtype: str, batch_size: int, tmp: Path) -> dict:
    """Predicted activation-cache bytes on disk against the cache directory written by ``cache_activations``."""
    from evenhand.running.activations import CacheOptions, cache_activations
    from evenhand.models.plan import DEVICES, Workload, plan, shapes_from_config
    from evenhand.models.sites import residual_sites
    from evenhand.suite.content import items_version
    out = tmp / f"cache-{dtype}-{batch_size}"
    cache_activations(items, lm, CacheOptions(batch_size=batch_size, dtype=dtype, progress=False), out,
                      items_version(items))
    measured = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    shapes = shapes_from_config(lm.model.config.to_dict(), "float32")
    work = Workload(items=len(items), prompt_tokens=64, cache_sites=len(residual_sites(lm.model)),
                    cache_dtype=dtype, batch_size=batch_size)
    predicted = plan("tiny", shapes, work, DEVICES["CPU"]).disk["activation cache"]
    return {"what": f"cache on disk, {len(items)} items, {dtype}, batch {batch_size}", "predicted": predicted,
            "measured": measured}


def measure_rss(model_dir: Path, batch: int, tokens: int) -> dict:
    """Predicted peak host memory of loading and one CPU forward against the measured VmHWM (fresh process)."""
    from evenhand.models.plan import HOST_RUNTIME, forward_bytes, model_config, shapes_from_config
    shapes = shapes_from_config(model_config(str(model_dir)), "float32")
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    r = subprocess.run([sys.executable, "-c", RSS_SCRIPT, str(model_dir), str(batch), str(tokens)],
                       capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    if r.returncode:
        raise RuntimeError(r.stderr[-2000:])
    measured = json.loads(r.stdout.strip().splitlines()[-1])["peak"]
    predicted = HOST_RUNTIME + shapes.params * 4 + forward_bytes(shapes, batch, tokens)
    return {"what": f"peak host memory, Qwen2 hidden {shapes.hidden} ({shapes.params / 1e6:.0f}M), batch {batch} x "
                    f"{tokens} tokens", "predicted": predicted, "measured": measured}


def main() -> None:
    import pandas as pd

    from evenhand.models.loading import load_model
    from evenhand.models.tiny import save_tiny_model
    from evenhand.suite.subsets import iter_subset
    rows = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for hidden, b, t in ((512, 8, 256), (512, 16, 512), (1024, 8, 256)):
            rows.append(measure_rss(qwen2(tmp / f"q{hidden}", hidden=hidden, layers=8), b, t))
        for dtype in ("float32", "bfloat16"):
            rows.append(measure_weights(multimodal_gemma3(tmp / "mm"), dtype))
            rows.append(measure_weights(qwen2(tmp / "q"), dtype))
        items = pd.DataFrame([it for _, it in zip(range(96), iter_subset("smoke", 0))])
        lm = load_model(str(save_tiny_model(tmp / "g", "gemma3", items["prompt"].tolist(), seed=1)))
        for dtype, bs in (("float32", 8), ("float16", 8), ("float32", 32)):
            rows.append(measure_cache(lm, items, dtype, bs, tmp))
    print("| measured | predicted | measured value | predicted / measured |")
    print("|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r['what']} | {r['predicted'] / 1e6:,.3f} MB | {r['measured'] / 1e6:,.3f} MB | "
              f"{r['predicted'] / r['measured']:.3f} |")


if __name__ == "__main__":
    main()
