"""Run directories: manifest contents and atomic writes."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from evenhand.runs import RunDir, RunError, write_json_atomic, write_table_atomic


def test_manifest_has_provenance(tmp_path):
    run = RunDir.create(tmp_path / "r", {"a": 1}, "1.0+x", {"suite": 0})
    m = run.manifest()
    for k in ("config", "suite_version", "seeds", "git", "packages", "hardware", "created", "status"):
        assert k in m
    assert m["packages"]["numpy"] and m["status"] == "running"
    run.finish()
    assert run.manifest()["status"] == "done"


def test_failed_write_keeps_the_previous_file(tmp_path):
    path = tmp_path / "metrics.json"
    write_json_atomic(path, {"ok": 1})

    with pytest.raises(ValueError):
        write_json_atomic(path, {"bad": float("nan")})
    assert json.loads(path.read_text()) == {"ok": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]  # no temporary file left


def test_table_round_trip(tmp_path):
    df = pd.DataFrame({"item_id": ["a", "b"], "names": [{"A": "x", "B": "y"}, None]})
    write_table_atomic(tmp_path / "t.parquet", df)
    back = pd.read_parquet(tmp_path / "t.parquet")
    assert back["item_id"].tolist() == ["a", "b"]
    write_table_atomic(tmp_path / "t.csv", df)
    assert pd.read_csv(tmp_path / "t.csv")["item_id"].tolist() == ["a", "b"]
    with pytest.raises(RunError, match="must end in"):
        write_table_atomic(tmp_path / "t.txt", df)


def test_unwritable_output_directory(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(RunError, match="not writable"):
        RunDir.create(blocker / "run", {}, "v", {})


def test_demo_run_directory(tmp_path):
    from experiments.cli import main
    assert main(["demo", "--out", str(tmp_path / "demo"), "--scenarios", "3", "--no-progress"]) == 0
    d = tmp_path / "demo" / "run"
    assert {p.name for p in d.iterdir()} >= {"manifest.json", "responses.parquet", "metrics.json", "activations",
                                             "probes", "planted_truth.json"}
    metrics = json.loads((d / "metrics.json").read_text())
    truth = json.loads((d / "planted_truth.json").read_text())
    assert metrics["overall"]["accuracy"]["n"] > 0 and set(truth) == {"0", "1", "2", "3"}
    assert len(pd.read_parquet(d / "responses.parquet")) == 3 * 608  # the matched set: 608 items per scenario
    assert (d / "probes" / "favours_minority" / "probes.parquet").exists()


def test_resuming_with_changed_weights_is_refused(tmp_path, smoke_items):
    """A run directory started with one set of weights refuses to resume once the model's files
    change (it would otherwise mix answers of two models); the responses already written stay."""
    from experiments.config import RunConfig, SuiteConfig
    from experiments.runner import run_config
    from evenhand.models.loading import ModelSpec, weights_fingerprint
    from evenhand.models.tiny import save_tiny_model

    texts = smoke_items["prompt"].tolist()
    model_dir = save_tiny_model(tmp_path / "m", "qwen2", texts, seed=1)
    first = weights_fingerprint(str(model_dir))
    items = smoke_items.head(6)
    write_table_atomic(tmp_path / "items.parquet", items)
    cfg = RunConfig(model=ModelSpec(str(model_dir)), output_dir=str(tmp_path / "run"),
                    suite=SuiteConfig(subset=str(tmp_path / "items.parquet")), batch_size=4, resamples=50)
    run, _ = run_config(cfg, progress=False)
    assert run.manifest()["model"]["weights"] == first
    before = pd.read_parquet(run.path / "responses.parquet")
    run_config(cfg, progress=False)  # same weights: resumes
    save_tiny_model(model_dir, "qwen2", texts, seed=2)  # retrained in place
    assert weights_fingerprint(str(model_dir)) != first
    with pytest.raises(RunError, match="other weights"):
        run_config(cfg, progress=False)
    pd.testing.assert_frame_equal(pd.read_parquet(run.path / "responses.parquet"), before)
