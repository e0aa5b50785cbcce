"""The item loader: a named subset, the organism's held-out set or a file of items, filtered.

:func:`items` is what ``eh.suite.items(...)`` returns and what a run config's ``suite:`` section
selects; ``limit=`` (``suite.limit``, ``--limit``; ``n=`` its older alias) keeps that many items.
:func:`spread` picks them spread across scenarios: whole baseline groups (a baseline item and its
pressured variants, so every pressured row keeps its baseline and the pressure metrics stay
defined), taken round-robin over the scenarios in a seeded order, so *n* items cover as many
scenarios as they can instead of the first few.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from .content import suite_major

if TYPE_CHECKING:
    import pandas as pd

NAMED = ("smoke", "core", "organism_heldout")


def items(subset: str | Path = "smoke", *, seed: int = 0, degrees: Sequence[int] | None = None,
          contrast_types: Sequence[str] | None = None, scenarios: Sequence[str] | None = None,
          limit: int | None = None, head: int | None = None, version: str | None = None,
          n: int | None = None) -> "pd.DataFrame":
    """Suite items as a DataFrame, one row per item (the fields of :func:`evenhand.suite.generate.render_item`).

    Args:
        subset: ``smoke`` (1,024 items), ``core`` (49,920), ``organism_heldout`` (the model organism's
            held-out scenarios), a path to a ``.jsonl``/``.parquet`` file of items, or a ``.yaml`` file of
            scenarios of one's own (:mod:`evenhand.suite.own`: 608 items per scenario, seeded by ``seed``).
        seed: seed of the stratified subset (and of :func:`spread`'s order).
        degrees: keep only these degrees (0-3).
        contrast_types: keep only these contrast types (``type1``, ``type23``).
        scenarios: keep only these scenario ids.
        limit: after the filters, keep ``limit`` items spread across scenarios (:func:`spread`): a run
            config's ``suite.limit`` and the ``--limit`` flag mean this.
        head: after the filters, keep the first ``head`` items in the subset's order (a few scenarios
            only: for debugging, never for estimates).
        version: suite version of ``smoke``/``core`` items (``"1"`` or ``"2"``; default the current one).
            ``organism_heldout`` is always the organism's version and an items file carries its own:
            asking for another version there is an error.
        n: the older spelling of ``limit`` (an alias).

    Raises:
        ValueError: ``limit`` (or ``n``) and ``head`` both given, ``limit`` and ``n`` both given, ``subset`` is neither a known name nor a file, or
            ``version`` is not the version of the items asked for.
    """
    import pandas as pd

    if n is not None:
        if limit is not None:
            raise ValueError("give limit or n (its older spelling), not both")
        limit = n
    if limit is not None and head is not None:
        raise ValueError("give limit (a spread of scenarios) or head (the first items), not both")
    name = str(subset)
    if name in ("smoke", "core"):
        from .content import load_content
        from .subsets import iter_subset
        df = pd.DataFrame(list(iter_subset(name, seed, load_content(version))))
    elif name == "organism_heldout":
        import json

        from .matched import ORGANISM_DIR, ORGANISM_SUITE, heldout_items
        _same_version(version, ORGANISM_SUITE, "organism_heldout (the committed organism's suite)")
        df = heldout_items(json.loads((ORGANISM_DIR / "organism.json").read_text()), seed=seed)
    elif Path(name).suffix.lower() in (".yaml", ".yml"):
        from .own import own_items
        if not Path(name).is_file():
            raise ValueError(f"{name}: no such scenario file (evenhand suite new {name} writes a template)")
        df = own_items(name, seed=seed)
        if version is not None:
            _same_version(version, str(df["suite_version"].iat[0]), f"the scenario file {name}")
    elif Path(name).exists():
        from ..files.rowfiles import ORDER, WHERE, read_rows
        df = read_rows(name).drop(columns=[WHERE, ORDER])
        if "suite_version" in df.columns and version is not None:
            from .content import items_version
            _same_version(version, items_version(df), f"the items file {name}")
    else:
        raise ValueError(f"unknown subset {name!r}: use one of {', '.join(NAMED)} or an existing .jsonl/.parquet "
                         f"file of items")
    if degrees:
        df = df[df["degree"].isin(list(degrees))]
    if contrast_types:
        df = df[df["contrast_type"].isin(list(contrast_types))]
    if scenarios:
        df = df[df["scenario_id"].isin(list(scenarios))]
    if limit is not None:
        df = spread(df, limit, seed)
    if head:
        df = df.head(head)
    return df.reset_index(drop=True)


def _same_version(asked: str | None, have: str, what: str) -> None:
    """ValueError when a suite version was asked for and ``what``'s items are of another one."""
    if asked is None:
        return
    if suite_major(asked) != suite_major(have):
        raise ValueError(f"suite version {asked!r} was asked for, but {what} is suite {have}")


def spread(df: "pd.DataFrame", n: int, seed: int = 0) -> "pd.DataFrame":
    """``n`` rows of ``df`` spread across scenarios, in ``df``'s order.

    Rows are grouped by ``baseline_id`` (a baseline and its pressured variants); the scenarios are
    visited round-robin in an order seeded by ``seed``, each visit taking the next of that
    scenario's groups (also in a seeded order), until ``n`` rows are taken; the last group is cut
    to fit (its baseline, first in the group, is kept). Deterministic from ``seed``.
    """
    import numpy as np

    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    if n >= len(df):
        return df
    rng = np.random.default_rng(seed)
    key = df["baseline_id"].where(df["baseline_id"].notna(), df["item_id"]).to_numpy(object)
    pos: dict[str, list[int]] = {}
    for i, k in enumerate(key):
        pos.setdefault(k, []).append(i)
    by_scenario: dict[str, list[str]] = {}
    for k, rows in pos.items():
        by_scenario.setdefault(df["scenario_id"].iat[rows[0]], []).append(k)
    queues = [[g[i] for i in rng.permutation(len(g))] for g in by_scenario.values()]
    queues = [queues[i] for i in rng.permutation(len(queues))]
    taken: list[int] = []
    depth = 0
    while len(taken) < n:
        for q in queues:
            if depth < len(q):
                group = pos[q[depth]]
                group = sorted(group, key=lambda i: df["baseline_id"].iat[i] != df["item_id"].iat[i])
                taken += group[:n - len(taken)]
                if len(taken) == n:
                    break
        depth += 1
    return df.iloc[sorted(taken)]
