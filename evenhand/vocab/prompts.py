"""Item -> chat messages -> model text, for the answer and reasoning variants.

The item's ``prompt`` is the user message of the *answer* variant (it ends with
``Answer with only "X A" or "X B".``). The *reasoning* variant replaces that
instruction with one asking for reasoning first and the final label last.
Text is the tokenizer's chat template with the generation prompt when it has
one (``chat_template="auto"``), else a plain ``User:``/``Assistant:`` format.
"""
from __future__ import annotations

import re
from typing import Literal, get_args

ChatTemplate = Literal["auto", "none"]
"""auto: the tokenizer's chat template when it has one; none: a plain User/Assistant format."""
CHAT_TEMPLATES = get_args(ChatTemplate)

REASONING_INSTRUCTION = ('Think through the case step by step, weighing the stated criteria. Then give your final '
                         'answer on its own last line as "Final answer: {a}" or "Final answer: {b}".')
ANSWER_RE = re.compile(r'Answer with only "([^"]+)" or "([^"]+)"\.\s*$')
"""The answer instruction that ends every suite prompt; its groups are the two labels."""
PLAIN_FORMAT = "User: {prompt}\nAssistant:"


def labels(item: dict) -> tuple[str, str]:
    noun = item.get("candidate_noun") or "Candidate"
    return f"{noun} A", f"{noun} B"


def user_message(item: dict, variant: str = "answer") -> str:
    prompt = item["prompt"]
    if variant == "answer":
        return prompt
    if variant != "reasoning":
        raise ValueError(f"prompt variant must be answer or reasoning, got {variant!r}")
    a, b = labels(item)
    m = ANSWER_RE.search(prompt)
    body = prompt[: m.start()].rstrip() if m else prompt.rstrip()
    return f"{body} {REASONING_INSTRUCTION.format(a=a, b=b)}"


def uses_chat_template(tokenizer, chat_template: ChatTemplate = "auto") -> bool:
    if chat_template not in CHAT_TEMPLATES:
        raise ValueError(f"chat_template must be auto or none, got {chat_template!r}")
    return chat_template == "auto" and bool(getattr(tokenizer, "chat_template", None))


def model_text(tokenizer, user: str, chat_template: str = "auto") -> str:
    """The full text the model sees before it answers."""
    if uses_chat_template(tokenizer, chat_template):
        return tokenizer.apply_chat_template([{"role": "user", "content": user}], add_generation_prompt=True,
                                             tokenize=False)
    return PLAIN_FORMAT.format(prompt=user)


PLAIN_ROLES = {"system": "System", "user": "User", "assistant": "Assistant"}
"""The plain format's name of each chat role."""


def chat_text(tokenizer, messages, chat_template: str = "auto") -> str:
    """The full text the model reads before its reply to ``messages`` (role/content dicts ending in a user
    message): the chat template with the generation prompt, else the plain format over turns (``System: ...``,
    ``User: ...``, ``Assistant: ...``, one message per line, ending in ``Assistant:``). One user message gives
    exactly :func:`model_text`."""
    if uses_chat_template(tokenizer, chat_template):
        return tokenizer.apply_chat_template([dict(m) for m in messages], add_generation_prompt=True,
                                             tokenize=False)
    return "\n".join(f"{PLAIN_ROLES[m['role']]}: {m['content']}" for m in messages) + "\nAssistant:"


def continuation(text: str, label: str) -> str:
    """The label as a continuation of ``text``: a leading space unless the text ends in whitespace."""
    return label if not text or text[-1].isspace() else " " + label
