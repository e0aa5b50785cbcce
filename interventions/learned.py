"""Learned interventions built on pyvene's intervention classes: LoReFT and ReFT-r1.

Both are small modules applied to one site's hidden state at every position
(prompt and generated tokens): each declares one edit (:class:`ModuleEdit` at
its site) that the base class applies and removes, checking on exit that the
model is exactly as before. Neither has apply options: the fit is the edit.
They are pyvene ``TrainableIntervention`` subclasses, built from
pyvene's orthogonal ``LowRankRotateLayer``:

- ``loreft`` (Wu et al. 2024): ``h + R^T (W h + b - R h)``, ``R`` a rank-r
  matrix with orthonormal rows.
- ``reft_r1`` (AxBench's rank-1 ReFT idea: one subspace both detects and
  steers): ``h + ReLU(w . h + b) r`` with a learned unit direction ``r`` and a
  learned gate; it starts barely open (next to the identity map).

Training (train scenarios only; the model's weights are frozen): pairs of an
item and its identity-swapped counterpart (same scenario, values, slot of each
value and pressure; the two candidates' identity cues exchanged). The loss is
the cross-entropy of the correct label on GT items, for both members of the
pair, plus ``consistency`` x the squared difference of the two members'
log-odds of "A" (the decision should not depend on who is in which slot). The
decision is read as the next-token distribution at the letter of the answer
("<noun> A" vs "<noun> B"), teacher-forced after the noun.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import ClassVar

import pandas as pd

from .base import EditingIntervention, Fitted, InterventionError, register
from .steered import check_number, check_positive


def _pyvene():
    import pyvene  # noqa: F401
    from pyvene.models.interventions import DistributedRepresentationIntervention, TrainableIntervention
    from pyvene.models.layers import LowRankRotateLayer
    return TrainableIntervention, DistributedRepresentationIntervention, LowRankRotateLayer


def make_module(kind: str, embed_dim: int, rank: int):
    """A fresh pyvene intervention module (``loreft`` or ``reft_r1``)."""
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
            R = self.rotate_layer.weight                      # [d, r]
            x = base.to(R.dtype)
            delta = self.learned_source(x) - x @ R            # [.., r]
            return (x + delta @ R.T).to(base.dtype)

    class ReFTR1Intervention(Trainable, Distributed):
        """h + ReLU(w . h + b) r: a learned unit direction r, written with a learned, gated strength."""

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.rotate_layer = torch.nn.utils.parametrizations.orthogonal(
                LowRankRotateLayer(kwargs["embed_dim"], 1, init_orth=True))
            self.gate = torch.nn.Linear(kwargs["embed_dim"], 1)
            with torch.no_grad():  # start next to the identity map (gate barely open, so it gets gradients)
                self.gate.weight.zero_()
                self.gate.bias.fill_(1e-3)

        def forward(self, base, source=None, subspaces=None, **kwargs):
            r = self.rotate_layer.weight                      # [d, 1], unit norm
            x = base.to(r.dtype)
            return (x + torch.relu(self.gate(x)) @ r.T).to(base.dtype)

    if kind == "loreft":
        return LoReFTIntervention(embed_dim=embed_dim, low_rank_dimension=rank)
    if kind == "reft_r1":
        return ReFTR1Intervention(embed_dim=embed_dim)
    raise InterventionError(f"unknown learned intervention kind {kind!r}")


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
    from evenhand.suite.generate import Cell, other_slot, parse_item_id, render_item
    from evenhand.suite.content import content_for
    content = content_for([item.get("suite_version")])
    cell, pressure, pslot = parse_item_id(item["item_id"], content)
    swap = {"GTmin": "GTmaj", "GTmaj": "GTmin", "AMB1": "AMB2", "AMB2": "AMB1"}[cell.variant]
    out = render_item(content, Cell(cell.scenario, swap, cell.degree, cell.contrast, other_slot(cell.minority_slot)),
                      pressure, pslot)
    return out


def _check_learned(name: str, o) -> None:
    if o.layer != "middle" and (isinstance(o.layer, bool) or not isinstance(o.layer, int)):
        raise InterventionError(f"{name}: option layer must be 'middle' or a layer index, got {o.layer!r}")
    for opt in ("steps", "batch_size", "max_train") + (("rank",) if hasattr(o, "rank") else ()):
        check_positive(name, opt, getattr(o, opt))
    for opt in ("lr", "consistency"):
        check_number(name, opt, getattr(o, opt))


@dataclass(frozen=True)
class ReFTR1Fit:
    """Fit options of ``reft_r1`` (rank one by construction): site layer, training steps, learning rate,
    batch, loss weight, data cap."""
    method: ClassVar[str] = "reft_r1"
    layer: str | int = "middle"
    steps: int = 150
    lr: float = 5e-3
    batch_size: int = 16
    consistency: float = 1.0
    max_train: int = 512

    def __post_init__(self):
        _check_learned(self.method, self)


@dataclass(frozen=True)
class LoReFTFit(ReFTR1Fit):
    """Fit options of ``loreft``: ``reft_r1``'s plus the rank of the intervention."""
    method: ClassVar[str] = "loreft"
    rank: int = 4


class _Learned(EditingIntervention):
    kind = "learned"
    module_kind = "loreft"

    def _rank(self, options) -> int:
        return int(getattr(options, "rank", 1))

    def _site(self, lm, options) -> str:
        from evenhand.models.sites import n_layers
        n = n_layers(lm.model)
        layer = n // 2 if options.layer == "middle" else int(options.layer)
        if not 0 <= layer < n:
            raise InterventionError(f"layer {layer} out of range: the model has {n} layers")
        return f"blocks.{layer}.resid_post"

    def fit_parameters(self, lm, train_items: pd.DataFrame | None, options, seed: int,
                       progress: bool) -> tuple[dict, dict]:
        """Train the module on identity-swapped pairs of ``train_items`` (the model's weights stay frozen)."""
        import torch
        from tqdm.auto import tqdm

        from steering.hooks import steer
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
        module = make_module(self.module_kind, d, self._rank(options)).to(lm.model.device)
        params = [p for p in module.parameters() if p.requires_grad]
        opt = torch.optim.Adam(params, lr=float(options.lr))
        frozen = [p.requires_grad for p in lm.model.parameters()]
        for p in lm.model.parameters():
            p.requires_grad_(False)
        was_training = lm.model.training
        lm.model.eval()
        curve = []
        steps, bs = options.steps, options.batch_size
        try:
            with steer(lm.model, {site: ModuleEdit(module)}):
                for step in tqdm(range(steps), disable=not progress, desc=self.name):
                    batch = [pairs[(step * bs + i) % len(pairs)] for i in range(bs)]
                    lo_x = letter_logodds(lm, [a for a, _ in batch])
                    lo_s = letter_logodds(lm, [b for _, b in batch])
                    loss = float(options.consistency) * ((lo_x - lo_s) ** 2).mean()
                    gt = [i for i, (a, _) in enumerate(batch) if a["condition"] == "GT"]
                    if gt:
                        tgt = torch.tensor([1.0 if batch[i][0]["correct_slot"] == "A" else 0.0 for i in gt],
                                           device=lo_x.device)
                        bce = torch.nn.functional.binary_cross_entropy_with_logits
                        loss = loss + bce(lo_x[gt], tgt) + bce(lo_s[gt], tgt)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    if step % 10 == 0 or step == steps - 1:
                        curve.append({"step": step, "loss": round(float(loss.detach()), 6)})
        finally:
            for p, g in zip(lm.model.parameters(), frozen):
                p.requires_grad_(g)
            lm.model.train(was_training)
        tensors = {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}
        return {"site": site, "embed_dim": d, "rank": self._rank(options), "n_pairs": len(pairs),
                "curve": curve}, tensors  # the seed is Fitted.seed

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


def letter_logodds(lm, items: list[dict]):
    """log P(A) - log P(B) at the answer's letter, teacher-forced after the noun (differentiable)."""
    import torch

    from evenhand.engine.batching import left_pad
    from evenhand.engine.scoring import label_token_ids
    from evenhand.prompts import labels, model_text, user_message, uses_chat_template
    tok = lm.tokenizer
    special = not uses_chat_template(tok)
    seqs, pairs = [], []
    for it in items:
        text = model_text(tok, user_message(it, "answer"))
        a_ids, b_ids = (label_token_ids(tok, text, lab, special) for lab in labels(it))
        # label_token_ids returns (prompt ids, continuation ids); find the first differing continuation token
        ctx, ca = a_ids
        _, cb = b_ids
        k = next((j for j, (x, y) in enumerate(zip(ca, cb)) if x != y), None)
        if k is None:
            raise InterventionError(f"labels of item {it['item_id']!r} tokenise identically")
        seqs.append(list(ctx) + list(ca[:k]))
        pairs.append((ca[k], cb[k]))
    ids, mask, pos = left_pad(seqs, tok.pad_token_id, lm.model.device)
    out = lm.model(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=1)
    logp = torch.log_softmax(out.logits[:, -1].float(), -1)
    ia = torch.tensor([a for a, _ in pairs], device=logp.device)
    ib = torch.tensor([b for _, b in pairs], device=logp.device)
    return logp.gather(1, ia[:, None])[:, 0] - logp.gather(1, ib[:, None])[:, 0]


@register
class LoReFT(_Learned):
    """LoReFT (pyvene intervention): a low-rank representation edit trained for identity-swap consistency and GT accuracy."""
    name = "loreft"
    module_kind = "loreft"
    FitOptions = LoReFTFit


@register
class ReFTR1(_Learned):
    """ReFT-r1 (pyvene intervention): a rank-1 learned steering edit trained on the same objective."""
    name = "reft_r1"
    module_kind = "reft_r1"
    FitOptions = ReFTR1Fit

