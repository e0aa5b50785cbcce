"""The comparison's per-cell restore record (``cells/<cell>/restore.json``): a full digest of the weights
before and after each cell, so that a change the base class's sampled check cannot see is still caught."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from experiments.studies.compare.config import Arm, Cell
from experiments.studies.compare.study import watched_models, write_restore
from interventions.fitted import InterventionError
from interventions.model_state import ModelState, weights_digest
from interventions.registry import get


@pytest.fixture()
def lm():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 2))
    net.register_buffer("scale", torch.ones(3))
    return SimpleNamespace(model=net)


def test_unchanged_model_is_recorded_bit_identical(lm, tmp_path):
    digests: dict = {}
    watched = watched_models(lm, lm, digests)
    assert len(watched) == 1  # the deciding and the fitting model are one
    cell = Cell(Arm("caa"), {}, 0, 0)
    write_restore(tmp_path / "restore.json", get("caa"), cell, watched, digests, 5, 0.25, 1.5)
    rec = json.loads((tmp_path / "restore.json").read_text())
    assert rec["restored_bit_exactly"] is True and rec["intervention"] == "caa" and rec["items"] == 5
    assert rec["checks"][0]["digest_before"] == rec["checks"][0]["digest_after"]
    assert rec["checks"][0]["hooks_after"] == 0 and rec["fit_seconds"] == 0.25


def test_a_change_between_samples_is_caught(lm, tmp_path):
    """One weight changed where ModelState's strided sample does not look: its check passes, the digest fails."""
    digests: dict = {}
    watched = watched_models(lm, None, digests)
    state = ModelState.capture(lm.model)
    w = lm.model[0].weight
    step = max(1, w.numel() // ModelState.SAMPLES)
    w.data.view(-1)[step // 2] += 1e-3  # through .data: no version bump, not a sampled position
    assert state.differences(lm.model) == []
    with pytest.raises(InterventionError, match="differ from when it was loaded"):
        write_restore(tmp_path / "restore.json", get("loreft"), Cell(Arm("loreft"), {}, 0, 0), watched, digests,
                       5, 0.0, 0.0)
    rec = json.loads((tmp_path / "restore.json").read_text())
    assert rec["restored_bit_exactly"] is False and not rec["checks"][0]["bit_identical"]


def test_digest_sees_buffers_and_a_left_hook_is_counted(lm, tmp_path):
    before = weights_digest(lm.model)
    lm.model.scale[1] = 2.0
    assert weights_digest(lm.model) != before
    lm.model.scale[1] = 1.0
    assert weights_digest(lm.model) == before
    digests: dict = {}
    watched = watched_models(lm, None, digests)
    lm.model[0].register_forward_hook(lambda *a: None)
    write_restore(tmp_path / "restore.json", get("ace"), Cell(Arm("ace"), {}, 0, 0), watched, digests, 1, 0, 0)
    assert json.loads((tmp_path / "restore.json").read_text())["checks"][0]["hooks_after"] == 1


def test_digest_catches_any_single_element_change_through_data_in_bfloat16(lm):
    """Every position of a bfloat16 weight, changed by one ulp through ``.data`` (no version bump): the on-device
    checksum digest sees each one; restoring the value restores the digest."""
    net = lm.model.to(torch.bfloat16)
    before = weights_digest(net)
    bits = net[1].weight.data.view(-1).view(torch.int16)  # the raw bits, written through .data
    for i in range(bits.numel()):
        bits[i] += 1  # the next bfloat16 value
        assert weights_digest(net) != before, i
        bits[i] -= 1
    assert weights_digest(net) == before


def test_digest_copies_no_weights_to_the_host(lm, monkeypatch):
    """Only the two checksums per tensor leave the device: every host copy and numpy view is counted."""
    seen = []
    real_cpu, real_numpy = torch.Tensor.cpu, torch.Tensor.numpy
    monkeypatch.setattr(torch.Tensor, "cpu", lambda t, *a, **k: (seen.append(t.numel()), real_cpu(t, *a, **k))[1])
    monkeypatch.setattr(torch.Tensor, "numpy", lambda t, *a, **k: (seen.append(t.numel()), real_numpy(t, *a, **k))[1])
    n = len(list(lm.model.parameters())) + len(list(lm.model.buffers()))
    weights_digest(lm.model)
    assert seen == [2 * n]  # one copy: a [tensors, 2] table (the old digest copied 64 x 64 + ... values)


def test_checksums_equal_in_chunks_and_whole(monkeypatch):
    """The chunked sums equal one pass over the whole tensor (the chunk offsets weight positions globally)."""
    import interventions.model_state as ms
    t = torch.randn(1000)
    whole = ms.tensor_checksums([t])
    monkeypatch.setattr(ms, "CHUNK", 7)
    assert ms.tensor_checksums([t]) == whole
