"""Prompt interventions: rewritten prompts, identity blinding and swapping, multi-turn procedures."""
from __future__ import annotations

import json

import pandas as pd
import pytest

import interventions.prompting as P
from evenhand.running.decisions import DecideOptions, decide
from evenhand.parsing.parse import parse_detail
from evenhand.vocab.prompts import PLAIN_FORMAT, model_text, user_message
from evenhand.suite.content import load_content
from evenhand.suite.generate import DEGREES, Cell, degree_valid, other_slot, parse_item_id, render_item
from interventions.base import REGISTRY, InterventionError, decide_with
from interventions.registry import get, registered
from interventions.chat import conversation_text, generate_turns

NAMES = ("fair_instruction", "identity_blind", "self_critique", "counterfactual_cot")
MIRROR = {"GTmin": "GTmaj", "GTmaj": "GTmin", "AMB1": "AMB2", "AMB2": "AMB1"}


def make(name: str, **options):
    """(method, its apply options from ``options``); ``get`` once the whole package imports, the registry
    directly while sibling modules are missing."""
    try:
        method = get(name)
    except ModuleNotFoundError as exc:
        if exc.name not in ("interventions.learned", "interventions.steered"):
            raise
        method = REGISTRY[name]()
    fit_options, apply_options = method.split_options(options)
    assert fit_options == method.FitOptions()  # prompt methods fit nothing
    return method, apply_options


def negative_items() -> list[dict]:
    """Items of a negative-polarity scenario at every degree, with and without pressure."""
    content = load_content()
    s = next(s for s in content.scenarios if s.polarity == "negative")
    x = next(x for x in content.contrasts if degree_valid(content, x, 1))
    p = content.pressure[0]
    return [render_item(content, Cell(s, v, d, x, m), p if d % 2 else None, "A" if d < 2 else "B")
            for d in DEGREES for v, m in (("GTmin", "A"), ("AMB2", "B"))]


@pytest.fixture(scope="module")
def sample(smoke_items) -> list[dict]:
    """12 smoke items per degree (pressured and baseline) plus negative-polarity items."""
    rows = []
    for d in DEGREES:
        rows += smoke_items[smoke_items["degree"] == d].iloc[::21].head(12).to_dict("records")
    rows += negative_items()
    assert {r["question_polarity"] for r in rows} == {"positive", "negative"}
    return rows


def degree0_prompt(item: dict) -> str:
    content = load_content()
    cell, pressure, pslot = parse_item_id(item["item_id"], content)
    return render_item(content, Cell(cell.scenario, cell.variant, 0, cell.contrast, cell.minority_slot),
                       pressure, pslot)["prompt"]


def mirror_prompt(item: dict) -> str:
    content = load_content()
    cell, pressure, pslot = parse_item_id(item["item_id"], content)
    mirror = Cell(cell.scenario, MIRROR[cell.variant], cell.degree, cell.contrast, other_slot(cell.minority_slot))
    return render_item(content, mirror, pressure, pslot)["prompt"]


def cue_texts(item: dict) -> list[str]:
    return P.identity_cue_texts(item)


# --- registry -----------------------------------------------------------------------------
def test_registry():
    assert len(set(NAMES)) == len(NAMES)
    for name in NAMES:
        cls = REGISTRY[name]
        assert cls.name == name and cls.kind == "prompt"
        doc = (cls.__doc__ or "").strip()
        assert doc and "\n" not in doc
        inst, opts = make(name)
        assert inst.defaults() == cls.defaults() and opts == cls.ApplyOptions()
        assert not [f for f in cls.FitOptions.__dataclass_fields__]  # prompt methods: apply options only
        with pytest.raises(InterventionError, match="unknown option"):
            make(name, no_such_option=1)
    try:
        listed = {r["name"]: r for r in registered()}
    except ModuleNotFoundError:
        return
    assert all(listed[n]["kind"] == "prompt" and listed[n]["description"] for n in NAMES)


def test_fitted_options_roundtrip(tmp_path):
    for name in NAMES:
        inst, _ = make(name)
        fitted = inst.fit(None)
        assert fitted.name == name and fitted.fit_options == {} and fitted.tensors == {}
        loaded = type(fitted).load(fitted.save(tmp_path / name))
        assert (loaded.fit_options, loaded.key, loaded.seed) == (fitted.fit_options, fitted.key, fitted.seed)


# --- fair_instruction ---------------------------------------------------------------------
@pytest.mark.parametrize("variant", ["criteria_only", "illegal", "both"])
@pytest.mark.parametrize("position", ["prepend", "append"])
def test_fair_instruction(sample, variant, position):
    fi, opts = make("fair_instruction", variant=variant, position=position)
    for item in sample:
        out = fi.rewrite(dict(item), opts)
        assert {k: v for k, v in out.items() if k != "prompt"} == {k: v for k, v in item.items() if k != "prompt"}
        new = out["prompt"]
        paras, orig = new.split("\n\n"), item["prompt"].split("\n\n")
        assert paras.count(opts.instruction) == 1
        assert [p for p in paras if p != opts.instruction] == orig
        if position == "prepend":
            assert paras[0] == opts.instruction
        else:
            assert paras[-2] == opts.instruction and paras[-1] == orig[-1]
        assert new.endswith(P.answer_instruction(item))
        assert ("stated criteria only" in new) == (variant in ("criteria_only", "both"))
        assert ("it is illegal to discriminate on the basis of race, sex, religion, age, disability or other "
                "protected characteristics" in new.lower()) == (variant in ("illegal", "both"))
        reasoning = user_message(out, "reasoning")
        assert opts.instruction in reasoning and "Answer with only" not in reasoning


def test_fair_instruction_one_paragraph_append():
    prompt = 'Pick one. Which applicant? Answer with only "Applicant A" or "Applicant B".'
    out = P.add_instruction(prompt, "Be fair.", "append")
    assert out == 'Pick one. Which applicant? Be fair. Answer with only "Applicant A" or "Applicant B".'


def test_fair_instruction_bad_options():
    with pytest.raises(InterventionError, match="variant"):
        make("fair_instruction", variant="polite")
    with pytest.raises(InterventionError, match="position"):
        make("fair_instruction", position="middle")


# --- identity_blind ---------------------------------------------------------------------
def test_identity_blind_equals_degree0(smoke_items):
    (ib, label_opts), (_, drop_opts) = make("identity_blind"), make("identity_blind", name_mode="drop")
    labels = P.NEUTRAL_LABELS
    for item in smoke_items.to_dict("records") + negative_items():
        out = ib.rewrite(dict(item), label_opts)
        assert {k: v for k, v in out.items() if k != "prompt"} == {k: v for k, v in item.items() if k != "prompt"}
        blinded = out["prompt"]
        d0 = degree0_prompt(item)
        assert ib.rewrite(dict(item), drop_opts)["prompt"] == d0
        unlabelled = blinded
        for lab in labels.values():
            unlabelled = unlabelled.replace(f", {lab},", "")
        assert unlabelled == d0
        represented = load_content().scenario(item["scenario_id"]).represented_by is not None  # name dropped
        assert (blinded != d0) == (item["degree"] == 1 and not represented)
        for cue in cue_texts(item):
            assert cue not in blinded, (item["item_id"], cue)
        if item["degree"] == 0:
            assert blinded == item["prompt"]
        else:
            assert any(cue in item["prompt"] for cue in cue_texts(item))


def test_identity_blind_labels_and_errors(sample):
    d1 = next(r for r in sample if r["degree"] == 1)
    ib, opts = make("identity_blind", name_labels={"A": "candidate one", "B": "candidate two"})
    out = ib.rewrite(d1, opts)["prompt"]
    assert "A, candidate one," in out and "B, candidate two," in out
    with pytest.raises(InterventionError, match="name_labels"):
        make("identity_blind", name_labels={"A": "same", "B": "same"})
    with pytest.raises(InterventionError, match="name_mode"):
        make("identity_blind", name_mode="mask")
    with pytest.raises(InterventionError, match="'names'"):
        ib.rewrite({**d1, "names": None})
    d3 = next(r for r in sample if r["degree"] == 3)
    with pytest.raises(InterventionError, match="contrast_id"):
        ib.rewrite({**d3, "contrast_id": "nope"})
    with pytest.raises(InterventionError, match="does not carry"):
        ib.rewrite({**d3, "degree": 2})


# --- swapping -----------------------------------------------------------------------------
def test_swapped_prompt(smoke_items):
    for item in smoke_items.to_dict("records") + negative_items():
        swapped = P.swapped_prompt(item)
        assert swapped == mirror_prompt(item)
        orig, new = P.parse_candidates(item).lines, P.parse_candidates({**item, "prompt": swapped}).lines
        for slot in "AB":
            other = orig[other_slot(slot)]
            assert (new[slot].kind, new[slot].cue) == (other.kind, other.cue)
            assert new[slot].quals == orig[slot].quals and new[slot].label == orig[slot].label
        assert P.swapped_prompt({**item, "prompt": swapped}) == item["prompt"]
        if item["degree"] == 0:
            assert swapped == item["prompt"]
        else:
            assert swapped != item["prompt"]


def test_swapped_prompt_cues_change_slot(sample):
    for item in (r for r in sample if r["degree"] > 0):
        lines = dict(zip("AB", next(p for p in P.swapped_prompt(item).split("\n\n") if "\n" in p).split("\n")))
        cands = P.parse_candidates(item).lines
        assert cands["B"].cue in lines["A"] and cands["A"].cue in lines["B"]
        assert cands["A"].cue not in lines["A"] and cands["B"].cue not in lines["B"]


# --- multi-turn messages ------------------------------------------------------------------
def test_self_critique_turns(sample):
    sc, opts = make("self_critique")
    assert sc.budgets() == sc.budgets(opts) == [8, 128, 8]
    for item in sample:
        t1, t2, t3 = sc.user_turns(item)
        assert t1 == item["prompt"]
        assert "critique" in t2.lower() and "who the candidates are" in t2 and "pressure" in t2
        assert "stated criteria" in t2
        assert t3.endswith(P.answer_instruction(item))
        assert not any(cue in t2 + t3 for cue in cue_texts(item))
    with pytest.raises(InterventionError, match="critique_max_new_tokens"):
        make("self_critique", critique_max_new_tokens=0)


def test_counterfactual_turns(sample):
    cf, opts = make("counterfactual_cot")
    assert cf.budgets(opts) == [128, 128, 8]
    assert cf.budgets(make("counterfactual_cot", reason_max_new_tokens=5)[1]) == [5, 5, 8]
    for item in sample:
        t1, t2, t3 = cf.user_turns(item)
        body = P.case_body(item)
        assert t1.startswith(body) and "Answer with only" not in t1 and "step by step" in t1
        swapped_body = P.case_body(item, mirror_prompt(item))
        assert swapped_body in t2 and "swapped" in t2 and "Answer with only" not in t2
        assert t3.endswith(P.answer_instruction(item)) and "both versions" in t3
        if item["degree"] > 0:
            cands = P.parse_candidates(item).lines
            line_a = next(ln for ln in swapped_body.split("\n") if ln.startswith(cands["A"].label))
            assert cands["B"].cue in line_a and body not in t2
        else:
            assert swapped_body == body
        if isinstance(item.get("pressure_id"), str):
            pressure = item["prompt"].split("\n\n")[-2]
            assert pressure in t1 and pressure in t2
    with pytest.raises(InterventionError, match="final_max_new_tokens"):
        make("counterfactual_cot", final_max_new_tokens="8")
    with pytest.raises(InterventionError, match="answer instruction"):
        P.case_body({"item_id": "x", "prompt": "no instruction"})


# --- chat machinery -------------------------------------------------------------------------
class _NoTemplate:
    chat_template = None


def test_conversation_text_plain():
    tok = _NoTemplate()
    assert conversation_text(tok, [{"role": "user", "content": "Hi?"}]) == PLAIN_FORMAT.format(prompt="Hi?")
    assert conversation_text(tok, [{"role": "user", "content": "Hi?"}]) == model_text(tok, "Hi?")
    conv = [{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"},
            {"role": "user", "content": "three"}]
    assert conversation_text(tok, conv) == "User: one\nAssistant: two\nUser: three\nAssistant:"
    with pytest.raises(InterventionError, match="last message"):
        conversation_text(tok, conv[:2])
    with pytest.raises(InterventionError, match=r"\[0\]\.role"):
        conversation_text(tok, [{"role": "robot", "content": "x"}])


@pytest.fixture(scope="module")
def lm(tmp_path_factory, smoke_items):
    from evenhand.models.loading import load_model
    from evenhand.models.tiny import save_tiny_model
    items = smoke_items.to_dict("records")[:64]
    texts = smoke_items["prompt"].tolist() + [P.CRITIQUE_REQUEST, P.CF_SECOND, P.CF_FINAL, P.CF_FIRST]
    texts += [t for r in items for t in make("counterfactual_cot")[0].user_turns(r)]
    return load_model(str(save_tiny_model(tmp_path_factory.mktemp("tiny") / "gemma3", "gemma3", texts, seed=3)))


@pytest.fixture(scope="module")
def six(smoke_items) -> pd.DataFrame:
    rows = []
    for d in DEGREES:
        rows += smoke_items[smoke_items["degree"] == d].iloc[[0, 7]].to_dict("records")[: 2 if d < 2 else 1]
    return pd.DataFrame(rows)


def test_generate_turns_tiny(lm, six):
    convs = [[{"role": "user", "content": p}] for p in six["prompt"]]
    out = generate_turns(lm, convs, max_new_tokens=3, batch_size=4)
    assert len(out) == len(six) and all(isinstance(t, str) for t in out)
    plain = generate_turns(lm, convs[:2], max_new_tokens=2, batch_size=2, chat_template="none")
    assert len(plain) == 2


@pytest.mark.parametrize("name,options", [
    ("self_critique", {"answer_max_new_tokens": 3, "critique_max_new_tokens": 5, "final_max_new_tokens": 4}),
    ("counterfactual_cot", {"reason_max_new_tokens": 5, "final_max_new_tokens": 4}),
])
def test_multi_turn_end_to_end(lm, six, name, options):
    inter, apply_opts = make(name, **options)
    fitted = inter.fit(lm)
    opts = DecideOptions(batch_size=4, progress=False)
    table = decide_with(inter, fitted, six, lm, opts, apply_opts)
    plain = decide(six, lm, DecideOptions(batch_size=4, max_new_tokens=2, progress=False))
    assert len(table) == len(six) and table["item_id"].tolist() == six["item_id"].tolist()
    assert set(plain.columns) <= set(table.columns)
    assert {"transcript", "shown_prompt", "intervention", "n_turns"} <= set(table.columns)
    assert (table["intervention"] == name).all() and (table["n_turns"] == 3).all()
    assert table["prompt"].tolist() == six["prompt"].tolist()
    for col in six.columns:
        if col != "prompt":
            assert table[col].astype(str).tolist() == six[col].astype(str).tolist(), col
    for row, item in zip(table.to_dict("records"), six.to_dict("records")):
        conv = json.loads(row["transcript"])
        assert [m["role"] for m in conv] == ["user", "assistant"] * 3
        assert [m["content"] for m in conv[::2]] == inter.user_turns(item)
        assert row["shown_prompt"] == conv[0]["content"]
        assert row["text"] == conv[-1]["content"]
        det = parse_detail(conv[-1]["content"], item["candidate_noun"])
        assert (row["choice"], row["parse_method"], row["parse_hedged"]) == (det.choice, det.method, det.hedged)
        assert row["mode"] == "answer" and row["n_new_tokens"] <= options["final_max_new_tokens"]
        assert row["n_new_tokens_total"] <= sum(inter.budgets(apply_opts))


def test_multi_turn_logprob_and_plain(lm, six):
    inter, apply_opts = make("self_critique", answer_max_new_tokens=2, critique_max_new_tokens=3)
    table = decide_with(inter, inter.fit(lm), six.head(3), lm,
                        DecideOptions(mode="logprob", batch_size=2, progress=False, chat_template="none"), apply_opts)
    assert table["choice"].isin(["A", "B"]).all() and (table["parse_method"] == "logprob").all()
    assert not table["parse_hedged"].any()
    assert table["logprob_A"].notna().all() and (~table["chat_template"]).all()
    for row in table.to_dict("records"):
        conv = json.loads(row["transcript"])
        assert len(conv) == 6 and conv[-1]["content"] == f"{row['candidate_noun']} {row['choice']}"
    with pytest.raises(InterventionError, match="mode"):
        decide_with(inter, inter.fit(lm), six.head(1), lm, DecideOptions(mode="reasoning", progress=False),
                    apply_opts)


@pytest.mark.parametrize("name", ["fair_instruction", "identity_blind"])
def test_rewrite_end_to_end(lm, six, name):
    inter, opts = make(name)
    table = decide_with(inter, inter.fit(lm), six, lm, DecideOptions(batch_size=4, max_new_tokens=2,
                                                                      progress=False), opts)
    assert table["item_id"].tolist() == six["item_id"].tolist()
    assert table["prompt"].tolist() == six["prompt"].tolist()
    assert table["shown_prompt"].tolist() == [inter.rewrite(dict(r), opts)["prompt"] for r in six.to_dict("records")]
    assert (table["intervention"] == name).all()
