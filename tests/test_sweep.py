"""Sweeps: grid expansion, validation naming the axis, resume after an interruption, study configs."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from evenhand.support.options import read_yaml
from experiments.studies.run.config import ConfigError
from experiments.studies import kinds, study_of
from experiments.studies.sweep import expand, load_sweep, run_sweep

CONFIGS = sorted((Path(__file__).resolve().parents[1] / "experiments" / "configs").glob("*.yaml"))


def _base(tmp_path, **extra) -> dict:
    return {"model": "evenhand-organism", "output_dir": str(tmp_path / "sweep"),
            "suite": {"subset": "organism_heldout", "degrees": [3], "limit": 96},
            "batch_size": 32, "resamples": 40, **extra}


def test_grid_is_the_product_in_written_order(tmp_path):
    cells = expand(_base(tmp_path, sweep={"mode": ["answer", "logprob"], "suite.seed": [0, 1, 2]}))
    assert [c.params for c in cells][:3] == [{"mode": "answer", "suite.seed": s} for s in (0, 1, 2)]
    assert len(cells) == 6 and len({c.data["output_dir"] for c in cells}) == 6
    assert cells[4].data["mode"] == "logprob" and cells[4].data["suite"] == {
        "subset": "organism_heldout", "degrees": [3], "limit": 96, "seed": 1}
    assert cells[0].data["output_dir"].endswith("cells/mode=answer,suite.seed=0")


@pytest.mark.parametrize("sweep, message", [
    ({"mode": ["answer", "sing"]}, r"sweep.mode\[1\]='sing'.*'mode' must be one of"),
    ({"modle": ["answer"]}, r"did you mean 'mode'"),
    ({"mode": []}, r"'sweep.mode' must be a non-empty list"),
    ({"mode": ["answer", "answer"]}, r"lists a value twice"),
    ({"output_dir": ["a", "b"]}, r"cannot be swept"),
    ({"cache.enabled": [False], "probe.label": ["correct"]}, r"needs the activation cache"),
])
def test_bad_sweeps_fail_before_anything_runs_and_name_the_field(tmp_path, sweep, message):
    with pytest.raises(ConfigError, match=message):
        expand(_base(tmp_path, sweep=sweep))
    assert not (tmp_path / "sweep").exists()


def test_every_study_config_expands_and_validates():
    assert {p.stem for p in CONFIGS} >= {"quickstart", "fairstress_eval", "probe_sweep", "name_ablation",
                                        "compare_interventions"}
    named, pending = {}, set()
    for p in CONFIGS:
        head = p.read_text().splitlines()[0]
        assert head.startswith(f"# {p.stem}") or head.startswith("#"), p  # documented at the top
        data = read_yaml(p)
        if data.get("kind") not in kinds():
            pending.add(p.stem)  # a study being moved into experiments/studies/ on another branch (issue 29)
            continue
        named[p.stem] = data["kind"]
        data, cells = load_sweep(p)
        assert cells, p
        assert study_of(cells[0].data).kind == data["kind"]
    assert pending <= {"compare_interventions", "dose_response"}, f"configs naming no registered study: {pending}"
    assert named["bbq_organism"] == "bbq" and named["quickstart"] == "run"
    _, cells = load_sweep(CONFIGS[[p.stem for p in CONFIGS].index("fairstress_eval")])
    assert {(c.params["model"], c.params["mode"]) for c in cells} == {
        (m, x) for m in ("gemma-3-12b-it", "qwen2.5-7b-instruct") for x in ("answer", "reasoning")}


def test_interrupted_sweep_resumes_to_the_same_table(tmp_path, monkeypatch, capsys):
    sweep = {"mode": ["answer", "logprob"]}
    whole = _base(tmp_path / "a", sweep=sweep)
    _, table_a = run_sweep(whole, progress=False)
    assert table_a["cell"].nunique() == 2 and set(table_a["table"]) == {"metrics"}
    assert {"mode", "cell", "metric", "value", "ci_low", "ci_high", "n"} <= set(table_a.columns)

    import experiments.studies.run.local as runner
    real = runner.score_run
    calls = {"n": 0}

    def killed_in_second_cell(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:   # the second cell dies after its decisions, before its metrics
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(runner, "score_run", killed_in_second_cell)
    part = _base(tmp_path / "b", sweep=sweep)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(part, progress=False)
    assert not (tmp_path / "b" / "sweep" / "sweep.parquet").exists()
    monkeypatch.setattr(runner, "score_run", real)
    capsys.readouterr()
    _, table_b = run_sweep(part, progress=True)
    out = capsys.readouterr().out
    assert "sweep cell 1/2 mode=answer: done, skipped" in out and "sweep cell 2/2 mode=logprob: running" in out
    pd.testing.assert_frame_equal(table_a, table_b)
    saved = pd.read_parquet(tmp_path / "b" / "sweep" / "sweep.parquet")
    pd.testing.assert_frame_equal(saved, table_b)
    # each cell's responses hold every item exactly once
    for cell in ("mode=answer", "mode=logprob"):
        resp = pd.read_parquet(tmp_path / "b" / "sweep" / "cells" / cell / "responses.parquet")
        assert len(resp) == 96 and resp["item_id"].is_unique
    # a sweep directory draws its cells as lines of one figure set
    from experiments.figures import run_figures
    paths = run_figures([tmp_path / "b" / "sweep"], formats=("png",), resamples=40)
    assert (tmp_path / "b" / "sweep" / "figures" / "progression.png") in paths
    long = pd.concat([pd.read_parquet(tmp_path / "b" / "sweep" / "cells" / c / "tables" / "metrics_long.parquet")
                      for c in ("mode=answer", "mode=logprob")])
    assert set(long["label"]) == {"mode=answer", "mode=logprob"}


def test_run_config_with_probe_text_baseline_and_figures(tmp_path):
    """One config runs decisions, cache, a probe sweep with the text baseline, and the figures."""
    from experiments.studies.run.config import config_from_dict
    from experiments.studies.run.local import run_config
    cfg = config_from_dict({"model": "evenhand-organism", "output_dir": str(tmp_path / "r"),
                            "suite": {"subset": "organism_heldout", "degrees": [3], "limit": 608},
                            "mode": "reasoning", "reasoning_max_new_tokens": 6, "batch_size": 64,
                            "resamples": 40, "cache": {"enabled": True, "dtype": "float32"},
                            "probe": {"folds": 2, "inner_folds": 2, "text": True, "control": False},
                            "attribution": {"degrees": [3], "batch_size": 32}, "figures": True})
    run, _ = run_config(cfg, progress=False)
    probes = pd.read_parquet(run.path / "probes" / "favours_minority" / "probes.parquet")
    assert set(probes["variant"]) == {"activations", "text"}
    text = probes[(probes["site"] == "text") & (probes["metric"] == "accuracy")].iloc[0]
    assert text["ci_low"] <= text["value"] <= text["ci_high"] and text["n"] > 0
    assert (run.path / "figures" / "probe_favours_minority.png").exists()
    attribution = pd.read_parquet(run.path / "attribution" / "attribution.parquet")
    assert {"embed", "attn_out", "mlp_out", "logit_diff"} <= set(attribution["component"])
    assert (run.path / "figures" / "attribution.png").exists()
    assert (run.path / "report.md").exists() and run.manifest()["status"] == "done"
    with pytest.raises(ConfigError, match="probe.text"):
        config_from_dict({"model": "evenhand-organism", "output_dir": str(tmp_path / "x"), "mode": "answer",
                          "cache": {"enabled": True}, "probe": {"text": True}})


def test_attribution_cli_names_a_missing_run(tmp_path, capsys):
    from experiments.cli import main
    assert main(["probe", "attribution", str(tmp_path / "nope"), "--no-progress"]) == 2
    assert "manifest.json not found" in capsys.readouterr().err


def test_prefix_reuse_axis_gives_the_same_metrics(tmp_path):
    """A sweep over prefix_reuse: the KV-cache reuse of a cell's shared prefix changes no decision."""
    cfg = _base(tmp_path, mode="logprob", sweep={"prefix_reuse": [False, True]})
    cfg["suite"]["limit"] = 152
    _, table = run_sweep(cfg, progress=False)
    off = table[table["prefix_reuse"] == False].drop(columns=["cell", "prefix_reuse"])  # noqa: E712
    on = table[table["prefix_reuse"] == True].drop(columns=["cell", "prefix_reuse"])  # noqa: E712
    pd.testing.assert_frame_equal(off.drop(columns="label").reset_index(drop=True),
                                  on.drop(columns="label").reset_index(drop=True))
    resp = pd.read_parquet(tmp_path / "sweep" / "cells" / "prefix_reuse=true" / "responses.parquet")
    assert resp["n_shared_prefix_tokens"].max() > 50
