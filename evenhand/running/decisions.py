"""Items x model -> responses, in three modes, batched and resumable.

- ``answer``: greedy generation of at most ``max_new_tokens`` (default 8) with the KV
  cache, then the parser;
- ``reasoning``: the reasoning prompt variant, greedy up to ``reasoning_max_new_tokens``,
  then the parser;
- ``logprob``: the summed log-probability of each full label (``Applicant A`` vs
  ``Applicant B``) as a continuation of the prompt; the choice is the larger. When
  the two labels' tokens differ only in the last token (the usual case), one
  forward pass scores both; otherwise each label gets its own sequence.

The engine lives in :mod:`evenhand.engine` (batching, prefix reuse, the engines, the response row); this module
keeps the options and the loop. Prefix reuse (``prefix_reuse``, off by default; :mod:`evenhand.engine.prefix`) runs a
prompt prefix shared by several items of a batch once and reuses its KV cache."""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from ..engine import registry
from ..engine.batching import Halving, plan_batches, plan_batches_in_order, plan_prefix_batches, token_ids
from ..engine.registry import MODES, Batch, Mode, engine_of
from ..engine.rows import response_row
from ..models.plan import default_batch_size
from ..vocab.prompts import ChatTemplate, model_text, user_message, uses_chat_template
from .shards import ParquetShards
from ..runs.rundir import RunDir, RunError
from .stages import report_progress
from ..suite.matched import suite_mismatch


class ItemsFailed(RunError):
    """Items the engine could not answer after its retries (``failed``: (item_id, why) pairs); the others are
    decided and saved (``table``; with ``out_dir``, in its shards), and the same call again asks only the failed."""

    def __init__(self, failed: list[tuple[str, str]], total: int, table: pd.DataFrame):
        self.failed, self.table = failed, table
        super().__init__(f"{len(failed):,} of {total:,} items got no answer (first: item {failed[0][0]}, {failed[0][1]}); "
                         f"the {len(table):,} answered are saved: run the same command again to retry the others")


@dataclass(frozen=True)
class DecideOptions:
    """How to decide items."""
    mode: Mode = "answer"
    """answer | reasoning | logprob."""
    batch_size: int | None = None
    """Items per forward/generate call (halved automatically on out-of-memory); None (default): the largest that
    fits the CUDA device's free memory (:func:`evenhand.models.plan.default_batch_size`), 8 elsewhere."""
    max_new_tokens: int = 8
    """Generation budget in answer mode."""
    reasoning_max_new_tokens: int = 512
    """Generation budget in reasoning mode."""
    chat_template: ChatTemplate = "auto"
    """auto: the tokenizer's chat template when it has one; none: a plain User/Assistant format."""
    progress: bool = True
    """Show a progress bar with items/s."""
    progress_label: str = ""
    """What the progress bar says the decisions are for (``ablation label``), before ``decide[mode]``."""
    bucket: bool = True
    """Batch items of similar token length together (longest first); False keeps the input order."""
    # Prefix reuse (evenhand.engine.prefix): results equal the plain path up to float rounding. The response column
    # n_shared_prefix_tokens says how many prompt tokens a row took from a shared prefix (0 when none); it is present
    # only when reuse is on.
    prefix_reuse: bool = False
    """Run a prefix shared by several items of a batch once and reuse its KV cache (module docstring);
    batches then follow token order, not length."""
    prefix_min_tokens: int = 16
    """The fewest tokens a prefix must share to be run once for several rows."""
    # The engine decides each batch: a registered evenhand.engine.registry.Engine, loaded with
    # evenhand.engine.registry.load; hf is the default and the reference, vllm (evenhand.engine.vllm_engine) writes
    # the same rows.
    engine: str = registry.DEFAULT
    """A registered engine (evenhand.engine.registry): hf (Hugging Face, the reference) | vllm (answer and
    reasoning modes; batch_size is the items handed to vLLM at once) | openai (answer and reasoning modes through
    an OpenAI-compatible API; batch_size items per batch, concurrency of them in flight)."""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.batch_size is not None and self.batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {self.batch_size}")
        if self.prefix_min_tokens < 1:
            raise ValueError(f"prefix_min_tokens must be at least 1, got {self.prefix_min_tokens}")
        problem = registry.refusal(self.engine, mode=self.mode, prefix_reuse=self.prefix_reuse)
        if problem:
            raise ValueError(problem)


def decide(items: pd.DataFrame | list[dict], lm: Any, opts: DecideOptions = DecideOptions(),
           out_dir: str | Path | None = None) -> pd.DataFrame:
    """Decide every item; with ``out_dir``, resumably (shards under ``out_dir/decisions``).

    Returns the responses table in the items' order: the item fields plus ``model``, ``mode``,
    ``text``, ``choice``, ``parse_method``, ``parse_hedged``, ``logprob_A``/``logprob_B`` (logprob mode),
    ``gen_logprob`` (generation modes), ``n_prompt_tokens``, ``n_new_tokens``, ``seconds`` (batch
    wall time per item), ``batch_size`` and, with ``prefix_reuse``, ``n_shared_prefix_tokens``
    (prompt tokens taken from a prefix run once for several rows, else 0). ``lm`` must be loaded for
    ``opts.engine`` (:func:`evenhand.engine.registry.load`).

    Batches are length-bucketed (items sorted by token length, longest first; ``bucket=False`` keeps the input
    order) and left-padded, with position ids that skip the padding. On out-of-memory a batch is split in halves
    and later batches use the smaller size. Each batch becomes one parquet shard under ``OUT/decisions/``; a re-run
    skips item ids already written, so a run killed at any point resumes to the same table."""
    from tqdm.auto import tqdm
    if engine_of(lm) != opts.engine:
        raise ValueError(f"DecideOptions.engine is {opts.engine!r} but the model was loaded for the "
                         f"{engine_of(lm)!r} engine (evenhand.engine.registry.load)")
    engine = registry.get(opts.engine)

    records = items.to_dict("records") if isinstance(items, pd.DataFrame) else list(items)
    mismatch = suite_mismatch(lm, records)
    if mismatch:  # stated, not refused: the organism on any items is the plumbing check tests and smoke runs use
        warnings.warn(mismatch, UserWarning, stacklevel=2)
    order = {r["item_id"]: i for i, r in enumerate(records)}
    if len(order) != len(records):
        raise ValueError("items contain duplicate item_id values")
    shards = ParquetShards(RunDir(out_dir).decisions) if out_dir is not None else None
    done: set[str] = set()
    if shards is not None:
        shards.prepare()
        done = shards.done_ids() & set(order)
    todo = [r for r in records if r["item_id"] not in done]
    variant = "reasoning" if opts.mode == "reasoning" else "answer"
    messages = None
    if registry.takes_messages(opts.engine):  # the server templates and tokenises: EvenHand sends the chat
        texts = [user_message(r, variant) for r in todo]
        messages = [[{"role": "user", "content": t}] for t in texts]
        ids, special = [[] for _ in texts], False
    else:
        special = not uses_chat_template(lm.tokenizer, opts.chat_template)
        texts = [model_text(lm.tokenizer, user_message(r, variant), opts.chat_template) for r in todo]
        ids = token_ids(lm.tokenizer, texts, special)
    max_new = opts.max_new_tokens if opts.mode == "answer" else opts.reasoning_max_new_tokens
    if opts.batch_size is None:
        longest = max((len(x) for x in ids), default=0) + (max_new if opts.mode != "logprob" else 0)
        opts = replace(opts, batch_size=default_batch_size(lm, longest))
    if messages is not None:
        batches = plan_batches_in_order(len(ids), opts.batch_size)
    # An engine that reuses prefixes itself (vLLM) gets batches in token order, so items sharing a prefix land in
    # one batch (with vLLM use a few hundred items: it schedules the sequences itself).
    elif opts.prefix_reuse or engine.prefix_reuse == "automatic":
        batches = plan_prefix_batches(ids, opts.batch_size)
    elif opts.bucket:
        batches = plan_batches([len(x) for x in ids], opts.batch_size)
    else:
        batches = plan_batches_in_order(len(ids), opts.batch_size)
    min_prefix = opts.prefix_min_tokens if opts.prefix_reuse else 0
    halving = Halving(opts.batch_size)
    used_template = not special
    collected: list[pd.DataFrame] = []

    def run(idx: list[int]) -> list[dict]:
        t0 = time.perf_counter()
        batch = Batch(texts=[texts[i] for i in idx], ids=[ids[i] for i in idx], special=special,
                      items=[todo[i] for i in idx], messages=None if messages is None else [messages[i] for i in idx])
        if opts.mode == "logprob":
            out = engine.score_labels(lm, batch, min_prefix)
        else:
            out = engine.generate(lm, batch, max_new, min_prefix)
        dt = (time.perf_counter() - t0) / len(idx)
        for o in out:
            o.update(seconds=dt, batch_size=len(idx))
        return out

    bar = tqdm(total=len(records), initial=len(done), unit="item", disable=not opts.progress,
               desc=" ".join(filter(None, (opts.progress_label, f"decide[{opts.mode}]"))), dynamic_ncols=True)
    failed: list[tuple[str, str]] = []  # (item_id, why): items an engine could not answer (error in the row)
    for idx in batches:
        outs = halving.run(run, idx)
        for i, o in zip(idx, outs):
            if o.get("error"):
                failed.append((todo[i]["item_id"], o["error"]))
        rows = [response_row(todo[i], o, model=lm.name, mode=opts.mode, chat_template=used_template)
                for i, o in zip(idx, outs) if not o.get("error")]
        df = pd.DataFrame(rows)
        if len(df):
            df = df.drop(columns=["error"], errors="ignore")
            if shards is not None:
                shards.write(df)
            else:
                collected.append(df)
        bar.update(len(idx))
        report_progress(bar.n, bar.total)  # the run's time left in this stage
    bar.close()
    table = shards.read_all() if shards is not None else (pd.concat(collected, ignore_index=True) if collected
                                                          else pd.DataFrame())
    if len(table):
        table = table[table["item_id"].isin(order)].drop_duplicates("item_id")
        table = table.assign(_order=table["item_id"].map(order)).sort_values("_order")
        table = table.drop(columns="_order").reset_index(drop=True)
    if failed:
        raise ItemsFailed(failed, len(order), table)
    missing = len(order) - len(table)
    if missing:
        raise RuntimeError(f"{missing} items have no response after the run")
    return table
