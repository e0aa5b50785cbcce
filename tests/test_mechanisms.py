"""The bias dial's weight-edit mechanisms (organism/dial.py's last_layer, organism/mechanisms.py's distributed)
on the fair organism: last_layer fitted on 2 scenarios, distributed as committed (dial_distributed.json; its fit,
about 40 s of CPU, runs once, through the CLI, in the last test, which holds that fresh fit to the same bar).
Each moves the letter, signed by c, at a beta inside its range with every answer parsed (and not when switched
off); each edit is undone bit for bit, cancels with its inverse, is erased by its projection oracle and
round-trips through its file. The hook mechanisms decision, names and xor have their own tests
(tests/test_mechanism_{decision,names,xor}.py)."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from organism.calibration import calibration_items, dialled_decisions, letter_logit_diff
from organism.dial import letter_position_batches, pressure_sign
from organism.dials import fit_mechanism, load_mechanism, read_mechanism
from organism.mechanism import MechanismError, dial_file
from organism.mechanism_decision import Decision
from organism.mechanism_names import NamesGate
from organism.mechanisms import Distributed
from organism.recipe import FAIR

NAMES = ("last_layer", "distributed")
BETA = {"last_layer": 80.0, "distributed": 80.0}
"""A beta well inside each mechanism's calibrated range (docs/ORGANISM.md, "Dial mechanisms")."""
LARGE = {"last_layer": 1.0, "distributed": 1.0}
"""The least c-signed letter-logit shift at ``BETA`` that counts as large (each grows past 2)."""
FITTED: dict = {}


@pytest.fixture(scope="module")
def lm():
    from evenhand.models.loading import load_model
    return load_model(str(FAIR))


def fitted(name: str):
    """``name`` on the fair organism (once per session): last_layer fitted on 2 train scenarios, distributed
    the committed fit (a fresh one: :func:`test_cli_fit_calibrate_and_dial_a_mechanism`)."""
    if name not in FITTED:
        FITTED[name] = (load_mechanism(FAIR, name) if name == "distributed"
                        else fit_mechanism(name, FAIR, n_fit=2, n_check=1, batch_size=128))
    return FITTED[name]


def signed_shift(lm, mech, beta: float, items) -> float:
    """The mean change of the letter-A-minus-B logit, signed by c, on the items with c != 0."""
    c = pressure_sign(items)
    on = c != 0
    base = letter_logit_diff(lm, items[on])
    with mech.applied(lm.model, beta):
        diff = letter_logit_diff(lm, items[on])
    return float(np.mean((diff - base) * c[on]))


@pytest.mark.parametrize("name", NAMES)
def test_the_mechanism_moves_the_letter_with_answers_parsed(lm, name):
    """Fails with the mechanism switched off (beta 0, or its read zeroed): the shift is then 0."""
    mech = fitted(name)
    items = calibration_items(FAIR, 1, degree=mech.eval_degree)
    assert signed_shift(lm, mech, BETA[name], items) > LARGE[name]
    resp = dialled_decisions(items, BETA[name], FAIR, mech, lm=lm)
    assert resp["choice"].notna().mean() >= 0.99


def _logits(lm, items):
    import torch
    ids, mask, pos = next(letter_position_batches(lm, items, 16))
    with torch.inference_mode():
        return lm.model(input_ids=ids, attention_mask=mask, position_ids=pos).logits[:, -1].float().numpy()


@pytest.mark.parametrize("name", NAMES)
def test_exact_restore_inverse_and_projection(lm, name):
    """Exact restore fails if ``applied`` or ``project`` leaves any parameter changed (an exception inside
    included); the inverse check fails if ``applied(-beta)`` is not the edit's inverse; the projection check
    fails if ``project`` misses an edited layer (the distributed one edits three)."""
    import torch
    mech = fitted(name)
    items = calibration_items(FAIR, 1, degree=mech.eval_degree).head(16)
    before = {n: p.detach().clone() for n, p in lm.model.named_parameters()}
    edited = sorted(mech.weight_deltas(1.0))
    with pytest.raises(RuntimeError, match="inside"):
        with mech.applied(lm.model, BETA[name]):
            assert all(not torch.equal(lm.model.get_parameter(n), before[n]) for n in edited)
            with mech.project(lm.model):
                raise RuntimeError("inside")
    assert all(torch.equal(p, before[n]) for n, p in lm.model.named_parameters())
    plain = _logits(lm, items)
    with mech.applied(lm.model, BETA[name]):
        assert np.abs(_logits(lm, items) - plain).max() > 1e-3
        with mech.applied(lm.model, -BETA[name]):
            assert np.abs(_logits(lm, items) - plain).max() < 1e-5
        with mech.project(lm.model):
            dialled_projected = _logits(lm, items)
    with mech.project(lm.model):
        projected = _logits(lm, items)
    assert np.abs(dialled_projected - projected).max() < 1e-4
    assert all(torch.equal(p, before[n]) for n, p in lm.model.named_parameters())


@pytest.mark.parametrize("name", NAMES)
def test_save_and_load_round_trip(tmp_path, name):
    mech = fitted(name)
    out = mech.save(tmp_path / dial_file(name))
    assert json.loads(out.read_text())["mechanism"] == name
    assert read_mechanism(out) == mech and load_mechanism(tmp_path, name) == mech
    if name != "last_layer":
        bad = {k: v for k, v in json.loads(out.read_text()).items() if k not in ("mechanism", "a")}
        with pytest.raises(MechanismError, match="'a'"):
            type(mech).from_dict(bad)


def test_declared_degrees_and_shapes():
    cls = {"distributed": Distributed}
    assert NamesGate.degrees == (1,) and NamesGate.eval_degree == 1
    assert Decision.eval_degree == Distributed.eval_degree == 3
    d = fitted("distributed")
    assert d.layers == (0, 1, 2) and d.scale == pytest.approx(1 / 3)
    assert all(type(fitted(n)) is c for n, c in cls.items())
    with pytest.raises(MechanismError, match="one entry per edited layer"):
        Distributed(layers=(2,), a=(), v=((0.0,),))
    with pytest.raises(MechanismError, match="'distributed' takes no layer"):
        fit_mechanism("distributed", FAIR, layer=1)


def test_cli_fit_calibrate_and_dial_a_mechanism(lm, tmp_path):
    """`evenhand organism fit-dial | calibrate | dial --mechanism distributed` on a copy of the fair organism; the
    fresh fit (1 scenario) moves the letter as :func:`test_the_mechanism_moves_the_letter_with_answers_parsed`
    asks of the committed one (fails switched off: beta 0)."""
    import torch
    from safetensors.torch import load_file

    from experiments.cli import main
    org = tmp_path / "org"
    shutil.copytree(FAIR, org, ignore=shutil.ignore_patterns("*.py", "__pycache__", "*.png"))
    assert main(["organism", "fit-dial", "--mechanism", "distributed", "--path", str(org), "--fit-scenarios", "1",
                 "--check-scenarios", "1"]) == 0
    fresh = load_mechanism(org, "distributed")
    assert isinstance(fresh, Distributed) and fresh.fit_record["scenarios"] == 1
    assert fresh != fitted("distributed")  # fitted here, not the committed file copied with the organism
    assert signed_shift(lm, fresh, BETA["distributed"], calibration_items(FAIR, 1)) > LARGE["distributed"]
    assert main(["organism", "calibrate", "--mechanism", "distributed", "--path", str(org), "--betas", "0", "40",
                 "--scenarios", "1", "--no-progress"]) == 0
    curve = json.loads((org / "calibration_distributed.json").read_text())
    assert curve["degree"] == 3 and curve["mechanism"] == "distributed" and curve["points"][1]["gain"] > 0
    assert main(["organism", "dial", "--mechanism", "distributed", "--path", str(org), "--beta", "0", "--out",
                 str(tmp_path / "b0")]) == 0
    ref, got = load_file(org / "model.safetensors"), load_file(tmp_path / "b0" / "model.safetensors")
    assert all(torch.equal(ref[k], got[k]) for k in ref)
    assert json.loads((tmp_path / "b0" / "organism.json").read_text())["dial"]["mechanism"] == "distributed"
    with pytest.raises(SystemExit):
        main(["organism", "fit-dial", "--mechanism", "nope", "--path", str(org)])
