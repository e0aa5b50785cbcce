"""How linear probes are fitted: :class:`ProbeOptions`, shared by the cross-validation protocol
(:mod:`probes.logistic`) and the solvers (:mod:`probes.solver`)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProbeOptions:
    """How probes are fitted."""
    folds: int = 5
    """Outer folds (grouped by scenario); capped at the number of groups."""
    inner_folds: int = 3
    """Inner folds for choosing C (grouped)."""
    Cs: tuple[float, ...] = (0.001, 0.01, 0.1, 1.0, 10.0)
    """Inverse regularisation strengths tried (scikit-learn's C)."""
    engine: str = "auto"
    """auto | torch | sklearn. auto: torch on a CUDA device; on a CPU torch up to ``newton_max_dim``
    features and scikit-learn above (measured: see the module docstring and benchmarks/bench_probes.py)."""
    device: str = "cpu"
    """Device of the torch engine (cpu, cuda, ...)."""
    max_iter: int = 500
    """L-BFGS iterations (torch) / max_iter (sklearn)."""
    tol: float = 1e-6
    seed: int = 0
    newton_max_dim: int = 128
    """torch engine: batched Newton with exact Hessians up to this many features (+1); above it, batched
    truncated Newton (conjugate gradients on Hessian-vector products: memory ~ d per problem, and
    faster once d^2 per problem outgrows the CG iterations)."""
    cg_max_iter: int = 100
    """torch engine: conjugate-gradient iterations per truncated-Newton step (at most)."""

    def __post_init__(self):
        if self.engine not in ("auto", "torch", "sklearn"):
            raise ValueError(f"engine must be 'auto', 'torch' or 'sklearn', got {self.engine!r}")
        if self.folds < 2 or self.inner_folds < 2:
            raise ValueError("folds and inner_folds must be at least 2")
        if not self.Cs or any(c <= 0 for c in self.Cs):
            raise ValueError(f"Cs must be positive numbers, got {self.Cs!r}")
