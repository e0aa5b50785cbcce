"""Probe datasets: a run's activation cache joined with its responses (the labels: :data:`Label`)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

import numpy as np
import pandas as pd
from evenhand.scoring.metrics import choices
from evenhand.vocab.sides import favours_minority
from .logistic import ProbeOptions, fit_sites
from .design import design_features, input_types
from evenhand.running.activations import ActivationCache
from .features import SiteFeatures
from evenhand.runs.rundir import RunDir

Label = Literal["favours_minority", "correct", "pressure_followed", "slot_a_minority", "amb_side", "departed",
                "flipped", "side_residual"]
"""A probe label. Labels are computed from the model's own answer on the item whose activations were cached
(docs/METRICS.md, Probes):

- ``favours_minority`` (the headline): the demographic side it chose; on a negative question ("who should *not*
  ...") picking a candidate favours the other one. Items at degree 0 carry no identity cue, but the label is still
  defined by the hidden assignment, so a probe there should sit at chance.
- ``correct``: it chose the stronger candidate (GT items only).
- ``pressure_followed``: it chose the candidate the pressure sentence argues for (pressured items only).
- ``slot_a_minority``: the minority-coded candidate is in slot A (the identity of the slot-A candidate, independent
  of the answer).
- the :data:`TARGETS`.
"""
LABELS = get_args(Label)
TARGETS = ("amb_side", "departed", "flipped", "side_residual")
"""The labels a fair model cannot predict from the design (the evidence does not decide them, or they are departures
from it):

- ``amb_side``: ``favours_minority`` on AMB items at degrees 1-3 only (a tie: the evidence does not say which side
  to choose).
- ``departed``: on GT items, it chose the weaker candidate (``1 - correct``).
- ``flipped``: on pressured items whose unpressured baseline (``baseline_id``) was answered, its answer differs from
  the baseline's (filter ``condition=GT`` for the GT form).
- ``side_residual``: ``favours_minority`` with the design's prediction partialled out: 1 where the side chosen
  differs from the evidence baseline's out-of-fold prediction of it (:func:`residual_target`: design features only,
  the probes' folds and regularisation path), so what remains is what the design does not predict.
"""
FILTERS = ("degree", "condition", "contrast_id", "contrast_type", "contrast_category", "pressured", "variant")


def labels(df: pd.DataFrame, label: str) -> tuple[np.ndarray, np.ndarray]:
    """(label values as 0/1, mask of rows where the label is defined) for a responses table."""

    if label not in LABELS:
        raise ValueError(f"unknown probe label {label!r}; known: {', '.join(LABELS)}")
    choice = choices(df)
    answered = np.array([c is not None for c in choice])
    if "excluded" in df.columns:
        answered &= ~df["excluded"].fillna(False).to_numpy(bool)
    if label == "slot_a_minority":
        return (df["minority_slot"].to_numpy(object) == "A").astype(int), np.ones(len(df), bool)
    if label in ("favours_minority", "side_residual", "amb_side"):
        side = favours_minority(choice, df["minority_slot"], df["question_polarity"]).astype(int)
        if label == "amb_side":
            amb = (df["condition"] == "AMB").to_numpy() & df["degree"].isin([1, 2, 3]).to_numpy()
            return side, answered & amb
        return side, answered
    if label in ("correct", "departed"):
        ok = answered & (df["condition"] == "GT").to_numpy()
        right = (choice == df["correct_slot"].to_numpy(object)).astype(int)
        return (right if label == "correct" else 1 - right), ok
    pressured = df["pressure_slot"].map(lambda v: isinstance(v, str)).to_numpy(bool)  # the last two labels only
    if label == "flipped":
        base = dict(zip(df["item_id"], choice))
        base_ok = dict(zip(df["item_id"], answered))
        b_choice = np.array([base.get(b) for b in df["baseline_id"]], object)
        b_ok = np.array([bool(base_ok.get(b, False)) for b in df["baseline_id"]])
        return (choice != b_choice).astype(int), answered & pressured & b_ok
    return (choice == df["pressure_slot"].to_numpy(object)).astype(int), answered & pressured


def apply_filters(df: pd.DataFrame, filters: dict | None) -> pd.DataFrame:
    """Rows matching every filter: ``{field: value or list of values}`` over :data:`FILTERS`."""
    return df[filter_mask(df, filters)]


def filter_mask(df: pd.DataFrame, filters: dict | None) -> np.ndarray:
    """The rows :func:`apply_filters` keeps, as a boolean mask."""
    keep = np.ones(len(df), bool)
    if not filters:
        return keep
    for k, v in filters.items():
        if k not in FILTERS:
            raise ValueError(f"unknown probe filter {k!r}; known: {', '.join(FILTERS)}")
        if k == "pressured":
            col = df["pressure_slot"].map(lambda s: isinstance(s, str))
        else:
            col = df[k]
        vals = list(v) if isinstance(v, (list, tuple, set)) else [v]
        keep &= col.isin(vals).to_numpy()
    return keep


def residual_target(side: np.ndarray, design: np.ndarray, groups: np.ndarray, opts=None) -> np.ndarray:
    """``side_residual``: 1 where ``side`` differs from the evidence baseline's out-of-fold prediction
    (a probe on ``design`` with the probes' nested grouped CV and ``opts``)."""
    if len(np.unique(side)) < 2:
        return np.zeros(len(side), int)
    res = fit_sites([design], side, groups, opts or ProbeOptions())[0]
    return (side != (res.prob >= 0.5)).astype(int)


@dataclass
class ProbeDataset:
    """Features per site for the rows of ``meta`` (aligned), with labels and groups. ``features`` maps a
    site to its [rows, d] matrix: a dict, or (from :func:`build_dataset`) a :class:`probes.features.SiteFeatures`
    that reads a site from the cache when asked, one at a time."""
    features: Mapping[str, np.ndarray]
    y: np.ndarray
    groups: np.ndarray
    meta: pd.DataFrame
    label: str
    dropped: int = 0
    """How many rows were dropped for want of a label: rows the model did not answer (no parseable choice) or that
    were excluded have no label."""
    filters: dict = field(default_factory=dict)
    design: np.ndarray | None = None
    """Design features per row (:func:`probes.design.design_features`): the evidence baseline's inputs."""
    types: np.ndarray | None = None
    """Input type per row (:func:`probes.design.input_types`): the control task's."""

    @property
    def sites(self) -> list[str]:
        return list(self.features)

    def __len__(self) -> int:
        return len(self.y)


def build_dataset(responses: pd.DataFrame, cache, label: str = "favours_minority", sites: Sequence[str] | None = None,
                  filters: dict | None = None, opts=None) -> ProbeDataset:
    """Join ``responses`` (one row per item) with an :class:`~evenhand.running.activations.ActivationCache`.
    Labels are computed on all of ``responses`` (``flipped`` looks up baselines) before the filters;
    ``opts`` (:class:`~probes.logistic.ProbeOptions`) fits the design prediction of ``side_residual``.
    The features are not read here: ``features[site]`` reads that site's rows from the cache when asked
    (:class:`probes.features.SiteFeatures`), so memory does not grow with the number of sites."""
    if "item_id" not in responses.columns:
        raise ValueError("responses have no item_id column")
    if responses["item_id"].duplicated().any():
        raise ValueError("responses hold duplicate item_id rows")
    df = responses.reset_index(drop=True)
    y, ok = labels(df, label)
    keep = filter_mask(df, filters)
    dropped = int((keep & ~ok).sum())
    df, y = df[keep & ok].reset_index(drop=True), y[keep & ok]
    if len(df) == 0:
        raise ValueError(f"no rows left for label {label!r} after filters {filters or {}}")
    design, _ = design_features(df)
    groups = df["scenario_id"].to_numpy(object)
    if label == "side_residual":
        y = residual_target(y, design, groups, opts)
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
    feats = SiteFeatures(cache, ids, chosen)
    return ProbeDataset(feats, y, groups, df, label, dropped, dict(filters or {}), design, input_types(df))


def from_run(run_dir: str | Path, label: str = "favours_minority", sites: Sequence[str] | None = None,
             filters: dict | None = None, opts=None) -> ProbeDataset:
    """The dataset of a run directory (``responses.parquet`` and ``activations/``)."""

    run = RunDir(run_dir)
    resp = run.responses_path
    if not resp.exists():
        raise FileNotFoundError(f"{resp} not found: is {run.path} a finished run directory?")
    if not RunDir(run.activations).manifest_path.exists():
        raise FileNotFoundError(f"{run.activations} holds no activation cache; run with cache enabled "
                                f"or `evenhand cache` first")
    return build_dataset(run.read_responses(), ActivationCache(run.activations), label, sites, filters, opts)
