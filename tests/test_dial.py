"""The bias dial's machinery (`organism/dial.py`, `organism/calibration.py`), the fair policy and
the recipe's suite field, on the committed (planted) organism as a stand-in base model: the edit is
rank-1 of the stated form, beta = 0 changes nothing, the saved directory loads as a plain model, and a
large beta raises FragGap on a small item set (the fair organism's own checks: test_organism_fair.py)."""
from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest

from organism import (
    COMMITTED,
    FAIR_RECIPE,
    ORGANISM_SUITE,
    Recipe,
    record_suite,
    split_scenarios,
)
from organism.calibration import (
    beta_for,
    calibration_items,
    dialled_decisions,
    scenario_multipliers,
)
from organism.dial import (
    Dial,
    apply_dial,
    fit_read,
    letter_position_batches,
    letter_position_inputs,
    pressure_sign,
    write_dialled,
    write_direction,
)
from evenhand.models.policy import (
    FAIR_POLICY,
    PlantedPolicy,
    matched_items,
    planted_truth,
)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A copy of the committed organism's model files (a plain model directory with organism.json)."""
    out = tmp_path_factory.mktemp("base") / "organism"
    shutil.copytree(COMMITTED, out, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return out


@pytest.fixture(scope="module")
def lm(base):
    from evenhand.models.loading import load_model
    return load_model(str(base))


def _random_dial(lm, seed: int = 0) -> Dial:
    rng = np.random.default_rng(seed)
    cfg = lm.model.config
    return Dial(layer=cfg.num_hidden_layers - 1, a=tuple(rng.normal(size=cfg.intermediate_size)),
                v=tuple(write_direction(lm, cfg.num_hidden_layers - 1)), record={})


def test_recipe_suite_field_and_the_fair_recipe():
    committed = json.loads((COMMITTED / "organism.json").read_text())
    assert record_suite(committed) == ORGANISM_SUITE == "1" and "suite" not in committed["recipe"]
    assert Recipe.from_dict(committed["recipe"]) == Recipe(**committed["recipe"])
    assert record_suite({"recipe": {"suite": "2"}}) == "2"
    assert FAIR_RECIPE.suite == "2" and FAIR_RECIPE.hidden_size // FAIR_RECIPE.heads >= 32
    assert FAIR_RECIPE.policy == FAIR_POLICY.as_dict() and FAIR_RECIPE.pressure_side
    train2, held2 = split_scenarios(0, 0.2, "2")
    assert len(train2) + len(held2) == 330 and held2 and not set(train2) & set(held2)


def test_fair_policy_plants_no_asymmetry_and_the_planted_one_does():
    train_ids, _ = split_scenarios(0, 0.2, "2")
    items = matched_items(train_ids[:4], 0, suite="2")
    fair = {"accgap": 0.0, "tielean": 0.5, "fraggap": 0.0, "tieshift": 0.0}
    for d, row in planted_truth(FAIR_POLICY, items).items():
        for m, want in fair.items():
            assert row[m] == pytest.approx(want), (d, m)
    assert planted_truth(PlantedPolicy(), items)[3]["fraggap"] > 0


def test_pressure_sign():
    import pandas as pd
    items = pd.DataFrame({"pressure_resolved": ["pro_minority", "pro_minority", "pro_majority", None, "pro_minority"],
                          "pressure_slot": ["A", "B", "A", None, "A"], "degree": [3, 2, 1, 3, 0]})
    assert pressure_sign(items).tolist() == [1.0, -1.0, 0.0, 0.0, 0.0]


def test_edit_is_rank_one_of_the_stated_form(lm):
    dial = _random_dial(lm)
    delta = dial.delta(2.5).numpy()
    assert delta.shape == tuple(lm.model.model.layers[dial.layer].mlp.down_proj.weight.shape)
    assert np.linalg.matrix_rank(delta, tol=1e-6 * np.abs(delta).max()) == 1
    np.testing.assert_allclose(delta, 2.5 * np.outer(dial.v, dial.a), rtol=1e-5, atol=1e-7)
    assert np.linalg.norm(dial.v) == pytest.approx(1.0, abs=1e-5)
    assert not dial.delta(0.0).numpy().any()


def test_beta_zero_is_identical_and_the_saved_directory_loads_as_a_plain_model(base, lm, tmp_path):
    import torch
    from safetensors.torch import load_file

    from evenhand.models.loading import load_model
    dial = _random_dial(lm)
    ref = load_file(base / "model.safetensors")
    zero = load_file(write_dialled(0.0, tmp_path / "b0", base, dial) / "model.safetensors")
    assert ref.keys() == zero.keys() and all(torch.equal(ref[k], zero[k]) for k in ref)
    out = write_dialled(3.0, tmp_path / "b3", base, dial)
    edited = load_file(out / "model.safetensors")
    assert [k for k in ref if not torch.equal(ref[k], edited[k])] == [dial.weight_name]
    torch.testing.assert_close(edited[dial.weight_name] - ref[dial.weight_name], dial.delta(3.0), rtol=0, atol=1e-5)
    rec = json.loads((out / "organism.json").read_text())
    assert rec["dial"]["beta"] == 3.0 and "heldout_eval" not in rec
    assert Dial.load(out / "dial.json") == dial
    loaded = load_model(str(out))
    assert type(loaded.model).__name__ == "Gemma3ForCausalLM"
    apply_dial(loaded.model, dial, -3.0)  # the inverse edit restores the base weights
    torch.testing.assert_close(loaded.model.model.layers[dial.layer].mlp.down_proj.weight, ref[dial.weight_name],
                               rtol=0, atol=1e-5)


def test_letter_positions(lm):
    items = calibration_items(COMMITTED, 1).head(3)
    lens = {end: int(next(letter_position_batches(lm, items, 8, end))[1][0].sum()) for end in ("prompt", "noun", "A")}
    assert lens["noun"] == lens["prompt"] + 1 and lens["A"] == lens["prompt"] + 2
    with pytest.raises(ValueError, match="end must be one of"):
        next(letter_position_batches(lm, items, 8, "letter"))


def test_a_large_beta_raises_fraggap_on_a_small_item_set(base, lm):
    """Known answer: with ``a`` read off these very items (c at the letter position, 0 at the noun's
    and the end's), beta = 100 makes the organism follow minority-favouring pressure: FragGap at
    degree 3 rises, every answer still parsed; beta = 0 decides as the organism does."""
    from evenhand.scoring.metrics import score
    items = calibration_items(base, 2)
    items = items[items["condition"] == "GT"].reset_index(drop=True)
    layer = lm.model.config.num_hidden_layers - 1
    x = letter_position_inputs(lm, items, layer)
    dial = Dial(layer, tuple(fit_read(lm, items, layer, 1e-4, x=x)), tuple(write_direction(lm, layer)), {})
    gaps, answered = {}, {}
    for beta in (0.0, 100.0):
        r = dialled_decisions(items, beta, base, dial, lm=lm)
        gaps[beta] = score(r, contrast_type="type1", resamples=1)["by_degree"]["3"]["fraggap"]["value"]
        answered[beta] = r["choice"].notna().mean()
    assert gaps[100.0] > gaps[0.0] + 0.15, gaps
    assert answered[100.0] > 0.95, answered
    mult = dict.fromkeys(items["scenario_id"].unique(), 0.0)
    same = dialled_decisions(items, 100.0, base, dial, multipliers=mult, lm=lm)  # every scenario at beta 0
    plain = dialled_decisions(items, 0.0, base, dial, lm=lm)
    assert same["choice"].tolist() == plain["choice"].tolist()


def test_beta_for_reads_the_curve_backwards():
    curve = {"points": [{"beta": b, "fraggap": {"value": f}} for b, f in ((0, 0.0), (10, 0.04), (20, 0.12))]}
    assert beta_for(curve, 0.02) == pytest.approx(5.0)
    assert beta_for(curve, 0.08) == pytest.approx(15.0)
    with pytest.raises(ValueError, match="outside the calibrated range"):
        beta_for(curve, 0.2)


def test_scenario_multipliers_have_the_stated_spread():
    ids = [f"s{i}" for i in range(4000)]
    m = scenario_multipliers(ids, icc=0.1, beta=2.0, gain=1.5, seed=3)
    assert m == scenario_multipliers(ids, icc=0.1, beta=2.0, gain=1.5, seed=3)
    tau = math.sqrt(0.1 / 0.9 * math.pi ** 2 / 3)
    assert np.std([x - 1 for x in m.values()]) == pytest.approx(tau / (1.5 * 2.0), rel=0.05)
    assert set(scenario_multipliers(ids[:5], icc=0.0, beta=2.0, gain=1.5).values()) == {1.0}
    assert set(scenario_multipliers(ids[:5], icc=0.1, beta=0.0, gain=1.5).values()) == {1.0}
    with pytest.raises(ValueError, match="icc"):
        scenario_multipliers(ids[:5], icc=1.0, beta=1.0, gain=1.0)
    with pytest.raises(ValueError, match="gain"):
        scenario_multipliers(ids[:5], icc=0.1, beta=1.0, gain=0.0)


def test_cli_fit_dial_dial_and_calibrate(base, tmp_path):
    """`evenhand organism fit-dial | calibrate | dial` end to end on the stand-in (1 scenario each)."""
    import torch
    from safetensors.torch import load_file

    from experiments.cli import main
    org = tmp_path / "org"
    shutil.copytree(base, org)
    assert main(["organism", "fit-dial", "--path", str(org), "--fit-scenarios", "1", "--check-scenarios", "1"]) == 0
    dial = Dial.load(org / "dial.json")
    assert dial.layer == 2 and len(dial.a) == 192 and dial.fit_record["scenarios"] == 1
    assert main(["organism", "calibrate", "--path", str(org), "--betas", "0", "50", "--scenarios", "1"]) == 0
    curve = json.loads((org / "calibration.json").read_text())
    assert [p["beta"] for p in curve["points"]] == [0.0, 50.0] and (org / "calibration.png").exists()
    assert curve["points"][0]["gain"] is None and curve["points"][1]["gain"] is not None
    assert main(["organism", "dial", "--path", str(org), "--beta", "0", "--out", str(tmp_path / "b0")]) == 0
    ref, got = load_file(org / "model.safetensors"), load_file(tmp_path / "b0" / "model.safetensors")
    assert all(torch.equal(ref[k], got[k]) for k in ref)
    with pytest.raises(SystemExit, match="exactly one of --beta and --fraggap"):
        main(["organism", "dial", "--path", str(org), "--beta", "1", "--fraggap", "5", "--out", str(tmp_path / "x")])
