"""Linear probes on cached activations: datasets, per-site sweeps with controls, name ablation,
the text baseline, activations described in words (Patchscopes) and direct logit attribution.

A notebook needs::

    ds = probes.build_dataset(responses, cache, label="favours_minority")   # or probes.from_run(run_dir)
    table = probes.probe_sweep(ds, probes.ProbeOptions(folds=5))          # per site: probe, evidence baseline, gain, control task
    probes.best_site(table)

Names load on first use (PEP 562).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from evenhand.support.lazy import lazy_exports

_EXPORTS = {
    # datasets
    "build_dataset": ".dataset", "from_run": ".dataset", "ProbeDataset": ".dataset", "LABELS": ".dataset",
    "FILTERS": ".dataset", "apply_filters": ".dataset", "TARGETS": ".dataset", "residual_target": ".dataset",
    # the design: the evidence baseline's features and the control task's input types
    "design_features": ".design", "input_types": ".design", "control_labels": ".design", "types_seen": ".design",
    "ControlTypesWarning": ".design",
    # the cross-validated probe
    "ProbeOptions": ".logistic", "FoldResult": ".logistic", "fit_sites": ".logistic", "grouped_folds": ".logistic",
    "time_solver": ".logistic",
    # sweeps: evidence baseline, gain, control task
    "probe_sweep": ".sweep", "write_sweep": ".sweep", "best_site": ".sweep", "control_task": ".sweep",
    # scores with CIs over scenarios (cluster bootstrap; jackknife-t for paired differences)
    "accuracy_ci": ".scores", "auroc_ci": ".scores", "paired_drop_ci": ".scores", "majority_baseline": ".scores",
    "PAIRED_INTERVAL": ".scores",
    # controls: name ablation, text baseline
    "name_ablation": ".ablation", "ablate_items": ".ablation", "ablate_item": ".ablation",
    "ablation_table": ".ablation",
    "fit_text": ".text", "strip_answer": ".text",
    # activations described in words (Patchscopes), the label read off the descriptions
    "VerbalizeOptions": ".verbalize", "IDENTITY_PROMPT": ".verbalize", "describe": ".verbalize",
    "patched_logits": ".verbalize", "read_vectors": ".verbalize", "rule_choice": ".verbalize",
    "verbalize_table": ".verbalize", "verbalize_run": ".verbalize",
    # direct logit attribution
    "attribute": ".attribution", "aggregate": ".attribution", "run_attribution": ".attribution",
    "attribution_figure": ".attribution",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .ablation import ablate_item, ablate_items, ablation_table, name_ablation
    from .attribution import aggregate, attribute, attribution_figure, run_attribution
    from .dataset import FILTERS, LABELS, TARGETS, ProbeDataset, apply_filters, build_dataset, from_run, residual_target
    from .design import ControlTypesWarning, control_labels, design_features, input_types, types_seen
    from .logistic import FoldResult, ProbeOptions, fit_sites, grouped_folds, time_solver
    from .scores import PAIRED_INTERVAL, accuracy_ci, auroc_ci, majority_baseline, paired_drop_ci
    from .sweep import best_site, control_task, probe_sweep, write_sweep
    from .text import fit_text, strip_answer
    from .verbalize import (IDENTITY_PROMPT, VerbalizeOptions, describe, patched_logits, read_vectors, rule_choice,
                            verbalize_run, verbalize_table)
