""""engine" names the decision engine only: the activation cache's choice is ``backend`` and the probe's ``solver``.
An old key or flag is refused naming the new one; a run made before the rename resumes (its recorded config is
read under the new names)."""
from __future__ import annotations

import pytest

from evenhand.support.options import ConfigError


@pytest.mark.parametrize("section, old, new", [
    ({"cache": {"enabled": True, "engine": "nnsight"}}, "cache.engine", "cache.backend"),
    ({"cache": {"enabled": True}, "probe": {"engine": "torch"}}, "probe.engine", "probe.solver"),
    ({"cache": {"enabled": True}, "ablation": {"engine": "sklearn"}}, "ablation.engine", "ablation.solver"),
])
def test_old_config_key_names_the_new_one(tmp_path, section, old, new):
    from experiments.studies.run.config import config_from_dict
    with pytest.raises(ConfigError, match=f"config field '{old}' is now '{new}'"):
        config_from_dict({"model": "m", "output_dir": str(tmp_path), **section})


def test_new_config_keys():
    from experiments.studies.run.config import config_from_dict
    cfg = config_from_dict({"model": "m", "output_dir": "o", "cache": {"enabled": True, "backend": "transformer_lens"},
                            "probe": {"solver": "torch"}, "ablation": {"solver": "sklearn"}})
    assert (cfg.cache.backend, cfg.probe.solver, cfg.ablation.solver) == ("transformer_lens", "torch", "sklearn")
    with pytest.raises(ConfigError, match="cache.backend' must be one of nnsight, transformer_lens"):
        config_from_dict({"model": "m", "output_dir": "o", "cache": {"backend": "torch"}})
    with pytest.raises(ConfigError, match="probe.solver' must be one of auto, torch, sklearn"):
        config_from_dict({"model": "m", "output_dir": "o", "probe": {"solver": "nnsight"}})


@pytest.mark.parametrize("argv, new", [
    (["cache", "--model", "m", "--out", "o", "--engine", "nnsight"], "--backend"),
    (["probe", "sweep", "run", "--engine", "torch"], "--solver"),
    (["probe", "ablation", "run", "--engine", "torch"], "--solver"),
])
def test_old_flag_names_the_new_one(argv, new, capsys):
    from experiments.cli.main import build_parser
    with pytest.raises(SystemExit):
        build_parser().parse_args(argv)
    assert f"--engine is now {new}" in capsys.readouterr().err


def test_new_flags():
    from experiments.cli.main import build_parser
    assert build_parser().parse_args(["cache", "--model", "m", "--out", "o", "--backend", "transformer_lens"]).backend \
        == "transformer_lens"
    assert build_parser().parse_args(["probe", "sweep", "run", "--solver", "torch"]).solver == "torch"


def test_run_made_before_the_rename_resumes(tmp_path):
    """A manifest recording cache.engine/probe.engine resumes under a config with cache.backend/probe.solver: its
    finished stages stay finished and the manifest then records the new names; without the renames it is refused."""
    from evenhand.runs.rundir import RunDir, RunError
    from experiments.studies.run.config import RENAMED
    from experiments.studies.run.local import KEEP_STAGES, MAY_CHANGE
    old = {"model": "m", "mode": "answer", "cache": {"enabled": True, "engine": "nnsight", "dtype": "float16"},
           "probe": {"label": "favours_minority", "engine": "auto"}, "ablation": {"engine": "torch"}}
    new = {"model": "m", "mode": "answer", "cache": {"enabled": True, "backend": "nnsight", "dtype": "float16"},
           "probe": {"label": "favours_minority", "solver": "auto"}, "ablation": {"solver": "torch"}}
    run = RunDir.create(tmp_path / "r", old, suite_version=None, seeds={})
    for stage in ("decide", "cache", "probe"):
        run.mark_stage_done(stage, 1.0)
    run.unlock()
    done = run.manifest()["stages_done"]
    with pytest.raises(RunError, match="cache"):
        RunDir.open_or_create(tmp_path / "r", new, MAY_CHANGE, KEEP_STAGES)
    resumed = RunDir.open_or_create(tmp_path / "r", new, MAY_CHANGE, KEEP_STAGES, renamed=RENAMED)
    resumed.unlock()
    m = resumed.manifest()
    assert m["stages_done"] == done and "config_changes" not in m
    assert m["config"]["cache"] == new["cache"] and m["config"]["probe"] == new["probe"]
    assert m["config"]["ablation"] == new["ablation"]
    a_changed = dict(new, probe={"label": "correct", "solver": "auto"})  # a real change still counts as one
    again = RunDir.open_or_create(tmp_path / "r", a_changed, MAY_CHANGE, KEEP_STAGES, renamed=RENAMED)
    again.unlock()
    assert again.manifest()["config_changes"][0]["fields"] == {"probe": {"old": new["probe"], "new": a_changed["probe"]}}
