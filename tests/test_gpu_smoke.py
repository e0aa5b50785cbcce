"""benchmarks/gpu_smoke.py: the prepared GPU check, in --tiny mode on CPU (the same code as on a GPU).

The harness is tested on its own (a failing check is recorded and the next still runs; each record is on disk
as soon as its check ends); the whole --tiny run is slow-marked (every check on toy widths, vLLM included)."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load():
    spec = importlib.util.spec_from_file_location("gpu_smoke", ROOT / "benchmarks" / "gpu_smoke.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gpu_smoke"] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def test_a_failing_check_is_recorded_and_the_next_still_runs(tmp_path, monkeypatch):
    smoke = _load()
    seen = []

    def boom(ctx):
        raise RuntimeError("planted failure")

    def after(ctx):
        # the failing check's record is already on disk when the next check starts
        seen.extend(json.loads(line)["check"] for line in (ctx.out / "gpu_smoke.jsonl").read_text().splitlines())
        return {"fine": True}

    def skipped(ctx):
        raise smoke.Skip("package not here")

    monkeypatch.setattr(smoke, "CHECKS", {"boom": boom, "after": after, "skipped": skipped})
    rc = smoke.main(["--tiny", "--out", str(tmp_path)])
    assert rc == 1  # a failed check makes the exit status non-zero
    summary = json.loads((tmp_path / "gpu_smoke.json").read_text())
    status = {r["check"]: r["status"] for r in summary["checks"]}
    assert status == {"boom": "failed", "after": "ok", "skipped": "skipped"}
    assert seen == ["boom"]
    assert "planted failure" in summary["checks"][0]["error"]
    assert (summary["ok"], summary["failed"], summary["skipped"]) == (1, 1, 1)


def test_checks_past_the_budget_are_skipped_not_run(tmp_path, monkeypatch):
    smoke = _load()
    ran = []
    monkeypatch.setattr(smoke, "CHECKS", {"a": lambda ctx: ran.append("a") or {}, "b": lambda ctx: ran.append("b") or {}})
    assert smoke.main(["--tiny", "--out", str(tmp_path), "--budget-s", "0"]) == 0
    summary = json.loads((tmp_path / "gpu_smoke.json").read_text())
    assert ran == [] and [r["status"] for r in summary["checks"]] == ["skipped", "skipped"]


def test_unknown_check_names_are_refused(tmp_path, capsys):
    smoke = _load()
    assert smoke.main(["--tiny", "--out", str(tmp_path), "--only", "decide,nonsense"]) == 2
    assert "nonsense" in capsys.readouterr().err


def test_oom_check_fails_when_recovery_changes_answers(tmp_path, monkeypatch):
    """The OOM check compares the recovered run with a run at the batch it finished at; a recovery that
    changed answers must fail it (here: the reference run is perturbed)."""
    smoke = _load()
    import evenhand as eh
    real = eh.decide
    calls = []

    def decide(items, lm, opts, *a, **kw):
        rows = real(items, lm, opts, *a, **kw)
        calls.append(opts.batch_size)
        if len(calls) == 2:  # the reference run
            rows = rows.copy()
            rows.loc[rows.index[0], "logprob_A"] += 1.0
        return rows

    monkeypatch.setattr(eh, "decide", decide)
    rc = smoke.main(["--tiny", "--out", str(tmp_path), "--only", "checkpoint,oom", "--archs", "qwen2",
                     "--layers", "qwen2=2"])
    summary = json.loads((tmp_path / "gpu_smoke.json").read_text())
    status = {r["check"]: r for r in summary["checks"]}
    assert status["checkpoint"]["status"] == "ok"
    assert status["oom"]["status"] == "failed" and "differs" in status["oom"]["error"], status["oom"]
    assert rc == 1


@pytest.mark.slow  # every check at toy widths (about 2 min on 2 CPU cores, vLLM's start included); the harness: above
def test_tiny_run_passes_every_check(tmp_path):
    smoke = _load()
    rc = smoke.main(["--tiny", "--out", str(tmp_path)])
    summary = json.loads((tmp_path / "gpu_smoke.json").read_text())
    bad = {r["check"]: r.get("error") or r.get("reason") for r in summary["checks"] if r["status"] != "ok"}
    assert rc == 0 and not bad, bad
    res = {r["check"]: r["result"] for r in summary["checks"]}
    assert res["checkpoint"]["gemma3-mm"]["class"] == "Gemma3ForConditionalGeneration"
    assert res["checkpoint"]["qwen2"]["class"] == "Qwen2ForCausalLM"
    assert res["oom"]["finished_at_batch"] < res["oom"]["asked_batch"]
    assert res["cache"]["gemma3-mm"]["stored_dtype"] in ("bfloat16", "float32")
    assert res["steering"]["gemma3-mm"]["hooks_after"] == 0
    assert res["restore"]["data_write_caught"]
