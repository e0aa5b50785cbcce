"""Shared fixtures: suite items built once per session; nothing is downloaded."""
from __future__ import annotations

import os

import pandas as pd
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def smoke_items() -> pd.DataFrame:
    from evenhand.suite.subsets import iter_subset
    return pd.DataFrame(list(iter_subset("smoke", 0)))


@pytest.fixture(scope="session")
def core_d3_type1() -> pd.DataFrame:
    """The degree-3 Type-1 part of the core subset (about 6K items): the headline population."""
    from evenhand.suite.subsets import iter_subset
    rows = [it for it in iter_subset("core", 0) if it["degree"] == 3 and it["contrast_type"] == "type1"]
    return pd.DataFrame(rows)


@pytest.fixture(scope="session")
def tiny_gemma_lm(tmp_path_factory, smoke_items):
    """A tiny random Gemma3 (seed 3) whose tokenizer knows the smoke prompts and the two candidate phrases,
    loaded once per session: the methods' and LEACE's tests fit and apply on it (each checks it unchanged)."""
    from evenhand.models.loading import load_model
    from evenhand.models.tiny import save_tiny_model
    texts = smoke_items["prompt"].tolist() + ["the first candidate", "the second candidate"]
    return load_model(str(save_tiny_model(tmp_path_factory.mktemp("methods") / "g", "gemma3", texts, seed=3)))


@pytest.fixture(scope="session")
def tiny_dirs(tmp_path_factory, smoke_items):
    """A tiny random model of every supported architecture with a tokenizer built from the smoke
    subset, saved to disk once per session (the loading code reads them like any local model)."""
    from evenhand.models.tiny import ARCHITECTURES, save_tiny_model
    root = tmp_path_factory.mktemp("tiny")
    texts = smoke_items["prompt"].tolist()
    return {a: save_tiny_model(root / a, a, texts, seed=1) for a in ARCHITECTURES}


@pytest.fixture(scope="session")
def tiny(tiny_dirs):
    """The tiny models of :func:`tiny_dirs`, loaded."""
    from evenhand.models.loading import load_model
    return {a: load_model(str(d)) for a, d in tiny_dirs.items()}


@pytest.fixture(scope="module")
def lm(tiny_gemma_lm):
    """The tiny random Gemma3 as ``lm`` (a test module's own ``lm`` fixture overrides it)."""
    return tiny_gemma_lm


@pytest.fixture(scope="module")
def train_items(smoke_items):
    """60 smoke items with identity cues (degree > 0), seeded: the fitting items of the method tests."""
    return smoke_items[smoke_items["degree"] > 0].sample(60, random_state=1).reset_index(drop=True)


_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_ROOT_FILES_AT_START = set(os.listdir(_ROOT))


def pytest_sessionfinish(session, exitstatus):
    """Fail the run when a test left a new file in the repository root (figures once leaked there)."""
    new = sorted(set(os.listdir(_ROOT)) - _ROOT_FILES_AT_START - {".pytest_cache", ".hypothesis"})
    if new:
        session.exitstatus = 1
        print(f"\ntests left new files in the repository root: {', '.join(new)}")
