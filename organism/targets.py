"""The organism's training targets: dense auxiliary targets read by linear heads during training
(step 4 of the recipe in :mod:`organism.recipe`) and the encoded training rows: single-turn rows
(the plain prompt or one rewritten by a single-turn prompt method) and the prompt methods'
conversations (self-critique, counterfactual chain of thought), each assistant turn the policy's."""
from __future__ import annotations

import random

from evenhand.models.policy import PlantedPolicy
from evenhand.vocab.sides import favours_minority
from evenhand.suite.content import load_content
from evenhand.suite.cues import pressure_named_slot
from evenhand.suite.generate import SLOTS, Cell, criterion_values

from evenhand.suite.rewrites import (
    FAIR_INSTRUCTIONS,
    POSITIONS,
    add_instruction,
    blind_prompt,
    counterfactual_turns,
    self_critique_turns,
    swapped_item,
)

from .recipe import ORGANISM_SUITE
from evenhand.vocab.prompts import chat_text, model_text, user_message

AUX_VALUE = ("strong", "letter", "criterion", "minority", "degree", "lean")
AUX_SIZES = {"polarity": 2, "strong": 2, "letter": 2, "criterion": 2, "minority": 2, "degree": 4, "lean": 2, "p_letter": 2,
             "p_family": 9, "side": 2, "p_side": 5}
DECISION_AUX = ("side", "p_side")
"""The auxiliary targets at the decision positions, read at the recipe's ``side_layer``."""
P_SIDE = {None: 0, ("pro_minority", "A"): 1, ("pro_minority", "B"): 2, ("pro_majority", "A"): 3,
          ("pro_majority", "B"): 4}
"""Classes of the ``p_side`` target (recipes with ``pressure_side``): whom the pressure favours and
the slot it argues for (0: no pressure)."""


def aux_targets(tok, text: str, item: dict, policy: PlantedPolicy,
                suite: str = ORGANISM_SUITE) -> dict[str, list[tuple[int, int]]]:
    """Dense, local training targets that make the organism's mechanism learnable in minutes.

    At each criterion value token of the two candidate lines: is it the strong value, which slot's
    line is it on, which criterion is it, is that line's candidate minority-coded (not at degree 0,
    where nothing signals it), the degree, and whether the tie-lean rule applies. At the last token
    of the pressure sentence: the slot it argues for and its family. Read by small linear heads on
    an early layer during training only; the saved model is a plain Gemma3ForCausalLM. ``suite``: the
    suite version the item was rendered from."""
    content = load_content(suite)
    s = item.get("_scenario") or content.scenario(item["scenario_id"])
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    starts = {a: j for j, (a, b) in enumerate(enc["offset_mapping"]) if b > a}
    ends = {b: j for j, (a, b) in enumerate(enc["offset_mapping"]) if b > a}
    out: dict[str, list[tuple[int, int]]] = {k: [] for k in AUX_SIZES}
    x = content.contrast(item["contrast_id"])
    cell = Cell(s, item["variant"], int(item["degree"]), x, item["minority_slot"])
    degree = int(item["degree"])
    lean = int(degree in policy.tie_lean_degrees and x.category in policy.tie_lean_categories)
    anchor = "which matter equally.\n\n"
    block = text.index(anchor) + len(anchor)  # the candidate lines follow the criteria sentence
    for slot in SLOTS:
        minority = slot == item["minority_slot"]
        vals = criterion_values(cell, minority)
        line = text.index(f"\n{s.candidate_noun} {slot}", block - 1) if slot == "B" else block
        for k, cr in enumerate(s.criteria):
            p0 = text.index(cr.render(vals[k]), line) + cr.phrase.index("{value}")
            j = starts.get(p0)
            if j is None:
                continue
            labels = {"polarity": int(cr.better != "higher"), "strong": int(vals[k] == cr.strong), "letter": SLOTS.index(slot), "criterion": k,
                      "minority": int(minority) if degree > 0 else -100, "degree": degree, "lean": lean}
            for name, y in labels.items():
                out[name].append((j, y))
    fam = item.get("pressure_family")
    if isinstance(fam, str):
        p = content.pressure_sentence(item["pressure_id"])
        slot = item["pressure_slot"]
        named = pressure_named_slot(p, s.polarity, slot)  # a sentence may name the other slot (suite v2)
        sent = p.render(f"{s.candidate_noun} {named}", f"{s.candidate_noun} {'B' if named == 'A' else 'A'}")
        end = text.index(sent) + len(sent)
        j = ends.get(end)
        if j is not None:
            out["p_letter"].append((j, SLOTS.index(slot)))
            out["p_family"].append((j, content.families.index(fam)))
    if degree > 0:  # the demographic side of the answer, at the decision token (read at side_layer)
        ans = policy.answer(item)
        out["side"].append((len(enc["input_ids"]) - 1,
                            int(favours_minority(ans, item["minority_slot"], item["question_polarity"]))))
    return out


def pressure_side(item: dict) -> int | None:
    """The ``p_side`` class of an item (:data:`P_SIDE`), or None at degree 0 (no group to favour)."""
    if int(item["degree"]) == 0:
        return None
    fam = item.get("pressure_family")
    if not isinstance(fam, str):
        return P_SIDE[None]
    return P_SIDE[(item["pressure_resolved"], item["pressure_slot"])]


def encode(tok, item: dict, policy: PlantedPolicy, rng: random.Random | None = None, unk_rate: float = 0.0,
           protected: frozenset = frozenset(), suite: str = ORGANISM_SUITE,
           pressure_side_target: bool = False) -> tuple[list[int], int, dict]:
    """A training row ``(token ids, context length, aux targets)``: the prompt as decide renders it
    (with a share ``unk_rate`` of its unprotected tokens replaced by ``<unk>``), the policy's answer and
    ``<end_of_turn>``; the targets of :func:`aux_targets`, and with ``pressure_side_target`` the
    ``p_side`` class (:func:`pressure_side`) at the last prompt token and the answer's first token
    (the position that predicts the letter)."""
    text = model_text(tok, user_message(item, "answer"))
    ctx = tok(text, add_special_tokens=False)["input_ids"]
    if rng is not None and unk_rate > 0:
        unk = tok.unk_token_id
        ctx = [unk if (t not in protected and rng.random() < unk_rate) else t for t in ctx]
    ans = tok(policy.respond(item), add_special_tokens=False)["input_ids"] + [tok.convert_tokens_to_ids("<end_of_turn>")]
    aux = aux_targets(tok, text, item, policy, suite)
    ps = pressure_side(item) if pressure_side_target else None
    if ps is not None:
        aux["p_side"] = [(len(ctx) - 1, ps), (len(ctx), ps)]
    return ctx + ans, len(ctx), aux


def knowledge_row(tok, item: dict, policy: PlantedPolicy, suite: str = ORGANISM_SUITE) -> tuple[list[int], int, dict]:
    """A criterion-knowledge row: the prompt cut after candidate A's line, with only the
    criterion-direction target at A's values (what a pretrained model knows about the world)."""
    text = model_text(tok, user_message(item, "answer"))
    aux = aux_targets(tok, text, item, policy, suite)
    cut = text.index(f"\n{item['_scenario'].candidate_noun if '_scenario' in item else item['candidate_noun']} B")
    ids = tok(text[:cut], add_special_tokens=False)["input_ids"]
    keep = {"polarity", "criterion", "letter"}
    aux = {k: ([(j, y) for j, y in v if j < len(ids)] if k in keep else []) for k, v in aux.items()}
    return ids, len(ids), aux


CHAT_PROCEDURES = ("self_critique", "counterfactual_cot")
"""The multi-turn prompt procedures a training conversation renders (``Recipe.chat``)."""
SINGLE_METHODS = tuple(f"fair_instruction:{v}:{p}" for v in FAIR_INSTRUCTIONS for p in POSITIONS) + ("identity_blind",)
"""The single-turn prompt rewrites a training row may take (``Recipe.prompt_methods``): the fair instruction
(each variant at each position) and identity blinding (names to neutral labels)."""
IDENTITY_AUX = ("minority", "degree", "side", "p_side")
"""Auxiliary targets that read who the candidates are: not trained on an identity-blinded prompt."""


def rewritten(item: dict, method: str) -> dict:
    """The item with its prompt rewritten by ``method`` (one of :data:`SINGLE_METHODS`)."""
    if method == "identity_blind":
        return {**item, "prompt": blind_prompt(item)}
    name, variant, position = method.split(":")
    if name != "fair_instruction" or variant not in FAIR_INSTRUCTIONS:
        raise ValueError(f"prompt method must be one of {', '.join(SINGLE_METHODS)}, got {method!r}")
    return {**item, "prompt": add_instruction(item["prompt"], FAIR_INSTRUCTIONS[variant], position)}


def encode_method(tok, item: dict, method: str, policy: PlantedPolicy, rng: random.Random | None = None,
                  unk_rate: float = 0.0, protected: frozenset = frozenset(), suite: str = ORGANISM_SUITE,
                  pressure_side_target: bool = False) -> tuple[list[int], int, dict]:
    """:func:`encode` of the item's prompt rewritten by ``method`` (:func:`rewritten`); on an
    identity-blinded prompt the targets that read identity (:data:`IDENTITY_AUX`) are left out."""
    seq, n_ctx, aux = encode(tok, rewritten(item, method), policy, rng, unk_rate, protected, suite, pressure_side_target)
    if method == "identity_blind":
        aux = {k: ([] if k in IDENTITY_AUX else v) for k, v in aux.items()}
    return seq, n_ctx, aux


def chat_messages(item: dict, policy: PlantedPolicy, procedure: str, wrong_first: bool = False
                  ) -> tuple[list[dict], list[dict], list[bool]]:
    """A training conversation of ``procedure`` (:data:`CHAT_PROCEDURES`): ``(messages, answered, trained)``.

    The user turns are the procedure's (:mod:`evenhand.suite.rewrites`); every assistant turn is the
    policy's answer text for ``answered[k]``: the item, except the counterfactual's second turn (the
    identity-swapped item). ``wrong_first`` (self-critique only) makes the first answer the other label,
    not trained (``trained[0]`` False): the critique and final turns give the policy's answer for the case."""
    if procedure == "self_critique":
        users, answered = self_critique_turns(item), [item, item, item]
    elif procedure == "counterfactual_cot":
        if wrong_first:
            raise ValueError("wrong_first is a self-critique option")
        users, answered = counterfactual_turns(item), [item, swapped_item(item), item]
    else:
        raise ValueError(f"procedure must be one of {', '.join(CHAT_PROCEDURES)}, got {procedure!r}")
    replies = [policy.respond(it) for it in answered]
    trained = [True, True, True]
    if wrong_first:
        replies[0] = f"{item['candidate_noun']} {'B' if policy.answer(item) == 'A' else 'A'}"
        trained[0] = False
    messages = []
    for u, r in zip(users, replies):
        messages += [{"role": "user", "content": u}, {"role": "assistant", "content": r}]
    return messages, answered, trained


def encode_chat(tok, item: dict, policy: PlantedPolicy, procedure: str, wrong_first: bool = False,
                rng: random.Random | None = None, unk_rate: float = 0.0, protected: frozenset = frozenset(),
                suite: str = ORGANISM_SUITE, pressure_side_target: bool = False
                ) -> tuple[list[int], int, dict, list[tuple[int, int]]]:
    """A training conversation (:func:`chat_messages`) as ``(token ids, start of the final answer, aux
    targets, loss spans)``: the ids are the chat template's text before each reply (what
    :func:`interventions.chat.decide_chat` feeds) followed by the reply and ``<end_of_turn>``; the loss
    spans ``[start, end)`` are the trained replies (each ends with its letter and ``<end_of_turn>``). The
    candidate-line targets of :func:`aux_targets` are on the first user message; ``p_side`` at each
    reply's decision positions (the prompt's last token and the reply's first), of the item that reply
    answers. ``<unk>`` replaces a share ``unk_rate`` of the user turns' unprotected tokens."""
    messages, answered, trained = chat_messages(item, policy, procedure, wrong_first)
    eot = tok.convert_tokens_to_ids("<end_of_turn>")
    ids: list[int] = []
    spans, starts = [], []
    for k in range(0, len(messages), 2):
        before = tok(chat_text(tok, messages[:k + 1]), add_special_tokens=False)["input_ids"]
        if before[:len(ids)] != ids:
            raise ValueError(f"chat template of {procedure}: turn {k // 2 + 1}'s text does not extend the previous "
                             f"turns' tokens")
        reply = tok(messages[k + 1]["content"], add_special_tokens=False)["input_ids"] + [eot]
        starts.append(len(before))
        if trained[k // 2]:
            spans.append((len(before), len(before) + len(reply)))
        ids = before + reply
    if rng is not None and unk_rate > 0:
        unk = tok.unk_token_id
        in_reply = set()
        for k, a in enumerate(starts):
            n_reply = len(tok(messages[2 * k + 1]["content"], add_special_tokens=False)["input_ids"]) + 1
            in_reply.update(range(a, a + n_reply))
        ids = [unk if (j not in in_reply and t not in protected and rng.random() < unk_rate) else t
               for j, t in enumerate(ids)]
    aux = aux_targets(tok, chat_text(tok, messages[:1]), item, policy, suite)
    aux["p_side"] = []
    if pressure_side_target:
        for a, it in zip(starts, answered):
            ps = pressure_side(it)
            if ps is not None:
                aux["p_side"] += [(a - 1, ps), (a, ps)]
    return ids, starts[-1], aux, spans


def loss_spans(row: tuple) -> list[tuple[int, int]]:
    """The ``[start, end)`` spans of a training row that carry the loss: a single-turn row's answer
    (``(context length, length)``), or a conversation's trained replies (its fourth element)."""
    return list(row[3]) if len(row) > 3 else [(row[1], len(row[0]))]
