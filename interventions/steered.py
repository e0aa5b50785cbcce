"""Activation methods: contrastive activation addition, affine concept editing, LEACE.

All three are fitted on activations of *train* scenarios at the decision token
(the last prompt token, as the activation cache reads it) and declare edits that
the base class applies at every position of the prompt and of the generated
tokens (:meth:`interventions.base.EditingIntervention.apply`).

The demographic concept is ``slot_a_minority`` (the minority-coded candidate is
in slot A): it is defined for every item at degrees 1-3 whatever the model
answers, and it is what a model must represent to treat the two candidates
differently by identity. ``caa`` instead contrasts the model's own decisions
(``favours_minority``), as contrastive activation addition contrasts behaviours.

All three are :class:`~interventions.base.DirectionIntervention` methods, so each
gets the random-direction control (``random_control``): every fitted direction
replaced by a random direction of the same norm (seeded); for LEACE, the erasure
of a random direction. The comparison reports it beside each method.

:func:`concept_activations` and :func:`layer_sites` are public so that a method
written outside the package (see ``examples/directional_ablation.py``) fits the
same way.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .base import DirectionIntervention, Fitted, InterventionError, register


def site_activations(lm, items: pd.DataFrame, sites: list[str], batch_size: int = 32,
                     progress: bool = False) -> dict[str, np.ndarray]:
    """Decision-token activations of ``items`` at ``sites`` (float32, rows in the items' order)."""
    from evenhand.activations import CacheOptions, cache_activations
    with tempfile.TemporaryDirectory() as tmp:
        cache = cache_activations(items, lm, CacheOptions(sites=tuple(sites), batch_size=batch_size, dtype="float32",
                                                          progress=progress), tmp)
        ids = items["item_id"].tolist()
        return {s: cache.load(s, ids)[1] for s in sites}


def layer_sites(lm, layers) -> list[str]:
    """``blocks.<l>.resid_post`` sites for ``layers``: ``"all"``, ``"middle"``, a layer index or a list of them."""
    from evenhand.models.sites import n_layers
    n = n_layers(lm.model)
    if layers in (None, "all"):
        chosen = list(range(n))
    elif layers == "middle":
        chosen = [n // 2]
    else:
        chosen = [int(x) for x in (layers if isinstance(layers, (list, tuple)) else [layers])]
    bad = [x for x in chosen if not 0 <= x < n]
    if bad:
        raise InterventionError(f"layers {bad} out of range: the model has {n} layers (0..{n - 1})")
    return [f"blocks.{x}.resid_post" for x in chosen]


def check_layers(name: str, layers):
    """``layers`` normalised (a list becomes a tuple); :class:`InterventionError` naming the option otherwise."""
    if isinstance(layers, list):
        layers = tuple(layers)
    ok = layers in ("all", "middle") or (isinstance(layers, int) and not isinstance(layers, bool)) or (
        isinstance(layers, tuple) and layers and all(isinstance(x, int) and not isinstance(x, bool) for x in layers))
    if not ok:
        raise InterventionError(f"{name}: option layers must be 'all', 'middle', a layer index or a list of them, "
                                f"got {layers!r}")
    return layers


def check_positive(name: str, option: str, value) -> None:
    """:class:`InterventionError` naming ``option`` unless ``value`` is a positive integer."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InterventionError(f"{name}: option {option} must be a positive integer, got {value!r}")


def check_number(name: str, option: str, value) -> None:
    """:class:`InterventionError` naming ``option`` unless ``value`` is a finite number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
        raise InterventionError(f"{name}: option {option} must be a finite number, got {value!r}")


def _identity_rows(items: pd.DataFrame) -> pd.DataFrame:
    rows = items[items["degree"].astype(int) > 0]
    if rows["minority_slot"].nunique() < 2:
        raise InterventionError("fitting needs train items with identity cues (degree > 0) in both slots")
    return rows


def concept_activations(lm, train_items: pd.DataFrame | None, layers, batch_size: int = 32, progress: bool = False,
                        name: str = "fitting"):
    """(rows, slot_a_minority labels, sites, activations) of the train items with identity cues (degree > 0)."""
    if train_items is None or len(train_items) == 0:
        raise InterventionError(f"{name} needs train items")
    rows = _identity_rows(train_items).reset_index(drop=True)
    z = (rows["minority_slot"] == "A").to_numpy(int)
    sites = layer_sites(lm, layers)
    return rows, z, sites, site_activations(lm, rows, sites, batch_size, progress)


def _float32(a):
    import torch
    return torch.tensor(np.asarray(a), dtype=torch.float32)


# --- contrastive activation addition ---------------------------------------------------------
@dataclass(frozen=True)
class CAAFit:
    """Fit options of ``caa``: the layers steered and the batch size of the activation pass."""
    layers: str | int | tuple = "middle"
    batch_size: int = 32

    def __post_init__(self):
        object.__setattr__(self, "layers", check_layers("caa", self.layers))
        check_positive("caa", "batch_size", self.batch_size)


@dataclass(frozen=True)
class CAAApply:
    """Apply options of ``caa``: ``alpha`` x the direction is subtracted."""
    alpha: float = 1.0

    def __post_init__(self):
        check_number("caa", "alpha", self.alpha)


@register
class CAA(DirectionIntervention):
    """Contrastive activation addition: subtract alpha x the difference of means between minority- and majority-favouring decisions (log-prob choices)."""
    name = "caa"
    FitOptions = CAAFit
    ApplyOptions = CAAApply

    def fit_parameters(self, lm, train_items, options: CAAFit, seed: int, progress: bool) -> tuple[dict, dict]:
        from evenhand.decisions import DecideOptions, decide
        from probes.dataset import labels
        from steering.directions import diff_of_means
        if train_items is None or len(train_items) == 0:
            raise InterventionError("caa needs train items")
        rows = _identity_rows(train_items).reset_index(drop=True)
        resp = decide(rows, lm, DecideOptions(mode="logprob", batch_size=options.batch_size, progress=progress))
        y, ok = labels(resp, "favours_minority")
        if len(np.unique(y[ok])) < 2:
            raise InterventionError("caa: the model's train decisions all favour one side; no contrast to take")
        sites = layer_sites(lm, options.layers)
        acts = site_activations(lm, rows[ok], sites, options.batch_size, progress)
        tensors = {f"{s}/direction": _float32(diff_of_means(acts[s], y[ok])) for s in sites}
        return {"sites": sites, "n_train": int(ok.sum()), "share_favours_minority": float(y[ok].mean())}, tensors

    def edits(self, fitted: Fitted, lm, options: CAAApply) -> dict:
        from steering.hooks import Add
        return {s: Add(fitted.tensors[f"{s}/direction"], -float(options.alpha)) for s in fitted.info["sites"]}


# --- affine concept editing -------------------------------------------------------------------
@dataclass(frozen=True)
class ACEFit:
    """Fit options of ``ace`` (every layer is edited): the batch size of the activation pass."""
    batch_size: int = 32

    def __post_init__(self):
        check_positive("ace", "batch_size", self.batch_size)


@dataclass(frozen=True)
class StrengthApply:
    """Apply options of an erasure: ``strength`` 1 erases, 0 is the identity (interpolated in between)."""
    strength: float = 1.0

    def __post_init__(self):
        check_number("erasure", "strength", self.strength)


@register
class ACE(DirectionIntervention):
    """Affine concept editing: project the demographic direction out around its mean at every layer."""
    name = "ace"
    FitOptions = ACEFit
    ApplyOptions = StrengthApply

    def fit_parameters(self, lm, train_items, options: ACEFit, seed: int, progress: bool) -> tuple[dict, dict]:
        from steering.directions import diff_of_means
        rows, z, sites, acts = concept_activations(lm, train_items, "all", options.batch_size, progress, self.name)
        tensors = {}
        for s in sites:
            tensors[f"{s}/direction"] = _float32(diff_of_means(acts[s], z))
            tensors[f"{s}/mean"] = _float32(acts[s].mean(0))
        return {"sites": sites, "n_train": len(rows)}, tensors

    def edits(self, fitted: Fitted, lm, options: StrengthApply) -> dict:
        from steering.hooks import ProjectOut
        return {s: ProjectOut(fitted.tensors[f"{s}/direction"], fitted.tensors[f"{s}/mean"], float(options.strength))
                for s in fitted.info["sites"]}


# --- LEACE ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LEACEFit:
    """Fit options of ``leace``: the layers erased and the batch size of the activation pass."""
    layers: str | int | tuple = "all"
    batch_size: int = 32

    def __post_init__(self):
        object.__setattr__(self, "layers", check_layers("leace", self.layers))
        check_positive("leace", "batch_size", self.batch_size)


@register
class LEACE(DirectionIntervention):
    """LEACE: closed-form linear erasure of the demographic attribute at chosen layers."""
    name = "leace"
    FitOptions = LEACEFit
    ApplyOptions = StrengthApply

    def fit_parameters(self, lm, train_items, options: LEACEFit, seed: int, progress: bool) -> tuple[dict, dict]:
        from steering.leace import fit_leace
        rows, z, sites, acts = concept_activations(lm, train_items, options.layers, options.batch_size, progress,
                                                   self.name)
        tensors = {}
        for s in sites:
            er = fit_leace(acts[s], z)
            tensors[f"{s}/proj"] = _float32(er.proj)
            tensors[f"{s}/mean"] = _float32(er.mean)
        return {"sites": sites, "n_train": len(rows)}, tensors

    def eraser(self, fitted: Fitted, site: str):
        """The :class:`steering.leace.LeaceEraser` fitted at ``site`` (the map every edit applies)."""
        from steering.leace import LeaceEraser
        return LeaceEraser(fitted.tensors[f"{site}/mean"].detach().cpu().double().numpy(),
                           fitted.tensors[f"{site}/proj"].detach().cpu().double().numpy())

    def edits(self, fitted: Fitted, lm, options: StrengthApply) -> dict:
        return {s: self.eraser(fitted, s).as_affine(float(options.strength)) for s in fitted.info["sites"]}

    def control_tensors(self, fitted: Fitted, seed: int) -> dict:
        """At the k-th site, the orthogonal projection on a random unit direction (seed ``seed*1000+k``): the
        erasure of a direction that means nothing, of rank one like the binary concept's eraser."""
        from steering.directions import random_like, unit
        out = {}
        for k, s in enumerate(fitted.info["sites"]):
            d = fitted.tensors[f"{s}/proj"].shape[0]
            u = unit(random_like(np.ones(d), seed * 1000 + k))
            out[f"{s}/proj"] = _float32(np.outer(u, u))
        return out
