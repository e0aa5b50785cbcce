"""Prefix reuse: a prompt prefix shared by several rows of a batch runs once.

Items of one cell (the same scenario, degree, contrast and slot order, with and without a pressure sentence) share
every token up to the pressure sentence, most of the prompt (chat-template start included). With reuse on, items are
batched in token order (so items sharing a prefix are neighbours) instead of by length; within a batch, rows are split
into groups of neighbours (:func:`prefix_groups`), and each group's prefix runs once, its rows' remaining tokens on
top of it (:func:`prefix_prefill`). A batch takes this path only when it is estimated to run fewer padded tokens than
the plain batch (:data:`PREFIX_MAX_COST`, :func:`reuse_pays`); otherwise, or when the model has attention layers
other than full or sliding-window ones (:func:`reuse_supported`), it runs plain. Results equal the plain path up to
float rounding. Do not combine it with hooks that edit particular positions of the prompt (the prefix and the suffix
run in separate forwards)."""
from __future__ import annotations

from collections.abc import Sequence

from ..models.loading import LoadedModel
from .batching import left_pad

PREFIX_MAX_COST = 0.9
"""A batch reuses prefixes only when its estimated padded token count (each group's prefix once,
plus every row's suffix at the widest suffix) is at most this share of the plain batch's."""
REUSABLE_LAYERS = frozenset({"full_attention", "sliding_attention"})
"""The attention layer types whose KV cache prefix reuse can lay out (a plain, full-length cache)."""


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def prefix_groups(seqs: Sequence[Sequence[int]], tails: Sequence[int],
                  min_prefix: int) -> list[tuple[int, list[int]]]:
    """Split rows into groups whose shared prefix runs once, as ``(prefix length, rows)`` pairs.

    ``tails[r]`` is how many last tokens of row ``r`` must run after the prefix (the positions
    whose logits are read, plus one). Rows are taken in lexicographic order and cut into runs of
    neighbours. A run of two or more rows shares ``P`` tokens, the smallest of its common prefix
    and each row's ``len - tail``; ``P`` must be at least ``min_prefix``, and the run saves
    ``(rows - 1) * P`` tokens. The cut maximises the total saved (dynamic programming, quadratic
    in the rows). A row alone gets ``P = len - tail``: its own context, shared with nobody."""
    n = len(seqs)
    if len(tails) != n:
        raise ValueError(f"{n} sequences but {len(tails)} tails")
    order = sorted(range(n), key=lambda i: (list(seqs[i]), i))
    cap = [max(0, len(seqs[i]) - tails[i]) for i in order]
    adj = [_common_prefix(seqs[order[j]], seqs[order[j + 1]]) for j in range(n - 1)]
    best, cut = [0] * (n + 1), [0] * (n + 1)
    for j in range(n):
        best[j + 1], cut[j + 1] = best[j], j
        p = cap[j]
        for i in range(j - 1, -1, -1):
            p = min(p, adj[i], cap[i])
            if p < min_prefix:
                break
            if best[i] + (j - i) * p > best[j + 1]:
                best[j + 1], cut[j + 1] = best[i] + (j - i) * p, i
    groups: list[tuple[int, list[int]]] = []
    j = n
    while j > 0:
        i = cut[j]
        groups.append((min(cap[i:j] + adj[i:j - 1]), [order[t] for t in range(i, j)]))
        j = i
    return groups[::-1]


def reuse_pays(seqs: Sequence[Sequence[int]], groups: list[tuple[int, list[int]]]) -> bool:
    """Some prefix is shared and the reuse layout runs few enough padded tokens (PREFIX_MAX_COST)."""
    if not any(len(rows) > 1 for _, rows in groups):
        return False
    prefix_width = max(p for p, _ in groups)
    suffix_width = max(len(seqs[r]) - p for p, rows in groups for r in rows)
    plain = len(seqs) * max(len(x) for x in seqs)
    return len(groups) * prefix_width + len(seqs) * suffix_width <= PREFIX_MAX_COST * plain


def reuse_supported(model) -> bool:
    """Only decoders whose attention layers are all full or sliding-window (a plain KV cache)."""
    cfg = model.config
    cfg = cfg.get_text_config(decoder=True) if hasattr(cfg, "get_text_config") else cfg
    types = getattr(cfg, "layer_types", None)
    return types is None or set(types) <= REUSABLE_LAYERS


def prefix_prefill(lm: LoadedModel, seqs: list[list[int]], groups: list[tuple[int, list[int]]]):
    """Run every group's prefix once (one left-padded forward) and lay each row out on top of it.

    Returns ``(cache, suffix_ids, attention_mask, position_ids, shared)``: a ``DynamicCache`` of
    ``W`` columns per row, the rows' remaining tokens ``(n, S)`` (left-padded), the mask over
    cache and suffix ``(n, W + S)``, the suffix position ids ``(n, S)``, and per row the prefix
    tokens it takes from a group of two or more rows (else 0). Row ``r`` of group ``(P, rows)``
    with ``s = len - P`` tokens after the prefix runs its last ``d = min(S - s, P)`` prefix tokens
    again with its suffix, and its cache is the group's shifted right by ``d`` columns, so its
    real tokens are contiguous and end at the last column, as in a plain left-padded batch.

    Each group's shared prefix runs once (one left-padded forward for all groups), its KV cache (a
    ``transformers.DynamicCache`` with full-length layers) is copied to the group's rows, and only the rows'
    remaining tokens run, on top of it. Each row's cache is shifted right by the padding its suffix would need and
    the last prefix tokens it displaces run again with the suffix, so every row is one contiguous run of real tokens
    after its left padding: position ids, the padding mask and Gemma 3's sliding-window mask (computed from cache
    indices) are those of the plain left-padded batch, for prompts shorter or longer than the window."""
    import torch
    from transformers import DynamicCache

    model, pad = lm.model, lm.tokenizer.pad_token_id
    ids, mask, pos = left_pad([list(seqs[rows[0]][:p]) for p, rows in groups], pad, model.device)
    cache = DynamicCache()  # full-length layers: the sliding-window mask is computed, nothing is dropped
    with torch.inference_mode():
        model(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=cache, use_cache=True,
              logits_to_keep=1)
        return _lay_out(cache, seqs, groups, mask, pad, model.device)


def _lay_out(cache, seqs, groups, mask, pad: int, device):
    """The second half of :func:`prefix_prefill`: copy and shift the groups' cache rows."""
    import torch
    width = mask.shape[1]
    suffix_width = max(len(seqs[r]) - p for p, rows in groups for r in rows)
    n = len(seqs)
    src, shift = torch.zeros(n, dtype=torch.long), torch.zeros(n, dtype=torch.long)
    suffixes: list[list[int]] = [[] for _ in range(n)]
    shared = [0] * n
    for g, (p, rows) in enumerate(groups):
        for r in rows:
            d = min(suffix_width - (len(seqs[r]) - p), p)
            src[r], shift[r] = g, d
            suffixes[r] = list(seqs[r][p - d:])
            shared[r] = p if len(rows) > 1 else 0
    cols = torch.arange(width)[None, :] - shift[:, None]  # cache column c of row r <- column c - shift[r]
    valid = cols >= 0
    cols = cols.clamp(min=0)
    cache_mask = torch.where(valid, mask.cpu()[src].gather(1, cols), 0)
    for i, layer in enumerate(cache.layers):
        keys, values = getattr(layer, "keys", None), getattr(layer, "values", None)
        if keys is None or values is None or keys.shape[-2] != width:
            raise RuntimeError(f"prefix reuse: cache layer {i} ({type(layer).__name__}) does not hold the "
                               f"{width} prefix positions; run this model with prefix_reuse off")
        for name, t in (("keys", keys), ("values", values)):
            at = cols.to(t.device)[:, None, :, None].expand(-1, t.shape[1], -1, t.shape[3])
            setattr(layer, name, t[src.to(t.device)].gather(2, at))
    suffix_ids, suffix_mask, _ = left_pad(suffixes, pad, device)
    full_mask = torch.cat([cache_mask.to(device), suffix_mask], 1)
    suffix_pos = (full_mask.cumsum(-1) - 1).clamp(min=0)[:, width:]
    return cache, suffix_ids, full_mask, suffix_pos, shared
