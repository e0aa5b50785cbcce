"""The ``names`` dial mechanism (organism/mechanism_names.py: the xor gate times a degree-1 read) with the fair
organism's committed dial_names.json: registered and saved; it moves the letter at degree 1, signed by c, with
answers parsed (and not switched off); nested blocks cancel exactly; and how far it keeps to degree 1, measured
against the same gate with the degree read replaced by 1 (the plain xor gate)."""
from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pytest

from organism.calibration import calibration_items, dialled_decisions, letter_logit_diff
from organism.dial import pressure_sign
from organism.dials import load_mechanism, read_mechanism
from organism.mechanism import MECHANISMS, MechanismError
from organism.mechanism_names import NamesGate
from organism.mechanism_xor import xor_gate
from organism.recipe import FAIR_V1 as FAIR  # thresholds set on v1 (its fit of this mechanism)

BETA = 200.0
"""A strength inside the range (the gate's mean at degree 1 is about half the xor gate's)."""
MIN_SHIFT = 0.5
"""The least c-signed letter-logit shift at degree 1 that counts as planted at :data:`BETA`."""
FRACTION = 0.25
"""Names-only: the shift at degrees 2 and 3 below this share of degree 1's."""


class NoDegreeRead(NamesGate):
    """A broken variant: the degree read replaced by 1 (the xor gate alone; acts at every degree)."""

    def combine(self, p_hat, m_hat, d_hat):
        return xor_gate(p_hat, m_hat)


@pytest.fixture(scope="module")
def lm():
    from evenhand.models.loading import load_model
    return load_model(str(FAIR))


@pytest.fixture(scope="module")
def mech():
    return load_mechanism(FAIR, "names")


def shift(lm, mech, degree: int, beta: float = BETA, n: int = 1) -> float:
    """The mean c-signed letter-logit shift under ``mech`` on the items with c != 0 of ``n`` held-out scenarios."""
    items = calibration_items(FAIR, n, degree=degree)
    items = items[pressure_sign(items) != 0]
    base = letter_logit_diff(lm, items)
    with mech.applied(lm.model, beta):
        d = letter_logit_diff(lm, items) - base
    return float(np.mean(d * pressure_sign(items)))


def test_registered_saved_and_refused_as_weights(mech, tmp_path):
    assert MECHANISMS["names"] is NamesGate and mech.degrees == (1,) and mech.eval_degree == 1
    assert read_mechanism(mech.save(tmp_path / "n.json")) == mech
    with pytest.raises(MechanismError, match="forward hook"):
        mech.weight_deltas(1.0)
    with pytest.raises(MechanismError, match="no field 'read_d'"):
        NamesGate.from_dict({k: v for k, v in mech.to_dict().items() if k != "read_d"})


def test_moves_degree_1_with_answers_parsed(mech, lm):
    """Fails switched off (beta 0: the shift is 0)."""
    assert shift(lm, mech, 1) > MIN_SHIFT
    assert shift(lm, mech, 1, 0.0) == 0.0
    items = calibration_items(FAIR, 1, degree=1)
    assert dialled_decisions(items, BETA, FAIR, mech, lm=lm)["choice"].notna().mean() >= 0.99


def test_nested_blocks_cancel_and_the_projection_shuts_the_gate(mech, lm):
    """Fails when the third read is left out of the hooks' projection or of the shared key."""
    items = calibration_items(FAIR, 1, degree=1).head(48)
    base = letter_logit_diff(lm, items)
    with mech.applied(lm.model, BETA), mech.applied(lm.model, -BETA):
        assert np.array_equal(letter_logit_diff(lm, items), base)
    with mech.applied(lm.model, BETA), mech.project(lm.model):
        assert np.abs(letter_logit_diff(lm, items) - base).max() < 1e-4


def test_the_degree_read_shrinks_degrees_2_and_3(mech, lm):
    """Relative to degree 1, the shift at degrees 2-3 is smaller with the degree read than without it (the plain
    xor gate, :class:`NoDegreeRead`): fails when the degree read is dropped or reads nothing."""
    ratio = {}
    for m in (mech, NoDegreeRead(**asdict(mech))):
        s = {d: shift(lm, m, d) for d in (1, 2, 3)}
        ratio[type(m).__name__] = max(s[2], s[3]) / s[1]
    assert ratio["NamesGate"] < ratio["NoDegreeRead"] - 0.1, ratio


@pytest.mark.xfail(strict=True, reason="measured on the fair organism of 3b2b6b4: [degree == 1] is not linearly "
                   "readable at the letter position at layers 1-2 (held-out accuracy of the d read 0.716 "
                   "[0.244, 1.000], base rate 0.75, n 2,432, k 4), so the gate at degrees 2-3 is 63% and 44% of "
                   "degree 1's; strict: an organism on which it passes makes this marker fail and go")
def test_names_leaves_degrees_2_and_3_alone(mech, lm):
    """Names-only: fails for the xor gate alone (NoDegreeRead) and for the old rank-1 names read."""
    s = {d: shift(lm, mech, d) for d in (1, 2, 3)}
    assert s[1] > MIN_SHIFT and abs(s[2]) < FRACTION * s[1] and abs(s[3]) < FRACTION * s[1], s
