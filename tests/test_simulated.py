"""The simulated model: its planted biases are measured back within their CIs."""
from __future__ import annotations

import pytest

from evenhand.metrics import compute_metrics
from evenhand.models.simulated import PlantedBias, SimulatedModel
from evenhand.schema import validate_rows

CHECKED = ("fraggap", "tieshift", "accgap", "tielean")


def test_coverage_over_50_seeds(core_d3_type1):
    """Over 50 model seeds, each metric's 95% CI covers its planted value at least 90% of the time."""
    from evenhand.simulate import coverage_study
    res = coverage_study(core_d3_type1, PlantedBias(), seeds=50, resamples=400)
    for m in CHECKED:
        assert res[m]["covered"] >= 45, f"{m}: CI covered the planted value in {res[m]['covered']}/50 runs"
        assert abs(res[m]["mean_estimate"] - res[m]["planted"]) < 0.02, m


def test_degree_zero_is_fair(smoke_items):
    bias = PlantedBias()
    t0 = bias.truth(0)
    assert t0["fraggap"] == 0 and t0["tieshift"] == 0 and t0["accgap"] == 0 and t0["tielean"] == 0.5


def test_deterministic_form_ignores_seed(smoke_items):
    a = SimulatedModel(PlantedBias(), seed=1, form="deterministic").decide(smoke_items)
    b = SimulatedModel(PlantedBias(), seed=2, form="deterministic").decide(smoke_items)
    assert a["text"].tolist() == b["text"].tolist()
    c = SimulatedModel(PlantedBias(), seed=1).decide(smoke_items)
    d = SimulatedModel(PlantedBias(), seed=2).decide(smoke_items)
    assert c["text"].tolist() != d["text"].tolist()


def test_pressure_toward_the_baseline_answer_never_changes_it(smoke_items):
    model = SimulatedModel(PlantedBias(refusal=0.0), seed=3)
    rows = smoke_items.to_dict("records")
    base = {r["item_id"]: model.choose(r) for r in rows if not isinstance(r["pressure_id"], str)}
    for r in rows:
        if isinstance(r["pressure_id"], str) and base[r["baseline_id"]] == r["pressure_slot"]:
            assert model.choose(r) == r["pressure_slot"]


def test_text_answers_parse_back_to_choices(smoke_items):
    from evenhand.parse import parse_choice
    model = SimulatedModel(PlantedBias(), seed=4)
    for r in smoke_items.to_dict("records"):
        assert parse_choice(model.respond(r), r["candidate_noun"]) == model.choose(r)


def test_bad_parameters_are_rejected():
    with pytest.raises(ValueError, match="flip_pro_minority"):
        PlantedBias(flip_pro_minority=1.5)
    with pytest.raises(ValueError, match="form"):
        SimulatedModel(form="random")


def test_zero_bias_measures_zero(core_d3_type1):
    flat = PlantedBias(acc_gap=0, tie_lean=0.5, flip_pro_minority=0.15, flip_pro_majority=0.15,
                       shift_to_minority=0.3, shift_to_majority=0.3)
    est = compute_metrics(validate_rows(SimulatedModel(flat, seed=0).decide(core_d3_type1)), resamples=300,
                          metrics=CHECKED)
    for m in CHECKED:
        target = 0.5 if m == "tielean" else 0.0
        assert est[m].ci_low <= target <= est[m].ci_high, m


def test_policy_form_through_the_pipeline(tmp_path):
    from evenhand.simulate import simulate_run
    run, report = simulate_run(tmp_path / "p", "smoke", form="policy", resamples=50)
    truth = report["planted_truth"]
    for d, row in report["by_degree"].items():
        for m in ("accuracy", "fraggap", "tieshift", "tielean"):
            if truth[d][m] is not None:
                assert row[m]["value"] == pytest.approx(truth[d][m]), (d, m)
