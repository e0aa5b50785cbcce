"""Which trailing tokens of the current forward pass are answer tokens (read by position-selective edits).

Label scoring (:func:`evenhand.engine.scoring.score_labels`) runs each prompt with its label's
tokens appended (teacher-forced) in one forward pass. An edit that should act only on the prompt,
only on its last token (the decision token, where the activation cache reads) or only on the
answer needs to know, for each row, how many trailing tokens belong to the answer: the engine
declares it here with :func:`answer_tokens` around its forward, and
:class:`steering.hooks.AtPositions` reads it with :func:`current_answer_tokens`. A forward with
no declaration holds no answer tokens unless it extends a KV cache (a generated token).
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

_ANSWER_TOKENS: ContextVar[tuple[int, ...] | None] = ContextVar("evenhand_answer_tokens", default=None)


@contextmanager
def answer_tokens(counts: Sequence[int]) -> Iterator[None]:
    """Inside the block, row ``i`` of a forward pass ends with ``counts[i]`` answer tokens."""
    token = _ANSWER_TOKENS.set(tuple(int(c) for c in counts))
    try:
        yield
    finally:
        _ANSWER_TOKENS.reset(token)


def current_answer_tokens() -> tuple[int, ...] | None:
    """The per-row answer-token counts declared by the enclosing :func:`answer_tokens` (None: none declared)."""
    return _ANSWER_TOKENS.get()
