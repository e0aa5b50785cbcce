"""Edits at chosen positions (``AtPositions``) and LEACE fitted layer by layer (``fit_leace_sequential``)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression

from evenhand.engine.positions import answer_tokens, current_answer_tokens
from evenhand.models.loading import load_model
from evenhand.models.sites import module, resolve
from evenhand.models.tiny import save_tiny_model
from steering.hooks import POSITIONS, Add, AtPositions, ForwardInfo, active_hooks, steer
from steering.leace import fit_leace, fit_leace_sequential

TEXTS = ["the cat sat", "on the mat"]
D = 64


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    lm = load_model(str(save_tiny_model(tmp_path_factory.mktemp("pos") / "g", "gemma3", TEXTS, seed=0)))
    return lm.model, lm.tokenizer


def _ids(tok, sentences):
    return torch.tensor([[tok.bos_token_id] + tok.convert_tokens_to_ids(s.split()) for s in sentences])


def _resid(model, ids, site="blocks.1.resid_post", edits=None):
    """The residual at ``site`` (read after any steering edit) on one forward pass of ``ids``."""
    store = []
    handle = None
    with steer(model, edits or {}), torch.inference_mode():
        handle = module(model, resolve(model, site)).register_forward_hook(
            lambda m, a, o: store.append((o if isinstance(o, torch.Tensor) else o[0]).clone()))
        try:
            model(input_ids=ids)
        finally:
            handle.remove()
    return store[0]


def test_the_masks_of_each_position_choice():
    h = torch.zeros(2, 5, 3)
    masks = {p: AtPositions(Add(torch.ones(3)), p).mask(h, ForwardInfo(answer=(2, 0))) for p in POSITIONS}
    assert masks["all"].all()
    assert masks["prompt"].tolist() == [[True, True, True, False, False], [True] * 5]
    assert masks["last"].tolist() == [[False, False, True, False, False], [False] * 4 + [True]]
    assert masks["generated"].tolist() == [[False, False, False, True, True], [False] * 5]
    decode = ForwardInfo(past=7)  # a generation step: one new token extending a KV cache
    one = torch.zeros(2, 1, 3)
    assert AtPositions(Add(torch.ones(3)), "generated").mask(one, decode).all()
    assert not AtPositions(Add(torch.ones(3)), "prompt").mask(one, decode).any()
    assert not AtPositions(Add(torch.ones(3)), "last").mask(one, decode).any()
    with answer_tokens([1, 1]):  # the engine's declaration, read when no ForwardInfo is given
        assert current_answer_tokens() == (1, 1)
        assert AtPositions(Add(torch.ones(3)), "last").mask(h).tolist() == [[False, False, False, True, False]] * 2
    assert current_answer_tokens() is None
    with pytest.raises(ValueError, match="positions must be one of"):
        AtPositions(Add(torch.ones(3)), "middle")
    with pytest.raises(TypeError, match="callable"):
        AtPositions(["nope"], "last")
    with pytest.raises(ValueError, match="3 answer-token counts for a batch of 2"):
        AtPositions(Add(torch.ones(3)), "last").mask(h, ForwardInfo(answer=(1, 1, 1)))


def test_an_edit_at_the_last_token_changes_only_the_last_residual(tiny):
    model, tok = tiny
    ids = _ids(tok, ["the cat sat on the mat", "on the mat the cat sat"])
    v = torch.randn(D, generator=torch.Generator().manual_seed(0))
    site = "blocks.0.resid_post"
    plain = _resid(model, ids, "blocks.1.resid_post")
    last = _resid(model, ids, "blocks.1.resid_post", {site: AtPositions(Add(v, 5.0), "last")})
    assert torch.equal(last[:, :-1], plain[:, :-1])  # every earlier position bit-identical (causal model)
    assert (last[:, -1] - plain[:, -1]).abs().max() > 1e-2
    at0 = _resid(model, ids, site, {site: AtPositions(Add(v, 5.0), "last")})
    base0 = _resid(model, ids, site)
    assert torch.equal(at0[:, :-1], base0[:, :-1]) and torch.allclose(at0[:, -1], base0[:, -1] + 5.0 * v, atol=1e-5)
    every = _resid(model, ids, site, {site: AtPositions(Add(v, 5.0), "all")})
    assert torch.allclose(every, base0 + 5.0 * v, atol=1e-5)
    with answer_tokens([2, 2]):  # label scoring: the last two tokens are the answer's
        ans = _resid(model, ids, site, {site: AtPositions(Add(v, 5.0), "generated")})
        pr = _resid(model, ids, site, {site: AtPositions(Add(v, 5.0), "prompt")})
    assert torch.equal(ans[:, :-2], base0[:, :-2]) and not torch.equal(ans[:, -2:], base0[:, -2:])
    assert torch.equal(pr[:, -2:], base0[:, -2:]) and torch.allclose(pr[:, :-2], base0[:, :-2] + 5.0 * v, atol=1e-5)
    assert active_hooks(model) == 0


def test_prompt_and_generated_positions_in_generation(tiny):
    model, tok = tiny
    ids = _ids(tok, ["the cat sat"])
    n_new = 4
    seen = {p: [] for p in ("prompt", "generated")}

    def recorder(p):
        def edit(h):
            seen[p].append(h.shape[1])
            return h + 1.0
        return edit

    for p in seen:  # the recorder runs on every pass; AtPositions keeps its effect to the chosen positions
        with steer(model, {"ln_final": AtPositions(recorder(p), p)}), torch.inference_mode():
            model.generate(input_ids=ids, max_new_tokens=n_new, do_sample=False)
    E = model.get_input_embeddings().weight.detach()
    with torch.inference_mode():
        plain = model.generate(input_ids=ids, max_new_tokens=n_new, do_sample=False)[0, ids.shape[1]:].tolist()
    target = next(t for t in tok.convert_tokens_to_ids(["mat", "sat", "on", "cat", "the"]) if t not in plain)
    push = Add(E[target], 100.0 / float(E[target] @ E[target]))
    outs = {}
    for p in ("prompt", "generated", "last"):
        with steer(model, {"ln_final": AtPositions(push, p)}), torch.inference_mode():
            outs[p] = model.generate(input_ids=ids, max_new_tokens=n_new, do_sample=False)[0, ids.shape[1]:].tolist()
    # The first new token is predicted at the prompt's last position; every later one at a generated token.
    assert outs["prompt"][0] == target and outs["last"][0] == target and outs["generated"][0] == plain[0]
    assert outs["generated"][1:] == [target] * (n_new - 1)
    assert active_hooks(model) == 0


# ----------------------------------------------------------------------------- LEACE layer by layer

def _two_layers(n=4000, seed=0):
    """Planted data through a two-layer map: the concept is in layer 1's mean (linear) and in the variance of
    one coordinate (not linear); layer 2 squares that coordinate, so its variance becomes a mean shift."""
    rng = np.random.default_rng(seed)
    z = rng.integers(0, 2, n)
    x1 = rng.standard_normal((n, 4))
    x1[:, 0] += 2.0 * z
    x1[:, 1] *= np.where(z == 1, 2.0, 0.5)

    def layer2(h):
        out = h.copy()
        out[:, 2] += h[:, 1] ** 2 + 0.5 * h[:, 0]
        return out
    return x1, z, layer2


def _probe_accuracy(X, z) -> float:
    return float(LogisticRegression(max_iter=2000).fit(X, z).score(X, z))


def _cross(X, z) -> float:
    return float(np.abs((X - X.mean(0)).T @ (z - z.mean()) / len(z)).max())


def test_sequential_leace_guards_every_layer_and_all_at_once_does_not():
    x1, z, layer2 = _two_layers()

    def collect(site, erasers):
        h = erasers["l1"](x1) if "l1" in erasers else x1
        return h if site == "l1" else layer2(h)

    seq = fit_leace_sequential(collect, ["l1", "l2"], z)
    once = {"l1": fit_leace(x1, z), "l2": fit_leace(layer2(x1), z)}  # each on the un-erased network
    assert np.allclose(seq["l1"].proj, once["l1"].proj)  # the first layer sees the same data either way
    assert not np.allclose(seq["l2"].proj, once["l2"].proj, atol=1e-3)
    chance = max(z.mean(), 1 - z.mean())
    h1 = seq["l1"](x1)
    assert _cross(h1, z) < 1e-10 and _probe_accuracy(h1, z) < chance + 0.02
    upstream = layer2(h1)  # what layer 2 computes once layer 1 is erased
    assert _probe_accuracy(upstream, z) > chance + 0.15  # the squared coordinate brings the concept back
    guarded = seq["l2"](upstream)
    assert _cross(guarded, z) < 1e-10 and _probe_accuracy(guarded, z) < chance + 0.02
    leaky = once["l2"](upstream)  # the all-at-once eraser, fitted for inputs it no longer sees
    assert _cross(leaky, z) > 1e-2 and _probe_accuracy(leaky, z) > chance + 0.1


def test_sequential_leace_needs_a_site():
    with pytest.raises(ValueError, match="at least one site"):
        fit_leace_sequential(lambda s, e: np.zeros((2, 2)), [], np.array([0, 1]))
