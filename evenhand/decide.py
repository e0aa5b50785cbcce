"""Items x model -> responses, in three modes, batched and resumable.

- ``answer``: greedy generation of at most ``max_new_tokens`` (default 8) with the KV
  cache, then the parser;
- ``reasoning``: the reasoning prompt variant, greedy up to ``reasoning_max_new_tokens``,
  then the parser;
- ``logprob``: the summed log-probability of each full label (``Applicant A`` vs
  ``Applicant B``) as a continuation of the prompt; the choice is the larger. When
  the two labels' tokens differ only in the last token (the usual case), one
  forward pass scores both; otherwise each label gets its own sequence.

Batches are length-bucketed (items sorted by token length, longest first;
``bucket=False`` keeps the input order) and left-padded, with position ids that
skip the padding. On out-of-memory a batch is split in halves and later batches
use the smaller size. Each batch becomes one parquet shard under
``OUT/decisions/``; a re-run skips item ids already written, so a run killed at
any point resumes to the same table.

Prefix reuse (``prefix_reuse=True``, off by default). Items of one cell (the
same scenario, degree, contrast and slot order, with and without a pressure
sentence) share every token up to the pressure sentence, most of the prompt
(chat-template start included). With reuse on, items are batched in
token order (so items sharing a prefix are neighbours) instead of by length;
within a batch, rows are split into groups of neighbours by a small dynamic
program that maximises the prefix tokens saved (a group of two or more rows
shares at least ``prefix_min_tokens`` tokens). Each group's shared prefix runs
once (one left-padded forward for all groups), its KV cache (a
``transformers.DynamicCache`` with full-length layers) is copied to the
group's rows, and only the rows' remaining tokens run, on top of it. Each
row's cache is shifted right by the padding its suffix would need and the
last prefix tokens it displaces run again with the suffix, so every row is
one contiguous run of real tokens after its left padding: position ids, the
padding mask and Gemma 3's sliding-window mask (computed from cache indices)
are those of the plain left-padded batch, for prompts shorter or longer than
the window. A batch takes this path only when it is estimated to run fewer
padded tokens than the plain batch (:data:`PREFIX_MAX_COST`); otherwise, or
when the model has attention layers other than full or sliding-window ones,
it runs plain. Results equal the plain path up to float rounding. Do not
combine it with hooks that edit particular positions of the prompt (the
prefix and the suffix run in separate forwards). The response column
``n_shared_prefix_tokens`` says how many prompt tokens a row took from a
shared prefix (0 when none); it is present only when reuse is on.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .models.loading import LoadedModel
from .parse import parse_detail
from .prompts import continuation, labels, model_text, user_message, uses_chat_template
from .shards import ParquetShards

MODES = ("answer", "reasoning", "logprob")


@dataclass(frozen=True)
class DecideOptions:
    """How to decide items."""
    mode: str = "answer"
    """answer | reasoning | logprob."""
    batch_size: int = 8
    """Items per forward/generate call (halved automatically on out-of-memory)."""
    max_new_tokens: int = 8
    """Generation budget in answer mode."""
    reasoning_max_new_tokens: int = 512
    """Generation budget in reasoning mode."""
    chat_template: str = "auto"
    """auto: the tokenizer's chat template when it has one; none: a plain User/Assistant format."""
    progress: bool = True
    """Show a progress bar with items/s."""
    bucket: bool = True
    """Batch items of similar token length together (longest first); False keeps the input order."""
    prefix_reuse: bool = False
    """Run a prefix shared by several items of a batch once and reuse its KV cache (module docstring);
    batches then follow token order, not length."""
    prefix_min_tokens: int = 16
    """The fewest tokens a prefix must share to be run once for several rows."""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {self.batch_size}")
        if self.prefix_min_tokens < 1:
            raise ValueError(f"prefix_min_tokens must be at least 1, got {self.prefix_min_tokens}")


def _is_oom(exc: BaseException) -> bool:
    return "out of memory" in str(exc).lower() or type(exc).__name__ == "OutOfMemoryError"


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


class _Halving:
    """Runs a batch, splitting it on out-of-memory; later batches keep the smaller size."""

    def __init__(self, limit: int):
        self.limit = limit

    def run(self, fn: Callable[[list[int]], list[dict]], idx: list[int]) -> list[dict]:
        if len(idx) > self.limit:
            step = self.limit
            return [r for i in range(0, len(idx), step) for r in self.run(fn, idx[i:i + step])]
        try:
            return fn(idx)
        except RuntimeError as exc:
            if not _is_oom(exc) or len(idx) == 1:
                raise
            _free_memory()
            self.limit = max(1, len(idx) // 2)
            return self.run(fn, idx)


def _free_memory() -> None:
    import torch
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def token_ids(tokenizer, texts: list[str], special: bool, chunk: int = 512) -> list[list[int]]:
    """Each text's token ids, tokenised in chunks."""
    out: list[list[int]] = []
    for i in range(0, len(texts), chunk):
        out.extend(list(x) for x in tokenizer(texts[i:i + chunk], add_special_tokens=special)["input_ids"])
    return out


def token_lengths(tokenizer, texts: list[str], special: bool, chunk: int = 512) -> list[int]:
    return [len(x) for x in token_ids(tokenizer, texts, special, chunk)]


def _left_pad(seqs: list[list[int]], pad_id: int, device):
    import torch
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, width - len(s):] = torch.tensor(s, dtype=torch.long)
        mask[i, width - len(s):] = 1
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    return ids.to(device), mask.to(device), pos.to(device)


PREFIX_MAX_COST = 0.9
"""A batch reuses prefixes only when its estimated padded token count (each group's prefix once,
plus every row's suffix at the widest suffix) is at most this share of the plain batch's."""
_REUSABLE_LAYERS = {"full_attention", "sliding_attention"}


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


def _reuse_pays(seqs: Sequence[Sequence[int]], groups: list[tuple[int, list[int]]]) -> bool:
    """Some prefix is shared and the reuse layout runs few enough padded tokens (PREFIX_MAX_COST)."""
    if not any(len(rows) > 1 for _, rows in groups):
        return False
    prefix_width = max(p for p, _ in groups)
    suffix_width = max(len(seqs[r]) - p for p, rows in groups for r in rows)
    plain = len(seqs) * max(len(x) for x in seqs)
    return len(groups) * prefix_width + len(seqs) * suffix_width <= PREFIX_MAX_COST * plain


def _reuse_supported(model) -> bool:
    """Only decoders whose attention layers are all full or sliding-window (a plain KV cache)."""
    cfg = model.config
    cfg = cfg.get_text_config(decoder=True) if hasattr(cfg, "get_text_config") else cfg
    types = getattr(cfg, "layer_types", None)
    return types is None or set(types) <= _REUSABLE_LAYERS


def _prefix_prefill(lm: LoadedModel, seqs: list[list[int]], groups: list[tuple[int, list[int]]]):
    """Run every group's prefix once (one left-padded forward) and lay each row out on top of it.

    Returns ``(cache, suffix_ids, attention_mask, position_ids, shared)``: a ``DynamicCache`` of
    ``W`` columns per row, the rows' remaining tokens ``(n, S)`` (left-padded), the mask over
    cache and suffix ``(n, W + S)``, the suffix position ids ``(n, S)``, and per row the prefix
    tokens it takes from a group of two or more rows (else 0). Row ``r`` of group ``(P, rows)``
    with ``s = len - P`` tokens after the prefix runs its last ``d = min(S - s, P)`` prefix tokens
    again with its suffix, and its cache is the group's shifted right by ``d`` columns, so its
    real tokens are contiguous and end at the last column, as in a plain left-padded batch."""
    import torch
    from transformers import DynamicCache

    model, pad = lm.model, lm.tokenizer.pad_token_id
    ids, mask, pos = _left_pad([list(seqs[rows[0]][:p]) for p, rows in groups], pad, model.device)
    cache = DynamicCache()  # full-length layers: the sliding-window mask is computed, nothing is dropped
    with torch.inference_mode():
        model(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=cache, use_cache=True,
              logits_to_keep=1)
        return _lay_out(cache, seqs, groups, mask, pad, model.device)


def _lay_out(cache, seqs, groups, mask, pad: int, device):
    """The second half of :func:`_prefix_prefill`: copy and shift the groups' cache rows."""
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
    suffix_ids, suffix_mask, _ = _left_pad(suffixes, pad, device)
    full_mask = torch.cat([cache_mask.to(device), suffix_mask], 1)
    suffix_pos = (full_mask.cumsum(-1) - 1).clamp(min=0)[:, width:]
    return cache, suffix_ids, full_mask, suffix_pos, shared


class _GreedyLogprob:
    """A logits processor that records, per step, the log-probability of the greedy token
    (max logit minus logsumexp): the generated text's log-probability without keeping scores."""

    def __init__(self) -> None:
        self.steps: list = []

    def __call__(self, input_ids, scores):
        import torch
        s = scores.float()
        self.steps.append(s.max(-1).values - torch.logsumexp(s, -1))
        return scores


def _generate(lm: LoadedModel, texts: list[str], special: bool, max_new: int) -> list[dict]:
    tok, model = lm.tokenizer, lm.model
    enc = tok(texts, add_special_tokens=special, padding=True, return_tensors="pt").to(model.device)
    return _greedy(lm, enc["input_ids"], enc["attention_mask"], max_new)


def _generate_with_prefix(lm: LoadedModel, texts: list[str], seqs: list[list[int]], special: bool, max_new: int,
                          min_prefix: int) -> list[dict]:
    """:func:`_generate`, running prefixes shared by ``min_prefix`` tokens or more once (when it pays);
    ``seqs`` are the texts' token ids."""
    import torch
    groups = prefix_groups(seqs, [1] * len(seqs), min_prefix)
    if not (_reuse_supported(lm.model) and _reuse_pays(seqs, groups)):
        return [dict(row, n_shared_prefix_tokens=0) for row in _generate(lm, texts, special, max_new)]
    cache, suffix_ids, mask, _, shared = _prefix_prefill(lm, seqs, groups)
    held = torch.full((len(seqs), mask.shape[1] - suffix_ids.shape[1]), lm.tokenizer.pad_token_id,
                      dtype=suffix_ids.dtype, device=suffix_ids.device)  # stands for the cached columns
    rows = _greedy(lm, torch.cat([held, suffix_ids], 1), mask, max_new, cache)
    for row, n in zip(rows, shared):
        row["n_shared_prefix_tokens"] = n
    return rows


def _greedy(lm: LoadedModel, ids, mask, max_new: int, cache=None) -> list[dict]:
    """Greedy generation from left-padded ``ids``/``mask``; with ``cache``, its columns are the first
    ``ids`` columns (generate runs only the rest)."""
    import torch
    from transformers import LogitsProcessorList
    tok, model = lm.tokenizer, lm.model
    rec = _GreedyLogprob()
    extra = {"past_key_values": cache} if cache is not None else {}
    with torch.inference_mode():
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new, do_sample=False,
                             temperature=None, top_p=None, top_k=None, repetition_penalty=1.0,
                             pad_token_id=tok.pad_token_id, logits_processor=LogitsProcessorList([rec]), **extra)
    width = ids.shape[1]
    new = out[:, width:].tolist()
    step_lp = torch.stack(rec.steps, 1).tolist() if rec.steps else [[] for _ in new]
    eos = model.generation_config.eos_token_id
    eos = set(eos if isinstance(eos, list) else [eos]) - {None}
    rows = []
    for i, toks in enumerate(new):
        n = next((j + 1 for j, t in enumerate(toks) if t in eos), len(toks))
        rows.append({"text": tok.decode(toks[:n], skip_special_tokens=True), "n_new_tokens": n,
                     "gen_logprob": float(sum(step_lp[i][:n])), "n_prompt_tokens": int(mask[i].sum())})
    return rows


def label_token_ids(tok, text: str, label: str, special: bool) -> tuple[list[int], list[int]]:
    """(context ids, label continuation ids), splitting the joint tokenisation at the context."""
    ctx = tok(text, add_special_tokens=special)["input_ids"]
    full = tok(text + continuation(text, label), add_special_tokens=special)["input_ids"]
    if full[:len(ctx)] == ctx and len(full) > len(ctx):
        return ctx, full[len(ctx):]
    return ctx, tok(continuation(text, label), add_special_tokens=False)["input_ids"]


def _logprob(lm: LoadedModel, texts: list[str], items: list[dict], special: bool,
             min_prefix: int = 0) -> list[dict]:
    """Both labels' log-probabilities per item. With ``min_prefix`` > 0, prefixes shared by at least
    that many tokens run once (:func:`_prefix_prefill`) when it pays, and each row says how many
    prompt tokens it took from a shared prefix (``n_shared_prefix_tokens``)."""
    import torch
    tok, model = lm.tokenizer, lm.model
    seqs, tails, plan = [], [], []
    for text, item in zip(texts, items):
        la, lb = labels(item)
        ctx, ca = label_token_ids(tok, text, la, special)
        _, cb = label_token_ids(tok, text, lb, special)
        if len(ca) == len(cb) and ca[:-1] == cb[:-1]:
            plan.append(("shared", len(seqs), ca, cb, len(ctx)))
            seqs.append(ctx + ca)
            tails.append(len(ca) + 1)
        else:
            plan.append(("separate", len(seqs), ca, cb, len(ctx)))
            seqs += [ctx + ca, ctx + cb]
            tails += [len(ca) + 1, len(cb) + 1]
    k = max(max(len(p[2]), len(p[3])) for p in plan)
    groups = prefix_groups(seqs, tails, min_prefix) if min_prefix > 0 else []
    shared = [0] * len(seqs)
    with torch.inference_mode():
        if groups and _reuse_supported(model) and _reuse_pays(seqs, groups):
            cache, ids, mask, pos, shared = _prefix_prefill(lm, seqs, groups)
            logits = model(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=cache,
                           use_cache=True, logits_to_keep=k + 1).logits
        else:
            ids, mask, pos = _left_pad(seqs, tok.pad_token_id, model.device)
            logits = model(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=k + 1).logits
    logp = torch.log_softmax(logits.float(), dim=-1)  # (n_seq, k+1, V); index j predicts position L-k+j

    def score(row: int, cont: list[int]) -> float:
        n = len(cont)
        return float(sum(logp[row, k - n + t, cont[t]] for t in range(n)))

    rows = []
    for kind, row, ca, cb, n_ctx in plan:
        if kind == "shared":
            n = len(ca)
            prefix = float(sum(logp[row, k - n + t, ca[t]] for t in range(n - 1)))
            lpa, lpb = prefix + float(logp[row, k - 1, ca[-1]]), prefix + float(logp[row, k - 1, cb[-1]])
        else:
            lpa, lpb = score(row, ca), score(row + 1, cb)
        rows.append({"logprob_A": lpa, "logprob_B": lpb, "n_prompt_tokens": n_ctx, "n_new_tokens": 0,
                     "logprob_forwards": 1 if kind == "shared" else 2})
        if min_prefix > 0:
            rows[-1]["n_shared_prefix_tokens"] = shared[row]
    return rows


def decide(items: pd.DataFrame | list[dict], lm: LoadedModel, opts: DecideOptions = DecideOptions(),
           out_dir: str | Path | None = None) -> pd.DataFrame:
    """Decide every item; with ``out_dir``, resumably (shards under ``out_dir/decisions``).

    Returns the responses table in the items' order: the item fields plus ``model``, ``mode``,
    ``text``, ``choice``, ``parse_method``, ``logprob_A``/``logprob_B`` (logprob mode),
    ``gen_logprob`` (generation modes), ``n_prompt_tokens``, ``n_new_tokens``, ``seconds`` (batch
    wall time per item), ``batch_size`` and, with ``prefix_reuse``, ``n_shared_prefix_tokens``
    (prompt tokens taken from a prefix run once for several rows, else 0)."""
    from tqdm.auto import tqdm

    records = items.to_dict("records") if isinstance(items, pd.DataFrame) else list(items)
    order = {r["item_id"]: i for i, r in enumerate(records)}
    if len(order) != len(records):
        raise ValueError("items contain duplicate item_id values")
    from .runs import RunDir
    shards = ParquetShards(RunDir(out_dir).decisions) if out_dir is not None else None
    done: set[str] = set()
    if shards is not None:
        shards.prepare()
        done = shards.done_ids() & set(order)
    todo = [r for r in records if r["item_id"] not in done]
    variant = "reasoning" if opts.mode == "reasoning" else "answer"
    special = not uses_chat_template(lm.tokenizer, opts.chat_template)
    texts = [model_text(lm.tokenizer, user_message(r, variant), opts.chat_template) for r in todo]
    ids = token_ids(lm.tokenizer, texts, special)
    if opts.prefix_reuse:
        batches = plan_prefix_batches(ids, opts.batch_size)
    elif opts.bucket:
        batches = plan_batches([len(x) for x in ids], opts.batch_size)
    else:
        batches = plan_batches_in_order(len(ids), opts.batch_size)
    max_new = opts.max_new_tokens if opts.mode == "answer" else opts.reasoning_max_new_tokens
    min_prefix = opts.prefix_min_tokens if opts.prefix_reuse else 0
    halving = _Halving(opts.batch_size)
    collected: list[pd.DataFrame] = []

    def run(idx: list[int]) -> list[dict]:
        t0 = time.perf_counter()
        sub_items = [todo[i] for i in idx]
        sub_texts = [texts[i] for i in idx]
        if opts.mode == "logprob":
            out = _logprob(lm, sub_texts, sub_items, special, min_prefix)
        elif min_prefix:
            out = _generate_with_prefix(lm, sub_texts, [ids[i] for i in idx], special, max_new, min_prefix)
        else:
            out = _generate(lm, sub_texts, special, max_new)
        dt = (time.perf_counter() - t0) / len(idx)
        for r, o in zip(sub_items, out):
            o.update(seconds=dt, batch_size=len(idx))
        return out

    bar = tqdm(total=len(records), initial=len(done), unit="item", disable=not opts.progress,
               desc=f"decide[{opts.mode}]", dynamic_ncols=True)
    for idx in batches:
        outs = halving.run(run, idx)
        rows = []
        for i, o in zip(idx, outs):
            item = todo[i]
            row = dict(item)
            row.update(model=lm.name, mode=opts.mode, chat_template=uses_chat_template(lm.tokenizer,
                                                                                       opts.chat_template))
            row.update({"logprob_A": None, "logprob_B": None, "gen_logprob": None, **o})
            if opts.mode == "logprob":
                choice = "A" if o["logprob_A"] >= o["logprob_B"] else "B"
                row.update(text=labels(item)[0 if choice == "A" else 1], choice=choice, parse_method="logprob")
            else:
                det = parse_detail(o["text"], item.get("candidate_noun"))
                row.update(choice=det.choice, parse_method=det.method)
            rows.append(row)
        df = pd.DataFrame(rows)
        if shards is not None:
            shards.write(df)
        else:
            collected.append(df)
        bar.update(len(idx))
    bar.close()
    table = shards.read_all() if shards is not None else (pd.concat(collected, ignore_index=True) if collected
                                                          else pd.DataFrame())
    if len(table):
        table = table[table["item_id"].isin(order)].drop_duplicates("item_id")
        table = table.assign(_order=table["item_id"].map(order)).sort_values("_order")
        table = table.drop(columns="_order").reset_index(drop=True)
    missing = len(order) - len(table)
    if missing:
        raise RuntimeError(f"{missing} items have no response after the run")
    return table
