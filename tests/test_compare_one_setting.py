"""A one-setting sweep in a comparison decides and scores the setting it names (issue 45, point 1).

The config is the issue's: ``leace`` with ``sweep: {layers: [all], strength: [1.0]}`` on the embedded organism,
kept tiny (one evaluation scenario with two baselines, one validation scenario for the signs)."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from experiments.studies.compare.study import check_plan, parse_config, run_compare
from interventions.base import InterventionError

ONE_SETTING = {"name": "leace", "options": {"batch_size": 16}, "sweep": {"layers": ["all"], "strength": [1.0]}}


def tiny(out, arm: dict, **extra) -> dict:
    return {"model": "evenhand-organism", "output_dir": str(out), "split": {"seed": 0, "heldout_fraction": 0.2},
            "train": {"scenarios": 2, "max_items": 24}, "eval": {"scenarios": 1, "baselines": 2},
            "validation": {"scenarios": 1}, "mode": "logprob", "batch_size": 32, "resamples": 20,
            "controls": False, "signs": {"fraggap": 1}, "interventions": [arm], **extra}


def test_a_one_setting_sweep_is_decided_and_scored_at_that_setting(tmp_path):
    out = tmp_path / "cmp"
    cfg = parse_config(tiny(out, ONE_SETTING))
    assert cfg.interventions[0].options == {"batch_size": 16, "layers": "all", "strength": 1.0}
    table = run_compare(cfg, progress=False)
    key = "leace[batch_size=16,layers=all,strength=1.0]-s0"
    assert set(table["cell"]) == {"baseline", key}
    assert json.loads(table.loc[table["cell"] == key, "options"].iloc[0])["layers"] == "all"
    fit = json.loads(next((out / "fitted").glob("leace-*/fitted.json")).read_text())
    assert fit["fit_options"]["layers"] == "all"  # fitted at every layer, not the option's default
    resp = pd.read_parquet(out / "cells" / key / "responses.parquet")
    base = pd.read_parquet(out / "cells" / "baseline" / "responses.parquet")
    assert len(resp) == len(base) > 0 and not (out / "cells" / "leace[batch_size=16]-s0").exists()
    # the same setting spelled as options resumes (nothing re-decoded), and so does a table-only change
    before = (out / "cells" / key / "responses.parquet").stat().st_mtime_ns
    as_options = {"name": "leace", "options": {"batch_size": 16, "layers": "all", "strength": 1.0}}
    again = run_compare(parse_config(tiny(out, as_options, resamples=30)), progress=False)
    assert set(again["cell"]) == set(table["cell"])
    assert (out / "cells" / key / "responses.parquet").stat().st_mtime_ns == before
    with pytest.raises(Exception, match="different config"):  # an edit that changes the decisions is refused
        run_compare(parse_config(tiny(out, {**as_options, "options": {**as_options["options"], "strength": 0.5}})),
                    progress=False)


def test_a_run_recorded_before_the_fold_resumes(tmp_path):
    """A manifest that records the one-setting sweep as a sweep (as runs made before the fold did) reads as the
    folded config: the fixed config resumes there instead of being refused."""
    from evenhand.runs.rundir import RunDir
    from experiments.studies.compare.study import item_sets, open_compare
    out = tmp_path / "cmp"
    cfg = parse_config(tiny(out, ONE_SETTING))
    sets = item_sets(cfg)
    open_compare(cfg, sets).unlock()
    run = RunDir(out)
    m = run.manifest()
    m["config"]["interventions"] = [{"name": "leace", "options": {"batch_size": 16},
                                     "sweep": {"layers": ["all"], "strength": [1.0]}, "seeds": [0],
                                     "control_draws": None}]
    run.write_manifest(m)
    open_compare(cfg, sets).unlock()


def test_options_and_sweep_merge_one_way():
    with pytest.raises(ValueError, match=r"interventions\[0\].sweep.layers: layers is also in options"):
        parse_config(tiny("x", {"name": "leace", "options": {"layers": 0}, "sweep": {"layers": [0, 1]}}))
    two = parse_config(tiny("x", {"name": "leace", "options": {"strength": 0.5}, "sweep": {"layers": [0, 1]}}))
    assert two.interventions[0].sweep == {"layers": [0, 1]} and two.interventions[0].options == {"strength": 0.5}


def test_the_dry_check_finds_a_cell_no_stage_decides(monkeypatch):
    """The plan check fails on the old behaviour (a held-out stage deciding the arm's options without its sweep
    values while the table reads the swept cell), before anything is decoded."""
    import experiments.studies.compare.study as compare
    from experiments.studies.compare.config import Arm
    cfg = parse_config(tiny("x", ONE_SETTING))
    check_plan(cfg)
    old = compare.heldout_cell
    monkeypatch.setattr(compare, "heldout_cell", lambda c, i, seed, control, chosen: compare.Cell(
        Arm("leace", {"batch_size": 16}), {"batch_size": 16}, seed, control))
    with pytest.raises(InterventionError, match=r"no stage decides leace\[batch_size=16,layers=all,strength=1.0\]"):
        check_plan(cfg)
    monkeypatch.setattr(compare, "heldout_cell", old)
    swept = parse_config(tiny("x", {"name": "leace", "sweep": {"layers": [0, "all"]}}))
    check_plan(swept)


def test_progress_says_cell_k_of_n(tmp_path, capsys):
    raw = tiny(tmp_path / "cmp", {"name": "fair_instruction"})
    raw["interventions"].append({"name": "identity_blind"})
    run_compare(parse_config(raw), progress=True)
    out = capsys.readouterr().out
    assert "[cell 1 of 2: fair_instruction-s0] deciding under fair_instruction-s0" in out
    assert "[cell 2 of 2: identity_blind-s0] deciding under identity_blind-s0" in out
