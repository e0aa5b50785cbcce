"""The activation cache never stores a dtype the model's values overflow, and refuses non-finite values.

The constructed failing case: an activation above float16's largest value (65,504), planted by scaling a
tiny model's embedding. The old writer (``np.stack(rows).astype(np.float16)``, float16 by default) turns it
into inf; the cache now stores float32 (float32 model) or bfloat16 (bfloat16 model, or asked) and the value
stays finite, and a real inf stops the cache with one line naming the site and the item."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from evenhand.running.activations import (ActivationCache, CacheOptions, NonFiniteActivation, cache_activations,
                                          storage_dtype, storage_tensors)
from evenhand.vocab.prompts import model_text, user_message, uses_chat_template

BIG = 70_000.0
"""Above float16's largest finite value, 65,504."""


def old_writer(rows: list[dict], keys: list[str], path) -> dict:
    """The cache's writer before: each site stacked and cast to float16, saved with safetensors' numpy API; read back."""
    from safetensors.numpy import load_file, save_file
    with np.errstate(over="ignore"):                   # the overflow this file demonstrates
        save_file({k: np.stack([r[k] for r in rows]).astype(np.float16) for k in keys}, str(path))
    return load_file(str(path))


def test_the_old_float16_path_writes_inf_and_the_new_one_keeps_the_value(tmp_path):
    rows = [{"embed": np.array([1.0, BIG, -BIG], np.float32)}, {"embed": np.array([2.0, 3.0, 4.0], np.float32)}]
    old = old_writer(rows, ["embed"], tmp_path / "old.safetensors")["embed"]
    assert np.isinf(old[0, 1]) and np.isinf(old[0, 2])                      # the overflow, explicitly
    for dtype in ("bfloat16", "float32"):
        t = storage_tensors(rows, ["embed"], ["i0", "i1"], dtype)["embed"]
        assert t.dtype == getattr(torch, dtype) and torch.isfinite(t).all()
        assert abs(float(t[0, 1]) - BIG) <= BIG * 2 ** -8                        # bfloat16: 8 bits of mantissa
    with pytest.raises(ValueError, match="float16 overflows above 65,504"):
        CacheOptions(dtype="float16")


def test_non_finite_values_are_refused_naming_the_site_and_item():
    ok = np.ones(4, np.float32)
    rows = [{"embed": ok, "blocks.0.resid_post": ok}, {"embed": ok, "blocks.0.resid_post": ok.copy()}]
    rows[1]["blocks.0.resid_post"][2] = np.inf
    with pytest.raises(NonFiniteActivation, match=r"site 'blocks.0.resid_post', item 'b'.*dimension 2.*inf") as e:
        storage_tensors(rows, ["embed", "blocks.0.resid_post"], ["a", "b"], "bfloat16")
    assert "\n" not in str(e.value)
    rows[1]["blocks.0.resid_post"][2] = np.nan
    with pytest.raises(NonFiniteActivation, match="item 'b'"):
        storage_tensors(rows, ["blocks.0.resid_post"], ["a", "b"], "float32")
    # a finite float32 value bfloat16 cannot hold becomes inf in the cast: refused too
    huge = [{"embed": np.array([3.4e38, 0.0], np.float32)}]
    with pytest.raises(NonFiniteActivation, match="does not fit bfloat16"):
        storage_tensors(huge, ["embed"], ["x"], "bfloat16")
    assert torch.isfinite(storage_tensors(huge, ["embed"], ["x"], "float32")["embed"]).all()
    # the name means: an all-NaN row marks an item without names (kept); a partly NaN row is refused
    name = [{"embed@name_A": np.full(3, np.nan, np.float32)}, {"embed@name_A": np.ones(3, np.float32)}]
    assert torch.isnan(storage_tensors(name, ["embed@name_A"], ["a", "b"], "bfloat16")["embed@name_A"][0]).all()
    name[1]["embed@name_A"][0] = np.nan
    with pytest.raises(NonFiniteActivation, match="site 'embed@name_A', item 'b'"):
        storage_tensors(name, ["embed@name_A"], ["a", "b"], "bfloat16")


def test_storage_dtype_follows_the_model():
    assert storage_dtype("auto", torch.bfloat16) == "bfloat16"
    assert storage_dtype("auto", torch.float32) == "float32"
    assert storage_dtype("auto", torch.float16) == "float32"   # never float16, whatever the model
    assert storage_dtype("bfloat16", torch.float32) == "bfloat16"


def _scaled_embedding(lm, factor: float):
    emb = lm.model.get_input_embeddings()
    saved = emb.weight.detach().clone()
    with torch.no_grad():
        emb.weight.mul_(factor)
    return emb, saved


def test_a_planted_activation_above_65504_is_stored_finite(tiny, smoke_items, tmp_path):
    lm = tiny["qwen2"]                                   # float32 on the CPU
    items = smoke_items.head(6)
    emb, saved = _scaled_embedding(lm, 1e7)
    try:
        auto = cache_activations(items, lm, CacheOptions(sites=("embed", "blocks.0.resid_post"), batch_size=4,
                                                         progress=False), tmp_path / "auto")
        bf16 = cache_activations(items, lm, CacheOptions(sites=("embed", "blocks.0.resid_post"), batch_size=4,
                                                         dtype="bfloat16", progress=False), tmp_path / "bf16")
    finally:
        with torch.no_grad():
            emb.weight.copy_(saved)
    assert auto.dtype == "float32" and bf16.dtype == "bfloat16"
    assert json.loads((tmp_path / "bf16" / "manifest.json").read_text())["dtype"] == "bfloat16"
    ids, x = auto.load("embed")
    assert np.abs(x).max() > BIG and np.isfinite(x).all()
    _, xb = bf16.load("embed", ids)
    assert xb.dtype == np.float32 and np.isfinite(xb).all()
    np.testing.assert_array_equal(xb, torch.from_numpy(x).bfloat16().float().numpy())  # bfloat16 kept faithfully
    # the old writer on the same values: inf
    rows = [{"embed": r} for r in x]
    assert np.isinf(old_writer(rows, ["embed"], tmp_path / "old.safetensors")["embed"]).any()


def test_a_bfloat16_model_caches_bfloat16(tiny_dirs, smoke_items, tmp_path):
    from evenhand.models.loading import load_model
    lm = load_model(str(tiny_dirs["qwen2"]), dtype="bfloat16")
    cache = cache_activations(smoke_items.head(3), lm, CacheOptions(sites=("embed",), batch_size=3, progress=False),
                              tmp_path / "c")
    assert cache.dtype == "bfloat16"
    from safetensors import safe_open
    shard = next((tmp_path / "c").glob("acts-*.safetensors"))
    with safe_open(shard, framework="pt") as f:
        assert f.get_tensor("embed").dtype == torch.bfloat16
    assert cache.load("embed")[1].dtype == np.float32
    with pytest.raises(ValueError, match=r"other dtype bfloat16 \(this cache stores float32\)"):
        cache_activations(smoke_items.head(3), lm, CacheOptions(sites=("embed",), dtype="float32", progress=False),
                          tmp_path / "c")


def test_a_real_inf_stops_the_cache_naming_site_and_item_and_keeps_what_was_written(tiny, smoke_items, tmp_path):
    """An inf planted in one item's embedding (a hook on the third forward pass, one item a batch): the cache
    stops naming 'embed' and that item; the two shards written before stay and a rerun completes them."""
    lm = tiny["qwen2"]
    items = smoke_items.head(5)
    calls, poisoned = [0], []

    def plant(module, args, out):
        calls[0] += 1
        if calls[0] == 3:
            poisoned.append(args[0][0].tolist())
            out[0, -1, 1] = float("inf")              # in place: the trace's saved view of the output sees it
    handle = lm.model.get_input_embeddings().register_forward_hook(plant)
    opts = CacheOptions(sites=("embed", "blocks.0.resid_post"), batch_size=1, progress=False)
    try:
        with pytest.raises(NonFiniteActivation) as e:
            cache_activations(items, lm, opts, tmp_path / "c")
    finally:
        handle.remove()
    special = not uses_chat_template(lm.tokenizer, "auto")     # as the cache encodes its prompts
    texts = {r["item_id"]: lm.tokenizer(model_text(lm.tokenizer, user_message(r, "answer")),
                                        add_special_tokens=special)["input_ids"] for r in items.to_dict("records")}
    (bad,) = [k for k, v in texts.items() if v == poisoned[0]]
    assert f"site 'embed', item '{bad}'" in str(e.value) and "\n" not in str(e.value)
    assert len(ActivationCache(tmp_path / "c").item_ids()) == 2
    done = cache_activations(items, lm, opts, tmp_path / "c")
    assert sorted(done.item_ids()) == sorted(items["item_id"])
