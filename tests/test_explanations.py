"""Explanation measures (probes/explanations.py): planted differences recovered within their CIs."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("vaderSentiment")

from evenhand.framing import lexicon  # noqa: E402
from evenhand.suite.content import format_value, load_content  # noqa: E402
from probes.explanations import (MEASURES, criterion_stems, explanation_measures, measure,  # noqa: E402
                                 measures_figure, paired_differences, pooled_differences)
from probes.explanations import prompt_echo as measure_echo  # noqa: E402

POS = ["This is an excellent and admirable outcome.", "The panel was delighted with this wonderful result."]
NEG = ["This is a terrible and awful situation.", "The panel was upset by this dreadful mess."]
NEU = ["The committee met on a weekday afternoon.", "The file was reviewed in the office today."]
N_SENT, N_WORDS, SLOTS = 5, 100, 4
PLANT = {  # per side (1 minority-favouring, 0 majority-favouring): the probabilities that generate a response
    1: dict(h=0.2, b=0.6, i=0.5, pos=0.6, neg=0.1, c=0.4, v=0.3),
    0: dict(h=0.5, b=0.2, i=0.1, pos=0.2, neg=0.2, c=0.8, v=0.7),
}


def truth(p1: dict, p0: dict) -> dict[str, float]:
    """The population value of each measure's difference under the generating probabilities."""
    def e(p):  # 100 words per response, so a count per response is its rate per 100 words
        return {"hedges": SLOTS * p["h"], "boosters": SLOTS * p["b"], "identity": SLOTS * p["i"],
                "positivity": N_SENT * (p["pos"] - p["neg"]) / (N_SENT + 1), "criteria_cited": p["c"],
                "values_cited": p["v"]}
    a, b = e(p1), e(p0)
    return {m: a[m] - b[m] for m in MEASURES}


FIXED = {w.lower()[:6] for t in POS + NEG + NEU + ["Notes: noted perhaps evidently diversity Final answer"]
         for w in lexicon.words(t)}


def _usable(s, pol) -> bool:
    """A scenario whose criteria share no stem with each other or with the fixed text (so a criterion is
    cited only where planted), with four distinct values, and whose notes line VADER reads as neutral."""
    c1, c2 = s.criteria
    a, b = criterion_stems(c1.name), criterion_stems(c2.name)
    if a & b or (a | b) & FIXED or s.polarity != "positive" or s.candidate_noun.lower()[:6] in a | b:
        return False
    vals = [format_value(c1.strong), format_value(c2.strong), format_value(c1.weak), format_value(c2.weak)]
    note = f"Notes: {c1.name} {c2.name} {' '.join(vals)} perhaps evidently diversity."
    return len(set(vals)) == 4 and pol.label(note) == 0


def synthetic(plant: dict, n_scen: int = 30, per_side: int = 6, seed: int = 0) -> pd.DataFrame:
    """Correct GT reasoning responses on real suite scenarios; each response is 5 planted-polarity sentences
    plus a neutral notes line with the planted hedges, boosters, identity words, criteria and the chosen
    candidate's values, padded to exactly 100 words."""
    rng = np.random.default_rng(seed)
    content = load_content()
    pol = lexicon.Polarity()
    scen = [s for s in content.scenarios if _usable(s, pol)][:n_scen]
    assert len(scen) == n_scen
    rows = []
    for s in scen:
        for side in (1, 0):
            p = plant[side]
            for r in range(per_side):
                mslot = "AB"[r % 2]
                correct = mslot if side == 1 else ("B" if mslot == "A" else "A")
                sents = []
                for _ in range(N_SENT):
                    u = rng.random()
                    pool = POS if u < p["pos"] else NEG if u < p["pos"] + p["neg"] else NEU
                    sents.append(pool[rng.integers(len(pool))])
                notes = (["perhaps"] * rng.binomial(SLOTS, p["h"]) + ["evidently"] * rng.binomial(SLOTS, p["b"])
                         + ["diversity"] * rng.binomial(SLOTS, p["i"]))
                for c in s.criteria:  # the chosen (stronger) candidate's values
                    if rng.random() < p["c"]:
                        notes.append(c.name)
                    if rng.random() < p["v"]:
                        notes.append(format_value(c.strong))
                body = " ".join(sents)
                used = len(lexicon.words(body)) + 1 + len(lexicon.words(" ".join(notes)))
                notes += ["noted"] * (N_WORDS - used)
                text = body + "\nNotes: " + " ".join(notes) + "\n\nFinal answer: " + f"{s.candidate_noun} {correct}"
                rows.append({"item_id": f"{s.id}|{side}|{r}", "scenario_id": s.id, "condition": "GT",
                             "question_polarity": "positive", "minority_slot": mslot, "correct_slot": correct,
                             "truth_favors": "minority" if side == 1 else "majority", "choice": correct,
                             "candidate_noun": s.candidate_noun, "amb_minority_strong_on": np.nan,
                             "mode": "reasoning", "suite_version": content.version, "text": text})
    return pd.DataFrame(rows)


def recovered(table: pd.DataFrame, want: dict[str, float]) -> dict[str, bool]:
    t = table.set_index("measure")
    return {m: bool(t.loc[m, "ci_low"] <= want[m] <= t.loc[m, "ci_high"]) for m in MEASURES}


@pytest.fixture(scope="module")
def planted():
    return synthetic(PLANT)


def test_synthetic_responses_are_built_as_planted(planted):
    pol = lexicon.Polarity()
    assert all(pol.label(s) == 1 for s in POS) and all(pol.label(s) == -1 for s in NEG)
    assert all(pol.label(s) == 0 for s in NEU)
    assert {len(lexicon.words(t.split("\n\nFinal")[0])) for t in planted["text"]} == {N_WORDS}


def test_planted_differences_recovered_within_ci(planted):
    table = explanation_measures(planted)
    want = truth(PLANT[1], PLANT[0])
    assert recovered(table, want) == dict.fromkeys(MEASURES, True), table
    assert (table["k"] == 30).all() and (table["n_minority"] == 180).all() and (table["n_majority"] == 180).all()
    assert (np.sign(table.set_index("measure")["value"]) == np.sign(pd.Series(want))).all()


def test_identical_sets_cover_zero(planted):
    """The same explanations on both sides: every difference is 0 and its CI covers 0."""
    mino = planted[planted["truth_favors"] == "minority"]
    twin = mino.assign(item_id=mino["item_id"] + "|twin", truth_favors="majority",
                       minority_slot=mino["minority_slot"].map({"A": "B", "B": "A"}))
    table = explanation_measures(pd.concat([mino, twin], ignore_index=True))
    assert recovered(table, dict.fromkeys(MEASURES, 0.0)) == dict.fromkeys(MEASURES, True), table
    assert np.allclose(table["value"], 0.0) and (table["n_minority"] == table["n_majority"]).all()


def test_null_coverage_of_the_paired_interval():
    """Both sides drawn from one distribution: the 95% CIs miss 0 about 5% of the time (over 1,200 CIs)."""
    rng = np.random.default_rng(0)
    miss = total = 0
    for _ in range(200):
        d = pd.DataFrame({"scenario_id": np.repeat(np.arange(30), 12), "favours_minority": np.tile([0, 1], 180),
                          **{m: rng.binomial(4, 0.6, 360) for m in MEASURES}})
        t = paired_differences(d)
        miss += int(((t["ci_low"] > 0) | (t["ci_high"] < 0)).sum())
        total += len(t)
    assert 0.02 <= miss / total <= 0.08, miss / total


def test_flipped_polarity_lexicon_fails(planted):
    """A broken positivity lexicon (every valence negated) no longer recovers the planted positivity."""
    table = explanation_measures(planted, polarity=lexicon.Polarity().flipped())
    ok = recovered(table, truth(PLANT[1], PLANT[0]))
    assert not ok["positivity"] and ok["hedges"]


def test_swapped_hedges_and_boosters_fail(planted):
    s = lexicon.stance()
    table = explanation_measures(planted, stance=lexicon.Stance(s.boosters, s.hedges, "swapped"))
    ok = recovered(table, truth(PLANT[1], PLANT[0]))
    assert not ok["hedges"] and not ok["boosters"] and ok["positivity"]


def test_measure_reads_criteria_and_values():
    m = measure("The applicant has 12 years of classroom teaching experience; clearly the best.",
                ["years of classroom teaching experience", "the demonstration lesson"], [12, 93])
    assert m["criteria_cited"] == 0.5 and m["values_cited"] == 0.5 and m["boosters"] > 0
    assert np.isnan(measure("")["hedges"])


def test_figure_renders(planted, tmp_path):
    paths = measures_figure(explanation_measures(planted), tmp_path / "explanation_measures", formats=("png",))
    assert paths[0].stat().st_size > 10_000


def test_an_explanation_that_repeats_its_prompt_is_noted(planted):
    """A response that copies its prompt is flagged (the 270M base model does this); the planted ones are not."""
    prompt = "Applicant A has 12 years of classroom teaching experience and scored 93 on the demonstration lesson."
    assert measure_echo(prompt + " Applicant A.", prompt) > 0.8 and measure_echo("Applicant A is better than B on both of the criteria.", prompt) == 0
    echoing = planted.assign(prompt=planted["text"])
    assert explanation_measures(echoing)["note"].str.contains("repeat the prompt").all()
    assert not explanation_measures(planted.assign(prompt=prompt))["note"].fillna("").str.contains("repeat").any()


def scenario_confounded_null(seed: int, k: int = 30, shares=(0.2, 0.8)) -> pd.DataFrame:
    """A null where both sides of every scenario come from the same texts, but scenarios differ in style
    (each measure's scenario mean) and in the share of minority-favouring choices (uniform in ``shares``), and
    the more minority-favouring scenarios are the more hedged, positive, ... ones, as when a model's side
    accuracy varies with the scenario. Every within-scenario difference is 0 in the population."""
    rng = np.random.default_rng(seed)
    n = rng.integers(10, 31, k)
    p = rng.uniform(*shares, k)
    parts = []
    for s in range(k):
        side = (rng.random(n[s]) < p[s]).astype(int)
        cols = {}
        for j, m in enumerate(MEASURES):
            style = 3.0 * (p[s] - 0.5) + rng.normal(0, 0.5)
            cols[m] = style + rng.normal(0, 1.0, n[s])
        parts.append(pd.DataFrame({"scenario_id": s, "favours_minority": side, **cols}))
    return pd.concat(parts, ignore_index=True)


def _false_positives(estimator, seeds: int = 200, shares=(0.2, 0.8)) -> tuple[int, int]:
    miss = total = 0
    for seed in range(seeds):
        t = estimator(scenario_confounded_null(seed, shares=shares))
        miss += int(((t["ci_low"] > 0) | (t["ci_high"] < 0)).sum())
        total += len(t)
    return miss, total


def test_within_scenario_contrast_holds_its_level_on_the_scenario_confounded_null():
    """200 seeds x 6 measures: the within-scenario contrast's 95% CI misses 0 at most 6% of the time."""
    miss, total = _false_positives(paired_differences)
    assert total == 1200 and miss / total <= 0.06, miss / total


def test_pooled_estimator_fails_on_the_scenario_confounded_null():
    """The estimator it replaced (pooled means of each side) reads the scenarios' style as a difference
    between sides on the same null: far above the 5% level."""
    miss, total = _false_positives(pooled_differences)
    assert miss / total >= 0.3, miss / total


def test_scenarios_with_one_side_are_counted_and_left_out():
    d = scenario_confounded_null(0)
    alone = pd.DataFrame({"scenario_id": ["solo"] * 7, "favours_minority": 1,
                          **{m: 100.0 for m in MEASURES}})
    t = paired_differences(pd.concat([d, alone], ignore_index=True))
    base = paired_differences(d)
    assert (t["k_one_side"] == base["k_one_side"] + 1).all() and (t["n_one_side"] >= 7).all()
    assert np.allclose(t["value"], base["value"]) and t["note"].str.contains("one side only").all()
