"""The one activation reader (evenhand/engine/reader.py): the cache's backends read what the hooks reader reads,
and caching, fitting and the fits on them give the bytes they gave before the reader was one.

Each check is shown to fail on a constructed bad case: a reader under an edit of 1e-6 differs from the cache; a
fitting read in the wrong batches differs from the recorded digest; an ``site_activations`` that writes a cache
to disk raises."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from evenhand.running.activations import CacheOptions, cache_activations
from evenhand.engine.batching import plan_equal_length
from evenhand.engine.reader import hook_runner, last_token_activations, read
from evenhand.models.tiny import ARCHITECTURES
from evenhand.vocab.prompts import model_text, user_message

from .reader_reference import ORGANISM, RECORDED, cache_digests, digest, fit_digests, items, read_digests


def _seqs(lm, rows) -> list[list[int]]:
    return [lm.tokenizer(model_text(lm.tokenizer, user_message(r, "answer")), add_special_tokens=False)["input_ids"]
            for r in rows.to_dict("records")]


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_the_hooks_and_nnsight_backends_cache_the_hooks_readers_bits(tiny, arch, smoke_items, tmp_path):
    """Every site of every layer (input and output ports), cached by nnsight and by hooks, equals the hooks reader
    bit for bit; the same reader under ``Add`` of 1e-6 at the first layer does not (the comparison can fail)."""
    from evenhand.engine.hooks import Add
    lm, rows = tiny[arch], smoke_items.head(9)
    opts = CacheOptions(sites=("all",), batch_size=4, dtype="float32", progress=False)
    nn = cache_activations(rows, lm, opts, tmp_path / "nn")
    hk = cache_activations(rows, lm, opts, tmp_path / "hooks", backend="hooks")
    ids = rows["item_id"].tolist()
    ref = last_token_activations(lm, _seqs(lm, rows), nn.sites, 4, by_length=True)
    assert hk.sites == nn.sites and len(nn.sites) > 10
    for s in nn.sites:
        np.testing.assert_array_equal(nn.load(s, ids)[1], ref[s], err_msg=s)
        np.testing.assert_array_equal(hk.load(s, ids)[1], ref[s], err_msg=s)
    d = lm.model.config.get_text_config().hidden_size
    nudged = last_token_activations(lm, _seqs(lm, rows), ["ln_final"], 4, by_length=True,
                                    edits={"blocks.0.resid_post": Add(torch.full((d,), 1e-6))})
    assert not np.array_equal(nudged["ln_final"], ref["ln_final"])


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_the_transformer_lens_backend_caches_what_the_hooks_reader_reads(tiny, arch, smoke_items, tmp_path):
    """TransformerLens's cache equals the hooks reader in the bridge's batches (equal lengths, no padding) to 1e-5:
    the bridge runs its own copy of the modules with eager attention, so the last bits may differ. A reader of
    the next layer is refused by the same tolerance."""
    lm, rows = tiny[arch], smoke_items.head(9)
    opts = CacheOptions(sites=("residual",), batch_size=4, dtype="float32", progress=False)
    tl = cache_activations(rows, lm, opts, tmp_path / "tl", backend="transformer_lens")
    seqs = _seqs(lm, rows)
    sites = ["embed"] + [f"blocks.{i}.resid_post" for i in range(len(tl.sites) - 1)]
    got: dict[int, dict] = {}
    with hook_runner(lm.model, lm.tokenizer.pad_token_id, seqs, sites, lambda h, idx: h[:, -1]) as run:
        read(run, plan_equal_length([len(s) for s in seqs], 4), 4, lambda idx, rs: got.update(zip(idx, rs)))
    ids = rows["item_id"].tolist()
    for s, key in zip(sites, tl.sites):
        ref = np.stack([got[i][s] for i in range(len(seqs))])
        np.testing.assert_allclose(tl.load(key, ids)[1], ref, atol=1e-5, rtol=0, err_msg=s)
    assert not np.allclose(tl.load(tl.sites[1], ids)[1], np.stack([got[i][sites[2]] for i in range(len(seqs))]),
                           atol=1e-5)


def test_caching_fitting_and_decisions_give_the_recorded_bytes(monkeypatch):
    """The digests of tests/reader_reference.py, recorded on the code before the one reader (c473b5e: the cache
    through nnsight and TransformerLens, ``site_activations`` through a cache on disk, five fits and decisions under
    them), are reproduced to the byte. The same fitting read in input order instead of the cache's batches gives
    another digest (the padding differs), so the check sees a change of batches."""
    from evenhand.models.loading import load_model
    from interventions import steered
    from interventions.reading import prompt_ids
    lm = load_model(str(ORGANISM))
    want = json.loads(RECORDED.read_text())
    train, test = items()
    wrong = last_token_activations(lm, [prompt_ids(lm, r) for r in train.head(12).to_dict("records")],
                                   ["blocks.0.resid_post"], 5)
    assert digest(wrong["blocks.0.resid_post"]) != want["site_activations blocks.0.resid_post"]

    got = cache_digests(lm, train, "nnsight") | cache_digests(lm, train, "transformer_lens")

    def no_disk(*args, **kwargs):
        raise AssertionError("site_activations wrote a cache to disk")
    monkeypatch.setattr("evenhand.running.activations.cache_activations", no_disk)
    monkeypatch.setattr("tempfile.TemporaryDirectory", no_disk)
    assert not hasattr(steered, "cache_activations")
    got |= read_digests(lm, train) | fit_digests(lm, train, test)
    assert {k: got.get(k) for k in want if got.get(k) != want[k]} == {} and len(got) == len(want)
