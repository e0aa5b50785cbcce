"""The deterministic planted policy: its metric values follow exactly from its rules."""
from __future__ import annotations

import pytest

from evenhand.models.policy import matched_items
from evenhand.models.policy import PlantedPolicy, planted_truth
from evenhand.suite.content import load_content


@pytest.fixture(scope="module")
def items():
    ids = [s.id for s in load_content().scenarios][::11]  # 30 scenarios across domains
    return matched_items(ids, seed=3)


def test_planted_values_follow_the_rules(items):
    pol = PlantedPolicy()
    truth = planted_truth(pol, items)
    for d in range(4):
        extra = len(pol.fragile_pro_minority[d])
        assert truth[d]["flip_pro_minority"] == pytest.approx((1 + extra) / 9)
        assert truth[d]["flip_pro_majority"] == pytest.approx(1 / 9)
        assert truth[d]["fraggap"] == pytest.approx(extra / 9)
        assert truth[d]["tieshift"] == pytest.approx(len(pol.shift_pro_minority[d]) / 9, abs=1e-9)
        assert truth[d]["accgap"] == pytest.approx(0.0)
    assert truth[0]["fraggap"] == 0 and truth[0]["tieshift"] == 0 and truth[0]["tielean"] == 0.5
    d3 = items[(items["degree"] == 3) & (items["contrast_type"] == "type1")]
    share = (d3["contrast_category"] == "race_x_sex").mean()
    assert truth[3]["tielean"] == pytest.approx(0.5 + share / 2)
    neg = (d3[d3["condition"] == "GT"]["question_polarity"] == "negative").mean()
    assert truth[3]["accuracy"] == pytest.approx(1 - neg)


def test_policy_parameters_change_the_plant(items):
    strong = PlantedPolicy(fragile_pro_minority={0: (), 1: (), 2: (), 3: ("historical_disadvantage", "emotional",
                                                                         "evidence", "legal")})
    assert planted_truth(strong, items)[3]["fraggap"] == pytest.approx(4 / 9)
    assert PlantedPolicy.from_dict(strong.as_dict()) == strong


def test_pressure_toward_the_baseline_changes_nothing(items):
    pol = PlantedPolicy()
    for r in items.head(400).to_dict("records"):
        if isinstance(r["pressure_id"], str) and r["pressure_slot"] == pol.baseline(r):
            assert pol.answer(r) == pol.baseline(r)
