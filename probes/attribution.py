"""Direct logit attribution of the decision, through a TransformerLens ``TransformerBridge``.

The quantity decomposed, per item, is the **logit difference** at the decision
position: the logit of the label whose choice favours the minority-coded
candidate minus the logit of the other label, so a positive value reads like
the signed metrics (toward the minority). The favoured label is the
``minority_slot`` candidate's on a positive question and the other candidate's
on a negative one (``who should *not* ...``), as in
:func:`probes.dataset.labels`. Degree-0 items have no identity cue, but the
direction is still defined by their hidden assignment (``minority_slot``), so
their contributions should average to zero; :func:`run_attribution` takes
degrees 1-3 by default."""
from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import product
from pathlib import Path

import numpy as np
import pandas as pd

from evenhand.inference.stats import RESAMPLES
from evenhand.reporting.plotting import FORMATS
from evenhand.engine.scoring import label_token_ids
from evenhand.models.sites import module, resolve
from evenhand.running.activations import tl_hook_name
from evenhand.running.activations import boot_bridge
from evenhand.engine.batching import plan_equal_length
from evenhand.engine.reader import read
from evenhand.models.sites import n_layers
from evenhand.vocab.prompts import model_text, user_message, uses_chat_template
from evenhand.inference.stats import interval_bounds, row_weights
from evenhand.reporting.labels import condition_name, group_name, minus
from evenhand.reporting.plotting import COLUMN_WIDTH, paper_style, save
from evenhand.models.loading import load_model
from evenhand.runs.rundir import RunDir, write_table_atomic

COMPONENTS = ("embed", "attn_out", "mlp_out", "unembed_bias", "logit_diff")
"""Component names of the item table; ``logit_diff`` is the model's own total, not a part of it."""
CONDITIONS = ("degree", "pressure", "chosen")
"""The condition columns :func:`aggregate` groups by (each also pooled as ``"all"``)."""
REQUIRED = ("item_id", "scenario_id", "degree", "minority_slot", "prompt")
_GAIN_PROBE = 1024.0  # constant input for reading the norm's gain: eps / 1024**2 is negligible


@dataclass(frozen=True)
class DecisionTokens:
    """What one item's forward pass needs: the sequence and the two diverging label tokens."""
    ids: list[int]
    """Prompt tokens plus the labels' common prefix; the decision is read at the last one."""
    favoured: int
    """Token of the label whose choice favours the minority-coded candidate."""
    other: int
    """Token of the other label at the same position."""


def favoured_slot(item: dict) -> str:
    """The slot whose choice favours the minority: ``minority_slot``, the other on a negative question."""
    slot = item["minority_slot"]
    if slot not in ("A", "B"):
        raise ValueError(f"item {item.get('item_id')!r}: minority_slot must be A or B, got {slot!r}")
    negative = item.get("question_polarity") == "negative"
    return {"A": "B", "B": "A"}[slot] if negative else slot


def decision_tokens(tokenizer, text: str, item: dict, special: bool) -> DecisionTokens:
    """The sequence and label tokens at which the two answers first diverge (see the module docstring).

    The two labels (``Teacher A`` / ``Teacher B``) are tokenised as continuations of the prompt exactly as the
    logprob mode does (:func:`evenhand.engine.scoring.label_token_ids`); the sequence run is the prompt plus the
    labels' common token prefix, and the difference is taken at its last position between the first tokens at
    which the labels differ. When the labels differ only in their last token (the usual case) this difference
    equals ``logprob_A - logprob_B`` of the logprob mode, up to the sign the favoured slot gives it."""
    from evenhand.vocab.prompts import labels  # deferred: a name of this module

    label_a, label_b = labels(item)
    ctx, tok_a = label_token_ids(tokenizer, text, label_a, special)
    _, tok_b = label_token_ids(tokenizer, text, label_b, special)
    split = next((j for j, (a, b) in enumerate(zip(tok_a, tok_b)) if a != b), None)
    if split is None:
        raise ValueError(f"item {item.get('item_id')!r}: the labels {label_a!r} and {label_b!r} tokenise to "
                         f"{tok_a} and {tok_b}, which never differ at one position; no logit difference "
                         f"separates them")
    fav = favoured_slot(item)
    a, b = tok_a[split], tok_b[split]
    return DecisionTokens(ids=list(ctx) + list(tok_a[:split]), favoured=a if fav == "A" else b,
                          other=b if fav == "A" else a)


def component_sites(n_layers: int) -> list[str]:
    """Site names of the residual components, in the order the forward pass adds them."""
    return ["embed"] + [f"blocks.{i}.{k}" for i in range(n_layers) for k in ("attn_out", "mlp_out")]


def _component_of(site: str) -> tuple[str, int | None]:
    if site == "embed":
        return "embed", -1
    if site in ("unembed_bias", "logit_diff"):
        return site, None
    _, layer, kind = site.split(".")
    return kind, int(layer)


def _chosen_sides(df: pd.DataFrame) -> np.ndarray:
    """``minority`` / ``majority`` (the side the answer favours), ``no_choice``, or ``unknown`` without answers."""
    from .dataset import labels  # deferred: a name of this module

    if "choice" not in df.columns and "text" not in df.columns:
        return np.full(len(df), "unknown", dtype=object)
    y, answered = labels(df, "favours_minority")
    return np.where(~answered, "no_choice", np.where(y == 1, "minority", "majority")).astype(object)


def _pressure(df: pd.DataFrame) -> np.ndarray:
    if "pressure_resolved" not in df.columns:
        return np.full(len(df), "none", dtype=object)
    return np.array([p if isinstance(p, str) and p else "none" for p in df["pressure_resolved"]], dtype=object)


class _Readout:
    """The frozen-norm linear readout of one model: gain, unembedding rows, bias, softcap.

    The final RMSNorm is ``y = g * x / s(x)`` with ``s(x) = sqrt(mean(x**2) + eps)`` and ``g`` its effective
    gain (``1 + weight`` for Gemma's offset convention, ``weight`` for Llama/Qwen). ``g`` is read off the
    model's own norm module applied to a constant vector (so either convention is handled without special
    cases), and ``s`` is frozen at the value the model computed for the actual final residual
    (``ln_final.hook_scale``, in :func:`_runner`). With ``s`` fixed the map from residual to logits is linear,
    so each component ``c`` contributes ``(g * c / s) . (W_U[fav] - W_U[other])`` and the contributions sum to
    the logit difference exactly up to floating-point error (an unembedding bias, where the model has one, is
    one more, constant, component). The runner checks that this linearisation reproduces the norm's output (it
    does not for a LayerNorm with centring and bias, which is refused)."""

    def __init__(self, lm):
        import torch

        model = lm.model
        norm = module(model, resolve(model, "ln_final"))
        head = model.get_output_embeddings()
        d = int(head.weight.shape[1])
        with torch.inference_mode():
            probe = torch.full((1, d), _GAIN_PROBE, dtype=torch.float32, device=head.weight.device)
            self.gain = norm(probe)[0].float()
        self.weight = head.weight
        self.bias = getattr(head, "bias", None)
        cap = getattr(model.config.get_text_config(), "final_logit_softcapping", None)
        self.softcap = float(cap) if cap else None
        self.half = head.weight.dtype != torch.float32

    def direction(self, favoured: list[int], other: list[int]):
        """[B, d] float32 rows ``W_U[fav] - W_U[other]``."""
        import torch
        fav = torch.tensor(favoured, device=self.weight.device)
        oth = torch.tensor(other, device=self.weight.device)
        return self.weight[fav].float() - self.weight[oth].float()

    def bias_difference(self, favoured: list[int], other: list[int]):
        """[B] float32 ``b_U[fav] - b_U[other]``, or None without an unembedding bias."""
        if self.bias is None:
            return None
        return (self.bias[favoured].float() - self.bias[other].float())

    def pre_softcap(self, logit_fav, logit_other):
        """``z_fav - z_other``: the difference before ``cap * tanh(z / cap)`` (the plain difference without a cap).

        If the model's config sets ``final_logit_softcapping`` (Gemma 2; it is unset in Gemma 3), its logits are
        ``cap * tanh(z / cap)``; the components then sum to the *pre-softcap* difference ``z_fav - z_other``,
        which has the same sign as the difference of the logits the model outputs. The ``logit_diff`` row always
        holds the model's own (post-softcap) difference."""
        import torch
        if self.softcap is None:
            return logit_fav - logit_other
        c, lim = self.softcap, 1 - 1e-7
        return c * (torch.atanh((logit_fav / c).clamp(-lim, lim)) - torch.atanh((logit_other / c).clamp(-lim, lim)))


def _check(name: str, got, want, tol: float, what: str) -> None:
    """Raise when ``got`` departs from ``want`` by more than ``tol`` relative (norms over the last dim)."""
    err = float(((got - want).norm(dim=-1) / want.norm(dim=-1).clamp(min=1e-12)).max())
    if not math.isfinite(err) or err > tol:
        raise RuntimeError(f"logit attribution on {name}: {what} (relative error {err:.2e} > {tol:.0e}); "
                           f"the decomposition would not be exact for this architecture")


def _runner(lm, bridge, seqs: list[DecisionTokens], sites: list[str], readout: _Readout):
    """A function from item indices (one token length) to rows of ``{site: contribution}``.

    The residual stream at the decision position is the sum of the embedding (``hook_embed``: Gemma's scaled
    embedding; the models supported use rotary positions, so there is no positional term) and, for every
    layer, what the attention block and the MLP block *add* to it (``blocks.{L}.hook_attn_out`` and
    ``blocks.{L}.hook_mlp_out``; on Gemma these are after the block's post-attention / post-feedforward
    norms). Rows are named with the site vocabulary of :mod:`evenhand.models.sites` (``embed``,
    ``blocks.{L}.attn_out``, ``blocks.{L}.mlp_out``). The run checks that the components add up to the final
    residual, and that the frozen-norm readout (:class:`_Readout`) reproduces the norm's output, and stops with
    an error if they do not."""

    hooks = [tl_hook_name(s) for s in sites]
    extra = ["ln_final.hook_in", "ln_final.hook_scale", "ln_final.hook_out"]
    wanted = set(hooks + extra)
    tol = 1e-1 if readout.half else 1e-4

    def run(idx: list[int]) -> list[dict]:
        import torch
        ids = torch.tensor([seqs[i].ids for i in idx], dtype=torch.long, device=lm.model.device)
        logits, cache = bridge.run_with_cache(ids, names_filter=lambda n: n in wanted, pos_slice=-1,
                                              logits_to_keep=1)
        missing = sorted(wanted - set(cache.keys()))
        if missing:
            raise KeyError(f"TransformerLens bridge has no hook {missing[0]!r} for {lm.name}")
        comps = torch.stack([cache[h][:, -1].float() for h in hooks], 1)       # [B, C, d]
        resid = cache["ln_final.hook_in"][:, -1].float()
        scale = cache["ln_final.hook_scale"][:, -1].float()                    # [B, 1]
        _check(lm.name, comps.sum(1), resid, tol, "the embedding, attention and MLP outputs do not add up "
                                                  "to the final residual")
        _check(lm.name, readout.gain * resid / scale, cache["ln_final.hook_out"][:, -1].float(), tol,
               "the final norm is not gain * x / rms(x)")
        fav = [seqs[i].favoured for i in idx]
        oth = [seqs[i].other for i in idx]
        direction = readout.direction(fav, oth) * readout.gain / scale         # [B, d]
        values = torch.einsum("bcd,bd->bc", comps, direction)
        last = logits[:, -1].float()
        rows = torch.arange(len(idx), device=last.device)
        lf, lo = last[rows, torch.tensor(fav, device=last.device)], last[rows, torch.tensor(oth, device=last.device)]
        pre = readout.pre_softcap(lf, lo)
        bias = readout.bias_difference(fav, oth)
        out = []
        for j in range(len(idx)):
            row = dict(zip(sites, values[j].tolist()))
            if bias is not None:
                row["unembed_bias"] = float(bias[j])
            row["logit_diff"] = float(lf[j] - lo[j])
            row["_pre_softcap"] = float(pre[j])
            out.append(row)
        return out

    return run


def attribute(items: pd.DataFrame, lm, batch_size: int = 8, chat_template: str = "auto", progress: bool = True,
              bridge=None) -> pd.DataFrame:
    """Direct logit attribution of every item's decision (see the module docstring).

    ``items``: suite items or a run's responses (then the chosen side is filled in). ``bridge``: a
    ``TransformerBridge`` already booted on ``lm`` (:func:`evenhand.running.activations.boot_bridge`);
    None boots one on its own copy of the model. Prompts are batched only with others of the same
    token length (the bridge does not reproduce Hugging Face's padded forward).

    Returns one row per (item, component): ``item_id, scenario_id, degree, condition,
    question_polarity, minority_slot, favoured_slot, pressure, chosen, position`` (the decision
    token's index), ``component`` (``embed``, ``attn_out``, ``mlp_out``, ``unembed_bias`` where the
    model has one, and ``logit_diff``, the model's own total), ``site``, ``layer`` (-1 for the
    embedding, missing for ``unembed_bias``/``logit_diff``) and ``value`` (logits). ``attrs``
    holds ``max_abs_error``: the largest gap between the sum of the components and the
    (pre-softcap) logit difference, and ``softcap``."""
    from tqdm.auto import tqdm


    missing = [c for c in REQUIRED if c not in items.columns]
    if missing:
        raise ValueError(f"items lack the column(s) {', '.join(missing)} that attribution needs")
    if len(items) == 0:
        raise ValueError("no items to attribute")
    if items["item_id"].duplicated().any():
        raise ValueError("items contain duplicate item_id values")
    df = items.reset_index(drop=True)
    records = df.to_dict("records")
    special = not uses_chat_template(lm.tokenizer, chat_template)
    seqs = [decision_tokens(lm.tokenizer, model_text(lm.tokenizer, user_message(r, "answer"), chat_template), r,
                            special) for r in records]
    sites = component_sites(n_layers(lm.model))
    readout = _Readout(lm)
    run = _runner(lm, bridge if bridge is not None else boot_bridge(lm), seqs, sites, readout)
    results: list[dict | None] = [None] * len(seqs)
    bar = tqdm(total=len(seqs), unit="item", disable=not progress, desc="attribution", dynamic_ncols=True)

    def keep(idx: list[int], rows: list[dict]) -> None:
        for i, row in zip(idx, rows):
            results[i] = row
        bar.update(len(idx))

    read(run, plan_equal_length([len(s.ids) for s in seqs], batch_size), batch_size, keep)
    bar.close()
    return _long_table(df, records, seqs, results, readout)


def _long_table(df: pd.DataFrame, records: list[dict], seqs: list[DecisionTokens], results: list[dict],
                readout: _Readout) -> pd.DataFrame:
    """One row per (item, component), the items' conditions repeated; error summaries in ``attrs``."""
    names = [k for k in results[0] if not k.startswith("_")]
    values = np.array([[r[k] for k in names] for r in results], dtype=np.float64)
    parts = [_component_of(k) for k in names]
    errors = np.abs(values[:, :-1].sum(1) - np.array([r["_pre_softcap"] for r in results]))

    def col(name: str, default):
        return df[name].to_numpy(object) if name in df.columns else np.full(len(df), default, dtype=object)

    meta = pd.DataFrame({
        "item_id": df["item_id"].to_numpy(object), "scenario_id": df["scenario_id"].to_numpy(object),
        "degree": df["degree"].astype(int).to_numpy(), "condition": col("condition", None),
        "question_polarity": col("question_polarity", "positive"),
        "minority_slot": df["minority_slot"].to_numpy(object), "favoured_slot": [favoured_slot(r) for r in records],
        "pressure": _pressure(df),
        "chosen": _chosen_sides(df), "position": [len(s.ids) - 1 for s in seqs]})
    n_items, n_comp = values.shape
    out = meta.loc[np.repeat(np.arange(n_items), n_comp)].reset_index(drop=True)
    out["component"] = [c for c, _ in parts] * n_items
    out["site"] = names * n_items
    out["layer"] = pd.array([layer for _, layer in parts] * n_items, dtype="Int64")
    out["value"] = values.reshape(-1)
    out.attrs.update(max_abs_error=float(errors.max()), mean_abs_error=float(errors.mean()),
                     softcap=readout.softcap)
    return out


def _wide(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(items x sites values in the table's site order, one row of conditions per item)."""
    sites = list(dict.fromkeys(table["site"]))
    wide = table.pivot(index="item_id", columns="site", values="value")[sites]
    meta = table.drop_duplicates("item_id").set_index("item_id").loc[wide.index]
    return wide, meta


def aggregate(table: pd.DataFrame, resamples: int = RESAMPLES, seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """Mean of every component by condition, with cluster-bootstrap CIs over scenarios.

    Cells: every combination of ``degree``, ``pressure`` (direction) and ``chosen`` (side) values present, each
    condition also pooled as ``"all"`` (condition columns are strings). Rows: ``degree, pressure,
    chosen, component, site, layer, value`` (the mean), ``ci_low, ci_high`` (percentile interval
    of ``resamples`` draws of whole scenarios, :func:`evenhand.inference.stats.row_weights`), ``n`` items and
    ``clusters`` scenarios."""

    if table.empty:
        raise ValueError("the attribution table is empty")
    wide, meta = _wide(table)
    conds = pd.DataFrame({c: meta[c].astype(str).to_numpy() for c in CONDITIONS})
    levels = [[*sorted(conds[c].unique()), "all"] for c in CONDITIONS]
    site_parts = [_component_of(s) for s in wide.columns]
    values = wide.to_numpy(np.float64)
    groups = meta["scenario_id"].to_numpy(object)
    rows = []
    for cell in product(*levels):
        mask = np.ones(len(conds), bool)
        for col, v in zip(CONDITIONS, cell):
            if v != "all":
                mask &= (conds[col] == v).to_numpy()
        if not mask.any():
            continue
        v, g = values[mask], groups[mask]
        w = row_weights(g, resamples, seed)
        draws = (w @ v) / w.sum(1, keepdims=True)
        lo, hi = interval_bounds(draws, 1 - level)
        mean = v.mean(0)
        k = len(np.unique(g))
        for j, (site, (comp, layer)) in enumerate(zip(wide.columns, site_parts)):
            rows.append({**dict(zip(CONDITIONS, cell)), "component": comp, "site": site, "layer": layer,
                         "value": float(mean[j]), "ci_low": float(lo[j]),
                         "ci_high": float(hi[j]), "n": int(mask.sum()), "clusters": k})
    out = pd.DataFrame(rows)
    out["layer"] = pd.array(out["layer"], dtype="Int64")
    return out


def attribution_figure(table: pd.DataFrame, stem, by: str = "degree",
                       formats: Sequence[str] = FORMATS) -> list[Path]:
    """Mean direct contribution by layer (attention above, MLP below), one line per value of ``by``.

    ``table`` is :func:`aggregate`'s; the other two conditions are taken pooled (``"all"``). The
    embedding's contribution is the square at layer -1 of the upper panel (with its CI as an error
    bar); the bands are the layers' 95% CIs. The two panels share one y-scale, so a component with a
    small effect looks small; the legend names each line (:mod:`evenhand.reporting.labels`) with its items (n)."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator


    if by not in CONDITIONS:
        raise ValueError(f"by must be one of {', '.join(CONDITIONS)}, got {by!r}")
    t = table
    for c in CONDITIONS:
        if c != by:
            t = t[t[c] == "all"]
    if t.empty:
        raise ValueError("the table has no rows pooled over the other conditions; is it aggregate()'s output?")
    values = [v for v in sorted(t[by].unique()) if v != "all"] or ["all"]
    pal = paper_style()
    fig, axes = plt.subplots(2, 1, figsize=(COLUMN_WIDTH, 3.0), sharex=True, sharey=True)
    for ax, comp in zip(axes, ("attn_out", "mlp_out")):
        for k, v in enumerate(values):
            color = pal[k % len(pal)]
            g = t[(t[by] == v) & (t["component"] == comp)].sort_values("layer")
            x = g["layer"].astype(float).to_numpy()
            n = t[t[by] == v]["n"].max()
            k_v = t[t[by] == v]["clusters"].max() if "clusters" in t.columns else None
            name = condition_name(by, v) + (f" (n={int(n)}" if pd.notna(n) else " (")
            name = (name + ("; 1 scenario: no CI)" if pd.notna(k_v) and k_v < 2 else ")")).replace(" ()", "")
            ax.fill_between(x, g["ci_low"], g["ci_high"], color=color, alpha=0.2, lw=0)
            ax.plot(x, g["value"], marker="o" if len(x) <= 12 else None, color=color, label=name)
            if comp == "attn_out":
                e = t[(t[by] == v) & (t["component"] == "embed")]
                ax.errorbar(e["layer"].astype(float) + (k - (len(values) - 1) / 2) * 0.1, e["value"],
                            yerr=np.abs(e[["ci_low", "ci_high"]].to_numpy(float).T - e["value"].to_numpy(float)),
                            fmt="s", color=color, ms=3, elinewidth=0.7, capsize=1.5)
        ax.axhline(0, color="0.6", lw=0.6, zorder=0)
        ax.set_title(group_name(comp) + (minus(" (square at -1: embedding)") if comp == "attn_out" else ""))
    fig.supylabel("Logit difference (+ = toward minority-coded)", fontsize=7)
    axes[1].xaxis.set_major_locator(MaxNLocator(integer=True))
    axes[1].set_xlabel("Layer")
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, frameon=False, ncol=min(len(values), 3), loc="upper center",
               bbox_to_anchor=(0.5, 1.06))
    fig.tight_layout()
    k = t["clusters"].max() if "clusters" in t.columns else None
    fig.text(0.01, -0.01, "Direct contribution to the logit difference toward the minority-coded candidate; "
             "bands and bars: 95% CIs over scenarios" + (f" ({int(k)} scenarios)." if pd.notna(k) else "."),
             ha="left", va="top", fontsize=5.5, color="0.3", wrap=True)
    return save(fig, stem, formats)


def run_attribution(run_dir: str | Path, out_dir: str | Path | None = None, degrees: Sequence[int] | None = (1, 2, 3),
                    batch_size: int = 8, resamples: int = RESAMPLES, seed: int = 0, progress: bool = True,
                    formats: Sequence[str] = FORMATS) -> pd.DataFrame:
    """Attribute a run's decisions with its model; write tables, manifest and figures. Returns the aggregate.

    Reads ``run_dir/manifest.json`` (the model spec under ``config.model``) and
    ``run_dir/responses.parquet`` (rows of ``degrees``; None keeps all). Writes to ``out_dir``
    (default ``run_dir/attribution``): ``attribution_items.parquet`` (:func:`attribute`),
    ``attribution.parquet`` and ``.csv`` (:func:`aggregate`), ``manifest.json``, and the figures
    ``attribution.*`` (lines by degree), ``attribution_pressure.*`` and ``attribution_chosen.*``."""

    source = RunDir(run_dir)
    run_dir = source.path
    out = RunDir(out_dir) if out_dir is not None else source.attribution_dir
    mpath, rpath = source.manifest_path, source.responses_path
    if not mpath.exists():
        raise FileNotFoundError(f"{mpath} not found: is {run_dir} a run directory?")
    if not rpath.exists():
        raise FileNotFoundError(f"{rpath} not found: is {run_dir} a finished run directory?")
    spec = source.model_spec()
    responses = source.read_responses()
    if degrees is not None:
        responses = responses[responses["degree"].isin(list(degrees))]
        if responses.empty:
            raise ValueError(f"{rpath} holds no rows of degree {', '.join(map(str, degrees))}")
    t0 = time.perf_counter()
    lm = load_model(spec)
    items = attribute(responses, lm, batch_size=batch_size, chat_template=spec.chat_template, progress=progress)
    table = aggregate(items, resamples=resamples, seed=seed)
    out.path.mkdir(parents=True, exist_ok=True)
    write_table_atomic(out.attribution_items_path, items)
    write_table_atomic(out.attribution_table, table)
    write_table_atomic(out.attribution_csv, table)
    figures = [str(p) for by, name in (("degree", "attribution"), ("pressure", "attribution_pressure"),
                                       ("chosen", "attribution_chosen"))
               for p in attribution_figure(table, out.path / name, by, formats)]
    out.write_manifest({
        "kind": "logit_attribution", "source_run": str(run_dir),
        "degrees": list(degrees) if degrees is not None else None,
        "n_items": int(items["item_id"].nunique()), "clusters": int(items["scenario_id"].nunique()),
        "direction": "logit of the label favouring the minority-coded candidate minus the other label",
        "position": "last token of the prompt plus the labels' common prefix (the first diverging label token)",
        "final_norm": "RMSNorm with its scale frozen at the actual final residual",
        "softcap": items.attrs["softcap"], "max_abs_error": items.attrs["max_abs_error"],
        "mean_abs_error": items.attrs["mean_abs_error"], "resamples": resamples, "seed": seed,
        "model": lm.describe(), "chat_template": spec.chat_template, "figures": figures,
        "seconds": round(time.perf_counter() - t0, 3)})
    return table
