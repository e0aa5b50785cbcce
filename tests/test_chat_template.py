"""The packaged Gemma 3 chat template: shipped as package data, used when a tokenizer has none, recorded."""
from __future__ import annotations

import configparser
import fnmatch
from pathlib import Path

import pytest

from evenhand.models.loading import (PRESETS, TEMPLATES, ModelLoadError, ModelSpec, apply_default_template,
                                     default_template)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def bare_tokenizer():
    """The organism's tokenizer (Gemma's <bos>, <start_of_turn>, ...) with its own template removed."""
    from transformers import PreTrainedTokenizerFast
    tok = PreTrainedTokenizerFast.from_pretrained(str(ROOT / "evenhand" / "models" / "organism"))
    tok.chat_template = None
    return tok


def test_template_ships_as_package_data():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    patterns = [p.strip() for p in cfg["options.package_data"]["evenhand.models"].split(",")]
    shipped = [p.relative_to(TEMPLATES.parent).as_posix() for p in TEMPLATES.glob("*.jinja")]
    assert "templates/gemma3.jinja" in shipped
    for rel in shipped:
        assert any(fnmatch.fnmatch(rel, pat) for pat in patterns), f"{rel} is not in setup.cfg's package_data"


def test_gemma3_template_renders_gemma_turns(bare_tokenizer):
    source = apply_default_template(bare_tokenizer, ModelSpec("x", default_chat_template="gemma3"))
    assert source == "packaged gemma3 (gemma3.jinja)"
    one = bare_tokenizer.apply_chat_template([{"role": "user", "content": "  Who gets it, A or B?\n"}],
                                             add_generation_prompt=True, tokenize=False)
    assert one == "<bos><start_of_turn>user\nWho gets it, A or B?<end_of_turn>\n<start_of_turn>model\n"
    talk = [{"role": "system", "content": "Be fair."}, {"role": "user", "content": "A or B?"},
            {"role": "assistant", "content": "A"}, {"role": "user", "content": "Why?"}]
    assert bare_tokenizer.apply_chat_template(talk, add_generation_prompt=False, tokenize=False) == (
        "<bos><start_of_turn>user\nBe fair.\n\nA or B?<end_of_turn>\n<start_of_turn>model\nA<end_of_turn>\n"
        "<start_of_turn>user\nWhy?<end_of_turn>\n")
    with pytest.raises(Exception, match="alternate"):
        bare_tokenizer.apply_chat_template([{"role": "assistant", "content": "A"}], tokenize=False)


def test_own_template_wins_and_none_stays_plain(bare_tokenizer):
    from evenhand.vocab.prompts import uses_chat_template
    assert apply_default_template(bare_tokenizer, ModelSpec("x")) is None
    assert not uses_chat_template(bare_tokenizer)
    bare_tokenizer.chat_template = "{{ messages[0]['content'] }}"
    assert apply_default_template(bare_tokenizer, ModelSpec("x", default_chat_template="gemma3")) == "tokenizer"
    assert bare_tokenizer.chat_template == "{{ messages[0]['content'] }}"


def test_preset_carries_the_template_and_unknown_names_fail():
    assert PRESETS["gemma-3-270m-gguf"].spec.default_chat_template == "gemma3"
    text, _ = default_template("gemma3")
    assert "<start_of_turn>" in text
    with pytest.raises(ModelLoadError, match="default_chat_template 'gemma4'"):
        default_template("gemma4")


def test_loaded_model_records_the_template_source(tmp_path):
    """A local model whose tokenizer has no template gets the default and its describe() says so."""
    import shutil

    from evenhand.models.loading import load_model
    d = tmp_path / "m"
    shutil.copytree(ROOT / "evenhand" / "models" / "organism", d)
    (d / "chat_template.jinja").unlink()
    lm = load_model(str(d), default_chat_template="gemma3", device="cpu")
    assert lm.describe()["chat_template"] == "packaged gemma3 (gemma3.jinja)"
    assert lm.describe()["spec"]["default_chat_template"] == "gemma3"
    assert lm.tokenizer.apply_chat_template([{"role": "user", "content": "x"}], add_generation_prompt=True,
                                            tokenize=False).endswith("<start_of_turn>model\n")
    plain = load_model(str(d), device="cpu")
    assert plain.describe()["chat_template"] is None
