"""Activation methods: contrastive activation addition, affine concept editing, LEACE.

Each is fitted on activations of *train* scenarios and declares edits that the base
class applies (:meth:`interventions.base.EditingIntervention.apply`) at the layers and
positions of the shared apply options (:class:`~interventions.base.SitesApply`:
``at_layers``, default every fitted layer; ``positions``, default every position of
the prompt and of the answer).

- ``caa`` (Rimsky et al. 2024): contrastive pairs, the same prompt completed with the
  behaviour's answer and with its opposite, read at the answer token (the token where
  the two labels first differ, the letter of "Candidate A"); the steering vector is the
  mean difference over pairs, each answer letter weighted equally (the mean over pairs whose
  behaviour's answer is A and the mean over those where it is B, averaged, so the letter's own
  identity cancels as in Rimsky et al.'s A/B-balanced datasets), added ``alpha`` times at every
  token after the prompt (the
  answer's tokens: apply option ``positions`` defaults to ``generated`` for ``caa``, to
  ``all`` for the other methods). Fit option ``contrast`` says which
  behaviour: ``evidence`` (default; pressured GT items whose pressure favours the wrong
  candidate: prompt + the correct label against prompt + the pressured label, so a
  positive ``alpha`` pushes toward following the evidence) or ``minority`` (items with
  identity cues: prompt + the minority-coded candidate's label against prompt + the
  majority-coded one's; a negative ``alpha`` suppresses favouring the minority).
- ``ace`` (affine concept editing, Marshall et al. 2024, used for demographic attributes by
  Karvonen & Marks 2025) and ``leace`` (Belrose et al. 2023) erase a binary concept read at
  the decision token (the last prompt token, as the activation cache reads it). Fit option
  ``concept``: ``identity`` (default; which slot holds the minority-coded candidate, the
  candidate identity Karvonen & Marks erase; items with identity cues) or ``pressure``
  (whether the pressure favours the minority-coded candidate; pressured items with identity
  cues). LEACE is fitted layer by layer in order, each layer on activations already erased
  upstream (the upstream erasers applied at every position; ``sequential``, default true;
  :func:`steering.leace.fit_leace_sequential`).

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
from typing import ClassVar

import numpy as np
import pandas as pd

from .base import DirectionIntervention, Fitted, InterventionError, SitesApply, register
from .reading import answer_sequences, last_token_activations, prompt_ids


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


CONCEPTS = ("identity", "pressure")
"""What ``ace`` and ``leace`` erase: which slot holds the minority-coded candidate (``identity``), or
whether the pressure favours the minority-coded candidate (``pressure``)."""
CONTRASTS = ("evidence", "minority")
"""The behaviour ``caa``'s pairs contrast: following the evidence against following the pressure
(``evidence``), or favouring the minority-coded against the majority-coded candidate (``minority``)."""


def check_choice(name: str, option: str, value, choices: tuple) -> None:
    """:class:`InterventionError` naming ``option`` unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise InterventionError(f"{name}: option {option} must be one of {', '.join(choices)}, got {value!r}")


_NEEDS = {"identity": "identity cues in both slots",
          "pressure": "pressure toward the minority-coded and toward the majority-coded candidate"}


def concept_labels(items: pd.DataFrame, concept: str = "identity", name: str = "fitting"):
    """(rows, 0/1 labels) of ``concept`` (:data:`CONCEPTS`) on the items where it is defined.

    ``identity``: items with identity cues (degree > 0), label 1 when the minority-coded candidate is
    in slot A. ``pressure``: pressured items with identity cues, label 1 when the pressure favours the
    minority-coded candidate. Both classes must occur."""
    check_choice(name, "concept", concept, CONCEPTS)
    rows = items[items["degree"].astype(int) > 0]
    if concept == "identity":
        z = rows["minority_slot"] == "A"
    else:
        rows = rows[rows["pressure_slot"].isin(["A", "B"])]
        z = rows["pressure_slot"] == rows["minority_slot"]
    if z.nunique() < 2:
        raise InterventionError(f"{name}: concept {concept!r} needs train items of both classes "
                                f"({_NEEDS[concept]})")
    return rows.reset_index(drop=True), z.to_numpy(int)


def concept_activations(lm, train_items: pd.DataFrame | None, layers, batch_size: int = 32, progress: bool = False,
                        name: str = "fitting", concept: str = "identity"):
    """(rows, concept labels, sites, activations) of the train items where ``concept`` is defined
    (:func:`concept_labels`; default the candidate identity, on items with identity cues)."""
    if train_items is None or len(train_items) == 0:
        raise InterventionError(f"{name} needs train items")
    rows, z = concept_labels(train_items, concept, name)
    sites = layer_sites(lm, layers)
    return rows, z, sites, site_activations(lm, rows, sites, batch_size, progress)


def _float32(a):
    import torch
    return torch.tensor(np.asarray(a), dtype=torch.float32)


# --- contrastive activation addition ---------------------------------------------------------
@dataclass(frozen=True)
class CAAFit:
    """Fit options of ``caa``: the layers steered, the batch size of the activation pass, and the behaviour
    the pairs contrast (:data:`CONTRASTS`; default ``evidence``)."""
    layers: str | int | tuple = "middle"
    batch_size: int = 32
    contrast: str = "evidence"

    def __post_init__(self):
        object.__setattr__(self, "layers", check_layers("caa", self.layers))
        check_positive("caa", "batch_size", self.batch_size)
        check_choice("caa", "contrast", self.contrast, CONTRASTS)


@dataclass(frozen=True)
class CAAApply(SitesApply):
    """Apply options of ``caa``: ``alpha`` x the steering vector is added (positive: toward the behaviour
    the pairs' first member shows), at ``at_layers`` and ``positions`` (default ``generated``: as Rimsky et al.,
    at every token after the user's prompt, i.e. the answer's tokens)."""
    method: ClassVar[str] = "caa"
    positions: str = "generated"
    alpha: float = 1.0

    def __post_init__(self):
        super().__post_init__()
        check_number("caa", "alpha", self.alpha)


def contrast_pairs(items: pd.DataFrame, contrast: str) -> list[tuple[dict, str, str]]:
    """(item, slot of the behaviour's answer, slot of its opposite) for each item that makes a pair.

    ``evidence``: pressured GT items whose pressure favours the wrong candidate (correct slot, pressured
    slot). ``minority``: items with identity cues (the minority-coded candidate's slot, the other)."""
    check_choice("caa", "contrast", contrast, CONTRASTS)
    other = {"A": "B", "B": "A"}
    out = []
    for r in items.to_dict("records"):
        if contrast == "evidence":
            pressured = r.get("pressure_slot") in ("A", "B")
            if r["condition"] == "GT" and pressured and r["pressure_slot"] != r["correct_slot"]:
                out.append((r, r["correct_slot"], r["pressure_slot"]))
        elif int(r["degree"]) > 0 and r["minority_slot"] in other:
            out.append((r, r["minority_slot"], other[r["minority_slot"]]))
    return out


@register
class CAA(DirectionIntervention):
    """Contrastive activation addition: add alpha x the mean answer-token difference of contrastive pairs.

    Rimsky et al. 2024, "Steering Llama 2 via Contrastive Activation Addition": the mean, over contrastive
    pairs, of the residual at the answer token of the prompt completed with the behaviour's answer minus the
    same prompt completed with the opposite answer (answer letters A and B weighted equally); ``alpha`` x that
    vector is added, by default at the answer's tokens. Default behaviour: following the evidence against
    following the pressure."""
    name = "caa"
    FitOptions = CAAFit
    ApplyOptions = CAAApply

    def fit_parameters(self, lm, train_items, options: CAAFit, seed: int, progress: bool) -> tuple[dict, dict]:
        if train_items is None or len(train_items) == 0:
            raise InterventionError("caa needs train items")
        pairs = contrast_pairs(train_items, options.contrast)
        if not pairs:
            need = ("pressured GT items whose pressure favours the wrong candidate" if options.contrast == "evidence"
                    else "items with identity cues (degree > 0)")
            raise InterventionError(f"caa: contrast {options.contrast!r} needs {need} in the train items")
        sites = layer_sites(lm, options.layers)
        seqs = [answer_sequences(lm, item) for item, _, _ in pairs]
        pos = last_token_activations(lm, [q[p] for q, (_, p, _) in zip(seqs, pairs)], sites, options.batch_size,
                                     progress)
        neg = last_token_activations(lm, [q[n] for q, (_, _, n) in zip(seqs, pairs)], sites, options.batch_size,
                                     progress)
        letter_a = np.array([p == "A" for _, p, _ in pairs])
        if letter_a.all() or not letter_a.any():
            raise InterventionError(f"caa: contrast {options.contrast!r} needs pairs whose behaviour's answer is in "
                                    f"slot A and pairs where it is in slot B (so that the answer letter cancels)")
        tensors = {}
        for s in sites:
            diff = pos[s].astype(np.float64) - neg[s]
            tensors[f"{s}/direction"] = _float32((diff[letter_a].mean(0) + diff[~letter_a].mean(0)) / 2)
        return {"sites": sites, "contrast": options.contrast, "n_pairs": len(pairs),
                "n_pairs_answer_a": int(letter_a.sum()), "position": "answer token"}, tensors

    def edits(self, fitted: Fitted, lm, options: CAAApply) -> dict:
        from steering.hooks import Add
        return {s: Add(fitted.tensors[f"{s}/direction"], float(options.alpha)) for s in fitted.info["sites"]}


# --- affine concept editing -------------------------------------------------------------------
@dataclass(frozen=True)
class ACEFit:
    """Fit options of ``ace``: the layers edited (default every layer), the batch size of the activation pass
    and the concept erased (:data:`CONCEPTS`; default ``identity``)."""
    layers: str | int | tuple = "all"
    batch_size: int = 32
    concept: str = "identity"

    def __post_init__(self):
        object.__setattr__(self, "layers", check_layers("ace", self.layers))
        check_positive("ace", "batch_size", self.batch_size)
        check_choice("ace", "concept", self.concept, CONCEPTS)


@dataclass(frozen=True)
class StrengthApply(SitesApply):
    """Apply options of an erasure: ``strength`` 1 erases, 0 is the identity (interpolated in between), at
    ``at_layers`` and ``positions``."""
    method: ClassVar[str] = "erasure"
    strength: float = 1.0

    def __post_init__(self):
        super().__post_init__()
        check_number("erasure", "strength", self.strength)


@register
class ACE(DirectionIntervention):
    """Affine concept editing: set the concept direction's component to its mean at each layer.

    Marshall et al. 2024; Karvonen & Marks 2025 for race and gender. At each layer,
    set the component along the concept's difference-of-means direction to its training mean. The concept is
    the candidate identity by default (fit option ``concept``)."""
    name = "ace"
    FitOptions = ACEFit
    ApplyOptions = StrengthApply

    def fit_parameters(self, lm, train_items, options: ACEFit, seed: int, progress: bool) -> tuple[dict, dict]:
        from steering.directions import diff_of_means
        rows, z, sites, acts = concept_activations(lm, train_items, options.layers, options.batch_size, progress,
                                                   self.name, options.concept)
        tensors = {}
        for s in sites:
            tensors[f"{s}/direction"] = _float32(diff_of_means(acts[s], z))
            tensors[f"{s}/mean"] = _float32(acts[s].mean(0))
        return {"sites": sites, "n_train": len(rows), "concept": options.concept}, tensors

    def edits(self, fitted: Fitted, lm, options: StrengthApply) -> dict:
        from steering.hooks import ProjectOut
        return {s: ProjectOut(fitted.tensors[f"{s}/direction"], fitted.tensors[f"{s}/mean"], float(options.strength))
                for s in fitted.info["sites"]}


# --- LEACE ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LEACEFit:
    """Fit options of ``leace``: the layers erased, the batch size of the activation pass, the concept erased
    (:data:`CONCEPTS`; default ``identity``) and whether the layers are fitted in order, each on activations
    already erased upstream (``sequential``, default true) or each on the model's own activations."""
    layers: str | int | tuple = "all"
    batch_size: int = 32
    concept: str = "identity"
    sequential: bool = True

    def __post_init__(self):
        object.__setattr__(self, "layers", check_layers("leace", self.layers))
        check_positive("leace", "batch_size", self.batch_size)
        check_choice("leace", "concept", self.concept, CONCEPTS)
        if not isinstance(self.sequential, bool):
            raise InterventionError(f"leace: option sequential must be true or false, got {self.sequential!r}")


@register
class LEACE(DirectionIntervention):
    """LEACE: closed-form linear erasure of the concept, fitted layer by layer on erased activations.

    Belrose et al. 2023, "LEACE: Perfect linear concept erasure in closed form": the least-squares
    affine eraser of a binary concept at each chosen layer, read at the decision token; layers are fitted in
    order, each on activations already erased upstream (the paper's concept scrubbing). The concept is the
    candidate identity by default (fit option ``concept``)."""
    name = "leace"
    FitOptions = LEACEFit
    ApplyOptions = StrengthApply

    def fit_parameters(self, lm, train_items, options: LEACEFit, seed: int, progress: bool) -> tuple[dict, dict]:
        from steering.hooks import steer
        from steering.leace import fit_leace, fit_leace_sequential
        if train_items is None or len(train_items) == 0:
            raise InterventionError("leace needs train items")
        rows, z = concept_labels(train_items, options.concept, self.name)
        sites = sorted(layer_sites(lm, options.layers), key=lambda s: int(s.split(".")[1]))
        seqs = [prompt_ids(lm, r) for r in rows.to_dict("records")]
        if options.sequential:
            def collect(site: str, upstream: dict) -> np.ndarray:
                with steer(lm.model, {s: e.as_affine() for s, e in upstream.items()}):
                    return last_token_activations(lm, seqs, [site], options.batch_size, progress)[site]
            erasers = fit_leace_sequential(collect, sites, z)
        else:
            acts = last_token_activations(lm, seqs, sites, options.batch_size, progress)
            erasers = {s: fit_leace(acts[s], z) for s in sites}
        tensors = {}
        for s in sites:
            tensors[f"{s}/proj"] = _float32(erasers[s].proj)
            tensors[f"{s}/mean"] = _float32(erasers[s].mean)
        return {"sites": sites, "n_train": len(rows), "concept": options.concept,
                "sequential": options.sequential}, tensors

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
