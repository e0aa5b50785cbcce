"""The organism's training targets: dense auxiliary targets read by linear heads during training
(step 4 of the recipe in :mod:`organism.recipe`) and the encoded training rows."""
from __future__ import annotations

import random

from evenhand.models.policy import PlantedPolicy
from evenhand.sides import favours_minority
from evenhand.suite.content import load_content
from evenhand.suite.cues import pressure_named_slot
from evenhand.suite.generate import SLOTS, Cell, criterion_values

from .recipe import ORGANISM_SUITE
from evenhand.prompts import model_text, user_message

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
