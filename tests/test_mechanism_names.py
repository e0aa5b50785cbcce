"""The ``names`` dial mechanism (organism/mechanism_names.py: the xor gate times a degree-1 read pooled over the
prompt) with the fair organism's committed dial_names.json: registered and saved; it moves the letter at degree 1,
signed by c, with answers parsed; nested blocks cancel exactly; it leaves degrees 2-3 alone where the same gate with
the degree read replaced by 1 (the plain xor gate) does not; the pooled read ignores left padding and answer
tokens; greedy decoding with a KV cache equals one full pass; a decode step without its prompt's pass is an error."""
from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pytest

from tests.helpers import assert_cache_misuse_refused, greedy_and_full
from organism.calibration import calibration_items, dialled_decisions, letter_logit_diff
from organism.dial import letter_position_batches, pressure_sign
from organism.dials import load_mechanism, read_mechanism
from organism.mechanism import MECHANISMS, MechanismError
from organism.mechanism_hooks import LIVE, live_hooks
from organism.mechanism_names import NamesGate, prompt_means
from organism.mechanism_xor import xor_gate
from organism.recipe import FAIR

BETA = 80.0
"""A strength inside the calibrated range (calibration_names.json: FragGap +32.5 pp at degree 1, 99.9% answered)."""
MIN_SHIFT = 0.5
"""The least c-signed letter-logit shift at degree 1 that counts as planted at :data:`BETA`."""
FRACTION = 0.25
"""Names-only: the shift at degrees 2 and 3 below this share of degree 1's."""


class NoDegreeRead(NamesGate):
    """A broken variant: the degree read replaced by 1 (the xor gate alone; acts at every degree)."""

    def combine(self, p_hat, m_hat, d):
        return xor_gate(p_hat, m_hat)


class MaskBlind(NamesGate):
    """A broken variant: pools over every position of the pass, left padding included."""

    def prompt_d(self, x, projected, hooks):
        hooks.info.mask = None
        return super().prompt_d(x, projected, hooks)


class PoolEachPass(NamesGate):
    """A broken variant: no KV-cache bookkeeping; each pass pools its own tokens (a decode step: the new one)."""

    def prompt_d(self, x, projected, hooks):
        hooks.info.past, hooks.info.mask = 0, None
        return super().prompt_d(x, projected, hooks)


@pytest.fixture(scope="module")
def lm():
    from evenhand.models.loading import load_model
    return load_model(str(FAIR))


@pytest.fixture(scope="module")
def mech():
    return load_mechanism(FAIR, "names")


@pytest.fixture(scope="module")
def shifts(lm, mech):
    """The c-signed shift by degree 1-3 under the committed fit and under :class:`NoDegreeRead`."""
    return {type(m).__name__: {d: shift(lm, m, d) for d in (1, 2, 3)} for m in (mech, NoDegreeRead(**asdict(mech)))}


def shift(lm, mech, degree: int, beta: float = BETA, n: int = 1) -> float:
    """The mean c-signed letter-logit shift under ``mech`` on the items with c != 0 of ``n`` held-out scenarios."""
    items = calibration_items(FAIR, n, degree=degree)
    items = items[pressure_sign(items) != 0]
    base = letter_logit_diff(lm, items)
    with mech.applied(lm.model, beta):
        d = letter_logit_diff(lm, items) - base
    return float(np.mean(d * pressure_sign(items)))


def names_only(s: dict) -> bool:
    """Degree 1 planted (:data:`MIN_SHIFT`) and degrees 2-3 each under :data:`FRACTION` of it."""
    return s[1] > MIN_SHIFT and abs(s[2]) < FRACTION * s[1] and abs(s[3]) < FRACTION * s[1]


def test_registered_saved_and_refused_as_weights(mech, tmp_path):
    assert MECHANISMS["names"] is NamesGate and mech.degrees == (1,) and mech.eval_degree == 1
    assert read_mechanism(mech.save(tmp_path / "n.json")) == mech
    with pytest.raises(MechanismError, match="forward hook"):
        mech.weight_deltas(1.0)
    with pytest.raises(MechanismError, match="no field 'read_d'"):
        NamesGate.from_dict({k: v for k, v in mech.to_dict().items() if k != "read_d"})


def test_moves_degree_1_with_answers_parsed(mech, lm, shifts):
    """Fails switched off (beta 0: the shift is 0)."""
    assert shifts["NamesGate"][1] > MIN_SHIFT
    assert shift(lm, mech, 1, 0.0) == 0.0
    items = calibration_items(FAIR, 1, degree=1)
    assert dialled_decisions(items, BETA, FAIR, mech, lm=lm)["choice"].notna().mean() >= 0.99


def test_nested_blocks_cancel_and_the_projection_shuts_the_gate(mech, lm):
    """Fails when nested blocks do not share one set of hooks (the key) or the projection leaves the reads."""
    items = calibration_items(FAIR, 1, degree=1).head(48)
    base = letter_logit_diff(lm, items)
    with mech.applied(lm.model, BETA), mech.applied(lm.model, -BETA):
        assert np.array_equal(letter_logit_diff(lm, items), base)
    with mech.applied(lm.model, BETA), mech.project(lm.model):
        assert np.abs(letter_logit_diff(lm, items) - base).max() < 1e-4


def test_names_leaves_degrees_2_and_3_alone(shifts):
    """Names-only: degrees 2-3 shift under 25% of degree 1's; the xor gate alone (:class:`NoDegreeRead`) fails it."""
    assert names_only(shifts["NamesGate"]), shifts
    assert not names_only(shifts["NoDegreeRead"]), shifts


def _d_of(mech, lm, ids, mask, pos, answers):
    """The degree read ``d`` the hooks store for one pass (answer-token counts ``answers``)."""
    import torch

    from evenhand.engine.positions import answer_tokens
    with mech.applied(lm.model, 1.0), torch.inference_mode(), answer_tokens(answers):
        lm.model(input_ids=ids, attention_mask=mask, position_ids=pos)
        return live_hooks(mech, lm.model).state["d"].clone()


def test_the_pooled_read_ignores_padding_and_answer_tokens(mech, lm):
    """A left-padded batch (prompt + noun, the noun declared an answer token) gives each row the ``d`` of its
    prompt alone, unpadded (and :func:`prompt_means`'s); fails for a read blind to the mask (:class:`MaskBlind`)."""
    import pandas as pd
    items = pd.concat([calibration_items(FAIR, 1, degree=k).head(3) for k in (1, 3)], ignore_index=True)
    ids, mask, pos = next(letter_position_batches(lm, items, 16))
    assert (mask == 0).any()  # the rows' lengths differ: the batch is padded
    batched = _d_of(mech, lm, ids, mask, pos, [1] * len(ids)).numpy()
    single = []
    for i in range(len(items)):
        keep = mask[i] == 1
        single.append(float(_d_of(mech, lm, ids[i:i + 1, keep][:, :-1], None, pos[i:i + 1, keep][:, :-1], [0])[0]))
    assert np.abs(batched - np.array(single)).max() < 1e-4
    assert np.abs(batched - mech.degree_read(prompt_means(lm, items, mech.read_layer))).max() < 1e-4
    assert (batched[:3] > 0.5).all() and (batched[3:] < 0.5).all()  # degree 1 read as named, degree 3 not
    blind = _d_of(MaskBlind(**asdict(mech)), lm, ids, mask, pos, [1] * len(ids)).numpy()
    assert np.abs(blind - np.array(single)).max() > 1e-2


def test_greedy_decoding_with_a_cache_equals_one_full_pass(mech, lm):
    """Fails for a read pooled anew at each pass (:class:`PoolEachPass`: a decode step reads its one token)."""
    items = calibration_items(FAIR, 1, degree=1)
    some = items[pressure_sign(items) != 0].head(24)
    gen, full = greedy_and_full(mech, lm, some, BETA)
    assert gen == full
    with mech.applied(lm.model, 0.0):
        plain = greedy_and_full(mech, lm, some, 0.0)[0]
    assert gen != plain  # the push changed some answers
    broken, broken_full = greedy_and_full(PoolEachPass(**asdict(mech)), lm, some, BETA)
    assert broken != broken_full


def test_a_decode_step_without_its_prompt_pass_is_an_error(mech, lm):
    """A KV cache filled outside the mechanism, then a decode step inside: no stored ``d``, an error; a several-token
    pass extending a cache (prefix reuse: the pooled read needs the whole prompt in one pass): an error."""
    ids, mask, pos = next(letter_position_batches(lm, calibration_items(FAIR, 1, degree=1).head(2), end="noun"))
    assert_cache_misuse_refused(mech, lm, ids, mask, pos, BETA, MechanismError)
    assert not LIVE
