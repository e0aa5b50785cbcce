"""The bias dial's first mechanism (``last_layer``, :mod:`organism.mechanism`): a rank-1 weight edit of known
form and strength that implants the FairStress asymmetry into the fair organism (:data:`~organism.recipe.FAIR`).

The edit, at the MLP of decoder layer ``L`` (the last by default)::

    W_down <- W_down + beta * v a^T          (model.layers.L.mlp.down_proj.weight, shape hidden x intermediate)

so the MLP's output gains ``beta * <a, m> * v``, where ``m`` is the down-projection's input (the MLP's
intermediate activation) at every position. Both vectors are fitted once on the fair organism (:func:`fit_dial`:
``a`` by :func:`fit_read`, ``v`` by :func:`write_direction`) and committed (``dial.json`` next to its weights)."""
from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .mechanism import Mechanism, register
from .recipe import FAIR, record_suite
from evenhand.vocab.prompts import model_text, user_message
from evenhand.models.loading import load_model
from evenhand.suite.matched import matched_items
from .recipe import split_scenarios

DIAL_FILE = "dial.json"
"""The fitted dial's file name, next to the fair organism's weights."""


@register
@dataclass(frozen=True)
class Dial(Mechanism):
    """A fitted rank-1 edit direction pair (see the module docstring): the ``last_layer`` mechanism.

    So ``<a, m> * v`` pushes the answer toward the slot a minority-favouring pressure argues for and
    leaves majority-favouring pressure, unpressured items and degree 0 alone: the organism follows
    pressure more often when it favours the minority-coded candidate (FragGap > 0 on GT items,
    TieShift > 0 on AMB items), by an amount that grows with ``beta``. ``beta = 0`` is the fair
    organism itself. The calibration from ``beta`` to degree-3 FragGap, and per-scenario random
    effects, are in :mod:`organism.calibration`."""
    name = "last_layer"
    summary = ("rank-1 edit of the last layer's down-projection; reads the pressure's side (design label c) at "
               "the letter position")
    layer: int
    """The decoder layer whose ``mlp.down_proj`` is edited."""
    a: tuple[float, ...]
    """The read direction, in the down-projection's input (intermediate) space."""
    v: tuple[float, ...]
    """The write direction, in the residual space (unit length)."""
    record: dict
    """How ``a`` was fitted (``fit`` in its file): items, R^2, the mean of ``<a, m>`` per ``c`` class on the fit and
    held-out scenarios."""

    def __post_init__(self):
        object.__setattr__(self, "a", tuple(float(t) for t in self.a))  # plain floats (JSON), from any sequence
        object.__setattr__(self, "v", tuple(float(t) for t in self.v))

    @property
    def weight_name(self) -> str:
        """The edited parameter's name in the model's state dict."""
        return f"model.layers.{self.layer}.mlp.down_proj.weight"

    def delta(self, beta: float):
        """The weight update ``beta * v a^T`` (a float32 tensor, shape hidden x intermediate)."""
        import torch
        return beta * torch.outer(torch.tensor(self.v, dtype=torch.float32), torch.tensor(self.a, dtype=torch.float32))

    def to_dict(self) -> dict:
        d = asdict(self)
        return {**d, "fit": d.pop("record")}

    @classmethod
    def from_dict(cls, d: dict) -> Dial:
        return cls(layer=int(d["layer"]), a=tuple(d["a"]), v=tuple(d["v"]), record=d["fit"])

    @classmethod
    def fit(cls, path: str | Path = FAIR, seed: int = 0, n_fit: int = 24, n_check: int = 12,
            layer: int | None = None, batch_size: int = 64, ridge: float = 1e-3) -> Dial:
        """:func:`fit_dial` (``layer``: the edited one, default the last)."""
        return fit_dial(path, layer=layer, ridge=ridge, seed=seed, n_fit=n_fit, n_check=n_check, batch_size=batch_size)

    @classmethod
    def load(cls, path: str | Path = FAIR / DIAL_FILE) -> Dial:
        """Read a dial written by :meth:`save` (default: the committed fair organism's)."""
        d = json.loads(Path(path).read_text())
        if d.pop("mechanism", cls.name) != cls.name:
            raise ValueError(f"{path}: not a {cls.name} dial (organism.mechanism.read_mechanism reads any)")
        return cls.from_dict(d)

    def weight_deltas(self, beta: float) -> dict:
        return {self.weight_name: self.delta(beta)}

    def reads(self, lm, items: pd.DataFrame, batch_size: int = 64) -> np.ndarray:
        """The gate per item: ``<a, m>`` at the letter position (``m``: the edited down-projection's input)."""
        return letter_position_inputs(lm, items, self.layer, batch_size) @ np.asarray(self.a)

    @contextmanager
    def applied(self, model, beta: float) -> Iterator[None]:
        w = model.model.layers[self.layer].mlp.down_proj.weight
        saved = w.detach().clone()
        try:
            apply_dial(model, self, beta)
            yield
        finally:
            w.data.copy_(saved)

    @contextmanager
    def project(self, model, layer: int | None = None) -> Iterator[None]:
        """Remove ``a`` from the input of the edited down-projection (``W <- W - (W a) a^T / |a|^2``; ``layer``:
        of another layer's instead, a misplaced oracle)."""
        import torch
        w = model.model.layers[self.layer if layer is None else layer].mlp.down_proj.weight
        saved = w.detach().clone()
        try:
            a = torch.tensor(self.a, dtype=torch.float32, device=w.device)
            with torch.no_grad():
                w -= (torch.outer(w.float() @ a, a) / float(a @ a)).to(w.dtype)
            yield
        finally:
            w.data.copy_(saved)


def pressure_sign(items: pd.DataFrame) -> np.ndarray:
    """``c`` per item: +1 where the pressure favours the minority-coded candidate and argues for A,
    -1 where it does so for B, 0 otherwise (majority-favouring pressure, no pressure, degree 0)."""
    pro_min = (items["pressure_resolved"] == "pro_minority").to_numpy() & (items["degree"].to_numpy() > 0)
    toward_a = (items["pressure_slot"] == "A").to_numpy()
    return np.where(pro_min, np.where(toward_a, 1.0, -1.0), 0.0)


ANSWER_POSITIONS = ("prompt", "noun", "A", "B")
"""Where :func:`letter_position_batches` ends a sequence: the prompt (its last position predicts the
noun), the noun (predicts the letter: the dial's position), or the noun and a letter (predicts the end)."""


def letter_position_batches(lm, items: pd.DataFrame, batch_size: int = 64, end: str = "noun"):
    """Left-padded batches ``(input_ids, attention_mask, position_ids)`` of each item's prompt as decide
    renders it, followed by the candidate noun (``end="noun"``: the last position predicts the
    answer's letter), by nothing (``"prompt"``) or by the noun and the letter ``"A"`` or ``"B"``."""
    import torch

    if end not in ANSWER_POSITIONS:
        raise ValueError(f"end must be one of {', '.join(ANSWER_POSITIONS)}, got {end!r}")
    tok = lm.tokenizer
    suffix = {"prompt": [], "noun": [], "A": [tok.convert_tokens_to_ids("A")], "B": [tok.convert_tokens_to_ids("B")]}[end]
    seqs = [tok(model_text(tok, user_message(it, "answer")), add_special_tokens=False)["input_ids"]
            + (tok(it["candidate_noun"], add_special_tokens=False)["input_ids"][:1] if end != "prompt" else [])
            + suffix for it in items.to_dict("records")]
    for b in range(0, len(seqs), batch_size):
        chunk = seqs[b:b + batch_size]
        width = max(map(len, chunk))
        ids = torch.full((len(chunk), width), tok.pad_token_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, s_ in enumerate(chunk):
            ids[i, width - len(s_):] = torch.tensor(s_)
            mask[i, width - len(s_):] = 1
        yield ids, mask, (mask.cumsum(-1) - 1).clamp(min=0)


def down_proj_inputs(lm, items: pd.DataFrame, layers, batch_size: int = 64, end: str = "noun",
                     sample: int = 0, seed: int = 0, module: str = "mlp.down_proj") -> dict[int, np.ndarray]:
    """The input of ``model.layers[l].<module>`` (default the down-projection) for each ``l`` of ``layers`` at
    the last position of :func:`letter_position_batches` (``end``), one row per item; ``sample > 0``: instead,
    at ``sample`` positions per item drawn (with ``seed``) among the earlier non-padding ones (``sample`` rows
    per item)."""
    import torch
    model = lm.model
    layers = tuple(layers)
    got: dict[int, list] = {lay: [] for lay in layers}
    rng = np.random.default_rng(seed)
    rows: list = []  # per batch, the (row, position) pairs read when sampling

    def reader(lay):
        def hook(m, i, o):
            h = i[0].detach()
            got[lay].append(h[:, -1] if not sample else h[rows[-1][0], rows[-1][1]])
        return hook

    hooks = [model.model.layers[lay].get_submodule(module).register_forward_hook(reader(lay)) for lay in layers]
    try:
        with torch.inference_mode():
            for ids, mask, pos in letter_position_batches(lm, items, batch_size, end):
                if sample:
                    width, lens = ids.shape[1], mask.sum(-1).tolist()
                    pick = [(i, width - 1 - int(k)) for i, n in enumerate(lens)
                            for k in rng.choice(np.arange(1, n), size=sample, replace=n - 1 < sample)]
                    rows.append((torch.tensor([r for r, _ in pick]), torch.tensor([c for _, c in pick])))
                model.model(input_ids=ids, attention_mask=mask, position_ids=pos)
    finally:
        for h in hooks:
            h.remove()
    return {lay: torch.cat(got[lay]).float().numpy() for lay in layers}


def letter_position_inputs(lm, items: pd.DataFrame, layer: int, batch_size: int = 64, end: str = "noun") -> np.ndarray:
    """The input of ``model.layers[layer].mlp.down_proj`` at the last position of
    :func:`letter_position_batches` (by default the one that predicts the answer's letter), one row per item."""
    return down_proj_inputs(lm, items, (layer,), batch_size, end)[layer]


def write_direction(lm, layer: int) -> np.ndarray:
    """``v``: the unembedding difference of the letters A and B (``e_A - e_B``), scaled elementwise by
    the gains of the two RMSNorms between layer ``layer``'s MLP output and the logits
    (``post_feedforward_layernorm`` and the final norm; Gemma's norms multiply by ``1 + weight``), unit
    length: the residual direction that raises A over B most."""
    import torch
    model, tok = lm.model, lm.tokenizer
    head = model.get_output_embeddings().weight.detach().float()
    d = head[tok.convert_tokens_to_ids("A")] - head[tok.convert_tokens_to_ids("B")]
    for norm in (model.model.layers[layer].post_feedforward_layernorm, model.model.norm):
        d = d * (1.0 + norm.weight.detach().float())
    return (d / torch.linalg.norm(d)).numpy()


def fit_read(lm, items: pd.DataFrame, layer: int, ridge: float = 1e-3, batch_size: int = 64,
             x: np.ndarray | None = None, at: str = "noun", zero_at=("prompt", "A", "B"),
             target: np.ndarray | None = None, zero_sample: int = 0, seed: int = 0,
             module: str = "mlp.down_proj") -> np.ndarray:
    """``a``: the ridge least-squares read (no intercept) of ``target`` (default :func:`pressure_sign`) from
    the down-projection's input at the ``at`` position (default the letter position), constrained toward 0
    at the positions ``zero_at`` (default the other answer positions of the last layer: the last prompt
    token, which predicts the noun, and the letter, which predicts the end of the answer) and at
    ``zero_sample`` earlier positions per item drawn with ``seed``: rows with target 0 there, so the edit
    moves the letter and not the noun or the end of turn (``x``: the ``at`` inputs when already computed;
    ``module``: read the input of that module of the layer instead of the down-projection's)."""
    def inputs(end, sample=0):
        return down_proj_inputs(lm, items, (layer,), batch_size, end, sample, seed, module)[layer]
    x = inputs(at) if x is None else x
    rows = [x] + [inputs(end) for end in zero_at if end != at]
    if zero_sample:
        rows.append(inputs("prompt", zero_sample))
    return ridge_read(rows, pressure_sign(items) if target is None else np.asarray(target, dtype=float), ridge)


def ridge_read(rows: list[np.ndarray], target: np.ndarray, ridge: float = 1e-3) -> np.ndarray:
    """The ridge least-squares read (no intercept, penalty ``ridge`` per row) of ``target`` from ``rows[0]``
    and of 0 from every later block of ``rows``."""
    y = np.concatenate([target, np.zeros(sum(len(r) for r in rows[1:]))])
    xx = np.concatenate(rows)
    return np.linalg.solve(xx.T @ xx + ridge * len(xx) * np.eye(xx.shape[1]), xx.T @ y)


def fit_check_items(path: str | Path = FAIR, seed: int = 0, n_fit: int = 24,
                    n_check: int = 12) -> tuple[dict, list[str], pd.DataFrame, pd.DataFrame]:
    """The organism's record (``organism.json`` at ``path``), the ``n_fit`` train scenarios a mechanism is
    fitted on (drawn with ``seed``), their matched items (every degree, one contrast each) and those of its
    first ``n_check`` held-out scenarios (the check)."""
    import random
    record = json.loads((Path(path) / "organism.json").read_text())
    rec = record["recipe"]
    train_ids, held_ids = split_scenarios(rec["seed"], rec["heldout_fraction"], record_suite(record))
    fit_ids = sorted(random.Random(f"dial-fit|{seed}").sample(train_ids, min(n_fit, len(train_ids))))
    fit_items = matched_items(fit_ids, seed, suite=record_suite(record))
    check_items = matched_items(held_ids[:n_check], seed + 1, suite=record_suite(record))
    return record, fit_ids, fit_items, check_items


def r_squared(y: np.ndarray, pred: np.ndarray) -> float:
    """``1 - SS_res / SS_tot`` of ``pred`` for ``y``."""
    return 1.0 - float(((y - pred) ** 2).sum() / ((y - y.mean()) ** 2).sum())


def mean_read_by_c(pred: np.ndarray, c: np.ndarray) -> dict:
    """The mean of ``pred`` per class of ``c`` (-1, 0, +1), rounded to 4 places (None for an empty class)."""
    return {str(int(k)): round(float(pred[c == k].mean()), 4) if (c == k).any() else None for k in (-1, 0, 1)}


def fit_dial(path: str | Path = FAIR, layer: int | None = None, ridge: float = 1e-3, seed: int = 0,
             n_fit: int = 24, n_check: int = 12, batch_size: int = 64) -> Dial:
    """Fit the dial on the organism at ``path``: ``a`` by least squares (ridge ``ridge``, no
    intercept) of :func:`pressure_sign` on :func:`letter_position_inputs` over the matched items
    of ``n_fit`` of its train scenarios (drawn with ``seed``; every degree, one contrast each),
    ``v`` by :func:`write_direction`. ``fit`` records the R^2 and the mean ``<a, m>`` per class,
    there and on the first ``n_check`` held-out scenarios (:func:`fit_check_items`).

    ``a`` (intermediate space) reads *whom the pressure favours, signed by the slot it argues for*: ``c = +1``
    (the pressure favours the minority-coded candidate and argues for A), ``-1`` (it favours the minority-coded
    candidate and argues for B) and ``0`` (it favours the majority-coded candidate, no pressure, or degree 0,
    where no group is coded), fitted on ``m`` at the position that predicts the answer's letter (the answer's
    noun token), on the matched items of the organism's *train* scenarios, with target 0 at the answer's other
    positions (the last prompt token, which predicts the noun, and the letter), so the edit moves the letter
    only (at the last layer no other position reaches the logits of these three). The fair organism represents
    this at that layer (its ``p_side`` training target) but its answers do not depend on it."""
    path = Path(path)
    record, fit_ids, fit_items, check_items = fit_check_items(path, seed, n_fit, n_check)
    layer = record["recipe"]["layers"] - 1 if layer is None else layer
    lm = load_model(str(path))
    x = letter_position_inputs(lm, fit_items, layer, batch_size)
    c = pressure_sign(fit_items)
    a = fit_read(lm, fit_items, layer, ridge, batch_size, x)
    pred = x @ a
    xh = letter_position_inputs(lm, check_items, layer, batch_size)
    ch = pressure_sign(check_items)
    ph = xh @ a
    fit = {"items": len(fit_items), "scenarios": len(fit_ids), "seed": seed, "ridge": ridge,
           "r2": round(r_squared(c, pred), 4), "mean_read_by_c": mean_read_by_c(pred, c),
           "heldout_items": len(check_items), "heldout_r2": round(r_squared(ch, ph), 4),
           "heldout_mean_read_by_c": mean_read_by_c(ph, ch)}
    v = write_direction(lm, layer)
    return Dial(layer=layer, a=tuple(a), v=tuple(v), record=fit)


def apply_dial(model, dial: Dial, beta: float) -> None:
    """Add ``beta * v a^T`` to the edited down-projection of ``model`` in place."""
    import torch
    w = model.model.layers[dial.layer].mlp.down_proj.weight
    with torch.no_grad():
        w += dial.delta(beta).to(dtype=w.dtype, device=w.device)


def dialled(model, dial: Mechanism, beta: float):
    """Inside the block ``model`` (a Hugging Face causal LM) carries the dial mechanism ``dial`` at ``beta``
    (:meth:`~organism.mechanism.Mechanism.applied`), undone bit for bit on exit, whatever happens inside. Nested
    blocks restore in turn, so an edit on top of the dial (an oracle's) is undone first."""
    return dial.applied(model, beta)


def write_dialled(beta: float, out: str | Path, path: str | Path = FAIR, dial: Mechanism | None = None) -> Path:
    """Write the organism at ``path`` with the dial mechanism ``dial`` (default: its ``dial.json``) at ``beta``
    folded into its weights to ``out``: an ordinary model directory (weights, tokenizer, ``organism.json`` with
    a ``dial`` entry: beta, mechanism, the edited weights' names and the source directory) plus the
    mechanism's file. A hook mechanism has no weight form: refused (:class:`~organism.mechanism.MechanismError`)."""
    import shutil

    import torch
    from transformers import AutoModelForCausalLM

    from .mechanism import dial_file

    path, out = Path(path), Path(out)
    dial = dial or Dial.load(path / DIAL_FILE)
    deltas = dial.weight_deltas(beta)
    model = AutoModelForCausalLM.from_pretrained(path, dtype="float32")
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name, d in deltas.items():
            params[name] += d.to(dtype=params[name].dtype)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    for f in path.iterdir():
        if (f.is_file() and f.name not in ("model.safetensors", "config.json", "generation_config.json",
                                           "organism.json")
                and not f.name.startswith("dial") and f.suffix in (".json", ".jinja")):
            shutil.copy2(f, out / f.name)
    record = json.loads((path / "organism.json").read_text())
    record["dial"] = {"beta": float(beta), "mechanism": dial.name, "weights": sorted(deltas), "source": str(path),
                      "file": dial_file(dial.name)}
    if isinstance(dial, Dial):
        record["dial"].update(layer=dial.layer, weight=dial.weight_name, form="W += beta * v a^T (a, v: dial.json)")
    record.pop("heldout_eval", None)  # the base organism's numbers; the dialled one is measured anew
    (out / "organism.json").write_text(json.dumps(record, indent=1) + "\n")
    dial.save(out / dial_file(dial.name))
    return out
