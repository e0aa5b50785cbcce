"""Throughput options of decide (bucketing, prefix reuse) give the plain path's results; the
throughput benchmark runs."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from evenhand.running.decisions import DecideOptions, decide
from evenhand.engine import prefix as P
from evenhand.engine.batching import plan_batches_in_order, token_ids
from evenhand.engine.prefix import prefix_groups
from evenhand.models.loading import LoadedModel, ModelSpec, load_model
from evenhand.models.tiny import build_tiny_model, build_tokenizer, save_tiny_model
from evenhand.vocab.prompts import model_text
from tests.helpers import tiny_gemma3_multimodal

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models gain nothing from threads, and the machine is shared."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def cells() -> pd.DataFrame:
    """Two whole matched cells (a baseline and 18 pressured items each) and four items of other
    cells of the same scenario (a shorter shared prefix), in a shuffled order."""
    from evenhand.models.policy import matched_items
    from evenhand.suite.content import load_content
    pool = matched_items([sorted(s.id for s in load_content().scenarios)[0]])
    ids = list(dict.fromkeys(pool["baseline_id"]))
    whole = pool[pool["baseline_id"].isin(ids[:2])]
    strays = pool[pool["baseline_id"].isin(ids[5:9])].drop_duplicates("baseline_id")
    return pd.concat([whole, strays]).sample(frac=1.0, random_state=0).reset_index(drop=True)


@pytest.fixture(scope="module")
def texts(cells, smoke_items) -> list[str]:
    return smoke_items["prompt"].tolist() + cells["prompt"].tolist()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, texts) -> dict[str, LoadedModel]:
    root = tmp_path_factory.mktemp("tiny_throughput")
    return {a: load_model(str(save_tiny_model(root / a, a, texts, seed=2))) for a in ("gemma3", "qwen2")}


def in_memory(arch: str, texts: list[str], **config) -> LoadedModel:
    model, tok = build_tiny_model(arch, texts, seed=3, config=config)
    return LoadedModel(model=model, tokenizer=tok, spec=ModelSpec(f"tiny:{arch}"), name=f"tiny:{arch}",
                       source="random weights", device="cpu", dtype="float32")


def both(items, lm, **kw) -> tuple[pd.DataFrame, pd.DataFrame]:
    plain = decide(items, lm, DecideOptions(progress=False, **kw))
    reuse = decide(items, lm, DecideOptions(progress=False, prefix_reuse=True, **kw))
    assert reuse["item_id"].tolist() == plain["item_id"].tolist() == list(items["item_id"])
    return plain, reuse


def assert_same_logprob(plain: pd.DataFrame, reuse: pd.DataFrame) -> None:
    assert (plain["choice"] == reuse["choice"]).all()
    for col in ("logprob_A", "logprob_B"):
        assert np.allclose(plain[col], reuse[col], atol=1e-4, rtol=0), col
    assert (plain["n_prompt_tokens"] == reuse["n_prompt_tokens"]).all()


def shared_cells(cells: pd.DataFrame, reuse: pd.DataFrame) -> None:
    """Every item of the two whole cells took a long prefix from a shared forward."""
    whole = cells["baseline_id"].map(cells["baseline_id"].value_counts()) > 1
    assert (reuse.loc[whole.values, "n_shared_prefix_tokens"] >= 100).all()
    assert (reuse["n_shared_prefix_tokens"] < reuse["n_prompt_tokens"]).all()


@pytest.mark.parametrize("arch", ["gemma3", "qwen2"])
@pytest.mark.parametrize("chat_template", ["auto", "none"])
def test_prefix_reuse_equals_plain_logprob(tiny, cells, arch, chat_template):
    lm = tiny[arch]
    assert lm.tokenizer.chat_template  # so "auto" applies it and "none" does not
    plain, reuse = both(cells, lm, mode="logprob", batch_size=16, chat_template=chat_template)
    assert_same_logprob(plain, reuse)
    shared_cells(cells, reuse)
    assert "n_shared_prefix_tokens" not in plain


@pytest.mark.parametrize("arch", ["gemma3", "qwen2"])
def test_prefix_reuse_equals_plain_answer(tiny, cells, arch):
    plain, reuse = both(cells, tiny[arch], mode="answer", batch_size=16, max_new_tokens=5)
    assert plain["text"].tolist() == reuse["text"].tolist()
    assert (plain["n_new_tokens"] == reuse["n_new_tokens"]).all()
    assert (plain["n_prompt_tokens"] == reuse["n_prompt_tokens"]).all()
    assert np.allclose(plain["gen_logprob"], reuse["gen_logprob"], atol=1e-4, rtol=0)
    shared_cells(cells, reuse)


@pytest.mark.parametrize("window", [12, 152, 4096])
def test_gemma3_sliding_window_shorter_and_longer_than_the_prompts(texts, cells, window):
    """Window 12: shorter than every shared prefix; 152: between the prefixes and some prompts'
    ends; 4096: longer than everything. Eager and sdpa attention."""
    lm = in_memory("gemma3", texts, sliding_window=window)
    lengths = [len(x) for x in token_ids(lm.tokenizer, [model_text(lm.tokenizer, p) for p in cells["prompt"]],
                                            False)]
    plain, reuse = both(cells, lm, mode="logprob", batch_size=16)
    assert_same_logprob(plain, reuse)
    shared = reuse["n_shared_prefix_tokens"]
    if window == 152:
        assert min(lengths) < window < max(lengths) and shared.max() < window
    lm.model.config._attn_implementation = "eager"
    eager = decide(cells, lm, DecideOptions(mode="logprob", batch_size=16, prefix_reuse=True, progress=False))
    assert_same_logprob(plain, eager)
    if window == 12:  # the window is honoured: a window longer than every prompt gives other numbers
        wide = decide(cells, in_memory("gemma3", texts, sliding_window=4096), DecideOptions(mode="logprob",
                                                                                           progress=False))
        assert np.abs(wide["logprob_A"] - plain["logprob_A"]).max() > 1e-2
        plain, reuse = both(cells, lm, mode="answer", batch_size=16, max_new_tokens=4)
        assert plain["text"].tolist() == reuse["text"].tolist()
        assert np.allclose(plain["gen_logprob"], reuse["gen_logprob"], atol=1e-4, rtol=0)


def test_labels_with_their_own_sequences_share_the_context(tiny, cells, monkeypatch):
    """Labels differing before their last token (two sequences per item) reuse the context too."""
    from evenhand.engine import rows, scoring
    two = lambda item: (f"{item['candidate_noun']} A", f"{item['candidate_noun']} B B")  # noqa: E731
    monkeypatch.setattr(scoring, "labels", two)
    monkeypatch.setattr(rows, "labels", two)
    plain, reuse = both(cells.head(12), tiny["qwen2"], mode="logprob", batch_size=4)
    assert (plain["logprob_forwards"] == 2).all()
    assert_same_logprob(plain, reuse)
    assert (reuse["n_shared_prefix_tokens"] > 0).all()


def test_gemma3_multimodal_class(texts, cells):
    """google/gemma-3-12b-it loads as Gemma3ForConditionalGeneration: prefix reuse works through it."""
    tok = build_tokenizer(texts, extra=["A", "B"])
    model = tiny_gemma3_multimodal(tok, sliding_window=64)
    lm = LoadedModel(model=model, tokenizer=tok, spec=ModelSpec("tiny:mm"), name="tiny:mm", source="random",
                     device="cpu", dtype="float32")
    items = cells.head(20)
    plain, reuse = both(items, lm, mode="logprob", batch_size=20)
    assert_same_logprob(plain, reuse)
    assert reuse["n_shared_prefix_tokens"].max() > 100
    plain, reuse = both(items, lm, mode="answer", batch_size=20, max_new_tokens=3)
    assert plain["text"].tolist() == reuse["text"].tolist()


def test_no_shared_prefix_runs_plain(tiny, smoke_items, monkeypatch):
    """Items of different scenarios share only the chat template's start: no prefix forward."""
    calls = []
    real = P.prefix_prefill
    monkeypatch.setattr(P, "prefix_prefill", lambda *a: calls.append(1) or real(*a))
    items = smoke_items.drop_duplicates("scenario_id").head(8)
    for mode in ("logprob", "answer"):
        plain, reuse = both(items, tiny["gemma3"], mode=mode, batch_size=8, max_new_tokens=3)
        assert plain["text"].tolist() == reuse["text"].tolist()
        assert (reuse["n_shared_prefix_tokens"] == 0).all()
        if mode == "logprob":
            assert_same_logprob(plain, reuse)
    assert calls == []


def test_prefix_reuse_resumes_to_the_same_table(tiny, cells, tmp_path):
    lm = tiny["gemma3"]
    opts = DecideOptions(mode="logprob", batch_size=8, prefix_reuse=True, progress=False)
    decide(cells.head(17), lm, opts, out_dir=tmp_path / "resumed")
    resumed = decide(cells, lm, opts, out_dir=tmp_path / "resumed")
    clean = decide(cells, lm, opts, out_dir=tmp_path / "clean")
    cols = [c for c in clean.columns if c not in ("seconds", "batch_size", "n_shared_prefix_tokens")]
    # values must agree; dtypes may not: a shard whose rows are all baselines stores pressure_id with no
    # string in it, and the column reads back as object instead of str when joined with the other shards
    pd.testing.assert_frame_equal(resumed[cols], clean[cols], check_exact=False, atol=1e-4, check_dtype=False)
    assert resumed["item_id"].is_unique and len(resumed) == len(cells)
    n = len(list((tmp_path / "clean" / "decisions").glob("shard-*.parquet")))
    assert n == -(-len(cells) // 8)


def test_bucketing_off_keeps_input_order_and_results(tiny, cells):
    lm = tiny["qwen2"]
    a = decide(cells, lm, DecideOptions(mode="logprob", batch_size=8, progress=False))
    b = decide(cells, lm, DecideOptions(mode="logprob", batch_size=8, bucket=False, progress=False))
    assert_same_logprob(a, b)
    assert plan_batches_in_order(5, 2) == [[0, 1], [2, 3], [4]]


def test_prefix_groups_cut_where_it_saves_most():
    common = list(range(100, 130))                   # 30 tokens every row shares (the scenario)
    cell1 = [common + [1] * 60 + [i, 7, 8] for i in range(5)]   # cells share 90 tokens
    cell2 = [common + [2] * 60 + [i, 7, 8] for i in range(4)]
    odd = [[999] + common]                           # shares nothing
    seqs = cell2 + odd + cell1
    groups = prefix_groups(seqs, [3] * len(seqs), min_prefix=16)
    assert sorted(r for _, rows in groups for r in rows) == list(range(len(seqs)))
    by_rows = {tuple(sorted(rows)): p for p, rows in groups}
    assert by_rows[tuple(range(4))] == 90 and by_rows[tuple(range(5, 10))] == 90 and by_rows[(4,)] == 28
    # a cap: every row must keep its last `tail` tokens out of the prefix
    groups = prefix_groups([[1, 2, 3, 4], [1, 2, 3, 4, 5]], [2, 2], min_prefix=1)
    assert groups == [(2, [0, 1])]
    # below min_prefix nothing is grouped
    assert all(len(rows) == 1 for _, rows in prefix_groups(cell1, [3] * 5, min_prefix=91))
    from types import SimpleNamespace as NS
    assert P.reuse_supported(NS(config=NS(layer_types=["sliding_attention", "full_attention"])))
    assert not P.reuse_supported(NS(config=NS(layer_types=["linear_attention", "full_attention"])))
    with pytest.raises(ValueError, match="tails"):
        prefix_groups(seqs, [3], 16)
    with pytest.raises(ValueError, match="prefix_min_tokens"):
        DecideOptions(prefix_min_tokens=0)


def test_bench_throughput_tiny():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_throughput import main
    res = main(["--tiny", "--items", "38", "--reps", "1", "--threads", "1"])
    assert res["items"] == 38 and res["cells"] == 2
    for name in ("bucket", "labels", "prefix", "answer"):
        r = res[name]
        assert r["ratio"] > 0 and r["speedup"] == pytest.approx(1 / r["ratio"]) and r["same_choices"], name
    for name in ("bucket", "labels", "prefix"):
        assert res[name]["max_abs_logprob_diff"] < 1e-4
    assert res["answer"]["same_texts"] and res["prefix"]["shared_prefix_tokens_mean"] > 50
