"""The ``decision`` dial mechanism (organism/mechanism_decision.py) fitted on 2 train scenarios of the fair organism:
its gate reads the last prompt token and its push reaches the letter; greedy decoding with a KV cache equals one
full pass; it is undone bit for bit, cancels under its inverse and its projection oracle shuts it; erasing its read
direction from the last prompt token's residual removes the bias. Each check also runs on a broken variant (switched
off, a gate read at the noun, a gate re-read at every pass) to show that it can fail."""
from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pytest

from tests.helpers import assert_cache_misuse_refused, greedy_and_full
from organism.calibration import calibration_items, dialled_decisions, letter_logit_diff
from organism.dial import pressure_sign, write_dialled
from organism.dials import read_mechanism
from organism.mechanism import MECHANISMS, MechanismError
from organism.mechanism_decision import Decision
from organism.mechanism_hooks import LIVE
from organism.dials import fit_mechanism
from organism.recipe import FAIR_V1 as FAIR  # thresholds set on v1 (fitted there in the test)

BETA = 40.0
"""A moderate strength: a c-signed letter shift of about 2.4 logits (gain ~0.06 per unit beta, docs/ORGANISM.md)."""
MIN_SHIFT = 1.0
"""The least c-signed letter-logit shift (items with c != 0) at :data:`BETA` that counts as planted."""
REMOVED = 0.1
"""The most c-signed shift, as a share of the planted one, left by an edit that removes the bias."""


class NounGate(Decision):
    """A broken variant: the gate read at the first answer position (the noun), not at the last prompt token."""

    def gate_positions(self, x, projected, hooks):
        import torch
        counts = torch.tensor(hooks.info.answer)
        first = x.shape[1] - counts
        c = self.read_at(x[torch.arange(len(x)), first], projected)
        return c[:, None] * (torch.arange(x.shape[1])[None, :] >= first[:, None])


class EveryPass(Decision):
    """A broken variant: no KV-cache bookkeeping; each pass's gate is read at its own last position."""

    def gate_positions(self, x, projected, hooks):
        return self.read_at(x[:, -1], projected)[:, None].expand(x.shape[0], x.shape[1])


@pytest.fixture(scope="module")
def lm():
    from evenhand.models.loading import load_model
    return load_model(str(FAIR))


@pytest.fixture(scope="module")
def mech(lm):
    return Decision.fit(FAIR, n_fit=2, n_check=1, batch_size=128, lm=lm)


@pytest.fixture(scope="module")
def items():
    """The degree-3 matched items of 1 held-out scenario with c != 0."""
    d3 = calibration_items(FAIR, 1)
    return d3[pressure_sign(d3) != 0].reset_index(drop=True)


@pytest.fixture(scope="module")
def base(lm, items):
    return letter_logit_diff(lm, items)


def signed_shift(mech, lm, items, base, beta: float = BETA, edit=None) -> float:
    """The mean c-signed change of the letter-A-minus-B logit under ``mech`` at ``beta`` (inside ``edit``, a
    context-manager factory, when given: then against the organism under the same edit)."""
    from contextlib import nullcontext
    edit = edit or nullcontext
    with edit():
        ref = base if edit is nullcontext else letter_logit_diff(lm, items)
        with mech.applied(lm.model, beta):
            d = letter_logit_diff(lm, items)
    return float(np.mean((d - ref) * pressure_sign(items)))


def test_registered_saved_and_refused_as_weights(mech, tmp_path):
    assert MECHANISMS["decision"] is Decision and not mech.in_weights and mech.read_layer == 2
    assert read_mechanism(mech.save(tmp_path / "d.json")) == mech
    with pytest.raises(MechanismError, match="forward hook"):
        mech.weight_deltas(1.0)
    with pytest.raises(MechanismError, match="forward hook"):
        write_dialled(10.0, tmp_path / "out", FAIR, mech)
    with pytest.raises(MechanismError, match="no field 'read'"):
        Decision.from_dict({k: v for k, v in mech.to_dict().items() if k != "read"})
    assert mech.record["heldout_r2"] > 0.2, mech.record  # the read carries c out of sample


def test_plants_a_large_shift_with_answers_parsed(mech, lm, items, base):
    """Fails switched off (beta 0: no shift)."""
    assert signed_shift(mech, lm, items, base) >= MIN_SHIFT
    assert signed_shift(mech, lm, items, base, 0.0) == 0.0
    assert dialled_decisions(items, BETA, FAIR, mech, lm=lm)["choice"].notna().mean() >= 0.99


def test_erasing_the_read_at_the_last_prompt_token_removes_the_bias(mech, lm, items, base):
    """``a`` projected out of the last prompt token's residual entering the read layer (an activation edit at the
    decision position, :mod:`steering.hooks`) leaves no bias; the same edit at the answer positions leaves it all,
    and it leaves the bias of a gate read at the noun (the broken variant): the check fails for that one."""
    from steering.hooks import AtPositions, ProjectOut, steer

    a = np.asarray(mech.read)
    site = f"blocks.{mech.read_layer}.resid_pre"

    def erase(where):  # sets <a, h> + b to 0 at ``where``
        return lambda: steer(lm.model, {site: AtPositions(ProjectOut(a, mean=-mech.bias * a / (a @ a)), where)})

    planted = signed_shift(mech, lm, items, base)
    assert abs(signed_shift(mech, lm, items, base, edit=erase("last"))) <= REMOVED * planted
    assert signed_shift(mech, lm, items, base, edit=erase("generated")) >= (1 - REMOVED) * planted
    noun = NounGate(**asdict(mech))
    assert signed_shift(noun, lm, items, base) >= MIN_SHIFT
    assert signed_shift(noun, lm, items, base, edit=erase("last")) > REMOVED * planted


def test_greedy_decoding_with_a_cache_equals_one_full_pass(mech, lm, items):
    """Fails for a gate re-read at each pass's last position (a decode step then reads the token it decodes)."""
    some = items.head(24)
    gen, full = greedy_and_full(mech, lm, some, BETA)
    assert gen == full
    with mech.applied(lm.model, 0.0):
        plain = greedy_and_full(mech, lm, some, 0.0)[0]
    assert gen != plain  # the push changed some answers
    broken, broken_full = greedy_and_full(EveryPass(**asdict(mech)), lm, some, BETA)
    assert broken != broken_full


def test_a_decode_step_without_its_prompt_pass_is_an_error(mech, lm, items):
    """A KV cache filled outside the mechanism, then a decode step inside: no gate to push with, an error; a
    several-token pass extending a cache without declared answer tokens (prefix reuse): an error."""
    from organism.dial import letter_position_batches
    ids, mask, pos = next(letter_position_batches(lm, items.head(2), end="noun"))
    assert_cache_misuse_refused(mech, lm, ids, mask, pos, BETA, MechanismError)
    assert not LIVE


def test_undone_exactly_the_inverse_cancels_and_the_projection_shuts_it(mech, lm, items, base):
    """Fails when a hook outlives its block, nested blocks do not sum their betas (not bit-exact), or the projection
    oracle leaves any of the gate's read."""
    import torch

    layers = lm.model.model.layers
    watched = (lm.model.model, layers[mech.read_layer], layers[mech.push_layer].mlp)
    with pytest.raises(RuntimeError, match="inside"):
        with mech.applied(lm.model, BETA):
            assert np.abs(letter_logit_diff(lm, items) - base).max() > 1.0
            raise RuntimeError("inside")
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in watched) and not LIVE
    assert torch.equal(torch.tensor(letter_logit_diff(lm, items)), torch.tensor(base))
    with mech.applied(lm.model, BETA), mech.applied(lm.model, -BETA):
        assert np.array_equal(letter_logit_diff(lm, items), base)
    with mech.applied(lm.model, BETA / 2):
        half = letter_logit_diff(lm, items)
    with mech.applied(lm.model, BETA), mech.applied(lm.model, -BETA / 2):
        assert np.array_equal(letter_logit_diff(lm, items), half)
    with mech.applied(lm.model, BETA), mech.project(lm.model):
        assert np.abs(letter_logit_diff(lm, items) - base).max() < 1e-4
    assert not LIVE


def test_fit_mechanism_routes_to_it(lm):
    """The CLI's fitting route (``fit-dial --mechanism decision``) gives this class with the common arguments."""
    got = fit_mechanism("decision", FAIR, seed=0, n_fit=1, n_check=1, layer=1, batch_size=128)
    assert isinstance(got, Decision) and got.read_layer == 1 and got.push_layer == 2
