"""``ace`` as Karvonen & Marks 2025 use affine concept editing: the concept is the candidate's demographic coding,
read over every token of each candidate's profile and averaged per candidate; the direction is the difference of
the two classes' means, the edit sets the component along it to their midpoint at every layer and position.

A synthetic case with a known answer checks the estimator (and that the old, relational estimator at the decision
token, or reading one token per profile, gives another answer); the tiny Gemma3 checks the spans, the fit against an
independent reading of the states, and that the edit acts at every position."""
from __future__ import annotations

import numpy as np
import pytest

from interventions.base import InterventionError
from evenhand.engine.reader import token_states
from interventions.reading import prompt_ids
from interventions.registry import get
from interventions.steered import (ACE, PAIR_STRATA, concept_labels, demographic_activations, pair_flipped,
                                  profile_spans, relabelled)
from tests.helpers import span_means


# --- a constructed case with a known answer ----------------------------------------------------------------------
def _synthetic(seed=0, n=40, d=16, length=30):
    """Sequences whose minority-coded candidate's profile tokens are ``base + u + noise`` and the majority-coded one's
    ``base - u + noise`` (noise summing to zero over each profile), slot A's profile also carries ``v`` and the last
    token carries only which slot the minority-coded candidate is in (``w``). The demographic direction is 2u and
    the midpoint the mean of the items' bases plus v/2 (half the profiles are slot A's)."""
    rng = np.random.default_rng(seed)
    u, v, w = (rng.standard_normal(d) for _ in range(3))
    states, spans, last, slot_a = [], [], [], []
    base_all = []
    for i in range(n):
        base = rng.standard_normal(d)
        base_all.append(base)
        h = rng.standard_normal((length, d))
        a, b = (2, 2 + 5 + i % 4), (15, 15 + 4 + i % 3)  # profile spans of unequal lengths
        minority_in_a = i % 2 == 0
        for (s, e), is_a in ((a, True), (b, False)):
            noise = rng.standard_normal((e - s, d))
            sign = 1.0 if (is_a == minority_in_a) else -1.0
            h[s:e] = base + sign * u + (v if is_a else 0) + noise - noise.mean(0)
        h[-1] = base + (w if minority_in_a else -w)
        states.append(h)
        spans.append((a, b) if minority_in_a else (b, a))  # (minority's span, majority's span)
        last.append(h[-1])
        slot_a.append(int(minority_in_a))
    return dict(states=states, spans=spans, u=u, v=v, w=w, base=np.mean(base_all, 0) + v / 2, last=np.array(last),
                slot_a=np.array(slot_a))


def _demographic_fit(states, spans):
    """The shipped estimator: per-candidate profile means (minority, majority, ...) and ACE's site tensors."""
    mino = span_means(states, [m for m, _ in spans])
    majo = span_means(states, [j for _, j in spans])
    X = np.stack([mino, majo], 1).reshape(2 * len(spans), -1)
    t = ACE.site_tensors(X, np.tile([1, 0], len(spans)), "s")
    return t["s/direction"].double().numpy(), t["s/mean"].double().numpy()


def test_the_demographic_direction_and_mean_are_the_known_ones():
    case = _synthetic()
    direction, mean = _demographic_fit(case["states"], case["spans"])
    err = max(np.abs(direction - 2 * case["u"]).max(), np.abs(mean - case["base"]).max())
    print(f"ace demographic estimator on the constructed case: max abs error {err:.2e}")
    assert err < 1e-5
    # departures give another answer, so the check above can fail:
    rel = ACE.site_tensors(case["last"], case["slot_a"], "s")["s/direction"].double().numpy()  # relational, last token
    assert np.abs(rel - 2 * case["u"]).max() > 0.5
    one_token = _demographic_fit(case["states"], [((m[1] - 1, m[1]), (j[1] - 1, j[1])) for m, j in case["spans"]])
    assert np.abs(one_token[0] - 2 * case["u"]).max() > 0.1  # one token per profile, not the mean over positions
    pooled_a = [((m[0], m[1]), (j[0], j[1])) for m, j in case["spans"]]
    swapped = _demographic_fit(case["states"], [(j, m) for m, j in pooled_a])
    assert np.abs(swapped[0] + 2 * case["u"]).max() < 1e-5  # the classes swapped: the sign flips


# --- on the tiny Gemma3 ------------------------------------------------------------------------------------------
def test_profile_spans_are_each_candidates_profile_line(lm, smoke_items):
    """Every cued smoke item: each span decodes to the line that opens with the candidate's noun and slot and holds
    their name (degree 1) or description, inside the prompt's tokens; the two spans do not overlap."""
    n = 0
    for r in smoke_items[smoke_items["degree"] > 0].to_dict("records"):
        ids, spans = profile_spans(lm, r)
        assert ids == prompt_ids(lm, r)
        (a0, a1), (b0, b1) = spans["A"], spans["B"]
        assert 0 <= a0 < a1 <= b0 < b1 <= len(ids) or 0 <= b0 < b1 <= a0 < a1 <= len(ids)
        for slot, (s, e) in spans.items():
            text = lm.tokenizer.decode(ids[s:e])
            assert text.startswith(f"{r['candidate_noun']} {slot}"), (r["item_id"], text)
            if isinstance(r.get("names"), dict):
                assert r["names"][slot].split()[0] in text
        n += 1
    assert n == (smoke_items["degree"] > 0).sum()
    broken = {**smoke_items[smoke_items["degree"] > 0].iloc[0].to_dict(), "candidate_noun": "Nobody"}
    with pytest.raises(InterventionError, match="no profile line for candidate A"):
        profile_spans(lm, broken)


def test_the_fit_is_the_mean_over_each_profile(lm, train_items):
    """ace's default fit against the states read independently (token_states, one site at a time): direction =
    mean over minority-coded profiles minus mean over majority-coded ones, mean = their midpoint, to 1e-5."""
    ace = get("ace")
    fitted = ace.fit(lm, train_items, {"layers": [0, 1], "batch_size": 8})
    assert fitted.info["concept"] == "demographic" and fitted.info["n_train"] == len(train_items)
    recs = train_items.to_dict("records")
    found = [profile_spans(lm, r) for r in recs]
    other = {"A": "B", "B": "A"}
    for site in fitted.info["sites"]:
        states = token_states(lm, [ids for ids, _ in found], site, 8)
        mino = np.stack([h[sp[r["minority_slot"]][0]:sp[r["minority_slot"]][1]].astype(float).mean(0)
                         for h, (_, sp), r in zip(states, found, recs)])
        majo = np.stack([h[sp[other[r["minority_slot"]]][0]:sp[other[r["minority_slot"]]][1]].astype(float).mean(0)
                         for h, (_, sp), r in zip(states, found, recs)])
        got_dir = fitted.tensors[f"{site}/direction"].double().numpy()
        got_mean = fitted.tensors[f"{site}/mean"].double().numpy()
        err = max(np.abs(got_dir - (mino.mean(0) - majo.mean(0))).max(),
                  np.abs(got_mean - (mino.mean(0) + majo.mean(0)) / 2).max())
        print(f"ace {site}: max abs difference to the independent reading {err:.2e} "
              f"(direction norm {np.linalg.norm(got_dir):.3f})")
        assert err < 1e-5
        last = np.stack([h[-1].astype(float) for h in states])  # the old read position, for contrast
        z = np.array([r["minority_slot"] == "A" for r in recs])
        old = last[z].mean(0) - last[~z].mean(0)
        print(f"ace {site}: the decision-token (relational) direction is {np.abs(got_dir - old).max():.2e} away")
        assert np.abs(got_dir - old).max() > 1e-2


def test_the_edit_sets_every_position_to_the_midpoint(lm, train_items, smoke_items):
    """Applied with its defaults (every position), the component along the direction is the midpoint's at every
    token of an unseen prompt; with positions 'last' the other tokens keep their own."""
    ace = get("ace")
    fitted = ace.fit(lm, train_items, {"layers": [1], "batch_size": 8})
    site = "blocks.1.resid_post"
    u = fitted.tensors[f"{site}/direction"].double().numpy()
    u /= np.linalg.norm(u)
    target = fitted.tensors[f"{site}/mean"].double().numpy() @ u
    seqs = [prompt_ids(lm, r) for r in smoke_items[smoke_items["degree"] > 0].tail(3).to_dict("records")]
    before = np.concatenate(token_states(lm, seqs, site)) @ u
    with ace.apply(fitted, lm):
        after = np.concatenate(token_states(lm, seqs, site)) @ u
    with ace.apply(fitted, lm, {"positions": "last"}):
        last_only = np.concatenate(token_states(lm, seqs, site)) @ u
    print(f"ace: |component - midpoint| at every position: before up to {np.abs(before - target).max():.2e}, "
          f"after up to {np.abs(after - target).max():.2e}")
    assert np.abs(after - target).max() < 1e-4 * max(1.0, abs(target)) < np.abs(before - target).max()
    assert np.abs(last_only - target).max() > 1e-2


def test_relational_is_the_concept_before_issue_28(lm, train_items):
    """``concept: relational``: which slot holds the minority-coded candidate, at the decision token (the old
    default), bit for bit the difference of means of the decision-token activations."""
    from evenhand.engine.reader import last_token_activations
    from steering.directions import diff_of_means
    ace = get("ace")
    fitted = ace.fit(lm, train_items, {"layers": [1], "batch_size": 8, "concept": "relational"})
    rows, z = concept_labels(train_items, "identity")
    X = last_token_activations(lm, [prompt_ids(lm, r) for r in rows.to_dict("records")], ["blocks.1.resid_post"],
                               8)["blocks.1.resid_post"]
    assert fitted.info["position"] == "decision token"
    assert np.abs(fitted.tensors["blocks.1.resid_post/direction"].double().numpy() - diff_of_means(X, z)).max() < 1e-5
    with pytest.raises(InterventionError, match="option concept must be one of demographic, relational, pressure"):
        ace.split_options({"concept": "identity"})
    with pytest.raises(InterventionError, match="concept 'demographic' needs train items with identity cues"):
        demographic_activations(lm, train_items.assign(degree=0), ["blocks.1.resid_post"])


# --- the control: the eraser refitted on relabelled pairs -------------------------------------------------------
def _paired_slot_rows(seed=0, n=300, d=32, slot_scale=20.0):
    """Paired rows with NO demographic concept: row pair i is (minority-coded, majority-coded) candidate, each row
    ``item_i + (+-slot) + noise`` with ``+slot`` for the candidate in slot A; the minority's slot alternates over
    the items (counterbalanced). Returns (rows [2n, d], labels, strata, the slot direction)."""
    rng = np.random.default_rng(seed)
    slot = rng.standard_normal(d)
    slot *= slot_scale / np.linalg.norm(slot)
    strata = np.arange(n) % 2  # 0: the minority-coded candidate is in slot A
    rows = []
    for i in range(n):
        item = rng.standard_normal(d)
        a, b = item + slot + rng.standard_normal(d), item - slot + rng.standard_normal(d)
        rows += [a, b] if strata[i] == 0 else [b, a]
    return np.array(rows), np.tile([1, 0], n), strata, slot


def test_the_control_relabels_pairs_within_slot_strata():
    """``pair_flipped`` swaps exactly half of each stratum's pairs (the odd one by a coin), keeps one row of each
    class per item, and is seeded; unpaired labels are refused."""
    z, strata = np.tile([1, 0], 9), np.array([0, 0, 0, 0, 1, 1, 1, 1, 1])
    fake = pair_flipped(z, strata, seed=3)
    flipped = fake[0::2] == 0
    assert np.all(fake[0::2] == 1 - fake[1::2])
    assert flipped[strata == 0].sum() == 2 and flipped[strata == 1].sum() in (2, 3)
    assert np.array_equal(pair_flipped(z, strata, seed=3), fake)
    assert any(not np.array_equal(pair_flipped(z, strata, seed=k), fake) for k in range(4, 10))
    with pytest.raises(InterventionError, match="one row of each class per item"):
        pair_flipped(np.array([1, 1, 0, 0]), np.array([0, 1]), seed=0)


def test_a_plain_permutation_reads_the_slot_where_the_paired_control_does_not():
    """A constructed case where the two relabellings differ: with no concept and a large slot direction that the
    real labels cancel by counterbalancing, a plain permutation of the rows leaves the slots unbalanced by chance
    and its difference of means points along the slot (median |cos| 0.71 over 20 seeds; a random direction's is about 0.12 in 32 dimensions); the
    paired, slot-stratified relabelling cancels it as the real labels do."""
    from steering.directions import diff_of_means
    cos_plain, cos_paired = [], []
    for seed in range(20):
        X, z, strata, slot = _paired_slot_rows(seed)
        for fake, out in ((relabelled(z, seed), cos_plain), (pair_flipped(z, strata, seed), cos_paired)):
            d = diff_of_means(X, fake)
            out.append(abs(d @ slot) / np.linalg.norm(d) / np.linalg.norm(slot))
        real = diff_of_means(X, z)
        assert abs(real @ slot) / np.linalg.norm(real) / np.linalg.norm(slot) < 0.6
    print(f"|cos(relabelled direction, slot)| over 20 seeds: plain permutation median {np.median(cos_plain):.2f}, "
          f"paired within strata median {np.median(cos_paired):.2f}")
    assert np.median(cos_plain) > 0.5 > 0.25 > np.median(cos_paired)


def test_the_ace_control_needs_the_pairs_strata(lm, train_items):
    """The fit stores each item's minority slot; the control refits on pair-flipped labels at every site, and a fit
    without the strata (made before) is refused with a message to fit again."""
    ace = get("ace")
    fitted = ace.fit(lm, train_items, {"layers": [1], "batch_size": 8})
    rows = train_items[train_items["degree"].astype(int) > 0]
    assert fitted.tensors[PAIR_STRATA].tolist() == (rows["minority_slot"] == "B").astype(int).tolist()
    control = ace.random_control(fitted, seed=5)
    want = pair_flipped(fitted.tensors["concept_labels"].numpy(), fitted.tensors[PAIR_STRATA].numpy(), 5)
    assert control.tensors["concept_labels"].tolist() == want.tolist()
    old = type(fitted)(fitted.name, dict(fitted.fit_options), fitted.seed, fitted.key, fitted.control,
                       dict(fitted.info), {k: t for k, t in fitted.tensors.items() if k != PAIR_STRATA})
    with pytest.raises(InterventionError, match="concept_pair_strata.*fit again"):
        ace.random_control(old, seed=5)


def test_the_eraser_control_diagnostic_on_constructed_fits():
    """bench_eraser_control's pure parts: the class-1 rows by slot (real paired labels keep the design's counts, a
    pair-flipped control splits each stratum evenly) and the variance along ``v`` over the mean per direction
    (a construction with variance 9 along ``v`` and 1 along three other axes: 9 / 3 = 3)."""
    import sys
    from pathlib import Path

    import torch

    from interventions.fitted import Fitted
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from bench_eraser_control import class1_by_slot, site_geometry

    rng = np.random.default_rng(0)
    n = 4000
    x = rng.standard_normal((n, 4)) * np.array([3.0, 1.0, 1.0, 1.0])
    strata = np.array([0] * 6 + [1] * 2)
    z = np.tile([1, 0], 8)
    tensors = {"concept_labels": torch.tensor(z), PAIR_STRATA: torch.tensor(strata),
               "s/direction": torch.tensor([1.0, 1.0, 0.0, 0.0]), "s/fit_activations": torch.tensor(x)}
    fit = Fitted("ace", {}, 0, "k", "none", {"sites": ["s"]}, tensors)
    assert class1_by_slot(fit) == {"A": 6, "B": 2}
    flipped = fit.replace_tensors({"concept_labels": torch.tensor(pair_flipped(z, strata, 1))}, "random")
    assert class1_by_slot(flipped) == {"A": 4, "B": 4}
    g = site_geometry(fit, np.array([1.0, 0.0, 0.0, 0.0]))["s"]
    assert abs(g["v_variance_ratio"] - 3.0) < 0.2 and abs(g["cos_v"] - 2 ** -0.5) < 1e-3
    assert site_geometry(fit, np.array([0.0, 1.0, 0.0, 0.0]))["s"]["v_variance_ratio"] < 0.5
