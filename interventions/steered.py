"""Activation methods: contrastive activation addition, affine concept editing, LEACE.

Each is fitted on activations of *train* scenarios and declares edits that the base
class applies (:meth:`interventions.base.EditingIntervention.apply`) at the layers and
positions of the shared apply options (:class:`~interventions.base.SitesApply`:
``at_layers``, default every fitted layer; ``positions``, default every position of
the prompt and of the answer)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np
import pandas as pd

from .base import DirectionIntervention, Fitted, InterventionError, SitesApply, register
from .reading import answer_sequences, prompt_ids
from evenhand.engine.reader import last_token_activations, read_batches
from evenhand.models.sites import n_layers
from evenhand.vocab.prompts import model_text, user_message
from .reading import adds_special_tokens
from steering.directions import diff_of_means


def site_activations(lm, items: pd.DataFrame, sites: list[str], batch_size: int = 32,
                     progress: bool = False) -> dict[str, np.ndarray]:
    """Decision-token activations of ``items`` at ``sites`` (float32, rows in the items' order), read in the
    activation cache's batches (similar lengths together), so they equal a float32 cache of the items."""
    seqs = [prompt_ids(lm, r) for r in items.to_dict("records")]
    return last_token_activations(lm, seqs, sites, batch_size, progress, by_length=True)


def layer_sites(lm, layers) -> list[str]:
    """``blocks.<l>.resid_post`` sites for ``layers``: ``"all"``, ``"middle"``, a layer index or a list of them."""
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


ACE_CONCEPTS = ("demographic", "relational", "pressure")
"""What ``ace`` edits: the candidate's demographic coding at every token of their profile (``demographic``,
Karvonen & Marks's concept), which slot holds the minority-coded candidate (``relational``, :data:`CONCEPTS`'s
``identity``) or whether the pressure favours the minority-coded candidate (``pressure``), the last two at the
decision token."""


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
    (:func:`concept_labels`; default the candidate identity, on items with identity cues).

    Public, with :func:`layer_sites`, so that a method written outside the package (see
    ``examples/directional_ablation.py``) fits the same way."""
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
    pairs, of the residual at the answer token (the token where the two labels first differ, the letter of
    "Candidate A") of the prompt completed with the behaviour's answer minus the same prompt completed with the
    opposite answer (answer letters A and B weighted equally); ``alpha`` x that vector is added at every token
    after the prompt (the answer's tokens: apply option ``positions`` defaults to ``generated`` for ``caa``, to
    ``all`` for the other methods). Fit option ``contrast`` says which behaviour: ``evidence`` (default;
    pressured GT items whose pressure favours the wrong candidate: prompt + the correct label against prompt +
    the pressured label, so a positive ``alpha`` pushes toward following the evidence) or ``minority`` (items
    with identity cues: prompt + the minority-coded candidate's label against prompt + the majority-coded one's;
    a negative ``alpha`` suppresses favouring the minority)."""
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
        # Each answer letter weighted equally: the mean over pairs whose behaviour's answer is A and the mean over
        # those where it is B, averaged, so the letter's own identity cancels as in Rimsky et al.'s A/B-balanced
        # datasets.
        tensors = {}
        for s in sites:
            diff = pos[s].astype(np.float64) - neg[s]
            tensors[f"{s}/direction"] = _float32((diff[letter_a].mean(0) + diff[~letter_a].mean(0)) / 2)
        return {"sites": sites, "contrast": options.contrast, "n_pairs": len(pairs),
                "n_pairs_answer_a": int(letter_a.sum()), "position": "answer token"}, tensors

    def edits(self, fitted: Fitted, lm, options: CAAApply) -> dict:
        from steering.hooks import Add  # deferred: pulls in torch
        return {s: Add(fitted.tensors[f"{s}/direction"], float(options.alpha)) for s in fitted.info["sites"]}


# --- the erasers' options (ACE, LEACE) -----------------------------------------------------------
@dataclass(frozen=True)
class ACEFit:
    """Fit options of ``ace``: the layers edited (default every layer), the batch size of the activation pass
    and the concept edited (:data:`ACE_CONCEPTS`; default ``demographic``, Karvonen & Marks's)."""
    layers: str | int | tuple = "all"
    batch_size: int = 32
    concept: str = "demographic"

    def __post_init__(self):
        object.__setattr__(self, "layers", check_layers("ace", self.layers))
        check_positive("ace", "batch_size", self.batch_size)
        check_choice("ace", "concept", self.concept, ACE_CONCEPTS)


@dataclass(frozen=True)
class StrengthApply(SitesApply):
    """Apply options of an erasure: ``strength`` 1 erases, 0 is the identity (interpolated in between), at
    ``at_layers`` and ``positions``."""
    method: ClassVar[str] = "erasure"
    strength: float = 1.0

    def __post_init__(self):
        super().__post_init__()
        check_number("erasure", "strength", self.strength)


# --- the erasers' control: the same eraser fitted on a random relabelling of the concept ----------
# caa, ace and leace are all DirectionIntervention methods, so each gets a control (random_control): for caa,
# every fitted vector replaced by a random direction of the same norm (seeded); for the two erasers, ace and
# leace, the same eraser refitted on a seeded random relabelling of the concept (the same fitting activations,
# sites and shrinkage; one relabelling shared by every site: a permutation of the labels, for ace's paired
# demographic concept half of each slot stratum's pairs swapped, pair_flipped): an eraser of the same kind fitted
# on the same data, whose operator norm (eraser_norms) is of the order of the method's, but which erases no
# concept. A fit stores what the refit needs: the labels (LABELS) and, per site, the float32 activations the
# eraser was fitted on (fit_activations_key; for sequential LEACE, those collected with the real upstream erasers
# applied; the control is refitted on them, not re-scrubbed through the model under its own upstream erasers,
# which would need the model and a pass per layer per draw). The comparison reports it beside each method.
LABELS = "concept_labels"
"""The tensor of an ``ace``/``leace`` fit holding the concept labels its erasers were fitted on."""


def fit_activations_key(site: str) -> str:
    """The tensor of an ``ace``/``leace`` fit holding the activations [n, d] its eraser at ``site`` was fitted on."""
    return f"{site}/fit_activations"


def relabelled(z, seed: int) -> np.ndarray:
    """``z`` randomly permuted (``numpy.random.default_rng(seed)``): the same class counts, no concept."""
    return np.random.default_rng(int(seed)).permutation(np.asarray(z))


PAIR_STRATA = "concept_pair_strata"
"""The tensor of an ``ace`` ``demographic`` fit holding each item's minority-coded slot (0 A, 1 B), one per row pair."""


def pair_flipped(z, strata, seed: int) -> np.ndarray:
    """Paired labels ``z`` (rows ``2i``, ``2i + 1`` of item ``i``, one of each class) with the labels of exactly half
    the items of each stratum swapped (an odd one out by a coin; ``numpy.random.default_rng(seed)``).

    The null of the paired estimator: within an item the two rows are exchangeable when there is no concept, so
    the relabelled difference of means has the sampling noise the real one would have without a concept (an item's
    own activations cancel), and each stratum (the minority's slot) puts half its class-1 rows in either slot, so
    the slots' mean difference cancels too. A plain permutation of the rows (:func:`relabelled`) mixes in the
    variation between items instead. Neither makes the control harmless on the organism (docs/results/dose_mechanisms.md,
    "Why ace's random control removes part of the gap")."""
    z, strata = np.asarray(z), np.asarray(strata)
    if len(z) != 2 * len(strata) or not (np.all(z[0::2] == 1 - z[1::2]) and set(np.unique(z)) <= {0, 1}):
        raise InterventionError(f"ace: paired labels need one row of each class per item ({len(z)} labels, "
                                f"{len(strata)} strata)")
    rng = np.random.default_rng(int(seed))
    flip = np.zeros(len(strata), dtype=bool)
    for g in np.unique(strata):
        idx = rng.permutation(np.flatnonzero(strata == g))
        flip[idx[:len(idx) // 2]] = True
        if len(idx) % 2:
            flip[idx[-1]] = bool(rng.random() < 0.5)
    out = z.copy()
    out[0::2] = np.where(flip, z[1::2], z[0::2])
    out[1::2] = np.where(flip, z[0::2], z[1::2])
    return out


class _RelabelledControl(DirectionIntervention):
    """The control of an eraser: the same eraser refitted on a seeded random permutation of the labels (one
    permutation for every site), on the activations, sites and fit options of the fit."""

    def fitting_data(self, fitted: Fitted) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """(labels, site -> float32 activations) the fit's erasers were fitted on."""
        keys = [LABELS] + [fit_activations_key(s) for s in fitted.info["sites"]]
        missing = [k for k in keys if k not in fitted.tensors]
        if missing:
            raise InterventionError(f"{self.name}: the fit has no tensor {missing[0]!r}, needed to refit the control on "
                                    f"relabelled data (a fit made before the control was a relabelled refit: fit again)")
        return (fitted.tensors[LABELS].cpu().numpy(),
                {s: fitted.tensors[fit_activations_key(s)].cpu().numpy() for s in fitted.info["sites"]})

    def random_control(self, fitted: Fitted, seed: int) -> Fitted:
        """The eraser refitted on the concept's labels permuted with ``seed`` (:meth:`control_tensors`); its
        ``info`` records the control and its operator norms."""
        control = super().random_control(fitted, seed)
        info = {**control.info, "control": "relabelled concept", "control_seed": int(seed),
                "operator_norms": eraser_norms(control)}
        return replace(control, info=info)


# --- the demographic concept: each candidate's profile, every position -------------------------------
def profile_spans(lm, item: dict) -> tuple[list[int], dict[str, tuple[int, int]]]:
    """(the prompt's token ids as :func:`~interventions.reading.prompt_ids` gives them, slot -> [start, end) token
    range of that candidate's profile line): the first line of the prompt that starts with the candidate's noun and
    slot ("Cardholder A is a white woman. Cardholder A has made ...", "Reviewer A, Shanice Singleton, ..."), the
    text that carries the candidate's identity cue. Needs a fast tokenizer (offsets)."""
    if not getattr(lm.tokenizer, "is_fast", False):
        raise InterventionError("ace: concept 'demographic' finds each candidate's profile by token offsets, which "
                                "need a fast tokenizer; this model's is not (use concept 'relational')")
    text = model_text(lm.tokenizer, user_message(item, "answer"))
    enc = lm.tokenizer(text, add_special_tokens=adds_special_tokens(lm), return_offsets_mapping=True)
    offsets = enc["offset_mapping"]
    lines = item["prompt"].split("\n")
    spans = {}
    for slot in ("A", "B"):
        head = f"{item['candidate_noun']} {slot}"
        line = next((x for x in lines if x.startswith(head) and x[len(head):len(head) + 1] in (",", " ", "'")), None)
        at = -1 if line is None else text.find(line)
        if at < 0:
            raise InterventionError(f"ace: item {item['item_id']!r} has no profile line for candidate {slot} "
                                    f"(a line starting {head!r})")
        toks = [j for j, (a, b) in enumerate(offsets) if b > at and a < at + len(line) and b > a]
        spans[slot] = (toks[0], toks[-1] + 1)
    if spans["A"] == spans["B"]:
        raise InterventionError(f"ace: item {item['item_id']!r}: both candidates' profiles are the same line")
    return enc["input_ids"], spans


def demographic_activations(lm, train_items: pd.DataFrame, sites: list[str], batch_size: int = 32,
                            progress: bool = False) -> tuple[pd.DataFrame, np.ndarray, dict[str, np.ndarray]]:
    """(rows, labels, site -> float32 [2n, d]) of the ``demographic`` concept on the train items with identity
    cues: for each item, its minority-coded candidate (label 1) then its majority-coded one (label 0), each the
    mean of the site over the tokens of that candidate's profile line (:func:`profile_spans`) in the item's
    prompt, as Karvonen & Marks average a résumé's activations over its positions."""
    rows = train_items[(train_items["degree"].astype(int) > 0) & train_items["minority_slot"].isin(["A", "B"])]
    rows = rows.reset_index(drop=True)
    if len(rows) == 0:
        raise InterventionError("ace: concept 'demographic' needs train items with identity cues (degree > 0)")
    other = {"A": "B", "B": "A"}
    seqs, spans = [], []
    for r in rows.to_dict("records"):
        ids, sp = profile_spans(lm, r)
        seqs.append(ids)
        spans.append((sp[r["minority_slot"]], sp[other[r["minority_slot"]]]))
    import torch

    def pick(h, idx):  # per sequence: the means of its two spans (float64, on the device); nothing else kept
        out = []
        for k, j in enumerate(idx):
            off = h.shape[1] - len(seqs[j])
            out.append(torch.stack([h[k, off + a:off + b].double().mean(0) for a, b in spans[j]]))
        return out

    read = read_batches(lm, seqs, sites, batch_size, pick, progress)
    acts = {s: np.stack([r[s] for r in read]).reshape(2 * len(rows), -1).astype(np.float32) for s in sites}
    z = np.tile([1, 0], len(rows))
    return rows, z, acts


# --- ACE ---------------------------------------------------------------------------------------
@register
class ACE(_RelabelledControl):
    """Affine concept editing: set the concept direction's component to its mean at each layer, every position.

    Marshall et al. 2024, as Karvonen & Marks 2025 use it for race and gender: at every
    layer and every position, the component along the concept's difference-of-means direction is set to its
    mean. Fit option ``concept``: ``demographic`` (default, Karvonen & Marks's concept: the candidate's
    demographic coding, minority-coded against majority-coded, read at every token of each candidate's profile
    line (the line that carries the identity cue, their résumé) and averaged over those positions, one mean per
    candidate; the direction is the minority candidates' mean minus the majority candidates' and the mean the
    edit sets is their midpoint; :func:`profile_spans`, :func:`demographic_activations`), ``relational`` (the
    earlier concept: which slot holds the minority-coded candidate, read at the decision token) or ``pressure``
    (whether the pressure favours the minority-coded candidate, at the decision token). Control: the same edit
    along the difference-of-means direction of a random relabelling of the concept (``demographic``: half of
    each slot stratum's pairs swapped, :func:`pair_flipped`)."""
    name = "ace"
    FitOptions = ACEFit
    ApplyOptions = StrengthApply

    def fit_parameters(self, lm, train_items, options: ACEFit, seed: int, progress: bool) -> tuple[dict, dict]:
        if options.concept == "demographic":
            if train_items is None or len(train_items) == 0:
                raise InterventionError("ace needs train items")
            sites = layer_sites(lm, options.layers)
            rows, z, acts = demographic_activations(lm, train_items, sites, options.batch_size, progress)
            position = "every token of each candidate's profile line, averaged per candidate"
        else:
            rows, z, sites, acts = concept_activations(lm, train_items, options.layers, options.batch_size, progress,
                                                       self.name, "identity" if options.concept == "relational"
                                                       else options.concept)
            position = "decision token"
        tensors = {}
        for s in sites:
            tensors.update(self.site_tensors(acts[s], z, s))
            tensors[fit_activations_key(s)] = _float32(acts[s])
        tensors[LABELS] = _labels(z)
        if options.concept == "demographic":
            tensors[PAIR_STRATA] = _labels((rows["minority_slot"] == "B").to_numpy(int))
        return {"sites": sites, "n_train": len(rows), "concept": options.concept, "position": position,
                "operator_norms": {s: 1.0 for s in sites}}, tensors

    @staticmethod
    def site_tensors(acts: np.ndarray, z: np.ndarray, site: str) -> dict:
        """The edit's tensors at ``site``: the concept's difference of means and the activations' mean (for
        ``demographic``, one row per candidate and as many of each class: the midpoint of the two class means)."""
        return {f"{site}/direction": _float32(diff_of_means(acts, z)), f"{site}/mean": _float32(acts.mean(0))}

    def edits(self, fitted: Fitted, lm, options: StrengthApply) -> dict:
        from steering.hooks import ProjectOut  # deferred: pulls in torch
        return {s: ProjectOut(fitted.tensors[f"{s}/direction"], fitted.tensors[f"{s}/mean"], float(options.strength))
                for s in fitted.info["sites"]}

    def control_tensors(self, fitted: Fitted, seed: int) -> dict:
        """Each site's direction from the fitting activations with the labels relabelled (seed ``seed``): for the
        paired ``demographic`` concept half of each slot stratum's pairs swapped (:func:`pair_flipped`), for the
        others the labels permuted (:func:`relabelled`)."""
        z, acts = self.fitting_data(fitted)
        if fitted.info.get("concept", "demographic") == "demographic":
            if PAIR_STRATA not in fitted.tensors:
                raise InterventionError(f"{self.name}: the fit has no tensor {PAIR_STRATA!r}, needed to relabel its "
                                        "pairs within slot strata (a fit made before the control kept them: fit again)")
            fake = pair_flipped(z, fitted.tensors[PAIR_STRATA].cpu().numpy(), seed)
        else:
            fake = relabelled(z, seed)
        return self.refit_tensors(fitted, fake)

    def refit_tensors(self, fitted: Fitted, labels) -> dict:
        """The fit's tensors refitted on its fitting activations with ``labels`` in place of the concept's."""
        _, acts = self.fitting_data(fitted)
        out = {LABELS: _labels(labels)}
        for s in fitted.info["sites"]:
            out.update(self.site_tensors(acts[s], labels, s))
        return out


# --- LEACE ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LEACEFit:
    """Fit options of ``leace``: the layers erased, the batch size of the activation pass, the concept erased
    (:data:`CONCEPTS`; default ``identity``), whether the layers are fitted in order, each on activations
    already erased upstream (``sequential``, default true) or each on the model's own activations, and whether
    the covariance is concept-erasure's optimal linear shrinkage estimate (``shrinkage``, default true, the
    library's default) or the sample covariance."""
    layers: str | int | tuple = "all"
    batch_size: int = 32
    concept: str = "identity"
    sequential: bool = True
    shrinkage: bool = True

    def __post_init__(self):
        object.__setattr__(self, "layers", check_layers("leace", self.layers))
        check_positive("leace", "batch_size", self.batch_size)
        check_choice("leace", "concept", self.concept, CONCEPTS)
        for option in ("sequential", "shrinkage"):
            if not isinstance(getattr(self, option), bool):
                raise InterventionError(f"leace: option {option} must be true or false, got "
                                        f"{getattr(self, option)!r}")


@register
class LEACE(_RelabelledControl):
    """LEACE: closed-form linear erasure of the concept, fitted layer by layer on erased activations.

    Belrose et al. 2023, "LEACE: Perfect linear concept erasure in closed form", fitted by their
    ``concept-erasure`` package with its optimal linear shrinkage of the covariance (fit option ``shrinkage``,
    default true; :mod:`steering.leace`): the least-squares affine eraser of a binary concept at each chosen
    layer, read at the decision token (the last prompt token, as the activation cache reads it); layers are
    fitted in order, each on activations already erased upstream (the upstream erasers applied at every position;
    the paper's concept scrubbing; fit option ``sequential``, default true;
    :func:`steering.leace.fit_leace_sequential`). Fit option ``concept``: ``identity`` (default; which slot holds
    the minority-coded candidate; items with identity cues) or ``pressure`` (whether the pressure favours the
    minority-coded candidate; pressured items with identity cues). Each fit's ``info["operator_norms"]`` holds
    every site's operator norm (:func:`eraser_norms`). Control: the same eraser fitted on a random relabelling of
    the concept."""
    name = "leace"
    FitOptions = LEACEFit
    ApplyOptions = StrengthApply

    def fit_parameters(self, lm, train_items, options: LEACEFit, seed: int, progress: bool) -> tuple[dict, dict]:
        from steering.leace import fit_leace, fit_leace_sequential  # deferred: pulls in torch
        if train_items is None or len(train_items) == 0:
            raise InterventionError("leace needs train items")
        rows, z = concept_labels(train_items, options.concept, self.name)
        sites = sorted(layer_sites(lm, options.layers), key=lambda s: int(s.split(".")[1]))
        seqs = [prompt_ids(lm, r) for r in rows.to_dict("records")]
        if options.sequential:
            acts: dict[str, np.ndarray] = {}

            def collect(site: str, upstream: dict) -> np.ndarray:
                erased = {s: e.as_affine() for s, e in upstream.items()}
                acts[site] = last_token_activations(lm, seqs, [site], options.batch_size, progress, erased)[site]
                return acts[site]
            erasers = fit_leace_sequential(collect, sites, z, options.shrinkage)
        else:
            acts = last_token_activations(lm, seqs, sites, options.batch_size, progress)
            erasers = {s: fit_leace(acts[s], z, options.shrinkage) for s in sites}
        tensors = {}
        for s in sites:
            tensors.update(self.site_tensors(erasers[s], s))
            tensors[fit_activations_key(s)] = _float32(acts[s])
        tensors[LABELS] = _labels(z)
        return {"sites": sites, "n_train": len(rows), "concept": options.concept, "sequential": options.sequential,
                "shrinkage": options.shrinkage, "operator_norms": {s: erasers[s].operator_norm for s in sites}}, tensors

    @staticmethod
    def site_tensors(eraser, site: str) -> dict:
        """The eraser's tensors at ``site``: ``proj`` and ``mean`` (float32) and its operator norm (float64)."""
        import torch
        return {f"{site}/proj": _float32(eraser.proj), f"{site}/mean": _float32(eraser.mean),
                f"{site}/operator_norm": torch.tensor(eraser.operator_norm, dtype=torch.float64)}

    def eraser(self, fitted: Fitted, site: str):
        """The :class:`steering.leace.LeaceEraser` fitted at ``site`` (the map every edit applies)."""
        from steering.leace import LeaceEraser  # deferred: pulls in torch
        norm = fitted.tensors.get(f"{site}/operator_norm")
        return LeaceEraser(fitted.tensors[f"{site}/mean"].detach().cpu().double().numpy(),
                           fitted.tensors[f"{site}/proj"].detach().cpu().double().numpy(),
                           None if norm is None else float(norm))

    def edits(self, fitted: Fitted, lm, options: StrengthApply) -> dict:
        return {s: self.eraser(fitted, s).as_affine(float(options.strength)) for s in fitted.info["sites"]}

    def control_tensors(self, fitted: Fitted, seed: int) -> dict:
        """Each site's eraser refitted on the activations it was fitted on with the labels permuted (seed
        ``seed``), with the fit's shrinkage. For a sequential fit these are the activations collected with the
        real upstream erasers applied: the control is not re-scrubbed through the model under its own upstream
        erasers (that needs the model and one pass per layer per draw)."""
        from steering.leace import fit_leace  # deferred: pulls in torch
        shrinkage = self.fit_options_of(fitted).shrinkage
        z, acts = self.fitting_data(fitted)
        fake = relabelled(z, seed)
        out = {LABELS: _labels(fake)}
        for s in fitted.info["sites"]:
            out.update(self.site_tensors(fit_leace(acts[s], fake, shrinkage), s))
        return out


def eraser_norms(fitted: Fitted) -> dict[str, float]:
    """Site -> the operator norm (spectral norm) of a fitted eraser's linear part at strength 1, the most it
    stretches the difference of two activations. ``leace``: of ``I - proj`` (concept-erasure's ``P``; stored
    with the fit, computed from ``proj`` for a fit that lacks it); ``ace``: of ``I - u u^T``, an orthogonal
    projection, so 1. Works on a control too (its own erasers)."""
    sites = fitted.info.get("sites")
    if fitted.name not in ("ace", "leace") or not sites:
        raise InterventionError(f"eraser_norms: a fit of ace or leace is needed, got {fitted.name!r}")
    if fitted.name == "ace":
        return {s: 1.0 for s in sites}
    return {s: LEACE().eraser(fitted, s).operator_norm for s in sites}


def _labels(z):
    import torch
    return torch.tensor(np.asarray(z), dtype=torch.int64)
