"""The one activation reader: sites of a model read over token sequences, batch by batch, on one loop.

:func:`read` is the batch loop every reader runs on: planned batches under ``inference_mode`` that halve on
out-of-memory (:class:`~.batching.Halving`, which frees the failed batch first); a *runner* (batch indices ->
one dict of float32 rows per sequence) does the forward pass. :func:`hook_runner` is the reference runner
(forward hooks: :func:`~.hooks.observe` reads, :func:`~.hooks.steer` edits);
the activation cache's nnsight and TransformerLens backends are runners giving the same values
(:mod:`evenhand.running.activations`). Device to host in one place: :func:`host_rows`. On them:
:func:`read_batches`, :func:`last_token_activations` and :func:`token_states`, what fitting reads."""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

import numpy as np

from .batching import Halving, left_pad, plan_batches, plan_batches_in_order

Runner = Callable[[list[int]], list[dict]]
"""A batch function: the indices of a batch's sequences -> one dict per sequence, site -> float32 numpy row(s)."""


def read(run: Runner, batches: list[list[int]], limit: int, each: Callable[[list[int], list[dict]], None]) -> None:
    """Run every batch of ``batches`` (lists of indices) through ``run`` under ``inference_mode``, in pieces of at
    most ``limit`` that halve on out-of-memory (later batches keep the smaller size), and hand each batch's indices
    and rows to ``each`` (which may write them: the rows of a batch are never held past it)."""
    import torch
    halving = Halving(limit)
    with torch.inference_mode():
        for idx in batches:
            each(idx, halving.run(run, idx))


def host_rows(saved: dict, stack: bool | None = None) -> list[dict]:
    """``saved`` (name -> a ``(batch, width)`` tensor) as one dict of float32 arrays per row, each a view of
    one array per batch or per site. ``stack`` (default: when a tensor is not on the CPU): the sites are
    stacked on the device, converted to float32 there and copied to the host at once, one device-to-host
    copy per batch; otherwise each site is converted (and copied) on its own, which on the CPU, where there
    is nothing to copy, spares the stack. The values equal a copy per site and row (``v[j].float().cpu()``)."""
    import torch
    names = list(saved)
    if not names:
        return []
    if stack is None:
        stack = any(saved[k].device.type != "cpu" for k in names)
    if stack:
        device = saved[names[0]].device  # with a device map the sites can sit on several devices
        host = torch.stack([saved[k].to(device) for k in names]).float().cpu().numpy()  # (sites, batch, width)
        return [{k: host[s, j] for s, k in enumerate(names)} for j in range(host.shape[1])]
    per_site = {k: saved[k].float().cpu().numpy() for k in names}
    return [{k: per_site[k][j] for k in names} for j in range(per_site[names[0]].shape[0])]


@contextmanager
def hook_runner(model, pad_id: int, seqs: list[list[int]], sites: list[str], pick,
                edits: Mapping | None = None) -> Iterator[Runner]:
    """A runner reading ``sites`` with forward hooks (:func:`~.hooks.observe`) while the
    ``with`` block lasts, under ``edits`` (site -> edit(s), applied by :func:`~.hooks.steer`;
    the readers run after them, so they read the edited values).

    A batch is ``seqs[idx]`` left-padded (:func:`~.batching.left_pad`) on the model's device, one forward pass
    with ``logits_to_keep=1``. ``pick(h, idx)`` runs inside the hook on the site's hidden state ``h``
    [batch, width, d] (row ``k`` holds ``seqs[idx[k]]`` in its last positions) and returns one row per sequence
    (a tensor: moved by :func:`host_rows` after the pass) or a list of one tensor per sequence (moved at once):
    only what it keeps reaches the host. The store is emptied before each attempt, so a failed batch leaves
    nothing behind."""
    import torch

    from .hooks import observe, steer
    batch: list[int] = []

    def take(h):
        kept = pick(h, batch)
        return kept if isinstance(kept, torch.Tensor) else [x.float().cpu().numpy() for x in kept]

    with steer(model, dict(edits or {})), observe(model, sites, take=take) as store:
        def run(idx: list[int]) -> list[dict]:
            for v in store.values():
                v.clear()
            batch[:] = idx
            ids, mask, pos = left_pad([seqs[j] for j in idx], pad_id, model.device)
            model(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=1)
            kept = {s: store[s].pop() for s in sites}
            tensors = host_rows({s: v for s, v in kept.items() if isinstance(v, torch.Tensor)})
            return [{s: tensors[k][s] if isinstance(kept[s], torch.Tensor) else kept[s][k] for s in sites}
                    for k in range(len(idx))]
        yield run


def read_batches(lm, seqs: list[list[int]], sites: list[str], batch_size: int, pick, progress: bool = False,
                 desc: str = "activations", edits: Mapping | None = None,
                 by_length: bool = False) -> list[dict]:
    """One dict per sequence (in order): site -> its row of ``pick(h, idx)`` (:func:`hook_runner`) as a float32
    numpy array, under ``edits``. Batches of at most ``batch_size`` in input order, or with ``by_length`` of
    similar length, longest first (:func:`~.batching.plan_batches`, the activation cache's plan)."""
    from tqdm.auto import tqdm
    plan = plan_batches([len(s) for s in seqs], batch_size) if by_length else plan_batches_in_order(len(seqs),
                                                                                                     batch_size)
    out: list = [None] * len(seqs)
    bar = tqdm(total=len(seqs), disable=not progress, desc=desc)

    def keep(idx: list[int], rows: list[dict]) -> None:
        for j, r in zip(idx, rows):
            out[j] = r
        bar.update(len(idx))

    with hook_runner(lm.model, lm.tokenizer.pad_token_id, seqs, sites, pick, edits) as run:
        read(run, plan, batch_size, keep)
    bar.close()
    return out


def last_token_activations(lm, seqs: list[list[int]], sites: list[str], batch_size: int = 32,
                           progress: bool = False, edits: Mapping | None = None,
                           by_length: bool = False) -> dict[str, np.ndarray]:
    """The value of each site at the last token of each sequence (float32 [n, d], rows in order), under
    ``edits`` (:func:`read_batches`; ``by_length``: the activation cache's batches, so the same values)."""
    rows = read_batches(lm, seqs, sites, batch_size, lambda h, idx: h[:, -1], progress, edits=edits,
                        by_length=by_length)
    return {s: np.stack([r[s] for r in rows]).astype(np.float32) for s in sites}


def token_states(lm, seqs: list[list[int]], site: str, batch_size: int = 32) -> list[np.ndarray]:
    """The value of ``site`` at every token of each sequence (float32 [len, d] per sequence, in order;
    :func:`read_batches`)."""
    return [r[site] for r in read_batches(lm, seqs, [site], batch_size, lambda h, idx: [
        h[k, h.shape[1] - len(seqs[j]):] for k, j in enumerate(idx)])]
