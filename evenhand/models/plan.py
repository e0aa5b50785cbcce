"""A run's resources before anything loads: GPU memory per stage, host memory, disk and time.

:func:`shapes_from_config` reads a model's shapes from its ``config.json`` (a multimodal model's text tower, its
vision tower counted in the weights; the two target presets' shapes are embedded in :data:`PRESET_CONFIGS`, so
they plan offline); :func:`plan` predicts, for a :class:`Workload` on a :class:`Device` (:data:`DEVICES`), the
bytes each stage holds on the device (weights; decisions: KV cache, a sliding layer keeping at most its window,
and a forward's activations, :func:`forward_bytes`; the cache writer; the torch probe solver), host memory, the
disk of the cache and the decision shards, and seconds per stage (prefill at ``efficiency`` x peak FLOP/s,
decoding and probes memory-bound at ``efficiency`` x bandwidth). :func:`auto_batch_size` is the inverse: the
largest batch whose decision stage fits. The formulas and constants are ours and first-order (docs/GUIDE.md,
"Plan a GPU run before it loads"); they are checked against CPU measurements on tiny models
(benchmarks/bench_plan.py; docs/results/gpu_smoke.md, "Plan: predicted against measured")."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

GB = 1e9
ACT_HIDDEN = 10
"""Residual-width buffers a decoder layer holds at once in a forward (input, the norms' float32 upcasts, q/k/v
at GQA width, attention output, residual sums)."""
MLP_COPIES = 4
"""Intermediate-width buffers of the gated MLP (gate, up, the activation, their product)."""
PROBE_COPIES = 3
"""Copies of one site's float32 matrix the torch probe solver holds (data, standardised fold, gradient), on a CPU."""
PROBE_GROUP_FACTOR = 1.15
"""Device bytes per float32 feature of each site in a GPU solver group: the solver's own plan
(:func:`probes.solver.memory_plan`) expected 1.15 at 49 sites x 3,840 x 10,000 rows, and the H200 measured 1.08
(8.1 GB above the resident models; benchmarks/results/gpu_smoke/h200_real_width_2026-12-04_second.json). On a GPU
the solver puts as many sites in one group as 80% of the free memory holds (49 there); the plan once assumed one
site, predicting 0.46 GB."""
SHARD_OVERHEAD = 256
"""Bytes of a cache shard's safetensors header per stored site (name, dtype, shape, offsets)."""
ITEM_ID_BYTES = 48
"""Bytes per item of a cache shard's item-id metadata (a JSON string of ~45 characters and its quotes)."""
PROBE_FOLDS, PROBE_INNER, PROBE_CS = 5, 3, 5
"""The probe sweep's default folds, inner folds and C values (:class:`probes.options.ProbeOptions`); with the
control task each site fits ``folds x (inner x Cs + 1) x 2`` = 160 probes."""
PROBE_PASSES = 420
"""Passes over the data per probe fit by the torch Newton-CG solver: ~10 Newton steps x (2 + 2 x ~20 CG
iterations)."""
HOST_RUNTIME = 25e6
"""Host bytes of a first CPU forward beyond the weights and activations, after torch and transformers are
imported (kernels, allocator pools): ~25 MB, measured at batch 1 x 64 tokens (benchmarks/bench_plan.py)."""
HUB_SHARD = 5 * GB
"""The largest weight shard the hub's checkpoints use: the host memory of a load streamed to the device."""
CACHE_TRACE_BYTES = 4.5
"""Device bytes the activation cache's trace holds per token, site and residual dimension of a batch beyond one
forward: set from the first H200 run (benchmarks/results/gpu_smoke/h200_real_width_2026-12-04.json, batch 64 x
~190 tokens: 5.2 for Gemma 3 12B's 49 sites, 4.1 for Qwen2.5 7B's 29; the forward alone predicted 2.5 GiB where
11.3 GiB was measured for Gemma)."""
DECODE_STEP_S = 0.09
"""Seconds of one generation step of a batch beyond reading the weights and KV cache on a GPU (Hugging Face
``generate``'s per-step work): measured on the H200 at batch 64, 94 ms (Gemma 3 12B) and 100 ms (Qwen2.5 7B) per
step against 13 and 8 ms of weight reads (same file)."""
DECISION_ROW_BYTES = {"logprob": 400, "answer": 500, "reasoning": 2500}
"""Bytes per decision row in parquet (ids, labels, scores; reasoning adds its text)."""

# The presets' shapes, copied from their config.json on the Hugging Face hub so that `evenhand plan` works
# offline (sources: https://huggingface.co/google/gemma-3-12b-it/blob/main/config.json, text_config and
# vision_config; https://huggingface.co/Qwen/Qwen2.5-7B-Instruct/blob/main/config.json). Only the fields the
# plan reads are kept.
PRESET_CONFIGS: dict[str, dict] = {
    "gemma-3-12b-it": {
        "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "torch_dtype": "bfloat16",
        "text_config": {"model_type": "gemma3_text", "hidden_size": 3840, "intermediate_size": 15360, "num_hidden_layers": 48,
                        "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256, "vocab_size": 262208,
                        "sliding_window": 1024, "sliding_window_pattern": 6, "tie_word_embeddings": True},
        "vision_config": {"hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27,
                          "image_size": 896, "patch_size": 14, "vision_use_head": False},
    },
    "qwen2.5-7b-instruct": {
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "torch_dtype": "bfloat16", "hidden_size": 3584,
        "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
        "vocab_size": 152064, "tie_word_embeddings": False, "attention_bias": True,
    },
}

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


@dataclass(frozen=True)
class Device:
    """A device's memory (bytes), dense bf16 peak (FLOP/s; float32 for the CPU) and memory bandwidth (B/s)."""
    name: str
    memory: float
    flops: float
    bandwidth: float
    note: str = ""


DEVICES: dict[str, Device] = {
    "H200": Device("H200", 141 * GB, 989e12, 4.8e12, "NVIDIA H200 SXM: 141 GB HBM3e, 989 TFLOP/s dense bf16"),
    "H100": Device("H100", 80 * GB, 989e12, 3.35e12, "NVIDIA H100 SXM: 80 GB HBM3, 989 TFLOP/s dense bf16"),
    "A100-80GB": Device("A100-80GB", 80 * GB, 312e12, 2.04e12, "NVIDIA A100 SXM 80 GB: 312 TFLOP/s dense bf16"),
    "CPU": Device("CPU", 64 * GB, 1e12, 50e9, "a 16-core server CPU: ~1 TFLOP/s float32, ~50 GB/s; 64 GB RAM"),
}
"""Vendor datasheet numbers (dense, no sparsity)."""


@dataclass(frozen=True)
class Shapes:
    """What the plan reads from a config.json."""
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool = True
    bias: bool = False
    qk_norm: bool = False
    sliding_window: int | None = None
    sliding_every: int = 0
    """Every ``sliding_every``-th layer is global, the rest slide (Gemma 3: 6); 0: none slide."""
    extra_params: int = 0
    """Parameters outside the text tower (a vision tower and its projector)."""
    dtype: str = "bfloat16"

    @property
    def params(self) -> int:
        """The parameter count: embeddings (and an untied head), attention, MLP and norms of every layer."""
        h, hd = self.hidden, self.head_dim
        attn = h * self.heads * hd * 2 + h * self.kv_heads * hd * 2
        if self.bias:
            attn += self.heads * hd + 2 * self.kv_heads * hd
        norms = 4 * h + 2 * hd if self.qk_norm else 2 * h  # Gemma 3: four norms and q/k norms per layer
        layer = attn + 3 * h * self.intermediate + norms
        return self.vocab * h * (1 if self.tied else 2) + self.layers * layer + h + self.extra_params

    def kv_tokens(self, tokens: int) -> int:
        """Tokens of KV cache summed over the layers for a sequence of ``tokens``."""
        if not self.sliding_window or not self.sliding_every:
            return self.layers * tokens
        n_global = self.layers // self.sliding_every
        return n_global * tokens + (self.layers - n_global) * min(tokens, self.sliding_window)


def shapes_from_config(cfg: dict, dtype: str | None = None) -> Shapes:
    """:class:`Shapes` of a config.json (its ``text_config`` for a multimodal model; the vision tower's
    parameters, when it has one, as :attr:`Shapes.extra_params`). ``dtype``: the dtype it runs in (default the
    config's ``torch_dtype``/``dtype``, else bfloat16)."""
    t = cfg.get("text_config") or cfg
    try:
        h, layers, heads = int(t["hidden_size"]), int(t["num_hidden_layers"]), int(t["num_attention_heads"])
        inter, vocab = int(t["intermediate_size"]), int(t.get("vocab_size") or cfg["vocab_size"])
    except KeyError as exc:
        raise ValueError(f"config.json has no {exc.args[0]}: cannot plan this model") from None
    extra = 0
    v = cfg.get("vision_config")
    if v:  # SigLIP (Gemma 3's vision tower) and the projector into the text width
        vh, vi, ps = int(v["hidden_size"]), int(v["intermediate_size"]), int(v.get("patch_size", 14))
        mlp = 2 * vh * vi + vi + vh
        layer = 4 * (vh * vh + vh) + mlp + 4 * vh
        patches = (int(v.get("image_size", 896)) // ps) ** 2
        extra = int(v["num_hidden_layers"]) * layer + 3 * ps * ps * vh + vh + patches * vh + 2 * vh + vh * h + vh
        if v.get("vision_use_head", True):
            extra += vh + 4 * (vh * vh + vh) + 2 * vh + mlp
    window = t.get("sliding_window")
    every = int(t.get("sliding_window_pattern") or 0)
    if window and not every and t.get("layer_types"):
        kinds = t["layer_types"]
        every = len(kinds) // max(1, sum(k == "full_attention" for k in kinds))
    tied = cfg.get("tie_word_embeddings", t.get("tie_word_embeddings", True))
    kind = str(t.get("model_type") or cfg.get("model_type") or "")
    return Shapes(hidden=h, intermediate=inter, layers=layers, heads=heads,
                  kv_heads=int(t.get("num_key_value_heads") or heads),
                  head_dim=int(t.get("head_dim") or h // heads), vocab=vocab, tied=bool(tied),
                  bias=bool(t.get("attention_bias", kind.startswith("qwen2"))), qk_norm=kind.startswith("gemma3"),
                  sliding_window=int(window) if window else None,
                  sliding_every=every, extra_params=extra,
                  dtype=dtype or str(cfg.get("torch_dtype") or cfg.get("dtype") or t.get("dtype") or "bfloat16"))


def model_config(model: str) -> dict:
    """The config.json of ``model``: an embedded preset (:data:`PRESET_CONFIGS`), a local directory, or a Hugging
    Face id in the local cache. Never downloads."""
    if model in PRESET_CONFIGS:
        return PRESET_CONFIGS[model]
    p = Path(model).expanduser()
    if p.is_dir() and (p / "config.json").is_file():
        return json.loads((p / "config.json").read_text(encoding="utf-8"))
    from huggingface_hub import try_to_load_from_cache
    cached = try_to_load_from_cache(model, "config.json")
    if isinstance(cached, str):
        return json.loads(Path(cached).read_text(encoding="utf-8"))
    raise ValueError(f"model {model!r}: no config.json here (not a planned preset, a local directory or a cached "
                     f"Hugging Face id); presets: {', '.join(PRESET_CONFIGS)}")


@dataclass(frozen=True)
class Workload:
    """What a run does: items, prompt tokens (the longest, which sets a batch's width, and the mean), mode and
    generated tokens, batch, the cached sites (0: no cache) and their storage dtype, probe and training."""
    items: int
    prompt_tokens: int
    mean_prompt_tokens: int | None = None
    mode: str = "answer"
    new_tokens: int = 8
    batch_size: int = 8
    cache_sites: int = 0
    cache_dtype: str = "bfloat16"
    cache_batch_size: int | None = None
    probe_rows: int = 0
    train_batch: int = 0
    """Pairs per learned-intervention step (0: no training stage)."""


@dataclass
class Plan:
    """Predicted bytes and seconds; :meth:`table` prints them, :meth:`fits` compares the peak with a device."""
    model: str
    device: Device
    shapes: Shapes
    work: Workload
    gpu: dict[str, float] = field(default_factory=dict)
    host: dict[str, float] = field(default_factory=dict)
    disk: dict[str, float] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    efficiency: float = 0.4

    @property
    def peak_gpu(self) -> float:
        return max(self.gpu.values()) if self.gpu else 0.0

    def fits(self) -> bool:
        return self.peak_gpu <= self.device.memory

    def refusal(self) -> str | None:
        """None when every stage fits on the device; else one line naming the stage and what to change."""
        over = [(k, v) for k, v in self.gpu.items() if v > self.device.memory]
        if not over:
            return None
        where = f"{self.model} does not fit on {self.device.name} ({self.device.memory / GB:.0f} GB)"
        if self.gpu["weights"] > self.device.memory:
            return f"{where}: stage weights needs {self.gpu['weights'] / GB:.1f} GB; use a larger device"
        k, v = max(over, key=lambda kv: kv[1])
        fit = auto_batch_size(self.device.memory, self.shapes, self.work.prompt_tokens + self.work.new_tokens)
        return (f"{where}: stage {k} needs {v / GB:.1f} GB; lower batch_size (the decision stage fits at batch "
                f"{fit}) or use a larger device")

    def table(self) -> str:
        """The plan as text: one line per stage and resource."""
        w, s = self.work, self.shapes
        lines = [f"plan: {self.model} on {self.device.name} ({self.device.note})",
                 f"  model: {s.params / 1e9:.2f}B parameters ({s.layers} layers, hidden {s.hidden}, heads "
                 f"{s.heads}/{s.kv_heads} kv, head dim {s.head_dim}, vocab {s.vocab}) in {s.dtype}",
                 f"  work: {w.items:,} items, prompts up to {w.prompt_tokens} tokens (mean "
                 f"{w.mean_prompt_tokens or w.prompt_tokens}), mode {w.mode} (+{w.new_tokens} tokens), batch "
                 f"{w.batch_size}, cached sites {w.cache_sites} ({w.cache_dtype})",
                 "  GPU memory (peak per stage):"]
        lines += [f"    {k:<22} {v / GB:9.2f} GB" for k, v in self.gpu.items()]
        lines.append(f"    {'device memory':<22} {self.device.memory / GB:9.2f} GB -> "
                     f"{'fits' if self.fits() else 'DOES NOT FIT'}")
        if self.device.name != "CPU":
            lines.append(f"    {'largest batch fitting':<22} {auto_batch_size(self.device.memory, s, w.prompt_tokens + w.new_tokens):9d}"
                         f" (decisions, 85% of the device)")
        lines.append("  host memory (peak):")
        lines += [f"    {k:<22} {v / GB:9.2f} GB" for k, v in self.host.items()]
        lines.append("  disk:")
        lines += [f"    {k:<22} {v / GB:9.2f} GB" for k, v in self.disk.items() if k != "cache shards"]
        if "cache shards" in self.disk:
            lines.append(f"    {'cache shard files':<22} {self.disk['cache shards']:9,.0f}")
        lines.append(f"  time on {self.device.name} (at {self.efficiency:.0%} of peak FLOP/s and bandwidth):")
        lines += [f"    {k:<22} {_duration(v):>12}" for k, v in self.seconds.items()]
        lines.append(f"    {'total':<22} {_duration(sum(self.seconds.values())):>12}")
        return "\n".join(lines)


def _duration(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else (f"{s / 60:.1f} min" if s < 7200 else f"{s / 3600:.1f} h")


def forward_bytes(s: Shapes, batch: int, tokens: int, eager: bool = False) -> float:
    """Activations of one forward of ``batch`` sequences of ``tokens`` (module docstring), in bytes; ``eager``:
    the attention scores are materialised (eager attention; SDPA's kernels, the presets', do not)."""
    b = DTYPE_BYTES.get(s.dtype, 2)
    acts = batch * tokens * (ACT_HIDDEN * s.hidden + MLP_COPIES * s.intermediate) * b
    scores = batch * s.heads * tokens * tokens * b if eager else 0
    logits = batch * s.vocab * 4 * 2
    return acts + scores + logits


def kv_bytes(s: Shapes, batch: int, tokens: int) -> float:
    """The KV cache of ``batch`` sequences of ``tokens``, in bytes."""
    return 2 * s.kv_heads * s.head_dim * DTYPE_BYTES.get(s.dtype, 2) * batch * s.kv_tokens(tokens)


def decision_bytes(s: Shapes, batch: int, tokens: int) -> float:
    """The decision stage's device memory at a batch beyond the weights: KV cache and one forward."""
    return kv_bytes(s, batch, tokens) + forward_bytes(s, batch, tokens)


def auto_batch_size(free_bytes: float, s: Shapes, tokens: int, headroom: float = 0.85,
                    most: int = 256) -> int:
    """The largest batch (a power of two, at most ``most``) whose decision stage (:func:`decision_bytes`) fits in
    ``headroom`` x ``free_bytes`` minus the weights (which are on the device when it is called with the free
    memory before loading: pass the total free bytes). 1 when even one sequence does not fit (the run's OOM
    recovery then has the last word)."""
    budget = headroom * free_bytes - s.params * DTYPE_BYTES.get(s.dtype, 2)
    batch = 1
    while batch * 2 <= most and decision_bytes(s, batch * 2, tokens) <= budget:
        batch *= 2
    return batch


FALLBACK_BATCH_SIZE = 8
"""The batch size off CUDA (and for a model whose shapes are unknown)."""


def default_batch_size(lm, tokens: int) -> int:
    """The batch size of a loaded model when none is given: on CUDA, :func:`auto_batch_size` of the device's free
    memory plus the weights already on it (the model's shapes from its config, its dtype, ``tokens`` per
    sequence, prompt and generation); elsewhere, or for a model without a Hugging Face config,
    :data:`FALLBACK_BATCH_SIZE`."""
    model = getattr(lm, "model", None)
    config = getattr(model, "config", None)
    if config is None or not str(getattr(lm, "device", "")).startswith("cuda"):
        return FALLBACK_BATCH_SIZE
    import torch
    free, _ = torch.cuda.mem_get_info(torch.device(lm.device))
    shapes = shapes_from_config(config.to_dict(), str(lm.dtype))
    return auto_batch_size(free + shapes.params * DTYPE_BYTES.get(shapes.dtype, 2), shapes, tokens)


def plan(model: str, shapes: Shapes, work: Workload, device: Device, efficiency: float = 0.4) -> Plan:
    """The :class:`Plan` of ``work`` with ``shapes`` on ``device`` (``efficiency``: the fraction of peak FLOP/s
    and bandwidth reached)."""
    b = DTYPE_BYTES.get(shapes.dtype, 2)
    weights = shapes.params * b
    tokens = work.prompt_tokens + (work.new_tokens if work.mode != "logprob" else 0)
    mean_tokens = (work.mean_prompt_tokens or work.prompt_tokens)
    p = Plan(model, device, shapes, work, efficiency=efficiency)
    p.gpu["weights"] = weights
    p.gpu["decisions"] = weights + decision_bytes(shapes, work.batch_size, tokens)
    cbs = work.cache_batch_size or work.batch_size
    if work.cache_sites:
        p.gpu["cache writer"] = (weights + forward_bytes(shapes, cbs, work.prompt_tokens)
                                 + cbs * work.prompt_tokens * work.cache_sites * shapes.hidden * CACHE_TRACE_BYTES)
    if work.probe_rows:
        per_site = work.probe_rows * shapes.hidden * 4.0
        if device.name == "CPU":
            p.gpu["probe solver"] = PROBE_COPIES * per_site
        else:  # one group of as many sites as 80% of the device holds
            group = max(1, min(work.cache_sites or 1, int(0.8 * device.memory // (PROBE_GROUP_FACTOR * per_site))))
            p.gpu["probe solver"] = group * PROBE_GROUP_FACTOR * per_site
    if work.train_batch:
        tok = work.prompt_tokens
        p.gpu["learned training"] = weights + 2 * (work.train_batch * tok * shapes.layers / 2
                                                   * (ACT_HIDDEN * shapes.hidden + MLP_COPIES * shapes.intermediate) * b)
    # host: the load streams to the device (device_map); on the CPU the weights live on the host
    on_cpu = device.name == "CPU"
    cache_store = DTYPE_BYTES.get(work.cache_dtype, 2)
    p.host["load"] = weights if on_cpu else min(weights, HUB_SHARD)
    if work.cache_sites:
        p.host["probe (one site)"] = work.items * shapes.hidden * 4.0 * 1.5
    if on_cpu:  # the weights are read from the mmapped files into the process (counted once)
        p.host["decisions"] = HOST_RUNTIME + p.gpu["decisions"]
        p.gpu = {}
    n_batches = math.ceil(work.items / work.batch_size)
    p.disk["decisions"] = work.items * DECISION_ROW_BYTES.get(work.mode, 500)
    if work.cache_sites:
        shards = math.ceil(work.items / cbs)
        p.disk["activation cache"] = (work.items * work.cache_sites * shapes.hidden * cache_store
                                      + shards * (SHARD_OVERHEAD * work.cache_sites + 8)
                                      + work.items * ITEM_ID_BYTES)
        p.disk["cache shards"] = shards
    flops, bw = device.flops * efficiency, device.bandwidth * efficiency
    text_params = shapes.params - shapes.extra_params
    prefill = 2 * text_params * work.items * mean_tokens / flops
    decode = 0.0
    if work.mode != "logprob":
        per_step = weights + kv_bytes(shapes, work.batch_size, tokens)
        decode = n_batches * work.new_tokens * (per_step / bw + (0.0 if device.name == "CPU" else DECODE_STEP_S))
    p.seconds["decisions"] = prefill + decode
    if work.cache_sites:
        p.seconds["cache"] = prefill
    if work.probe_rows:  # memory-bound: every pass over a site's matrix reads it once
        fits = PROBE_FOLDS * (PROBE_INNER * PROBE_CS + 1) * 2
        p.seconds["probes"] = (work.cache_sites * fits * PROBE_PASSES * work.probe_rows * shapes.hidden * 4.0
                               / (device.bandwidth * efficiency))
    return p
