"""Reading a model's residual stream for fitting: at the last token of token sequences, or at every token.

:func:`prompt_ids` and :func:`answer_sequences` build the sequences (a prompt as the model reads it; the
prompt completed with each slot's label up to its answer token, for contrastive activation addition);
:func:`last_token_activations` and :func:`token_states` read sites on them with forward hooks registered
after any :func:`steering.hooks.steer` edit, so inside a ``steer`` block they read the edited values
(how LEACE is fitted layer by layer on activations already erased upstream).
"""
from __future__ import annotations

import numpy as np

from .fitted import InterventionError
from evenhand.prompts import uses_chat_template
from evenhand.prompts import model_text, user_message
from evenhand.engine.scoring import label_token_ids
from evenhand.prompts import labels
from evenhand.engine.batching import left_pad
from evenhand.models.sites import module, resolve


def adds_special_tokens(lm) -> bool:
    return not uses_chat_template(lm.tokenizer)


def prompt_ids(lm, item: dict) -> list[int]:
    """The token ids the model reads for ``item`` (answer prompt, chat template applied)."""
    text = model_text(lm.tokenizer, user_message(item, "answer"))
    return lm.tokenizer(text, add_special_tokens=adds_special_tokens(lm))["input_ids"]


def answer_sequences(lm, item: dict) -> dict[str, list[int]]:
    """Slot -> the prompt completed with that slot's label up to its answer token (the first token where the two
    labels differ, e.g. the letter of "Candidate A"): the sequences whose last position CAA reads."""
    text = model_text(lm.tokenizer, user_message(item, "answer"))
    (ctx, ca), (_, cb) = (label_token_ids(lm.tokenizer, text, lab, adds_special_tokens(lm)) for lab in labels(item))
    k = next((j for j, (x, y) in enumerate(zip(ca, cb)) if x != y), None)
    if k is None:
        raise InterventionError(f"the labels of item {item['item_id']!r} tokenise identically")
    return {"A": list(ctx) + list(ca[:k + 1]), "B": list(ctx) + list(cb[:k + 1])}


def last_token_activations(lm, seqs: list[list[int]], sites: list[str], batch_size: int = 32,
                           progress: bool = False) -> dict[str, np.ndarray]:
    """The value of each site at the last token of each sequence (float32 [n, d], rows in order).

    Read by :func:`steering.hooks.observe`, whose hooks run after any :func:`steering.hooks.steer` edit on the
    same site, so inside a ``steer`` block the values are the edited ones."""
    import torch
    from tqdm.auto import tqdm

    from steering.hooks import observe  # deferred: pulls in torch
    model = lm.model
    out: dict[str, list] = {s: [] for s in sites}
    with observe(model, sites, take=lambda h: h[:, -1].float().cpu()) as store, torch.inference_mode():
        for i in tqdm(range(0, len(seqs), batch_size), disable=not progress, desc="activations"):
            ids, mask, pos = left_pad(seqs[i:i + batch_size], lm.tokenizer.pad_token_id, model.device)
            model(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=1)
            for s in sites:
                out[s].append(store[s].pop().numpy())
    return {s: np.concatenate(v).astype(np.float32) for s, v in out.items()}


def token_states(lm, seqs: list[list[int]], site: str, batch_size: int = 32) -> list[np.ndarray]:
    """The value of ``site`` at every token of each sequence (float32 [len, d] per sequence, in order; read by
    :func:`steering.hooks.observe`)."""
    import torch

    from steering.hooks import observe  # deferred: pulls in torch
    model = lm.model
    out = []
    with observe(model, [site], take=lambda h: h.float().cpu()) as store, torch.inference_mode():
        for i in range(0, len(seqs), batch_size):
            chunk = seqs[i:i + batch_size]
            ids, mask, pos = left_pad(chunk, lm.tokenizer.pad_token_id, model.device)
            model(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=1)
            h = store[site].pop().numpy()
            out += [h[j, h.shape[1] - len(q):] for j, q in enumerate(chunk)]
    return out
