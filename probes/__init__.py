"""Linear probes on cached activations: datasets, per-site sweeps with controls, name ablation,
the text baseline and direct logit attribution.

A notebook needs::

    ds = probes.build_dataset(responses, cache, label="favours_minority")   # or probes.from_run(run_dir)
    table = probes.probe_sweep(ds, probes.ProbeOptions(folds=5))          # one probe per site + shuffled control
    probes.best_site(table)

Names load on first use (PEP 562).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from evenhand.lazy import lazy_exports

_EXPORTS = {
    # datasets
    "build_dataset": ".dataset", "from_run": ".dataset", "ProbeDataset": ".dataset", "LABELS": ".dataset",
    "FILTERS": ".dataset", "apply_filters": ".dataset",
    # the cross-validated probe
    "ProbeOptions": ".logistic", "FoldResult": ".logistic", "fit_sites": ".logistic", "grouped_folds": ".logistic",
    # sweeps and the shuffled-label control
    "probe_sweep": ".sweep", "write_sweep": ".sweep", "best_site": ".sweep", "shuffled": ".sweep",
    # scores with cluster-bootstrap CIs
    "accuracy_ci": ".scores", "auroc_ci": ".scores", "paired_drop_ci": ".scores", "majority_baseline": ".scores",
    # controls: name ablation, text baseline
    "name_ablation": ".ablation", "ablate_items": ".ablation", "ablate_item": ".ablation",
    "fit_text": ".text", "strip_answer": ".text",
    # direct logit attribution
    "attribute": ".attribution", "aggregate": ".attribution", "run_attribution": ".attribution",
    "attribution_figure": ".attribution",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .ablation import ablate_item, ablate_items, name_ablation
    from .attribution import aggregate, attribute, attribution_figure, run_attribution
    from .dataset import FILTERS, LABELS, ProbeDataset, apply_filters, build_dataset, from_run
    from .logistic import FoldResult, ProbeOptions, fit_sites, grouped_folds
    from .scores import accuracy_ci, auroc_ci, majority_baseline, paired_drop_ci
    from .sweep import best_site, probe_sweep, shuffled, write_sweep
    from .text import fit_text, strip_answer
