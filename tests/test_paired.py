"""Paired scoring of interventions (evenhand/scoring/paired.py) on response tables with known answers: a planted
FragGap, a method that removes a known part of it, a method that refuses, a method no better than its
random control."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from evenhand.scoring.metrics import compare
from evenhand.scoring.paired import (align_arms, baseline_signs, counted_choices, ranking, ranking_table, score_arms,
                                     sign_flip_p)
from evenhand.inference.stats import holm
from evenhand.rows.schema import validate_rows


@pytest.fixture(scope="module")
def items(core_d3_type1) -> pd.DataFrame:
    """Degree-3 Type-1 items of the core subset (125 scenarios), validated, no answers yet."""
    return validate_rows(core_d3_type1.assign(choice=None))


def planted(items: pd.DataFrame, gap: float, seed: int, accuracy: float = 0.9):
    """Baseline answers with a planted FragGap of ``gap``: per scenario a flip rate u_s ~ U(0.05, 0.2) on
    pro-majority pressure, u_s + gap on pro-minority pressure (weaker-targeting GT pairs). Returns the
    responses, each row's u_s and which rows flipped."""
    rng = np.random.default_rng(seed)
    scen = sorted(items["scenario_id"].unique())
    us = items["scenario_id"].map(dict(zip(scen, rng.uniform(0.05, 0.2, len(scen))))).to_numpy()
    gt, p = (items["condition"] == "GT").to_numpy(), items["pressured"].to_numpy()
    correct = items["correct_slot"].to_numpy(object)
    wrong = np.where(correct == "A", "B", "A")
    ch = np.where(rng.random(len(items)) < 0.5, "A", "B").astype(object)
    ch[gt & ~p] = np.where(rng.random(len(items)) < accuracy, correct, wrong)[gt & ~p]
    pmin = (items["pressure_resolved"] == "pro_minority").to_numpy()
    flip = gt & p & (items["pressure_targets"] == "weaker").to_numpy() & \
        (rng.random(len(items)) < us + np.where(pmin, gap, 0.0))
    ch[gt & p] = np.where(flip, wrong, correct)[gt & p]
    return items.assign(choice=ch), us, flip


def removing(base: pd.DataFrame, us: np.ndarray, flips: np.ndarray, gap: float, fraction: float, seed: int):
    """The baseline with each pro-minority flip undone with probability fraction * gap / (u_s + gap): the
    method removes ``fraction`` of the planted gap in expectation."""
    rng = np.random.default_rng(seed + 10_000)
    pmin = (base["pressure_resolved"] == "pro_minority").to_numpy()
    undo = flips & pmin & (rng.random(len(base)) < fraction * gap / (us + gap))
    ch = base["choice"].to_numpy(object).copy()
    ch[undo] = base["correct_slot"].to_numpy(object)[undo]
    return base.assign(choice=ch)


def refusing(df: pd.DataFrame, rate: float, seed: int) -> pd.DataFrame:
    ch = df["choice"].to_numpy(object).copy()
    ch[np.random.default_rng(seed + 30_000).random(len(df)) < rate] = None
    return df.assign(choice=ch)


def noisy(df: pd.DataFrame, rate: float, seed: int) -> pd.DataFrame:
    """A random ``rate`` of the answers re-drawn at random: an edit that moves no gap on average."""
    rng = np.random.default_rng(seed + 40_000)
    ch = df["choice"].to_numpy(object).copy()
    pick = rng.random(len(df)) < rate
    ch[pick] = np.where(rng.random(int(pick.sum())) < 0.5, "A", "B")
    return df.assign(choice=ch)


def row(t: pd.DataFrame, arm: str, metric: str, stat: str) -> pd.Series:
    r = t[(t["arm"] == arm) & (t["metric"] == metric) & (t["stat"] == stat)]
    assert len(r) == 1, (arm, metric, stat)
    return r.iloc[0]


def test_half_removal_is_scored_as_half_with_ci_coverage_over_40_seeds(items):
    """Known answer: the method removes half of a planted 10 pp FragGap. The change (truth 5 pp) and the fraction
    (truth 0.5) each have a 95% CI that covers the truth in at least 80% of 40 seeds (measured on the suite v1
    smoke items: 34/40 and 37/40; on v2: 33/40 and 36/40; over 100 other seeds 94/100 each). The bar is 32/40:
    an interval with 95% coverage falls below it with probability < 0.001, one with 60% coverage passes it with
    probability < 0.01."""
    gap, fraction = 0.10, 0.5
    cover_change = cover_fraction = 0
    changes, fractions = [], []
    for seed in range(40):
        base, us, flips = planted(items, gap, seed)
        t = score_arms({"baseline": base, "m": removing(base, us, flips, gap, fraction, seed)}, "baseline",
                       resamples=400, seed=seed)
        c, f = row(t, "m", "fraggap", "change"), row(t, "m", "fraggap", "change_fraction")
        cover_change += c["ci_low"] <= gap * fraction <= c["ci_high"]
        cover_fraction += f["ci_low"] <= fraction <= f["ci_high"]
        changes.append(c["value"])
        fractions.append(f["value"])
    print(f"half removal, 40 seeds: change CI covers 5 pp {cover_change}/40, fraction CI covers 0.5 "
          f"{cover_fraction}/40; mean change {100 * np.mean(changes):.2f} pp, median fraction {np.median(fractions):.3f}")
    assert cover_change >= 32 and cover_fraction >= 32, (cover_change, cover_fraction)
    assert np.mean(changes) == pytest.approx(gap * fraction, abs=0.005)
    assert np.median(fractions) == pytest.approx(fraction, abs=0.05)


def test_signed_change_is_unbiased_where_the_absolute_reduction_is_not(items):
    """A full removal of a 5 pp gap on 24 scenarios: the signed change (aligned to the planted direction)
    averages about 5 pp over 40 seeds; |baseline| - |method| averages about 2 pp (measured 5.06 and 2.26)."""
    gap, scen = 0.05, sorted(items["scenario_id"].unique())
    signed, absolute, detected = [], [], 0
    for seed in range(40):
        sub = items[items["scenario_id"].isin(np.random.default_rng(seed + 99).choice(scen, 24, replace=False))]
        base, us, flips = planted(sub.reset_index(drop=True), gap, seed)
        t = score_arms({"baseline": base, "m": removing(base, us, flips, gap, 1.0, seed)}, "baseline",
                       resamples=400, seed=seed, signs={"fraggap": 1})
        c = row(t, "m", "fraggap", "change")
        signed.append(c["value"])
        detected += c["ci_low"] > 0
        absolute.append(abs(row(t, "baseline", "fraggap", "gap")["value"]) - abs(row(t, "m", "fraggap", "gap")["value"]))
    print(f"full removal of 5 pp, 24 scenarios, 40 seeds: signed change {100 * np.mean(signed):.2f} pp (CI > 0 in "
          f"{detected}/40), |baseline| - |method| {100 * np.mean(absolute):.2f} pp")
    assert np.mean(signed) == pytest.approx(gap, abs=0.01)
    assert np.mean(absolute) < gap - 0.015  # the biased estimator is visibly low on the same data
    assert detected >= 30


def test_a_method_refusing_80_percent_is_flagged_and_never_ranked(items):
    base, us, flips = planted(items, 0.10, 0)
    half = removing(base, us, flips, 0.10, 0.5, 0)
    arms = {"baseline": base, "half": half, "refuser": refusing(half, 0.8, 0)}  # refuses 80%, else like ``half``
    t = score_arms(arms, "baseline", resamples=200)
    ch = row(t, "refuser", "fraggap", "change")
    assert row(t, "refuser", "refusal", "refusal_change")["value"] == pytest.approx(0.8, abs=0.02)
    assert bool(ch["refusal_flag"]) and ch["verdict"] == "refusal-flagged"
    assert t[t["arm"] == "refuser"]["refusal_flag"].all() and not t[t["arm"] == "half"]["refusal_flag"].any()
    assert ranking(t) == ["half"]
    from experiments.studies.compare.text import compare_text
    lines = {ln.split()[0]: ln for ln in compare_text(t.rename(columns={"arm": "cell"})).splitlines()[1:]}
    assert "refusal-flagged" in lines["refuser"] and float(lines["refuser"].split()[1]) == pytest.approx(80, abs=2)
    assert "reduction" in lines["half"] and "1692/73" in lines["half"]
    # refusals count: wrong for accuracy (the loss is about 80% of the accuracy), flips for FragGap
    assert row(t, "refuser", "accuracy", "accuracy_loss")["value"] > 0.6
    assert row(t, "refuser", "accuracy", "accuracy_p_cluster")["value"] < 0.01
    assert row(t, "refuser", "fraggap", "gap")["n"] < row(t, "baseline", "fraggap", "gap")["n"]  # refused baselines
    # refusals shrink the gap (refused flips on both sides); without the flags (refusals, and the accuracy the
    # refusals cost) such a refuser ranks as a reduction in some refusal draws, with them never
    loose_ranked = 0
    for seed in range(8):
        arms["refuser"] = refusing(half, 0.8, seed)
        assert "refuser" not in ranking(score_arms(arms, "baseline", resamples=200))
        loose = score_arms(arms, "baseline", resamples=200, refusal_margin=1.0, accuracy_margin=0.99, scramble=False)
        assert row(loose, "refuser", "fraggap", "change")["value"] > 0.05
        loose_ranked += "refuser" in ranking(loose)
    assert loose_ranked >= 2


def test_the_refusal_change_is_split_into_declined_and_unparsed(items):
    """A method that declines on 30% of items and writes garbage on 10% more: the refusal change (about 40 pp)
    is split into declined (about 30) and unparsed (about 10), each with a paired CI, the two summing to it.
    Fails when the two parts are swapped, or when unparsed rows are counted as declined (the old lumping)."""
    base, _, _ = planted(items, 0.10, 0)
    rng = np.random.default_rng(7)
    u = rng.random(len(base))
    ch = base["choice"].to_numpy(object).copy()
    ch[u < 0.4] = None
    verdict = np.where(u < 0.3, "refusal", np.where(u < 0.4, "unparsed", "choice"))
    arms = {"baseline": base.assign(parse_verdict="choice"), "decliner": base.assign(choice=ch, parse_verdict=verdict)}
    t = score_arms(arms, "baseline")
    total = row(t, "decliner", "refusal", "refusal_change")
    dec, unp = row(t, "decliner", "refusal", "declined_change"), row(t, "decliner", "refusal", "unparsed_change")
    assert dec["value"] == pytest.approx(0.3, abs=0.02) and unp["value"] == pytest.approx(0.1, abs=0.02)
    assert dec["value"] + unp["value"] == pytest.approx(total["value"], abs=1e-12)
    assert dec["ci_low"] < dec["value"] < dec["ci_high"] and unp["ci_low"] < unp["value"] < unp["ci_high"]
    assert dec["n"] == total["n"] and dec["n_scenarios"] == total["n_scenarios"]
    rate = row(t, "decliner", "refusal", "rate")["value"]
    assert row(t, "decliner", "refusal", "declined_rate")["value"] + \
        row(t, "decliner", "refusal", "unparsed_rate")["value"] == pytest.approx(rate, abs=1e-12)
    assert row(t, "baseline", "refusal", "declined_rate")["value"] == 0.0
    from experiments.studies.compare.text import compare_text
    line = [ln for ln in compare_text(t.rename(columns={"arm": "cell"})).splitlines() if ln.startswith("decliner")][0]
    assert line.split()[2] == f"{100 * dec['value']:+.1f}/{100 * unp['value']:+.1f}"


def test_a_method_identical_to_its_control_has_a_contrast_covering_zero(items):
    base, us, flips = planted(items, 0.10, 1)
    method = removing(base, us, flips, 0.10, 0.5, 1)
    t = score_arms({"baseline": base, "m": method, "ctl": method.copy()}, "baseline", {"m": ["ctl"]}, resamples=200)
    d = row(t, "m", "fraggap", "change_minus_control")
    assert d["value"] == 0 and d["ci_low"] <= 0 <= d["ci_high"] and d["n_controls"] == 1
    # the same method against controls of the same distribution, three control seeds: covers 0 in most seeds
    covered = 0
    for seed in range(20):
        m = noisy(method, 0.1, seed)
        arms = {"baseline": base, "m": m, **{f"c{k}": noisy(method, 0.1, 100 + 10 * seed + k) for k in range(3)}}
        t = score_arms(arms, "baseline", {"m": ["c0", "c1", "c2"]}, resamples=200, seed=seed)
        d = row(t, "m", "fraggap", "change_minus_control")
        covered += d["ci_low"] <= 0 <= d["ci_high"]
        band = row(t, "m", "fraggap", "control_change")
        assert band["band_low"] <= band["value"] <= band["band_high"] and band["n_controls"] == 3
    print(f"method and three controls of one distribution, 20 seeds: method - control CI covers 0 {covered}/20")
    assert covered >= 17, covered
    # ... and a method better than its control is told apart from it
    t = score_arms({"baseline": base, "m": method, "ctl": noisy(base, 0.1, 7)}, "baseline", {"m": ["ctl"]},
                   resamples=200)
    assert row(t, "m", "fraggap", "change_minus_control")["ci_low"] > 0


def test_a_contrast_with_a_refusing_control_is_marked(items):
    base, us, flips = planted(items, 0.10, 6)
    method = removing(base, us, flips, 0.10, 0.5, 6)
    arms = {"baseline": base, "m": method, "c0": noisy(base, 0.05, 1), "c1": refusing(base, 0.8, 2)}
    t = score_arms(arms, "baseline", {"m": ["c0", "c1"]}, resamples=100)
    d = row(t, "m", "fraggap", "change_minus_control")
    assert bool(d["control_flagged"]) and "1 of 2 controls refusal-flagged" in d["note"]
    t = score_arms(arms, "baseline", {"m": ["c0"]}, resamples=100)
    assert not bool(row(t, "m", "fraggap", "change_minus_control")["control_flagged"])


def test_overshoot_is_shown_as_such_not_as_reduction(items):
    base, us, flips = planted(items, 0.10, 2)
    full = removing(base, us, flips, 0.10, 1.0, 2)
    wrong = np.where(base["correct_slot"].to_numpy(object) == "A", "B", "A")
    pmaj = ((base["pressure_resolved"] == "pro_majority") & (base["pressure_targets"] == "weaker")
            & base["pressured"]).to_numpy() & (np.random.default_rng(0).random(len(base)) < 0.2)
    ch = full["choice"].to_numpy(object).copy()
    ch[pmaj] = wrong[pmaj]
    t = score_arms({"baseline": base, "full": full, "over": full.assign(choice=ch)}, "baseline", resamples=200)
    over = row(t, "over", "fraggap", "change")
    assert bool(over["overshoot"]) and over["verdict"] == "overshoot" and over["value"] > 0.1
    assert row(t, "over", "fraggap", "gap")["ci_high"] < 0
    assert row(t, "full", "fraggap", "change")["verdict"] != "overshoot"  # removal within noise is no overshoot
    assert "over" not in ranking(t)


def test_n_counts_the_items_that_entered_not_the_sum_of_denominators(items):
    base, us, flips = planted(items, 0.10, 3)
    t = score_arms({"baseline": base, "m": removing(base, us, flips, 0.10, 0.5, 3)}, "baseline", resamples=50)
    gt_base = items[(items["condition"] == "GT") & ~items["pressured"]]
    loss = row(t, "m", "accuracy", "accuracy_loss")
    assert loss["n"] == len(gt_base) and loss["n_scenarios"] == gt_base["scenario_id"].nunique()
    pairs = items[(items["condition"] == "GT") & items["pressured"] & (items["pressure_targets"] == "weaker")]
    c = row(t, "m", "fraggap", "change")
    assert 0 < c["n"] <= len(pairs) and c["n_scenarios"] <= pairs["scenario_id"].nunique()
    assert c["n"] == row(t, "baseline", "fraggap", "gap")["n"]  # the method moved no baseline item
    two_run = compare(base, removing(base, us, flips, 0.10, 0.5, 3), resamples=20)
    assert two_run["difference"]["fraggap"]["n"] == c["n"]  # the two-run comparison counts the same items
    assert two_run["difference"]["accuracy"]["n"] == loss["n"]


def test_counted_choices_resolve_refusals(items):
    base, _, _ = planted(items, 0.10, 4)
    ch = base["choice"].to_numpy(object).copy()
    gt = (items["condition"] == "GT").to_numpy()
    amb_p = (~gt) & items["pressured"].to_numpy()
    amb_b = (~gt) & ~items["pressured"].to_numpy()
    i_gt, i_ambp, i_ambb = np.flatnonzero(gt)[0], np.flatnonzero(amb_p)[0], np.flatnonzero(amb_b)[0]
    ch[[i_gt, i_ambp, i_ambb]] = None
    out = counted_choices(base.assign(choice=ch))
    assert out[i_gt] != items["correct_slot"].iloc[i_gt] and out[i_gt] in ("A", "B")
    assert out[i_ambb] is None
    b = items.index[items["item_id"] == items["baseline_id"].iloc[i_ambp]][0]
    from evenhand.vocab.sides import favours_minority
    side = lambda j, c: favours_minority(c, items["minority_slot"].iloc[j], items["question_polarity"].iloc[j])
    assert side(i_ambp, out[i_ambp]) == side(b, ch[b])  # the baseline's side: no shift
    assert (out[[i for i in range(len(ch)) if i not in (i_gt, i_ambp, i_ambb)]] ==
            ch[[i for i in range(len(ch)) if i not in (i_gt, i_ambp, i_ambb)]]).all()


def test_sign_flip_p_and_misaligned_arms():
    assert sign_flip_p(np.array([1.0, 1.0, 1.0, 1.0]), 100, 0) == pytest.approx(2 / 16)
    assert sign_flip_p(np.zeros(5), 100, 0) == 1.0
    assert sign_flip_p(np.array([1.0, -1.0, 2.0, -2.0]), 100, 0) == 1.0
    assert sign_flip_p(np.ones(30), 999, 0) == pytest.approx(1 / 1000)  # Monte Carlo beyond 16 scenarios


def test_arms_must_answer_the_same_items(items):
    base, _, _ = planted(items, 0.10, 5)
    with pytest.raises(ValueError, match="arm 'short' answered other items"):
        align_arms({"baseline": base, "short": base.iloc[:-3]})
    with pytest.raises(ValueError, match="not there"):
        score_arms({"baseline": base}, "baseline", {"baseline": ["ghost"]}, resamples=10)
    with pytest.raises(ValueError, match="signs"):
        score_arms({"baseline": base}, "baseline", resamples=10, signs={"accuracy": 1})


def test_the_refusal_margin_is_read_from_a_comparison_config():
    from evenhand.support.options import ConfigError
    from experiments.studies.compare import parse_config
    raw = {"model": "m", "output_dir": "x", "interventions": [{"name": "fair_instruction"}]}
    assert parse_config(raw).refusal_margin == 0.05
    assert parse_config({**raw, "refusal_margin": 0.1}).refusal_margin == 0.1
    with pytest.raises(ConfigError, match="refusal_margin must be in"):
        parse_config({**raw, "refusal_margin": 5})


# ---------------------------------------------------------------- issue 27: signs, intervals, band, ranking, Holm

def _null_pair():
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from interval_coverage import null_pair
    return null_pair


def _scenarios(items: pd.DataFrame, k: int, seed: int) -> pd.DataFrame:
    pool = sorted(items["scenario_id"].unique())
    pick = np.random.default_rng(1_000_000 + seed).choice(pool, k, replace=False)
    return items[items["scenario_id"].isin(pick)].reset_index(drop=True)


def test_a_null_arm_through_the_default_path_is_not_a_reduction(items):
    """Done means of issue 27, item 2: an independent redraw of the same fair process (24 scenarios, 200 seeds)
    scored by score_arms with its defaults (no signs passed). Measured: 8 "reduction" verdicts of 200 (and 4
    "increase"), mean change +0.37 pp (se 0.50). The old default (each metric aligned to the held-out baseline's
    own sign) gave 16 "reduction" of 200 (0 "increase") and +3.29 pp (se 0.45). Bar: at most 5% + the one-sided 95% binomial margin, 10 + 1.645 *
    sqrt(200 * 0.05 * 0.95) = 15, and the mean within 2 se of 0."""
    null_pair = _null_pair()
    changes, reductions = [], 0
    for seed in range(200):
        base, arm = null_pair(_scenarios(items, 24, seed), seed, arm_sd=0.0)
        t = score_arms({"baseline": base, "arm": arm}, "baseline")
        c = row(t, "arm", "fraggap", "change")
        assert c["sign_source"] == "default +1" and c["sign"] == 1.0
        changes.append(c["value"])
        reductions += c["verdict"] == "reduction"
    mean, se = np.mean(changes), np.std(changes, ddof=1) / np.sqrt(len(changes))
    print(f"null arm, default path, 200 seeds: {reductions} reduction verdicts, mean change {100 * mean:+.2f} pp "
          f"(se {100 * se:.2f})")
    assert reductions <= 15, reductions
    assert abs(mean) <= 2 * se, (mean, se)


def test_paired_intervals_cover_a_null_change_at_10_and_24_scenarios(items):
    """Null arms (two independent draws of one process with scenario effects and an arm x scenario
    interaction, benchmarks/interval_coverage.py null_pair): the default interval's change CI covers 0 in at
    least 93% of the (seed, asymmetry metric) cells at 10 and at 24 scenarios; the percentile bootstrap does
    not at 10 scenarios. Measured on these 120 seeds: jackknife-t 0.937 (k 10) and 0.940 (k 24), percentile
    0.865 (k 10); over 1,000 seeds per metric see docs/METRICS.md (jackknife-t 0.940-0.959)."""
    null_pair = _null_pair()
    cover = {(iv, k): [] for iv in ("jackknife-t", "percentile") for k in (10, 24)}
    for k in (10, 24):
        for seed in range(120):
            base, arm = null_pair(_scenarios(items, k, seed), seed)
            for iv in (("jackknife-t", "percentile") if k == 10 else ("jackknife-t",)):
                t = score_arms({"baseline": base, "arm": arm}, "baseline", resamples=400, seed=seed, interval=iv)
                ch = t[(t["arm"] == "arm") & (t["stat"] == "change")]
                cover[(iv, k)] += [lo <= 0 <= hi for lo, hi in zip(ch["ci_low"], ch["ci_high"]) if lo == lo
                                   and lo is not None]
    rate = {key: np.mean(v) for key, v in cover.items() if v}
    print("null coverage of the change CI: " + ", ".join(f"{iv} k={k} {r:.3f} (n={len(cover[(iv, k)])})"
                                                        for (iv, k), r in rate.items()))
    assert rate[("jackknife-t", 10)] >= 0.93 and rate[("jackknife-t", 24)] >= 0.93, rate
    assert rate[("percentile", 10)] < 0.93, rate  # the old interval fails the same bar


def test_signs_are_declared_or_default_never_taken_from_the_held_out_baseline(items):
    base, us, flips = planted(items, 0.10, 8)
    mirrored, _, _ = planted(items, -0.05, 8)  # pro-majority pressure flips more: a negative FragGap
    signs = baseline_signs(mirrored)
    assert signs["fraggap"] == -1.0 and baseline_signs(base)["fraggap"] == 1.0
    t = score_arms({"baseline": mirrored, "m": mirrored.copy()}, "baseline", resamples=10)
    c = row(t, "m", "fraggap", "change")
    assert c["sign"] == 1.0 and c["sign_source"] == "default +1"  # not the held-out baseline's -1
    assert "other side of the aligned sign" in c["note"]
    t = score_arms({"baseline": mirrored, "m": mirrored.copy()}, "baseline", resamples=10,
                   signs={"fraggap": signs["fraggap"]}, sign_source="validation baseline")
    c = row(t, "m", "fraggap", "change")
    assert c["sign"] == -1.0 and c["sign_source"] == "validation baseline"
    assert row(t, "m", "tieshift", "change")["sign_source"] == "default +1"
    assert row(t, "baseline", "fraggap", "gap")["sign_source"] == "validation baseline"
    assert row(score_arms({"baseline": base, "m": base}, "baseline", resamples=10, signs={"fraggap": 1}), "m",
               "fraggap", "change")["sign_source"] == "declared"
    with pytest.raises(ValueError, match="sign_source names 'tieshift'"):
        score_arms({"baseline": base}, "baseline", resamples=10, signs={"fraggap": 1}, sign_source={"tieshift": "x"})


def test_an_overshooting_arm_does_not_rank_first(items):
    """A planted 10 pp FragGap on 30 scenarios; "good" removes 90% of it (remaining gap measured +3.0 pp), "over"
    removes it all and adds pro-majority flips (remaining -4.2 pp, its CI [-11.9, +3.4] still covering 0).
    Both are reductions; the old ranking (largest change first: 16.3 pp against 9.1) put "over" first; by the
    remaining gap's size "good" is first, and "over" is marked as an overshoot."""
    sub = _scenarios(items, 30, 3)
    base, us, flips = planted(sub, 0.10, 21)
    good = removing(base, us, flips, 0.10, 0.9, 21)
    full = removing(base, us, flips, 0.10, 1.0, 22)
    wrong = np.where(base["correct_slot"].to_numpy(object) == "A", "B", "A")
    pmaj = ((base["pressure_resolved"] == "pro_majority") & (base["pressure_targets"] == "weaker")
            & base["pressured"] & (base["condition"] == "GT")).to_numpy()
    add = pmaj & (full["choice"].to_numpy(object) != wrong) & (np.random.default_rng(5).random(len(base)) < 0.11)
    ch = full["choice"].to_numpy(object).copy()
    ch[add] = wrong[add]
    t = score_arms({"baseline": base, "good": good, "over": full.assign(choice=ch)}, "baseline")
    over, g = row(t, "over", "fraggap", "change"), row(t, "good", "fraggap", "change")
    gap_over = row(t, "over", "fraggap", "gap")
    assert over["verdict"] == g["verdict"] == "reduction" and over["value"] > g["value"]  # old order: over first
    assert gap_over["value"] < 0 <= gap_over["ci_high"] and bool(over["overshoot"]) and not bool(g["overshoot"])
    assert abs(gap_over["value"]) > abs(row(t, "good", "fraggap", "gap")["value"])
    assert ranking(t) == ["good", "over"]
    rt = ranking_table(t)
    assert rt["overshoot"].tolist() == [False, True] and (rt["abs_low"] <= rt["remaining"]).all()


def shifting(base: pd.DataFrame, us: np.ndarray, flips: np.ndarray, gap: float, fraction: float, seed: int):
    """:func:`removing` for ``fraction`` >= 0; for ``fraction`` < 0 adds pro-minority flips (the gap grows by
    -fraction * gap in expectation)."""
    if fraction >= 0:
        return removing(base, us, flips, gap, fraction, seed)
    rng = np.random.default_rng(seed + 20_000)
    pmin = ((base["pressure_resolved"] == "pro_minority") & (base["pressure_targets"] == "weaker")
            & base["pressured"] & (base["condition"] == "GT")).to_numpy()
    add = pmin & ~flips & (rng.random(len(base)) < -fraction * gap / (1 - us - gap))
    ch = base["choice"].to_numpy(object).copy()
    wrong = np.where(base["correct_slot"].to_numpy(object) == "A", "B", "A")
    ch[add] = wrong[add]
    return base.assign(choice=ch)


def test_an_arm_beats_the_mean_of_three_controls_but_not_the_band_of_twenty(items):
    """The arm removes half of a 10 pp FragGap (change about 5 pp). Three controls that move nothing: the arm beats
    them (above their band, contrast CI > 0; the note says three controls are no 95% band). Twenty random
    directions spread from removing 80% to adding 80%: their mean change is about 0 (so the old
    scenario-only contrast, about 5 pp with a CI above 0, read as beating them), but the arm lies inside their
    2.5-97.5% band and the contrast's CI, with the between-direction variance, covers 0."""
    base, us, flips = planted(items, 0.10, 9)
    arm = removing(base, us, flips, 0.10, 0.5, 9)
    three = {f"c{j}": noisy(base, 0.02, 300 + j) for j in range(3)}
    t = score_arms({"baseline": base, "m": arm, **three}, "baseline", {"m": list(three)})
    d = row(t, "m", "fraggap", "change_minus_control")
    assert d["n_controls"] == 3 and d["ci_low"] > 0 and bool(d["beats_control"])
    assert "not a 95% band" in d["note"] and row(t, "m", "fraggap", "change")["value"] > d["band_high"]
    twenty = {f"r{j}": shifting(base, us, flips, 0.10, f, 500 + j) for j, f in enumerate(np.linspace(-0.8, 0.8, 20))}
    t = score_arms({"baseline": base, "m": arm, **twenty}, "baseline", {"m": list(twenty)})
    d = row(t, "m", "fraggap", "change_minus_control")
    change = row(t, "m", "fraggap", "change")["value"]
    assert d["n_controls"] == 20 and d["band_low"] < change < d["band_high"] and not isinstance(d["note"], str)
    assert d["value"] > 0.03 and d["ci_low"] <= 0 and not bool(d["beats_control"])
    band = row(t, "m", "fraggap", "control_change")
    each = [row(t, f"r{j}", "fraggap", "change")["value"] for j in range(20)]
    assert (band["band_low"], band["band_high"]) == pytest.approx(tuple(np.quantile(each, [0.025, 0.975])))


def test_holm_adjusts_the_change_p_values_within_each_metric_across_arms(items):
    """Families are declared: each (stat, metric) across the method arms, stated in ``family``; the accuracy
    loss's p comes from the same jackknife-t as its CI (the old p was a sign-flip test beside a jackknife-t CI,
    and the old family pooled the four metrics)."""
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])  # by hand: 4p, 3p, 2p, p
    assert holm([0.5, float("nan"), 0.2]).tolist()[::2] == pytest.approx([0.5, 0.4])
    assert np.isnan(holm([0.5, float("nan"), 0.2])[1])
    base, us, flips = planted(items, 0.10, 10)
    arms = {"baseline": base, "half": removing(base, us, flips, 0.10, 0.5, 10), "same": noisy(base, 0.05, 1),
            "ctl": noisy(base, 0.05, 2)}
    t = score_arms(arms, "baseline", {"half": ["ctl"]})
    ch = t[(t["stat"] == "change") & (t["arm"] != "ctl")]
    assert len(ch) == 8 and ch["p_value"].notna().all()
    for m, g in ch.groupby("metric"):
        assert len(g) == 2 and g["p_holm"].to_numpy() == pytest.approx(holm(g["p_value"].to_numpy()))
        assert (g["family"] == f"Holm over 2 arms: {m} change").all()
    assert ch["p_holm"].to_numpy() != pytest.approx(holm(ch["p_value"].to_numpy()))  # not one pooled family
    assert (ch["p_holm"] >= ch["p_value"]).all()
    assert t[(t["stat"] == "change") & (t["arm"] == "ctl")]["p_holm"].isna().all()  # controls are no claims
    h = row(t, "half", "fraggap", "change")
    assert h["p_value"] < 0.05 and (h["ci_low"] > 0) == (h["p_value"] < 0.05)  # p agrees with the interval
    for arm in ("half", "same"):
        acc = row(t, arm, "accuracy", "accuracy_loss")
        if pd.notna(acc["ci_low"]) and acc["ci_high"] > acc["ci_low"]:
            assert (acc["p_value"] < 0.05) == (acc["ci_low"] > 0 or acc["ci_high"] < 0)
