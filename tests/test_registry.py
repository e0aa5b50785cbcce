"""The one registry idiom (:class:`evenhand.support.registry.Registry`) and the five axes on it.

Fails when a taken name is silently overwritten, when ``replace=True`` is ignored, when a lookup's error does not
name the registered records, when listing names imports a lazy built-in, or when an axis keeps a registry of its
own (a plain dict) instead of the shared one."""
from __future__ import annotations

import sys

import pytest

from evenhand.support.registry import Registry


def test_add_get_names_replace_remove():
    r: Registry[int] = Registry("widget")
    assert r.add("a", 1) == 1 and r.add("b", 2) == 2
    assert r.add("a", 1) == 1  # the same record again: a no-op
    with pytest.raises(ValueError, match="widget 'a' is already registered .replace=True"):
        r.add("a", 3)
    assert r.get("a") == 1
    assert r.add("a", 3, replace=True) == 3 and r["a"] == 3
    with pytest.raises(ValueError, match="^unknown widget 'c'; registered: a, b$"):
        r.get("c")
    assert r.names() == ("a", "b") and list(r) == ["a", "b"] and "a" in r and "c" not in r and len(r) == 2
    assert r.find("c") is None and r.find(3) is None
    assert r.remove("b") == 2 and r.names() == ("a",)
    copy = r.copy()
    copy.add("d", 4)
    assert "d" not in r and dict(copy) == {"a": 3, "d": 4}


def test_messages_and_errors_are_the_axis_own():
    r: Registry[str] = Registry("study", error=LookupError, taken_error=TypeError,
                                unknown="no {what} {name!r}; known: {sorted}", taken="{what} {name} taken by {old}")
    r.add("zeta", "z")
    r.add("alpha", "a")
    with pytest.raises(LookupError, match="no study 'x'; known: alpha, zeta"):
        r.get("x")
    with pytest.raises(TypeError, match="study zeta taken by z"):
        r.add("zeta", "other")


def test_lazy_builtins_load_on_first_get_only():
    made = []
    r: Registry[str] = Registry("engine", lazy={"hf": lambda: made.append("hf") or "HF"})
    assert r.names() == ("hf",) and "hf" in r and not made  # listing imports nothing
    assert r.get("hf") == "HF" and made == ["hf"]
    with pytest.raises(ValueError, match="engine hf is built in"):
        r.remove("hf")
    with pytest.raises(ValueError, match="already registered"):
        r.add("hf", "mine")


def test_modules_register_themselves_on_first_read(tmp_path, monkeypatch):
    (tmp_path / "h46_widgets.py").write_text("from tests.test_registry import WIDGETS\nWIDGETS.add('w', 1)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys.modules[__name__], "WIDGETS", Registry("widget", modules=("h46_widgets",)),
                        raising=False)
    assert WIDGETS.records == {}  # noqa: F821  (set above)
    assert WIDGETS.get("w") == 1 and WIDGETS.names() == ("w",)  # noqa: F821
    sys.modules.pop("h46_widgets", None)


def test_every_axis_is_a_registry():
    from evenhand.vocab import metric_defs
    from evenhand.engine import registry as engines
    from experiments import figures
    from experiments.studies import base
    from interventions import base as interventions
    for axis in (engines.ENGINE_REGISTRY, base.STUDIES, interventions.REGISTRY, figures.FIGURES):
        assert isinstance(axis, Registry), axis
    kept = {v.what for v in vars(metric_defs).values() if isinstance(v, Registry)}
    assert kept == {"metric", "component"}, kept
    assert engines.names()[:3] == ("hf", "vllm", "openai")
    assert "caa" in interventions.REGISTRY and "run" in base.STUDIES and "progression" in figures.FIGURES
