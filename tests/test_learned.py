"""LoReFT and ReFT-r1 against their references (issue 28, docs/interventions/methods.md "loreft" and "reft_r1").

loreft: the edit equals pyreft's ``LoreftIntervention`` holding the same parameters, the hooks that apply it equal
pyvene's ``IntervenableModel`` running pyreft's module at ``model.layers[L].output`` on every position, and
training through either reaches the same loss curve on a fixed seed. reft_r1: AxBench's LsReFT defaults and
objective. Each parity test also builds a departure (an unorthogonalised R, the edit at the last position only,
the old L1 weight or L1 mean) and checks that it lands outside the tolerance, so the check can fail."""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest
import torch

from interventions.base import InterventionError
from interventions.learned import (LoReFTFit, ReFTR1Fit, answer_nll, axbench_objective, hooked, l1_outside_topk,
                                   make_module, swapped_item, train)
from steering.hooks import active_hooks

pyreft = pytest.importorskip("pyreft", reason="the reference implementation: "
                             "pip install --no-deps pyreft==0.1.0 (its pins ask for transformers 4.45.1)")
pv = pytest.importorskip("pyvene")

TOL = 1e-5          # edited hidden states and logits: same parameters, same result
CURVE_TOL = 1e-5    # loss curve (rounded to 6 decimals by train) on a fixed seed


@pytest.fixture(scope="module")
def lm(tmp_path_factory, smoke_items):
    """A tiny random Gemma3 of this module's own (pyvene's hooks never touch the session's shared model)."""
    from evenhand.models.loading import load_model
    from evenhand.models.tiny import save_tiny_model
    texts = smoke_items["prompt"].tolist() + ["the first candidate", "the second candidate"]
    return load_model(str(save_tiny_model(tmp_path_factory.mktemp("learned") / "g", "gemma3", texts, seed=3)))


@pytest.fixture(scope="module")
def pairs(smoke_items):
    rows = smoke_items[smoke_items["degree"] > 0].sample(24, random_state=0).to_dict("records")
    return [(r, swapped_item(r)) for r in rows]


def reference(ours):
    """pyreft's LoreftIntervention (float32, no dropout, linear activation) holding ``ours``'s parameters. The
    parameter layout is the same; pyreft's own ``state_dict`` keeps only R's value, so torch's is used."""
    d, r = ours.rotate_layer.weight.shape
    ref = pyreft.LoreftIntervention(embed_dim=d, low_rank_dimension=r, dtype=torch.float32)
    torch.nn.Module.load_state_dict(ref, torch.nn.Module.state_dict(ours))
    return ref


class Unorthogonalised(torch.nn.Module):
    """A departure: h + M^T (W h + b - M h) with M used as given (LoReFT without the orthogonalisation of R)."""

    def __init__(self, M, W, b):
        super().__init__()
        self.M, self.W, self.b = M, W, b

    def forward(self, h):
        return h + (h @ self.W.T + self.b - h @ self.M) @ self.M.T


def loreft_module(seed: int, d: int, r: int):
    """Our LoReFT with a non-orthonormal M assigned to R (the parametrisation orthogonalises it) and a random
    W, b (away from the identity start)."""
    torch.manual_seed(seed)
    m = make_module("loreft", d, r)
    M = torch.randn(d, r)
    with torch.no_grad():
        m.rotate_layer.weight = M
        m.learned_source.weight.copy_(torch.randn(r, d) / d ** 0.5)
        m.learned_source.bias.copy_(torch.randn(r))
    return m, M


def test_loreft_edit_equals_pyreft_loreft_intervention():
    ours, M = loreft_module(0, 64, 4)
    ref = reference(ours)
    h = 3 * torch.randn(3, 7, 64)
    with torch.no_grad():
        diff = (ours(h) - ref(h)).abs().max().item()
        R = ours.rotate_layer.weight
        orth = (R.T @ R - torch.eye(4)).abs().max().item()
        bad = (Unorthogonalised(M, ours.learned_source.weight, ours.learned_source.bias)(h) - ref(h)).abs().max().item()
    assert diff <= TOL, diff
    assert orth <= TOL, orth                      # R has orthonormal columns
    assert bad > 100 * TOL, bad                   # the departure fails the same check


def test_a_trained_loreft_fit_equals_pyreft_with_its_parameters(lm, smoke_items):
    from interventions.registry import get
    loreft = get("loreft")
    opts, _ = loreft.split_options({"steps": 5, "batch_size": 4, "rank": 2})
    fitted = loreft.fit(lm, smoke_items[smoke_items["degree"] > 0].head(12), opts, seed=0)
    ours = loreft.module(fitted)
    h = 3 * torch.randn(2, 5, ours.rotate_layer.weight.shape[0])
    with torch.no_grad():
        assert (ours(h) - reference(ours)(h)).abs().max().item() <= TOL


@contextmanager
def intervenable(lm, layer: int, module, last_only: bool = False):
    """pyvene's IntervenableModel running ``module`` at ``model.layers[layer].output`` on every position (a
    departure: the last position only); yields the forward. pyvene's named components ("block_output") do not
    resolve for Gemma3 (not in its model card: AttributeError 'Gemma3ForCausalLM' object has no attribute ''), a
    module path does."""
    r = module.rotate_layer.weight.shape[1]
    pm = pv.IntervenableModel(pv.IntervenableConfig(representations=[{
        "layer": layer, "component": f"model.layers[{layer}].output", "low_rank_dimension": r,
        "intervention": module}]), lm.model)

    def forward(**base):
        b, n = base["input_ids"].shape
        where = [[n - 1] if last_only else list(range(n)) for _ in range(b)]
        return pm(base, unit_locations={"base": [where]})[1]
    yield forward


def batch(lm, items):
    from evenhand.engine.batching import left_pad
    from evenhand.vocab.prompts import model_text, user_message
    seqs = [lm.tokenizer(model_text(lm.tokenizer, user_message(it)), add_special_tokens=False)["input_ids"]
            for it in items]
    ids, mask, pos = left_pad(seqs, lm.tokenizer.pad_token_id, lm.model.device)
    return {"input_ids": ids, "attention_mask": mask, "position_ids": pos}


@contextmanager
def entering(lm, layer: int, seen: list):
    """Records the hidden state entering decoder layer ``layer`` (the edited output of ``layer - 1``), by
    wrapping the layer's forward: pyvene removes every forward hook of the model before each call
    (:func:`test_pyvene_removes_hooks_it_did_not_register`), so a hook would not see its runs."""
    mod = lm.model.model.layers[layer]
    inner = mod.forward

    def forward(*args, **kwargs):
        seen.append((args[0] if args else kwargs["hidden_states"]).detach().clone())
        return inner(*args, **kwargs)
    mod.forward = forward
    try:
        yield
    finally:
        del mod.forward


def test_loreft_hooks_equal_pyvene_intervenable_model(lm, pairs):
    d = lm.model.config.get_text_config().hidden_size
    ours, _ = loreft_module(1, d, 2)
    layer = 1
    inputs = batch(lm, [a for a, _ in pairs[:5]])
    seen = []
    with torch.no_grad(), entering(lm, layer + 1, seen):
        plain = lm.model(**inputs)
        with hooked(lm, f"blocks.{layer}.resid_post", ours) as model:
            a = model(**inputs)
        with intervenable(lm, layer, reference(ours)) as model:
            b = model(**inputs)
        with intervenable(lm, layer, reference(ours), last_only=True) as model:
            model(**inputs)
    h0, ha, hb, hc = seen
    edited, logits = (ha - hb).abs().max().item(), (a.logits - b.logits).abs().max().item()
    assert edited <= TOL and logits <= TOL, (edited, logits)
    assert (ha - h0).abs().max().item() > 100 * TOL and (a.logits - plain.logits).abs().max().item() > 100 * TOL
    assert (ha - hc).abs().max().item() > 100 * TOL                        # departure: the last position only
    assert (ha - hc)[:, -1].abs().max().item() <= TOL                       # (which it does edit alike)
    assert active_hooks(lm.model) == 0


def test_loreft_training_curve_equals_pyreft_through_intervenable_model(lm, pairs):
    d = lm.model.config.get_text_config().hidden_size
    opts = LoReFTFit(steps=21, batch_size=4, rank=2)
    torch.manual_seed(0)
    ours = make_module("loreft", d, 2)
    ref, wrong = reference(ours), reference(ours)   # the same initial parameters
    a = train(lm, ours, pairs, opts, hooked(lm, "blocks.1.resid_post", ours))
    b = train(lm, ref, pairs, opts, intervenable(lm, 1, ref))
    c = train(lm, wrong, pairs, opts, intervenable(lm, 1, wrong, last_only=True))
    la, lb, lc = (np.array([p["loss"] for p in x]) for x in (a, b, c))
    assert [p["step"] for p in a] == [0, 10, 20] and la[0] != la[-1]      # it trains
    assert np.abs(la - lb).max() <= CURVE_TOL, (la, lb)
    assert np.abs(la - lc).max() > 100 * CURVE_TOL, (la, lc)            # departure: edit at the last position only
    assert (ours.learned_source.weight - ref.learned_source.weight).abs().max().item() <= 1e-4


def test_reft_r1_defaults_are_axbench_lsreft():
    o = ReFTR1Fit()
    # axbench/sweep/wuzhengx/2b/l20/lsreft.yaml: topk 8, coeff_latent_l1_loss 0.005; the task objective by default
    assert (o.topk, o.l1, o.objective) == (8, 0.005, "task")
    assert ReFTR1Fit(objective="axbench").objective == "axbench"
    with pytest.raises(InterventionError, match="objective"):
        ReFTR1Fit(objective="lm")


def test_reft_r1_module_and_l1_on_a_known_case():
    """Latents [[0, 2, 5, 1], [3, 0, 0, 0]], the second row's first two tokens padding, k = 1: row 0 keeps 5
    and its other latents sum to 3 over 4 tokens (0.75); row 1's only non-zero latent is padding (0); AxBench's
    L1 is their mean, 0.375 (one mean over all six real tokens, the old formula, gives 0.5)."""
    m = make_module("reft_r1", 4, 1)
    with torch.no_grad():
        m.w.copy_(torch.tensor([1.0, 0.0, 0.0, 0.0]))
    h = torch.zeros(2, 4, 4)
    h[..., 0] = torch.tensor([[0.0, 2, 5, 1], [3, 0, 0, 0]])
    h[..., 1] = 7.0                              # orthogonal to w: no latent
    m.mask = torch.tensor([[1, 1, 1, 1], [0, 0, 1, 1]])
    out = m(h)
    assert torch.allclose(m.magnitude, torch.tensor([5.0, 0.0]))
    assert torch.allclose(out, h + m.magnitude[:, None, None] * m.w)
    assert abs(m.l1.item() - 0.375) < 1e-6
    non_topk = torch.tensor([[0.0, 2, 0, 1], [0, 0, 0, 0]])
    assert abs(l1_outside_topk(non_topk, m.mask).item() - 0.375) < 1e-6
    assert abs((non_topk * m.mask).sum() / m.mask.sum() - 0.375) > 0.1   # the old mean departs
    # AxBench's loss: LM loss + step / steps x coeff x L1 (ramped from 0)
    assert axbench_objective(2.0, 0.375, 3, 10, 0.005) == pytest.approx(2.0 + 0.3 * 0.005 * 0.375, abs=1e-12)
    assert axbench_objective(2.0, 0.375, 0, 10, 0.005) == 2.0


def test_answer_nll_is_the_correct_answers_token_cross_entropy(lm, pairs):
    from interventions.learned import answer_batch
    gt = [a for a, _ in pairs if a["condition"] == "GT"][:3]
    assert len(gt) == 3
    with torch.no_grad():
        got = answer_nll(lm, gt).item()
        nll, n, wrong = 0.0, 0, 0.0
        for it, (ctx, ca, cb) in zip(gt, answer_batch(lm, gt)):
            right, other = (ca, cb) if it["correct_slot"] == "A" else (cb, ca)
            for ans, sign in ((right, 1), (other, 0)):
                ids = torch.tensor([ctx + ans])
                logp = torch.log_softmax(lm.model(input_ids=ids).logits[0].float(), -1)
                t = -sum(logp[len(ctx) - 1 + j, tok].item() for j, tok in enumerate(ans))
                if sign:
                    nll, n = nll + t, n + len(ans)
                else:
                    wrong += t
    assert abs(got - nll / n) < 1e-4, (got, nll / n)
    with pytest.raises(InterventionError, match="no correct answer"):
        answer_nll(lm, [a for a, _ in pairs if a["condition"] != "GT"][:1])


def test_reft_r1_axbench_objective_trains_on_it(lm, pairs):
    """The fit's first logged loss (ramp 0) is the LM loss of its first batch of GT pairs with the initial
    direction; a later step adds the ramped L1."""
    d = lm.model.config.get_text_config().hidden_size
    opts = ReFTR1Fit(steps=11, batch_size=2, objective="axbench")
    torch.manual_seed(0)
    m = make_module("reft_r1", d, opts.topk)
    gt = [p for p in pairs if p[0]["condition"] == "GT"]
    with torch.no_grad(), hooked(lm, "blocks.1.resid_post", m) as model:
        first = answer_nll(lm, [a for a, _ in gt[:2]] + [b for _, b in gt[:2]],
                           lambda mask: setattr(m, "mask", mask), model).item()
    torch.manual_seed(0)
    m = make_module("reft_r1", d, opts.topk)
    curve = train(lm, m, pairs, opts, hooked(lm, "blocks.1.resid_post", m))
    assert curve[0]["loss"] == pytest.approx(first, abs=1e-5)
    assert abs(m.w.norm().item() - 1) < 1e-5
    torch.manual_seed(0)
    m2 = make_module("reft_r1", d, opts.topk)
    task = train(lm, m2, pairs, ReFTR1Fit(steps=1, batch_size=2), hooked(lm, "blocks.1.resid_post", m2))
    assert abs(task[0]["loss"] - first) > 1e-3          # the task objective is another loss


def test_pyvene_removes_hooks_it_did_not_register(tmp_path, smoke_items):
    """Why loreft keeps steering.hooks instead of running through IntervenableModel: pyvene 0.1.8 clears every
    forward and pre-forward hook of the model before each call (``_cleanup_states`` -> ``remove_forward_hooks``),
    hooks it did not register included: another method's steering hook, and transformers 5's own hooks that
    collect ``output_hidden_states`` (one state instead of one per layer, from then on)."""
    from evenhand.models.loading import load_model
    from evenhand.models.tiny import save_tiny_model
    from steering.hooks import Add, steer
    lm = load_model(str(save_tiny_model(tmp_path / "g", "gemma3", smoke_items["prompt"].tolist()[:50], seed=3)))
    inputs = batch(lm, smoke_items.head(2).to_dict("records"))
    n_states = len(lm.model(**inputs, output_hidden_states=True).hidden_states)
    ours, _ = loreft_module(1, lm.model.config.get_text_config().hidden_size, 2)
    with torch.no_grad(), steer(lm.model, {"blocks.0.resid_post": Add(torch.ones(ours.rotate_layer.weight.shape[0]),
                                                                         1.0)}):
        assert active_hooks(lm.model) == 1
        with intervenable(lm, 1, reference(ours)) as model:
            model(**inputs)
        assert active_hooks(lm.model) == 0                 # the steering hook is gone while steer is still open
        after = len(lm.model(**inputs, output_hidden_states=True).hidden_states)
    assert (n_states, after) == (4, 1)


def test_reft_r1_fit_takes_the_objective_option(lm, smoke_items):
    from interventions.registry import get
    reft = get("reft_r1")
    opts, _ = reft.split_options({"steps": 2, "batch_size": 2, "objective": "axbench"})
    items = smoke_items[smoke_items["degree"] > 0].head(16)
    fitted = reft.fit(lm, items, opts, seed=0)
    default = reft.fit(lm, items, reft.split_options({"steps": 2, "batch_size": 2})[0], seed=0)
    assert fitted.fit_options["objective"] == "axbench" and default.fit_options["objective"] == "task"
    assert fitted.key != default.key
    assert fitted.info["curve"][0]["loss"] != default.info["curve"][0]["loss"]
    with pytest.raises(InterventionError, match="reft_r1: option objective must be one of task, axbench"):
        reft.split_options({"objective": "completion"})
