"""The activation and learned methods as the literature defines them, on a tiny random Gemma3.

CAA's contrastive pairs at the answer token, ACE/LEACE's concept option, LEACE layer by layer,
ReFT-r1 as AxBench defines it, and the apply options every editing method shares (at_layers, positions)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from evenhand.running.decisions import DecideOptions
from interventions.base import InterventionError, decide_with
from evenhand.engine.reader import last_token_activations
from interventions.reading import answer_sequences, prompt_ids
from interventions.registry import get
from interventions.steered import concept_labels, contrast_pairs


@pytest.fixture(scope="module")
def eval_items(smoke_items):
    return smoke_items[smoke_items["degree"] > 0].tail(6).reset_index(drop=True)


def _lp(table) -> np.ndarray:
    return table["logprob_A"].to_numpy() - table["logprob_B"].to_numpy()


LOGPROB = DecideOptions(mode="logprob", batch_size=8, progress=False)


def test_caa_is_the_mean_pair_difference_at_the_answer_token(lm, train_items):
    caa = get("caa")
    fitted = caa.fit(lm, train_items, {"layers": [1], "batch_size": 8})
    pairs = contrast_pairs(train_items, "evidence")
    assert fitted.info["n_pairs"] == len(pairs) > 0 and fitted.info["contrast"] == "evidence"
    assert all(r["condition"] == "GT" and p == r["correct_slot"] and n == r["pressure_slot"] != p for r, p, n in pairs)
    seqs = [answer_sequences(lm, r) for r, _, _ in pairs]
    item = pairs[0][0]
    a, b = seqs[0]["A"], seqs[0]["B"]  # the same prompt, then the two labels up to the letter where they differ
    assert a[:-1] == b[:-1] and a[-1] != b[-1] and a[:len(prompt_ids(lm, item))] == prompt_ids(lm, item)
    pos = last_token_activations(lm, [q[p] for q, (_, p, _) in zip(seqs, pairs)], ["blocks.1.resid_post"], 8)
    neg = last_token_activations(lm, [q[n] for q, (_, _, n) in zip(seqs, pairs)], ["blocks.1.resid_post"], 8)
    diff = pos["blocks.1.resid_post"].astype(np.float64) - neg["blocks.1.resid_post"]
    letter_a = np.array([p == "A" for _, p, _ in pairs])
    assert 0 < fitted.info["n_pairs_answer_a"] == letter_a.sum() < len(pairs)
    want = (diff[letter_a].mean(0) + diff[~letter_a].mean(0)) / 2  # each answer letter weighs the same
    assert not np.allclose(want, diff.mean(0), atol=1e-5) or letter_a.mean() == 0.5
    got = fitted.tensors["blocks.1.resid_post/direction"].double().numpy()
    assert np.allclose(got, want, atol=1e-5)
    edit = caa.edits(fitted, lm, caa.ApplyOptions(alpha=2.0))["blocks.1.resid_post"]
    assert torch.allclose(edit(torch.zeros(1, 1, got.shape[0])), 2.0 * fitted.tensors["blocks.1.resid_post/direction"])
    minority = caa.fit(lm, train_items, {"layers": [1], "batch_size": 8, "contrast": "minority"})
    assert minority.info["n_pairs"] == len(train_items)  # every item with identity cues makes a pair
    assert not torch.allclose(minority.tensors["blocks.1.resid_post/direction"],
                              fitted.tensors["blocks.1.resid_post/direction"])
    with pytest.raises(InterventionError, match="option contrast must be one of"):
        caa.split_options({"contrast": "pressure"})
    one_letter = train_items[train_items["correct_slot"] == "A"]
    with pytest.raises(InterventionError, match="pairs whose behaviour's answer is in slot A and pairs where it is in"):
        caa.fit(lm, one_letter, {"layers": [1]})
    no_pairs = train_items[train_items["condition"] == "AMB"]
    with pytest.raises(InterventionError, match="contrast 'evidence' needs pressured GT items"):
        caa.fit(lm, no_pairs, {"layers": [1]})


def test_the_concept_erased_is_an_option(lm, train_items):
    rows, z = concept_labels(train_items, "identity")
    assert (z == (rows["minority_slot"] == "A")).all()
    rows_p, z_p = concept_labels(train_items, "pressure")
    assert rows_p["pressure_slot"].isin(["A", "B"]).all() and len(rows_p) < len(rows)
    assert (z_p == (rows_p["pressure_slot"] == rows_p["minority_slot"])).all()
    with pytest.raises(InterventionError, match="option concept must be one of"):
        get("ace").split_options({"concept": "gender"})
    unpressured = train_items[train_items["pressure_slot"].isna()]
    with pytest.raises(InterventionError, match="concept 'pressure' needs train items of both classes"):
        concept_labels(unpressured, "pressure", "leace")
    for name, default in (("ace", "demographic"), ("leace", "identity")):
        method = get(name)
        a = method.fit(lm, train_items, {"layers": [1], "batch_size": 8})
        b = method.fit(lm, train_items, {"layers": [1], "batch_size": 8, "concept": "pressure"})
        assert (a.info["concept"], b.info["concept"]) == (default, "pressure") and a.key != b.key
        assert b.info["n_train"] == len(rows_p)
        k = next(iter(a.tensors))
        assert not torch.allclose(a.tensors[k], b.tensors[k])


def test_leace_fitted_layer_by_layer_guards_the_downstream_layer(lm, train_items):
    """Applied together, sequential erasers leave no cross-covariance at the last layer; erasers fitted each on
    the un-erased model do leave some (their downstream eraser never saw the erased inputs)."""
    from steering.hooks import steer
    leace = get("leace")
    rows, z = concept_labels(train_items, "identity")
    seqs = [prompt_ids(lm, r) for r in rows.to_dict("records")]
    zc = z - z.mean()
    cross = {}
    for sequential in (True, False):
        fitted = leace.fit(lm, train_items, {"layers": [0, 1], "batch_size": 8, "sequential": sequential})
        assert fitted.info["sites"] == ["blocks.0.resid_post", "blocks.1.resid_post"]
        with steer(lm.model, {s: leace.eraser(fitted, s).as_affine() for s in fitted.info["sites"]}):
            X = last_token_activations(lm, seqs, ["blocks.1.resid_post"], 8)["blocks.1.resid_post"].astype(float)
        cross[sequential] = np.abs((X - X.mean(0)).T @ zc / len(z)).max() / np.abs(X).max()
    print(f"relative cross-covariance at blocks.1 after erasure: sequential {cross[True]:.2e}, "
          f"all at once {cross[False]:.2e}")
    assert cross[True] < 1e-5 < cross[False]


def test_apply_at_layers_and_positions(lm, train_items, eval_items):
    caa = get("caa")
    fitted = caa.fit(lm, train_items, {"layers": [0, 1], "batch_size": 8})
    edits = caa.edits(fitted, lm, caa.ApplyOptions())
    from interventions.base import placed_edits
    assert list(placed_edits("caa", edits, caa.ApplyOptions(at_layers=[1]))) == ["blocks.1.resid_post"]
    with pytest.raises(InterventionError, match=r"option at_layers names layer\(s\) \[2\].*fitted layers: \[0, 1\]"):
        with caa.apply(fitted, lm, {"at_layers": 2}):
            pass
    with pytest.raises(InterventionError, match="caa: option at_layers must be"):
        caa.split_options({"at_layers": "middle"})
    with pytest.raises(InterventionError, match="caa: option positions must be one of"):
        caa.split_options({"positions": "first"})
    from evenhand.running.decisions import decide
    base = _lp(decide(eval_items, lm, LOGPROB))
    runs = {p: _lp(decide_with(caa, fitted, eval_items, lm, LOGPROB, {"alpha": 8.0, "positions": p}))
            for p in ("all", "prompt", "last", "generated")}
    one = _lp(decide_with(caa, fitted, eval_items, lm, LOGPROB, {"alpha": 8.0, "at_layers": [1]}))
    assert len({tuple(np.round(v, 6)) for v in [*runs.values(), one]}) == 5  # five distinct edits
    assert all(not np.allclose(v, base, atol=1e-6) for v in runs.values())  # each position choice acts
    with_reuse = DecideOptions(mode="logprob", batch_size=8, progress=False, prefix_reuse=True, prefix_min_tokens=4)
    assert np.allclose(_lp(decide_with(caa, fitted, eval_items, lm, with_reuse, {"alpha": 8.0, "positions": "last"})),
                       runs["last"], atol=1e-4)  # prefix reuse is turned off for position-selective edits


def test_reft_r1_module_uses_the_top_k_latents_and_penalises_the_rest():
    from interventions.learned import make_module
    m = make_module("reft_r1", 4, 2)
    with torch.no_grad():
        m.w.copy_(torch.tensor([1.0, 0.0, 0.0, 0.0]))
    h = torch.zeros(1, 4, 4)
    h[0, :, 0] = torch.tensor([3.0, -1.0, 1.0, 2.0])  # latents ReLU(h . w) = 3, 0, 1, 2
    out = m(h)
    assert torch.allclose(m.magnitude, torch.tensor([2.5]))  # the mean of the top 2: (3 + 2) / 2
    assert torch.allclose(m.l1, torch.tensor(1.0 / 4))  # the latents outside the top 2 (0 and 1), per token
    assert torch.allclose(out, h + 2.5 * m.w.detach())
    m.mask = torch.tensor([[0, 1, 1, 1]])  # left padding is not a token
    m(h)
    assert torch.allclose(m.magnitude, torch.tensor([1.5])) and torch.allclose(m.l1, torch.tensor(0.0))
    m.w.grad = torch.tensor([2.0, 1.0, 0.0, 0.0])
    m.project_gradient()
    assert torch.allclose(m.w.grad, torch.tensor([0.0, 1.0, 0.0, 0.0]))


def test_reft_r1_is_one_direction_for_detection_and_steering(lm, train_items, eval_items):
    reft = get("reft_r1")
    fitted = reft.fit(lm, train_items, {"steps": 4, "batch_size": 4, "topk": 4, "l1": 0.1}, seed=0)
    site = fitted.info["site"]
    assert list(fitted.tensors) == [f"{site}/direction"]
    w = fitted.tensors[f"{site}/direction"]
    assert abs(float(w.norm()) - 1.0) < 1e-5 and fitted.info["steering_factor"] >= 0
    assert 0.0 <= fitted.info["latent_zero_share"] <= 1.0
    scores = reft.detect(fitted, lm, eval_items)
    from evenhand.engine.reader import token_states
    states = token_states(lm, [prompt_ids(lm, r) for r in eval_items.to_dict("records")], site)
    assert np.allclose(scores, [max(0.0, float((h.astype(float) @ w.double().numpy()).max())) for h in states],
                       atol=1e-5)
    edit = reft.edits(fitted, lm, reft.ApplyOptions(alpha=3.0))[site]
    assert torch.allclose(edit(torch.zeros(1, 1, w.shape[0])), 3.0 * w)
    default = reft.edits(fitted, lm, reft.ApplyOptions())[site]
    assert default.alpha == pytest.approx(fitted.info["steering_factor"])
    control = reft.random_control(fitted, seed=1)
    assert abs(float(control.tensors[f"{site}/direction"].norm()) - 1.0) < 1e-5
    assert not torch.allclose(control.tensors[f"{site}/direction"], w)


def test_learned_methods_take_the_same_apply_options(lm, train_items, eval_items):
    loreft = get("loreft")
    fitted = loreft.fit(lm, train_items, {"steps": 2, "batch_size": 4, "rank": 2, "layer": 1}, seed=0)
    with pytest.raises(InterventionError, match=r"loreft: option at_layers names layer\(s\) \[0\].*fitted layers: \[1\]"):
        with loreft.apply(fitted, lm, {"at_layers": 0}):
            pass
    with pytest.raises(InterventionError, match="loreft: option positions must be one of"):
        loreft.split_options({"positions": "everywhere"})
    runs = {p: _lp(decide_with(loreft, fitted, eval_items, lm, LOGPROB, {"positions": p, "at_layers": 1}))
            for p in ("all", "last")}
    assert not np.allclose(runs["all"], runs["last"], atol=1e-6)
