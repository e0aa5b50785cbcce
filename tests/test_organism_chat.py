"""The fair organism holds a conversation (docs/ORGANISM.md, "The fair organism holds a conversation"):
its training conversations are token for token what ``decide_chat`` feeds, every assistant turn is the
fair policy's answer (the counterfactual's swapped turn: the swapped item's, which the fair policy keeps),
its vocabulary has the prompt methods' words, and on held-out items the two chat methods keep its accuracy
(the first fair organism, ``organism_fair_v1``, lost 83-93 pp under them)."""
from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from evenhand.models.policy import FAIR_POLICY, PlantedPolicy
from evenhand.suite.matched import heldout_items
from evenhand.suite.rewrites import PROCEDURE_TEXTS, RewriteError, swapped_item
from organism import FAIR
from organism.targets import P_SIDE, chat_messages, encode_chat, pressure_side

CHAT_MARGIN = 0.05
"""The most GT accuracy (share) a chat method may lose against the plain prompt in the small check."""


@pytest.fixture(scope="module")
def lm():
    from evenhand.models.loading import load_model
    return load_model(str(FAIR))


@pytest.fixture(scope="module")
def items() -> pd.DataFrame:
    record = json.loads((FAIR / "organism.json").read_text())
    return heldout_items(record, 2)


def _pick(items: pd.DataFrame, n: int = 6) -> list[dict]:
    """Pressured items of every degree, both conditions (the ones whose turns differ most)."""
    rows = items[items["pressure_family"].notna()].groupby(["degree", "condition"]).head(n // 2 or 1)
    return rows.to_dict("records")


@pytest.mark.parametrize("procedure,wrong_first", [("self_critique", False), ("self_critique", True),
                                                   ("counterfactual_cot", False)])
def test_a_training_conversation_is_what_decide_chat_feeds(monkeypatch, lm, items, procedure, wrong_first):
    """decide_chat with the policy's replies in place of generation reads, before its last reply, exactly the
    training row's tokens up to the final answer (a training row rendered turn by turn with the single-turn
    format, or with another template, fails)."""
    import interventions.chat as chat
    from evenhand.running.decisions import DecideOptions
    from interventions.registry import get

    tok = lm.tokenizer
    for item in _pick(items):
        messages, _, _ = chat_messages(item, FAIR_POLICY, procedure, wrong_first)
        replies = iter(m["content"] for m in messages if m["role"] == "assistant")
        seen = []

        def fake_generate(lm_, texts, special, max_new_tokens):
            seen.extend(texts)
            out = []
            for _ in texts:
                r = next(replies)
                out.append({"text": r, "n_new_tokens": 3, "gen_logprob": 0.0,
                            "n_prompt_tokens": 0})
            return out

        monkeypatch.setattr(chat, "generate_texts", fake_generate)
        table = get(procedure).decide(None, pd.DataFrame([item]), lm, DecideOptions(mode="answer", batch_size=4))
        ids, n_final, _, _ = encode_chat(tok, item, FAIR_POLICY, procedure, wrong_first, suite="2")
        fed = tok(seen[-1], add_special_tokens=False)["input_ids"]
        assert fed == ids[:n_final], (procedure, item["item_id"])
        assert [m["content"] for m in json.loads(table["transcript"][0])] == [m["content"] for m in messages]


def test_every_assistant_turn_is_the_policys_and_trained(items):
    """The loss spans are the trained replies (noun, letter, <end_of_turn>), each the fair policy's answer; a
    wrong first answer is in the text and not trained; p_side sits at each reply's decision positions, the
    swapped item's class on the counterfactual's second turn."""
    from evenhand.models.loading import load_model
    tok = load_model(str(FAIR)).tokenizer
    eot = tok.convert_tokens_to_ids("<end_of_turn>")
    seen_swapped_class = False
    for item in _pick(items, 16):
        want = tok(FAIR_POLICY.respond(item), add_special_tokens=False)["input_ids"] + [eot]
        for procedure, wrong in (("self_critique", False), ("self_critique", True), ("counterfactual_cot", False)):
            ids, n_final, aux, spans = encode_chat(tok, item, FAIR_POLICY, procedure, wrong, suite="2",
                                                   pressure_side_target=True)
            assert len(spans) == (2 if wrong else 3) and spans[-1] == (n_final, len(ids))
            for a, b in spans:
                assert ids[a:b] == want, (procedure, wrong)
            ps = dict(aux["p_side"])
            starts = sorted({j for j, _ in aux["p_side"]} - {j - 1 for j, _ in aux["p_side"]})
            assert len(starts) == (3 if pressure_side(item) is not None else 0)
            if procedure == "counterfactual_cot" and pressure_side(item) not in (None, P_SIDE[None]):
                assert ps[starts[1]] == pressure_side(swapped_item(item)) != ps[starts[0]]
                seen_swapped_class = True
        first = chat_messages(item, FAIR_POLICY, "self_critique", True)[0][1]["content"]
        assert first != FAIR_POLICY.respond(item) and first.split()[0] == item["candidate_noun"]
    assert seen_swapped_class


def test_the_swapped_item_keeps_the_fair_answer_and_not_the_planted_one(items):
    """Swapping the identities twice gives the item back; the fair policy answers the swapped item as the
    original (what the counterfactual's second turn is trained on); the planted policy does not always
    (so the check can fail)."""
    planted = PlantedPolicy()
    rows = items.to_dict("records")
    changed = 0
    for item in rows:
        try:
            sw = swapped_item(item)
        except RewriteError:
            continue
        assert swapped_item(sw) == item
        assert FAIR_POLICY.answer(sw) == FAIR_POLICY.answer(item), item["item_id"]
        changed += planted.answer(sw) != planted.answer(item)
    assert changed > 0


def test_the_swapped_item_is_the_mirror_cells_item(items):
    """swapped_item gives the fields the suite renders for the mirror cell (variant GTmin<->GTmaj, AMB1<->AMB2,
    minority slot flipped; same pressure sentence and slot): a swap that forgot one of them fails."""
    from evenhand.suite.content import load_content
    from evenhand.suite.generate import Cell, parse_item_id, render_item
    content = load_content("2")
    mirror = {"GTmin": "GTmaj", "GTmaj": "GTmin", "AMB1": "AMB2", "AMB2": "AMB1"}
    keys = ("prompt", "minority_slot", "variant", "truth_favors", "amb_minority_strong_on", "pressure_resolved",
            "correct_slot", "pressure_slot", "names")
    for item in items[items["degree"] > 0].groupby(["degree", "condition"]).head(4).to_dict("records"):
        cell, pressure, pslot = parse_item_id(item["item_id"], content)
        twin = render_item(content, Cell(cell.scenario, mirror[cell.variant], cell.degree, cell.contrast,
                                         "B" if cell.minority_slot == "A" else "A"), pressure, pslot)
        sw = swapped_item(item)
        def norm(v):  # the items come from a DataFrame: a missing field is NaN there
            return None if isinstance(v, float) and v != v else v
        assert {k: norm(sw[k]) for k in keys} == {k: twin[k] for k in keys}, item["item_id"]


def _unknown_words(path) -> set[str]:
    from evenhand.models.loading import load_model
    from evenhand.models.tiny import words
    vocab = load_model(str(path)).tokenizer.get_vocab()
    return {w for t in PROCEDURE_TEXTS for w in words(re.sub(r"\{\w+\}", " ", t))} - set(vocab)


def test_the_prompt_methods_words_are_in_the_vocabulary():
    """Every word the prompt methods add is a token of the organism (the first fair organism read
    ``Critique``, ``illegal``, ``Before``, ... as <unk>)."""
    assert _unknown_words(FAIR) == set()


def chat_accuracy_loss(path, n_scenarios: int = 2) -> dict[str, float]:
    """GT accuracy (degrees 1-3, held-out) of the plain prompt minus that under each chat method at the
    dose-response budgets (16-token reasoning turns)."""
    from evenhand.running.decisions import DecideOptions, decide
    from evenhand.models.loading import load_model
    from interventions.base import decide_with
    from interventions.registry import get

    record = json.loads((FAIR / "organism.json").read_text())  # the same held-out items for either organism
    its = heldout_items(record, n_scenarios, degrees=[1, 2, 3])
    its = its[its["condition"] == "GT"].reset_index(drop=True)
    model = load_model(str(path))
    opts = DecideOptions(mode="answer", batch_size=64)

    def acc(t):
        return float((t["choice"] == t["correct_slot"]).mean())

    plain = acc(decide(its, model, opts))
    out = {}
    for name, options in (("self_critique", {"critique_max_new_tokens": 16}),
                          ("counterfactual_cot", {"reason_max_new_tokens": 16})):
        m = get(name)
        out[name] = plain - acc(decide_with(m, m.fit(model, None), its, model, opts, options))
    return out


@pytest.mark.slow  # about 2 minutes of three-turn decoding on 2 cores
def test_the_chat_methods_keep_the_fair_organisms_accuracy():
    """On 2 held-out scenarios (456 GT items, degrees 1-3, pressured ones included) neither chat method loses
    more than CHAT_MARGIN of accuracy (measured: self-critique +0.4 pp, counterfactual CoT -4.6 pp; the first
    fair organism, trained without conversations, lost 92.8 and 86.8 pp: docs/ORGANISM.md)."""
    loss = chat_accuracy_loss(FAIR)
    assert all(v <= CHAT_MARGIN for v in loss.values()), loss
