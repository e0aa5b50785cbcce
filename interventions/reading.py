"""The token sequences fitting reads: a prompt as the model reads it, and the prompt completed with each slot's label.

:func:`prompt_ids` and :func:`answer_sequences` build them (the second for contrastive activation addition);
the one activation reader reads sites on them (:mod:`evenhand.engine.reader`: ``last_token_activations``,
``token_states``, ``read_batches``, with forward hooks that run after any ``steer`` edit, so they read the
edited values: how LEACE is fitted layer by layer on activations already erased upstream).
"""
from __future__ import annotations

from .fitted import InterventionError
from evenhand.vocab.prompts import uses_chat_template
from evenhand.vocab.prompts import model_text, user_message
from evenhand.engine.scoring import label_token_ids
from evenhand.vocab.prompts import labels


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
