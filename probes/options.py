"""How linear probes are fitted: :class:`ProbeOptions`, shared by the cross-validation protocol
(:mod:`probes.logistic`) and the solvers (:mod:`probes.solver`), and where they run: :func:`probe_device`
(``auto``: CUDA when torch sees one) and :func:`memory_budget` (on CUDA a share of the device's free
memory, on a CPU 4 GiB)."""
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
    device: str = "auto"
    """Device of the torch solver: auto (cuda when torch sees a CUDA device, else cpu), cpu, cuda, cuda:1, ..."""
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
    memory_budget: int | None = None
    """torch solver: bytes its working set on the device may hold. None (default): on CUDA
    :data:`FREE_SHARE` of the device's free memory when the solve starts (``torch.cuda.mem_get_info``), on
    a CPU :data:`CPU_BUDGET` (4 GiB, which there also counts one site group's outputs on the host). Sites
    are read one at a time and streamed through the device in groups that fit this budget
    (:func:`probes.solver.memory_plan`; one site at a time when a single site exceeds it)."""

    def __post_init__(self):
        if self.solver not in SOLVERS:
            raise ValueError(f"solver must be 'auto', 'torch' or 'sklearn', got {self.solver!r}")
        if self.folds < 2 or self.inner_folds < 2:
            raise ValueError("folds and inner_folds must be at least 2")
        if self.dtype not in get_args(ProbeDtype):
            raise ValueError(f"dtype must be 'auto', 'float32' or 'float64', got {self.dtype!r}")
        if self.memory_budget is not None and self.memory_budget <= 0:
            raise ValueError(f"memory_budget must be a positive number of bytes, got {self.memory_budget!r}")
        if not self.Cs or any(c <= 0 for c in self.Cs):
            raise ValueError(f"Cs must be positive numbers, got {self.Cs!r}")


CPU_BUDGET = 4 << 30
"""The torch solver's memory budget on a CPU (bytes)."""
FREE_SHARE = 0.8
"""The share of a CUDA device's free memory the torch solver's working set may take (the rest: the
allocator's fragmentation and whatever else runs on the device)."""


def cuda_available() -> bool:
    """Whether torch sees a CUDA device (one place, so a test can say there is one)."""
    import torch
    return bool(torch.cuda.is_available())


def device_free_bytes(device: str) -> int:
    """The free memory of CUDA ``device`` in bytes (``torch.cuda.mem_get_info``)."""
    import torch
    return int(torch.cuda.mem_get_info(torch.device(device))[0])


def probe_device(opts: ProbeOptions) -> str:
    """The device ``opts`` runs the torch solver on: ``opts.device``, or for ``auto`` cuda when
    :func:`cuda_available`, else cpu."""
    if opts.device != "auto":
        return str(opts.device)
    return "cuda" if cuda_available() else "cpu"


def memory_budget(opts: ProbeOptions, device: str | None = None) -> int:
    """The bytes the torch solver's working set may hold on ``device`` (default :func:`probe_device`):
    ``opts.memory_budget`` when set; else on CUDA :data:`FREE_SHARE` of the device's free memory, on a CPU
    :data:`CPU_BUDGET`."""
    if opts.memory_budget is not None:
        return int(opts.memory_budget)
    device = device or probe_device(opts)
    if device.split(":")[0] == "cuda":
        return max(1, int(FREE_SHARE * device_free_bytes(device)))
    return CPU_BUDGET
