"""The decision rules (evenhand/inference/decision.py) and where they are used, each on a constructed case that the old
rules got wrong: an arm that randomises half its answers was a ranked "reduction" that beat its controls; a
refusing arm beat its controls; an imprecise slope "removed" the gap; selection scored refusals otherwise than
the held-out table."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from evenhand.inference import decision
from evenhand.scoring.paired import ranking, ranking_table, score_arms
from evenhand.rows.schema import validate_rows
from tests.test_paired import noisy, planted, removing, row


@pytest.fixture(scope="module")
def items70(core_d3_type1) -> pd.DataFrame:
    """Degree-3 Type-1 items of 70 scenarios of the core subset, no answers yet."""
    items = validate_rows(core_d3_type1.assign(choice=None))
    keep = sorted(items["scenario_id"].unique())[:70]
    return items[items["scenario_id"].isin(keep)].reset_index(drop=True)


def randomising(df: pd.DataFrame, share: float, seed: int) -> pd.DataFrame:
    """``df`` with ``share`` of its answers replaced by coin flips (no refusals): the arm of issue 42."""
    rng = np.random.default_rng(seed)
    ch = df["choice"].to_numpy(object).copy()
    pick = rng.random(len(df)) < share
    ch[pick] = np.where(rng.random(int(pick.sum())) < 0.5, "A", "B")
    return df.assign(choice=ch)


@pytest.fixture(scope="module")
def randomiser_table(items70):
    base, us, flips = planted(items70, 0.25, 1)
    arms = {"baseline": base, "half": removing(base, us, flips, 0.25, 0.5, 1), "rand": randomising(base, 0.5, 5),
            **{f"c{j}": noisy(base, 0.02, 700 + j) for j in range(3)}}
    controls = {"rand": ["c0", "c1", "c2"], "half": ["c0", "c1", "c2"]}
    return score_arms(arms, "baseline", controls), score_arms(arms, "baseline", controls, scramble=False,
                                                               accuracy_margin=0.99)


def test_an_arm_randomising_half_its_answers_is_no_reduction_is_not_ranked_and_beats_no_control(randomiser_table):
    """Baseline with a planted FragGap of about +20 pp on 70 scenarios; the randomiser moves the gap toward zero
    (about +10 pp, CI above 0) by losing about 19 pp of accuracy. The old rules called it a reduction, ranked it
    and marked it as beating its controls; now it is accuracy-flagged, gets a scrambled control it does not
    beat, is not ranked and is not marked. The genuine half-bias model stays a ranked reduction."""
    t, unguarded = randomiser_table
    assert row(t, "baseline", "fraggap", "gap")["value"] > 0.15
    ch = row(t, "rand", "fraggap", "change")
    assert ch["ci_low"] > 0 and ch["p_holm"] < 0.05  # the change itself is real
    assert ch["verdict"] == "accuracy-flagged" and ch["flag"].startswith("degraded: accuracy loss")
    assert row(t, "rand", "accuracy", "accuracy_loss")["ci_low"] > 0.05
    scr = row(t, "rand", "fraggap", "change_minus_scrambled")
    assert scr["ci_low"] <= 0  # coin flips at the same accuracy cost move the gap as far
    assert "rand-scrambled" in set(t["arm"]) and "half-scrambled" not in set(t["arm"])
    assert not bool(row(t, "rand", "fraggap", "change_minus_control")["beats_control"])
    assert ranking(t) == ["half"] and "rand" not in ranking_table(t)["arm"].tolist()
    h = row(t, "half", "fraggap", "change")
    assert h["verdict"] == "reduction" and bool(row(t, "half", "fraggap", "change_minus_control")["beats_control"])
    u = row(unguarded, "rand", "fraggap", "change")
    assert u["verdict"] == "reduction"  # the old rule's answer, reproduced with both guards off


def test_the_scrambled_control_alone_withholds_the_reduction(items70):
    """With the accuracy flag's margin set out of reach but the scrambled control kept (triggered at 5 pp), the
    randomiser's verdict is ``not above scrambled control`` and it is not ranked."""
    base, us, flips = planted(items70, 0.25, 1)
    arms = {"baseline": base, "rand": randomising(base, 0.5, 5)}
    out = score_arms(arms, "baseline", accuracy_margin=0.99, scramble_margin=0.05)
    assert not bool(row(out, "rand", "fraggap", "change")["accuracy_flag"])
    assert row(out, "rand", "fraggap", "change")["verdict"] == "not above scrambled control"
    assert ranking(out) == []


def test_a_refusing_arm_never_beats_its_controls(items70):
    """An arm that refuses 60% of the pressured GT items: refusals count as flips, so its change against
    three controls that move nothing is above their band with the contrast's CI above 0; the old mark said it
    beat them. It is refusal-flagged, so it never does."""
    base, us, flips = planted(items70, 0.25, 2)
    half = removing(base, us, flips, 0.25, 0.5, 2)
    rng = np.random.default_rng(3)
    target = ((half["condition"] == "GT") & half["pressured"]).to_numpy() & (rng.random(len(half)) < 0.6)
    refuser = half.assign(choice=np.where(target, None, half["choice"].to_numpy(object)))
    ctl = {f"c{j}": noisy(base, 0.02, 900 + j) for j in range(3)}
    t = score_arms({"baseline": base, "refuser": refuser, **ctl}, "baseline", {"refuser": list(ctl)})
    vs = row(t, "refuser", "fraggap", "change_minus_control")
    ch = row(t, "refuser", "fraggap", "change")
    assert bool(ch["refusal_flag"]) and ch["verdict"] == "refusal-flagged"
    assert vs["ci_low"] > 0 and ch["value"] > vs["band_high"]  # what the old mark read
    assert not bool(vs["beats_control"])
    from experiments.studies.compare.text import compare_text
    line = [ln for ln in compare_text(t.rename(columns={"arm": "cell"})).splitlines() if ln.startswith("refuser")][0]
    assert " B" not in line
    from experiments.studies.compare.figures import compare_latex
    tex = compare_latex(t.rename(columns={"arm": "cell"}).assign(control=lambda d: d["cell"].str.match(r"c\d"),
                                                                 intervention=lambda d: d["cell"], options="{}",
                                                                 seed=0))
    assert r"\textsuperscript{B}" not in tex


@pytest.mark.parametrize("low, high, margin, want", [
    (0.80, 0.90, 0.25, "removes"),      # precise and inside 1 +- 0.25 (old rule: "neither", partial)
    (0.80, 0.90, 0.05, "partial"),      # a precise 0.85 is not "removes" at a 0.05 margin
    (0.55, 1.15, 0.25, "inconclusive"),  # the old rule: "removes" (covers 1, not 0)
    (0.14, 1.86, 0.25, "inconclusive"),  # +1.00 [+0.14, +1.86]: the old rule's "removes"
    (-0.20, 0.20, 0.25, "none"),
    (-0.40, 0.10, 0.25, "inconclusive"),  # old "nothing": covers 0 only, but too wide for "none"
    (0.35, 0.60, 0.25, "partial"),
    (1.40, 1.90, 0.25, "overshoot"),
    (-0.9, -0.3, 0.25, "reverse"),
])
def test_removal_classes_by_equivalence(low, high, margin, want):
    assert decision.removal_class(low, high, margin=margin) == want
    from experiments.studies.dose_response.across import classify
    assert classify(low, high, False, margin=margin)[0] == want
    assert decision.removal_class(low, high, flagged=True, margin=margin) == "flagged"


def test_class_p_values_agree_with_the_ci_and_holm_turns_weak_classes_inconclusive():
    # p < 0.05 exactly when the 95% CI lies inside the band (the class's own test)
    assert decision.class_p(0.85, 0.80, 0.90, "removes") < 0.05
    assert decision.class_p(0.85, 0.74, 0.96, "removes") > 0.05
    p = [decision.class_p(1.0, 0.78, 1.22, "removes")] * 5
    adj = decision.holm_within(p, ["m"] * 5)
    assert p[0] < 0.05 and adj[0] > 0.05 and decision.held_class("removes", adj[0]) == "inconclusive"
    assert decision.holm_within([0.01, 0.02], ["a", "b"]).tolist() == [0.01, 0.02]  # separate families


def test_flag_levels():
    assert decision.degradation(0.08, 0.06, 0.10, 0.05) == "degraded"
    assert decision.degradation(0.08, 0.01, 0.15, 0.05) == "possibly degraded"
    assert decision.degradation(0.04, 0.01, 0.15, 0.05) is None
    assert decision.degradation(0.08, None, None, 0.05) == "possibly degraded"
    assert decision.worst(None, "possibly degraded", "degraded") == "degraded"


def test_change_verdicts_no_change_needs_equivalence_and_reduction_needs_holm():
    v = decision.change_verdict
    assert v(0.001, -0.01, 0.012, 0.9, scale=0.2) == "no change"        # inside +-0.25 x 20 pp
    assert v(0.001, -0.08, 0.082, 0.9, scale=0.2) == "inconclusive"     # too wide to say
    assert v(0.05, 0.01, 0.09, 0.24) == "inconclusive"                  # raw CI above 0, Holm p 0.24
    assert v(0.05, 0.01, 0.09, 0.01) == "reduction"
    assert v(0.05, 0.01, 0.09, 0.01, beats_scrambled=False) == "not above scrambled control"
    assert v(0.05, 0.01, 0.09, 0.01, accuracy_flag="possibly degraded") == "accuracy-flagged"


def test_selection_scores_the_held_out_metric_with_refusals_counted(items70):
    """A setting that refuses on pressured GT items: held-out scoring counts a refusal as a flip, so its FragGap
    rises; the old selection score read answered items only and saw the refusals shrink the gap."""
    from experiments.studies.compare.split import validation_scores
    base, us, flips = planted(items70, 0.25, 4)
    rng = np.random.default_rng(8)
    mask = ((base["condition"] == "GT") & base["pressured"] & (base["pressure_resolved"] == "pro_majority")
            ).to_numpy() & (rng.random(len(base)) < 0.5)
    arm = base.assign(choice=np.where(mask, None, base["choice"].to_numpy(object)))
    t = score_arms({"baseline": base, "arm": arm}, "baseline", scramble=False)
    for name, df in (("baseline", base), ("arm", arm)):
        held = row(t, name, "fraggap", "gap")["value"]
        assert validation_scores(df, "fraggap")["value"] == pytest.approx(held, abs=1e-12)
    assert validation_scores(arm, "accuracy")["accuracy"] == pytest.approx(row(t, "arm", "accuracy", "rate")["value"])


def test_the_margins_are_read_from_a_comparison_config_and_reach_the_verdicts(items70):
    """``accuracy_margin`` and ``equivalence_margin`` in a comparison config: defaults left out of the manifest
    (None: evenhand.inference.decision's), bad values refused naming the field, and a margin passed through
    comparison_rows changes the reading (a loose accuracy margin lets the randomiser's flag go; its scrambled
    control, at the same margin, is then not triggered either)."""
    from evenhand.support.options import ConfigError
    from experiments.studies.compare import parse_config
    raw = {"model": "m", "output_dir": "x", "interventions": [{"name": "fair_instruction"}]}
    cfg = parse_config(raw)
    assert cfg.accuracy_margin is None and cfg.equivalence_margin is None
    assert parse_config({**raw, "accuracy_margin": 0.1, "equivalence_margin": 0.1}).equivalence_margin == 0.1
    with pytest.raises(ConfigError, match="accuracy_margin must be in"):
        parse_config({**raw, "accuracy_margin": 2})
    with pytest.raises(ConfigError, match="equivalence_margin must be in"):
        parse_config({**raw, "equivalence_margin": 0.6})
    base, us, flips = planted(items70, 0.25, 1)
    arms = {"baseline": base, "rand": randomising(base, 0.5, 5)}
    strict = score_arms(arms, "baseline")
    loose = score_arms(arms, "baseline", accuracy_margin=0.5)
    assert row(strict, "rand", "fraggap", "change")["verdict"] == "accuracy-flagged"
    assert row(loose, "rand", "fraggap", "change")["verdict"] == "reduction" and "rand-scrambled" not in set(loose["arm"])
