"""Every registered intervention on a tiny random Gemma3: fit, save/load, decide, exact restore."""
from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

from evenhand.decide import DecideOptions
from evenhand.models.loading import load_model
from evenhand.models.tiny import save_tiny_model
from interventions.base import (REGISTRY, Fitted, Intervention, InterventionError, decide_with, get, register,
                                registered)

NAMES = ["fair_instruction", "identity_blind", "self_critique", "counterfactual_cot", "caa", "ace", "leace",
         "loreft", "reft_r1"]
FAST = {"caa": {"batch_size": 8}, "ace": {"batch_size": 8}, "leace": {"batch_size": 8, "layers": [0, 1]},
        "loreft": {"steps": 3, "batch_size": 4, "rank": 2}, "reft_r1": {"steps": 3, "batch_size": 4},
        "self_critique": {"critique_max_new_tokens": 4, "final_max_new_tokens": 4},
        "counterfactual_cot": {"reason_max_new_tokens": 4, "final_max_new_tokens": 4}}


@pytest.fixture(scope="module")
def lm(tmp_path_factory, smoke_items):
    d = save_tiny_model(tmp_path_factory.mktemp("iv") / "g", "gemma3", smoke_items["prompt"].tolist() +
                        ["the first candidate", "the second candidate"], seed=3)
    return load_model(str(d))


@pytest.fixture(scope="module")
def train_items(smoke_items):
    rows = smoke_items[smoke_items["degree"] > 0].sample(40, random_state=0).reset_index(drop=True)
    assert rows["minority_slot"].nunique() == 2
    return rows


@pytest.fixture(scope="module")
def eval_items(smoke_items):
    return smoke_items[smoke_items["degree"] > 0].tail(6).reset_index(drop=True)


def logits(lm, items):
    from evenhand.prompts import model_text, user_message
    texts = [model_text(lm.tokenizer, user_message(r)) for r in items.to_dict("records")]
    enc = lm.tokenizer(texts, add_special_tokens=False, padding=True, return_tensors="pt")
    with torch.inference_mode():
        return lm.model(**enc).logits.clone()


def test_the_nine_methods_are_registered():
    rows = registered()
    assert [r["name"] for r in rows if r["name"] in NAMES] and {r["name"] for r in rows} >= set(NAMES)
    kinds = {r["name"]: r["kind"] for r in rows}
    assert {kinds[n] for n in NAMES[:4]} == {"prompt"}
    assert {kinds[n] for n in ("caa", "ace", "leace")} == {"activation"}
    assert {kinds[n] for n in ("loreft", "reft_r1")} == {"learned"}


def test_registry_rejects_duplicates_and_unknowns():
    with pytest.raises(InterventionError, match="already registered"):
        @register
        class Dup(Intervention):
            """x"""
            name = "caa"
            kind = "prompt"
    assert REGISTRY["caa"].__name__ == "CAA"
    with pytest.raises(InterventionError, match="unknown intervention"):
        get("sorcery")
    with pytest.raises(InterventionError, match="unknown option"):
        get("caa", alphaa=2)


@pytest.mark.parametrize("name", NAMES)
def test_every_intervention_fits_saves_decides_and_restores(name, lm, train_items, eval_items, tmp_path):
    iv = get(name, **FAST.get(name, {}))
    before = logits(lm, eval_items)
    params = {k: v.clone() for k, v in lm.model.state_dict().items()}
    fitted = iv.fit(lm, train_items, seed=0)
    assert torch.equal(logits(lm, eval_items), before), "fitting changed the model"
    fitted.save(tmp_path / "f")
    assert not list(tmp_path.glob("**/*.pkl")) and json.loads((tmp_path / "f" / "fitted.json").read_text())
    loaded = Fitted.load(tmp_path / "f")
    assert loaded.name == name and sorted(loaded.tensors) == sorted(fitted.tensors)
    for k in fitted.tensors:
        assert torch.equal(loaded.tensors[k], fitted.tensors[k].cpu())
    if iv.kind != "prompt":
        with iv.apply(loaded, lm):
            inside = logits(lm, eval_items)
        assert inside.shape == before.shape
    out = decide_with(iv, loaded, eval_items, lm, DecideOptions(batch_size=4, max_new_tokens=4, progress=False))
    assert len(out) == len(eval_items) and (out["intervention"] == name).all()
    assert out["item_id"].tolist() == eval_items["item_id"].tolist()
    assert out["prompt"].tolist() == eval_items["prompt"].tolist()  # scored on the original items
    after = logits(lm, eval_items)
    assert torch.equal(after, before), "the model is not exactly as before"
    for k, v in lm.model.state_dict().items():
        assert torch.equal(v, params[k])


def test_restored_after_an_exception(lm, train_items, eval_items):
    iv = get("ace", batch_size=8)
    fitted = iv.fit(lm, train_items)
    before = logits(lm, eval_items)
    with pytest.raises(RuntimeError, match="boom"):
        with iv.apply(fitted, lm):
            raise RuntimeError("boom")
    assert torch.equal(logits(lm, eval_items), before)


def test_activation_methods_change_logits_and_controls_differ(lm, train_items, eval_items):
    before = logits(lm, eval_items)
    for name, opts in (("caa", {"alpha": 8.0, "batch_size": 8}), ("ace", {"batch_size": 8})):
        iv = get(name, **opts)
        f = iv.fit(lm, train_items)
        c = get(name, **{**opts, "control": "random"}).fit(lm, train_items)
        with iv.apply(f, lm):
            steered = logits(lm, eval_items)
        assert not torch.equal(steered, before), name
        k = next(iter(f.tensors))
        assert not torch.allclose(f.tensors[k], c.tensors[k])
        if name == "caa":
            assert torch.allclose(f.tensors[k].norm(), c.tensors[k].norm(), rtol=1e-5)


def test_fitted_load_errors_name_the_problem(tmp_path):
    with pytest.raises(InterventionError, match="fitted.json"):
        Fitted.load(tmp_path)
    (tmp_path / "fitted.json").write_text(json.dumps({"name": "caa"}))
    with pytest.raises(InterventionError, match="options"):
        Fitted.load(tmp_path)


def test_compare_config_errors_name_the_field():
    from interventions.compare import parse_config
    with pytest.raises(ValueError, match="model"):
        parse_config({"output_dir": "x", "interventions": []})
    with pytest.raises(ValueError, match=r"interventions\[0\].name"):
        parse_config({"model": "m", "output_dir": "x", "interventions": [{"name": "nope"}]})
    with pytest.raises(ValueError, match="sweep.alpha"):
        parse_config({"model": "m", "output_dir": "x", "interventions": [{"name": "caa", "sweep": {"alpha": 2}}]})
    cfg = parse_config({"model": "m", "output_dir": "x", "interventions": [
        {"name": "caa", "sweep": {"alpha": [1, 2]}}, {"name": "loreft", "seeds": [0, 1]}]})
    from interventions.compare import cells
    keys = [c.key for c in cells(cfg)]
    assert len(keys) == len(set(keys)) == 2 * 2 + 2  # caa: 2 alphas x (method, random control); loreft: 2 seeds
    assert len({c.fit_key for c in cells(cfg) if c.arm.name == "caa"}) == 2  # alpha sweeps reuse one fit


def test_frontier_figure_from_a_table(tmp_path):
    from interventions.figures import frontier_figure
    rows = []
    for cell, name, ctl, red, loss in (("caa-1", "caa", False, 0.1, 0.02), ("caa-1r", "caa", True, 0.0, 0.0),
                                       ("ace", "ace", False, 0.05, 0.01)):
        base = {"cell": cell, "intervention": name, "control": ctl, "options": "{}", "seed": 0, "kind": "activation"}
        rows.append({**base, "metric": "fraggap", "stat": "asymmetry_reduction", "value": red,
                     "ci_low": red - .05, "ci_high": red + .05, "n": 10})
        rows.append({**base, "metric": "accuracy", "stat": "accuracy_loss", "value": loss,
                     "ci_low": loss - .01, "ci_high": loss + .01, "n": 10})
    paths = frontier_figure(pd.DataFrame(rows), tmp_path / "frontier")
    assert [p.suffix for p in paths] == [".pdf", ".svg", ".png"] and all(p.stat().st_size > 1000 for p in paths)
