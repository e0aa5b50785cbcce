"""Figures over run and sweep directories: :func:`run_figures` walks one or more finished run
directories (or a sweep directory, standing for its finished cells), computes each run's tidy metrics
table once (:func:`evenhand.figures.metrics_table`) and draws every figure that the run's files
support:

- the progression, the FragGap heatmap, flips by pressure family and the LaTeX table
  (:mod:`evenhand.figures`);
- probe accuracy by layer, with a matching name ablation (``probes/<label>/probes.parquet``,
  ``ablation/*/ablation.parquet``);
- direct logit attribution (``attribution/attribution.parquet``, :mod:`probes.attribution`);
- for reasoning-mode runs, the explanation-language words (:mod:`probes.language`), for all
  choices and for correct choices on GT items, as a table and a figure.

More in docs/dev/studies.md."""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from evenhand.stats import RESAMPLES
from evenhand.figures import (MIN_CELL_N, family_figure, heatmap_figure, latex_table, metrics_table, probe_figure,
                              progression_figure)
from evenhand.labels import minus
from evenhand.runs import RunDir, write_table_atomic


def sweep_cells_dirs(sweep_dir: str | Path) -> list[Path] | None:
    """The finished cells' run directories of a sweep directory (for figures); None when ``sweep_dir``
    is not a sweep directory."""
    run = RunDir(sweep_dir)
    man = run.manifest() if run.exists() else {}
    if (man.get("config") or {}).get("kind") != "sweep":
        return None
    cells = [RunDir(c["output_dir"]) for c in man.get("cells", [])]
    return [c.path for c in cells if c.responses_path.exists()]


def _same_rows(probes: pd.DataFrame, ablation: pd.DataFrame) -> bool:
    """Whether an ablation's probes were fitted on the probe sweep's rows (its filters: the ablated
    degree only), so that the two can share a figure."""
    if "filters" not in probes.columns or "degree" not in ablation.columns:
        return False
    filters = json.loads(probes["filters"].iloc[0] or "{}")
    degree = filters.pop("degree", None)
    degrees = degree if isinstance(degree, list) else [degree]
    return not filters and degrees == [int(ablation["degree"].iloc[0])]


CAPTIONS = {
    "progression": "Accuracy and the four asymmetry metrics from D0 (no identity cue) to D3 (explicit label), "
                   "with 95% CIs over scenarios and the items behind each point (n). AccGap, FragGap and TieShift "
                   "are in percentage points on one shared scale; 0 pp and a TieLean of 50% are even-handed, and "
                   "values above them lean toward the minority-coded candidate.",
    "fraggap_heatmap": "FragGap (pp; positive = toward the minority-coded candidate) by contrast category and "
                       "degree: each cell gives the value, its 95% CI and n. Only cells whose CI excludes 0 are "
                       "coloured; light grey cells have a CI that includes 0; grey, hatched cells rest on fewer than "
                       f"{MIN_CELL_N} items or on one scenario (no interval). Neither grey kind is a finding.",
    "flips_by_family": "Flip rates at the highest degree under pro-minority and pro-majority pressure, by pressure "
                       "family, with 95% CIs and n per family; open circles rest on too few items to read.",
    "probe": "Linear-probe accuracy by layer (95% CIs over scenarios) beside the evidence baseline (a probe on "
             "the item's design features alone), the control task (a random label per input type), the "
             "majority class and, where run, the name ablation (a probe retrained on the ablated activations, "
             "and the original probe applied to them); n items and k scenarios per line; layer -1 is the "
             "embedding.",
    "attribution": "Direct logit attribution by layer and degree: what each attention and MLP block adds to the "
                   "logit difference toward the minority-coded candidate (one shared scale, 95% CIs).",
    "explanation_words": "The words that most distinguish explanations of minority-favouring from "
                         "majority-favouring choices (weighted log-odds with an informative prior; |z| > 1.96 dotted).",
    "explanation_measures": "How explanations of correct choices credit the candidate: hedges, boosters and identity "
                            "terms per 100 words, net positive sentences, and the shares of the item's criteria "
                            "and of the chosen candidate's values cited, minority- minus majority-favouring, with "
                            "95% CIs (jackknife-t over scenarios); docs/EXPLANATIONS.md.",
}
"""A caption for each figure :func:`run_figures` draws, by stem (``probe_*``: ``probe``)."""


def caption(stem: str) -> str:
    """The caption of a figure by its file stem (``probe_favours_minority`` -> the probe caption); '' if none."""
    for key in sorted(CAPTIONS, key=len, reverse=True):
        if stem == key or stem.startswith(key + "_"):
            return minus(CAPTIONS[key])
    return ""


def _run_model(run: RunDir) -> str | None:
    """The model a run's manifest names (its loaded model's name, else its config's), None when it names none."""
    m = run.manifest() if run.exists() else {}
    name = (m.get("model") or {}).get("name") if isinstance(m.get("model"), dict) else None
    cfg = m.get("config") or {}
    spec = cfg.get("model")
    return name or (spec.get("model") if isinstance(spec, dict) else spec) or None


def run_figures(run_dirs: Sequence[str | Path], out: str | Path | None = None,
                formats: Sequence[str] = ("pdf", "svg", "png"), resamples: int = RESAMPLES) -> list[Path]:
    """Write the metrics tables (if missing) and every figure for one or more runs; returns the paths.
    A sweep directory stands for its finished cells (one line each; figures in SWEEP_DIR/figures). A run given as
    ``RUN=label`` is drawn under that label (default: its directory's name); several runs need ``out`` (their
    figures are no one run's) and labels of their own; each run's series is offset so none hides another."""
    if len(run_dirs) == 1:
        cells = sweep_cells_dirs(run_dirs[0])
        if cells is not None:
            if not cells:
                raise FileNotFoundError(f"{run_dirs[0]}: no finished cell to draw")
            return run_figures(cells, Path(out) if out else RunDir(run_dirs[0]).figures, formats, resamples)
    from evenhand.multirun import split_label
    named = [split_label(rd) for rd in run_dirs]  # RUN=label names a run's series
    if len(named) > 1 and out is None:
        raise ValueError(f"{len(named)} runs: name the directory their figures go to with --out (they are no one "
                         f"run's figures)")
    tables = []
    for path, label in named:
        t = metrics_table(path, resamples)
        tables.append(t.assign(label=label) if label else t)
    shared = sorted({lab for lab in pd.Series([t["label"].iloc[0] for t in tables]).loc[lambda x: x.duplicated()]})
    if shared:
        raise ValueError(f"two runs share the label {shared[0]!r} (their directories' names): give each its own "
                         f"with RUN=label")
    table = pd.concat(tables, ignore_index=True)
    first = RunDir(named[0][0])
    out = Path(out) if out else first.figures
    out.mkdir(parents=True, exist_ok=True)
    paths = progression_figure(table, out / "progression", formats)
    if (table["breakdown"] == "contrast_category").any():
        paths += heatmap_figure(table, out / "fraggap_heatmap", formats=formats)
    if (table["breakdown"] == "pressure_family").any():
        paths += family_figure(table, out / "flips_by_family", formats=formats)
    for p in first.probe_dirs():
        probes = pd.read_parquet(p.probes_table)
        ablations = [t for t in (pd.read_parquet(a.ablation_table) for a in first.ablation_dirs())
                     if len(t) and t["label"].iloc[0] == p.path.name and _same_rows(probes, t)]
        paths += probe_figure(probes, out / f"probe_{p.path.name}", formats, ablations, model=_run_model(first))
    attribution = first.attribution_dir.attribution_table
    if attribution.exists():
        from probes.attribution import attribution_figure
        paths += attribution_figure(pd.read_parquet(attribution), out / "attribution", "degree", formats)
    resp = first.read_responses()
    if "mode" in resp.columns and (resp["mode"] == "reasoning").any():
        from probes.language import explanation_words, words_figure
        for tag, only in (("all", False), ("correct_gt", True)):
            try:
                words = explanation_words(resp[resp["mode"] == "reasoning"], correct_gt_only=only)
            except ValueError:
                continue
            write_table_atomic(out / f"explanation_words_{tag}.csv", words)
            paths += words_figure(words, out / f"explanation_words_{tag}", formats=formats)
        try:
            from probes.explanations import explanation_measures, measures_figure
            measures = explanation_measures(resp)
        except ImportError:  # the optional vaderSentiment (extra "audit") is not installed
            measures = None
        if measures is not None and (measures["k"] > 0).any():
            write_table_atomic(out / "explanation_measures.csv", measures)
            paths += measures_figure(measures, out / "explanation_measures", formats=formats)
    tex = out / "headline.tex"
    tex.write_text(latex_table(table))
    paths.append(tex)
    return paths
