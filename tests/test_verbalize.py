"""Activations described in words (probes.verbalize): the identity patchscope reproduces the source's next-token
distribution (on a tiny random Gemma3 and on the model organism, from its activation cache) and a patch at the
wrong position does not; a description naming a candidate yields that candidate; a label planted in the patched
vectors is read back above chance while a shuffled-label control stays at chance."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from probes.dataset import ProbeDataset
from probes.logistic import ProbeOptions
from probes.verbalize import (
    VerbalizeOptions,
    describe,
    label_from_choice,
    patch_site,
    patched_logits,
    read_vectors,
    rule_choice,
    target_ids,
    verbalize_table,
)
from evenhand.models.sites import SiteError

TOL = 1e-5


def _next_token_logits(lm, ids):
    with torch.inference_mode():
        return lm.model(torch.tensor([list(ids)], device=lm.model.device)).logits[:, -1, :]


def _identity_gap(lm, ids, site, position, write_at=None):
    """max |logits| difference between the unpatched prompt and the prompt with its own ``site`` value at
    ``position`` written back at ``write_at`` (default: the same position)."""
    v = read_vectors(lm, [ids], site, position)
    patched = patched_logits(lm, ids, site, position if write_at is None else write_at, v)
    return float((patched - _next_token_logits(lm, ids)).abs().max())


@pytest.mark.parametrize("site", ["embed", "blocks.1.resid_pre", "blocks.1.resid_post"])
def test_identity_patchscope_reproduces_the_next_token_distribution(lm, smoke_items, site):
    """Source prompt = target prompt, same site, same position: the logits are the unpatched ones. The same
    vector written one token early (the off-by-one a broken patch makes) moves them: the check has power."""
    ids, last = target_ids(lm.tokenizer, smoke_items["prompt"].iloc[0], -1)
    for pos in (last, last - 5):
        assert _identity_gap(lm, ids, site, pos) < TOL
    assert _identity_gap(lm, ids, site, last, write_at=last - 1) > 10 * TOL


def test_read_vectors_batched_equals_one_pass_each_and_refuses_a_position_outside(lm, smoke_items):
    """Sequences of different lengths read in one left-padded batch give each sequence's own value at the
    position (a pick that ignored the padding would read another token: the first test's off-by-one moves the
    logits by more than 10x TOL); a position past a sequence's end is refused naming it."""
    seqs = [target_ids(lm.tokenizer, p, -1)[0] for p in smoke_items["prompt"].iloc[:4]]
    seqs[1] = seqs[1][:-3]
    assert len({len(s) for s in seqs}) > 1
    for pos in (-1, 2):
        one = read_vectors(lm, seqs, "blocks.1.resid_post", pos)
        batched = read_vectors(lm, seqs, "blocks.1.resid_post", pos, batch_size=4)
        assert one.shape == (4, lm.model.config.hidden_size) and float((one - batched).abs().max()) < 1e-4
    short = min(range(4), key=lambda k: len(seqs[k]))
    with pytest.raises(ValueError, match=f"outside sequence {short}'s {len(seqs[short])} tokens"):
        read_vectors(lm, seqs, "blocks.1.resid_post", len(seqs[short]))


def test_a_patch_changes_the_continuation(lm, smoke_items):
    """Another prompt's vector moves the logits (a patch that writes nothing passes the identity check) and
    the generation path patches like the logits path: its first token is their argmax."""
    ids, _ = target_ids(lm.tokenizer, smoke_items["prompt"].iloc[0], -1)
    other, _ = target_ids(lm.tokenizer, smoke_items["prompt"].iloc[7], -1)
    v = read_vectors(lm, [other], "blocks.1.resid_post", -1) * 4
    patched = patched_logits(lm, ids, "blocks.1.resid_post", -1, v)
    assert float((patched - _next_token_logits(lm, ids)).abs().max()) > 1e-2
    text = lm.tokenizer.decode(ids)
    first = describe(lm, v, "blocks.1.resid_post", VerbalizeOptions(target_prompt=text, max_new_tokens=1))[0]
    assert first == lm.tokenizer.decode([int(patched.argmax())]).strip()
    same = describe(lm, read_vectors(lm, [ids], "blocks.1.resid_post", -1), "blocks.1.resid_post",
                    VerbalizeOptions(target_prompt=text, max_new_tokens=3))[0]
    plain = lm.model.generate(torch.tensor([ids]), max_new_tokens=3, do_sample=False,
                              pad_token_id=lm.tokenizer.pad_token_id)
    assert same == lm.tokenizer.decode(plain[0, len(ids):], skip_special_tokens=True).strip()


def test_identity_patchscope_on_the_organism_from_its_activation_cache(tmp_path, smoke_items):
    """The organism's cached decision-token residual (float32, cached in a padded batch), written back into
    the item's own prompt at the same site and token, gives the unpatched next-token logits; written one token
    early it does not."""
    from evenhand.running.activations import CacheOptions, cache_activations
    from evenhand.models.loading import load_model
    from evenhand.vocab.prompts import model_text, user_message, uses_chat_template
    lm = load_model("evenhand-organism")
    items = smoke_items.iloc[[0, 5]].reset_index(drop=True)
    site = "blocks.1.resid_post"
    cache = cache_activations(items, lm, CacheOptions(sites=(site,), batch_size=2, dtype="float32", progress=False),
                              tmp_path / "acts")
    special = not uses_chat_template(lm.tokenizer, "auto")
    for j, item in enumerate(items.to_dict("records")):
        ids = lm.tokenizer(model_text(lm.tokenizer, user_message(item, "answer"), "auto"),
                          add_special_tokens=special)["input_ids"]
        _, v = cache.load(site, [item["item_id"]])
        ref = _next_token_logits(lm, ids)
        assert float((patched_logits(lm, ids, site, -1, v) - ref).abs().max()) < TOL
        assert float((patched_logits(lm, ids, site, -2, v) - ref).abs().max()) > 1e-3


def test_patch_targets_are_residual_sites(lm):
    assert patch_site(lm.model, "blocks.1.resid_pre") == patch_site(lm.model, "blocks.0.resid_post")
    assert patch_site(lm.model, "blocks.0.resid_pre").name == "embed"
    for bad in ("blocks.1.attn_out", "ln_final", "blocks.9.resid_post", "nope"):
        with pytest.raises(SiteError):
            patch_site(lm.model, bad)
    with pytest.raises(ValueError, match="outside the target prompt"):
        target_ids(lm.tokenizer, "A B", 5)


@pytest.mark.parametrize("text, expected", [
    ("Applicant B", "B"), ("applicant a", None), ("the candidate A is stronger", "A"), ("B.", "B"),
    ("A", "A"), ("-> A ;", "A"), ("A good choice", None), ("A or B", None), ("A is stronger", "A"), ("", None), (None, None),
    ("Fatima", "A"), ("fatima karimi", "A"), ("Elizabeth Taylor", "B"), ("Elizabeth and Fatima", None),
    ("Option B, Fatima", None), ("ABC", None),
])
def test_a_description_naming_a_candidate_yields_that_candidate(text, expected):
    assert rule_choice(text, "Applicant", {"A": "Fatima Karimi", "B": "Elizabeth Taylor"}) == expected


def test_the_named_candidate_becomes_the_label():
    """Naming slot A favours the minority-coded candidate where A is theirs on a positive question, or the other
    slot on a negative one; a description naming none leaves the row undecided (NaN)."""
    meta = pd.DataFrame({"minority_slot": ["A", "A", "B", "B", "A"],
                         "question_polarity": ["positive", "negative", "positive", "negative", "positive"],
                         "correct_slot": ["A", "B", "A", "B", "A"], "pressure_slot": [None, "A", "B", None, "A"]})
    choice = ["A", "A", "A", "A", None]
    np.testing.assert_array_equal(label_from_choice(meta, choice, "favours_minority"), [1, 0, 0, 1, np.nan])
    np.testing.assert_array_equal(label_from_choice(meta, choice, "correct"), [1, 0, 1, 0, np.nan])
    np.testing.assert_array_equal(label_from_choice(meta, choice, "departed"), [0, 1, 0, 1, np.nan])
    np.testing.assert_array_equal(label_from_choice(meta, choice, "pressure_followed"), [0, 1, 0, 0, np.nan])
    with pytest.raises(ValueError, match="flipped"):
        label_from_choice(meta, choice, "flipped")


def _planted(lm, n_scenarios=12, per=5, seed=0):
    """A dataset whose vectors at the last layer carry the label: the unembedding row of ``A`` (label 1) or
    ``B`` (label 0) plus noise; the minority-coded candidate is in slot A, the question positive."""
    rng = np.random.default_rng(seed)
    n = n_scenarios * per
    y = rng.permutation(np.arange(n) % 2)
    emb = lm.model.get_output_embeddings().weight.detach().numpy()
    tok = {s: lm.tokenizer.convert_tokens_to_ids(s) for s in "AB"}
    rows = np.stack([emb[tok["A" if v else "B"]] for v in y])
    X = 3 * rows / np.linalg.norm(rows, axis=1, keepdims=True) * np.sqrt(rows.shape[1])
    X = (X + rng.normal(0, 1.0, X.shape)).astype(np.float32)
    meta = pd.DataFrame({"item_id": [f"i{i}" for i in range(n)], "scenario_id": np.repeat(np.arange(n_scenarios), per).astype(str),
                         "minority_slot": "A", "question_polarity": "positive", "candidate_noun": "Applicant"})
    site = "blocks.2.resid_post"
    return ProbeDataset({site: X}, y, meta["scenario_id"].to_numpy(object), meta, "favours_minority",
                        design=rng.normal(size=(n, 2))), site


def test_a_label_planted_in_the_vectors_is_read_off_the_descriptions(lm):
    """The rules and the classifier recover the planted label (CI above chance); the classifier on shuffled
    labels stays at chance: not above it, and within 15 points below (cross-validation's anti-learning)."""
    ds, site = _planted(lm)
    descs = describe(lm, ds.features[site], site, VerbalizeOptions(target_prompt="the first candidate ?",
                                                                   max_new_tokens=1))
    t = verbalize_table(ds, {site: descs}, ProbeOptions(folds=4, inner_folds=2), resamples=200)
    get = {(r.method, r.metric): r for r in t.itertuples()}
    for m in ("verbal_rules", "decodability", "linear_probe"):
        assert get[(m, "accuracy")].ci_low > 0.5, (m, get[(m, "accuracy")])
        assert get[(f"{m} - chance", "accuracy_difference")].ci_low > 0
    shuffled = get[("shuffled_control - chance", "accuracy_difference")]
    assert shuffled.ci_low <= 0 and abs(shuffled.value) < 0.15, shuffled
    assert get[("chance", "accuracy")].value == 0.5
    assert set(t["interval"]) == {"percentile", "jackknife-t", "none"}


def _mixed_dataset(n_scenarios=10, per=8, seed=0):
    """GT and AMB rows (half each) with random features; the minority-coded candidate in slot A, so the label
    favours_minority is 1 when the model chose A."""
    rng = np.random.default_rng(seed)
    n = n_scenarios * per
    y = rng.permutation(np.arange(n) % 2)
    meta = pd.DataFrame({"item_id": [f"i{i}" for i in range(n)],
                         "scenario_id": np.repeat(np.arange(n_scenarios), per).astype(str),
                         "minority_slot": "A", "question_polarity": "positive", "candidate_noun": "Applicant",
                         "condition": np.tile(["GT", "AMB"], n // 2)})
    return ProbeDataset({"blocks.0.resid_post": rng.normal(size=(n, 8))}, y, meta["scenario_id"].to_numpy(object),
                        meta, "favours_minority", design=rng.normal(size=(n, 2)))


def test_verbalization_headline_is_computed_on_amb_rows_only():
    """A reader (scripted judge) that reads the chosen side off every GT description and off no AMB one: the
    headline (AMB rows) is 0, though on all rows it would be 50%; a reader that reads it off AMB descriptions
    only gives 1. The probe and evidence rows beside the headline are on the same AMB rows."""
    import re

    from evenhand.framing.judge import ScriptedJudge
    ds = _mixed_dataset()
    descs = [f"{'GT' if c == 'GT' else 'AMB'} row {i}: the model chose Applicant {'A' if v else 'B'}"
             for i, (c, v) in enumerate(zip(ds.meta["condition"], ds.y))]

    def reader(on: str):
        def answer(prompt: str) -> str:
            d = re.search(r'Description: "(.*)"', prompt).group(1)
            return d[-1] if d.startswith(on) else "neither"
        return ScriptedJudge(answer)
    opts = ProbeOptions(folds=4, inner_folds=2)
    for on, want in (("GT", 0.0), ("AMB", 1.0)):
        t = verbalize_table(ds, {"blocks.0.resid_post": descs}, opts, resamples=50, shuffles=2, reader=reader(on))
        head = t[(t["rows"] == "AMB") & (t["method"] == "verbal_reader") & (t["metric"] == "verbalized")].iloc[0]
        assert head["value"] == want and head["n"] == len(ds) // 2, head
        every = t[(t["rows"] == "all") & (t["method"] == "verbal_reader") & (t["metric"] == "verbalized")].iloc[0]
        assert every["value"] == 0.5 and every["n"] == len(ds)
        beside = t[(t["rows"] == "AMB") & t["method"].isin(["linear_probe", "evidence"])]
        assert set(beside["method"]) == {"linear_probe", "evidence"} and (beside["n"] == len(ds) // 2).all()
    assert "decodability" in set(t["method"]) and "verbal_classifier" not in set(t["method"])


def test_the_reader_runs_through_an_engine_with_the_organism_as_plumbing_judge():
    """The reader path end to end on a real engine (hf) with the model organism as the judge: one reply per
    description, read as A, B or neither. Plumbing only: the organism was trained to answer the suite, not to
    read descriptions, so what it reads is no finding."""
    from evenhand.framing.judge import load_judge
    from probes.verbalize import reader_choices
    ds = _mixed_dataset(n_scenarios=2, per=2)
    reader = load_judge("evenhand-organism", "hf", "cpu", max_new_tokens=4)
    picked = reader_choices(ds, ["Applicant A", "Applicant B", "nothing", "the stronger one"], reader)
    assert len(picked) == 4 and set(picked) <= {"A", "B", None}
