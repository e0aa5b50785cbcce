"""Adding a decision engine takes one file: this one. It declares an engine that answers by a rule (the item's
correct slot, else A) and registers it with one ``register`` call; `evenhand decide --engine rule` and a run config
with ``engine: rule`` then decide with it and score its rows, and the option and config rules follow from what it
declares (its modes, no prefix reuse, no Hugging Face model)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import ClassVar

import pandas as pd
import pytest

from evenhand.engine.registry import Batch, register, unregister


def rule_slot(item: dict) -> str:
    """The rule: the item's correct slot when it has one, else A."""
    return item["correct_slot"] if item.get("correct_slot") in ("A", "B") else "A"


@dataclass
class RuleModel:
    """What the rule engine loads: the model's tokenizer (EvenHand templates and tokenises prompts with it)."""
    tokenizer: object
    name: str
    engine: ClassVar[str] = "rule"

    def describe(self) -> dict:
        return {"name": self.name, "engine": self.engine}


class RuleEngine:
    """Answers every item by :func:`rule_slot`, in answer mode (a text) and logprob mode (two log-probabilities)."""
    name = "rule"
    modes = ("answer", "logprob")
    prefix_reuse = "none"
    hf_model = False

    def load(self, spec, *, shares_gpu: bool = False) -> RuleModel:
        from evenhand.models.loading import display_name, load_tokenizer, locate, resolve_spec
        spec = resolve_spec(spec)
        return RuleModel(load_tokenizer(locate(spec)[0], {}), display_name(spec))

    def generate(self, lm, batch: Batch, max_new: int, min_prefix: int) -> list[dict]:
        return [{"text": f"{item['candidate_noun']} {rule_slot(item)}", "n_new_tokens": 2, "gen_logprob": 0.0,
                 "n_prompt_tokens": len(ids)} for item, ids in zip(batch.items, batch.ids)]

    def score_labels(self, lm, batch: Batch, min_prefix: int) -> list[dict]:
        return [{"logprob_A": 0.0 if rule_slot(item) == "A" else -1.0,
                 "logprob_B": 0.0 if rule_slot(item) == "B" else -1.0,
                 "n_prompt_tokens": len(ids), "n_new_tokens": 0} for item, ids in zip(batch.items, batch.ids)]


@pytest.fixture(scope="module", autouse=True)
def rule_engine():
    yield register(RuleEngine())
    unregister("rule")


def assert_rule_rows(responses: pd.DataFrame, n: int) -> None:
    """Every item decided, each by the rule."""
    assert len(responses) == n and responses["item_id"].is_unique
    assert responses["choice"].tolist() == [rule_slot(r) for r in responses.to_dict("records")]


@pytest.mark.parametrize("mode", ["answer", "logprob"])
def test_decide_cli_with_the_rule_engine(tiny_dirs, tmp_path, capsys, mode):
    from experiments.cli.main import main
    out = tmp_path / "d"
    assert main(["decide", "--model", str(tiny_dirs["llama"]), "--subset", "smoke", "--limit", "200",
                 "--engine", "rule", "--mode", mode, "--out", str(out)]) == 0
    responses = pd.read_parquet(out / "responses.parquet")
    assert_rule_rows(responses, 200)
    assert (responses["parse_method"] == "logprob").all() == (mode == "logprob")
    capsys.readouterr()
    assert main(["score", str(out / "responses.parquet"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    accuracy = report["overall"]["accuracy"]  # the rule picks the correct slot wherever there is one
    assert accuracy["value"] == 1.0 and accuracy["n"] > 0
    assert report["overall"]["refusal"]["value"] == 0.0


def test_run_config_with_the_rule_engine(tiny_dirs, tmp_path):
    from experiments.cli.main import main
    from evenhand.runs.rundir import RunDir
    cfg = tmp_path / "run.yaml"
    cfg.write_text(f"model: {tiny_dirs['llama']}\noutput_dir: {tmp_path / 'r'}\nsuite: {{subset: smoke, limit: 200}}\n"
                   f"engine: rule\nmode: answer\nresamples: 20\n")
    assert main(["run", "--quiet", str(cfg)]) == 0
    run = RunDir(tmp_path / "r")
    assert_rule_rows(run.read_responses(), 200)
    assert run.read_metrics()["overall"]["accuracy"]["value"] == 1.0
    assert run.manifest()["model"]["engine"] == "rule"


@pytest.mark.parametrize("kw, msg", [
    ({"mode": "reasoning"}, "engine rule runs answer and logprob modes; mode reasoning runs on engine hf or vllm"),
    ({"prefix_reuse": True}, "prefix_reuse is for engine hf; engine rule does not reuse prefixes"),
    ({"cache": {"enabled": True}}, "engine rule decides only: the activation cache"),
])
def test_rules_follow_the_declaration(tmp_path, kw, msg):
    from evenhand.running.decisions import DecideOptions
    from evenhand.support.options import ConfigError
    from experiments.studies.run.config import config_from_dict
    with pytest.raises(ConfigError, match=msg):
        config_from_dict({"model": "m", "output_dir": str(tmp_path), "engine": "rule", **kw})
    if "cache" not in kw:
        with pytest.raises(ValueError, match=msg):
            DecideOptions(engine="rule", **kw)
