"""The Hugging Face engine (``engine: hf``, the default and the reference): every mode, prefix reuse as an option.

Generation is :mod:`.generation` (``model.generate``, greedy, the KV cache on), label scoring :mod:`.scoring` (one
forward pass with ``logits_to_keep``); with ``prefix_reuse`` both run prefixes shared by several prompts once
(:mod:`.prefix`).
"""
from __future__ import annotations

from . import generation, scoring
from .registry import MODES, Batch
from ..models.loading import load_model


class HFEngine:
    """The :class:`~.registry.Engine` on a Hugging Face model (:class:`~evenhand.models.loading.LoadedModel`)."""
    name = "hf"
    modes = MODES
    prefix_reuse = "option"
    hf_model = True

    def load(self, spec, *, shares_gpu: bool = False):
        return load_model(spec)

    def generate(self, lm, batch: Batch, max_new: int, min_prefix: int) -> list[dict]:
        if min_prefix:
            return generation.generate_with_prefix(lm, batch.texts, batch.ids, batch.special, max_new, min_prefix)
        return generation.generate(lm, batch.texts, batch.special, max_new)

    def score_labels(self, lm, batch: Batch, min_prefix: int) -> list[dict]:
        return scoring.score_labels(lm, batch.texts, batch.items, batch.special, min_prefix)


ENGINE = HFEngine()
