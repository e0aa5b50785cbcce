"""The vllm engine's options and the errors that need no vLLM: the decide options, the run config, the
CLI flag and the loader's refusals (GGUF, remote code)."""
from __future__ import annotations

import pytest

from evenhand.running.decisions import DecideOptions, decide
from evenhand.engine.registry import engine_of, get, load, names
from evenhand.engine.vllm_engine import load_vllm
from evenhand.models.loading import ModelLoadError
from evenhand.support.options import ConfigError


def test_engines_and_modes():
    assert names() == ("hf", "vllm", "openai") and DecideOptions().engine == "hf"
    assert get("vllm").modes == ("answer", "reasoning") and get("hf").modes == ("answer", "reasoning", "logprob")
    for mode in get("vllm").modes:
        assert DecideOptions(mode=mode, engine="vllm").engine == "vllm"


@pytest.mark.parametrize("kw, msg", [
    ({"engine": "sglang"}, "engine must be one of hf, vllm"),
    ({"engine": "vllm", "mode": "logprob"}, "mode logprob runs on engine hf"),
    ({"engine": "vllm", "prefix_reuse": True}, "caches prefixes itself"),
])
def test_decide_options_refuse(kw, msg):
    with pytest.raises(ValueError, match=msg):
        DecideOptions(**kw)


def test_decide_refuses_a_model_loaded_for_another_engine(tiny, smoke_items):
    lm = tiny["gemma3"]
    assert engine_of(lm) == "hf"
    with pytest.raises(ValueError, match="loaded for the 'hf' engine"):
        decide(smoke_items.head(2), lm, DecideOptions(engine="vllm", progress=False))
    from evenhand.engine.scoring import score_labels
    assert score_labels(lm, ["x"], [smoke_items.iloc[0].to_dict()], True)  # hf scores labels


def test_load_hf_and_unknown(tiny_dirs):
    assert engine_of(load(str(tiny_dirs["llama"]), "hf")) == "hf"
    with pytest.raises(ValueError, match="engine must be one of"):
        load(str(tiny_dirs["llama"]), "tgi")


def test_load_vllm_refuses_remote_code_and_gguf(tiny_dirs, tmp_path):
    with pytest.raises(ModelLoadError, match="no remote code"):
        load_vllm(str(tiny_dirs["gemma3"]), trust_remote_code=True)
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + b"\0" * 60)
    with pytest.raises(ModelLoadError, match="no GGUF loader"):
        load_vllm(str(gguf))


def _run_cfg(tmp_path, **kw) -> dict:
    return {"model": "evenhand-organism", "output_dir": str(tmp_path / "r"), "suite": {"subset": "smoke"}, **kw}


@pytest.mark.parametrize("kw, msg", [
    ({"engine": "vllm", "mode": "logprob"}, "mode logprob runs on engine hf"),
    ({"engine": "vllm", "prefix_reuse": True}, "caches prefixes itself"),
    ({"engine": "vllm", "cache": {"enabled": True}}, "activation cache"),
    ({"engine": "onnx"}, "must be one of hf, vllm"),
])
def test_run_config_refuses(tmp_path, kw, msg):
    from experiments.studies.run.config import config_from_dict
    with pytest.raises(ConfigError, match=msg):
        config_from_dict(_run_cfg(tmp_path, **kw))


def test_run_config_takes_vllm(tmp_path):
    from experiments.studies.run.config import config_from_dict, options_for
    cfg = config_from_dict(_run_cfg(tmp_path, engine="vllm", mode="reasoning"))
    assert options_for(DecideOptions, cfg).engine == "vllm"
    assert config_from_dict(_run_cfg(tmp_path)).engine == "hf"


def test_cli_decide_engine_flag(tmp_path, capsys):
    from experiments.cli.main import build_parser, main
    a = build_parser().parse_args(["decide", "--model", "m", "--out", "o", "--engine", "vllm"])
    assert a.engine == "vllm"
    # any registered engine is taken (a --plugin may register one); an unknown one fails before loading
    assert main(["decide", "--model", "no/such-model", "--out", str(tmp_path / "o"), "--engine", "x"]) == 2
    assert "engine must be one of hf, vllm, openai, got 'x'" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_cli_decide_refuses_logprob_on_vllm_before_loading(tmp_path, capsys):
    from experiments.cli.main import main
    assert main(["decide", "--model", "no/such-model", "--out", str(tmp_path / "o"), "--engine", "vllm",
                 "--mode", "logprob"]) == 2
    assert "mode logprob runs on engine hf" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def _compare(**kw):
    from experiments.studies.compare import parse_config
    return parse_config({"model": "evenhand-organism-fair", "output_dir": "o",
                         "interventions": [{"name": "fair_instruction"}, {"name": "caa"}], **kw})


def test_compare_cell_engines():
    """engine vllm: the baseline and prompt methods on vLLM, activation methods on hf; engine hf: all hf."""
    from experiments.studies.compare.study import cell_engine
    from experiments.studies.compare.config import Cell
    cfg = _compare(engine="vllm")
    prompt, caa = (Cell(arm, {}, 0, 0) for arm in cfg.interventions)
    assert [cell_engine(cfg, c) for c in (None, prompt, caa)] == ["vllm", "vllm", "hf"]
    assert [cell_engine(_compare(), c) for c in (None, prompt, caa)] == ["hf", "hf", "hf"]


def test_compare_config_refuses_logprob_on_vllm():
    with pytest.raises(ConfigError, match="mode logprob runs on engine hf"):
        _compare(engine="vllm", mode="logprob")
    with pytest.raises(ConfigError, match="must be one of hf, vllm"):
        _compare(engine="tgi")


def test_registry_imports_no_vllm_and_checks_declarations():
    """Importing the registry, deciding the options of a vllm run and listing the engines imports neither vLLM nor
    torch (the engines are imported on first use, and vllm_engine imports vLLM only to load or generate)."""
    import subprocess
    import sys
    code = ("import sys; from evenhand.engine import registry; from evenhand.running.decisions import DecideOptions; "
            "DecideOptions(engine='vllm'); registry.refusal('vllm', mode='logprob'); "
            "print(sorted(m for m in ('vllm', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"

    from evenhand.engine.registry import register

    class Bad:
        name, modes, prefix_reuse, hf_model = "bad", ("answer", "beam"), "none", False

        def load(self, spec, *, shares_gpu=False): ...

        def generate(self, lm, batch, max_new, min_prefix): ...

        def score_labels(self, lm, batch, min_prefix): ...
    with pytest.raises(ValueError, match="modes must be some of answer, reasoning, logprob"):
        register(Bad())
    with pytest.raises(ValueError, match="registered already"):
        register(get("hf"))
    with pytest.raises(TypeError, match="is not an Engine"):
        register(object())
    assert names() == ("hf", "vllm", "openai")
