"""Layer sweeps: one probe per site, scored with CIs, beside the evidence baseline and a control task.

:func:`probe_sweep` returns a tidy table, one row per (site, metric) (its docstring lists the metrics);
:func:`write_sweep` saves it with a manifest."""
from __future__ import annotations

import json
import re
import sys
import time
import warnings
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from evenhand.inference.stats import RESAMPLES
from .dataset import ProbeDataset
from .features import site_sequence, widths
from .logistic import FoldResult, ProbeOptions, fit_sites
from .scores import PAIRED_INTERVAL, POINT_INTERVAL, accuracy_ci, auroc_ci, majority_baseline, paired_drop_ci
from .design import control_labels
from .design import TYPES_SEEN_MIN, ControlTypesWarning, types_seen
from .logistic import grouped_folds
from .text import fit_text
from .logistic import resolved_solver
from evenhand.runs.rundir import RunDir, write_table_atomic

HEADLINE = ("accuracy", "evidence_accuracy", "gain", "control_accuracy", "selectivity", "majority_baseline")
"""The metrics every printed probe line shows, in this order."""


def site_layer(site: str) -> int:
    """Layer index of a site name (``embed`` is -1, ``ln_final`` a large number)."""
    if site.startswith("embed") or site == "hook_embed":
        return -1
    m = re.match(r"blocks\.(\d+)\.", site)
    return int(m.group(1)) if m else 10**6


def _rows(site: str, metric: str, est, extra: dict, interval: str = POINT_INTERVAL) -> dict:
    return {"site": site, "layer": site_layer(site), "metric": metric, "value": est.value, "ci_low": est.ci_low,
            "ci_high": est.ci_high, "n": est.n, "clusters": est.clusters, "interval": interval, **extra}


def _hits(res: FoldResult, y: np.ndarray) -> np.ndarray:
    return (res.prob >= 0.5) == (y == 1)


def _fixed(site: str, metric: str, value: float, n: int, k: int, extra: dict) -> dict:
    return {"site": site, "layer": site_layer(site), "metric": metric, "value": value, "ci_low": np.nan,
            "ci_high": np.nan, "n": n, "clusters": k, "interval": "none", **extra}


def score_predictions(site: str, res: FoldResult, y: np.ndarray, groups: np.ndarray, resamples: int, seed: int,
                      control: FoldResult | None = None, extra: dict | None = None,
                      evidence: FoldResult | None = None, combined: FoldResult | None = None,
                      types_seen: float | None = None) -> list[dict]:
    """Tidy rows for one site's out-of-fold predictions, with its control task (``control``, labels in
    ``control.labels``; ``types_seen``: the share of rows whose input type the training rows hold) and the
    evidence baseline and design + activations probe when given."""
    extra = extra or {}
    hit = _hits(res, y)
    n, k = len(y), len(np.unique(groups))
    rows = [_rows(site, "accuracy", accuracy_ci(hit, groups, resamples, seed), extra),
            _rows(site, "auroc", auroc_ci(res.prob, y, groups, resamples, seed), extra),
            _fixed(site, "majority_baseline", majority_baseline(y), n, k, extra)]
    if evidence is not None and combined is not None:
        e_hit, c_hit = _hits(evidence, y), _hits(combined, y)
        rows += [_rows(site, "evidence_accuracy", accuracy_ci(e_hit, groups, resamples, seed), extra),
                 _rows(site, "combined_accuracy", accuracy_ci(c_hit, groups, resamples, seed), extra),
                 _rows(site, "gain", paired_drop_ci(c_hit, e_hit, groups, resamples, seed), extra, PAIRED_INTERVAL)]
    if control is not None:
        y_c = control.labels
        k_hit = _hits(control, y_c)
        rows += [_rows(site, "control_accuracy", accuracy_ci(k_hit, groups, resamples, seed), extra),
                 _fixed(site, "control_majority", majority_baseline(y_c), n, k, extra)]
        if types_seen is not None:
            rows.append(_fixed(site, "control_types_seen", types_seen, n, k, extra))
        rows.append(_rows(site, "selectivity", paired_drop_ci(hit, k_hit, groups, resamples, seed), extra,
                          PAIRED_INTERVAL))
    return rows


def control_task(ds: ProbeDataset, seed: int) -> np.ndarray:
    """The control task's labels for ``ds``: one random label per input type (:func:`probes.design.control_labels`)."""
    if ds.types is None:
        raise ValueError("the control task needs the dataset's input types (ProbeDataset.types)")
    return control_labels(ds.types, seed)


def control_types_seen(ds: ProbeDataset, opts: ProbeOptions, warn: bool = True) -> float:
    """The share of ``ds``'s rows whose input type occurs in the training rows of their outer fold (the
    probes' grouped folds, :func:`probes.design.types_seen`); warns (:class:`probes.design.ControlTypesWarning`)
    below :data:`probes.design.TYPES_SEEN_MIN`."""
    if ds.types is None:
        raise ValueError("the control task needs the dataset's input types (ProbeDataset.types)")
    share = types_seen(ds.types, grouped_folds(ds.groups, opts.folds, opts.seed))
    if warn and share < TYPES_SEEN_MIN:
        warnings.warn(f"control task: only {share:.1%} of rows have an input type seen in their training folds "
                      f"(below {TYPES_SEEN_MIN:.0%}; {len(set(ds.types))} types for {len(ds.types)} rows): the "
                      "control cannot be memorised on the others, so it sits near chance whatever the probe "
                      "and selectivity overstates", ControlTypesWarning, stacklevel=3)
    return share


def condition_text(filters: dict) -> str:
    """A dataset's filters in words: ``degree=3, pressured=False`` (``all`` without filters)."""
    if not filters:
        return "all"
    return ", ".join(f"{k}={'+'.join(map(str, v)) if isinstance(v, (list, tuple)) else v}"
                     for k, v in sorted(filters.items()))


def text_rows(ds: ProbeDataset, opts: ProbeOptions, resamples: int) -> list[dict]:
    """The text baseline's rows: the label predicted from each row's written reasoning (same folds)."""
    meta = ds.meta
    if "mode" in meta.columns and not (meta["mode"] == "reasoning").all():
        raise ValueError("the text baseline needs reasoning-mode responses (the run's mode is "
                         f"{sorted(set(meta['mode']))[0]!r})")
    if "text" not in meta.columns:
        raise ValueError("the text baseline needs the responses' text column")
    res = fit_text(meta["text"].tolist(), ds.y, ds.groups, opts)
    hit = (res.prob >= 0.5) == (ds.y == 1)
    extra = {"label": ds.label, "engine": "sklearn", "filters": json.dumps(ds.filters, sort_keys=True, default=str),
             "chosen_C": float(pd.Series(res.chosen_C).mode().iloc[0]), "variant": "text",
             "condition": condition_text(ds.filters)}
    rows = [_rows("text", "accuracy", accuracy_ci(hit, ds.groups, resamples, opts.seed), extra),
            _rows("text", "auroc", auroc_ci(res.prob, ds.y, ds.groups, resamples, opts.seed), extra)]
    for r in rows:
        r["layer"] = np.nan
    return rows


@contextmanager
def collect_unconverged(tally: dict):
    """Within the block, the solvers' non-convergence warnings (:class:`probes.solver.ProbeConvergenceWarning`,
    scikit-learn's ``ConvergenceWarning``) are counted into ``tally`` (``fits``: fits stopped at the
    iteration limit, ``of``: the torch solver's problems, ``sklearn``: scikit-learn fits among them) instead
    of shown; every other warning passes on."""
    from sklearn.exceptions import ConvergenceWarning

    from .solver import ProbeConvergenceWarning
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ProbeConvergenceWarning)
        warnings.simplefilter("always", ConvergenceWarning)
        yield tally
    for w in caught:
        if issubclass(w.category, ProbeConvergenceWarning):
            tally["fits"] = tally.get("fits", 0) + w.message.problems
            tally["of"] = tally.get("of", 0) + w.message.total
        elif issubclass(w.category, ConvergenceWarning):
            tally["fits"] = tally.get("fits", 0) + 1
            tally["sklearn"] = tally.get("sklearn", 0) + 1
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno, w.file, w.line)  # passed its filter


def unconverged_text(label: str, unconverged: dict) -> str | None:
    """The one plain-words note on a sweep's fits that stopped at the iteration limit (None when none did):
    what it means and what to do."""
    n = unconverged.get("fits", 0)
    if not n:
        return None
    of = f" of {unconverged['of']:,}" if unconverged.get("of") and not unconverged.get("sklearn") else ""
    return (f"note: probe sweep {label}: {n:,}{of} probe fit(s) stopped at the iteration limit "
            f"(max_iter={unconverged['max_iter']}) before converging. Their weights are near, not at, the best "
            f"fit, so those probes' scores may differ slightly from a converged fit (most often at the largest C "
            f"on nearly separable features). Usually nothing to do; where a site's number matters, refit with "
            f"--device cpu (float64) or --solver sklearn and compare, or raise ProbeOptions.max_iter. The count "
            f"is in the sweep's manifest.json ('unconverged').")


def probe_sweep(ds: ProbeDataset, opts: ProbeOptions = ProbeOptions(), control: bool = True, resamples: int = RESAMPLES,
                keep_full: bool = False, text: bool = False, progress: bool = False
                ) -> tuple[pd.DataFrame, dict[str, FoldResult]]:
    """Fit and score a probe per site of ``ds``, the evidence baseline and design + activations probes
    (when ``ds.design`` is set), the control task (``control``) and the text baseline (``text``).
    Returns (tidy table, fold results by site). ``progress``: a bar over the fits and the sites scored.
    The sites are read one at a time as each fit reaches them (:func:`probes.features.site_sequence`; the
    design + activations features are stacked per site as read), so host memory does not grow with the
    number of sites.
    A sweep reads each site three times (probes, design + activations, control task) and holds one site's
    matrix at a time (tests/test_probe_streaming.py); the results are those of a dataset holding every site,
    value for value.
    Fits that stop at the iteration limit are counted (``table.attrs["unconverged"]``, recorded by
    :func:`write_sweep`) and reported once on stderr in words (:func:`unconverged_text`): what it means (those
    weights are near, not at, the optimum) and what to do (usually nothing; refit with ``--device cpu`` or
    ``--solver sklearn`` where a site's number matters, or raise ``ProbeOptions.max_iter``), instead of one
    ``RuntimeWarning`` per fit (:func:`collect_unconverged` counts them; :func:`probes.solver.torch_solve` called
    directly still warns with :class:`probes.solver.ProbeConvergenceWarning`).

    The table, one row per (site, metric):

    ===================  ==========================================================
    metric               meaning
    ===================  ==========================================================
    accuracy             out-of-fold accuracy of the activation probe (folds grouped by scenario)
    auroc                its out-of-fold AUROC
    majority_baseline    accuracy of always answering the more frequent class
    evidence_accuracy    the evidence baseline: a probe on the design features alone
                         (:func:`probes.design.design_features`), same folds and C path
    combined_accuracy    a probe on design features + the site's activations, same folds
    gain                 combined_accuracy - evidence_accuracy (paired, jackknife-t): the
                         headline, what the activations add to what the design predicts
    control_accuracy     the same probe on Hewitt & Liang's control task: a random label
                         per input type (:func:`probes.design.input_types`)
    control_majority     the control labels' majority class
    control_types_seen   share of rows whose input type occurs in the training rows of
                         their outer fold (:func:`probes.design.types_seen`); below
                         :data:`probes.design.TYPES_SEEN_MIN` (0.9) the sweep warns
                         (:class:`probes.design.ControlTypesWarning`): the control cannot
                         be memorised on the other rows
    selectivity          accuracy - control_accuracy (paired, jackknife-t)
    ===================  ==========================================================

    with ``value, ci_low, ci_high`` (95% over scenarios), ``interval`` (how the CI was made: ``percentile``, the
    cluster bootstrap, for accuracies and AUROC; ``jackknife-t``, :data:`probes.scores.PAIRED_INTERVAL`, for the
    paired differences gain and selectivity, chosen by null coverage: :mod:`probes.coverage`; ``none`` for fixed
    values), ``n`` rows and ``clusters`` scenarios, the ``label``, the ``condition`` (the dataset's filters in
    words, ``all`` without) and the ``variant``: ``activations`` for the probes, ``text`` for the text baseline
    (``text=True``: :func:`probes.text.fit_text` on the written reasoning with the same folds, site ``text``, rows
    ``accuracy`` and ``auroc``). The evidence and combined rows need the dataset's design features (always set by
    :func:`probes.dataset.build_dataset`); the control task needs its input types."""
    from tqdm.auto import tqdm

    t0 = time.perf_counter()
    Xs = site_sequence(ds.features, ds.sites)
    has_design = ds.design is not None and ds.design.shape[1] > 0
    bar = tqdm(total=1 + 2 * has_design + bool(control) + len(Xs) + bool(text), unit="step",
               disable=not progress, desc=f"probe[{ds.label}]", dynamic_ncols=True)
    bar.set_postfix_str(f"fitting {len(Xs)} sites, {len(ds.y):,} rows")
    unconverged = {"fits": 0, "max_iter": opts.max_iter}
    with collect_unconverged(unconverged):
        results = fit_sites(Xs, ds.y, ds.groups, opts, keep_full=keep_full)
    bar.update()
    evidence, combined = None, [None] * len(Xs)
    if has_design:
        bar.set_postfix_str("evidence baseline")
        with collect_unconverged(unconverged):
            evidence = fit_sites([ds.design], ds.y, ds.groups, opts)[0]
        bar.update()
        bar.set_postfix_str("design + activations")
        with collect_unconverged(unconverged):
            combined = fit_sites(site_sequence(ds.features, ds.sites, lambda X: np.hstack([ds.design, X]),
                                               ds.design.shape[1]), ds.y, ds.groups, opts)
        bar.update()
    controls: list[FoldResult | None] = [None] * len(Xs)
    seen = None
    if control:
        bar.set_postfix_str("control task")
        y_c = control_task(ds, opts.seed)
        seen = control_types_seen(ds, opts)
        if len(np.unique(y_c)) > 1:
            with collect_unconverged(unconverged):
                controls = fit_sites(Xs, y_c, ds.groups, opts)
            for c in controls:
                c.labels = y_c
        bar.update()
    bar.set_postfix_str("scoring sites")
    extra = {"label": ds.label, "engine": resolved_solver(opts, max(widths(Xs))),
             "filters": json.dumps(ds.filters, sort_keys=True, default=str),
             "variant": "activations", "condition": condition_text(ds.filters)}
    rows = []
    for site, res, ctl, comb in zip(ds.sites, results, controls, combined):
        rows += score_predictions(site, res, ds.y, ds.groups, resamples, opts.seed, ctl,
                                  {**extra, "chosen_C": float(pd.Series(res.chosen_C).mode().iloc[0])},
                                  evidence, comb, seen if ctl is not None else None)
        bar.update()
    if text:
        bar.set_postfix_str("text baseline")
        with collect_unconverged(unconverged):
            rows += text_rows(ds, opts, resamples)
        bar.update()
    bar.close()
    note = unconverged_text(ds.label, unconverged)
    if note:
        print(note, file=sys.stderr, flush=True)
    table = pd.DataFrame(rows)
    table.attrs["seconds"] = round(time.perf_counter() - t0, 3)
    table.attrs["solver"] = results[0].solver if results else None
    table.attrs["control_types_seen"] = seen
    table.attrs["unconverged"] = unconverged
    return table, dict(zip(ds.sites, results))


def best_site(table: pd.DataFrame, metric: str = "accuracy") -> str:
    """The site with the highest ``metric`` (ties: the earliest layer)."""
    t = table[(table["metric"] == metric) & (table["site"] != "text")].sort_values(["value", "layer"], ascending=[False, True])
    return str(t.iloc[0]["site"])


def dataset_digest(ds: ProbeDataset) -> str:
    """A sha256 of everything a probe sweep reads from its dataset (features per site, labels, groups, design
    features, input types): the same digest means the same inputs, so a saved sweep of them can be reused."""
    import hashlib
    h = hashlib.sha256()
    for site in ds.sites:
        h.update(site.encode())
        h.update(np.ascontiguousarray(ds.features[site]).tobytes())
    for a in (ds.y, ds.groups, ds.design, ds.types):
        if a is not None:
            h.update(np.asarray(a).astype(str).tobytes() if np.asarray(a).dtype == object else
                     np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def saved_sweep(out_dir: str | Path, ds: ProbeDataset, opts: ProbeOptions, resamples: int) -> pd.DataFrame | None:
    """The sweep :func:`write_sweep` saved in ``out_dir`` when it was made from the same inputs
    (:func:`dataset_digest`), options and resamples; None otherwise (then it is fitted again). What lets a
    resumed run skip a probe sweep instead of re-fitting it."""
    out = RunDir(out_dir)
    if not (out.probes_table.is_file() and out.manifest_path.is_file()):
        return None
    try:
        m = out.manifest()
    except (ValueError, OSError):
        return None
    same = (m.get("dataset_digest") == dataset_digest(ds) and m.get("resamples") == resamples
            and m.get("options") == json.loads(json.dumps(asdict(opts))) and m.get("label") == ds.label)
    return pd.read_parquet(out.probes_table) if same else None


def write_sweep(table: pd.DataFrame, out_dir: str | Path, ds: ProbeDataset, opts: ProbeOptions, **info) -> Path:
    """``out_dir/probes.parquet``, ``probes.csv`` and ``manifest.json`` (atomic writes; the manifest's
    ``unconverged`` counts the fits that stopped at the iteration limit; ``dataset_digest`` what
    :func:`saved_sweep` checks before reusing it).

    The manifest: options, label, filters, sites, timings, ``intervals`` (which interval each kind of row has),
    ``control_types_seen``, and ``solver``: the torch solver's report on the activation probes — compute dtype,
    sites per group, expected peak bytes, Newton steps, contractions, converged — or null for scikit-learn, and
    ``unconverged``: ``{"fits": N, "of": M, "max_iter": K}``, the fits of the whole sweep (probes, evidence and
    combined probes, control task, text baseline) that stopped at the iteration limit — ``of`` counts the torch
    solver's problems, absent when scikit-learn fitted."""

    out = RunDir(out_dir)
    out.path.mkdir(parents=True, exist_ok=True)
    write_table_atomic(out.probes_table, table)
    write_table_atomic(out.probes_csv, table)
    out.write_manifest({
        "kind": "probe_sweep", "label": ds.label, "filters": ds.filters, "sites": ds.sites, "n": len(ds),
        "clusters": int(len(np.unique(ds.groups))), "dropped_unlabelled": ds.dropped, "options": asdict(opts),
        "seconds": table.attrs.get("seconds"), "solver": table.attrs.get("solver"),
        "intervals": {"accuracy, auroc": POINT_INTERVAL, "gain, selectivity": PAIRED_INTERVAL},
        "control_types_seen": table.attrs.get("control_types_seen"),
        "unconverged": table.attrs.get("unconverged"), "dataset_digest": dataset_digest(ds), **info})
    return out.path
