"""Batches for the engine: tokenising, batch plans, left padding and out-of-memory halving.

Batches are length-bucketed (:func:`plan_batches`: items sorted by token length, longest first),
kept in input order (:func:`plan_batches_in_order`) or in token order for prefix reuse
(:func:`plan_prefix_batches`), and left-padded with position ids that skip the padding
(:func:`left_pad`). :class:`Halving` runs a batch and, on out-of-memory, splits it in halves; later
batches use the smaller size; :func:`halve_on_oom` retries one callable at half its size (a training
step). Both free before they retry: the failed attempt's exception (whose traceback holds that attempt's
frames, and so its tensors) is dropped by leaving the ``except`` block, then :func:`free_memory` runs
``gc.collect()`` and ``torch.cuda.empty_cache()``, so the retry does not start beside the failed batch.
"""
from __future__ import annotations

import gc
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")

_OOM_TEXT = ("out of memory", "can't allocate memory")  # CUDA/MPS; torch's CPU allocator


def is_oom(exc: BaseException) -> bool:
    """Whether ``exc`` is an out-of-memory error: ``torch.OutOfMemoryError`` (CUDA), a ``RuntimeError``
    saying so (MPS, the CPU allocator's "can't allocate memory") or Python's ``MemoryError``."""
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        return True
    return isinstance(exc, RuntimeError) and any(t in str(exc).lower() for t in _OOM_TEXT)


def free_memory() -> None:
    """Collect garbage (the failed attempt's tensors, once nothing refers to them) and release cached
    accelerator memory (``torch.cuda.empty_cache()`` when CUDA is present). Call it outside the ``except``
    block: inside it the exception's traceback still holds the failed attempt's frames."""
    gc.collect()
    import torch
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def halve_on_oom(fn: Callable[[int], T], size: int) -> tuple[T, int]:
    """``(fn(size), size)``, retrying at half the size on out-of-memory (a size of one that runs out of
    memory raises; any other error raises at once).

    The retry runs after the ``except`` block, once :func:`free_memory` has run, so the failed attempt's
    tensors are gone when it starts. Returns the size that ran, for the caller to keep."""
    while True:
        try:
            return fn(size), size
        except Exception as exc:  # noqa: BLE001 - filtered by is_oom; re-raised otherwise
            if not is_oom(exc) or size <= 1:
                raise
        free_memory()  # here the exception and its traceback (the failed frames) are gone
        size = max(1, size // 2)


def plan_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Indices grouped into batches of similar length: longest first, ties in input order."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def plan_batches_in_order(n: int, batch_size: int) -> list[list[int]]:
    """Indices in input order, cut into batches (no bucketing)."""
    return [list(range(i, min(i + batch_size, n))) for i in range(0, n, batch_size)]


def plan_prefix_batches(ids: Sequence[Sequence[int]], batch_size: int) -> list[list[int]]:
    """Indices in the lexicographic order of their token ids (ties in input order), cut into
    batches: sequences sharing a prefix are neighbours, mostly in the same batch."""
    order = sorted(range(len(ids)), key=lambda i: (list(ids[i]), i))
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


class Halving:
    """Runs a batch, splitting it on out-of-memory; later batches keep the smaller size.

    ``limit`` is the current largest batch; :meth:`run` cuts a larger batch to it first."""

    def __init__(self, limit: int):
        self.limit = limit

    def run(self, fn: Callable[[list[int]], list], idx: list[int]) -> list:
        """``fn(idx)``'s rows, running ``idx`` in pieces of at most :attr:`limit` and halving the
        limit on out-of-memory (a batch of one that runs out of memory raises). The pieces are cut in
        order, so the rows (and the batches run) equal a run started at the final limit."""
        out: list = []
        i = 0
        while i < len(idx):
            piece = idx[i:i + self.limit]
            rows, size = halve_on_oom(lambda n: fn(piece[:n]), len(piece))
            if size < len(piece):
                self.limit = size
            out.extend(rows)
            i += size
        return out


def token_ids(tokenizer, texts: list[str], special: bool, chunk: int = 512) -> list[list[int]]:
    """Each text's token ids, tokenised in chunks."""
    out: list[list[int]] = []
    for i in range(0, len(texts), chunk):
        out.extend(list(x) for x in tokenizer(texts[i:i + chunk], add_special_tokens=special)["input_ids"])
    return out


def token_lengths(tokenizer, texts: list[str], special: bool, chunk: int = 512) -> list[int]:
    """Each text's length in tokens."""
    return [len(x) for x in token_ids(tokenizer, texts, special, chunk)]


def left_pad(seqs: list[list[int]], pad_id: int, device):
    """``(input_ids, attention_mask, position_ids)`` of ``seqs`` left-padded to the longest, on
    ``device``; position ids count real tokens only (0 on the padding)."""
    import torch
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, width - len(s):] = torch.tensor(s, dtype=torch.long)
        mask[i, width - len(s):] = 1
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    return ids.to(device), mask.to(device), pos.to(device)


def plan_equal_length(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Batches of at most ``batch_size`` indices of equal length (:func:`equal_length_groups`, longest
    first, each group in input order): the plan of readers that cannot pad (TransformerLens)."""
    return [g[i:i + batch_size] for g in equal_length_groups(lengths) for i in range(0, len(g), batch_size)]


def equal_length_groups(lengths: Sequence[int]) -> list[list[int]]:
    """Indices grouped by equal length, longest first (for engines that cannot pad, such as
    TransformerLens); each group in input order."""
    groups: dict[int, list[int]] = {}
    for i, n in enumerate(lengths):
        groups.setdefault(n, []).append(i)
    return [groups[n] for n in sorted(groups, reverse=True)]
