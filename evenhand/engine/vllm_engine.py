"""The vLLM decision engine (``engine: vllm``, :data:`ENGINE`): answer and reasoning modes on vLLM.

Hugging Face stays the default engine and the reference; this one gives the same response rows
faster on long generations (continuous batching, a paged KV cache, automatic prefix caching)."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar

from ..models.loading import (ModelLoadError, ModelSpec, display_name, load_model, load_tokenizer, locate,
                              resolve_spec, weights_fingerprint)
from .registry import Batch

CPU_KV_CACHE_GIB = 2
"""The KV cache vLLM's CPU backend reserves when ``VLLM_CPU_KVCACHE_SPACE`` is not set (GiB)."""
SHARED_GPU_UTILIZATION = 0.5
"""The share of the GPU vLLM takes when a Hugging Face model shares it (a comparison with ``engine: vllm``)."""


@dataclass
class VllmModel:
    """A model loaded for the vLLM engine: the ``vllm.LLM``, the tokenizer EvenHand tokenises and decodes
    with, the spec, display name and source, device and dtype, the end-of-sequence token ids generation
    stops at, and ``meta["weights"]`` (the weight files' fingerprint, as :class:`LoadedModel` has)."""
    llm: object
    tokenizer: object
    spec: ModelSpec
    name: str
    source: str
    device: str
    dtype: str
    eos_ids: tuple[int, ...]
    architecture: str
    meta: dict = field(default_factory=dict)
    engine: ClassVar[str] = "vllm"
    """The engine this model decides with (:func:`evenhand.engine.registry.engine_of`)."""

    def describe(self) -> dict:
        """What a run's manifest records about the model (the fields :meth:`LoadedModel.describe` has, and
        ``engine``)."""
        return {"name": self.name, "source": self.source, "architecture": self.architecture, "device": self.device,
                "dtype": self.dtype, "spec": {k: getattr(self.spec, k) for k in self.spec.__dataclass_fields__},
                "weights": self.meta.get("weights"), "engine": "vllm"}

    def close(self) -> None:
        """Shut vLLM's engine down (its worker process and memory)."""
        engine = getattr(self.llm, "llm_engine", None)
        core = getattr(engine, "engine_core", None)
        if core is not None and hasattr(core, "shutdown"):
            core.shutdown()
        self.llm = None


def _device() -> str:
    import torch
    return "cuda" if torch.cuda.is_available() else "cpu"


def _eos_ids(where: str, tokenizer) -> tuple[int, ...]:
    """The end-of-sequence ids Hugging Face generation stops at: the model's generation config, else the
    tokenizer's end-of-sequence token."""
    from transformers import GenerationConfig
    try:
        eos = GenerationConfig.from_pretrained(where).eos_token_id
    except OSError:
        eos = None
    if eos is None:
        eos = tokenizer.eos_token_id
    return tuple(sorted({int(e) for e in (eos if isinstance(eos, list) else [eos]) if e is not None}))


def load_vllm(spec: ModelSpec | str, *, gpu_memory_utilization: float = 0.85, max_model_len: int | None = None,
              enforce_eager: bool | None = None, **options: object) -> VllmModel:
    """Load ``spec`` (a :class:`ModelSpec` or what its ``model`` field takes) for the vLLM engine.

    ``options`` set other ModelSpec fields, as in :func:`evenhand.models.loading.load_model`. The dtype
    is the Hugging Face engine's (``auto``: bfloat16 on GPU, float32 on CPU). ``gpu_memory_utilization``
    is the share of the GPU vLLM takes for weights and KV cache (lower it when a Hugging Face model
    shares the GPU); on CPU the KV cache is ``VLLM_CPU_KVCACHE_SPACE`` GiB (:data:`CPU_KV_CACHE_GIB`
    when unset) and vLLM's engine core runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0`` unless set).
    ``enforce_eager`` (default: on CPU only) turns off torch.compile and CUDA graphs: on CPU the
    compilation took 414 s for a tiny model on two shared cores, more than it can save in a test run.
    ``max_model_len`` defaults to the model's. Raises :class:`ModelLoadError` for a GGUF
    model (dequantise it first: :func:`save_dequantized`), for ``trust_remote_code`` (vLLM loads no
    remote code here) and when vLLM is not installed (the ``vllm`` extra).

    The model is a ``vllm.LLM`` (greedy, automatic prefix caching on, no remote code, vLLM's own tokenizer not
    loaded) beside the tokenizer the Hugging Face engine uses (:func:`evenhand.models.loading.load_tokenizer`).
    Prompts are tokenised and chat-templated by EvenHand exactly as for Hugging Face and handed to vLLM as token
    ids; the generated token ids are decoded with the same tokenizer (vLLM's own text can differ: a leading space
    with a word-level tokenizer)."""
    if options:
        spec = replace(ModelSpec(spec) if isinstance(spec, str) else spec, **options)
    spec = resolve_spec(spec)
    if spec.trust_remote_code:
        raise ModelLoadError("the vllm engine loads no remote code: use engine hf for a model that needs "
                             "trust_remote_code")
    where, gguf, source = locate(spec)
    if gguf:
        raise ModelLoadError(f"vLLM 0.32 has no GGUF loader ({source}): dequantise the model to safetensors "
                             f"first (evenhand.engine.vllm_engine.save_dequantized) and load that directory")
    try:
        from vllm import LLM
    except ImportError as exc:
        raise ModelLoadError(f"the vllm engine needs vLLM: pip install -e '.[vllm]' (docs/GUIDE.md: Engines); {exc}") \
            from None
    device = _device() if spec.device == "auto" else spec.device
    dtype = spec.dtype if spec.dtype != "auto" else ("bfloat16" if device.startswith("cuda") else "float32")
    if device == "cpu":
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(CPU_KV_CACHE_GIB))
        # the engine core in this process: a spawned one re-imports the caller's main module, which a
        # script without a __main__ guard (or pytest) does not survive
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    kw = {"revision": spec.revision} if spec.revision else {}
    tok = load_tokenizer(where, {"trust_remote_code": False, **kw})
    cfg = json.loads((Path(where) / "config.json").read_text()) if (Path(where) / "config.json").is_file() else {}
    if "Gemma3ForConditionalGeneration" in (cfg.get("architectures") or []):
        try:  # vLLM's module for this class imports it (torchvision) before anything starts
            import transformers.models.gemma3.image_processing_gemma3  # noqa: F401
        except ImportError as exc:
            raise ModelLoadError(f"vLLM 0.32 runs Gemma3ForConditionalGeneration ({source}) only where torchvision "
                                 f"imports ({exc}): install the torchvision build that matches your torch (a GPU "
                                 f"install of vllm brings it), or use engine hf") from None
    # language_model_only: EvenHand sends token ids of text only, and a multimodal class (gemma-3-12b-it loads as
    # Gemma3ForConditionalGeneration) then starts without its image processor, which vLLM 0.32 cannot build
    # without the tokenizer skip_tokenizer_init leaves out (a ValueError at start-up); text-only classes ignore it
    llm = LLM(model=where, skip_tokenizer_init=True, dtype=dtype, enable_prefix_caching=True, trust_remote_code=False,
              seed=0, max_model_len=max_model_len, gpu_memory_utilization=gpu_memory_utilization,
              enforce_eager=(device == "cpu") if enforce_eager is None else enforce_eager, language_model_only=True,
              **kw)
    return VllmModel(llm=llm, tokenizer=tok, spec=spec, name=display_name(spec), source=source, device=device,
                     dtype=dtype, eos_ids=_eos_ids(where, tok), architecture=cfg.get("model_type", "unknown"),
                     meta={"weights": weights_fingerprint(where, None, spec.revision)})


def generate_ids(vm: VllmModel, seqs: list[list[int]], max_new: int) -> list[dict]:
    """One greedy continuation of at most ``max_new`` tokens per prompt (token ids), in input order: rows of
    ``text`` (the tokens up to and including the first end-of-sequence token, decoded with our tokenizer
    without special tokens), ``n_new_tokens``, ``gen_logprob`` (the summed log-probability of those tokens)
    and ``n_prompt_tokens`` — the rows of :func:`evenhand.engine.generation.greedy_generate`. It is
    :func:`evenhand.engine.generation.generate`'s vLLM path.

    vLLM's batches are not batch-invariant: a near-tie between two tokens can break the other way than under
    Hugging Face (tests/test_vllm_engine.py states the tolerance measured)."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt
    if not seqs:
        return []
    params = SamplingParams(temperature=0.0, max_tokens=max_new, logprobs=0, stop_token_ids=list(vm.eos_ids),
                            detokenize=False)
    outs = vm.llm.generate([TokensPrompt(prompt_token_ids=list(s)) for s in seqs], params, use_tqdm=False)
    eos = set(vm.eos_ids)
    rows = []
    for s, o in zip(seqs, outs):
        c = o.outputs[0]
        toks = list(c.token_ids)
        n = next((j + 1 for j, t in enumerate(toks) if t in eos), len(toks))
        lps = [step[t].logprob for step, t in zip(c.logprobs or [], toks)]
        if len(lps) < n:
            raise RuntimeError(f"vLLM returned {len(lps)} log-probabilities for {n} generated tokens")
        rows.append({"text": vm.tokenizer.decode(toks[:n], skip_special_tokens=True), "n_new_tokens": n,
                     "gen_logprob": float(sum(lps[:n])), "n_prompt_tokens": len(s)})
    return rows


class VllmEngine:
    """The :class:`~.registry.Engine` on vLLM (module docstring), declared to the registry: modes answer and
    reasoning, prefixes reused automatically (vLLM's prefix caching), no Hugging Face model (decisions only).
    Logprob mode stays on Hugging Face: it is one forward pass with ``logits_to_keep`` there."""
    name = "vllm"
    modes = ("answer", "reasoning")
    prefix_reuse = "automatic"
    hf_model = False

    def load(self, spec, *, shares_gpu: bool = False) -> VllmModel:
        return load_vllm(spec, **({"gpu_memory_utilization": SHARED_GPU_UTILIZATION} if shares_gpu else {}))

    def generate(self, lm: VllmModel, batch: Batch, max_new: int, min_prefix: int) -> list[dict]:
        return generate_ids(lm, batch.ids, max_new)

    def score_labels(self, lm: VllmModel, batch: Batch, min_prefix: int) -> list[dict]:
        raise ValueError("the vllm engine runs answer and reasoning modes; logprob mode runs on engine hf")


ENGINE = VllmEngine()


def save_dequantized(spec: ModelSpec | str, out: str | Path) -> Path:
    """Write ``spec`` (for instance a GGUF model) as a float32 safetensors checkpoint with its tokenizer to
    ``out``, loaded and dequantised by Hugging Face, for vLLM to load (vLLM 0.32 has no GGUF loader)."""
    lm = load_model(spec, dtype="float32", device="cpu")
    out = Path(out)
    lm.model.hf_quantizer = None  # save_pretrained refuses a model still marked as GGUF-quantised
    lm.model.config.quantization_config = None
    if hasattr(lm.model.config, "__dict__"):
        lm.model.config.__dict__.pop("quantization_config", None)
    lm.model.save_pretrained(out)
    lm.tokenizer.save_pretrained(out)
    lm.model.generation_config.save_pretrained(out)
    return out
