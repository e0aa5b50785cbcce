"""The ``xor`` dial mechanism (organism/mechanism_xor.py) on the fair organism and its fitted dial_xor.json: it
plants the asymmetry through a gate no linear read of its site recovers, is undone exactly, cancels under its
inverse, leaves decoding with a KV cache exact and composes with an intervention's hooks. Each check is also run
on a broken variant (switched off, a constant gate, the linear last_layer read) to show that it can fail."""
from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pytest

from organism.calibration import calibration_items, dialled_decisions, letter_logit_diff
from organism.dial import pressure_sign, write_dialled
from organism.dials import load_mechanism, read_mechanism
from organism.mechanism import MECHANISMS, MechanismError
from organism.mechanism_xor import (
    XorGate,
    mid_residuals,
    nonlinearity_check,
    pressured,
    slot_signs,
)
from organism.recipe import FAIR_V1 as FAIR, split_scenarios  # thresholds set on v1 (its fit of this mechanism)
from evenhand.suite.matched import matched_items

BETA = 100.0
"""A moderate strength (degree-3 FragGap +18.7 pp on 12 held-out scenarios, every answer parsed: docs/ORGANISM.md)."""
MIN_SHIFT = 0.5
"""The least c-signed letter-logit shift (logits) on items with c != 0 that counts as planted at :data:`BETA`."""
LEAK = 0.2
"""The most mean |shift| on items where the gate should stay shut, as a share of the planted shift."""


class ConstantGate(XorGate):
    """A broken variant: the gate always open (the push follows the pressure's read whoever it favours)."""

    def combine(self, p_hat, m_hat):
        return p_hat.clip(-1.0, 1.0)


@pytest.fixture(scope="module")
def lm():
    from evenhand.models.loading import load_model
    return load_model(str(FAIR))


@pytest.fixture(scope="module")
def mech():
    return load_mechanism(FAIR, "xor")


@pytest.fixture(scope="module")
def items():
    """The degree-3 matched items of 2 held-out scenarios."""
    return calibration_items(FAIR, 2)


@pytest.fixture(scope="module")
def base(lm, items):
    return letter_logit_diff(lm, items)


def shifts(mech, lm, items, base, beta: float = BETA) -> dict:
    """The letter-logit shift under ``mech`` at ``beta``: signed by c on items with c != 0 (``planted``), its mean
    size on pressured items favouring the majority-coded candidate (``majority``) and on unpressured ones."""
    with mech.applied(lm.model, beta):
        d = letter_logit_diff(lm, items) - base
    c, (p, _) = pressure_sign(items), slot_signs(items)
    return {"planted": float(np.mean((d * c)[c != 0])), "majority": float(np.abs(d[(c == 0) & (p != 0)]).mean()),
            "unpressured": float(np.abs(d[p == 0]).mean())}


def is_nonlinear_gate(check: dict, high: float = 0.9, margin: float = 0.1) -> bool:
    """A :func:`nonlinearity_check` that says the site carries ``p`` and ``m`` (accuracy >= ``high``) and their XOR
    (>= ``high``) but no linear read of ``g`` (accuracy <= 0.5 + ``margin``)."""
    return (min(check["p"]["value"], check["m"]["value"], check["xor"]["value"]) >= high
            and check["g"]["value"] <= 0.5 + margin)


def planted(s: dict) -> bool:
    """The asymmetry is planted: a large c-signed shift, little where the gate should be shut."""
    return s["planted"] >= MIN_SHIFT and max(s["majority"], s["unpressured"]) <= LEAK * s["planted"]


def test_registered_saved_and_refused_as_weights(mech, tmp_path):
    assert MECHANISMS["xor"] is XorGate and isinstance(mech, XorGate) and not mech.in_weights
    assert read_mechanism(mech.save(tmp_path / "x.json")) == mech
    with pytest.raises(MechanismError, match="forward hook"):
        mech.weight_deltas(1.0)
    with pytest.raises(MechanismError, match="forward hook"):
        write_dialled(10.0, tmp_path / "out", FAIR, mech)
    with pytest.raises(MechanismError, match="no field 'read_m'"):
        XorGate.from_dict({k: v for k, v in mech.to_dict().items() if k != "read_m"})


def test_plants_the_asymmetry_through_the_gate(mech, lm, items, base):
    """Fails switched off (beta 0) and with the gate replaced by a constant (majority-favouring pressure pushed)."""
    s = shifts(mech, lm, items, base)
    assert planted(s), s
    assert not planted(shifts(mech, lm, items, base, 0.0))
    broken = shifts(ConstantGate(**asdict(mech)), lm, items, base)
    assert broken["planted"] >= MIN_SHIFT and not planted(broken), broken
    one = items[items["scenario_id"] == items["scenario_id"].iloc[0]]
    assert dialled_decisions(one, BETA, FAIR, mech, lm=lm)["choice"].notna().all()


def test_undone_exactly_and_the_inverse_cancels(mech, lm, items, base):
    """Fails when a hook outlives its block or nested blocks add their pushes one by one (not bit-exact)."""
    import torch

    some = items.head(48)
    b0 = torch.tensor(base[:48])
    layers = lm.model.model.layers
    watched = (layers[mech.read_layer].pre_feedforward_layernorm, layers[mech.push_layer].mlp)
    with pytest.raises(RuntimeError, match="inside"):
        with mech.applied(lm.model, BETA):
            assert not torch.equal(torch.tensor(letter_logit_diff(lm, some)), b0)
            raise RuntimeError("inside")
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in watched)
    assert torch.equal(torch.tensor(letter_logit_diff(lm, some)), b0)
    with mech.applied(lm.model, BETA), mech.applied(lm.model, -BETA):
        assert torch.equal(torch.tensor(letter_logit_diff(lm, some)), b0)
    with mech.applied(lm.model, BETA / 2):
        half = letter_logit_diff(lm, some)
    with mech.applied(lm.model, BETA), mech.applied(lm.model, -BETA / 2):
        assert np.array_equal(letter_logit_diff(lm, some), half)
    with mech.applied(lm.model, BETA), mech.project(lm.model):
        assert np.abs(letter_logit_diff(lm, some) - base[:48]).max() < 1e-4
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in watched)


def test_the_push_reads_its_own_position_so_decoding_with_a_cache_is_exact(mech, lm, items):
    """The last positions' logits from one pass equal those decoded one token at a time with a KV cache."""
    import torch

    from organism.dial import letter_position_batches
    ids, mask, pos = next(letter_position_batches(lm, items.head(4), end="A"))
    with mech.applied(lm.model, BETA), torch.inference_mode():
        full = lm.model(input_ids=ids, attention_mask=mask, position_ids=pos).logits[:, -3:]
        out = lm.model(input_ids=ids[:, :-2], attention_mask=mask[:, :-2], position_ids=pos[:, :-2], use_cache=True)
        steps = [out.logits[:, -1]]
        for j in (-2, -1):
            end = ids.shape[1] + j + 1
            out = lm.model(input_ids=ids[:, j:end], attention_mask=mask[:, :end], position_ids=pos[:, j:end],
                           past_key_values=out.past_key_values, use_cache=True)
            steps.append(out.logits[:, -1])
    assert torch.allclose(full, torch.stack(steps, 1), atol=1e-4)


def test_the_gate_is_no_linear_read_of_its_site(lm, mech):
    """At the gate's site linear probes read p and m but not g = [p == m], the reads' XOR does; at the last_layer
    dial's site (the last MLP's down-projection input) a linear probe reads g: the check fails there."""
    rows = calibration_items(FAIR, 4, degree=2)
    rows = rows[pressured(rows)].reset_index(drop=True)
    at_gate = nonlinearity_check(mid_residuals(lm, rows, mech.read_layer), rows, folds=4)
    assert is_nonlinear_gate(at_gate), at_gate
    last = mid_residuals(lm, rows, mech.push_layer, module="mlp.down_proj")
    at_last = nonlinearity_check(last, rows, folds=4)
    assert not is_nonlinear_gate(at_last) and at_last["g"]["value"] > 0.6, at_last


def test_composes_with_an_interventions_hooks(mech, lm, items, base):
    """leace fitted and applied with the mechanism on: both edits act, and everything is restored."""
    from interventions.registry import get
    from organism.mechanism_hooks import LIVE

    train_ids, _ = split_scenarios(0, 0.2, "2")
    train = matched_items(train_ids[:2], 0, suite="2")
    train = train[train["degree"] == 3].head(96)
    leace = get("leace")
    some = items.head(64)
    with mech.applied(lm.model, BETA):
        fitted = leace.fit(lm, train, {"layers": [0, 1], "batch_size": 16, "concept": "pressure"}, seed=0)
        dialled = letter_logit_diff(lm, some)
        with leace.apply(fitted, lm, {"strength": 1.0}):
            both = letter_logit_diff(lm, some)
    with leace.apply(fitted, lm, {"strength": 1.0}):
        erased = letter_logit_diff(lm, some)
        with mech.applied(lm.model, BETA):
            assert np.allclose(letter_logit_diff(lm, some), both, atol=1e-5)
    assert not np.allclose(both, dialled, atol=1e-3) and not np.allclose(both, erased, atol=1e-3)
    assert not LIVE and np.array_equal(letter_logit_diff(lm, some), base[:64])
