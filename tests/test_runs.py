"""Run directories: manifest contents and atomic writes."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from evenhand.runs.rundir import RunDir, RunError, write_json_atomic, write_table_atomic


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


def test_resuming_with_changed_weights_is_refused(tmp_path, smoke_items):
    """A run directory started with one set of weights refuses to resume once the model's files
    change (it would otherwise mix answers of two models); the responses already written stay."""
    from experiments.studies.run.config import RunConfig, SuiteConfig
    from experiments.studies.run.local import run_config
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


def _layout_paths(run: RunDir):
    """Every path RunDir names, by attribute (the directories inside a run as their paths)."""
    out = {}
    for name in dir(RunDir):
        if isinstance(getattr(RunDir, name), property) and name not in ("config", "status"):
            v = getattr(run, name)
            out[name] = v.path if isinstance(v, RunDir) else v
    out.update(probe_dir=run.probe_dir("favours_minority").path, verbalize_dir=run.verbalize_dir("correct").path,
               ablation_dir=run.ablation_dir("label").path,
               cell=run.cell("mode=answer").path, mode_dir=run.mode_dir("logprob").path,
               fitted_dir=run.fitted_dir("caa-s0"), configuration_answers=run.configuration_answers("mc_logprob"),
               ray_shard=run.ray_shard(3).path)
    return out


def test_every_path_lies_under_the_run_and_keeps_its_name(tmp_path):
    run = RunDir(tmp_path / "r")
    paths = _layout_paths(run)
    assert len(paths) > 30
    for name, p in paths.items():
        assert p.parent == run.path or run.path in p.parents, name
    rel = {k: p.relative_to(run.path).as_posix() for k, p in paths.items()}
    # the names existing run directories were written with (a renamed file would break their resume)
    assert {rel[k] for k in ("manifest_path", "responses_path", "metrics_path", "decisions", "activations",
                             "figures", "report_md", "report_html", "metrics_long_path")} == {
        "manifest.json", "responses.parquet", "metrics.json", "decisions", "activations", "figures", "report.md",
        "report.html", "tables/metrics_long.parquet"}
    assert rel["probe_dir"] == "probes/favours_minority" and rel["ablation_dir"] == "ablation/label"
    assert rel["verbalize_dir"] == "verbalize/correct"
    assert run.verbalize_dir("x").descriptions_path == run.path / "verbalize" / "x" / "descriptions.parquet"
    assert rel["attribution_dir"] == "attribution" and rel["cell"] == "cells/mode=answer"
    assert rel["fitted_dir"] == "fitted/caa-s0" and rel["configuration_answers"] == "answers/mc_logprob.parquet"
    assert rel["ray_shard"] == "decisions/ray-0003" and rel["mode_dir"] == "logprob"
    assert run.probe_dir("x").probes_table == run.path / "probes" / "x" / "probes.parquet"
    assert run.ablation_dir("label").responses_path == run.path / "ablation" / "label" / "responses.parquet"


def test_a_second_process_sees_a_finished_run_as_done(tmp_path):
    import subprocess
    import sys
    run = RunDir.create(tmp_path / "r", {"a": 1}, "v", {})
    code = "import sys; from evenhand.runs.rundir import RunDir; print(RunDir(sys.argv[1]).status)"

    def status_elsewhere() -> str:
        return subprocess.run([sys.executable, "-c", code, str(run.path)], capture_output=True, text=True,
                              check=True).stdout.strip()
    assert status_elsewhere() == "running"
    run.finish()
    assert status_elsewhere() == "done"
    assert RunDir(tmp_path / "nothing").status is None


def test_resuming_a_changed_config_is_refused_naming_the_fields(tmp_path):
    config = {"model": {"model": "m", "dtype": "auto"}, "mode": "answer", "batch_size": 8}
    run = RunDir.open_or_create(tmp_path / "r", config)
    again = RunDir.open_or_create(tmp_path / "r", dict(config))  # the same config resumes
    assert again.manifest()["resumed"] == 1 and again.status == "running"
    changed = {**config, "model": {"model": "m", "dtype": "float32"}, "batch_size": 16}
    with pytest.raises(RunError, match=r"different config \(fields that differ: batch_size, model\.dtype\)"):
        RunDir.open_or_create(tmp_path / "r", changed)
    assert run.config == config  # the recorded config is untouched


def test_recording_other_weights_is_refused(tmp_path):
    run = RunDir.create(tmp_path / "r", {}, "v", {})
    run.record_model({"name": "m", "weights": "aaaa"})
    run.record_model({"name": "m", "weights": "aaaa"})
    with pytest.raises(RunError, match="other weights for model 'm' .fingerprint aaaa, now bbbb"):
        run.record_model({"name": "m", "weights": "bbbb"})
    assert run.manifest()["model"]["weights"] == "aaaa"


def test_the_model_spec_is_rebuilt_from_the_manifest_one_way(tmp_path):
    from evenhand.models.loading import ModelSpec
    spec = ModelSpec("some/model", dtype="float32", chat_template="none")
    from dataclasses import asdict
    assert RunDir.create(tmp_path / "a", {"model": asdict(spec)}, "v", {}).model_spec() == spec
    assert RunDir.create(tmp_path / "b", {"model": "evenhand-organism"}, "v", {}).model_spec() == ModelSpec(
        "evenhand-organism")
    c = RunDir.create(tmp_path / "c", {"kind": "x"}, "v", {})
    with pytest.raises(ValueError, match="names no model"):
        c.model_spec()
    c.record_model({"name": "some/model", "spec": {**asdict(spec), "unknown_field": 1}})
    assert c.model_spec() == spec


def test_find_lists_the_runs_under_a_directory(tmp_path):
    RunDir.create(tmp_path / "a", {}, "v", {})
    RunDir.create(tmp_path / "s" / "cells" / "x", {}, "v", {})
    write_json_atomic(tmp_path / "a" / "probes" / "p" / "manifest.json", {"kind": "probe_sweep"})  # no status
    assert [r.path.relative_to(tmp_path).as_posix() for r in RunDir.find(tmp_path)] == ["a", "s/cells/x"]


def test_a_run_failing_after_its_decisions_resumes_without_deciding_again(tmp_path, smoke_items, monkeypatch):
    """The runner's stages: a failure in ``score`` leaves the run failed there; the rerun skips the decisions
    (written and recorded) and finishes; a third run skips every finished stage."""
    import importlib

    import experiments.studies.run.local as runner
    from experiments.studies.run.config import CacheConfig, RunConfig, SuiteConfig
    from evenhand.models.loading import ModelSpec
    from evenhand.models.tiny import save_tiny_model

    model_dir = save_tiny_model(tmp_path / "m", "qwen2", smoke_items["prompt"].tolist(), seed=1)
    write_table_atomic(tmp_path / "items.parquet", smoke_items.head(6))
    cfg = RunConfig(model=ModelSpec(str(model_dir)), output_dir=str(tmp_path / "run"),
                    suite=SuiteConfig(subset=str(tmp_path / "items.parquet")), batch_size=4, resamples=50,
                    cache=CacheConfig(enabled=True, dtype="float32"))
    engine = importlib.import_module("experiments.studies.run.local")  # decide as the runner bound it
    decided, real_decide, real_score = [], engine.decide, runner.score_run
    monkeypatch.setattr(engine, "decide", lambda *a, **k: decided.append(1) or real_decide(*a, **k))

    def broken(*args, **kwargs):
        raise OSError("disk full")
    monkeypatch.setattr(runner, "score_run", broken)
    with pytest.raises(OSError, match="disk full"):
        runner.run_config(cfg, progress=False)
    run = RunDir(tmp_path / "run")
    assert run.status == "failed" and run.manifest()["error"]["stage"] == "score" and len(decided) == 1
    assert run.manifest()["stages_done"] == ["load_model", "decide"] and not run.metrics_path.exists()
    monkeypatch.setattr(runner, "score_run", real_score)
    _, report = runner.run_config(cfg, progress=False)
    assert len(decided) == 1 and run.status == "done" and report == run.read_metrics()
    assert run.manifest()["stages_done"] == ["load_model", "decide", "score", "cache"]
    stamp = run.metrics_path.stat().st_mtime_ns
    _, again = runner.run_config(cfg, progress=False)
    assert len(decided) == 1 and run.metrics_path.stat().st_mtime_ns == stamp and again == report
