"""Activation methods: contrastive activation addition, affine concept editing, LEACE.

All three are fitted on activations of *train* scenarios at the decision token
(the last prompt token, as the activation cache reads it) and applied at every
position of the prompt and of the generated tokens through
:func:`steering.hooks.steer`, which removes its hooks on exit.

The demographic concept is ``slot_a_minority`` (the minority-coded candidate is
in slot A): it is defined for every item at degrees 1-3 whatever the model
answers, and it is what a model must represent to treat the two candidates
differently by identity. ``caa`` instead contrasts the model's own decisions
(``favours_minority``), as contrastive activation addition contrasts behaviours.

Every method takes ``control: "random"``, which replaces each fitted direction
by a random direction of the same norm (seeded): the control the comparison
reports beside each steering method.
"""
from __future__ import annotations

import abc
import contextlib
import tempfile
from collections.abc import Iterator

import numpy as np
import pandas as pd

from .base import Fitted, Intervention, InterventionError, register


def site_activations(lm, items: pd.DataFrame, sites: list[str], batch_size: int = 32,
                     progress: bool = False) -> dict[str, np.ndarray]:
    """Decision-token activations of ``items`` at ``sites`` (float32, rows in the items' order)."""
    from evenhand.activations import CacheOptions, cache_activations
    with tempfile.TemporaryDirectory() as tmp:
        cache = cache_activations(items, lm, CacheOptions(sites=tuple(sites), batch_size=batch_size, dtype="float32",
                                                          progress=progress), tmp)
        ids = items["item_id"].tolist()
        return {s: cache.load(s, ids)[1] for s in sites}


def _layer_sites(lm, layers, every: bool) -> list[str]:
    from evenhand.models.sites import n_layers
    n = n_layers(lm.model)
    if every or layers in (None, "all"):
        chosen = list(range(n))
    elif layers == "middle":
        chosen = [n // 2]
    else:
        chosen = [int(x) for x in (layers if isinstance(layers, (list, tuple)) else [layers])]
    bad = [x for x in chosen if not 0 <= x < n]
    if bad:
        raise InterventionError(f"layers {bad} out of range: the model has {n} layers (0..{n - 1})")
    return [f"blocks.{x}.resid_post" for x in chosen]


def _identity_rows(items: pd.DataFrame) -> pd.DataFrame:
    rows = items[items["degree"].astype(int) > 0]
    if rows["minority_slot"].nunique() < 2:
        raise InterventionError("fitting needs train items with identity cues (degree > 0) in both slots")
    return rows


def _control(vec: np.ndarray, options: dict, key: int) -> np.ndarray:
    from steering.directions import random_like
    if options.get("control") in (None, "none"):
        return vec
    if options["control"] != "random":
        raise InterventionError(f"control must be 'none' or 'random', got {options['control']!r}")
    return random_like(vec, int(options.get("seed", 0)) * 1000 + key)


def _concept_activations(iv: Intervention, lm, train_items, sites_spec, every: bool, progress: bool):
    """(rows, slot_a_minority labels, sites, activations) of the train items with identity cues."""
    if train_items is None or len(train_items) == 0:
        raise InterventionError(f"{iv.name} needs train items")
    rows = _identity_rows(train_items).reset_index(drop=True)
    z = (rows["minority_slot"] == "A").to_numpy(int)
    sites = _layer_sites(lm, sites_spec, every=every)
    return rows, z, sites, site_activations(lm, rows, sites, iv.options["batch_size"], progress)


class _Steering(Intervention, abc.ABC):
    kind = "activation"

    @abc.abstractmethod
    def _edits(self, fitted: Fitted) -> dict:
        """Site name -> steering edit, from the fitted tensors."""

    @contextlib.contextmanager
    def apply(self, fitted: Fitted, lm) -> Iterator[None]:
        from steering.hooks import steer
        with steer(lm.model, self._edits(fitted)):
            yield


@register
class CAA(_Steering):
    """Contrastive activation addition: subtract alpha x the difference of means between minority- and majority-favouring decisions (log-prob choices)."""
    name = "caa"
    defaults = {"layers": "middle", "alpha": 1.0, "control": "none", "seed": 0, "batch_size": 32}

    def fit(self, lm, train_items: pd.DataFrame | None = None, seed: int = 0, progress: bool = False) -> Fitted:
        import torch

        from evenhand.decide import DecideOptions, decide
        from probes.dataset import labels
        from steering.directions import diff_of_means
        if train_items is None or len(train_items) == 0:
            raise InterventionError("caa needs train items")
        rows = _identity_rows(train_items).reset_index(drop=True)
        resp = decide(rows, lm, DecideOptions(mode="logprob", batch_size=self.options["batch_size"], progress=progress))
        y, ok = labels(resp, "favours_minority")
        if len(np.unique(y[ok])) < 2:
            raise InterventionError("caa: the model's train decisions all favour one side; no contrast to take")
        sites = _layer_sites(lm, self.options["layers"], every=False)
        acts = site_activations(lm, rows[ok], sites, self.options["batch_size"], progress)
        tensors = {}
        for k, s in enumerate(sites):
            v = _control(diff_of_means(acts[s], y[ok]), {**self.options, "seed": seed}, k)
            tensors[s] = torch.tensor(v, dtype=torch.float32)
        return Fitted(self.name, dict(self.options), {"sites": sites, "n_train": int(ok.sum()),
                                                       "share_favours_minority": float(y[ok].mean())}, tensors)

    def _edits(self, fitted: Fitted) -> dict:
        from steering.hooks import Add
        alpha = float(self.options["alpha"])
        return {s: Add(v, -alpha) for s, v in fitted.tensors.items()}


@register
class ACE(_Steering):
    """Affine concept editing: project the demographic direction out around its mean at every layer."""
    name = "ace"
    defaults = {"strength": 1.0, "control": "none", "seed": 0, "batch_size": 32}

    def fit(self, lm, train_items: pd.DataFrame | None = None, seed: int = 0, progress: bool = False) -> Fitted:
        import torch

        from steering.directions import diff_of_means
        rows, z, sites, acts = _concept_activations(self, lm, train_items, "all", True, progress)
        tensors = {}
        for k, s in enumerate(sites):
            u = _control(diff_of_means(acts[s], z), {**self.options, "seed": seed}, k)
            tensors[f"{s}/direction"] = torch.tensor(u, dtype=torch.float32)
            tensors[f"{s}/mean"] = torch.tensor(acts[s].mean(0), dtype=torch.float32)
        return Fitted(self.name, dict(self.options), {"sites": sites, "n_train": len(rows)}, tensors)

    def _edits(self, fitted: Fitted) -> dict:
        from steering.hooks import ProjectOut
        st = float(self.options["strength"])
        return {s: ProjectOut(fitted.tensors[f"{s}/direction"], fitted.tensors[f"{s}/mean"], st)
                for s in fitted.info["sites"]}


@register
class LEACE(_Steering):
    """LEACE: closed-form linear erasure of the demographic attribute at chosen layers."""
    name = "leace"
    defaults = {"layers": "all", "strength": 1.0, "control": "none", "seed": 0, "batch_size": 32}

    def fit(self, lm, train_items: pd.DataFrame | None = None, seed: int = 0, progress: bool = False) -> Fitted:
        import torch

        from steering.directions import diff_of_means, unit
        from steering.leace import fit_leace
        rows, z, sites, acts = _concept_activations(self, lm, train_items, self.options["layers"], False, progress)
        tensors = {}
        for k, s in enumerate(sites):
            if self.options.get("control", "none") == "random":
                # control: erase a random direction (rank one, like the binary concept's eraser)
                u = unit(_control(diff_of_means(acts[s], z), {**self.options, "seed": seed}, k))
                proj = np.outer(u, u)
                mean = acts[s].mean(0)
            else:
                er = fit_leace(acts[s], z)
                proj, mean = er.proj, er.mean
            tensors[f"{s}/proj"] = torch.tensor(proj, dtype=torch.float32)
            tensors[f"{s}/mean"] = torch.tensor(mean, dtype=torch.float32)
        return Fitted(self.name, dict(self.options), {"sites": sites, "n_train": len(rows)}, tensors)

    def _edits(self, fitted: Fitted) -> dict:
        import torch

        from steering.hooks import Affine
        st = float(self.options["strength"])
        out = {}
        for s in fitted.info["sites"]:
            P, mu = fitted.tensors[f"{s}/proj"], fitted.tensors[f"{s}/mean"]
            out[s] = Affine(torch.eye(P.shape[0], dtype=P.dtype) - P, P @ mu, st)
        return out
