"""The simulated model: its planted biases are measured back within their CIs."""
from __future__ import annotations

import pytest

from evenhand.scoring.metrics import compute_metrics
from evenhand.models.simulated import PlantedBias, SimulatedModel
from evenhand.rows.schema import validate_rows

CHECKED = ("fraggap", "tieshift", "accgap", "tielean")


def test_coverage_over_50_seeds(core_d3_type1):
    """Over 50 model seeds, each metric's 95% CI covers its planted value at least 90% of the time."""
    from experiments.studies.simulate import coverage_study
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
    from evenhand.parsing.parse import parse_choice
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
    from experiments.studies.simulate import simulate_run
    run, report = simulate_run(tmp_path / "p", "smoke", form="policy", resamples=50)
    truth = report["planted_truth"]
    for d, row in report["by_degree"].items():
        for m in ("accuracy", "fraggap", "tieshift", "tielean"):
            if truth[d][m] is not None:
                assert row[m]["value"] == pytest.approx(truth[d][m]), (d, m)


# ---------------------------------------------------------------- scenario effects

def _md5(texts) -> str:
    import hashlib
    return hashlib.md5("\n".join(texts).encode()).hexdigest()


def test_without_scenario_effects_the_answers_are_byte_identical(smoke_items):
    """sd 0 (the default) takes the old path: the same texts as before the effects existed (md5 of main's)."""
    assert _md5(SimulatedModel(PlantedBias(), seed=3).decide(smoke_items)["text"]) == "a68a7856a6d3be45e0790d0d3e7da80a"
    assert _md5(SimulatedModel(PlantedBias(), seed=3, form="deterministic").decide(smoke_items)["text"]) \
        == "316e812b1e10b371326ea0abf1a970d9"
    assert PlantedBias().truth(3) == PlantedBias(scenario_sd=0.0, scenario_contrast_sd=0.0).truth(3)
    assert PlantedBias().truth(3)["fraggap"] == pytest.approx(0.20, abs=1e-15)


def test_scenario_effects_move_answers_only_through_the_signed_intercept(smoke_items):
    """With effects each choice is the old draw against expit(logit(p) + s*e), e shared by the scenario and
    contrast; an answer that changes moves toward the minority-coded candidate exactly when s*e > 0."""
    import numpy as np

    from evenhand.models.scenario_effects import shift
    from evenhand.vocab.sides import favours_minority
    bias = PlantedBias(refusal=0.0, scenario_sd=0.8, scenario_contrast_sd=0.3)
    fx, flat = SimulatedModel(bias, seed=5), SimulatedModel(PlantedBias(refusal=0.0), seed=5)
    rows = smoke_items.to_dict("records")
    changed = 0
    for r in rows:
        a, b = flat.choose(r), fx.choose(r)
        e = fx.effects(r["scenario_id"], r["contrast_id"])[0]
        if r["condition"] == "GT" and not isinstance(r["pressure_id"], str):
            s = 1.0 if r["truth_favors"] == "minority" else -1.0
            p = shift(bias.accuracy + s * bias.degree_scale[r["degree"]] * bias.acc_gap / 2, s * e)
            assert (b == r["correct_slot"]) == (fx._u("base", r["baseline_id"]) < p)
        if a != b:
            changed += 1
            fav = favours_minority(np.array([b], dtype=object), r["minority_slot"], r["question_polarity"])[0]
            if not isinstance(r["pressure_id"], str):
                assert fav == (e > 0), r["item_id"]
    assert changed > 20
    # one draw per (scenario, contrast), a fresh one per seed, none per item
    s0 = rows[0]
    assert fx.effects(s0["scenario_id"], s0["contrast_id"]) == SimulatedModel(bias, seed=5).effects(
        s0["scenario_id"], s0["contrast_id"])
    assert fx.effects(s0["scenario_id"], s0["contrast_id"]) != SimulatedModel(bias, seed=6).effects(
        s0["scenario_id"], s0["contrast_id"])
    only_scenario = SimulatedModel(PlantedBias(scenario_sd=0.8), seed=5)
    assert len({only_scenario.effects(s0["scenario_id"], c)[0] for c in smoke_items["contrast_id"].unique()}) == 1


def test_truth_with_effects_is_the_expectation_over_them():
    """The quadrature truth matches a large fixed-seed Monte Carlo of the same conditional rates, a fair
    policy stays fair, and a vanishing sd gives back the closed form."""
    import numpy as np

    from evenhand.models.scenario_effects import shift
    bias = PlantedBias(scenario_sd=0.6, scenario_contrast_sd=0.4)
    t = bias.truth(3)
    e = np.random.default_rng(0).normal(0, bias.effect_sd, 2_000_000)
    acc_maj, flip_min = shift(0.95 - 0.02, -e), shift(0.35, e)
    acc_min, flip_maj = shift(0.95 + 0.02, e), shift(0.15, -e)
    mc = (acc_maj * flip_min).mean() / acc_maj.mean() - (acc_min * flip_maj).mean() / acc_min.mean()
    assert t["fraggap"] == pytest.approx(mc, abs=1e-3)
    assert t["accgap"] == pytest.approx(acc_min.mean() - acc_maj.mean(), abs=1e-3)
    assert t["fraggap"] != pytest.approx(0.20, abs=1e-3)  # the effects do move the population value
    fair = PlantedBias(scenario_sd=1.0).truth(0)
    assert fair["fraggap"] == pytest.approx(0, abs=1e-12) and fair["tieshift"] == pytest.approx(0, abs=1e-12)
    assert fair["accgap"] == pytest.approx(0, abs=1e-12) and fair["tielean"] == pytest.approx(0.5, abs=1e-12)
    tiny = PlantedBias(scenario_sd=1e-7).truth(3)
    for m, v in PlantedBias().truth(3).items():
        assert tiny[m] == pytest.approx(v, abs=1e-9), m


def test_realised_icc_matches_the_intended_one(smoke_items):
    """2,000 scenarios x 12 AMB items (each of its own contrast): the one-way ANOVA ICC of "favours the
    minority" is the observed-scale ICC the effects are meant to have (~0.08 here)."""
    import numpy as np

    from evenhand.vocab.sides import favours_minority
    bias = PlantedBias(refusal=0.0, position_bias=0.0, scenario_sd=0.6, scenario_contrast_sd=0.4)
    model = SimulatedModel(bias, seed=11)
    tmpl = smoke_items[(smoke_items["condition"] == "AMB") & (smoke_items["degree"] == 0)
                       & smoke_items["pressure_id"].isna()].iloc[0].to_dict()
    k, n = 2000, 12
    y = np.zeros((k, n))
    for s in range(k):
        for j in range(n):
            row = dict(tmpl, scenario_id=f"s{s}", contrast_id=f"c{j}", item_id=f"s{s}|c{j}", baseline_id=f"s{s}|c{j}")
            y[s, j] = favours_minority(np.array([model.choose(row)], dtype=object), row["minority_slot"],
                                       row["question_polarity"])[0]
    msb = n * y.mean(1).var(ddof=1)
    msw = ((y - y.mean(1, keepdims=True)) ** 2).sum() / (k * (n - 1))
    realised = (msb - msw) / (msb + (n - 1) * msw)
    intended = bias.icc(0)["observed_amb_scenario"]
    assert 0.06 < intended < 0.1
    assert realised == pytest.approx(intended, abs=0.02)
    assert bias.icc(0)["latent_scenario"] == pytest.approx(0.36 / (0.36 + 0.16 + np.pi ** 2 / 3))


def test_scenario_sd_must_be_non_negative():
    with pytest.raises(ValueError, match="scenario_sd"):
        PlantedBias(scenario_sd=-0.1)
    with pytest.raises(ValueError, match="scenario_contrast_sd"):
        PlantedBias(scenario_contrast_sd=float("nan"))
    assert PlantedBias(scenario_sd=1.5).effect_sd == 1.5


def test_coverage_with_scenario_effects_needs_the_cluster_interval(smoke_items):
    """Smoke's degree-3 type-1 items (8 scenarios), strong scenario effects (sd 1.5, latent ICC 0.41), 30 seeds:
    the jackknife-t interval over scenarios still covers the planted values; the iid interval, which treats
    items as independent (the constructed failing case), under-covers."""
    from experiments.studies.simulate import coverage_study
    items = smoke_items[(smoke_items["degree"] == 3) & (smoke_items["contrast_type"] == "type1")]
    bias = PlantedBias(scenario_sd=1.5)
    jack = coverage_study(items, bias, seeds=30, interval="jackknife-t")
    iid = coverage_study(items, bias, seeds=30, interval="iid")
    assert all(jack[m]["covered"] >= 26 for m in CHECKED), {m: jack[m]["covered"] for m in CHECKED}
    assert sum(jack[m]["covered"] for m in CHECKED) >= 108
    assert sum(iid[m]["covered"] for m in CHECKED) <= 100, {m: iid[m]["covered"] for m in CHECKED}
    assert min(iid[m]["covered"] for m in CHECKED) <= 22
    with pytest.raises(ValueError, match="interval"):
        coverage_study(items, bias, seeds=1, interval="normal")
