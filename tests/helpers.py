"""Shared test helpers."""
from __future__ import annotations

import torch

from evenhand.decide import _left_pad, plan_batches
from evenhand.prompts import model_text, user_message, uses_chat_template


def hf_hidden_states_same_batch(lm, items, batch_size: int):
    """Hugging Face's ``output_hidden_states`` for the first batch the cache would form from ``items``
    (same bucketing, padding and position ids). Returns (item ids in batch order, hidden states)."""
    special = not uses_chat_template(lm.tokenizer)
    texts = [model_text(lm.tokenizer, user_message(r)) for r in items.to_dict("records")]
    enc = [lm.tokenizer(t, add_special_tokens=special)["input_ids"] for t in texts]
    order = plan_batches([len(e) for e in enc], batch_size)[0]
    ids, mask, pos = _left_pad([enc[i] for i in order], lm.tokenizer.pad_token_id, "cpu")
    with torch.inference_mode():
        hs = lm.model(input_ids=ids, attention_mask=mask, position_ids=pos, output_hidden_states=True).hidden_states
    return [items["item_id"].iloc[i] for i in order], hs
