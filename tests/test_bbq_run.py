"""BBQ asked five ways: option log-probabilities, parsing, and an end-to-end run on a tiny model."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from evenhand.bbq.data import default_dir
from experiments.studies.bbq.study import CONFIGURATIONS, BBQConfig, option_logprobs, parse_config, parse_letter, parse_yes

HAVE_DATA = any(default_dir().glob("*.jsonl")) if default_dir().exists() else False


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    from evenhand.models.loading import load_model
    from evenhand.models.tiny import save_tiny_model
    texts = ["The grandfather and the grandson were there . Who was not comfortable ? A B C yes no",
             "Question : Is the answer", "Answer with the letter only ."]
    return load_model(str(save_tiny_model(tmp_path_factory.mktemp("bbq") / "m", "gemma3", texts, seed=2)))


def test_option_logprobs_equal_a_full_sequence_computation(lm):
    texts = ["The grandfather and the grandson were there", "Who was not comfortable"]
    opts = [["A", "B C", "yes"], ["no", "A"]]
    got = option_logprobs(lm, texts, opts, special=True, batch_size=3)
    tok = lm.tokenizer
    for i, (t, os_) in enumerate(zip(texts, opts)):
        for j, o in enumerate(os_):
            ctx = tok(t, add_special_tokens=True)["input_ids"]
            full = tok(t + " " + o, add_special_tokens=True)["input_ids"]
            with torch.inference_mode():
                logp = torch.log_softmax(lm.model(torch.tensor([full])).logits[0].float(), -1)
            want = sum(float(logp[p - 1, full[p]]) for p in range(len(ctx), len(full)))
            assert got[i, j] == pytest.approx(want, abs=1e-4)
    assert got[1, 2] == -np.inf


def test_parsers():
    assert [parse_letter(t) for t in ("B", "Answer: C.", "a", "")] == [1, 2, -1, -1]
    assert parse_yes("Yes, it is") == 1.0 and parse_yes("no") == 0.0 and np.isnan(parse_yes("maybe"))


def test_config_errors_name_the_field():
    with pytest.raises(ValueError, match="model"):
        parse_config({"output_dir": "x"})
    with pytest.raises(ValueError, match="configurations"):
        parse_config({"model": "m", "output_dir": "x", "configurations": ["mc_vibes"]})
    assert parse_config({"model": "m", "output_dir": "x"}).configurations == tuple(CONFIGURATIONS)


@pytest.mark.skipif(not HAVE_DATA, reason=f"BBQ files not found in {default_dir()}")
def test_five_configurations_run_end_to_end(lm, tmp_path, monkeypatch):
    from experiments.studies.bbq import study as bbq_run
    monkeypatch.setattr(bbq_run, "load_model", lambda spec: lm)
    cfg = BBQConfig(model=str(tmp_path), output_dir=str(tmp_path / "out"), categories=("Age", "Religion"),
                    per_category=6, batch_size=8, max_new_tokens=3, resamples=50)
    monkeypatch.setattr(bbq_run, "locate", lambda spec: (str(tmp_path), None, "test"))
    table = bbq_run.run_bbq(cfg, progress=False)
    answers = pd.read_parquet(tmp_path / "out" / "answers.parquet")
    assert set(answers["configuration"]) == set(CONFIGURATIONS) and len(answers) == 5 * 12
    assert answers["answer_index"].between(-1, 2).all()
    applied = answers.groupby("configuration")["chat_template_applied"].first()
    assert not applied["mc_logprob"] and applied["mc_logprob_chat"]
    assert set(table["metric"]) == {"acc_ambig", "acc_disambig", "bias_ambig", "bias_disambig"}
    assert {"all", "Age", "Religion"} <= set(table["category"])
    assert (tmp_path / "out" / "bias_by_configuration.pdf").exists()
    again = bbq_run.run_bbq(cfg, progress=False)  # resumed: every configuration's answers exist
    pd.testing.assert_frame_equal(table, again)
