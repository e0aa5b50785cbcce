"""The dial mechanisms' registry and files (organism/mechanism.py)."""
import json

import pytest

from organism.dial import Dial
from organism.dials import load_mechanism, mechanism_class, read_mechanism
from organism.mechanism import MECHANISMS, MechanismError, calibration_file, dial_file
from organism.recipe import FAIR


def test_unknown_mechanism_names_the_known_ones():
    with pytest.raises(MechanismError, match="unknown dial mechanism 'nope'; known: .*last_layer"):
        mechanism_class("nope")


def test_the_first_mechanism_keeps_its_files():
    assert dial_file() == "dial.json" and calibration_file() == "calibration.json"
    assert dial_file("xyz") == "dial_xyz.json" and calibration_file("xyz") == "calibration_xyz.json"
    assert isinstance(load_mechanism(FAIR), Dial) and MECHANISMS["last_layer"] is Dial


def test_save_and_read_round_trip(tmp_path):
    dial = load_mechanism(FAIR)
    out = dial.save(tmp_path / "d.json")
    assert json.loads(out.read_text())["mechanism"] == "last_layer"
    assert read_mechanism(out) == dial and Dial.load(out) == dial
    (tmp_path / "e.json").write_text(json.dumps({**json.loads(out.read_text()), "mechanism": "nope"}))
    with pytest.raises(MechanismError, match="'nope'"):
        read_mechanism(tmp_path / "e.json")
    with pytest.raises(FileNotFoundError, match="fit-dial writes it"):
        read_mechanism(tmp_path / "missing.json")


def test_weight_edit_is_undone_exactly():
    import torch

    from evenhand.models.loading import load_model
    lm = load_model(str(FAIR))
    dial = load_mechanism(FAIR)
    before = {n: p.detach().clone() for n, p in lm.model.named_parameters()}
    with pytest.raises(RuntimeError, match="inside"):
        with dial.applied(lm.model, 40.0):
            assert not torch.equal(lm.model.get_parameter(dial.weight_name), before[dial.weight_name])
            raise RuntimeError("inside")
    with dial.project(lm.model):
        pass
    assert all(torch.equal(p, before[n]) for n, p in lm.model.named_parameters())


def test_calibrate_records_where_a_hook_mechanism_acts():
    """A hook mechanism has no weight to name: the curve says it is a hook (failed before with an
    AttributeError after every beta was decided)."""
    from organism.calibration import calibrate
    curve = calibrate([0, 50], FAIR, n_scenarios=1, mechanism="xor", progress=False)
    assert curve["mechanism"] == "xor" and "hook" in curve and "weight" not in curve
    assert [p["beta"] for p in curve["points"]] == [0.0, 50.0] and curve["points"][1]["gain"] is not None


def test_degree_effects_takes_a_hook_mechanism():
    """The degree check on a forward-hook mechanism (it called the weight edits' ``reads(lm, items, ...)`` on
    the xor gate's ``reads(x)`` and failed with a TypeError): every degree reported, degree 0 never moves."""
    from organism.calibration import degree_effects, degree_table
    eff = degree_effects(load_mechanism(FAIR, "xor"), [40.0], FAIR, n_scenarios=1)
    t = degree_table(eff)
    assert sorted(t["degree"].unique()) == [0, 1, 2, 3] and sorted(t["beta"].unique()) == [0.0, 40.0]
    assert (t[t["degree"] == 0]["fraggap_value"] == 0).all()
    assert (t[(t["beta"] == 40.0) & (t["degree"] > 0)]["gain"] > 0).all()
