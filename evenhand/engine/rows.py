"""The one place a response row is built: item fields, engine output and the choice.

:func:`response_row` is what :func:`evenhand.running.decisions.decide` writes per item and what multi-turn
procedures (``interventions.chat``) write for their final turn, so both tables have the same columns.
"""
from __future__ import annotations

from ..parsing.parse import parse_detail
from ..vocab.prompts import labels


def choice_fields(item: dict, output: dict, mode: str) -> dict:
    """The choice read from an engine ``output``: in ``logprob`` mode the label with the larger
    log-probability (``text`` = that label, ``choice``, ``parse_method`` = ``"logprob"``; ties go
    to A; ``parse_hedged`` False; ``parse_verdict`` ``"choice"``); otherwise the parse of ``output["text"]``
    (``choice``, ``parse_method``, ``parse_hedged``: a refusal that still committed to the choice;
    ``parse_verdict``: ``choice``, ``refusal`` (the model declined) or ``unparsed`` (no verdict found),
    docs/PARSING.md). Rows written before ``parse_hedged``/``parse_verdict`` existed lack them; scoring
    recomputes the verdict (:func:`evenhand.scoring.metrics.verdicts`)."""
    if mode == "logprob":
        choice = "A" if output["logprob_A"] >= output["logprob_B"] else "B"
        return {"text": labels(item)[0 if choice == "A" else 1], "choice": choice, "parse_method": "logprob",
                "parse_hedged": False, "parse_verdict": "choice"}
    det = parse_detail(output["text"], item.get("candidate_noun"))
    return {"choice": det.choice, **det.fields()}


def response_row(item: dict, output: dict, *, model: str, mode: str, chat_template: bool) -> dict:
    """One responses-table row: the item's fields, then ``model``, ``mode``, ``chat_template``
    (whether the chat template was applied), ``logprob_A``/``logprob_B``/``gen_logprob`` (None
    unless ``output`` has them), every field of ``output``, and :func:`choice_fields`."""
    row = dict(item)
    row.update(model=model, mode=mode, chat_template=chat_template)
    row.update({"logprob_A": None, "logprob_B": None, "gen_logprob": None, **output})
    row.update(choice_fields(item, output, mode))
    return row
