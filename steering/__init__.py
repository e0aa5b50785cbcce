"""Directions in activation space and the hooks that apply them.

- :mod:`steering.directions`: concept directions from activations (difference of means,
  paired PCA, logistic probe) and the seeded random control of the same norm;
- :mod:`steering.hooks`: hidden-state edits (``Add``, ``ProjectOut``, ``Affine``, and ``AtPositions`` to
  restrict one to some positions) and the ``steer`` context manager that applies them at named model
  sites, also during generation;
- :mod:`steering.leace`: LEACE closed-form linear concept erasure (Belrose et al. 2023), fitted by the
  ``concept-erasure`` package (its covariance shrinkage on by default), at one site or
  layer by layer (``fit_leace_sequential``).

Every name here is exported from the package (``steering.steer``, ``steering.fit_leace``, ...) and
loads on first use (PEP 562), so ``import steering`` does not import torch.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from evenhand.support.lazy import lazy_exports

_EXPORTS = {
    "unit": ".directions", "random_like": ".directions", "diff_of_means": ".directions",
    "pca_paired": ".directions", "probe_direction": ".directions",
    "Add": ".hooks", "ProjectOut": ".hooks", "Affine": ".hooks", "AtPositions": ".hooks", "POSITIONS": ".hooks",
    "steer": ".hooks", "active_hooks": ".hooks",
    "LeaceEraser": ".leace", "fit_leace": ".leace", "fit_leace_sequential": ".leace", "concept_matrix": ".leace",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .directions import diff_of_means, pca_paired, probe_direction, random_like, unit
    from .hooks import POSITIONS, Add, Affine, AtPositions, ProjectOut, active_hooks, steer
    from .leace import LeaceEraser, concept_matrix, fit_leace, fit_leace_sequential
