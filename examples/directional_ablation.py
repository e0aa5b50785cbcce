"""A tenth intervention written outside the package: directional ablation at one layer.

Project the demographic direction (difference of class means of ``slot_a_minority``)
out of one layer's residual stream. Load it with ``interventions.load_plugin(path)``.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from interventions.base import DirectionIntervention, register
from interventions.steered import concept_activations
from steering.directions import diff_of_means
from steering.hooks import ProjectOut


@dataclass(frozen=True)
class AblationFit:
    layer: int | str = "middle"  # a layer index or "middle"
    batch_size: int = 32


@dataclass(frozen=True)
class AblationApply:
    strength: float = 1.0  # 1 removes the component along the direction, 0 is the identity


@register
class DirectionalAblation(DirectionIntervention):
    """Directional ablation: project the demographic direction out of one layer's residual stream."""
    name = "directional_ablation"
    FitOptions = AblationFit
    ApplyOptions = AblationApply

    def fit_parameters(self, lm, train_items, options: AblationFit, seed: int, progress: bool) -> tuple[dict, dict]:
        rows, z, sites, acts = concept_activations(lm, train_items, options.layer, options.batch_size, progress)
        direction = torch.tensor(diff_of_means(acts[sites[0]], z), dtype=torch.float32)
        return {"sites": sites, "n_train": len(rows)}, {f"{sites[0]}/direction": direction}

    def edits(self, fitted, lm, options: AblationApply) -> dict:
        site = fitted.info["sites"][0]
        return {site: ProjectOut(fitted.tensors[f"{site}/direction"], strength=options.strength)}
