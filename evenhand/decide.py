"""Items x model -> responses, in three modes, batched and resumable.

- ``answer``: greedy generation of at most ``max_new_tokens`` (default 8) with the KV
  cache, then the parser;
- ``reasoning``: the reasoning prompt variant, greedy up to ``reasoning_max_new_tokens``,
  then the parser;
- ``logprob``: the summed log-probability of each full label (``Applicant A`` vs
  ``Applicant B``) as a continuation of the prompt; the choice is the larger. When
  the two labels' tokens differ only in the last token (the usual case), one
  forward pass scores both; otherwise each label gets its own sequence.

Batches are length-bucketed (items sorted by token length, longest first) and
left-padded, with position ids that skip the padding. On out-of-memory a batch
is split in halves and later batches use the smaller size. Each batch becomes
one parquet shard under ``OUT/decisions/``; a re-run skips item ids already
written, so a run killed at any point resumes to the same table.
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

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {self.batch_size}")


def _is_oom(exc: BaseException) -> bool:
    return "out of memory" in str(exc).lower() or type(exc).__name__ == "OutOfMemoryError"


def plan_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Indices grouped into batches of similar length: longest first, ties in input order."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
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


def token_lengths(tokenizer, texts: list[str], special: bool, chunk: int = 512) -> list[int]:
    out: list[int] = []
    for i in range(0, len(texts), chunk):
        enc = tokenizer(texts[i:i + chunk], add_special_tokens=special)
        out.extend(len(x) for x in enc["input_ids"])
    return out


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
    import torch
    from transformers import LogitsProcessorList
    tok, model = lm.tokenizer, lm.model
    enc = tok(texts, add_special_tokens=special, padding=True, return_tensors="pt").to(model.device)
    rec = _GreedyLogprob()
    with torch.inference_mode():
        out = model.generate(**enc, max_new_tokens=max_new, do_sample=False, temperature=None, top_p=None,
                             top_k=None, repetition_penalty=1.0, pad_token_id=tok.pad_token_id,
                             logits_processor=LogitsProcessorList([rec]))
    width = enc["input_ids"].shape[1]
    new = out[:, width:].tolist()
    step_lp = torch.stack(rec.steps, 1).tolist() if rec.steps else [[] for _ in texts]
    eos = model.generation_config.eos_token_id
    eos = set(eos if isinstance(eos, list) else [eos]) - {None}
    rows = []
    for i, toks in enumerate(new):
        n = next((j + 1 for j, t in enumerate(toks) if t in eos), len(toks))
        rows.append({"text": tok.decode(toks[:n], skip_special_tokens=True), "n_new_tokens": n,
                     "gen_logprob": float(sum(step_lp[i][:n])), "n_prompt_tokens": int(enc["attention_mask"][i].sum())})
    return rows


def label_token_ids(tok, text: str, label: str, special: bool) -> tuple[list[int], list[int]]:
    """(context ids, label continuation ids), splitting the joint tokenisation at the context."""
    ctx = tok(text, add_special_tokens=special)["input_ids"]
    full = tok(text + continuation(text, label), add_special_tokens=special)["input_ids"]
    if full[:len(ctx)] == ctx and len(full) > len(ctx):
        return ctx, full[len(ctx):]
    return ctx, tok(continuation(text, label), add_special_tokens=False)["input_ids"]


def _logprob(lm: LoadedModel, texts: list[str], items: list[dict], special: bool) -> list[dict]:
    import torch
    tok, model = lm.tokenizer, lm.model
    seqs, plan = [], []
    for text, item in zip(texts, items):
        la, lb = labels(item)
        ctx, ca = label_token_ids(tok, text, la, special)
        _, cb = label_token_ids(tok, text, lb, special)
        if len(ca) == len(cb) and ca[:-1] == cb[:-1]:
            plan.append(("shared", len(seqs), ca, cb, len(ctx)))
            seqs.append(ctx + ca)
        else:
            plan.append(("separate", len(seqs), ca, cb, len(ctx)))
            seqs += [ctx + ca, ctx + cb]
    k = max(max(len(p[2]), len(p[3])) for p in plan)
    ids, mask, pos = _left_pad(seqs, tok.pad_token_id, model.device)
    with torch.inference_mode():
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
    return rows


def decide(items: pd.DataFrame | list[dict], lm: LoadedModel, opts: DecideOptions = DecideOptions(),
           out_dir: str | Path | None = None) -> pd.DataFrame:
    """Decide every item; with ``out_dir``, resumably (shards under ``out_dir/decisions``).

    Returns the responses table in the items' order: the item fields plus ``model``, ``mode``,
    ``text``, ``choice``, ``parse_method``, ``logprob_A``/``logprob_B`` (logprob mode),
    ``gen_logprob`` (generation modes), ``n_prompt_tokens``, ``n_new_tokens``, ``seconds``
    (batch wall time per item) and ``batch_size``."""
    from tqdm.auto import tqdm

    records = items.to_dict("records") if isinstance(items, pd.DataFrame) else list(items)
    order = {r["item_id"]: i for i, r in enumerate(records)}
    if len(order) != len(records):
        raise ValueError("items contain duplicate item_id values")
    shards = ParquetShards(Path(out_dir) / "decisions") if out_dir is not None else None
    done: set[str] = set()
    if shards is not None:
        shards.prepare()
        done = shards.done_ids() & set(order)
    todo = [r for r in records if r["item_id"] not in done]
    variant = "reasoning" if opts.mode == "reasoning" else "answer"
    special = not uses_chat_template(lm.tokenizer, opts.chat_template)
    texts = [model_text(lm.tokenizer, user_message(r, variant), opts.chat_template) for r in todo]
    batches = plan_batches(token_lengths(lm.tokenizer, texts, special), opts.batch_size)
    max_new = opts.max_new_tokens if opts.mode == "answer" else opts.reasoning_max_new_tokens
    halving = _Halving(opts.batch_size)
    collected: list[pd.DataFrame] = []

    def run(idx: list[int]) -> list[dict]:
        t0 = time.perf_counter()
        sub_items = [todo[i] for i in idx]
        sub_texts = [texts[i] for i in idx]
        if opts.mode == "logprob":
            out = _logprob(lm, sub_texts, sub_items, special)
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
