"""The cache copies each batch to the host once, with the values the per-site, per-row copies gave bit for bit."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from evenhand.activations import CacheOptions, host_rows, nnsight_runner
from evenhand.models.sites import expand, resolve
from evenhand.prompts import model_text, user_message


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
    got = host_rows(saved)
    assert copies.n == 1
    assert same_bits(got, want)
    assert host_rows({}) == []


def test_the_checks_catch_a_changed_value_and_extra_copies(monkeypatch):
    """Constructed failures: float16 on the way loses bits of float32 values; per-row copies are many."""
    saved = {"a": torch.randn(3, 8, dtype=torch.float64) / 3, "b": torch.randn(3, 8) / 3}
    assert not same_bits(host_rows({k: v.half() for k, v in saved.items()}), per_row(saved))
    nan_moved = {"a": saved["a"].clone(), "b": saved["b"]}
    nan_moved["a"][1, 2] = float("nan")
    assert not same_bits(host_rows(nan_moved), per_row(saved))
    copies = CountCopies(monkeypatch)
    per_row(saved)
    assert copies.n == 2 * 3


def test_nnsight_runner_copies_once_per_batch_and_keeps_the_values(tiny, smoke_items, monkeypatch):
    """Through the cache's own trace (every residual site, the name means): the rows equal the per-row copies."""
    from evenhand.activations import trace_body
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
    assert copies.n == 1
    # the reference: the same trace, each site of each row copied on its own
    from evenhand.activations import name_weights
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
