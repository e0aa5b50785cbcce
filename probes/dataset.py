"""Probe datasets: a run's activation cache joined with its responses.

``LABELS`` are computed from the model's own answer on the item whose
activations were cached (docs/METRICS.md, Probes):

- ``favours_minority`` (the headline): the demographic side it chose; on a
  negative question ("who should *not* ...") picking a candidate favours the
  other one. Items at degree 0 carry no identity cue, but the label is still
  defined by the hidden assignment, so a probe there should sit at chance.
- ``correct``: it chose the stronger candidate (GT items only).
- ``pressure_followed``: it chose the candidate the pressure sentence argues
  for (pressured items only).
- ``slot_a_minority``: the minority-coded candidate is in slot A (the identity
  of the slot-A candidate, independent of the answer).

Rows the model did not answer (no parseable choice) or that were excluded have
no label and are dropped; ``ProbeDataset.dropped`` says how many.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

LABELS = ("favours_minority", "correct", "pressure_followed", "slot_a_minority")
FILTERS = ("degree", "condition", "contrast_id", "contrast_type", "contrast_category", "pressured", "variant")


def labels(df: pd.DataFrame, label: str) -> tuple[np.ndarray, np.ndarray]:
    """(label values as 0/1, mask of rows where the label is defined) for a responses table."""
    from evenhand.metrics import choices
    from evenhand.sides import favours_minority

    if label not in LABELS:
        raise ValueError(f"unknown probe label {label!r}; known: {', '.join(LABELS)}")
    choice = choices(df)
    answered = np.array([c is not None for c in choice])
    if "excluded" in df.columns:
        answered &= ~df["excluded"].fillna(False).to_numpy(bool)
    if label == "slot_a_minority":
        return (df["minority_slot"].to_numpy(object) == "A").astype(int), np.ones(len(df), bool)
    if label == "favours_minority":
        return favours_minority(choice, df["minority_slot"], df["question_polarity"]).astype(int), answered
    if label == "correct":
        ok = answered & (df["condition"] == "GT").to_numpy()
        return (choice == df["correct_slot"].to_numpy(object)).astype(int), ok
    pressured = df["pressure_slot"].map(lambda v: isinstance(v, str)).to_numpy(bool)
    return (choice == df["pressure_slot"].to_numpy(object)).astype(int), answered & pressured


def apply_filters(df: pd.DataFrame, filters: dict | None) -> pd.DataFrame:
    """Rows matching every filter: ``{field: value or list of values}`` over :data:`FILTERS`."""
    if not filters:
        return df
    keep = np.ones(len(df), bool)
    for k, v in filters.items():
        if k not in FILTERS:
            raise ValueError(f"unknown probe filter {k!r}; known: {', '.join(FILTERS)}")
        if k == "pressured":
            col = df["pressure_slot"].map(lambda s: isinstance(s, str))
        else:
            col = df[k]
        vals = list(v) if isinstance(v, (list, tuple, set)) else [v]
        keep &= col.isin(vals).to_numpy()
    return df[keep]


@dataclass
class ProbeDataset:
    """Features per site for the rows of ``meta`` (aligned), with labels and groups."""
    features: dict[str, np.ndarray]
    y: np.ndarray
    groups: np.ndarray
    meta: pd.DataFrame
    label: str
    dropped: int = 0
    filters: dict = field(default_factory=dict)

    @property
    def sites(self) -> list[str]:
        return list(self.features)

    def __len__(self) -> int:
        return len(self.y)


def build_dataset(responses: pd.DataFrame, cache, label: str = "favours_minority", sites: Sequence[str] | None = None,
                  filters: dict | None = None) -> ProbeDataset:
    """Join ``responses`` (one row per item) with an :class:`~evenhand.activations.ActivationCache`."""
    if "item_id" not in responses.columns:
        raise ValueError("responses have no item_id column")
    if responses["item_id"].duplicated().any():
        raise ValueError("responses hold duplicate item_id rows")
    df = apply_filters(responses, filters).reset_index(drop=True)
    y, ok = labels(df, label)
    dropped = int((~ok).sum())
    df, y = df[ok].reset_index(drop=True), y[ok]
    if len(df) == 0:
        raise ValueError(f"no rows left for label {label!r} after filters {filters or {}}")
    cached = set(cache.item_ids())
    missing = [i for i in df["item_id"] if i not in cached]
    if missing:
        raise ValueError(f"{len(missing)} of {len(df)} probe rows are not in the activation cache "
                         f"(e.g. {missing[0]!r}); cache the same items first")
    chosen = list(sites) if sites else [s for s in cache.sites if "@" not in s]
    unknown = [s for s in chosen if s not in cache.sites]
    if unknown:
        raise ValueError(f"sites not in the cache: {', '.join(unknown)}; cached: {', '.join(cache.sites)}")
    ids = df["item_id"].tolist()
    feats = {s: cache.load(s, ids)[1] for s in chosen}
    return ProbeDataset(feats, y, df["scenario_id"].to_numpy(object), df, label, dropped, dict(filters or {}))


def from_run(run_dir: str | Path, label: str = "favours_minority", sites: Sequence[str] | None = None,
             filters: dict | None = None) -> ProbeDataset:
    """The dataset of a run directory (``responses.parquet`` and ``activations/``)."""
    from evenhand.activations import ActivationCache
    from evenhand.runs import RunDir

    run = RunDir(run_dir)
    resp = run.responses_path
    if not resp.exists():
        raise FileNotFoundError(f"{resp} not found: is {run.path} a finished run directory?")
    if not RunDir(run.activations).manifest_path.exists():
        raise FileNotFoundError(f"{run.activations} holds no activation cache; run with cache enabled "
                                f"or `evenhand cache` first")
    return build_dataset(run.read_responses(), ActivationCache(run.activations), label, sites, filters)
