"""Learned interventions: LoReFT (pyreft's ``LoreftIntervention``) and ReFT-r1 (AxBench's ``LsReFT``).

Each is trained at one site (``blocks.<layer>.resid_post``, the output of decoder layer ``layer``, which is
pyvene's ``model.layers[<layer>].output``) with the model's weights frozen and declares one edit that the base
class applies (at the ``positions`` of the shared apply options, default every position of the prompt and of
the answer) through :mod:`steering.hooks` and removes, checking on exit that the model is exactly as before."""
from __future__ import annotations

import random
from contextlib import contextmanager
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from .base import DirectionIntervention, EditingIntervention, Fitted, InterventionError, SitesApply, register
from .steered import check_number, check_positive
from evenhand.suite.generate import Cell, other_slot, parse_item_id, render_item
from evenhand.suite.content import content_for
from evenhand.models.sites import n_layers
from evenhand.engine.scoring import label_token_ids
from evenhand.vocab.prompts import labels, model_text, user_message, uses_chat_template
from evenhand.engine.batching import halve_on_oom, left_pad
from .reading import prompt_ids
from evenhand.engine.reader import token_states


def _pyvene():
    import pyvene  # noqa: F401
    from pyvene.models.interventions import DistributedRepresentationIntervention, TrainableIntervention
    from pyvene.models.layers import LowRankRotateLayer
    return TrainableIntervention, DistributedRepresentationIntervention, LowRankRotateLayer


def make_module(kind: str, embed_dim: int, rank: int):
    """A fresh intervention module: ``loreft`` (a pyvene intervention) or ``reft_r1`` (:func:`ReFTR1Module`;
    ``rank`` is the top k of its sparsity objective)."""
    import torch
    Trainable, Distributed, LowRankRotateLayer = _pyvene()

    class LoReFTIntervention(Trainable, Distributed):
        """h + R^T (W h + b - R h) with orthonormal R (rank ``low_rank_dimension``)."""

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            r = kwargs["low_rank_dimension"]
            self.rotate_layer = torch.nn.utils.parametrizations.orthogonal(
                LowRankRotateLayer(kwargs["embed_dim"], r, init_orth=True))
            self.learned_source = torch.nn.Linear(kwargs["embed_dim"], r)
            with torch.no_grad():  # start as the identity map: W h + b = R h
                self.learned_source.weight.copy_(self.rotate_layer.weight.T)
                self.learned_source.bias.zero_()

        def forward(self, base, source=None, subspaces=None, **kwargs):
            R = self.rotate_layer.weight                      # [d, r], orthonormal columns
            x = base.to(R.dtype)
            delta = self.learned_source(x) - x @ R            # W h + b - R h: [.., r] (R evaluated once)
            return (x + delta @ R.T).to(base.dtype)

    if kind == "loreft":
        return LoReFTIntervention(embed_dim=embed_dim, low_rank_dimension=rank)
    if kind == "reft_r1":
        return ReFTR1Module(embed_dim, rank)
    raise InterventionError(f"unknown learned intervention kind {kind!r}")


def l1_outside_topk(non_topk, mask):
    """AxBench's sparsity penalty (``calculate_l1_losses``, ``axbench/utils/model_utils.py``): per sequence, the
    sum of the latents outside its top k over its real tokens / its real-token count (+ float eps), then the mean
    over the batch. ``non_topk``: [batch, seq] latents with the top k zeroed; ``mask``: [batch, seq] real tokens."""
    import torch
    mask = mask.bool()
    count = mask.sum(-1).to(non_topk.dtype)
    return ((non_topk * mask).sum(-1) / (count + torch.finfo(non_topk.dtype).eps)).mean()


def axbench_objective(lm_loss, l1, step: int, steps: int, coeff: float):
    """AxBench's LsReFT training loss at ``step`` of ``steps`` (``axbench/models/lsreft.py``, ``train``): the
    language-modelling loss plus ``step / steps`` x ``coeff`` x the L1 penalty (the ramp starts at 0)."""
    return lm_loss + (step / steps) * float(coeff) * l1


def ReFTR1Module(embed_dim: int, topk: int):
    """AxBench's ReFT-r1 as a torch module (``TopKReLUIntervention``, ``axbench/models/interventions.py``): latents
    ``ReLU(h . w)``, output ``h + mean(TopK(latents)) w``.

    Before a forward, ``mask`` may be set to the real-token mask [batch, seq] (left padding is not a token:
    its latents are zeroed, so it never enters the top k); after it, ``l1`` holds :func:`l1_outside_topk` and
    ``magnitude`` each row's mean top-k latent."""
    import torch

    class _ReFTR1(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.topk = int(topk)
            self.w = torch.nn.Parameter(torch.full((embed_dim,), embed_dim ** -0.5))  # unit norm, as AxBench
            self.mask = None
            self.l1 = None
            self.magnitude = None

        def latents(self, h):
            return torch.relu(h.to(self.w.dtype) @ self.w)  # [batch, seq]

        def forward(self, h):
            z = self.latents(h)
            mask = torch.ones_like(z, dtype=torch.bool) if self.mask is None else self.mask.to(z.device).bool()
            zm = z * mask
            k = min(self.topk, z.shape[-1])
            top, idx = zm.topk(k, dim=-1)
            rest = zm.scatter(-1, idx, 0.0)
            self.l1 = l1_outside_topk(rest, mask)
            self.magnitude = top.mean(-1)
            return (h.to(self.w.dtype) + self.magnitude[:, None, None] * self.w).to(h.dtype)

        def project_gradient(self):
            """Remove the gradient's component along ``w`` (the norm is fixed; only the direction learns)."""
            if self.w.grad is not None:
                u = self.w.detach() / self.w.detach().norm()
                self.w.grad -= (self.w.grad @ u) * u

        def renormalise(self):
            with torch.no_grad():
                self.w /= self.w.norm()

    return _ReFTR1()


class ModuleEdit:
    """A steering edit that runs a torch module on the hidden state."""

    def __init__(self, module):
        self.module = module

    def __call__(self, h):
        m = self.module
        p = next(m.parameters())
        if p.device != h.device:
            m.to(h.device)
        return m(h)


def swapped_item(item: dict) -> dict:
    """The same case with the two candidates' identity cues exchanged (values stay with their slot)."""
    content = content_for([item.get("suite_version")])
    cell, pressure, pslot = parse_item_id(item["item_id"], content)
    swap = {"GTmin": "GTmaj", "GTmaj": "GTmin", "AMB1": "AMB2", "AMB2": "AMB1"}[cell.variant]
    out = render_item(content, Cell(cell.scenario, swap, cell.degree, cell.contrast, other_slot(cell.minority_slot)),
                      pressure, pslot)
    return out


def _check_learned(name: str, o) -> None:
    if o.layer != "middle" and (isinstance(o.layer, bool) or not isinstance(o.layer, int)):
        raise InterventionError(f"{name}: option layer must be 'middle' or a layer index, got {o.layer!r}")
    for opt in ("steps", "batch_size", "max_train") + tuple(x for x in ("rank", "topk") if hasattr(o, x)):
        check_positive(name, opt, getattr(o, opt))
    for opt in ("lr", "consistency") + (("l1",) if hasattr(o, "l1") else ()):
        check_number(name, opt, getattr(o, opt))
    if getattr(o, "objective", "task") not in OBJECTIVES:
        raise InterventionError(f"{name}: option objective must be one of {', '.join(OBJECTIVES)}, "
                                f"got {o.objective!r}")


OBJECTIVES = ("task", "axbench")


@dataclass(frozen=True)
class LearnedFit:
    """Fit options of a learned method: site layer, training steps, learning rate, batch, loss weight, data cap."""
    method: ClassVar[str] = "learned"
    layer: str | int = "middle"
    steps: int = 150
    lr: float = 5e-3
    batch_size: int = 16
    consistency: float = 1.0
    max_train: int = 512

    def __post_init__(self):
        _check_learned(self.method, self)


@dataclass(frozen=True)
class ReFTR1Fit(LearnedFit):
    """Fit options of ``reft_r1`` (rank one by construction): the common ones plus ``topk`` (the k of the
    top-k latent mean that sets the steering magnitude in training; AxBench 8), ``l1`` (the weight of the L1
    penalty on the latents outside the top k, ramped from 0 over training; AxBench 0.005 — both from
    ``axbench/sweep/wuzhengx/2b/l20/lsreft.yaml``; EvenHand used 0.01 before) and ``objective``: ``task``
    (default: the identity-swap pairs' cross-entropy and consistency, because the concept here is a decision
    that follows the evidence and not who is in which slot, which AxBench's objective never sees) or ``axbench``
    (AxBench's LsReFT loss: the language-modelling loss of the correct answer plus the ramped L1 term)."""
    method: ClassVar[str] = "reft_r1"
    topk: int = 8
    l1: float = 0.005
    objective: str = "task"


@dataclass(frozen=True)
class LoReFTFit(LearnedFit):
    """Fit options of ``loreft``: the common ones plus the rank of the intervention."""
    method: ClassVar[str] = "loreft"
    rank: int = 4


@dataclass(frozen=True)
class LoReFTApply(SitesApply):
    """Apply options of ``loreft``: where the trained module acts (``positions``; ``at_layers``: its one layer)."""
    method: ClassVar[str] = "loreft"


@dataclass(frozen=True)
class ReFTR1Apply(SitesApply):
    """Apply options of ``reft_r1``: ``alpha`` x the learned unit direction is added (None: the mean top-k
    latent on the training pairs after training), at ``positions``."""
    method: ClassVar[str] = "reft_r1"
    alpha: float | None = None

    def __post_init__(self):
        super().__post_init__()
        if self.alpha is not None:
            check_number("reft_r1", "alpha", self.alpha)


class _Learned(EditingIntervention):
    kind = "learned"
    module_kind = "loreft"
    ApplyOptions = SitesApply

    def _rank(self, options) -> int:
        return int(getattr(options, "rank", 1))

    def _site(self, lm, options) -> str:
        n = n_layers(lm.model)
        layer = n // 2 if options.layer == "middle" else int(options.layer)
        if not 0 <= layer < n:
            raise InterventionError(f"layer {layer} out of range: the model has {n} layers")
        return f"blocks.{layer}.resid_post"

    def fit_parameters(self, lm, train_items: pd.DataFrame | None, options, seed: int,
                       progress: bool) -> tuple[dict, dict]:
        """Train the module on identity-swapped pairs of ``train_items`` (the model's weights stay frozen)."""
        import torch
        if train_items is None or len(train_items) == 0:
            raise InterventionError(f"{self.name} needs train items")
        rows = train_items[train_items["degree"].astype(int) > 0].to_dict("records")
        if not rows:
            raise InterventionError(f"{self.name}: train items need identity cues (degree > 0)")
        rng = random.Random(seed)
        rng.shuffle(rows)
        rows = rows[: options.max_train]
        pairs = [(r, swapped_item(r)) for r in rows]
        site = self._site(lm, options)
        d = int(lm.model.config.get_text_config().hidden_size)
        torch.manual_seed(seed)
        module = make_module(self.module_kind, d, int(getattr(options, "topk", self._rank(options))))
        module = module.to(lm.model.device)
        curve = train(lm, module, pairs, options, hooked(lm, site, module), progress=progress, name=self.name)
        info = {"site": site, "embed_dim": d, "rank": self._rank(options), "n_pairs": len(pairs), "curve": curve}
        return self.fit_result(lm, module, site, pairs, info, options)

    def fit_result(self, lm, module, site: str, pairs: list, info: dict, options) -> tuple[dict, dict]:
        """(info, tensors) of the trained module (LoReFT: its state dict)."""
        return info, {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}  # seed: Fitted.seed

    def module(self, fitted: Fitted):
        import torch
        m = make_module(self.module_kind, int(fitted.info["embed_dim"]), int(fitted.info["rank"]))
        m.load_state_dict({k: v.clone() for k, v in fitted.tensors.items()})
        m.eval()
        for p in m.parameters():
            p.requires_grad_(False)
        return m.to(torch.float32)

    def edits(self, fitted: Fitted, lm, options) -> dict:
        """The trained module at its site."""
        return {fitted.info["site"]: ModuleEdit(self.module(fitted).to(lm.model.device))}


@contextmanager
def hooked(lm, site: str, module):
    """The model with ``module`` editing ``site`` on every position (:func:`steering.hooks.steer`): the forward
    :func:`train` uses, the one the fitted edit is applied with."""
    from steering.hooks import steer  # deferred: pulls in torch
    with steer(lm.model, {site: ModuleEdit(module)}):
        yield lm.model


def train(lm, module, pairs: list, options, forward, progress: bool = False, name: str = "learned",
          micro_batch: int | None = None, stats: dict | None = None) -> list[dict]:
    """Train ``module`` (the model frozen) on ``pairs`` for ``options.steps`` steps of ``options.batch_size``
    pairs with Adam at ``options.lr``; ``forward`` (a context manager such as :func:`hooked`) yields the edited
    model's forward. Returns the loss curve (every 10th step and the last).

    Each step accumulates its gradient over micro-batches of at most ``micro_batch`` pairs (default the whole
    batch), each term weighted by its share of the batch (:func:`step_terms`), so the gradient and the loss equal
    the full batch's up to rounding. On out-of-memory the step is redone at half the micro-batch
    (:func:`~evenhand.engine.batching.halve_on_oom`: the failed attempt's graph is freed first) and later steps
    keep that size; ``stats``, when given, receives ``micro_batch``, the size the last step ran at."""
    import torch
    from tqdm.auto import tqdm
    sparse = hasattr(module, "project_gradient")  # ReFT-r1: top-k latents, L1 penalty, unit-norm direction
    objective = getattr(options, "objective", "task")
    if objective == "axbench":
        pairs = [p for p in pairs if p[0]["condition"] == "GT"]
        if not pairs:
            raise InterventionError(f"{name}: objective axbench needs GT train items (a correct answer to model)")
    set_mask = (lambda mask: setattr(module, "mask", mask)) if sparse else None
    params = [p for p in module.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=float(options.lr))
    frozen = [p.requires_grad for p in lm.model.parameters()]
    for p in lm.model.parameters():
        p.requires_grad_(False)
    was_training = lm.model.training
    lm.model.eval()
    curve = []
    steps, bs = options.steps, options.batch_size
    micro = min(bs, micro_batch or bs)
    try:
        with forward as model:
            for step in tqdm(range(steps), disable=not progress, desc=name):
                batch = [pairs[(step * bs + i) % len(pairs)] for i in range(bs)]

                def attempt(size: int) -> float:
                    opt.zero_grad()
                    if sparse:  # a failed attempt's L1 term holds its graph: drop it
                        module.l1 = module.magnitude = None
                    total = 0.0
                    for i in range(0, bs, size):
                        term = step_terms(lm, model, module, batch, batch[i:i + size], options, step, set_mask)
                        term.backward()
                        total += float(term.detach())
                    return total

                loss, micro = halve_on_oom(attempt, micro)
                if sparse:
                    module.project_gradient()
                opt.step()
                if sparse:
                    module.renormalise()
                if step % 10 == 0 or step == steps - 1:
                    curve.append({"step": step, "loss": round(loss, 6)})
    finally:
        for p, g in zip(lm.model.parameters(), frozen):
            p.requires_grad_(g)
        lm.model.train(was_training)
    if stats is not None:
        stats["micro_batch"] = micro
    return curve


def step_terms(lm, model, module, batch: list, part: list, options, step: int, set_mask):
    """The share of the training loss of the step's ``batch`` that its micro-batch ``part`` contributes: each mean
    over the batch becomes the part's sum over the batch's count (the consistency term over pairs, the
    cross-entropy over GT pairs, the L1 term over pairs, AxBench's language-modelling loss over answer tokens),
    so the parts' terms add up to the batch's loss and their gradients to its gradient.

    The task objective (``objective: task``, both methods; the default): pairs of an item and its
    identity-swapped counterpart (:func:`swapped_item`: same scenario, values, slot of each value and pressure;
    the candidates' identity cues exchanged); the cross-entropy of the correct label on GT items for both
    members, plus ``consistency`` x the squared difference of the two members' log-odds of "A", read at the
    answer's letter, teacher-forced after the noun (:func:`letter_logodds`). ReFT-r1's ``objective: axbench`` is
    AxBench's instead: the language-modelling loss of the correct answer's tokens after the prompt (GT pairs,
    both members; :func:`answer_nll`) plus the ramped L1 term, nothing else."""
    import torch
    sparse = set_mask is not None
    bs, steps = len(batch), options.steps
    if getattr(options, "objective", "task") == "axbench":
        n_tok = sum(answer_tokens(lm, [a for a, _ in batch] + [b for _, b in batch]))
        items = [a for a, _ in part] + [b for _, b in part]
        nll = answer_nll(lm, items, set_mask, model)
        return nll * (sum(answer_tokens(lm, items)) / n_tok) + axbench_objective(
            0.0, module.l1, step, steps, options.l1) * (len(part) / bs)
    lo_x = letter_logodds(lm, [a for a, _ in part], set_mask, model)
    l1 = module.l1 if sparse else 0.0
    lo_s = letter_logodds(lm, [b for _, b in part], set_mask, model)
    loss = float(options.consistency) * ((lo_x - lo_s) ** 2).sum() / bs
    n_gt = sum(a["condition"] == "GT" for a, _ in batch)
    gt = [i for i, (a, _) in enumerate(part) if a["condition"] == "GT"]
    if gt:
        bce = torch.nn.functional.binary_cross_entropy_with_logits
        tgt = torch.tensor([1.0 if part[i][0]["correct_slot"] == "A" else 0.0 for i in gt], device=lo_x.device)
        loss = loss + (bce(lo_x[gt], tgt, reduction="sum") + bce(lo_s[gt], tgt, reduction="sum")) / n_gt
    if sparse:  # AxBench: the L1 weight ramps from 0 to its value over training
        loss = loss + (step / steps) * float(options.l1) * (l1 + module.l1) / 2 * (len(part) / bs)
    return loss


def answer_tokens(lm, items: list[dict]) -> list[int]:
    """Per GT item, the number of tokens of its correct answer (what :func:`answer_nll` averages over)."""
    return [len(ca if it["correct_slot"] == "A" else cb) for it, (_, ca, cb) in zip(items, answer_batch(lm, items))]


def answer_batch(lm, items: list[dict]):
    """Per item: the prompt ids and the two labels' continuation ids (A's, B's)."""
    tok = lm.tokenizer
    special = not uses_chat_template(tok)
    out = []
    for it in items:
        text = model_text(tok, user_message(it, "answer"))
        (ctx, ca), (_, cb) = (label_token_ids(tok, text, lab, special) for lab in labels(it))
        out.append((list(ctx), list(ca), list(cb)))
    return out


def answer_nll(lm, items: list[dict], before=None, model=None):
    """The language-modelling loss of each GT item's correct answer (its label's tokens after the prompt), mean
    over the batch's answer tokens, as the model computes it from ``labels`` (AxBench's ``cf_outputs.loss``)."""
    import torch

    seqs, n_answer = [], []
    for it, (ctx, ca, cb) in zip(items, answer_batch(lm, items)):
        if it.get("condition") != "GT":
            raise InterventionError(f"item {it['item_id']!r} has no correct answer (condition {it.get('condition')})")
        ans = ca if it["correct_slot"] == "A" else cb
        seqs.append(ctx + ans)
        n_answer.append(len(ans))
    ids, mask, pos = left_pad(seqs, lm.tokenizer.pad_token_id, lm.model.device)
    labels = torch.full_like(ids, -100)
    for i, n in enumerate(n_answer):
        labels[i, ids.shape[1] - n:] = ids[i, ids.shape[1] - n:]
    if before is not None:
        before(mask)
    return (model or lm.model)(input_ids=ids, attention_mask=mask, position_ids=pos, labels=labels).loss


def letter_logodds(lm, items: list[dict], before=None, model=None):
    """log P(A) - log P(B) at the answer's letter, teacher-forced after the noun (differentiable).

    ``before``, when given, is called with the batch's attention mask [batch, seq] before the forward;
    ``model`` (default ``lm.model``) is the forward to run."""
    import torch

    seqs, pairs = [], []
    for it, (ctx, ca, cb) in zip(items, answer_batch(lm, items)):
        k = next((j for j, (x, y) in enumerate(zip(ca, cb)) if x != y), None)  # the first differing token
        if k is None:
            raise InterventionError(f"labels of item {it['item_id']!r} tokenise identically")
        seqs.append(ctx + ca[:k])
        pairs.append((ca[k], cb[k]))
    ids, mask, pos = left_pad(seqs, lm.tokenizer.pad_token_id, lm.model.device)
    if before is not None:
        before(mask)
    out = (model or lm.model)(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=1)
    logp = torch.log_softmax(out.logits[:, -1].float(), -1)
    ia = torch.tensor([a for a, _ in pairs], device=logp.device)
    ib = torch.tensor([b for _, b in pairs], device=logp.device)
    return logp.gather(1, ia[:, None])[:, 0] - logp.gather(1, ib[:, None])[:, 0]


@register
class LoReFT(_Learned):
    """LoReFT (pyvene intervention): a low-rank edit trained for identity-swap consistency and GT accuracy.

    Wu et al. 2024, "ReFT: Representation Finetuning for Language Models": ``h + R^T (W h + b - R h)``, ``R`` a
    rank-r matrix with orthonormal columns (torch's orthogonal parametrisation). Same forward, same
    parametrisation and same parameter layout as ``pyreft/interventions.py::LoreftIntervention`` (pyreft 0.1.0);
    one difference: ``W, b`` start at ``R^T, 0`` (the edit starts as the identity) where pyreft draws ``W`` at
    random. ``tests/test_learned.py`` checks the edit against pyreft's module and the hooks and the training
    curve against pyvene's ``IntervenableModel`` running pyreft's module."""
    name = "loreft"
    module_kind = "loreft"
    FitOptions = LoReFTFit
    ApplyOptions = LoReFTApply


@register
class ReFTR1(_Learned, DirectionIntervention):
    """ReFT-r1 (AxBench): one learned unit direction for detection and steering, with top-k sparsity.

    Wu et al. 2025, "AxBench: Steering LLMs? Even Simple Baselines Outperform Sparse Autoencoders",
    section 3 (AxBench's ``LsReFT``, ``axbench/models/lsreft.py``, with ``TopKReLUIntervention`` in
    ``axbench/models/interventions.py``): one unit direction ``w`` for detection (latent ``z_i = ReLU(h_i . w)``,
    :meth:`detect`) and steering (at apply time ``h + alpha w``), trained with the top-k latent mean as the
    steering magnitude and an L1 penalty on the other latents (sparsity). Training runs the model with
    ``h_i + mean(TopK_k(z)) w`` at every position and adds ``(step / steps) x l1 x`` the L1 penalty on the latents
    outside the top k (``calculate_l1_losses`` in ``axbench/utils/model_utils.py``: per sequence, the sum of
    those latents over its tokens / its token count, then the batch mean); ``w`` is kept at unit norm. Defaults
    as AxBench's LsReFT sweep (``axbench/sweep/wuzhengx/2b/l20/lsreft.yaml``): ``topk`` 8, ``l1`` 0.005."""
    name = "reft_r1"
    kind = "learned"
    module_kind = "reft_r1"
    FitOptions = ReFTR1Fit
    ApplyOptions = ReFTR1Apply

    def fit_result(self, lm, module, site: str, pairs: list, info: dict, options) -> tuple[dict, dict]:
        """The unit direction (``<site>/direction``) and, in ``info``, the mean top-k latent on the training pairs
        (the default steering factor) and the latents' share of zeros (their sparsity)."""
        w = module.w.detach().float().cpu().clone()
        scores = self.latents(lm, [a for a, _ in pairs] + [b for _, b in pairs], site, w)
        top = [float(np.sort(z)[-min(module.topk, len(z)):].mean()) for z in scores]
        info = {**info, "steering_factor": float(np.mean(top)),
                "latent_zero_share": float(np.mean(np.concatenate(scores) == 0))}
        return info, {f"{site}/direction": w}

    def latents(self, lm, items: list[dict], site: str, w) -> list[np.ndarray]:
        """Per item, the latents ``ReLU(h_i . w)`` at every prompt token at ``site``."""
        states = token_states(lm, [prompt_ids(lm, it) for it in items], site)
        wn = w.double().numpy()
        return [np.maximum(h.astype(np.float64) @ wn, 0.0) for h in states]

    def detect(self, fitted: Fitted, lm, items: pd.DataFrame) -> np.ndarray:
        """AxBench's concept detection with the same direction: each item's largest latent over its prompt."""
        site = fitted.info["site"]
        return np.array([z.max() for z in self.latents(lm, items.to_dict("records"), site,
                                                         fitted.tensors[f"{site}/direction"])])

    def edits(self, fitted: Fitted, lm, options: ReFTR1Apply) -> dict:
        """``h + alpha w`` at the trained site (``alpha`` None: the fit's steering factor)."""
        from steering.hooks import Add  # deferred: pulls in torch
        site = fitted.info["site"]
        alpha = fitted.info["steering_factor"] if options.alpha is None else options.alpha
        return {site: Add(fitted.tensors[f"{site}/direction"], float(alpha))}
