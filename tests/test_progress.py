"""Progress that tells the truth: `evenhand run` prints a header per stage with its counts, the time
elapsed and the time left; bars say what they are for (the ablation's decide, the probe sweep);
`--quiet` prints neither bars nor headers (warnings still print)."""
from __future__ import annotations

import io
import re

import numpy as np
import pandas as pd
import pytest
import yaml

from evenhand.runs.rundir import write_table_atomic
from evenhand.running.stages import StageReport, FnStage, run_study


def test_stage_report_prints_headers_counts_and_the_time_left(tmp_path, monkeypatch):
    now = [0.0]
    monkeypatch.setattr("evenhand.running.stages.time.perf_counter", lambda: now[0])

    def takes(seconds: float):
        def go(run) -> None:
            now[0] += seconds
        return go
    stages = [FnStage("decide", takes(10), lambda run, name: run.stage_done(name), about="100 items, answer mode",
                   work=100),
              FnStage("cache", takes(20), lambda run, name: run.stage_done(name), about="100 items, sites residual",
                   work=200),
              FnStage("figures", takes(5))]
    out = io.StringIO()
    run_study(tmp_path / "r", {}, stages, StageReport("run r", stream=out))
    # decide took 10 s for 100 items; the cache took 20 s for its 200: no guess from decide's rate (it would say
    # 0m20s, right here by chance, 2-100x off in practice): estimating until the stage has its own rate
    assert out.getvalue().splitlines() == ["[1/3] decide: 100 items, answer mode (elapsed 0m00s; time left: "
                                           "estimating… from this stage's own rate)",
                                           "[2/3] cache: 100 items, sites residual (elapsed 0m10s; time left: "
                                           "estimating… from this stage's own rate)",
                                           "[3/3] figures (elapsed 0m30s)", "run r: done in 0m35s"]
    out = io.StringIO()
    run_study(tmp_path / "r", {}, stages, StageReport(stream=out))  # resumed: finished stages are skipped
    assert out.getvalue().splitlines() == ["[1/3] decide: 100 items, answer mode (done, skipped)",
                                           "[2/3] cache: 100 items, sites residual (done, skipped)",
                                           "[3/3] figures (elapsed 0m00s)", f"{tmp_path / 'r'}: done in 0m05s"]


def test_the_time_left_in_a_stage_comes_from_its_own_measured_rate(tmp_path, monkeypatch):
    """decide runs at 10 items/s, the cache at 2 items/s (a different cost per item). The old report
    estimated the cache from decide's rate: 200 items -> 0m20s, 5x short of the 1m40s it takes. Reported
    progress gives the cache's own rate: after 50 of its 200 items in 25 s, 150 left at 2/s are 1m15s."""
    from evenhand.running.stages import report_progress
    now = [0.0]
    monkeypatch.setattr("evenhand.running.stages.time.perf_counter", lambda: now[0])

    def items(n: int, per_second: float, start: int = 0):
        def go(run) -> None:
            for k in range(start, n + 1):
                if k > start:
                    now[0] += 1 / per_second
                report_progress(k, n)
        return go
    stages = [FnStage("decide", items(100, 10), about="100 items", work=100),
              FnStage("cache", items(200, 2), about="200 items", work=200)]
    out = io.StringIO()
    run_study(tmp_path / "r", {}, stages, StageReport("run r", stream=out, every=25))
    lines = out.getvalue().splitlines()
    cache = [ln for ln in lines if ln.startswith("[2/2] cache: ") and "items/s" in ln and "guess" not in ln]
    assert cache[0] == "[2/2] cache: 50/200 items, 2.0 items/s: about 1m15s left in this stage", lines
    decide = [ln for ln in lines if ln.startswith("[1/2] decide: ") and "items/s" in ln]
    assert decide == [], lines                      # 10 s in all, under every=25: no line
    assert lines[-1] == "run r: done in 1m50s"

    out = io.StringIO()                  # a resumed stage: items done before it started do not count
    report = StageReport(stream=out, every=0)
    run_study(tmp_path / "s", {}, [FnStage("cache", items(200, 4, start=120), work=200)], report)
    assert "[1/1] cache: 121/200 items, 4.0 items/s: about 0m20s left in this stage" in out.getvalue().splitlines()


def test_report_progress_outside_a_run_does_nothing():
    from evenhand.running.stages import report_progress
    report_progress(5, 10)


@pytest.fixture
def tiny_config(tmp_path, smoke_items, tiny_dirs):
    write_table_atomic(tmp_path / "items.parquet", smoke_items.head(6))

    def write(name: str) -> str:
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump({
            "model": str(tiny_dirs["qwen2"]), "output_dir": str(tmp_path / name), "batch_size": 4, "resamples": 50,
            "suite": {"subset": str(tmp_path / "items.parquet")}, "cache": {"enabled": True, "dtype": "float32"}}))
        return str(path)
    return write


def test_evenhand_run_prints_stage_headers_and_quiet_prints_none(tiny_config, capfd):
    from experiments.cli.main import main
    config = tiny_config("loud")
    capfd.readouterr()
    assert main(["run", config]) == 0
    err = capfd.readouterr().err
    for header in (r"\[1/4\] load_model: \S+ \(elapsed", r"\[2/4\] decide: 6 items, answer mode \(elapsed",
                   r"\[3/4\] score: 6 responses, 95% CIs: jackknife-t over scenarios", r"\[4/4\] cache: 6 items, sites residual",
                   r"decide\[answer\]", r"cache\[nnsight\]", r"run \S+loud: done in \dm\d\ds"):
        assert re.search(header, err), header
    assert main(["run", config]) == 0  # resumed
    assert "[2/4] decide: 6 items, answer mode (done, skipped)" in capfd.readouterr().err

    quiet = tiny_config("quiet")
    capfd.readouterr()
    try:
        assert main(["run", quiet, "--quiet"]) == 0
    finally:  # --quiet turned off the model libraries' own bars for this process
        from huggingface_hub.utils import enable_progress_bars
        from transformers.utils import logging as hf_logging
        enable_progress_bars()
        hf_logging.enable_progress_bar()
    out, err = capfd.readouterr()
    # quiet silences progress, not warnings: the tiny random model's answers do not parse, and that
    # warning is all stderr may hold
    noise = re.sub(r"\n?!+\nWARNING: [^\n]*\n!+\n\n?", "", err)
    assert "WARNING: 100% of 6 answers" in err and noise == "", noise
    assert "[1/4]" not in out and "run directory:" in out  # the results are still printed


def test_the_ablations_decide_and_the_probe_sweep_say_what_they_are(tiny, smoke_items, capfd):
    from evenhand.running.decisions import DecideOptions, decide
    from probes.dataset import ProbeDataset
    from probes.logistic import ProbeOptions
    from probes.sweep import probe_sweep

    capfd.readouterr()
    decide(smoke_items.head(2), tiny["qwen2"], DecideOptions(batch_size=2, progress_label="ablation label"))
    assert "ablation label decide[answer]" in capfd.readouterr().err
    rng = np.random.default_rng(0)
    y = np.tile([0, 1], 100)
    ds = ProbeDataset({"blocks.0.resid_post": rng.normal(size=(200, 4)) + y[:, None]}, y, np.repeat(np.arange(20), 10),
                      pd.DataFrame({"item_id": range(200)}), "favours_minority", types=np.arange(200) % 4)
    probe_sweep(ds, ProbeOptions(folds=4, inner_folds=2, Cs=(1.0,)), resamples=20, progress=True)
    err = capfd.readouterr().err
    assert "probe[favours_minority]" in err and "3/3" in err  # the fit, the control, one site scored
    probe_sweep(ds, ProbeOptions(folds=4, inner_folds=2, Cs=(1.0,)), resamples=20)
    assert "probe[" not in capfd.readouterr().err
