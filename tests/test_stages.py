"""The stage driver: skips finished stages, times each, marks a failure and resumes from it."""
from __future__ import annotations

import pytest

from evenhand.runs.rundir import RunDir, RunError, write_json_atomic
from evenhand.running.stages import LoadModel, Stage, FnStage, exists, finished_with, run_study


def _stages(calls: dict, fail_in: str | None = None):
    def make(name: str):
        def go(run: RunDir) -> str:
            calls[name] = calls.get(name, 0) + 1
            if name == fail_in:
                raise ValueError(f"{name} broke")
            write_json_atomic(run.path / f"{name}.json", {"ok": True})
            return name
        return FnStage(name, go, finished_with(lambda r: r.path / f"{name}.json"))
    return [make("a"), make("b"), make("c")]


def test_steps_are_stages():
    assert isinstance(FnStage("x", lambda run: None), Stage)
    assert isinstance(LoadModel(lambda: None), Stage)


def test_a_failing_stage_leaves_the_run_failed_and_a_rerun_resumes_there(tmp_path):
    calls: dict = {}
    with pytest.raises(ValueError, match="b broke"):
        run_study(tmp_path / "r", {"k": 1}, _stages(calls, fail_in="b"))
    run = RunDir(tmp_path / "r")
    m = run.manifest()
    assert run.status == "failed" and m["error"] == {"stage": "b", "type": "ValueError", "message": "b broke"}
    assert m["stages_done"] == ["a"] and set(m["timings"]) == {"a"} and calls == {"a": 1, "b": 1}
    run = run_study(tmp_path / "r", {"k": 1}, _stages(calls))
    assert calls == {"a": 1, "b": 2, "c": 1}  # a is not run again
    m = run.manifest()
    assert run.status == "done" and "error" not in m and m["stages_done"] == ["a", "b", "c"]
    assert set(m["timings"]) == {"a", "b", "c"} and all(v >= 0 for v in m["timings"].values())


def test_an_interrupt_marks_the_run_interrupted_with_a_message(tmp_path):
    """Ctrl-C is not a failure of the code: the run is listed as ``interrupted`` (it was ``failed`` with an empty
    message), the stage is named and the message says how to resume; a rerun resumes there."""
    def interrupted(run: RunDir) -> None:
        raise KeyboardInterrupt
    calls: dict = {}
    with pytest.raises(KeyboardInterrupt):
        run_study(tmp_path / "r", {}, [*_stages(calls)[:1], FnStage("interrupted", interrupted)])
    run = RunDir(tmp_path / "r")
    err = run.manifest()["error"]
    assert run.status == "interrupted" and err["stage"] == "interrupted" and "resume" in err["message"]
    done = run_study(tmp_path / "r", {}, [*_stages(calls)[:1], FnStage("interrupted", lambda r: None)])
    assert done.status == "done" and "error" not in done.manifest()


def test_finished_stages_are_skipped_and_announced(tmp_path):
    calls: dict = {}
    run_study(tmp_path / "r", {}, _stages(calls))
    seen = []
    always = FnStage("always", lambda run: seen.append("ran"))
    run_study(tmp_path / "r", {}, [*_stages(calls), always],
              announce=lambda i, n, stage, skipped: seen.append((i, n, stage.name, skipped)))
    assert calls == {"a": 1, "b": 1, "c": 1}
    assert seen == [(1, 4, "a", True), (2, 4, "b", True), (3, 4, "c", True), (4, 4, "always", False), "ran"]
    # a stage whose output was deleted runs again; a recorded stage without its output is not done
    (tmp_path / "r" / "b.json").unlink()
    run_study(tmp_path / "r", {}, _stages(calls))
    assert calls == {"a": 1, "b": 2, "c": 1}


def test_exists_needs_no_record(tmp_path):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "out.parquet").write_text("x")
    step = FnStage("s", lambda run: pytest.fail("must be skipped"), exists(lambda r: r.path / "out.parquet"))
    assert step.done(RunDir(tmp_path / "r"))
    assert not FnStage("s", lambda run: None, finished_with(lambda r: r.path / "out.parquet")).done(RunDir(tmp_path / "r"))


def test_the_model_stage_refuses_other_weights_and_fails_the_run(tmp_path):
    class Model:
        def __init__(self, weights):
            self.weights = weights

        def describe(self):
            return {"name": "m", "weights": self.weights}
    first = LoadModel(lambda: Model("w1"))
    run_study(tmp_path / "r", {}, [first, FnStage("use", lambda run: first())])
    assert RunDir(tmp_path / "r").manifest()["model"]["weights"] == "w1"
    calls: dict = {}
    with pytest.raises(RunError, match="other weights"):
        run_study(tmp_path / "r", {}, [LoadModel(lambda: Model("w2")), *_stages(calls)])
    assert calls == {} and RunDir(tmp_path / "r").status == "failed"
    with pytest.raises(RuntimeError, match="has not run"):
        LoadModel(lambda: Model("w1"))()


def test_a_changed_config_is_refused_before_any_stage(tmp_path):
    calls: dict = {}
    run_study(tmp_path / "r", {"mode": "answer"}, _stages(calls))
    with pytest.raises(RunError, match="fields that differ: mode"):
        run_study(tmp_path / "r", {"mode": "logprob"}, _stages(calls))
    assert calls == {"a": 1, "b": 1, "c": 1} and RunDir(tmp_path / "r").status == "done"
