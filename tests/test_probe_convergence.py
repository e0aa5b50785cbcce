"""A probe sweep whose fits stop at the iteration limit says so once, in words (what it means, what to
do), without a RuntimeWarning and its source path, and records the count in its manifest."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from probes.dataset import ProbeDataset
from probes.logistic import ProbeOptions
from probes.sweep import probe_sweep, write_sweep


def _dataset(sites: int = 2, dim: int = 6, rows: int = 240, seed: int = 0) -> ProbeDataset:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, rows)
    groups = np.repeat(np.arange(rows // 8 + 1), 8)[:rows]
    feats = {}
    for s in range(sites):
        u = rng.normal(size=dim)
        feats[f"blocks.{s}.resid_post"] = (rng.normal(size=(rows, dim)) + np.outer(2 * y - 1, u) * 2).astype(np.float32)
    types = [f"t{i % 12}" for i in range(rows)]
    return ProbeDataset(feats, y, groups, pd.DataFrame({"item_id": range(rows)}), "x", types=types)


@pytest.mark.parametrize("solver", ["torch", "sklearn"])
def test_non_convergence_is_one_note_in_words_and_a_count_in_the_manifest(tmp_path, capfd, solver):
    """max_iter=1 stops every fit early. The old sweep showed one ``RuntimeWarning: torch probe solver: N
    problem(s) stopped at max_iter`` per fit_sites call (four here: sites, control, ...) with the source path,
    and its manifest had no count."""
    ds = _dataset()
    opts = ProbeOptions(solver=solver, folds=3, inner_folds=2, Cs=(1.0, 100.0), max_iter=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table, _ = probe_sweep(ds, opts, control=True, resamples=10)
    err = capfd.readouterr().err
    assert not [w for w in caught if "max_iter" in str(w.message) or "converge" in str(w.message).lower()], \
        [str(w.message) for w in caught]
    notes = [ln for ln in err.splitlines() if "iteration limit" in ln]
    assert len(notes) == 1, err
    note = notes[0]
    assert "max_iter=1" in note and "near, not at, the best fit" in note and "--solver sklearn" in note
    assert "RuntimeWarning" not in err and "solver.py" not in err and ".py:" not in note
    count = table.attrs["unconverged"]
    assert count["fits"] > 0 and count["max_iter"] == 1
    if solver == "torch":   # every (site, fold mask, C) problem of both fits (probe and control) stopped
        assert count["of"] == count["fits"] and f"{count['fits']:,} of {count['of']:,}" in note
    manifest = json.loads((write_sweep(table, tmp_path / "p", ds, opts) / "manifest.json").read_text())
    assert manifest["unconverged"] == count


def test_a_converged_sweep_prints_no_note_and_records_zero(tmp_path, capfd):
    ds = _dataset()
    opts = ProbeOptions(solver="torch", folds=3, inner_folds=2, Cs=(1.0,))
    table, _ = probe_sweep(ds, opts, control=False, resamples=10)
    assert "iteration limit" not in capfd.readouterr().err
    manifest = json.loads((write_sweep(table, tmp_path / "p", ds, opts) / "manifest.json").read_text())
    assert manifest["unconverged"] == {"fits": 0, "max_iter": opts.max_iter}


def test_other_warnings_still_pass_through_the_sweep():
    """Only the solvers' non-convergence is collected: the control task's warning still reaches the caller."""
    from probes.design import ControlTypesWarning
    ds = _dataset()
    ds.types = [f"t{i}" for i in range(len(ds.y))]    # every row its own type: the control cannot generalise
    with pytest.warns(ControlTypesWarning):
        probe_sweep(ds, ProbeOptions(solver="torch", folds=3, inner_folds=2, Cs=(1.0,)), control=True, resamples=10)


def test_a_saved_sweep_is_reused_only_for_the_same_inputs_options_and_resamples(tmp_path):
    """What lets a resumed `make demo` skip its probe sweep (issue 45, point 6): the saved table comes back for
    the same dataset, options and resamples, and None (fit again) when any of them changed."""
    from dataclasses import replace

    from probes.sweep import saved_sweep
    ds = _dataset()
    opts = ProbeOptions(solver="torch", folds=3, inner_folds=2, Cs=(1.0,))
    assert saved_sweep(tmp_path / "p", ds, opts, resamples=10) is None  # nothing saved yet
    table, _ = probe_sweep(ds, opts, control=False, resamples=10)
    write_sweep(table, tmp_path / "p", ds, opts, resamples=10)
    again = saved_sweep(tmp_path / "p", ds, opts, resamples=10)
    pd.testing.assert_frame_equal(again.reset_index(drop=True), pd.read_parquet(tmp_path / "p" / "probes.parquet"))
    assert saved_sweep(tmp_path / "p", ds, opts, resamples=20) is None
    assert saved_sweep(tmp_path / "p", ds, replace(opts, Cs=(1.0, 10.0)), resamples=10) is None
    other = _dataset(seed=1)  # other activations (a re-decided run): fitted again
    assert saved_sweep(tmp_path / "p", other, opts, resamples=10) is None
