"""Tiny random models and locally built tokenizers: real transformers classes, no downloads.

``build_tokenizer`` makes a word-level tokenizer (the ``tokenizers`` library)
from texts, with Gemma-style chat turns; ``save_tiny_model`` writes a random
Gemma3 / Qwen2 / Llama causal LM of the given size and that tokenizer to a
directory, which then loads through the ordinary path (:func:`load_model`).
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

SPECIAL = ["<pad>", "<unk>", "<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>"]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ 'model' if m['role'] == 'assistant' else m['role'] }}\n"
    "{{ m['content'] }}<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)
_WORD = re.compile(r"\w+|[^\w\s]")
ARCHITECTURES = ("gemma3", "qwen2", "llama")


def words(text: str) -> list[str]:
    return _WORD.findall(text)


def build_tokenizer(texts: Iterable[str], max_vocab: int | None = None, extra: Iterable[str] = ()):
    """A word-level ``PreTrainedTokenizerFast`` over the words of ``texts`` (most frequent first)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    counts: Counter[str] = Counter()
    for t in texts:
        counts.update(words(t))
    for w in extra:
        counts[w] += 1
    vocab_words = [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    if max_vocab is not None:
        vocab_words = vocab_words[: max(0, max_vocab - len(SPECIAL))]
    vocab = {tok: i for i, tok in enumerate(SPECIAL + vocab_words)}
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    tk.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", unk_token="<unk>", bos_token="<bos>",
                                  eos_token="<eos>", additional_special_tokens=SPECIAL[4:])
    tok.chat_template = CHAT_TEMPLATE
    tok.padding_side = "left"
    return tok


def tiny_config(arch: str, vocab_size: int, hidden: int = 64, layers: int = 3, heads: int = 4, kv_heads: int = 2,
                intermediate: int | None = None, tokenizer=None):
    """A transformers config of the named architecture at toy size."""
    import transformers as tf

    common = dict(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=intermediate or 2 * hidden,
                  num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                  max_position_embeddings=1024, tie_word_embeddings=True)
    if tokenizer is not None:
        common.update(pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                      eos_token_id=[tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<end_of_turn>")])
    if arch == "gemma3":
        return tf.Gemma3TextConfig(head_dim=hidden // heads, sliding_window=128, **common)
    if arch == "qwen2":
        return tf.Qwen2Config(**common)
    if arch == "llama":
        return tf.LlamaConfig(**common)
    raise ValueError(f"unknown tiny architecture {arch!r}; known: {', '.join(ARCHITECTURES)}")


def model_class(arch: str):
    import transformers as tf
    return {"gemma3": tf.Gemma3ForCausalLM, "qwen2": tf.Qwen2ForCausalLM, "llama": tf.LlamaForCausalLM}[arch]


def build_tiny_model(arch: str, texts: Iterable[str], seed: int = 0, config: dict | None = None, **size):
    """A random tiny model of ``arch`` (in eval mode) and a tokenizer built from ``texts``; ``config``
    sets further config attributes (e.g. ``sliding_window``) before the weights are drawn."""
    import torch

    tok = build_tokenizer(texts, extra=["A", "B"])
    cfg = tiny_config(arch, len(tok), tokenizer=tok, **size)
    for k, v in (config or {}).items():
        setattr(cfg, k, v)
    torch.manual_seed(seed)
    model = model_class(arch)(cfg).eval()
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = cfg.eos_token_id
    return model, tok


def save_tiny_model(out: str | Path, arch: str, texts: Iterable[str], seed: int = 0, **size) -> Path:
    """Write a random tiny model of ``arch`` with a tokenizer built from ``texts`` to ``out``."""
    out = Path(out)
    model, tok = build_tiny_model(arch, texts, seed, **size)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out
