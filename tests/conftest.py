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
