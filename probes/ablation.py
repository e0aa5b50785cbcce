"""The name-ablation control: the same items without the candidates' names.

Three variants (FairStress: removing the names dropped activation probes by
about 18 points):

- ``label``: every candidate name in the prompt is replaced by a neutral label
  (``NEUTRAL_LABELS``, per slot); everything else is unchanged. Items without
  names (degrees 0, 2, 3) are returned unchanged apart from their id.
- ``degree0``: the item's cell re-rendered at degree 0 (no identity cue at all),
  same scenario, variant, contrast assignment, slot and pressure sentence.
- ``degree2``: the cell re-rendered at degree 2 (the identity carried by the
  implicit cue instead of the name): the control for a degree-1 name ablation,
  which changes the surface but keeps the identity."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Literal, get_args

import numpy as np
import pandas as pd

from evenhand.inference.stats import RESAMPLES
from evenhand.suite.generate import Cell, parse_item_id, render_item
from evenhand.suite.content import content_for
from evenhand.suite.rewrites import NEUTRAL_LABELS  # the identity_blind labels: one definition
from evenhand.rows.schema import REQUIRED
from .logistic import ProbeOptions, fit_sites, resolved_solver
from .features import site_sequence, widths
from .scores import PAIRED_INTERVAL, POINT_INTERVAL, accuracy_ci, paired_drop_ci
from .sweep import site_layer
from evenhand.running.activations import ActivationCache, CacheOptions, cache_activations
from evenhand.running.decisions import DecideOptions, decide
from evenhand.models.loading import load_model
from evenhand.runs.rundir import RunDir, write_table_atomic
from .dataset import build_dataset, labels as make_labels

Variant = Literal["label", "degree0", "degree2"]
"""An ablation variant (module docstring)."""
VARIANTS = get_args(Variant)


def _suffix(value, variant: str):
    return f"{value}|ablate={variant}" if isinstance(value, str) else value


def ablate_item(item: dict, variant: str, labels: dict[str, str] = NEUTRAL_LABELS) -> dict:
    """One item with its names removed (see the module docstring).

    The ablated item keeps every field of the original (so the same labels are defined) with ``item_id`` and
    ``baseline_id`` suffixed by ``|ablate=<variant>`` and the original id in ``source_item_id``."""

    if variant not in VARIANTS:
        raise ValueError(f"ablation variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
    out = dict(item)
    if variant == "label":
        names = item.get("names")
        if isinstance(names, dict) and names:
            prompt = item["prompt"]
            for slot, name in names.items():
                if not isinstance(name, str) or name not in prompt:
                    raise ValueError(f"item {item['item_id']!r}: name {name!r} of slot {slot} is not in its prompt")
                prompt = re.sub(re.escape(name), labels[slot], prompt)
            out["prompt"] = prompt
            out["names"] = None
    else:
        content = content_for([item.get("suite_version")])
        cell, pressure, pslot = parse_item_id(item["item_id"], content)
        to = int(variant[-1])
        d = render_item(content, Cell(cell.scenario, cell.variant, to, cell.contrast, cell.minority_slot),
                        pressure, pslot)
        out.update(prompt=d["prompt"], names=None, degree=item["degree"])
    out["source_item_id"] = item["item_id"]
    out["item_id"] = _suffix(item["item_id"], variant)
    out["baseline_id"] = _suffix(item.get("baseline_id"), variant)
    out["ablation"] = variant
    return out


def ablate_items(items: pd.DataFrame, variant: str, labels: dict[str, str] = NEUTRAL_LABELS) -> pd.DataFrame:
    """:func:`ablate_item` over a table of suite items (the response columns are dropped)."""

    keep = [c for c in items.columns if c in set(REQUIRED) | {"prompt", "names", "candidate_noun", "suite_version",
                                                                "domain", "variant", "pressure_family_code",
                                                                "pressure_targets", "amb_minority_strong_on",
                                                                "minority_group", "majority_group"}]
    rows = [ablate_item(r, variant, labels) for r in items[keep].to_dict("records")]
    return pd.DataFrame(rows)


def prompt_ceiling(prompts, y: np.ndarray) -> float:
    """The best accuracy any function of the prompt can reach on labels ``y``: rows with the same prompt
    must get the same prediction, so each distinct prompt scores its majority label's count."""
    t = pd.DataFrame({"p": list(prompts), "y": np.asarray(y).astype(int)})
    counts = t.groupby(["p", "y"]).size().unstack(fill_value=0)
    return float(counts.max(axis=1).sum() / len(t))


def ablation_table(sites: list[str], original: list[np.ndarray], ablated: list[np.ndarray], y_o: np.ndarray,
                   y_a: np.ndarray, groups: np.ndarray, opts=None, resamples: int = RESAMPLES,
                   design_o: np.ndarray | None = None, design_a: np.ndarray | None = None,
                   ceilings: dict[str, float] | None = None, extra: dict | None = None) -> pd.DataFrame:
    """The name ablation's tidy table from paired rows: ``original[i]`` and ``ablated[i]`` are site ``sites[i]``'s
    features of the same items (row j of each is one item) with and without names, ``y_o`` / ``y_a`` the labels
    of the original and the ablated run, ``groups`` the scenarios.

    Per site: ``original_accuracy`` and ``retrained_accuracy`` (out-of-fold, nested grouped CV on each run's
    features), ``transfer_accuracy`` (each outer fold's original probe applied to *its own held-out rows'*
    ablated features, :meth:`probes.logistic.FoldResult.predict_out_of_fold`: out of fold like the original
    accuracy, so the drop is not flattered by a probe that has seen the rows it scores) and the paired
    ``drop_transfer`` / ``drop_retrained`` (:func:`probes.scores.paired_drop_ci`); with ``design_o`` /
    ``design_a`` the evidence baseline on each run's labels; ``ceilings`` as fixed rows. Every row has the
    ``interval`` it was given and the ``transfer`` protocol (``out-of-fold``)."""

    opts = opts or ProbeOptions()
    fo = fit_sites(original, y_o, groups, opts)
    fa = fit_sites(ablated, y_a, groups, opts)
    fixed = {}
    for name, design, yy in (("evidence_original", design_o, y_o), ("evidence_ablated", design_a, y_a)):
        if design is None:
            continue
        hit = (np.full(len(yy), np.nan) if len(np.unique(yy)) < 2
               else (fit_sites([design], yy, groups, opts)[0].prob >= 0.5) == (yy == 1))
        fixed[name] = accuracy_ci(hit, groups, resamples, opts.seed)
    base = {**(extra or {}), "engine": resolved_solver(opts, max(widths(original))),
            "transfer": "out-of-fold"}
    k = len(np.unique(groups))
    rows = []
    for site, ro, ra, xa in zip(sites, fo, fa, ablated):
        hit_o = (ro.prob >= 0.5) == (y_o == 1)
        # Transfer is out of fold, like the original accuracy it is compared with: each outer fold's probe scores
        # the ablated activations of the rows it held out. A probe fitted on all rows and applied to the same
        # items' ablated activations has seen those items: with many more dimensions than items (3,840-d
        # activations, 1-2k items) it memorises each item's own activation noise, which the ablation leaves in
        # place, and the transfer drop comes out too small. On the planted name direction of tests/test_probes.py
        # (300 items, 1,500 dimensions, original accuracy 90.3%, nothing left to read after ablation) the all-rows
        # probe scored 99.3% on the ablated activations, a drop of -9.0 pp; out of fold, 52.7% and +37.7 pp
        # [+32.1, +43.3] (planted: +40.3).
        hit_t = (ro.predict_out_of_fold(xa) >= 0.5) == (y_a == 1)
        hit_r = (ra.prob >= 0.5) == (y_a == 1)
        ests = [("original_accuracy", accuracy_ci(hit_o, groups, resamples, opts.seed), POINT_INTERVAL),
                ("transfer_accuracy", accuracy_ci(hit_t, groups, resamples, opts.seed), POINT_INTERVAL),
                ("retrained_accuracy", accuracy_ci(hit_r, groups, resamples, opts.seed), POINT_INTERVAL),
                ("drop_transfer", paired_drop_ci(hit_o, hit_t, groups, resamples, opts.seed), PAIRED_INTERVAL),
                ("drop_retrained", paired_drop_ci(hit_o, hit_r, groups, resamples, opts.seed), PAIRED_INTERVAL)]
        ests += [(metric, est, POINT_INTERVAL) for metric, est in fixed.items()]
        for metric, est, how in ests:
            rows.append({"site": site, "layer": site_layer(site), "metric": metric,
                         **est.as_dict("value", "ci_low", "ci_high", "n", "clusters"), "interval": how, **base})
        for metric, v in (ceilings or {}).items():
            rows.append({"site": site, "layer": site_layer(site), "metric": metric, "value": v, "ci_low": np.nan,
                         "ci_high": np.nan, "n": len(y_o), "clusters": k, "interval": "none", **base})
    return pd.DataFrame(rows)


def name_ablation(run_dir: str | Path, out_dir: str | Path, variant: str = "label", label: str = "favours_minority",
                  degree: int | None = 1, sites: list[str] | None = None, opts=None, resamples: int = RESAMPLES,
                  batch_size: int = 32, progress: bool = True, lm=None,
                  minority_slot: str | None = None) -> pd.DataFrame:
    """Re-decide and re-cache a run's items without names; compare probes. Returns a tidy table.

    The ablated items (:func:`ablate_items`) are re-decided and re-cached with the run's model; then (a) the
    probes fitted on the original activations are applied to the ablated ones and (b) new probes are fitted on
    the ablated ones, and the drop in accuracy against the original probes is reported with paired
    jackknife-t CIs over scenarios (:data:`probes.scores.PAIRED_INTERVAL`).

    Rows (:func:`ablation_table`): for each site, ``original_accuracy`` (out-of-fold, original
    activations), ``transfer_accuracy`` (each outer fold's original probe on its own held-out
    rows' ablated activations, against the ablated run's own labels), ``retrained_accuracy``
    (out-of-fold on ablated activations), and ``drop_transfer`` / ``drop_retrained`` (original
    minus each, jackknife-t over scenarios), on the items answered in both runs; beside them
    ``evidence_original`` / ``evidence_ablated`` (the evidence baseline, design features only,
    same folds, on the original and the ablated labels) and ``ceiling_original`` /
    ``ceiling_ablated`` (:func:`prompt_ceiling`: 0.5 means no probe on those prompts can do
    better, so the drop is fixed by construction). ``minority_slot``: keep only items with the
    minority-coded candidate in that slot (one identity arrangement, so ablated prompts differ).
    ``lm``: the run's model when already loaded (else it is loaded from the run's manifest).

    What it can and cannot show. Removing identity makes the two identity arrangements of an item (the
    minority-coded candidate in slot A or in slot B, with the criterion values swapped with it) the *same
    prompt*, and a side label (``favours_minority``, ``amb_side``) flips between them: no probe on the ablated
    activations can beat 50% on such pairs. ``ceiling_ablated`` (:func:`prompt_ceiling`) is the best accuracy
    any function of the ablated prompt can reach against the ablated labels; when it is 0.5 the retrained
    probe's drop is fixed by construction and says nothing. Keep one arrangement (``minority_slot="A"``:
    identity is then tied to the slot) and the ablated prompts still differ, so transfer and retraining measure
    something: whether the named probe's direction survives without names (transfer), and whether the side
    chosen without names is still readable (retrained), each beside the evidence baseline (design features
    only) on the same rows. What it cannot show: that a probe "uses the name"; a drop can come from the model
    answering differently without names (the labels change: ``label_changed_share`` in the manifest) as well
    as from the representation."""


    opts = opts or ProbeOptions()
    source, out = RunDir(run_dir), RunDir(out_dir)
    responses = source.read_responses()
    filt = {"degree": degree} if degree is not None else {}
    if minority_slot is not None:  # a pressured item's baseline has its arrangement: labels stay defined
        responses = responses[responses["minority_slot"] == minority_slot]
    orig = build_dataset(responses, ActivationCache(source.activations), label, sites, filt, opts)
    items = ablate_items(orig.meta, variant)
    spec = source.model_spec()
    lm = lm if lm is not None else load_model(spec)
    out.path.mkdir(parents=True, exist_ok=True)
    mode = source.config.get("mode", "answer")
    abl_resp = decide(items, lm, DecideOptions(mode=mode, batch_size=batch_size, progress=progress,
                                               progress_label=f"ablation {variant}",
                                               chat_template=spec.chat_template), out_dir=out.path)
    out.write_responses(abl_resp)
    cache = cache_activations(items, lm, CacheOptions(sites=tuple(orig.sites), batch_size=batch_size,
                                                      dtype="float32", progress=progress, progress_label=f"ablation {variant}",
                                                      chat_template=spec.chat_template), out.activations)
    abl = build_dataset(abl_resp, cache, label, orig.sites, opts=opts)
    # pair rows answered in both runs
    src = dict(zip(abl.meta["item_id"], abl.meta["source_item_id"]))
    abl_pos = {src[i]: j for j, i in enumerate(abl.meta["item_id"])}
    pairs = [(i, abl_pos[s]) for i, s in enumerate(orig.meta["item_id"]) if s in abl_pos]
    if len(pairs) < 10:
        raise ValueError(f"only {len(pairs)} items answered in both the original and the ablated run")
    oi, ai = (np.array(v) for v in zip(*pairs))
    y_o, y_a, groups = orig.y[oi], abl.y[ai], orig.groups[oi]
    base = {"label": label, "variant": variant, "degree": degree, "minority_slot": minority_slot or "both"}
    ceilings = {"ceiling_original": prompt_ceiling(orig.meta["prompt"].to_numpy(object)[oi], y_o),
                "ceiling_ablated": prompt_ceiling(abl.meta["prompt"].to_numpy(object)[ai], y_a)}
    table = ablation_table(orig.sites, site_sequence(orig.features, orig.sites, lambda X: X[oi]),
                           site_sequence(abl.features, orig.sites, lambda X: X[ai]), y_o, y_a, groups, opts, resamples,
                           orig.design[oi], abl.design[ai], ceilings, base)
    write_table_atomic(out.ablation_table, table)
    write_table_atomic(out.ablation_csv, table)
    changed = float(np.mean(make_labels(abl.meta.iloc[ai], label)[0] != orig.y[oi]))
    out.write_manifest({"kind": "name_ablation", "source_run": str(source.path), "variant": variant,
                        "label": label, "degree": degree, "minority_slot": minority_slot, "paired_items": len(pairs),
                        "label_changed_share": changed, "model": lm.describe(), "transfer": "out-of-fold",
                        "intervals": {"accuracies": POINT_INTERVAL, "drops": PAIRED_INTERVAL}})
    return table

