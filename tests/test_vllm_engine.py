"""The vLLM engine against the Hugging Face engine on CPU (the `vllm` extra; `make test` installs it).

A tiny random Gemma3 with an attention head size of 32 (vLLM's CPU attention needs at least 32),
a word-level tokenizer built from the smoke subset and the chat template: both engines decide the
same items; choices, texts and token counts must be equal and the generated text's log-probability
within :data:`LOGPROB_TOL`. vLLM's batches are not batch-invariant, so a near-tie between two tokens
could break the other way than under Hugging Face; on these items none did (docs: README, "Engines").
"""
from __future__ import annotations

import pandas as pd
import pytest

pytest.importorskip("vllm")

from evenhand.running.decisions import DecideOptions, decide  # noqa: E402
from evenhand.engine import vllm_engine  # noqa: E402
from evenhand.engine.registry import engine_of  # noqa: E402
from evenhand.engine.vllm_engine import VllmModel, load_vllm  # noqa: E402
from evenhand.models.loading import load_model  # noqa: E402

LOGPROB_TOL = 1e-3
"""The largest |gen_logprob (vLLM) - gen_logprob (HF)| accepted, in nats. Measured in float32 on these items:
1.4e-6 (answer mode) and 3.3e-6 (reasoning mode); on the fair organism 4.7e-6; on the real Gemma-3 270M
3.2e-4 over 8 tokens (README, "Engines": the difference is a sum over the generated tokens)."""
N_ITEMS = 48


@pytest.fixture(scope="module")
def gemma32_dir(tmp_path_factory, smoke_items):
    """A tiny random Gemma3 with head size 32 (hidden 64, two heads) and its tokenizer, saved."""
    from evenhand.models.tiny import save_tiny_model
    return save_tiny_model(tmp_path_factory.mktemp("g32") / "gemma3-h32", "gemma3", smoke_items["prompt"].tolist(),
                           seed=3, hidden=64, heads=2, kv_heads=1)


@pytest.fixture(scope="module")
def engines(gemma32_dir):
    """(HF model, vLLM model) of the same checkpoint; vLLM shut down after the module."""
    vm = load_vllm(str(gemma32_dir), max_model_len=1024)
    yield load_model(str(gemma32_dir)), vm
    vm.close()


def items_of(smoke_items: pd.DataFrame, n: int = N_ITEMS) -> pd.DataFrame:
    return smoke_items.iloc[::max(1, len(smoke_items) // n)].head(n).reset_index(drop=True)


def parity(hf: pd.DataFrame, vl: pd.DataFrame) -> float:
    """Assert the two tables agree row for row; return the largest |Δ gen_logprob|."""
    assert list(hf["item_id"]) == list(vl["item_id"])
    assert list(hf.columns) == list(vl.columns)
    for col in ("choice", "text", "n_new_tokens", "n_prompt_tokens", "parse_method"):
        assert hf[col].tolist() == vl[col].tolist(), col
    return float((hf["gen_logprob"] - vl["gen_logprob"]).abs().max())


@pytest.mark.parametrize("mode, budget", [("answer", 8), ("reasoning", 24)])
def test_vllm_equals_hf(engines, smoke_items, mode, budget):
    hf_lm, vm = engines
    assert engine_of(vm) == "vllm" and vm.describe()["engine"] == "vllm"
    items = items_of(smoke_items)
    kw = dict(mode=mode, max_new_tokens=budget, reasoning_max_new_tokens=budget, progress=False)
    hf = decide(items, hf_lm, DecideOptions(batch_size=16, **kw))
    vl = decide(items, vm, DecideOptions(batch_size=len(items), engine="vllm", **kw))
    assert parity(hf, vl) <= LOGPROB_TOL
    assert (vl["n_new_tokens"] == budget).any()  # some rows ran to the budget, some may stop at the end of turn


def test_parity_check_catches_a_changed_row(engines, smoke_items):
    hf_lm, vm = engines
    items = items_of(smoke_items, 4)
    vl = decide(items, vm, DecideOptions(batch_size=4, engine="vllm", progress=False))
    changed = vl.assign(choice=vl["choice"].where(vl.index != 0, "B" if vl["choice"].iloc[0] == "A" else "A"))
    with pytest.raises(AssertionError, match="choice"):
        parity(vl, changed)
    shifted = vl.assign(gen_logprob=vl["gen_logprob"] + 2 * LOGPROB_TOL)
    assert parity(vl, shifted) > LOGPROB_TOL


def test_text_decoded_with_our_tokenizer(engines, smoke_items):
    """The text is our tokenizer's decoding of the generated ids, up to and including the first end token."""
    _, vm = engines
    from evenhand.engine.batching import token_ids
    from evenhand.vocab.prompts import model_text, user_message
    item = smoke_items.iloc[0].to_dict()
    ids = token_ids(vm.tokenizer, [model_text(vm.tokenizer, user_message(item))], False)
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt
    raw = vm.llm.generate([TokensPrompt(prompt_token_ids=ids[0])], SamplingParams(temperature=0, max_tokens=6,
                          detokenize=False, stop_token_ids=list(vm.eos_ids)), use_tqdm=False)[0].outputs[0].token_ids
    row = vllm_engine.generate_ids(vm, ids, 6)[0]
    assert row["text"] == vm.tokenizer.decode(list(raw)[:row["n_new_tokens"]], skip_special_tokens=True)
    assert not row["text"].startswith(" ")


def test_resume_after_a_shard(engines, smoke_items, tmp_path, monkeypatch):
    """Killed after its first shard, a vLLM run resumes to the table an uninterrupted run writes."""
    _, vm = engines
    items = items_of(smoke_items, 24)
    opts = DecideOptions(batch_size=8, engine="vllm", progress=False)
    whole = decide(items, vm, opts, out_dir=tmp_path / "whole")
    real, calls = vllm_engine.generate_ids, []

    def dies_after_one(*a, **k):
        calls.append(1)
        if len(calls) > 1:
            raise KeyboardInterrupt("killed")
        return real(*a, **k)
    monkeypatch.setattr(vllm_engine, "generate_ids", dies_after_one)
    with pytest.raises(KeyboardInterrupt):
        decide(items, vm, opts, out_dir=tmp_path / "cut")
    from evenhand.runs.rundir import RunDir
    from evenhand.running.shards import ParquetShards
    first = ParquetShards(RunDir(tmp_path / "cut").decisions).read_all()
    assert len(first) == 8
    monkeypatch.setattr(vllm_engine, "generate_ids", real)
    asked = []
    monkeypatch.setattr(vllm_engine, "generate_ids", lambda vm_, seqs, n: asked.append(len(seqs)) or real(vm_, seqs, n))
    resumed = decide(items, vm, opts, out_dir=tmp_path / "cut")
    assert sum(asked) == len(items) - 8  # only the missing items ran again
    assert resumed["item_id"].is_unique and len(resumed) == len(items)
    cols = ["item_id", "choice", "text", "n_new_tokens", "gen_logprob"]
    pd.testing.assert_frame_equal(resumed[cols], whole[cols])


def test_prompt_methods_run_on_vllm(engines, smoke_items):
    """fair_instruction and identity_blind (rewrites), self_critique and counterfactual_cot (chats) decide on
    vLLM unchanged,
    with the choices the Hugging Face engine makes."""
    from interventions import decide_with, get
    hf_lm, vm = engines
    items = items_of(smoke_items, 12)
    for name, options in (("fair_instruction", None), ("identity_blind", None),
                          ("self_critique", {"critique_max_new_tokens": 8}),
                          ("counterfactual_cot", {"reason_max_new_tokens": 8})):
        method = get(name)
        fitted = method.fit(hf_lm, items, seed=0, progress=False)
        _, apply_opts = method.split_options(options or {})
        hf = decide_with(method, fitted, items, hf_lm, DecideOptions(batch_size=12, progress=False), apply_opts)
        vl = decide_with(method, fitted, items, vm, DecideOptions(batch_size=12, engine="vllm", progress=False),
                         apply_opts)
        assert hf["choice"].tolist() == vl["choice"].tolist(), name
        assert hf["text"].tolist() == vl["text"].tolist(), name
        assert (hf["gen_logprob"] - vl["gen_logprob"]).abs().max() <= LOGPROB_TOL, name


def test_logprob_mode_stays_on_hf(engines, smoke_items):
    _, vm = engines
    from evenhand.engine.registry import score_texts
    with pytest.raises(ValueError, match="logprob mode .label scoring. runs on engine hf"):
        score_texts(vm, ["x"], [smoke_items.iloc[0].to_dict()], True)
    assert isinstance(vm, VllmModel)
