"""The cache copies each batch to the host once, with the values the per-site, per-row copies gave bit for bit."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from evenhand.running.activations import CacheOptions, nnsight_runner
from evenhand.engine.reader import host_rows
from evenhand.models.sites import expand, resolve
from evenhand.vocab.prompts import model_text, user_message


def per_row(saved: dict) -> list[dict]:
    """The cache's copies before: each site of each row to the host on its own."""
    n = next(iter(saved.values())).shape[0]
    return [{k: v[j].float().cpu().numpy() for k, v in saved.items()} for j in range(n)]


def same_array(x: np.ndarray, y: np.ndarray) -> bool:
    """Equal dtype, NaN in the same places and every other value equal bit for bit (a NaN's payload may
    differ: on CPU, torch's float16 -> float32 conversion gives 0x7fffffff in the scalar tail of a row and
    the canonical 0x7fc00000 in its vectorised part)."""
    nx, ny = np.isnan(x), np.isnan(y)
    return x.dtype == y.dtype and x.shape == y.shape and np.array_equal(nx, ny) and x[~nx].tobytes() == y[~ny].tobytes()


def same_bits(a: list[dict], b: list[dict]) -> bool:
    return len(a) == len(b) and all(x.keys() == y.keys() and all(same_array(x[k], y[k]) for k in x)
                                    for x, y in zip(a, b))


class CountCopies:
    """Counts the ``Tensor.cpu`` calls (the device-to-host copies on a GPU) made while it is active."""

    def __init__(self, monkeypatch):
        self.n = 0
        real = torch.Tensor.cpu

        def counted(t, *args, **kwargs):
            self.n += 1
            return real(t, *args, **kwargs)
        monkeypatch.setattr(torch.Tensor, "cpu", counted)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_host_rows_equal_per_row_copies_bit_for_bit(dtype, monkeypatch):
    g = torch.Generator().manual_seed(0)
    saved = {f"blocks.{i}.resid_post": (torch.randn(5, 12, generator=g) * 100).to(dtype) for i in range(7)}
    saved["blocks.0.resid_post@name_A"] = torch.full((5, 12), float("nan"), dtype=dtype)
    want = per_row(saved)
    copies = CountCopies(monkeypatch)
    got = host_rows(saved, stack=True)  # what a GPU batch takes: one copy
    assert copies.n == 1
    assert same_bits(got, want)
    on_cpu = host_rows(saved)  # on the CPU: one conversion per site, no stack
    assert same_bits(on_cpu, want) and copies.n == 1 + len(saved)
    assert host_rows({}) == []


def test_the_checks_catch_a_changed_value_and_extra_copies(monkeypatch):
    """Constructed failures: float16 on the way loses bits of float32 values; per-row copies are many."""
    saved = {"a": torch.randn(3, 8, dtype=torch.float64) / 3, "b": torch.randn(3, 8) / 3}
    assert not same_bits(host_rows({k: v.half() for k, v in saved.items()}, stack=True), per_row(saved))
    nan_moved = {"a": saved["a"].clone(), "b": saved["b"]}
    nan_moved["a"][1, 2] = float("nan")
    assert not same_bits(host_rows(nan_moved, stack=True), per_row(saved))
    copies = CountCopies(monkeypatch)
    per_row(saved)
    assert copies.n == 2 * 3


def test_nnsight_runner_copies_once_per_batch_and_keeps_the_values(tiny, smoke_items, monkeypatch):
    """Through the cache's own trace (every residual site, the name means): the rows equal the per-row copies
    (the stacked path, one copy per batch, is what a GPU takes: tested on the same tensors above)."""
    from evenhand.running.activations import trace_body
    from evenhand.engine.batching import left_pad
    from nnsight import TransformersModel
    lm = tiny["gemma3"]
    items = pd.concat([smoke_items[smoke_items["degree"] == 1].head(3), smoke_items[smoke_items["degree"] == 3].head(2)])
    todo = items.to_dict("records")
    texts = [model_text(lm.tokenizer, user_message(r, "answer")) for r in todo]
    special = False
    resolved = [resolve(lm.model, s) for s in expand(lm.model, ["residual"])]
    opts = CacheOptions(name_mean=True, progress=False)
    run = nnsight_runner(lm, texts, todo, special, resolved, opts)
    copies = CountCopies(monkeypatch)
    with torch.inference_mode():
        got = run(list(range(len(todo))))
    assert copies.n == 3 * len(resolved)  # on the CPU: one per site, not per site and row
    # the reference: the same trace, each site of each row copied on its own
    from evenhand.running.activations import name_weights
    enc = [lm.tokenizer(t, add_special_tokens=special)["input_ids"] for t in texts]
    ids, mask, pos = left_pad(enc, lm.tokenizer.pad_token_id, lm.model.device)
    weights, _ = name_weights(lm.tokenizer, texts, todo, ids.shape[1], [len(e) for e in enc])
    traced = TransformersModel(lm.model, tokenizer=lm.tokenizer)
    with torch.inference_mode():
        with traced.trace(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=1):
            saved = trace_body(traced, resolved, weights)
    want = per_row(dict(saved))
    assert len(got[0]) == 3 * len(resolved) and same_bits(got, want)
    assert np.isnan(got[4]["blocks.1.resid_post@name_A"]).all() and np.isfinite(got[0]["embed"]).all()


def test_merge_caches_gathers_parts_into_one_cache(tiny, smoke_items, tmp_path):
    """Two parts merged hold the parts' values and equal one cache of all the items (up to the rounding
    of other batch shapes); a merge cut short (a part missing) writes no index; parts that disagree are
    refused."""
    from evenhand.running.activations import ActivationCache, cache_activations, merge_caches
    lm = tiny["qwen2"]
    items = smoke_items.head(8)
    ids = items["item_id"].tolist()
    opts = CacheOptions(batch_size=4, dtype="float32", progress=False)
    whole = cache_activations(items, lm, opts, tmp_path / "whole")
    out = tmp_path / "merged"
    parts = [out / "ray-0000", out / "ray-0001"]
    made = [cache_activations(items.head(4), lm, opts, parts[0]), cache_activations(items.tail(4), lm, opts, parts[1])]
    values = {site: np.concatenate([c.load(site)[1] for c in made]) for site in whole.sites}
    part_ids = made[0].item_ids() + made[1].item_ids()
    partial = merge_caches(parts[:1], out, ids)  # not every item: no index, the parts stay
    assert len(partial.item_ids()) == 4 and not (out / "index.json").exists() and parts[0].exists()
    merged = merge_caches(parts, out, ids)
    assert sorted(merged.item_ids()) == sorted(ids) and (out / "index.json").exists()
    assert not parts[0].exists() and not parts[1].exists()
    for site in whole.sites:  # the parts' values exactly; a whole cache's up to float rounding (other batches)
        assert np.array_equal(ActivationCache(out).load(site, part_ids)[1], values[site]), site
        np.testing.assert_allclose(whole.load(site, ids)[1], ActivationCache(out).load(site, ids)[1], rtol=0, atol=1e-6)
    other = cache_activations(items.head(2), lm, CacheOptions(batch_size=4, dtype="bfloat16", progress=False),
                              tmp_path / "bf16")
    again = cache_activations(items.head(2), lm, opts, tmp_path / "f32")
    with pytest.raises(ValueError, match="other sites, dtype or model"):
        merge_caches([again.path, other.path], tmp_path / "bad", ids)
    with pytest.raises(ValueError, match="no cache parts"):
        merge_caches([], tmp_path / "none", ids)
