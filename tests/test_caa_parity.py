"""``caa`` against its reference implementation, ``steering-vectors`` 0.12.2 (``train_steering_vector``,
``SteeringVector.apply``), on a tiny random Gemma3: the same contrastive pairs, layer and read token give the same
vector (1e-5), and steering with it gives the same logits. Departures (the vector read one token early, or one layer
off) are constructed and must fail the same comparison.

The library reads ``decoder_block`` layer ``L`` as the output of ``model.layers[L]`` (our ``blocks.L.resid_post``),
at ``read_token_index`` of each string (here the first token where the two labels differ, the answer letter), and
aggregates with ``mean_aggregator`` (the plain mean over pairs). Ours weighs the two answer letters equally, so the
like-for-like reference is the library's vector on the letter-A pairs and on the letter-B pairs, averaged; on a
balanced set the library's plain mean is the same thing.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

sv = pytest.importorskip("steering_vectors", reason="steering-vectors 0.12.2 (pip install --no-deps) is the reference")

from evenhand.engine.positions import answer_tokens  # noqa: E402
from evenhand.vocab.prompts import continuation, labels, model_text, user_message  # noqa: E402
from interventions import steered  # noqa: E402
from interventions.registry import get  # noqa: E402
from interventions.steered import contrast_pairs  # noqa: E402

LAYER = 1
SITE = f"blocks.{LAYER}.resid_post"


def _library_samples(lm, pairs):
    """The pairs as the library takes them: (prompt + behaviour's label, prompt + opposite label) strings, each read
    at the first token where the two tokenised strings differ (found here, independently of interventions.reading)."""
    tok = lm.tokenizer
    out = []
    for item, pos, neg in pairs:
        text = model_text(tok, user_message(item, "answer"))
        lab = dict(zip("AB", labels(item)))
        p, n = text + continuation(text, lab[pos]), text + continuation(text, lab[neg])
        ip, ineg = tok(p)["input_ids"], tok(n)["input_ids"]
        k = next(j for j, (x, y) in enumerate(zip(ip, ineg)) if x != y)
        out.append(sv.SteeringVectorTrainingSample(p, n, read_positive_token_index=k, read_negative_token_index=k))
    return out


def _library_vector(lm, train_items, contrast="evidence", plain=False) -> np.ndarray:
    """steering-vectors' vector at LAYER, the two answer letters weighted equally (as ours); ``plain``: its default,
    the plain mean over all pairs (the letter means weighted by their pair counts)."""
    pairs = contrast_pairs(train_items, contrast)
    samples = _library_samples(lm, pairs)
    by_letter, counts = [], []
    for letter in "AB":
        chosen = [s for s, (_, p, _) in zip(samples, pairs) if p == letter]
        vec = sv.train_steering_vector(lm.model, lm.tokenizer, chosen, layers=[LAYER], batch_size=1)
        by_letter.append(vec.layer_activations[LAYER].double().numpy())
        counts.append(len(chosen))
    if plain:
        return (counts[0] * by_letter[0] + counts[1] * by_letter[1]) / sum(counts)
    return (by_letter[0] + by_letter[1]) / 2


def _ours(lm, train_items, contrast="evidence"):
    return get("caa").fit(lm, train_items, {"layers": [LAYER], "batch_size": 8, "contrast": contrast})


def test_the_library_reads_the_same_tokens_we_do(lm, train_items):
    """Like with like: the library's tokenisation of each string is our sequence, read at our last position."""
    from interventions.reading import answer_sequences
    pairs = contrast_pairs(train_items, "evidence")
    for s, (item, pos, neg) in zip(_library_samples(lm, pairs), pairs):
        ours = answer_sequences(lm, item)
        assert lm.tokenizer(s.positive_str)["input_ids"][:s.read_positive_token_index + 1] == ours[pos]
        assert lm.tokenizer(s.negative_str)["input_ids"][:s.read_negative_token_index + 1] == ours[neg]


@pytest.mark.parametrize("contrast", ["evidence", "minority"])
def test_caa_vector_equals_steering_vectors(lm, train_items, contrast):
    ref = _library_vector(lm, train_items, contrast)
    got = _ours(lm, train_items, contrast).tensors[f"{SITE}/direction"].double().numpy()
    gap = np.abs(got - ref).max()
    plain = np.abs(got - _library_vector(lm, train_items, contrast, plain=True)).max()
    print(f"caa ({contrast}) vs steering-vectors: max abs difference {gap:.2e} (vector norm {np.linalg.norm(ref):.3f}); "
          f"vs the library's plain mean over these unbalanced pairs {plain:.2e}")
    assert gap < 1e-5


def test_on_a_balanced_set_the_library_plain_mean_is_ours(lm, train_items):
    """Letter-balanced pairs: the library's default (the plain mean over all pairs) equals ours."""
    pairs = contrast_pairs(train_items, "minority")
    a = [i for i, (_, p, _) in enumerate(pairs) if p == "A"]
    b = [i for i, (_, p, _) in enumerate(pairs) if p == "B"]
    m = min(len(a), len(b))
    keep = sorted(a[:m] + b[:m])
    items = train_items.iloc[keep].reset_index(drop=True)
    vec = sv.train_steering_vector(lm.model, lm.tokenizer, _library_samples(lm, contrast_pairs(items, "minority")),
                                   layers=[LAYER])
    got = _ours(lm, items, "minority").tensors[f"{SITE}/direction"].double().numpy()
    assert np.abs(got - vec.layer_activations[LAYER].double().numpy()).max() < 1e-5


def _departure_gap(lm, train_items, monkeypatch, shift_token=0, shift_layer=0) -> float:
    """Max abs difference to the library of a caa fit whose read token or layer is moved."""
    real_seqs, real_sites = steered.answer_sequences, steered.layer_sites
    if shift_token:
        monkeypatch.setattr(steered, "answer_sequences",
                            lambda lm_, item: {k: v[:len(v) - shift_token] for k, v in real_seqs(lm_, item).items()})
    if shift_layer:
        monkeypatch.setattr(steered, "layer_sites",
                            lambda lm_, layers: [f"blocks.{LAYER + shift_layer}.resid_post"])
    fitted = _ours(lm, train_items)
    monkeypatch.setattr(steered, "answer_sequences", real_seqs)
    monkeypatch.setattr(steered, "layer_sites", real_sites)
    got = fitted.tensors[f"{fitted.info['sites'][0]}/direction"].double().numpy()
    return float(np.abs(got - _library_vector(lm, train_items)).max())


@pytest.mark.parametrize("departure", [{"shift_token": 1}, {"shift_layer": -1}])
def test_the_parity_check_fails_on_a_departure(lm, train_items, monkeypatch, departure):
    """A vector read one token before the answer letter (the last prompt token: both members of a pair then read
    the same activation), or at layer L-1, is caught by the comparison above."""
    gap = _departure_gap(lm, train_items, monkeypatch, **departure)
    print(f"caa departure {departure}: max abs difference to steering-vectors {gap:.2e}")
    assert gap > 1e-3


@pytest.mark.parametrize("positions,min_token_index", [("all", 0), ("generated", None)])
def test_steering_gives_the_library_logits(lm, train_items, positions, min_token_index):
    """Our apply (alpha 4) against ``SteeringVector.apply(multiplier=4)`` on the same vector: the same logits on
    prompts followed by a label's tokens; ``generated`` is the library's ``min_token_index`` = prompt length."""
    from interventions.reading import answer_sequences, prompt_ids
    caa = get("caa")
    fitted = _ours(lm, train_items)
    vector = sv.SteeringVector({LAYER: fitted.tensors[f"{SITE}/direction"]})
    items = train_items.head(4).to_dict("records")
    base_gap, gaps = [], []
    for item in items:
        seq = answer_sequences(lm, item)["A"]
        n_prompt = len(prompt_ids(lm, item))
        ids = torch.tensor([seq])
        with torch.no_grad():
            base = lm.model(input_ids=ids).logits
            with vector.apply(lm.model, multiplier=4.0,
                              min_token_index=n_prompt if min_token_index is None else min_token_index):
                ref = lm.model(input_ids=ids).logits
            with caa.apply(fitted, lm, {"alpha": 4.0, "positions": positions}), answer_tokens([len(seq) - n_prompt]):
                got = lm.model(input_ids=ids).logits
        gaps.append(float((got - ref).abs().max()))
        base_gap.append(float((base - ref).abs().max()))
    print(f"caa logits vs steering-vectors ({positions}): max abs difference {max(gaps):.2e}; "
          f"steering moved the logits by up to {max(base_gap):.2e}")
    assert max(gaps) < 1e-5 < min(base_gap)
