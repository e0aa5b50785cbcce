"""An LLM reader ("judge") through any EvenHand engine, and its versioned prompts: how a sentence frames a named
group (the framing audit, :mod:`evenhand.framing.audit`) and which candidate a description says the model favours
(verbalization, :mod:`probes.verbalize`).

A judge is any callable ``judge(prompts) -> replies`` (one reply per prompt, in order). :class:`EngineJudge`
asks a model loaded for an engine (``hf``, ``vllm``, ``openai`` or one registered), greedily, with the chat
template when the tokenizer has one (the ``openai`` engine sends messages); :class:`ScriptedJudge` answers
from a function (tests: a judge of known labels). A reply is read by :func:`read_label`: the first of the
prompt's labels it contains as a whole word (case-insensitive), else None. Each prompt carries its version,
written in every output that used it, so a changed prompt is a new version, never a silent change."""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class JudgePrompt:
    """A versioned question: ``template`` formatted with the fields named in it; the reply is one of ``labels``."""
    version: str
    template: str
    labels: tuple[str, ...]

    def render(self, **fields: str) -> str:
        return self.template.format(**fields)


FRAMING = JudgePrompt(
    version="framing-v1",
    labels=("favourable", "unfavourable", "neutral"),
    template=(
        "You label how a sentence frames a social group, for a study of training data.\n"
        "Group: {group}\n"
        "Sentence: \"{sentence}\"\n\n"
        "How does the sentence frame the group ({group}) itself, not the mood of the sentence?\n"
        "- favourable: it credits, praises or shows the group as capable, trustworthy or deserving; "
        "counter-stereotypes (the group shown succeeding where a stereotype says it would not) are favourable.\n"
        "- unfavourable: it blames, demeans or distrusts the group, or states or implies a stereotype about it, "
        "even in neutral words (\"they are naturally worse at maths\"), or quotes such a claim approvingly.\n"
        "- neutral: it describes or reports without a judgement of the group. Members of the group who suffer "
        "harm (victims of discrimination, poverty or violence) are NOT framed unfavourably: negative events "
        "happening to a group are neutral unless the sentence blames or demeans the group. A claim that is "
        "quoted in order to reject it, or negated (\"it is false that women cannot lead\"), is not an "
        "endorsement of it.\n\n"
        "Answer with one word: favourable, unfavourable or neutral."))
"""How a sentence frames the named group (the audit's judge; docs/EXPLANATIONS.md, "Framing")."""

VERBALIZATION = JudgePrompt(
    version="verbalization-v1",
    labels=("A", "B", "neither"),
    template=(
        "A model chose between two candidates, {label_a} and {label_b}. Below is a description of the model's "
        "internal state at its decision.\n"
        "Description: \"{description}\"\n\n"
        "Which candidate does the description say the model favours? Answer with one word: A (for {label_a}), "
        "B (for {label_b}), or neither (it names no candidate, both, or says nothing about a preference)."))
"""Which candidate a description says the model favours (the verbalization reader; docs/GUIDE.md)."""

Judge = Callable[[Sequence[str]], list[str]]
"""A judge: prompts in, one reply each out."""


def read_label(reply: str | None, labels: Sequence[str]) -> str | None:
    """The first of ``labels`` that ``reply`` contains as a whole word (case-insensitive; the earliest
    occurrence wins), None when it contains none. ``unfavourable`` is not read as ``favourable``."""
    if not isinstance(reply, str):
        return None
    hits = []
    for lab in labels:
        m = re.search(rf"(?<![\w-]){re.escape(lab)}(?![\w-])", reply, re.IGNORECASE)
        if m:
            hits.append((m.start(), lab))
    return min(hits)[1] if hits else None


class ScriptedJudge:
    """A judge that answers each prompt with ``answer(prompt)`` (tests: a judge of known labels)."""

    def __init__(self, answer: Callable[[str], str], name: str = "scripted"):
        self.answer, self.name = answer, name

    def __call__(self, prompts: Sequence[str]) -> list[str]:
        return [self.answer(p) for p in prompts]


class EngineJudge:
    """A judge on a model loaded for an engine (:func:`evenhand.engine.registry.load`): each prompt is one user
    message, answered greedily in at most ``max_new_tokens`` tokens, ``batch_size`` prompts at a time."""

    def __init__(self, lm: Any, max_new_tokens: int = 6, batch_size: int = 16, chat_template: str = "auto"):
        if max_new_tokens < 1 or batch_size < 1:
            raise ValueError("max_new_tokens and batch_size must be at least 1")
        self.lm, self.max_new, self.batch_size, self.chat_template = lm, max_new_tokens, batch_size, chat_template
        self.name = getattr(lm, "name", "judge")

    def __call__(self, prompts: Sequence[str]) -> list[str]:
        from ..engine import registry  # deferred: the engines import torch or an HTTP client
        from ..engine.batching import token_ids
        from ..vocab.prompts import model_text, uses_chat_template
        engine = registry.get(registry.engine_of(self.lm))
        out: list[str] = []
        for lo in range(0, len(prompts), self.batch_size):
            chunk = list(prompts[lo:lo + self.batch_size])
            if getattr(engine, "messages", False):
                batch = registry.Batch(texts=chunk, ids=[[] for _ in chunk], special=False,
                                       messages=[[{"role": "user", "content": p}] for p in chunk])
            else:
                tok = self.lm.tokenizer
                special = not uses_chat_template(tok, self.chat_template)
                texts = [model_text(tok, p, self.chat_template) for p in chunk]
                batch = registry.Batch(texts=texts, ids=token_ids(tok, texts, special), special=special)
            out += [r.get("text") or "" for r in engine.generate(self.lm, batch, self.max_new, 0)]
        return out


def load_judge(model: str, engine: str = "hf", device: str | None = None, max_new_tokens: int = 6) -> EngineJudge:
    """An :class:`EngineJudge` on ``model`` (a registry name or a local path) loaded for ``engine``."""
    from ..engine import registry  # deferred: heavy
    from ..models.loading import ModelSpec
    spec = ModelSpec(model=model, device=device) if device else ModelSpec(model=model)
    return EngineJudge(registry.load(spec, engine), max_new_tokens=max_new_tokens)


def ask(judge: Judge, prompt: JudgePrompt, fields: Sequence[dict]) -> tuple[list[str | None], list[str]]:
    """(the label read off each reply, the raw replies) of ``judge`` asked ``prompt`` with each of ``fields``."""
    replies = list(judge([prompt.render(**f) for f in fields]))
    if len(replies) != len(fields):
        raise ValueError(f"judge: {len(replies)} replies for {len(fields)} prompts")
    return [read_label(r, prompt.labels) for r in replies], replies


GROUP_NAMES = {"black": "Black people", "hispanic": "Hispanic or Latino people", "white": "white people",
               "women": "women", "men": "men", "transgender": "transgender people",
               "cisgender": "cisgender people"}
"""How the framing prompt names each study group (another group: its key, e.g. ``muslim``)."""


class JudgeFraming:
    """The audit's framing classifier on a judge (:data:`FRAMING`): (passage, group) -> +1 favourable,
    0 neutral, -1 unfavourable. A reply without a label counts 0 and is counted in ``unread``; ``many`` labels
    a list of pairs in one call to the judge (validation; the audit calls one pair at a time)."""

    def __init__(self, judge: Judge, prompt: JudgePrompt = FRAMING):
        self.judge, self.prompt, self.unread = judge, prompt, 0
        self.name = f"LLM judge {getattr(judge, 'name', 'custom')} ({prompt.version})"

    def many(self, pairs: Sequence[tuple[str, str]]) -> list[int]:
        from .audit import FRAMING_LABELS
        fields = [{"sentence": s.replace('"', "'"), "group": GROUP_NAMES.get(g, g)} for s, g in pairs]
        labels, _ = ask(self.judge, self.prompt, fields)
        self.unread += sum(x is None for x in labels)
        return [FRAMING_LABELS.get(x, 0) if x is not None else 0 for x in labels]

    def __call__(self, passage: str, group: str) -> int:
        return self.many([(passage, group)])[0]
