"""Figures over run and sweep directories: a figure is a :class:`Figure` record in :data:`FIGURES` (its name and
file stem, the tables it reads, its function from those tables to files, its caption); :func:`run_figures`
computes each run's tidy metrics table once (:func:`evenhand.reporting.figures.metrics_table`), walks the registry (each
figure draws what the run's files support: [] otherwise) and writes the LaTeX headline table last.

The built-in figures, in order: the progression, the FragGap heatmap and flips by pressure family
(:mod:`evenhand.reporting.figures`); probe accuracy by layer with a matching name ablation; direct logit attribution
(:mod:`probes.attribution`); for reasoning-mode runs the explanation-language words (:mod:`probes.language`) and
measures (:mod:`probes.explanations`). :func:`register_figure` adds one (a ``--plugin`` module may call it).
"""
from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pandas as pd

from evenhand.inference.stats import RESAMPLES
from evenhand.reporting.figures import (MIN_CELL_N, family_figure, heatmap_figure, latex_table, metrics_table,
                                        probe_figure, progression_figure)
from evenhand.reporting.labels import minus
from evenhand.support.registry import Registry
from evenhand.runs.rundir import RunDir, write_table_atomic


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


@dataclass(frozen=True)
class FigureInput:
    """What a figure is drawn from: the runs' tidy metrics table (one ``label`` per run), the first run's
    directory and model, and the file formats to write."""
    metrics: pd.DataFrame
    run: RunDir
    model: str | None
    formats: Sequence[str]

    @cached_property
    def responses(self) -> pd.DataFrame:
        """The first run's responses table (read once, shared by the figures that read it)."""
        return self.run.read_responses()


@dataclass(frozen=True)
class Figure:
    """One figure: ``name`` (its registry name and file stem; a figure of several files names them
    ``<name>_<part>``), ``reads`` (the tables it reads: ``metrics``, ``responses`` or a run-directory path),
    ``draw`` (a pure function of those tables: ``draw(FigureInput, stem)`` writes the files at ``stem`` and
    returns their paths, [] when the run has none of its tables) and ``caption`` (the report's)."""
    name: str
    reads: tuple[str, ...]
    draw: Callable[[FigureInput, Path], list[Path]]
    caption: str = ""


FIGURES: Registry[Figure] = Registry("figure")
"""The registered figures, in drawing order (:class:`evenhand.support.registry.Registry`)."""


def register_figure(figure: Figure, replace: bool = False) -> Figure:
    """Add ``figure``: from then on :func:`run_figures` (`evenhand figures`) draws it after the ones before it."""
    if not isinstance(figure, Figure):
        raise TypeError(f"{figure!r} is not a Figure (name, reads, draw, caption: experiments.figures.Figure)")
    if not figure.reads:
        raise ValueError(f"figure {figure.name!r}: reads must name the table(s) it is drawn from")
    return FIGURES.add(figure.name, figure, replace=replace)


def _progression(f: FigureInput, stem: Path) -> list[Path]:
    return progression_figure(f.metrics, stem, f.formats)


def _heatmap(f: FigureInput, stem: Path) -> list[Path]:
    if not (f.metrics["breakdown"] == "contrast_category").any():
        return []
    return heatmap_figure(f.metrics, stem, formats=f.formats)


def _families(f: FigureInput, stem: Path) -> list[Path]:
    if not (f.metrics["breakdown"] == "pressure_family").any():
        return []
    return family_figure(f.metrics, stem, formats=f.formats)


def _probes(f: FigureInput, stem: Path) -> list[Path]:
    paths: list[Path] = []
    for p in f.run.probe_dirs():
        probes = pd.read_parquet(p.probes_table)
        ablations = [t for t in (pd.read_parquet(a.ablation_table) for a in f.run.ablation_dirs())
                     if len(t) and t["label"].iloc[0] == p.path.name and _same_rows(probes, t)]
        paths += probe_figure(probes, stem.with_name(f"{stem.name}_{p.path.name}"), f.formats, ablations,
                              model=f.model)
    return paths


def _attribution(f: FigureInput, stem: Path) -> list[Path]:
    attribution = f.run.attribution_dir.attribution_table
    if not attribution.exists():
        return []
    from probes.attribution import attribution_figure
    return attribution_figure(pd.read_parquet(attribution), stem, "degree", f.formats)


def _reasoning(f: FigureInput) -> bool:
    return "mode" in f.responses.columns and bool((f.responses["mode"] == "reasoning").any())


def _explanation_words(f: FigureInput, stem: Path) -> list[Path]:
    if not _reasoning(f):
        return []
    from probes.language import explanation_words, words_figure
    paths: list[Path] = []
    for tag, only in (("all", False), ("correct_gt", True)):
        try:
            words = explanation_words(f.responses[f.responses["mode"] == "reasoning"], correct_gt_only=only)
        except ValueError:
            continue
        write_table_atomic(stem.with_name(f"{stem.name}_{tag}.csv"), words)
        paths += words_figure(words, stem.with_name(f"{stem.name}_{tag}"), formats=f.formats)
    return paths


def _explanation_measures(f: FigureInput, stem: Path) -> list[Path]:
    if not _reasoning(f):
        return []
    try:
        from probes.explanations import explanation_measures, measures_figure
        measures = explanation_measures(f.responses)
    except ImportError:  # the optional vaderSentiment (extra "audit") is not installed
        return []
    if not (measures["k"] > 0).any():
        return []
    write_table_atomic(stem.with_name(f"{stem.name}.csv"), measures)
    return measures_figure(measures, stem, formats=f.formats)


for _figure in (
        Figure("progression", ("metrics",), _progression,
               "Accuracy and the four asymmetry metrics from D0 (no identity cue) to D3 (explicit label), "
               "with 95% CIs over scenarios and the items behind each point (n). AccGap, FragGap and TieShift "
               "are in percentage points on one shared scale; 0 pp and a TieLean of 50% are even-handed, and "
               "values above them lean toward the minority-coded candidate."),
        Figure("fraggap_heatmap", ("metrics",), _heatmap,
               "FragGap (pp; positive = toward the minority-coded candidate) by contrast category and "
               "degree: each cell gives the value, its 95% CI and n. Only cells whose CI excludes 0 are "
               "coloured; light grey cells have a CI that includes 0; grey, hatched cells rest on fewer than "
               f"{MIN_CELL_N} items or on one scenario (no interval). Neither grey kind is a finding."),
        Figure("flips_by_family", ("metrics",), _families,
               "Flip rates at the highest degree under pro-minority and pro-majority pressure, by pressure "
               "family, with 95% CIs and n per family; open circles rest on too few items to read."),
        Figure("probe", ("probes/*/probes.parquet", "ablation/*/ablation.parquet"), _probes,
               "Linear-probe accuracy by layer (95% CIs over scenarios) beside the evidence baseline (a probe on "
               "the item's design features alone), the control task (a random label per input type), the "
               "majority class and, where run, the name ablation (a probe retrained on the ablated activations, "
               "and the original probe applied to them); n items and k scenarios per line; layer -1 is the "
               "embedding."),
        Figure("attribution", ("attribution/attribution.parquet",), _attribution,
               "Direct logit attribution by layer and degree: what each attention and MLP block adds to the "
               "logit difference toward the minority-coded candidate (one shared scale, 95% CIs)."),
        Figure("explanation_words", ("responses",), _explanation_words,
               "The words that most distinguish explanations of minority-favouring from "
               "majority-favouring choices (weighted log-odds with an informative prior; |z| > 1.96 dotted)."),
        Figure("explanation_measures", ("responses",), _explanation_measures,
               "How explanations of correct choices credit the candidate: hedges, boosters and identity "
               "terms per 100 words, net positive sentences, and the shares of the item's criteria "
               "and of the chosen candidate's values cited, minority- minus majority-favouring, with "
               "95% CIs (jackknife-t over scenarios); docs/EXPLANATIONS.md."),
):
    register_figure(_figure)


def caption(stem: str) -> str:
    """The caption of a figure by its file stem (``probe_favours_minority`` -> the probe caption); '' if none. The
    report page prints each figure's caption under it."""
    for key in sorted(FIGURES.names(), key=len, reverse=True):
        if stem == key or stem.startswith(key + "_"):
            return minus(FIGURES.get(key).caption)
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
    figures are no one run's) and labels of their own; each run's series is offset so none hides another.
    ``evenhand figures RUN_DIR [RUN_DIR ...] [--format pdf,svg,png]`` writes them all."""
    if len(run_dirs) == 1:
        cells = sweep_cells_dirs(run_dirs[0])
        if cells is not None:
            if not cells:
                raise FileNotFoundError(f"{run_dirs[0]}: no finished cell to draw")
            return run_figures(cells, Path(out) if out else RunDir(run_dirs[0]).figures, formats, resamples)
    from evenhand.reporting.multirun import split_label
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
    inputs = FigureInput(table, first, _run_model(first), formats)
    paths = []
    for figure in FIGURES.values():
        paths += figure.draw(inputs, out / figure.name)
    tex = out / "headline.tex"
    tex.write_text(latex_table(table))
    paths.append(tex)
    return paths
