"""The one config builder (evenhand.support.options): errors name the field path, nested dataclasses build
from nested mappings, and command-line flags carry the dataclass's defaults (one place for each)."""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field

import pytest

from evenhand.support.options import ConfigError, Rules, add_flags, build, field_docs, options_from_args


@dataclass(frozen=True)
class Inner:
    folds: int = 5
    """Outer folds."""
    sites: tuple[str, ...] = ("residual",)
    """Sites to read."""


@dataclass(frozen=True)
class Outer:
    name: str
    """The name."""
    inner: Inner = field(default_factory=Inner)
    """Nested options."""
    quiet: bool = False
    """No output."""


def test_nested_build_and_field_paths_in_errors():
    cfg = build(Outer, {"name": "x", "inner": {"folds": 3, "sites": "all"}})
    assert cfg == Outer("x", Inner(3, ("all",)))
    with pytest.raises(ConfigError, match="config field 'inner.folds' must be an integer"):
        build(Outer, {"name": "x", "inner": {"folds": "3"}})
    with pytest.raises(ConfigError, match=r"config field 'inner.fold' is not known \(did you mean 'inner.folds'\?\)"):
        build(Outer, {"name": "x", "inner": {"fold": 3}})
    with pytest.raises(ConfigError, match="config field 'name' is required"):
        build(Outer, {})
    with pytest.raises(ConfigError, match="config field 'inner.folds' must be at least 2"):
        build(Outer, {"name": "x", "inner": {"folds": 1}}, rules=Rules(at_least_two=frozenset({"inner.folds"})))


def test_flags_take_defaults_and_help_from_the_dataclass():
    assert field_docs(Inner) == {"folds": "Outer folds.", "sites": "Sites to read."}
    p = argparse.ArgumentParser()
    add_flags(p, Inner, ["folds", "sites"], flags={"sites": "--site-names"})
    add_flags(p, Outer, ["quiet"])
    a = p.parse_args([])
    assert (a.folds, a.site_names, a.quiet) == (5, ["residual"], False)
    assert options_from_args(Inner, a, ["folds", "sites"], {"sites": "--site-names"}) == Inner()
    a = p.parse_args(["--folds", "7", "--site-names", "a", "b", "--quiet"])
    assert options_from_args(Inner, a, ["folds", "sites"], {"sites": "--site-names"}) == Inner(7, ("a", "b"))
    assert a.quiet is True
    assert "Outer folds." in p.format_help()


def test_cli_defaults_are_the_option_dataclasses_defaults():
    from evenhand.running.activations import CacheOptions
    from evenhand.running.decisions import DecideOptions
    from evenhand.models.loading import ModelSpec
    from experiments.cli import build_parser
    from experiments.studies.run.config import SuiteConfig
    from probes.logistic import ProbeOptions
    p = build_parser()
    d = p.parse_args(["decide", "--model", "m", "--out", "o"])
    assert (d.mode, d.batch_size, d.max_new_tokens, d.reasoning_max_new_tokens, d.prefix_reuse) == (
        DecideOptions.mode, DecideOptions.batch_size, DecideOptions.max_new_tokens,
        DecideOptions.reasoning_max_new_tokens, DecideOptions.prefix_reuse)
    assert d.model == "m" and (d.dtype, d.device, d.chat_template) == (
        ModelSpec.dtype, ModelSpec.device, ModelSpec.chat_template)
    assert (d.subset, d.seed, d.limit) == (SuiteConfig.subset, SuiteConfig.seed, SuiteConfig.limit)
    with pytest.raises(SystemExit):  # ModelSpec.model has no default: --model is required
        p.parse_args(["decide", "--out", "o"])
    c = p.parse_args(["cache", "--model", "m", "--out", "o"])
    assert (tuple(c.sites), c.cache_dtype, c.name_mean, c.dtype) == (
        CacheOptions.sites, CacheOptions.dtype, CacheOptions.name_mean, "auto")
    s = p.parse_args(["probe", "sweep", "run"])
    assert (s.solver, s.device, s.folds, s.inner_folds, s.seed) == (
        ProbeOptions.solver, ProbeOptions.device, ProbeOptions.folds, ProbeOptions.inner_folds, ProbeOptions.seed)


def test_ablation_stage_gets_the_probe_device():
    from experiments.studies.run.config import AblationConfig, options_for
    from probes.logistic import ProbeOptions
    opts = options_for(ProbeOptions, AblationConfig(device="meta", folds=4))
    assert (opts.device, opts.folds) == ("meta", 4)
