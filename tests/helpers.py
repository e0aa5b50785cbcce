"""Shared test helpers."""
from __future__ import annotations

import numpy as np
import torch

from evenhand.engine.batching import left_pad, plan_batches
from evenhand.vocab.prompts import model_text, user_message, uses_chat_template


def hf_hidden_states_same_batch(lm, items, batch_size: int):
    """Hugging Face's ``output_hidden_states`` for the first batch the cache would form from ``items``
    (same bucketing, padding and position ids). Returns (item ids in batch order, hidden states)."""
    special = not uses_chat_template(lm.tokenizer)
    texts = [model_text(lm.tokenizer, user_message(r)) for r in items.to_dict("records")]
    enc = [lm.tokenizer(t, add_special_tokens=special)["input_ids"] for t in texts]
    order = plan_batches([len(e) for e in enc], batch_size)[0]
    ids, mask, pos = left_pad([enc[i] for i in order], lm.tokenizer.pad_token_id, "cpu")
    with torch.inference_mode():
        hs = lm.model(input_ids=ids, attention_mask=mask, position_ids=pos, output_hidden_states=True).hidden_states
    return [items["item_id"].iloc[i] for i in order], hs


def tiny_gemma3_multimodal(tok, sliding_window: int):
    """A tiny random ``Gemma3ForConditionalGeneration`` (the class google/gemma-3-12b-it loads as: the text
    tower under ``model.language_model``) for the tokenizer ``tok``, in eval mode."""
    import transformers as tf
    text = dict(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=sliding_window,
                max_position_embeddings=1024)
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=28,
                  patch_size=14)
    cfg = tf.Gemma3Config(text_config=text, vision_config=vision, mm_tokens_per_image=4,
                          image_token_index=len(tok) - 1, boi_token_index=len(tok) - 2, eoi_token_index=len(tok) - 3)
    torch.manual_seed(0)
    model = tf.Gemma3ForConditionalGeneration(cfg).eval()
    model.generation_config.pad_token_id = tok.pad_token_id
    return model


def greedy_and_full(mech, lm, items, beta: float):
    """Per item, the tokens decoded greedily with a KV cache under the dial mechanism ``mech`` at ``beta`` (up to
    the first end of turn) and the argmax of one full pass over prompt + those tokens (declared as answer tokens) at
    the positions predicting them: equal when the mechanism's hooks decode exactly with the cache."""
    from evenhand.engine.positions import answer_tokens
    tok, model = lm.tokenizer, lm.model
    texts = [model_text(tok, user_message(it, "answer")) for it in items.to_dict("records")]
    enc = tok(texts, add_special_tokens=False, padding=True, return_tensors="pt")
    eos = tok.convert_tokens_to_ids("<end_of_turn>")
    with mech.applied(model, beta), torch.inference_mode():
        out = model.generate(**enc, max_new_tokens=8, do_sample=False, temperature=None, top_p=None, top_k=None,
                             pad_token_id=tok.pad_token_id)
        gen = [g[:g.index(eos) + 1] if eos in g else g for g in out[:, enc["input_ids"].shape[1]:].tolist()]
        prompts = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
        ids, mask, pos = left_pad([p + g for p, g in zip(prompts, gen)], tok.pad_token_id, model.device)
        with answer_tokens([len(g) for g in gen]):
            top = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits.argmax(-1)
    w = ids.shape[1]
    return gen, [top[i, w - len(g) - 1:w - 1].tolist() for i, g in enumerate(gen)]


def assert_cache_misuse_refused(mech, lm, ids, mask, pos, beta: float, error) -> None:
    """Under ``mech`` at ``beta``: a decode step extending a KV cache filled outside the mechanism raises ``error``
    ("decode step without its prompt's pass"), and so does a several-token pass extending a cache ("prefix reuse");
    ``ids, mask, pos``: a left-padded batch."""
    import pytest
    with torch.inference_mode():
        out = lm.model(input_ids=ids[:, :-1], attention_mask=mask[:, :-1], position_ids=pos[:, :-1], use_cache=True)
        with mech.applied(lm.model, beta):
            with pytest.raises(error, match="decode step without its prompt's pass"):
                lm.model(input_ids=ids[:, -1:], attention_mask=mask, position_ids=pos[:, -1:],
                         past_key_values=out.past_key_values)
            cut = ids.shape[1] - 3
            out = lm.model(input_ids=ids[:, :cut], attention_mask=mask[:, :cut], position_ids=pos[:, :cut],
                           use_cache=True)
            with pytest.raises(error, match="prefix reuse"):
                lm.model(input_ids=ids[:, cut:], attention_mask=mask, position_ids=pos[:, cut:],
                         past_key_values=out.past_key_values)


def span_means(states: list[np.ndarray], spans: list[tuple[int, int]]) -> np.ndarray:
    """Row i: the mean of ``states[i]`` [len, d] over positions ``spans[i]`` = [start, end) (float64 [n, d]), the
    reference ACE's streamed span means are checked against."""
    return np.stack([np.asarray(h[a:b], dtype=np.float64).mean(0) for h, (a, b) in zip(states, spans)])
