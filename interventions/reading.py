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
from evenhand.engine.batching import Halving, left_pad
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
    same site, so inside a ``steer`` block they read the edited values. Batches halve on out-of-memory
    (:func:`read_batches`)."""
    rows = read_batches(lm, seqs, sites, batch_size, lambda h, idx: h[:, -1], progress)
    return {s: np.stack([r[s] for r in rows]).astype(np.float32) for s in sites}


def read_batches(lm, seqs: list[list[int]], sites: list[str], batch_size: int, pick, progress: bool = False,
                 desc: str = "activations") -> list[dict]:
    """One dict per sequence (in order): site -> its row of ``pick(h, idx)`` as a float32 numpy array.

    ``h`` is the site's hidden state on the device [batch, width, d], left-padded, and ``idx`` the indices in
    ``seqs`` of the batch's sequences (row ``k`` holds ``seqs[idx[k]]`` in its last ``len(seqs[idx[k]])``
    positions); ``pick`` returns a tensor with one row per sequence (the last token) or a list of one tensor per
    sequence. It runs inside the hook, so only
    what it keeps reaches the host: a reduction (a last token, a span mean) never holds every token of the
    batch. The forward runs under ``inference_mode`` in batches of at most ``batch_size`` that halve on
    out-of-memory (:class:`~evenhand.engine.batching.Halving`, which frees the failed batch first); the store is
    emptied before each attempt, so a failed batch leaves nothing behind."""
    import torch
    from tqdm.auto import tqdm

    from steering.hooks import observe  # deferred: pulls in torch
    model = lm.model
    halving = Halving(batch_size)
    batch: list[int] = []

    def take(h):
        kept = pick(h, batch)
        if isinstance(kept, torch.Tensor):
            return list(kept.float().cpu().numpy())
        return [x.float().cpu().numpy() for x in kept]

    out: list[dict] = []
    with observe(model, sites, take=take) as store, torch.inference_mode():
        def run(idx: list[int]) -> list[dict]:
            for v in store.values():
                v.clear()
            batch[:] = idx
            ids, mask, pos = left_pad([seqs[j] for j in idx], lm.tokenizer.pad_token_id, model.device)
            model(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=1)
            rows = {s: store[s].pop() for s in sites}
            return [{s: rows[s][k] for s in sites} for k in range(len(idx))]

        for i in tqdm(range(0, len(seqs), batch_size), disable=not progress, desc=desc):
            out += halving.run(run, list(range(i, min(i + batch_size, len(seqs)))))
    return out


def token_states(lm, seqs: list[list[int]], site: str, batch_size: int = 32) -> list[np.ndarray]:
    """The value of ``site`` at every token of each sequence (float32 [len, d] per sequence, in order; read by
    :func:`steering.hooks.observe`, batches halving on out-of-memory as in :func:`read_batches`)."""
    return [r[site] for r in read_batches(lm, seqs, [site], batch_size, lambda h, idx: [
        h[k, h.shape[1] - len(seqs[j]):] for k, j in enumerate(idx)])]
