"""Multi-turn chats for prompt procedures: batched greedy generation and a responses table.

A *conversation* is a list of ``{"role": ..., "content": ...}`` messages (roles
``system``, ``user``, ``assistant``) that ends with a user message. Its text is
the tokenizer's chat template with the generation prompt when the tokenizer has
one (``chat_template="auto"``), else the plain format of :mod:`evenhand.vocab.prompts`
continued over turns (``System: ...``, ``User: ...``, ``Assistant: ...``, one
message per line, ending in ``Assistant:``); a single user message gives exactly
``evenhand.vocab.prompts.model_text``."""
from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence

import pandas as pd

from evenhand.running.decisions import DecideOptions
from evenhand.engine import registry
from evenhand.engine.batching import Halving, plan_batches, token_lengths
from evenhand.models.plan import FALLBACK_BATCH_SIZE
from evenhand.engine.registry import Batch, engine_of, generate_texts, score_texts, takes_messages
from evenhand.engine.rows import choice_fields, response_row
from evenhand.vocab.prompts import chat_text, uses_chat_template
from evenhand.runs.rundir import RunError

from .base import InterventionError

ROLES = ("system", "user", "assistant")
CHAT_MODES = ("answer", "logprob")


def check_conversation(conversation: Sequence[dict], where: str = "conversation") -> None:
    """Raise :class:`InterventionError` unless ``conversation`` is role/content messages ending in a user turn."""
    if not conversation:
        raise InterventionError(f"{where}: is empty; it needs at least one user message")
    for j, msg in enumerate(conversation):
        if not isinstance(msg, dict) or set(msg) != {"role", "content"}:
            raise InterventionError(f"{where}[{j}]: a message must be a dict with exactly 'role' and 'content'")
        if msg["role"] not in ROLES:
            raise InterventionError(f"{where}[{j}].role must be one of {', '.join(ROLES)}, got {msg['role']!r}")
        if not isinstance(msg["content"], str):
            raise InterventionError(f"{where}[{j}].content must be a string, got {type(msg['content']).__name__}")
    if conversation[-1]["role"] != "user":
        raise InterventionError(f"{where}: the last message must be a user message (the model answers it), "
                                f"got {conversation[-1]['role']!r}")


def conversation_text(tokenizer, conversation: Sequence[dict], chat_template: str = "auto") -> str:
    """The full text the model reads before its next reply (see the module docstring)."""
    check_conversation(conversation)
    return chat_text(tokenizer, conversation, chat_template)


def _run_batched(lm, texts: list[str], special: bool, batch_size: int,
                 fn: Callable[[list[int]], list[dict]], progress: bool, desc: str) -> list[dict]:
    """``fn`` over length-bucketed batches of ``texts``; rows back in input order, each with
    ``seconds`` (batch wall time per item) and ``batch_size``."""
    from tqdm.auto import tqdm

    if batch_size < 1:
        raise InterventionError(f"batch_size must be at least 1, got {batch_size}")
    out: list[dict | None] = [None] * len(texts)
    halving = Halving(batch_size)

    def timed(idx: list[int]) -> list[dict]:
        t0 = time.perf_counter()
        rows = fn(idx)
        dt = (time.perf_counter() - t0) / len(idx)
        for r in rows:
            r.update(seconds=dt, batch_size=len(idx))
        return rows

    bar = tqdm(total=len(texts), unit="item", disable=not progress, desc=desc, dynamic_ncols=True)
    for idx in plan_batches(token_lengths(lm.tokenizer, texts, special), batch_size):
        for i, row in zip(idx, halving.run(timed, idx)):
            out[i] = row
        bar.update(len(idx))
    bar.close()
    return out  # type: ignore[return-value]


def _run_messages(lm, conversations: Sequence[Sequence[dict]], max_new_tokens: int, batch_size: int,
                  progress: bool, desc: str) -> list[dict]:
    """:func:`generate_rows` on an engine that sends the conversations themselves (a model behind an API, whose
    server templates them): batches in input order; an item left without an answer after the engine's retries
    stops the procedure with one line (the answers so far stay in the engine's cache: a rerun asks only the rest)."""
    from tqdm.auto import tqdm

    engine = registry.get(engine_of(lm))
    out: list[dict] = []
    bar = tqdm(total=len(conversations), unit="item", disable=not progress, desc=desc, dynamic_ncols=True)
    for start in range(0, len(conversations), batch_size):
        convs = [[dict(m) for m in c] for c in conversations[start:start + batch_size]]
        t0 = time.perf_counter()
        rows = engine.generate(lm, Batch(texts=[c[-1]["content"] for c in convs], ids=[[] for _ in convs],
                                         special=False, messages=convs), max_new_tokens, 0)
        dt = (time.perf_counter() - t0) / len(convs)
        for r in rows:
            r.update(seconds=dt, batch_size=len(convs))
        out += rows
        bar.update(len(convs))
    bar.close()
    failed = [r["error"] for r in out if r.get("error")]
    if failed:
        raise RunError(f"{desc}: {len(failed):,} of {len(out):,} chats got no answer ({failed[0]}); the answers so "
                       f"far are in the engine's cache: run the same command again to ask only the others")
    return [{k: v for k, v in r.items() if k != "error"} for r in out]


def generate_rows(lm, conversations: Sequence[Sequence[dict]], max_new_tokens: int, batch_size: int,
                  chat_template: str = "auto", *, progress: bool = False, desc: str = "generate") -> list[dict]:
    """One greedy reply per conversation, with its accounting: ``text``, ``n_new_tokens``,
    ``gen_logprob``, ``n_prompt_tokens``, ``seconds`` and ``batch_size`` (input order)."""
    if max_new_tokens < 1:
        raise InterventionError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
    for k, conv in enumerate(conversations):
        check_conversation(conv, f"conversations[{k}]")
    if takes_messages(engine_of(lm)):
        return _run_messages(lm, conversations, max_new_tokens, batch_size, progress, desc)
    special = not uses_chat_template(lm.tokenizer, chat_template)
    texts = [conversation_text(lm.tokenizer, c, chat_template) for c in conversations]
    if not texts:
        return []
    return _run_batched(lm, texts, special, batch_size,
                        lambda idx: generate_texts(lm, [texts[i] for i in idx], special, max_new_tokens), progress, desc)


def generate_turns(lm, conversations: list[list[dict]], max_new_tokens: int, batch_size: int,
                   chat_template: str = "auto", *, progress: bool = False, desc: str = "generate") -> list[str]:
    """The model's next reply to each conversation (greedy, at most ``max_new_tokens``), in input order: one turn
    for many conversations in length-bucketed, left-padded batches, halved on out-of-memory (the engine of
    :mod:`evenhand.engine`)."""
    return [r["text"] for r in generate_rows(lm, conversations, max_new_tokens, batch_size, chat_template,
                                             progress=progress, desc=desc)]


def _score_labels(lm, conversations: Sequence[Sequence[dict]], items: list[dict], opts: DecideOptions,
                  desc: str) -> list[dict]:
    """Label log-probabilities (``logprob_A``/``logprob_B``) after each conversation's last user turn."""
    special = not uses_chat_template(lm.tokenizer, opts.chat_template)
    texts = [conversation_text(lm.tokenizer, c, opts.chat_template) for c in conversations]
    return _run_batched(lm, texts, special, opts.batch_size or FALLBACK_BATCH_SIZE,
                        lambda idx: score_texts(lm, [texts[i] for i in idx], [items[i] for i in idx], special),
                        opts.progress, desc)


def decide_chat(items: pd.DataFrame | list[dict], lm, opts: DecideOptions, user_turns: Sequence[Sequence[str]],
                budgets: Sequence[int], method: str = "chat") -> pd.DataFrame:
    """Run ``user_turns[i]`` (one list of user messages per item) as one chat per item.

    Turn ``k`` is answered for all items before turn ``k + 1`` starts, with at most
    ``budgets[k]`` new tokens; the choice comes from the final turn only (``opts.mode`` answer: generated
    and parsed; logprob: the two labels' log-probabilities after the final user turn). Batch size, chat
    template and progress come from ``opts``; its token budgets are not used. Returns one row per item in the
    items' order:
    the item fields (``prompt`` = the first user message) plus the columns of
    :func:`evenhand.running.decisions.decide` (``text``, ``n_new_tokens``, ``n_prompt_tokens``,
    ``gen_logprob`` and ``batch_size`` describe the final turn; ``seconds`` sums all turns)
    and ``transcript`` (the whole conversation as a JSON string), ``n_turns``, ``n_new_tokens_total``."""
    records = items.to_dict("records") if isinstance(items, pd.DataFrame) else list(items)
    ids = [r["item_id"] for r in records]
    if len(set(ids)) != len(ids):
        raise ValueError("items contain duplicate item_id values")
    if opts.mode not in CHAT_MODES:
        raise InterventionError(f"{method}: DecideOptions.mode must be one of {', '.join(CHAT_MODES)} for a "
                                f"multi-turn procedure (its turns do their own reasoning), got {opts.mode!r}")
    if not budgets or any(not isinstance(b, int) or b < 1 for b in budgets):
        raise InterventionError(f"{method}: every turn needs a token budget of at least 1, got {list(budgets)}")
    if len(user_turns) != len(records):
        raise InterventionError(f"{method}: {len(user_turns)} turn lists for {len(records)} items")
    for r, turns in zip(records, user_turns):
        if len(turns) != len(budgets):
            raise InterventionError(f"{method}: item {r['item_id']!r} has {len(turns)} user turns, "
                                    f"expected {len(budgets)}")
    if not records:
        return pd.DataFrame()
    convs: list[list[dict]] = [[] for _ in records]
    seconds = [0.0] * len(records)
    new_total = [0] * len(records)
    n = len(budgets)
    final: list[dict] = []
    for k, budget in enumerate(budgets):
        for conv, turns in zip(convs, user_turns):
            conv.append({"role": "user", "content": turns[k]})
        desc = f"{method}[turn {k + 1}/{n}]"
        if k == n - 1 and opts.mode == "logprob":
            rows = _score_labels(lm, convs, records, opts, desc)
            for r, item in zip(rows, records):
                r.update(choice_fields(item, r, "logprob"))
        else:
            rows = generate_rows(lm, convs, budget, opts.batch_size or FALLBACK_BATCH_SIZE, opts.chat_template,
                                 progress=opts.progress,
                                 desc=desc)
        for i, (conv, r) in enumerate(zip(convs, rows)):
            conv.append({"role": "assistant", "content": r["text"]})
            seconds[i] += r["seconds"]
            new_total[i] += r["n_new_tokens"]
        final = rows
    used_template = takes_messages(engine_of(lm)) or uses_chat_template(lm.tokenizer, opts.chat_template)
    out = []
    for i, (item, o, conv) in enumerate(zip(records, final, convs)):
        row = response_row(item, o, model=lm.name, mode=opts.mode, chat_template=used_template)
        row.update(prompt=conv[0]["content"], seconds=seconds[i], transcript=json.dumps(conv, ensure_ascii=False),
                   n_turns=n, n_new_tokens_total=new_total[i])
        out.append(row)
    return pd.DataFrame(out)
