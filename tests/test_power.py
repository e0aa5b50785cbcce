"""Power of a paired comparison (evenhand.scoring.power) and the `evenhand power` command: the MDE against a closed
form, a pilot too small for its target, and the recommended size reaching its power in simulation."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from evenhand.scoring.power import (BASELINE_ONLY_ASSUMPTION, SINGLE_CONTRAST_ASSUMPTION, VarianceParts, design_se,
                                    mde, paired_se, power_of, scenarios_needed, t_sum, variance_parts, z_sum)


@pytest.fixture(scope="module")
def template():
    """The degree-3 matched items of one organism train scenario with two contrasts (304 rows)."""
    from organism import ORGANISM_SUITE, split_scenarios
    from evenhand.models.policy import matched_items
    train, _ = split_scenarios(0, 0.2)
    items = matched_items(train[:1], 0, contrasts_per_degree=2, suite=ORGANISM_SUITE)
    return items[items["degree"] == 3].reset_index(drop=True)


def fabricate(template: pd.DataFrame, p_correct, n_scenarios: int, seed: int, k: int = 1) -> pd.DataFrame:
    """A responses table of ``n_scenarios`` copies of the template scenario (``k`` of its contrasts), every
    row answered correctly (GT) or for the minority slot (AMB) with probability ``p_correct(s)``."""
    from organism import ORGANISM_SUITE
    from evenhand.suite.content import load_content
    ids = [x.id for x in load_content(ORGANISM_SUITE).scenarios]  # the schema wants real scenario ids
    rng = np.random.default_rng(seed)
    tmpl = template[template["contrast_id"].isin(sorted(template["contrast_id"].unique())[:k])]
    other = {"A": "B", "B": "A"}
    parts = []
    for s in range(n_scenarios):
        t = tmpl.copy()
        t["scenario_id"] = ids[s]
        t["item_id"] = f"s{s}:" + t["item_id"].astype(str)
        t["baseline_id"] = t["baseline_id"].map(lambda b, s=s: None if b is None or b != b else f"s{s}:{b}")
        good = np.where(t["condition"] == "GT", t["correct_slot"], t["minority_slot"])
        hit = rng.random(len(t)) < p_correct(s)
        t["choice"] = [g if h else other[g] for g, h in zip(good, hit)]
        parts.append(t)
    return pd.concat(parts, ignore_index=True)


def test_mde_is_the_closed_form():
    assert z_sum() == pytest.approx(1.959964 + 0.841621, abs=1e-5)
    assert mde(0.01) == pytest.approx(0.028016, abs=1e-5)
    assert power_of(mde(0.02), 0.02) == pytest.approx(0.8, abs=1e-3)  # the MDE is detected with 80% power
    assert power_of(0.0, 0.02) == pytest.approx(0.05, abs=1e-6)
    parts = VarianceParts(between=0.04, within=0.08, n_scenarios=20, contrasts=2)
    assert design_se(parts, 20, 2) == pytest.approx(math.sqrt(0.04 / 20 + 0.08 / 40))
    n = scenarios_needed(0.05, parts, 2)  # t on n - 1 degrees of freedom
    assert design_se(parts, n, 2) * t_sum(n - 1) <= 0.05 < design_se(parts, n - 1, 2) * t_sum(n - 2)
    assert power_of(mde(0.02, df=9), 0.02, df=9) == pytest.approx(0.8, abs=1e-3)
    assert t_sum(None) == z_sum() and t_sum(9) == pytest.approx(2.262157 + 0.883404, abs=1e-5)


def test_mde_uses_t_on_k_minus_1_and_is_wider_than_z_at_few_scenarios(template):
    """Eight scenarios: the paired MDE is (t_7 + t_7) x SE (3.26 x SE), not the normal 2.80 x SE, and its SE is the
    delete-one-scenario jackknife SE of the difference that the comparison's interval uses."""
    from evenhand.scoring.paired import score_arms
    base = fabricate(template, lambda s: 0.6 + 0.04 * (s % 3), 8, seed=11)
    other = fabricate(template, lambda s: 0.55 + 0.04 * (s % 3), 8, seed=12)
    p = paired_se(base, other, ["accuracy"])["accuracy"]
    assert p.df == 7 and p.mde == pytest.approx(t_sum(7) * p.se) and p.mde > 1.15 * z_sum() * p.se
    t = score_arms({"base": base, "other": other}, "base")
    loss = t[(t["arm"] == "other") & (t["stat"] == "accuracy_loss")].iloc[0]
    from scipy.stats import t as student_t
    half = (loss["ci_high"] - loss["ci_low"]) / 2
    assert half == pytest.approx(student_t.ppf(0.975, 7) * p.se, rel=1e-9)  # the same SE as the interval


def test_bootstrap_se_matches_the_binomial_closed_form(template):
    """Accuracy on independent items: SE = sqrt(p q / N_gt); paired: sqrt(p1 q1 / N + p2 q2 / N)."""
    base = fabricate(template, lambda s: 0.8, 60, seed=1)
    other = fabricate(template, lambda s: 0.6, 60, seed=2)
    n_gt = int(((base["condition"] == "GT") & base["pressure_id"].isna()).sum())
    alone = paired_se(base, None, ["accuracy"], resamples=2000, seed=0)["accuracy"]
    want = math.sqrt(2) * math.sqrt(0.8 * 0.2 / n_gt)
    assert alone.se == pytest.approx(want, rel=0.15) and alone.assumption == BASELINE_ONLY_ASSUMPTION
    assert alone.mde == pytest.approx(t_sum(59) * alone.se) and alone.df == 59
    both = paired_se(base, other, ["accuracy"], resamples=2000, seed=0)["accuracy"]
    assert both.se == pytest.approx(math.sqrt((0.8 * 0.2 + 0.6 * 0.4) / n_gt), rel=0.15) and both.assumption is None
    assert both.n_scenarios == 60


def test_a_pilot_too_small_reports_an_mde_above_the_target(template):
    """Three scenarios of a coin-flipping model: the FragGap MDE is far above 5 pp, and the needed size is
    larger than the pilot."""
    pilot = fabricate(template, lambda s: 0.5, 3, seed=3)
    res = paired_se(pilot, None, ["fraggap"], resamples=500, seed=0)["fraggap"]
    assert res.mde > 0.05
    parts = variance_parts(pilot, None, ["fraggap"], resamples=500, seed=0)["fraggap"]
    assert scenarios_needed(0.05, parts, 1) > 3
    assert SINGLE_CONTRAST_ASSUMPTION in parts.assumption


def test_variance_parts_reproduce_the_pilot_se_and_see_contrasts(template):
    """Two contrasts per scenario: the split gives back the pilot's own SE, and with item noise only (no
    scenario effect) a second contrast shrinks the SE like a second scenario does."""
    pilot = fabricate(template, lambda s: 0.7, 40, seed=4, k=2)
    parts = variance_parts(pilot, None, ["accuracy"], resamples=2000, seed=0)["accuracy"]
    direct = paired_se(pilot, None, ["accuracy"], resamples=2000, seed=0)["accuracy"].se
    assert parts.contrasts == 2 and parts.pilot_se == pytest.approx(direct, rel=1e-6)
    assert parts.within > parts.between
    assert SINGLE_CONTRAST_ASSUMPTION not in (parts.assumption or "")


def test_recommended_size_reaches_80_percent_power_in_simulation(template):
    """A pilot of 30 scenarios (baseline at p = 0.75 with a scenario effect, a method 0.1 lower) gives a
    recommended number of scenarios; 300 simulated comparisons of that size detect the 0.1 drop (two-sided
    z test on the scenario-paired differences) about 80% of the time."""
    rng = np.random.default_rng(5)
    effect, tau = 0.1, 0.05
    u = rng.normal(0, tau, 30)
    base = fabricate(template, lambda s: 0.75 + u[s], 30, seed=6)
    other = fabricate(template, lambda s: 0.75 + u[s] - effect, 30, seed=7)
    parts = variance_parts(base, other, ["accuracy"], resamples=2000, seed=0)["accuracy"]
    n = scenarios_needed(effect, parts, 1)
    assert 10 < n < 400
    m = int(((template["condition"] == "GT") & template["pressure_id"].isna()
             & (template["contrast_id"] == sorted(template["contrast_id"].unique())[0])).sum())
    hits = 0
    for _ in range(300):
        us = rng.normal(0, tau, n)
        a = rng.binomial(m, np.clip(0.75 + us, 0, 1)) / m
        b = rng.binomial(m, np.clip(0.75 + us - effect, 0, 1)) / m
        d = a - b
        hits += abs(d.mean()) / (d.std(ddof=1) / math.sqrt(n)) > 1.959964
    assert 0.68 <= hits / 300 <= 0.92


def test_power_command_reads_a_pilot_and_names_its_assumptions(template, tmp_path, capsys):
    from experiments.cli import main
    pilot = fabricate(template, lambda s: 0.6, 8, seed=8)
    path = tmp_path / "responses.parquet"
    pilot.to_parquet(path)
    assert main(["power", str(tmp_path), "--target", "0.05", "--metric", "fraggap", "--pool", "70"]) == 0
    out = capsys.readouterr().out
    assert "pilot: 8 scenarios x 1 contrast per scenario" in out and "fraggap" in out and "MDE" in out
    assert "assumption: baseline only" in out and "pool: 70" in out
    assert main(["power", str(tmp_path / "nothing")]) == 2
    assert main(["power", str(tmp_path), "--target", "0"]) == 2
    assert "--target must be positive" in capsys.readouterr().err
