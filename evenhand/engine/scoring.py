"""Label scoring: the summed log-probability of each full label as a continuation of the prompt.

When the two labels' tokens differ only in the last token (the usual case), one forward pass
scores both; otherwise each label gets its own sequence. With prefix reuse, prefixes shared by
several rows run once (:mod:`.prefix`). This is the hf engine's label scoring (:mod:`.hf_engine`), for Hugging Face models only; a
caller holding a model of any engine goes through :func:`.registry.score_texts`.
"""
from __future__ import annotations

from ..models.loading import LoadedModel
from ..vocab.prompts import continuation, labels
from . import prefix
from .batching import left_pad
from .positions import answer_tokens


def label_token_ids(tok, text: str, label: str, special: bool) -> tuple[list[int], list[int]]:
    """(context ids, label continuation ids), splitting the joint tokenisation at the context."""
    ctx = tok(text, add_special_tokens=special)["input_ids"]
    full = tok(text + continuation(text, label), add_special_tokens=special)["input_ids"]
    if full[:len(ctx)] == ctx and len(full) > len(ctx):
        return ctx, full[len(ctx):]
    return ctx, tok(continuation(text, label), add_special_tokens=False)["input_ids"]


def score_labels(lm: LoadedModel, texts: list[str], items: list[dict], special: bool,
                 min_prefix: int = 0) -> list[dict]:
    """Both labels' log-probabilities per item: rows of ``logprob_A``, ``logprob_B``,
    ``n_prompt_tokens``, ``n_new_tokens`` (0) and ``logprob_forwards`` (1 or 2 sequences).

    With ``min_prefix`` > 0, prefixes shared by at least that many tokens run once
    (:func:`.prefix.prefix_prefill`) when it pays, and each row says how many prompt tokens it
    took from a shared prefix (``n_shared_prefix_tokens``)."""
    import torch
    tok, model = lm.tokenizer, lm.model
    seqs, tails, plan = [], [], []
    for text, item in zip(texts, items):
        la, lb = labels(item)
        ctx, ca = label_token_ids(tok, text, la, special)
        _, cb = label_token_ids(tok, text, lb, special)
        if len(ca) == len(cb) and ca[:-1] == cb[:-1]:
            plan.append(("shared", len(seqs), ca, cb, len(ctx)))
            seqs.append(ctx + ca)
            tails.append(len(ca) + 1)
        else:
            plan.append(("separate", len(seqs), ca, cb, len(ctx)))
            seqs += [ctx + ca, ctx + cb]
            tails += [len(ca) + 1, len(cb) + 1]
    k = max(max(len(p[2]), len(p[3])) for p in plan)
    groups = prefix.prefix_groups(seqs, tails, min_prefix) if min_prefix > 0 else []
    shared = [0] * len(seqs)
    answers = [t - 1 for t in tails]  # each row ends with its label's tokens (positions.py)
    with torch.inference_mode():
        if groups and prefix.reuse_supported(model) and prefix.reuse_pays(seqs, groups):
            cache, ids, mask, pos, shared = prefix.prefix_prefill(lm, seqs, groups)
            with answer_tokens(answers):
                logits = model(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=cache,
                               use_cache=True, logits_to_keep=k + 1).logits
        else:
            ids, mask, pos = left_pad(seqs, tok.pad_token_id, model.device)
            with answer_tokens(answers):
                logits = model(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=k + 1).logits
    logp = torch.log_softmax(logits.float(), dim=-1)  # (n_seq, k+1, V); index j predicts position L-k+j

    def score(row: int, cont: list[int]) -> float:
        n = len(cont)
        return float(sum(logp[row, k - n + t, cont[t]] for t in range(n)))

    rows = []
    for kind, row, ca, cb, n_ctx in plan:
        if kind == "shared":
            n = len(ca)
            common = float(sum(logp[row, k - n + t, ca[t]] for t in range(n - 1)))
            lpa, lpb = common + float(logp[row, k - 1, ca[-1]]), common + float(logp[row, k - 1, cb[-1]])
        else:
            lpa, lpb = score(row, ca), score(row + 1, cb)
        rows.append({"logprob_A": lpa, "logprob_B": lpb, "n_prompt_tokens": n_ctx, "n_new_tokens": 0,
                     "logprob_forwards": 1 if kind == "shared" else 2})
        if min_prefix > 0:
            rows[-1]["n_shared_prefix_tokens"] = shared[row]
    return rows
