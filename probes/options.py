"""How linear probes are fitted: :class:`ProbeOptions`, shared by the cross-validation protocol
(:mod:`probes.logistic`) and the solvers (:mod:`probes.solver`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

Solver = Literal["auto", "torch", "sklearn"]
"""A probe solver (``solver``): auto, the batched torch solver, or the scikit-learn reference fit."""
SOLVERS = get_args(Solver)
ProbeDtype = Literal["auto", "float32", "float64"]
"""The torch solver's compute dtype."""


@dataclass(frozen=True)
class ProbeOptions:
    """How probes are fitted."""
    folds: int = 5
    """Outer folds (grouped by scenario); capped at the number of groups."""
    inner_folds: int = 3
    """Inner folds for choosing C (grouped)."""
    Cs: tuple[float, ...] = (0.001, 0.01, 0.1, 1.0, 10.0)
    """Inverse regularisation strengths tried (scikit-learn's C)."""
    solver: Solver = "auto"
    """auto | torch | sklearn (was ``engine``). auto: torch on a CUDA device; on a CPU torch up to
    ``newton_max_dim`` features and scikit-learn above (measured: see the module docstring and benchmarks/bench_probes.py)."""
    device: str = "cpu"
    """Device of the torch solver (cpu, cuda, ...)."""
    max_iter: int = 500
    """Newton steps per C (torch) / max_iter (sklearn)."""
    tol: float = 1e-6
    """scikit-learn's ``tol``; the torch solver stops at a relative gradient of ``tol / 100``, floored at what
    its compute dtype can reach (:func:`probes.solver.gradient_tolerance`)."""
    seed: int = 0
    """Seed of the folds and the control labels."""
    newton_max_dim: int = 128
    """torch solver: batched Newton with exact Hessians up to this many features (+1); above it, batched
    truncated Newton (conjugate gradients on Hessian-vector products: memory ~ d per problem, and
    faster once d^2 per problem outgrows the CG iterations)."""
    cg_max_iter: int = 100
    """torch solver: conjugate-gradient iterations per truncated-Newton step (at most)."""
    dtype: ProbeDtype = "auto"
    """torch solver: compute dtype, auto | float32 | float64. auto: float64 on a CPU, float32 on other devices."""
    memory_budget: int = 4 << 30
    """torch solver: bytes its working set may hold (default 4 GiB). The features are held once, in the
    caller's dtype; sites are streamed through the device in groups that fit this budget
    (:func:`probes.solver.memory_plan`; one site at a time when a single site exceeds it)."""

    def __post_init__(self):
        if self.solver not in SOLVERS:
            raise ValueError(f"solver must be 'auto', 'torch' or 'sklearn', got {self.solver!r}")
        if self.folds < 2 or self.inner_folds < 2:
            raise ValueError("folds and inner_folds must be at least 2")
        if self.dtype not in get_args(ProbeDtype):
            raise ValueError(f"dtype must be 'auto', 'float32' or 'float64', got {self.dtype!r}")
        if self.memory_budget <= 0:
            raise ValueError(f"memory_budget must be a positive number of bytes, got {self.memory_budget!r}")
        if not self.Cs or any(c <= 0 for c in self.Cs):
            raise ValueError(f"Cs must be positive numbers, got {self.Cs!r}")
