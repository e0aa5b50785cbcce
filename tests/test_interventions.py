"""Every registered intervention on a tiny random Gemma3: fit, save/load, decide, exact restore, controls.

The per-method tests are parametrised over the registry (the built-in methods and every plugin in
``examples/``, a file there that registers a method), so a newly registered method gets them without editing any list here."""
from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from evenhand.running.decisions import DecideOptions
from evenhand.models.loading import load_model
from evenhand.models.tiny import save_tiny_model
from interventions.base import (REGISTRY, DirectionIntervention, EditingIntervention, Fitted, Intervention,
                                InterventionError, decide_with, register)
from interventions.registry import get, load_plugin, registered

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = sorted(p for p in (ROOT / "examples").glob("*.py") if "@register" in p.read_text())  # method plugins
for _plugin in PLUGINS:
    load_plugin(_plugin)
NINE = ["fair_instruction", "identity_blind", "self_critique", "counterfactual_cot", "caa", "ace", "leace",
        "loreft", "reft_r1"]
REGISTERED = sorted(r["name"] for r in registered())
CONTROLLED = [n for n in REGISTERED if REGISTRY[n].has_random_control]
# Speed only: smaller fits and budgets for the tiny model. A method missing here runs with its defaults.
FAST = {"caa": {"batch_size": 8}, "ace": {"batch_size": 8}, "leace": {"batch_size": 8, "layers": [0, 1]},
        "loreft": {"steps": 3, "batch_size": 4, "rank": 2}, "reft_r1": {"steps": 3, "batch_size": 4},
        "self_critique": {"critique_max_new_tokens": 4, "final_max_new_tokens": 4},
        "counterfactual_cot": {"reason_max_new_tokens": 4, "final_max_new_tokens": 4}}
COMPARE = {"train": {"scenarios": 3, "max_items": 40}, "eval": {"scenarios": 1}, "validation": {"scenarios": 1},
           "mode": "logprob",
           "batch_size": 32, "resamples": 20, "control_draws": 2}  # 2 controls (speed; warns below 20)


def compare_config(model: str, out: Path, arms: list[dict], controls: bool = True, **extra):
    from experiments.studies.compare import parse_config
    return parse_config({"model": model, "output_dir": str(out), **COMPARE, "controls": controls,
                         "interventions": arms, **extra})


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, smoke_items):
    from experiments.studies.compare import item_sets
    sets = item_sets(compare_config("m", Path("x"), [{"name": "caa", "sweep": {"alpha": [1.0, 4.0]}}]))
    texts = smoke_items["prompt"].tolist() + [p for t in (sets.train, sets.validation, sets.heldout)
                                              for p in t["prompt"].tolist()]
    return save_tiny_model(tmp_path_factory.mktemp("iv") / "g", "gemma3", texts +
                           ["the first candidate", "the second candidate"], seed=3)


@pytest.fixture(scope="module")
def lm(model_dir):
    return load_model(str(model_dir))


@pytest.fixture(scope="module")
def train_items(smoke_items):
    rows = smoke_items[smoke_items["degree"] > 0].sample(40, random_state=0).reset_index(drop=True)
    assert rows["minority_slot"].nunique() == 2
    return rows


@pytest.fixture(scope="module")
def eval_items(smoke_items):
    return smoke_items[smoke_items["degree"] > 0].tail(6).reset_index(drop=True)


@pytest.fixture(scope="module")
def fits(lm, train_items):
    """One fit per registered method (made on first use), shared by the per-method tests."""
    cache: dict[str, Fitted] = {}

    def fit(name: str) -> Fitted:
        if name not in cache:
            method = get(name)
            fit_opts, _ = method.split_options(FAST.get(name, {}))
            cache[name] = method.fit(lm, train_items, fit_opts, seed=0)
        return cache[name]
    return fit


def logits(lm, items):
    from evenhand.vocab.prompts import model_text, user_message
    texts = [model_text(lm.tokenizer, user_message(r)) for r in items.to_dict("records")]
    enc = lm.tokenizer(texts, add_special_tokens=False, padding=True, return_tensors="pt")
    with torch.inference_mode():
        return lm.model(**enc).logits.clone()


def test_the_nine_methods_are_registered():
    rows = registered()
    assert {r["name"] for r in rows} >= set(NINE) and set(NINE) <= set(REGISTERED)
    kinds = {r["name"]: r["kind"] for r in rows}
    assert {kinds[n] for n in NINE[:4]} == {"prompt"}
    assert {kinds[n] for n in ("caa", "ace", "leace")} == {"activation"}
    assert {kinds[n] for n in ("loreft", "reft_r1")} == {"learned"}
    assert {n for n in NINE if REGISTRY[n].has_random_control} == {"caa", "ace", "leace", "reft_r1"}
    for r in rows:  # fit and apply options are declared separately, never the seed
        assert not set(r["fit_options"]) & set(r["apply_options"]) and "seed" not in r["fit_options"]
    assert set(get("caa").split_options({})[0].__dataclass_fields__) == {"layers", "batch_size", "contrast"}
    assert {f.name for f in fields(get("leace").split_options({})[1])} == {"positions", "at_layers", "strength"}
    for name in ("caa", "ace", "leace", "loreft", "reft_r1"):  # where the edits act: an apply option of each
        assert {"positions", "at_layers"} <= {f.name for f in fields(get(name).split_options({})[1])}


def test_registry_rejects_duplicates_unknowns_and_bad_declarations():
    with pytest.raises(InterventionError, match="already registered"):
        @register
        class Dup(Intervention):
            """x"""
            name = "caa"
            kind = "prompt"
    assert REGISTRY["caa"].__name__ == "CAA"
    with pytest.raises(InterventionError, match="unknown intervention"):
        get("sorcery")
    with pytest.raises(InterventionError, match="unknown option.*alphaa"):
        get("caa").split_options({"alphaa": 2})
    with pytest.raises(InterventionError, match="option layers"):
        get("caa").split_options({"layers": "top"})
    with pytest.raises(InterventionError, match="overrides apply"):
        class Free(DirectionIntervention):
            def apply(self, fitted, lm, options=None):
                return None

    @dataclass(frozen=True)
    class Seeded:
        seed: int = 0
    with pytest.raises(InterventionError, match="seed cannot be an option"):
        @register
        class SeedOption(Intervention):
            """x"""
            name = "seed_option"
            FitOptions = Seeded

    @dataclass
    class Mutable:
        strength: float = 1.0
    with pytest.raises(InterventionError, match="frozen dataclass"):
        @register
        class MutableOption(Intervention):
            """x"""
            name = "mutable_option"
            ApplyOptions = Mutable
    assert not {"seed_option", "mutable_option"} & set(REGISTRY)


@pytest.mark.parametrize("name", REGISTERED)
def test_every_registered_method_decides_and_restores(name, lm, fits, train_items, eval_items):
    method = get(name)
    before = logits(lm, eval_items)
    params = {k: v.clone() for k, v in lm.model.state_dict().items()}
    fitted = fits(name)
    assert torch.equal(logits(lm, eval_items), before), "fitting changed the model"
    _, apply_opts = method.split_options(FAST.get(name, {}))
    if isinstance(method, EditingIntervention):
        with method.apply(fitted, lm, apply_opts):
            inside = logits(lm, eval_items)
        assert inside.shape == before.shape
        assert torch.equal(logits(lm, eval_items), before)
    out = decide_with(method, fitted, eval_items, lm, DecideOptions(batch_size=4, max_new_tokens=4, progress=False),
                      apply_opts)
    assert len(out) == len(eval_items) and (out["intervention"] == name).all()
    assert out["item_id"].tolist() == eval_items["item_id"].tolist()
    assert out["prompt"].tolist() == eval_items["prompt"].tolist()  # scored on the original items
    after = logits(lm, eval_items)
    assert torch.equal(after, before), "the model is not exactly as before"
    for k, v in lm.model.state_dict().items():
        assert torch.equal(v, params[k])


EDITING = [n for n in REGISTERED if isinstance(get(n), EditingIntervention)]
HOOK_CALLS = ("register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook",
              "register_full_backward_pre_hook", "register_backward_hook")


@pytest.mark.parametrize("name", EDITING)
def test_every_edit_and_read_goes_through_steering_hooks(name, lm, train_items, eval_items, monkeypatch):
    """While an editing method fits, applies and decides, every hook attached to a module is attached by
    evenhand/engine/hooks.py, whose public face is steering/hooks.py (or by the model's own transformers/torch
    code), never by the method, pyvene or nnsight (the static check: tests/test_hook_mechanism.py). Fails on the tree before steering.hooks.observe, where
    caa, ace, leace and reft_r1 read their training activations with hooks registered in interventions/."""
    import sys
    callers = []
    for attr in HOOK_CALLS:
        original = getattr(torch.nn.Module, attr)

        def spy(self, *args, _original=original, **kwargs):
            callers.append(sys._getframe(1).f_globals.get("__name__", "?"))
            return _original(self, *args, **kwargs)
        monkeypatch.setattr(torch.nn.Module, attr, spy)
    method = get(name)
    fit_opts, apply_opts = method.split_options(FAST.get(name, {}))
    fitted = method.fit(lm, train_items, fit_opts, seed=0)
    decide_with(method, fitted, eval_items.head(2), lm, DecideOptions(batch_size=2, max_new_tokens=2, progress=False),
                apply_opts)
    assert "evenhand.engine.hooks" in callers  # the spy sees the registrations
    others = sorted({c for c in callers
                     if c != "evenhand.engine.hooks" and not c.startswith(("transformers.", "torch."))})
    assert not others, f"{name}: hooks registered from {others}, not through steering.hooks (evenhand.engine.hooks)"


@pytest.mark.parametrize("name", REGISTERED)
def test_every_registered_method_round_trips(name, lm, fits, train_items, eval_items, tmp_path):
    method = get(name)
    fitted = fits(name)
    fit_opts, apply_opts = method.split_options(FAST.get(name, {}))
    assert fitted.name == name and fitted.seed == 0 and fitted.control == "none" and len(fitted.key) == 64
    assert method.fit_options_of(fitted) == fit_opts
    fitted.save(tmp_path / "f")
    assert not list(tmp_path.glob("**/*.pkl")) and json.loads((tmp_path / "f" / "fitted.json").read_text())
    loaded = Fitted.load(tmp_path / "f")
    assert (loaded.name, loaded.fit_options, loaded.seed, loaded.key, loaded.control, loaded.info) == (
        fitted.name, fitted.fit_options, fitted.seed, fitted.key, fitted.control, fitted.info)
    assert list(loaded.tensors) == list(fitted.tensors)
    for k in fitted.tensors:
        assert torch.equal(loaded.tensors[k], fitted.tensors[k].cpu())
    if isinstance(method, EditingIntervention):
        with method.apply(fitted, lm, apply_opts):
            want = logits(lm, eval_items)
        with method.apply(loaded, lm, apply_opts):
            assert torch.equal(logits(lm, eval_items), want)


@pytest.mark.parametrize("name", CONTROLLED)
def test_every_direction_method_gets_a_random_control(name, lm, fits, eval_items, tmp_path):
    from experiments.studies.compare import cells
    method = get(name)
    fitted = fits(name)
    control = method.random_control(fitted, seed=1)
    assert control.control == "random" and control.key == fitted.key and list(control.tensors) == list(fitted.tensors)
    changed = [k for k in fitted.tensors if not torch.equal(control.tensors[k], fitted.tensors[k])]
    assert changed
    if name in ("ace", "leace"):  # erasers: the control is the same eraser refitted on permuted labels
        from interventions.steered import eraser_norms
        assert control.info["operator_norms"] == eraser_norms(control) and control.info["control_seed"] == 1
    else:
        for k in changed:
            if k.endswith("/direction"):
                assert torch.allclose(control.tensors[k].norm(), fitted.tensors[k].norm(), rtol=1e-5)
    assert torch.equal(method.random_control(fitted, seed=1).tensors[changed[0]], control.tensors[changed[0]])
    assert not torch.equal(method.random_control(fitted, seed=2).tensors[changed[0]], control.tensors[changed[0]])
    loaded = Fitted.load(control.save(tmp_path / "c"))
    assert loaded.control == "random"
    with pytest.raises(InterventionError, match="already a random control"):
        method.random_control(control, seed=1)
    cfg = compare_config("m", tmp_path, [{"name": name}])
    assert [c.control for c in cells(cfg)] == [0, 1, 2]


def test_several_random_controls_per_fit_draw_distinct_directions(lm, fits, tmp_path):
    """control_draws: k controls per fit, each with its own seed and cell; the first keeps the one-draw cell
    (so a finished run's cells are still found); an arm's own control_draws overrides the config's."""
    from experiments.studies.compare import cells, parse_config
    from experiments.studies.compare.config import CONTROL_SEED_STRIDE
    from evenhand.support.options import ConfigError
    raw = {"model": "m", "output_dir": str(tmp_path), **COMPARE, "control_draws": 3,
           "interventions": [{"name": "caa"}, {"name": "ace", "control_draws": 1}, {"name": "fair_instruction"}]}
    grid = cells(parse_config(raw))
    caa = [c for c in grid if c.arm.name == "caa"]
    assert [c.control for c in caa] == [0, 1, 2, 3]
    assert [c.key for c in caa] == ["caa-s0", "caa-s0-random", "caa-s0-random2", "caa-s0-random3"]
    assert [c.control_seed for c in caa] == [0, 0, CONTROL_SEED_STRIDE, 2 * CONTROL_SEED_STRIDE]
    assert [c.control for c in grid if c.arm.name == "ace"] == [0, 1]
    assert [c.control for c in grid if c.arm.name == "fair_instruction"] == [0]
    method, fitted = get("caa"), fits("caa")
    drawn = [method.random_control(fitted, c.control_seed).tensors for c in caa[1:]]
    key = next(k for k in fitted.tensors if k.endswith("/direction"))
    assert not torch.equal(drawn[0][key], drawn[1][key]) and not torch.equal(drawn[1][key], drawn[2][key])
    with pytest.raises(ConfigError, match=r"interventions\[0\].control_draws"):
        parse_config({**raw, "interventions": [{"name": "caa", "control_draws": 0}]})
    with pytest.raises(ConfigError, match="control_draws"):
        parse_config({**raw, "control_draws": 0})


def test_the_seed_is_one_argument_of_fit(lm, fits, train_items):
    """The seed is never an option: it is the argument of fit, recorded in the Fitted and its key."""
    loreft = get("loreft")
    opts, _ = loreft.split_options(FAST["loreft"])
    a, b = fits("loreft"), loreft.fit(lm, train_items, opts, seed=0)
    c = loreft.fit(lm, train_items, opts, seed=1)
    assert a.key == b.key and all(torch.equal(a.tensors[k], b.tensors[k]) for k in a.tensors)
    assert c.seed == 1 and c.key != a.key and any(not torch.equal(a.tensors[k], c.tensors[k]) for k in a.tensors)
    with pytest.raises(InterventionError, match="unknown option.*seed"):
        loreft.split_options({"seed": 1})


def test_restored_after_an_exception(lm, fits, eval_items):
    iv = get("ace")
    fitted = fits("ace")
    before = logits(lm, eval_items)
    with pytest.raises(RuntimeError, match="boom"):
        with iv.apply(fitted, lm):
            raise RuntimeError("boom")
    assert torch.equal(logits(lm, eval_items), before)


def test_activation_methods_change_logits_and_controls_differ(lm, fits, eval_items):
    before = logits(lm, eval_items)
    for name, opts in (("caa", {"alpha": 8.0, "positions": "all"}), ("ace", {})):  # a prompt-only forward
        iv = get(name)
        f = fits(name)
        c = iv.random_control(f, seed=0)
        with iv.apply(f, lm, opts):
            steered = logits(lm, eval_items)
        assert not torch.equal(steered, before), name
        k = next(iter(f.tensors))
        assert not torch.allclose(f.tensors[k], c.tensors[k])
        if name == "caa":
            assert torch.allclose(f.tensors[k].norm(), c.tensors[k].norm(), rtol=1e-5)


def test_apply_checks_that_the_model_is_restored(lm, eval_items):
    """The base class owns the edits: an edit that leaves a hook or changes a weight is caught on exit."""
    class _Bad(DirectionIntervention):
        name = "bad"
        effect = "hook"

        def fit_parameters(self, lm, train_items, options, seed, progress):
            if self.effect == "fit":
                lm.model.model.norm.register_forward_hook(lambda *a: None)
            return {}, {}

        def edits(self, fitted, lm, options):
            model, effect = lm.model, self.effect

            def edit(h):
                if effect == "hook":
                    model.model.norm.register_forward_hook(lambda *a: None)
                else:
                    next(model.parameters()).data.mul_(1.0001)
                return h
            return {"blocks.0.resid_post": edit}

    state = {k: v.clone() for k, v in lm.model.state_dict().items()}
    hooks = dict(lm.model.model.norm._forward_hooks)
    bad = _Bad()
    fitted = bad.fit(lm, None)
    with pytest.raises(InterventionError, match="not as it was: hook"):
        with bad.apply(fitted, lm):
            logits(lm, eval_items.head(1))
    for key in set(lm.model.model.norm._forward_hooks) - set(hooks):
        del lm.model.model.norm._forward_hooks[key]
    bad.effect = "weight"
    with pytest.raises(InterventionError, match="parameter .* changed"):
        with bad.apply(fitted, lm):
            logits(lm, eval_items.head(1))
    lm.model.load_state_dict(state)
    bad.effect = "fit"
    with pytest.raises(InterventionError, match="fitting: the model is not as it was: hook"):
        bad.fit(lm, None)
    for key in set(lm.model.model.norm._forward_hooks) - set(hooks):
        del lm.model.model.norm._forward_hooks[key]
    assert dict(lm.model.model.norm._forward_hooks) == hooks
    with pytest.raises(InterventionError, match="fitted object is for"):
        with get("ace").apply(fitted, lm):
            pass


def test_leace_applies_the_apply_options_given_not_the_fit(lm, train_items, eval_items, tmp_path):
    """A saved LEACE fit holds only fit options; the strength is the one given when applying."""
    leace = get("leace")
    fitted = leace.fit(lm, train_items, {"layers": [1], "batch_size": 8}, seed=0)
    assert fitted.fit_options == {"layers": [1], "batch_size": 8, "concept": "identity", "sequential": True,
                                  "shrinkage": True}
    assert "strength" not in json.dumps(fitted.fit_options)
    loaded = Fitted.load(fitted.save(tmp_path / "leace"))
    assert "strength" not in (tmp_path / "leace" / "fitted.json").read_text()
    before = logits(lm, eval_items)
    with leace.apply(fitted, lm, leace.ApplyOptions(strength=1.0)):
        full = logits(lm, eval_items)
    with leace.apply(loaded, lm, leace.ApplyOptions(strength=0.0)):
        assert torch.equal(logits(lm, eval_items), before)  # strength 0 is the identity map
    with leace.apply(loaded, lm, {"strength": 1.0}):
        assert torch.equal(logits(lm, eval_items), full)
    with leace.apply(loaded, lm, leace.ApplyOptions(strength=0.5)):
        half = logits(lm, eval_items)
    assert not torch.equal(half, full) and not torch.equal(half, before) and not torch.equal(full, before)
    assert list(leace.edits(loaded, lm, leace.ApplyOptions())) == ["blocks.1.resid_post"]  # the fit's layers


def test_leace_method_applies_the_eraser_it_fits(lm, train_items):
    """One LEACE implementation: the method's edit is steering.leace's fitted eraser."""
    from evenhand.engine.reader import last_token_activations
    from interventions.reading import prompt_ids
    from interventions.steered import concept_labels
    from steering.leace import fit_leace
    leace = get("leace")
    fitted = leace.fit(lm, train_items, {"layers": [2], "batch_size": 8})
    rows, z = concept_labels(train_items, "identity")
    sites = fitted.info["sites"]
    X = last_token_activations(lm, [prompt_ids(lm, r) for r in rows.to_dict("records")], sites, 8)[sites[0]]
    X = X.astype(np.float64)
    want = fit_leace(X, z)(X)
    edit = leace.edits(fitted, lm, leace.ApplyOptions())[sites[0]]
    got = edit(torch.from_numpy(X)).numpy()
    scale = np.abs(X).max()
    assert np.allclose(got, want, atol=1e-4 * scale) and np.abs(got - X).max() > 1e-3 * scale
    zc = z - z.mean()
    assert np.abs((got - got.mean(0)).T @ zc).max() < 1e-3 * np.abs((X - X.mean(0)).T @ zc).max()


def test_fitted_load_errors_name_the_problem(tmp_path):
    with pytest.raises(InterventionError, match="fitted.json"):
        Fitted.load(tmp_path)
    (tmp_path / "fitted.json").write_text(json.dumps({"name": "caa"}))
    with pytest.raises(InterventionError, match="fit_options"):
        Fitted.load(tmp_path)


def test_compare_config_errors_name_the_field(tmp_path):
    from experiments.studies.compare import cells, parse_config
    with pytest.raises(ValueError, match="model"):
        parse_config({"output_dir": "x", "interventions": []})
    with pytest.raises(ValueError, match=r"interventions\[0\].name"):
        parse_config({"model": "m", "output_dir": "x", "interventions": [{"name": "nope"}]})
    with pytest.raises(ValueError, match="sweep.alpha"):
        parse_config({"model": "m", "output_dir": "x", "interventions": [{"name": "caa", "sweep": {"alpha": 2}}]})
    with pytest.raises(ValueError, match=r"interventions\[0\].*unknown option.*alphaa"):
        parse_config({"model": "m", "output_dir": "x", "interventions": [{"name": "caa", "options": {"alphaa": 1}}]})
    with pytest.raises(ValueError, match=r"interventions\[0\].*option layers"):
        parse_config({"model": "m", "output_dir": "x",
                      "interventions": [{"name": "caa", "sweep": {"layers": [0, "top"]}}]})
    cfg = parse_config({"model": "m", "output_dir": "x", "interventions": [
        {"name": "caa", "sweep": {"alpha": [1, 2]}}, {"name": "loreft", "seeds": [0, 1]}]})
    keys = [c.key for c in cells(cfg)]
    assert len(keys) == len(set(keys)) == 2 * (1 + 20) + 2  # caa: 2 alphas x (method, 20 controls); loreft: 2 seeds
    ids = ["i1", "i2"]
    caa = [c for c in cells(cfg) if c.arm.name == "caa"]
    assert len({c.fit_dir(ids) for c in caa}) == 1 + 20  # alpha is an apply option: one fit (+ its 20 controls)
    assert len({c.fit_dir(ids) for c in cells(cfg) if c.arm.name == "loreft"}) == 2  # one fit per seed
    assert caa[0].fit_dir(ids) != caa[0].fit_dir(ids + ["i3"])  # the training items are in the key
    swept = parse_config({"model": "m", "output_dir": "x", "interventions": [
        {"name": "caa", "sweep": {"layers": [0, 2]}}, {"name": "loreft", "sweep": {"rank": [2, 4]}}]})
    dirs = [c.fit_dir(ids) for c in cells(swept)]
    assert len(dirs) == len(set(dirs)) == 2 * (1 + 20) + 2  # every swept fit option gets its own fit


def test_compare_sweeps_a_fit_option_with_one_fit_per_value(model_dir, tmp_path):
    """caa's layers swept in a comparison: each value is fitted on its own (distinct fits, distinct tensors),
    every setting runs on the validation split, and only the chosen one on held-out items."""
    from experiments.studies.compare import run_compare
    cfg = compare_config(str(model_dir), tmp_path / "cmp", [{"name": "caa", "options": {"batch_size": 16},
                                                              "sweep": {"layers": [0, 2], "alpha": [1.0, 4.0]}},
                                                             {"name": "identity_blind"}], controls=False)
    table = run_compare(cfg, progress=False)
    assert table["cell"].nunique() == 1 + 1 + 1  # the baseline, the chosen setting, the arm without a sweep
    assert set(table.loc[table["intervention"] == "identity_blind", "selection"]) == {""}
    selection = json.loads((tmp_path / "cmp" / "selection.json").read_text())["0"]
    assert len(selection["validation"]) == 4 and sum(r["chosen"] for r in selection["validation"]) == 1
    chosen = table[table["intervention"] == "caa"]
    assert set(chosen["selection"]) == {selection["reason"]} and "validation scenarios" in selection["reason"]
    assert json.loads(chosen["options"].iloc[0]) == {"batch_size": 16, **selection["setting"]}
    from experiments.studies.compare.text import compare_text
    from experiments.studies.compare.text import power_text, selection_text
    assert {"paired_se", "mde"} <= set(table["stat"])  # every cell's power, the baseline's from itself alone
    power = power_text(table)
    assert "baseline (assumed)" in power and chosen["cell"].iloc[0] in power and "sqrt(2)" in power
    assert selection_text(table) == f"selected caa: {selection['reason']}"
    fitted = {p.name: Fitted.load(p) for p in sorted((tmp_path / "cmp" / "fitted").glob("caa-*"))}
    assert len(fitted) == 2  # two layers, each fitted once; the two alphas reuse each fit
    by_layer = {f.fit_options["layers"]: f for f in fitted.values()}
    assert set(by_layer) == {0, 2}
    assert by_layer[0].info["sites"] == ["blocks.0.resid_post"]
    assert by_layer[2].info["sites"] == ["blocks.2.resid_post"]
    assert by_layer[0].key != by_layer[2].key
    v0, v2 = (next(iter(f.tensors.values())) for f in (by_layer[0], by_layer[2]))
    assert not torch.allclose(v0, v2)
    cells = sorted(p.name for p in (tmp_path / "cmp" / "validation").iterdir())
    responses = {c: pd.read_parquet(tmp_path / "cmp" / "validation" / c / "responses.parquet") for c in cells
                 if c != "baseline"}
    lp = {c: r["logprob_A"].to_numpy() for c, r in responses.items()}
    assert len({tuple(np.round(v, 6)) for v in lp.values()}) == 4  # four distinct edits
    # the study's outputs are where RunDir names them, and its stages are the ones the driver ran
    from evenhand.runs.rundir import RunDir
    from experiments.studies import get as get_study
    run = RunDir(tmp_path / "cmp")
    for path in (run.signs_json, run.selection_json, run.selection_csv, run.compare_tex, run.compare_table,
                 run.validation_cell("baseline").responses_path, run.cell("baseline").responses_path):
        assert path.is_file(), path
    study = get_study("compare")
    assert [s.name for s in study.stages(cfg, progress=False)] == run.manifest()["stages_done"]
    text = study.text(cfg, table)
    assert text.startswith(compare_text(table)) and f"\n\n{selection_text(table)}\n\n{power}\n\n" in text
    assert text.endswith(f"wrote {cfg.output_dir}/compare.parquet (+ .csv), frontier.pdf/.svg/.png, cells/, fitted/")


def test_the_compare_study_is_registered_and_its_config_names_it():
    """compare_interventions.yaml says ``kind: compare``; the registry gives the comparison study, which parses it
    (a config of another kind is refused naming the field) and reads its table from compare.parquet."""
    from evenhand.support.options import ConfigError, read_yaml
    from experiments.studies import get as get_study
    from experiments.studies import kinds, study_of
    data = read_yaml(ROOT / "experiments" / "configs" / "compare_interventions.yaml")
    assert data["kind"] == "compare" and "compare" in kinds()
    study = study_of(data)
    assert type(study).__name__ == "CompareStudy" and study is get_study("compare")
    cfg = study.parse(data, "c.yaml")
    assert cfg.output_dir == "runs/compare_organism" and len(cfg.interventions) == 9
    with pytest.raises(ConfigError, match=r"c.yaml: kind: 'bbq' is not a comparison config \(kind: compare\)"):
        study.parse({**data, "kind": "bbq"}, "c.yaml")
    assert study.tables == ("compare.parquet",)
    with pytest.raises(ConfigError, match="local"):
        study.run(cfg, backend="ray")


def test_compare_config_checks_signs_and_warns_below_20_controls():
    """signs: +1/-1 per asymmetry metric, errors naming signs.<metric>; control_draws defaults to 20 per method
    cell; fewer (seeds x draws) warn naming the field; every control of a method cell has its own seed."""
    from evenhand.support.options import ConfigError
    from experiments.studies.compare import cells, parse_config
    raw = {"model": "m", "output_dir": "x", "interventions": [{"name": "caa"}]}
    with pytest.raises(ConfigError, match=r"signs\.fraggap must be \+1 or -1.*got 0\.5"):
        parse_config({**raw, "signs": {"fraggap": 0.5}})
    with pytest.raises(ConfigError, match=r"signs\.fraggap must be \+1 or -1.*got True"):
        parse_config({**raw, "signs": {"fraggap": True}})
    with pytest.raises(ConfigError, match=r"signs\.accuracy is not an asymmetry metric"):
        parse_config({**raw, "signs": {"accuracy": 1}})
    assert parse_config({**raw, "signs": {"fraggap": -1}}).signs == {"fraggap": -1.0}
    assert parse_config(raw).signs is None
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cfg = parse_config({**raw, "interventions": [{"name": "caa"}, {"name": "reft_r1", "seeds": [0, 1, 2],
                                                                          "control_draws": 7}]})
    assert cfg.control_draws == 20
    grid = cells(cfg)
    assert sum(c.control > 0 for c in grid if c.arm.name == "caa") == 20
    reft = [c for c in grid if c.arm.name == "reft_r1" and c.control]
    assert len(reft) == 21 and len({c.control_seed for c in reft}) == 21  # 3 seeds x 7 draws, 21 distinct seeds
    with pytest.warns(UserWarning, match=r"interventions\[0\]\.control_draws: caa gets 1 seed\(s\) x 3"):
        parse_config({**raw, "interventions": [{"name": "caa", "control_draws": 3}]})
    with pytest.warns(UserWarning, match=r"config: control_draws: caa gets"):
        parse_config({**raw, "control_draws": 5})


def test_signs_are_decided_on_the_validation_baseline_and_items_on_suite_v2(model_dir, tmp_path, monkeypatch):
    """No sweep and no declared signs: the comparison still decides a validation baseline (train scenarios, no
    held-out one) and passes the signs of its gaps to score_arms; a declared `signs:` wins and then no
    validation run is needed. The tiny model is no organism: its items are suite v2, recorded in the manifest."""
    import functools

    import evenhand.scoring.paired as paired
    from evenhand.scoring.metrics import ASYMMETRY
    from experiments.studies.compare import run_compare
    seen = []

    @functools.wraps(paired.score_arms)
    def spy(*a, **k):
        seen.append(k.get("signs"))
        return real(*a, **k)
    real = paired.score_arms
    monkeypatch.setattr(paired, "score_arms", spy)
    import experiments.studies.compare.study as compare_study
    monkeypatch.setattr(compare_study, "score_arms", spy)  # as the comparison bound it
    cfg = compare_config(str(model_dir), tmp_path / "cmp", [{"name": "identity_blind"}], controls=False)
    table = run_compare(cfg, progress=False)
    out = tmp_path / "cmp"
    val = pd.read_parquet(out / "validation" / "baseline" / "responses.parquet")
    held = pd.read_parquet(out / "cells" / "baseline" / "responses.parquet")
    assert set(val["scenario_id"]).isdisjoint(held["scenario_id"])
    gaps = real({"baseline": val}, "baseline", resamples=2)  # the validation gaps, scored independently
    gaps = gaps[gaps["stat"] == "gap"].set_index("metric")["value"]
    want = {m: -1.0 if pd.notna(gaps[m]) and gaps[m] < 0 else 1.0 for m in ASYMMETRY}
    assert seen == [want]
    fixed = json.loads((out / "signs.json").read_text())
    manifest = json.loads((out / "manifest.json").read_text())
    assert fixed["signs"] == manifest["signs"] == want
    ch = table[(table["stat"] == "change") & (table["metric"] == "fraggap")]
    assert set(ch["sign_source"]) == {f"validation baseline, 1 scenarios: {want['fraggap']:+.0f}"}
    assert manifest["suite_version"].startswith("2.") and set(held["suite_version"].str[:2]) == {"2."}
    assert set(val["suite_version"].str[:2]) == {"2."}
    seen.clear()
    cfg = compare_config(str(model_dir), tmp_path / "decl", [{"name": "identity_blind"}], controls=False,
                         signs={m: -1 for m in ASYMMETRY})
    table = run_compare(cfg, progress=False)
    assert seen == [{m: -1.0 for m in ASYMMETRY}] and not (tmp_path / "decl" / "validation").exists()
    ch = table[(table["stat"] == "change") & (table["metric"] == "fraggap")]
    assert set(ch["sign_source"]) == {"declared in the config: -1"}


def test_method_beats_its_controls_only_above_their_band(core_d3_type1):
    """20 random controls (answers re-drawn at random, 10% of them: each moves FragGap a little): the band is
    the 2.5-97.5 percentiles of the controls' own changes (inside their min-max), n_controls 20; a method that
    removes most of a planted 10 pp gap beats it (its change lies above the band and its method-minus-control
    CI excludes 0), one that changes nothing does not."""
    from evenhand.rows.schema import validate_rows
    from experiments.studies.compare.study import comparison_rows
    from experiments.studies.compare.config import Arm, Cell
    from tests.test_paired import noisy, planted, removing
    keep = sorted(core_d3_type1["scenario_id"].unique())[:60]
    items = validate_rows(core_d3_type1[core_d3_type1["scenario_id"].isin(keep)].assign(choice=None))
    base, us, flips = planted(items, 0.10, 5)
    arm = Arm("caa", seeds=(0, 1))
    strong, same = Cell(arm, {}, 0, 0), Cell(arm, {}, 1, 0)  # two seeds of one method: the same 20 controls
    grid = [strong, same, *[Cell(arm, {}, 0, k) for k in range(1, 21)]]
    ctl = {k: noisy(base, 0.10, k) for k in range(1, 21)}
    responses = {c.key: ctl[c.control] if c.control else removing(base, us, flips, 0.10, 0.8, 1) if c is strong
                 else base for c in grid}
    source = {m: "declared in the config: +1" for m in ("fraggap", "tieshift", "accgap", "tielean")}
    t = pd.DataFrame(comparison_rows(grid, base, responses, 50, 0, 0.05, signs=dict.fromkeys(source, 1.0),
                                     sign_source=source))
    each = t[(t["stat"] == "change") & (t["metric"] == "fraggap") & t["control"]].drop_duplicates("cell")["value"]
    assert len(each) == 20
    lo, hi = np.percentile(each.to_numpy(float), [2.5, 97.5])
    for cell, beats in ((strong.key, True), (same.key, False)):
        r = t[(t["cell"] == cell) & (t["metric"] == "fraggap") & (t["stat"] == "change_minus_control")].iloc[0]
        assert r["n_controls"] == 20 and r["band_low"] == pytest.approx(lo) and r["band_high"] == pytest.approx(hi)
        assert each.min() < r["band_low"] < r["band_high"] < each.max()  # percentiles, not the range
        assert bool(r["beats_control"]) is beats
        ch = t[(t["cell"] == cell) & (t["metric"] == "fraggap") & (t["stat"] == "change")].iloc[0]
        # the rule of evenhand.scoring.paired: the change above the band and the method-minus-control CI excluding 0
        assert beats is bool(ch["value"] > hi and r["ci_low"] > 0)
    assert set(t.loc[t["metric"] == "fraggap", "sign_source"].dropna()) == {"declared in the config: +1"}


def test_compare_decides_20_controls_on_the_evaluation_items_only(model_dir, tmp_path):
    """caa swept on validation with 20 controls: validation runs the baseline and the two settings only; the
    held-out grid runs the chosen setting and its 20 controls, each its own random direction, and the table
    carries their band (n_controls 20) and beats_control."""
    from experiments.studies.compare import run_compare
    cfg = compare_config(str(model_dir), tmp_path / "cmp", [{"name": "caa", "options": {"batch_size": 16},
                                                              "sweep": {"alpha": [1.0, 4.0]}, "control_draws": 20}])
    table = run_compare(cfg, progress=False)
    out = tmp_path / "cmp"
    validation = sorted(p.name for p in (out / "validation").iterdir())
    assert len(validation) == 3 and "baseline" in validation and not any("random" in v for v in validation)
    assert sum("random" in p.name for p in (out / "cells").iterdir()) == 20
    controls = [Fitted.load(p) for p in (out / "fitted").iterdir() if "random" in p.name]
    assert len(controls) == 20
    key = next(k for k in controls[0].tensors if k.endswith("/direction"))
    assert len({tuple(c.tensors[key].flatten()[:8].tolist()) for c in controls}) == 20
    r = table[(table["metric"] == "fraggap") & (table["stat"] == "change_minus_control")]
    assert len(r) == 1 and r["n_controls"].iloc[0] == 20 and r["band_low"].iloc[0] <= r["band_high"].iloc[0]
    assert r["beats_control"].notna().all()


def test_plugin_method_registers_fits_saves_and_runs_in_a_comparison(model_dir, lm, train_items, eval_items,
                                                                     tmp_path):
    """The tenth method (examples/directional_ablation.py) is written outside the package in under 50 lines."""
    from experiments.studies.compare import run_compare
    path = ROOT / "examples" / "directional_ablation.py"
    assert len(path.read_text().splitlines()) < 50
    assert load_plugin(path) is load_plugin(str(path))  # loading twice is harmless
    assert "directional_ablation" in REGISTERED and "directional_ablation" in CONTROLLED
    method = get("directional_ablation")
    fitted = method.fit(lm, train_items, {"layer": 1, "batch_size": 8}, seed=0)
    loaded = Fitted.load(fitted.save(tmp_path / "f"))
    assert loaded.info["sites"] == ["blocks.1.resid_post"] and loaded.fit_options == {"layer": 1, "batch_size": 8}
    before = logits(lm, eval_items)
    with method.apply(loaded, lm, {"strength": 1.0}):
        assert not torch.equal(logits(lm, eval_items), before)
    assert torch.equal(logits(lm, eval_items), before)
    cfg = compare_config(str(model_dir), tmp_path / "cmp", [{"name": "directional_ablation",
                                                              "options": {"layer": 1, "batch_size": 16}}])
    table = run_compare(cfg, progress=False)
    assert set(table["intervention"]) == {"baseline", "directional_ablation"}
    assert sorted(table.drop_duplicates("cell")["control"].tolist()) == [False, False, True, True]
    method_cell = table[(table["intervention"] == "directional_ablation") & ~table["control"].astype(bool)]["cell"]
    stats = set(table[table["cell"] == method_cell.iloc[0]]["stat"])
    assert {"value", "gap", "rate", "change", "change_fraction", "accuracy_loss", "accuracy_p_cluster", "mcnemar_p",
            "refusal_change", "change_minus_control", "control_change", "accuracy_loss_minus_control"} <= stats
    assert "change_minus_control" not in set(table[table["control"].astype(bool)]["stat"])
    assert "directional" in (tmp_path / "cmp" / "compare.tex").read_text()
    with pytest.raises(InterventionError, match="no such file"):
        load_plugin(tmp_path / "missing.py")


def test_frontier_figure_and_latex_from_a_table(tmp_path):
    """The frontier and the LaTeX table read the paired stats (evenhand.scoring.paired): signed change, accuracy loss,
    refusal change, method minus control; a refusal-flagged cell and an overshoot are marked in both."""
    from experiments.studies.compare.figures import compare_latex, frontier_figure, frontier_points
    rows = [{"cell": "baseline", "intervention": "baseline", "control": False, "options": "{}", "seed": None,
             "metric": "fraggap", "stat": "gap", "value": 0.1, "ci_low": 0.05, "ci_high": 0.15, "n": 10}]
    for cell, name, ctl, ch, loss, ref, flag, over, vs in (
            ("caa-1", "caa", False, 0.05, 0.02, 0.0, False, False, 0.04), ("caa-1r", "caa", True, 0.01, 0.0, 0.8,
                                                                           True, False, None),
            ("caa-4", "caa", False, 0.16, 0.03, 0.0, False, True, 0.1), ("ace", "ace", False, 0.05, 0.01, 0.0,
                                                                         False, False, None)):
        base = {"cell": cell, "intervention": name, "control": ctl, "options": "{}", "seed": 0, "n": 10,
                "refusal_flag": flag}
        rows.append({**base, "metric": "fraggap", "stat": "change", "value": ch, "ci_low": ch - .05,
                     "ci_high": ch + .05, "overshoot": over, "beats_control": False,  # as evenhand.scoring.paired writes it
                     "verdict": "refusal-flagged" if flag else "overshoot" if over else "reduction"})
        rows.append({**base, "metric": "accuracy", "stat": "accuracy_loss", "value": loss, "ci_low": loss - .01,
                     "ci_high": loss + .01})
        rows.append({**base, "metric": "refusal", "stat": "refusal_change", "value": ref, "ci_low": ref,
                     "ci_high": ref})
        rows.append({**base, "metric": "accuracy", "stat": "accuracy_p_cluster", "value": 0.5})
        if vs is not None:
            rows.append({**base, "metric": "fraggap", "stat": "change_minus_control", "value": vs,
                         "ci_low": vs - .03, "ci_high": vs + .03})
    changes = np.linspace(-0.02, 0.03, 20)  # ace's 20 random controls
    for k, ch in enumerate(changes):
        base = {"cell": f"ace-r{k}", "intervention": "ace", "control": True, "options": "{}", "seed": 0, "n": 10,
                "refusal_flag": False}
        rows += [{**base, "metric": "fraggap", "stat": "change", "value": ch, "ci_low": ch - .02, "ci_high": ch + .02,
                  "overshoot": False, "verdict": "no detectable change"},
                 {**base, "metric": "accuracy", "stat": "accuracy_loss", "value": 0.001 * k, "ci_low": 0.0,
                  "ci_high": 0.02}]
    lo, hi = np.percentile(changes, [2.5, 97.5])
    rows.append({"cell": "ace", "intervention": "ace", "control": False, "options": "{}", "seed": 0, "n": 10,
                 "refusal_flag": False, "metric": "fraggap", "stat": "change_minus_control", "value": 0.045,
                 "ci_low": 0.03, "ci_high": 0.06, "band_low": lo, "band_high": hi, "n_controls": 20,
                 "beats_control": True})
    table = pd.DataFrame(rows)
    pts = frontier_points(table)
    assert list(pts["cell"])[:4] == ["caa-1", "caa-1r", "caa-4", "ace"]
    ace = pts[pts["cell"] == "ace"].iloc[0]
    assert ace["band_low"] == pytest.approx(100 * lo) and ace["band_high"] == pytest.approx(100 * hi)
    assert ace["n_controls"] == 20 and bool(ace["beats_control"])
    assert not pts.loc[pts["cell"] == "caa-1", "beats_control"].iloc[0]
    from experiments.studies.compare.figures import controls_by_method
    assert len(controls_by_method(pts)["ace"]) == 20 and list(controls_by_method(pts)["caa-1"]["cell"]) == ["caa-1r"]
    assert pts.loc[pts["cell"] == "caa-1", "value_vsctl"].iloc[0] == pytest.approx(4.0)
    assert pts.loc[pts["cell"] == "caa-1r", "value_refusal"].iloc[0] == pytest.approx(80.0)
    paths = frontier_figure(table, tmp_path / "frontier")
    assert [p.suffix for p in paths] == [".pdf", ".svg", ".png"] and all(p.stat().st_size > 1000 for p in paths)
    tex = compare_latex(table, metrics=("fraggap",))
    rows = [ln for ln in tex.splitlines() if " & " in ln]
    lines = {ln.split(" & ")[0]: ln for ln in rows}
    assert r"\textsuperscript{O}" in lines["caa"] and "+4.0 [+1.0, +7.0]" in tex
    assert not any("(random)" in ln for ln in rows)  # random controls: one summarised row per method cell
    ace_at = [ln.split(" & ")[0] for ln in rows].index("ace")
    assert rows[ace_at + 1].startswith(r"\quad 20 random controls") and f"[{100 * lo:+.1f}, {100 * hi:+.1f}]" in rows[ace_at + 1]
    assert r"\textsuperscript{B}" in lines["ace"] and r"\caption{" in tex and r"\begin{table}" in tex
    assert r"\textsuperscript{O}\,overshoot" in tex and r"\textsuperscript{B}\,beats" in tex  # a note per mark used


def test_cli_loads_a_plugin_for_any_command(capsys, tmp_path):
    """`evenhand --plugin FILE ...` registers the user's method before the command runs; a plugin that
    cannot be imported is a one-line error naming it, not a traceback."""
    from experiments.cli import main
    assert main(["--plugin", str(ROOT / "examples" / "directional_ablation.py"), "interventions", "list"]) == 0
    assert "directional_ablation" in capsys.readouterr().out
    assert main(["--plugin", "no_such_module_evenhand", "interventions", "list"]) == 2
    assert "--plugin no_such_module_evenhand" in capsys.readouterr().err


def test_a_fit_is_written_atomically_with_the_umask_mode(tmp_path, monkeypatch):
    """Processes sharing a run directory read each other's fits: the tensors are renamed into place before
    fitted.json (no temporary file left, nothing half-written) and get the umask's mode, not mkstemp's 0600."""
    import os

    from interventions.fitted import Fitted
    old = os.umask(0o022)
    try:
        out = Fitted("caa", {"layers": [1]}, tensors={"v": torch.arange(6.0).reshape(2, 3)}).save(tmp_path / "f")
    finally:
        os.umask(old)
    assert sorted(p.name for p in out.iterdir()) == ["fitted.json", "tensors.safetensors"]
    assert (out / "tensors.safetensors").stat().st_mode & 0o777 == 0o644
    assert torch.equal(Fitted.load(out).tensors["v"], torch.arange(6.0).reshape(2, 3))
    import safetensors.torch

    def broken(tensors):
        import errno
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(safetensors.torch, "save", broken)
    with pytest.raises(OSError, match="No space left on device: .*tensors.safetensors"):
        Fitted("caa", tensors={"v": torch.zeros(2)}).save(tmp_path / "g")
    assert list((tmp_path / "g").iterdir()) == []  # neither a partial tensor file nor a fitted.json


def test_compare_table_reports_each_erasers_operator_norm(model_dir, tmp_path):
    """leace and its relabelled controls in a comparison: one ``operator_norm`` row per site and cell, equal to
    the norm of the saved fit's map, so that a method and its controls are seen at comparable strengths (the
    old leace-random control was a norm-1 projection beside an eraser of norm 375)."""
    from experiments.studies.compare import run_compare
    from interventions.steered import eraser_norms
    cfg = compare_config(str(model_dir), tmp_path / "cmp", [{"name": "leace", "options": {"batch_size": 16}}],
                         signs={"fraggap": 1, "tieshift": 1, "accgap": 1, "tielean": 1})
    table = run_compare(cfg, progress=False)
    norms = table[table["stat"] == "operator_norm"]
    cells = sorted(table.loc[table["intervention"] == "leace", "cell"].unique())
    assert len(cells) == 3 and set(norms["cell"]) == set(cells)  # the method and its two controls
    fits = [Fitted.load(p) for p in sorted((tmp_path / "cmp" / "fitted").glob("leace-*"))]
    assert len(fits) == 3
    own = eraser_norms(next(f for f in fits if f.control != "random"))
    method_rows = norms[~norms["control"]].set_index("metric")["value"]
    assert method_rows.to_dict() == pytest.approx(own)
    assert all(np.isfinite(v) and v >= 1.0 for v in norms["value"])  # I - proj of an oblique projection
