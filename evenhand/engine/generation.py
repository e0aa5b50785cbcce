"""Greedy generation for the engine, with the generated text's log-probability.

:func:`generate` tokenises and left-pads a batch of texts and generates greedily (the KV
cache on); :func:`generate_with_prefix` runs prefixes shared by several texts once first
(:mod:`.prefix`). Each row is ``text`` (decoded up to and including the first end-of-sequence
token), ``n_new_tokens``, ``gen_logprob`` (the summed log-probability of the greedy tokens) and
``n_prompt_tokens``; with prefix reuse also ``n_shared_prefix_tokens``. This is the hf engine's generation
(:mod:`.hf_engine`), for Hugging Face models only; a caller holding a model of any engine goes through
:func:`.registry.generate_texts`, the one place an engine is chosen.
"""
from __future__ import annotations

from typing import Any

from ..models.loading import LoadedModel
from . import prefix


class GreedyLogprob:
    """A logits processor that records, per step, the log-probability of the greedy token
    (max logit minus logsumexp): the generated text's log-probability without keeping scores."""

    def __init__(self) -> None:
        self.steps: list = []

    def __call__(self, input_ids, scores):
        import torch
        s = scores.float()
        self.steps.append(s.max(-1).values - torch.logsumexp(s, -1))
        return scores


def generate(lm: Any, texts: list[str], special: bool, max_new: int) -> list[dict]:
    """One greedy continuation of at most ``max_new`` tokens per text (``special``: add the
    tokenizer's special tokens) on a Hugging Face model; rows as in the module docstring, in input order."""
    tok, model = lm.tokenizer, lm.model
    enc = tok(texts, add_special_tokens=special, padding=True, return_tensors="pt").to(model.device)
    return greedy_generate(lm, enc["input_ids"], enc["attention_mask"], max_new)


def generate_with_prefix(lm: LoadedModel, texts: list[str], seqs: list[list[int]], special: bool, max_new: int,
                         min_prefix: int) -> list[dict]:
    """:func:`generate`, running prefixes shared by ``min_prefix`` tokens or more once (when it pays);
    ``seqs`` are the texts' token ids. Every row has ``n_shared_prefix_tokens`` (0 when none)."""
    import torch
    groups = prefix.prefix_groups(seqs, [1] * len(seqs), min_prefix)
    if not (prefix.reuse_supported(lm.model) and prefix.reuse_pays(seqs, groups)):
        return [dict(row, n_shared_prefix_tokens=0) for row in generate(lm, texts, special, max_new)]
    cache, suffix_ids, mask, _, shared = prefix.prefix_prefill(lm, seqs, groups)
    held = torch.full((len(seqs), mask.shape[1] - suffix_ids.shape[1]), lm.tokenizer.pad_token_id,
                      dtype=suffix_ids.dtype, device=suffix_ids.device)  # stands for the cached columns
    rows = greedy_generate(lm, torch.cat([held, suffix_ids], 1), mask, max_new, cache)
    for row, n in zip(rows, shared):
        row["n_shared_prefix_tokens"] = n
    return rows


def greedy_generate(lm: LoadedModel, ids, mask, max_new: int, cache=None) -> list[dict]:
    """Greedy generation from left-padded ``ids``/``mask``; with ``cache``, its columns are the first
    ``ids`` columns (generate runs only the rest)."""
    import torch
    from transformers import LogitsProcessorList
    tok, model = lm.tokenizer, lm.model
    rec = GreedyLogprob()
    extra = {"past_key_values": cache} if cache is not None else {}
    with torch.inference_mode():
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new, do_sample=False,
                             temperature=None, top_p=None, top_k=None, repetition_penalty=1.0,
                             pad_token_id=tok.pad_token_id, logits_processor=LogitsProcessorList([rec]), **extra)
    width = ids.shape[1]
    new = out[:, width:].tolist()
    step_lp = torch.stack(rec.steps, 1).tolist() if rec.steps else [[] for _ in new]
    eos = model.generation_config.eos_token_id
    eos = set(eos if isinstance(eos, list) else [eos]) - {None}
    rows = []
    for i, toks in enumerate(new):
        n = next((j + 1 for j, t in enumerate(toks) if t in eos), len(toks))
        rows.append({"text": tok.decode(toks[:n], skip_special_tokens=True), "n_new_tokens": n,
                     "gen_logprob": float(sum(step_lp[i][:n])), "n_prompt_tokens": int(mask[i].sum())})
    return rows
