"""Tiny random models and locally built tokenizers: real transformers classes, no downloads.

``build_tokenizer`` makes a word-level tokenizer (the ``tokenizers`` library)
from texts, with Gemma-style (or ChatML) chat turns; ``save_tiny_model`` writes a random
Gemma3 / Qwen2 / Llama causal LM of the given size and that tokenizer to a
directory, which then loads through the ordinary path (:func:`load_model`).

``build_random_checkpoint`` writes a checkpoint of the exact classes the presets load
(:data:`CHECKPOINT_ARCHS`: ``Gemma3ForConditionalGeneration`` with Gemma 3's sliding/global
layer pattern and a vision tower, ``Qwen2ForCausalLM``), at toy size or at the presets' real
widths, built directly in the requested dtype on the requested device (no float32 copy).
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
CHATML_SPECIAL = ["<|endoftext|>", "<unk>", "<|im_start|>", "<|im_end|>"]
CHATML_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""Qwen2.5's turn format (ChatML) without its default system prompt."""
IMAGE_SPECIAL = ["<start_of_image>", "<end_of_image>", "<image_soft_token>"]
"""Gemma 3's image tokens (begin, end, soft token), which its multimodal config points at."""
_WORD = re.compile(r"\w+|[^\w\s]")
ARCHITECTURES = ("gemma3", "qwen2", "llama")


def words(text: str) -> list[str]:
    return _WORD.findall(text)


def build_tokenizer(texts: Iterable[str], max_vocab: int | None = None, extra: Iterable[str] = (),
                    chat: str = "gemma", image_tokens: bool = False):
    """A word-level ``PreTrainedTokenizerFast`` over the words of ``texts`` (most frequent first).

    ``chat``: ``gemma`` (``<start_of_turn>`` turns, ``<bos>``, ``<eos>``/``<end_of_turn>``) or ``chatml``
    (Qwen2.5's ``<|im_start|>`` turns, no bos, ``<|im_end|>`` ends a turn, ``<|endoftext|>`` pads);
    ``image_tokens`` adds Gemma 3's image tokens (:data:`IMAGE_SPECIAL`) as special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    counts: Counter[str] = Counter()
    for t in texts:
        counts.update(words(t))
    for w in extra:
        counts[w] += 1
    if chat not in ("gemma", "chatml"):
        raise ValueError(f"chat must be gemma or chatml, got {chat!r}")
    special = (SPECIAL if chat == "gemma" else CHATML_SPECIAL) + (IMAGE_SPECIAL if image_tokens else [])
    vocab_words = [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    if max_vocab is not None:
        vocab_words = vocab_words[: max(0, max_vocab - len(special))]
    vocab = {tok: i for i, tok in enumerate(special + vocab_words)}
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    tk.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    if chat == "gemma":
        tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", unk_token="<unk>", bos_token="<bos>",
                                      eos_token="<eos>", additional_special_tokens=special[4:])
        tok.chat_template = CHAT_TEMPLATE
    else:
        tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<|endoftext|>", unk_token="<unk>",
                                      eos_token="<|im_end|>", additional_special_tokens=special[2:])
        tok.chat_template = CHATML_TEMPLATE
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


CHECKPOINT_ARCHS = ("gemma3-mm", "qwen2")
"""The classes the presets load: ``gemma3-mm`` (gemma-3-12b-it: ``Gemma3ForConditionalGeneration``) and ``qwen2``
(qwen2.5-7b-instruct: ``Qwen2ForCausalLM``)."""
_GEMMA3_ROPE = {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1_000_000.0},
                "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0}}
WIDTHS = {
    # google/gemma-3-12b-it's config.json: text_config, vision_config (SigLIP) and the image-token settings
    ("gemma3-mm", "real"): {
        "text": dict(hidden_size=3840, intermediate_size=15360, num_hidden_layers=48, num_attention_heads=16,
                     num_key_value_heads=8, head_dim=256, vocab_size=262208, sliding_window=1024,
                     sliding_window_pattern=6, query_pre_attn_scalar=256, max_position_embeddings=131072,
                     rms_norm_eps=1e-6, rope_parameters=_GEMMA3_ROPE),
        "vision": dict(hidden_size=1152, intermediate_size=4304, num_hidden_layers=27, num_attention_heads=16,
                       image_size=896, patch_size=14, vision_use_head=False),
        "mm_tokens_per_image": 256},
    # head size 32 (the least vLLM's CPU attention takes); a window of 16 tokens and a full-attention layer
    # every second one, so that the suite's prompts (150-250 tokens) cross the window on the sliding layers
    ("gemma3-mm", "tiny"): {
        "text": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=2,
                     num_key_value_heads=1, head_dim=32, sliding_window=16, sliding_window_pattern=2,
                     query_pre_attn_scalar=32, max_position_embeddings=2048, rms_norm_eps=1e-6,
                     rope_parameters=_GEMMA3_ROPE),
        "vision": dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                       image_size=28, patch_size=14, vision_use_head=False),
        "mm_tokens_per_image": 4},
    # Qwen/Qwen2.5-7B-Instruct's config.json
    ("qwen2", "real"): dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
                            num_key_value_heads=4, vocab_size=152064, max_position_embeddings=32768, rms_norm_eps=1e-6,
                            rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},
                            tie_word_embeddings=False, use_sliding_window=False, sliding_window=None,
                            max_window_layers=28),
    ("qwen2", "tiny"): dict(hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=2,
                            num_key_value_heads=1, max_position_embeddings=2048, rms_norm_eps=1e-6,
                            rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},
                            tie_word_embeddings=False, use_sliding_window=False, sliding_window=None),
}
"""The shapes :func:`build_random_checkpoint` builds, by (architecture, width). A tiny width's vocabulary is its
tokenizer's; a real width keeps the real vocabulary (the tokenizer's words are its first ids). At real width the
classes have the published 12,187,325,040 (Gemma 3) and 7,615,616,512 (Qwen2.5) parameters."""


def checkpoint_config(arch: str, tok, width: str = "tiny", layers: int | None = None):
    """The transformers config :func:`build_random_checkpoint` builds for ``arch`` at ``width`` with tokenizer
    ``tok`` (its special-token ids), with ``layers`` decoder layers (default: the width's)."""
    import transformers as tf

    if (arch, width) not in WIDTHS:
        raise ValueError(f"build_random_checkpoint: arch must be one of {', '.join(CHECKPOINT_ARCHS)} and width tiny "
                         f"or real, got arch={arch!r}, width={width!r}")
    shape = WIDTHS[arch, width]
    text = dict(shape["text"] if arch == "gemma3-mm" else shape)
    if layers is not None:
        if layers < 1:
            raise ValueError(f"build_random_checkpoint: layers must be at least 1, got {layers}")
        text["num_hidden_layers"] = layers
    text.setdefault("vocab_size", len(tok))
    if text["vocab_size"] < len(tok):
        raise ValueError(f"build_random_checkpoint: the tokenizer has {len(tok)} tokens, more than the vocabulary "
                         f"({text['vocab_size']})")
    end = tok.convert_tokens_to_ids("<end_of_turn>" if arch == "gemma3-mm" else "<|im_end|>")
    ids = dict(pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
               eos_token_id=sorted({tok.eos_token_id, end}) if arch == "gemma3-mm" else end)
    if arch == "qwen2":
        return tf.Qwen2Config(**text, **ids, architectures=["Qwen2ForCausalLM"])
    pattern = text.pop("sliding_window_pattern")
    text["layer_types"] = ["sliding_attention" if (i + 1) % pattern else "full_attention"
                           for i in range(text["num_hidden_layers"])]
    image = {k: tok.convert_tokens_to_ids(t) for k, t in zip(("boi_token_index", "eoi_token_index",
                                                                "image_token_index"), IMAGE_SPECIAL)}
    return tf.Gemma3Config(text_config=tf.Gemma3TextConfig(**text, **ids),
                           vision_config=tf.SiglipVisionConfig(**shape["vision"]),
                           mm_tokens_per_image=shape["mm_tokens_per_image"], **image, **ids,
                           architectures=["Gemma3ForConditionalGeneration"])


def build_random_checkpoint(arch: str, out_dir: str | Path, *, width: str = "tiny", dtype="bfloat16",
                            layers: int | None = None, device: str = "cpu", texts: Iterable[str] | None = None,
                            seed: int = 0) -> Path:
    """Write a loadable checkpoint of random weights of the class a preset loads to ``out_dir`` and return it.

    ``arch``: ``gemma3-mm`` (``Gemma3ForConditionalGeneration``: a SigLIP vision tower and Gemma 3's text tower
    with its sliding/global layer pattern, as google/gemma-3-12b-it) or ``qwen2`` (``Qwen2ForCausalLM``, as
    Qwen/Qwen2.5-7B-Instruct). ``width``: ``tiny`` (hidden 64, 3 layers: tests) or ``real`` (the presets'
    shapes, :data:`WIDTHS`); ``layers`` overrides the number of decoder layers (fewer, to fit a check in less
    memory). The model is built in ``dtype`` (a name or a ``torch.dtype``) on ``device`` directly, with no
    float32 copy (the default dtype and device are set while the modules are made: 48 real Gemma 3 layers are
    24 GB in bfloat16), then saved with ``save_pretrained``, its generation config, and a word-level
    tokenizer over ``texts`` (default: the smoke subset's prompts) with the model's chat template (Gemma's
    turns; Qwen's ChatML), so that :func:`evenhand.models.loading.load_model` loads the directory like any
    local model. Seeded: the same arguments write the same weights. ``tests/test_preset_classes.py`` runs every
    model-touching path on the tiny ones in bfloat16, each loaded with its preset's spec."""
    import torch

    torch_dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    if not isinstance(torch_dtype, torch.dtype):
        raise ValueError(f"build_random_checkpoint: dtype must be a torch dtype or its name, got {dtype!r}")
    if texts is None:
        from ..suite.subsets import iter_subset
        texts = [it["prompt"] for it in iter_subset("smoke", 0)]
    tok = build_tokenizer(list(texts) + ["the first candidate", "the second candidate"], extra=["A", "B"],
                          chat="gemma" if arch == "gemma3-mm" else "chatml", image_tokens=arch == "gemma3-mm")
    cfg = checkpoint_config(arch, tok, width, layers)
    import transformers as tf
    cls = tf.Gemma3ForConditionalGeneration if arch == "gemma3-mm" else tf.Qwen2ForCausalLM
    torch.manual_seed(seed)
    with torch.device(device):
        model = cls._from_config(cfg, dtype=torch_dtype).eval()
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.bos_token_id = tok.bos_token_id
    model.generation_config.eos_token_id = cfg.get_text_config().eos_token_id
    out = Path(out_dir)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    del model
    return out
