"""Out-of-memory recovery: the failed attempt is freed before the retry, and a run with
an injected OOM above a batch size finishes at the largest batch that fits, with the outputs of a run at that
batch: the batch loop (:class:`~evenhand.engine.batching.Halving`), decisions, the intervention fitting reads
(:mod:`interventions.reading`, ACE's span means) and learned training (:func:`interventions.learned.train`,
whose gradient accumulation keeps the full batch's result)."""
from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
import torch

from evenhand.engine.batching import Halving, halve_on_oom, is_oom


def oom():
    return torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")


def test_is_oom_knows_cuda_cpu_and_python_errors():
    assert is_oom(oom())
    assert is_oom(RuntimeError("[enforce fail at alloc_cpu.cpp:116] DefaultCPUAllocator: can't allocate memory"))
    assert is_oom(MemoryError())
    assert not is_oom(RuntimeError("shape mismatch"))
    assert not is_oom(ValueError("out of range"))


class Failing:
    """A batch function that allocates a tensor per attempt and raises OOM above ``fits`` rows; it records, at
    the start of each attempt, whether the tensors of earlier failed attempts are still alive."""

    def __init__(self, fits: int):
        self.fits, self.refs, self.alive_at_start, self.sizes = fits, [], [], []

    def __call__(self, idx):
        gc.disable()  # only reference counting and free_memory's own gc.collect() may free the failed tensor
        try:
            self.alive_at_start.append(sum(r() is not None for r in self.refs))
        finally:
            gc.enable()
        self.sizes.append(len(idx))
        big = torch.ones(len(idx), 1000)
        self.refs.append(weakref.ref(big))
        if len(idx) > self.fits:
            raise oom()
        return [float(big[k].sum()) * i for k, i in enumerate(idx)]


def test_halving_frees_the_failed_batch_before_the_retry():
    """The old loop retried inside ``except``: the traceback held the failed frame's tensor (alive at retry)."""
    f = Failing(fits=4)
    rows = Halving(16).run(f, list(range(16)))
    assert f.sizes[:3] == [16, 8, 4]
    assert f.alive_at_start[1] == 0 and f.alive_at_start[2] == 0, f.alive_at_start


def test_halving_ends_at_the_largest_batch_that_fits_with_its_outputs():
    f = Failing(fits=4)
    h = Halving(16)
    rows = h.run(f, list(range(16))) + h.run(f, list(range(16, 40)))
    ref = Failing(fits=4)
    assert rows == Halving(4).run(ref, list(range(40)))
    assert h.limit == 4 and set(f.sizes[3:]) == {4} and ref.sizes == [4] * 10


def test_halve_on_oom_frees_then_halves_and_raises_at_one():
    f = Failing(fits=3)
    out, size = halve_on_oom(lambda n: f(list(range(n))), 16)
    assert size == 2 and f.sizes == [16, 8, 4, 2] and f.alive_at_start == [0, 0, 0, 0]
    with pytest.raises(torch.cuda.OutOfMemoryError):
        halve_on_oom(lambda n: Failing(fits=0)(list(range(n))), 4)
    with pytest.raises(ValueError):  # not an OOM: raised at once, never retried
        halve_on_oom(lambda n: (_ for _ in ()).throw(ValueError("bad")), 4)


@pytest.fixture
def oom_above(lm):
    """``oom_above(n)``: the tiny model's forward raises CUDA OOM when a batch has more than ``n`` rows."""
    handles = []

    def install(n):
        def pre(mod, args, kwargs):
            ids = kwargs.get("input_ids", args[0] if args else None)
            if ids is not None and ids.shape[0] > n:
                raise oom()
        handles.append(lm.model.register_forward_pre_hook(pre, with_kwargs=True))
    yield install
    for h in handles:
        h.remove()


def test_decide_with_injected_oom_equals_a_run_at_the_batch_that_fits(lm, smoke_items, oom_above):
    from evenhand.running.decisions import DecideOptions, decide
    items = smoke_items.head(24)  # one batch of 16 (16 -> 8 -> 4) and one of 8 (run at 4)
    ref = decide(items, lm, DecideOptions(mode="logprob", batch_size=4, progress=False))
    oom_above(4)
    got = decide(items, lm, DecideOptions(mode="logprob", batch_size=16, progress=False))
    assert got["batch_size"].max() == 4
    cols = ["item_id", "logprob_A", "logprob_B"]
    np.testing.assert_allclose(got[cols[1:]].to_numpy(float), ref[cols[1:]].to_numpy(float), atol=1e-6)
    assert got["item_id"].tolist() == ref["item_id"].tolist()


def test_fitting_reads_recover_from_oom(lm, train_items, oom_above):
    from evenhand.engine.reader import last_token_activations, token_states
    from interventions.reading import prompt_ids
    from interventions.steered import demographic_activations
    seqs = [prompt_ids(lm, r) for r in train_items.head(10).to_dict("records")]
    site = "blocks.1.resid_post"
    ref = last_token_activations(lm, seqs, [site], 2)[site]
    ref_states = token_states(lm, seqs, site, 2)
    _, _, ref_ace = demographic_activations(lm, train_items.head(10), [site], 2)
    oom_above(2)
    np.testing.assert_array_equal(last_token_activations(lm, seqs, [site], 8)[site], ref)
    for a, b in zip(token_states(lm, seqs, site, 8), ref_states):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(demographic_activations(lm, train_items.head(10), [site], 8)[2][site], ref_ace[site])


def test_ace_span_means_equal_the_token_states_reference(lm, train_items):
    """The streamed span means (reduced in the hook) equal the means of the full per-token states."""
    from interventions.steered import demographic_activations, profile_spans
    from tests.helpers import span_means
    from evenhand.engine.reader import token_states
    site = "blocks.1.resid_post"
    rows, _, acts = demographic_activations(lm, train_items.head(8), [site], 4)
    other = {"A": "B", "B": "A"}
    found = [profile_spans(lm, r) for r in rows.to_dict("records")]
    states = token_states(lm, [ids for ids, _ in found], site, 3)
    mino = span_means(states, [sp[r["minority_slot"]] for (_, sp), r in zip(found, rows.to_dict("records"))])
    majo = span_means(states, [sp[other[r["minority_slot"]]] for (_, sp), r in zip(found, rows.to_dict("records"))])
    np.testing.assert_allclose(acts[site], np.stack([mino, majo], 1).reshape(2 * len(rows), -1), atol=1e-5)


@pytest.mark.parametrize("kind", ["loreft", "reft_r1"])
def test_learned_training_recovers_from_oom_with_the_full_batch_result(lm, smoke_items, oom_above, kind):
    """Batch 8 with OOM above 2 rows: the step is redone in micro-batches of 2 (gradient accumulation), and the
    trained module equals one trained at batch 8 without OOM (the old loop raised)."""
    from interventions.learned import LoReFTFit, ReFTR1Fit, hooked, make_module, swapped_item, train
    rows = smoke_items[smoke_items["degree"] > 0].sample(16, random_state=0).to_dict("records")
    pairs = [(r, swapped_item(r)) for r in rows]
    opts = LoReFTFit(steps=3, batch_size=8, layer=1) if kind == "loreft" else ReFTR1Fit(steps=3, batch_size=8,
                                                                                        layer=1, topk=2)
    site = "blocks.1.resid_post"
    d = int(lm.model.config.get_text_config().hidden_size)

    def fit():
        torch.manual_seed(0)
        module = make_module(kind, d, 2 if kind == "reft_r1" else 4)
        stats = {}
        curve = train(lm, module, pairs, opts, hooked(lm, site, module), stats=stats)
        return module, curve, stats

    ref, ref_curve, ref_stats = fit()
    oom_above(2)
    got, curve, stats = fit()
    assert ref_stats["micro_batch"] == 8 and stats["micro_batch"] == 2
    assert [c["loss"] for c in curve] == pytest.approx([c["loss"] for c in ref_curve], abs=1e-5)
    for (n, a), (_, b) in zip(got.state_dict().items(), ref.state_dict().items()):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4, msg=n)


def test_learned_axbench_objective_accumulates_to_the_full_batch(lm, smoke_items):
    """AxBench's loss is a mean over answer tokens: micro-batches weighted by their token share give the same
    loss and module as the full batch."""
    from interventions.learned import ReFTR1Fit, hooked, make_module, swapped_item, train
    rows = smoke_items[(smoke_items["degree"] > 0) & (smoke_items["condition"] == "GT")]
    pairs = [(r, swapped_item(r)) for r in rows.sample(8, random_state=0).to_dict("records")]
    opts = ReFTR1Fit(steps=2, batch_size=8, layer=1, topk=2, objective="axbench")
    d = int(lm.model.config.get_text_config().hidden_size)
    out = []
    for micro in (None, 3):
        torch.manual_seed(0)
        module = make_module("reft_r1", d, 2)
        curve = train(lm, module, pairs, opts, hooked(lm, "blocks.1.resid_post", module), micro_batch=micro)
        out.append((module.w.detach().clone(), curve))
    torch.testing.assert_close(out[0][0], out[1][0], atol=1e-6, rtol=1e-5)
    assert [c["loss"] for c in out[0][1]] == pytest.approx([c["loss"] for c in out[1][1]], abs=1e-5)
