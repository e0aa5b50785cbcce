"""The solver behind the logistic probes: a batched torch solver and the scikit-learn reference fit.

:func:`torch_solve` minimises many L2-regularised logistic problems at once. Every (site, training
mask, C) is one problem; problems share the feature matrix of their site and differ by a mask of
training rows, so one batched GEMM evaluates all of them. The Cs are solved as a regularisation path
(smallest first, each problem warm-started from its solution at the previous C). Up to
``newton_max_dim`` features each problem takes damped Newton steps (:func:`probes.newton.newton`: all Hessians
from one GEMM per site, the rows' outer products built once times every problem's weights; the
GEMM in single precision, since the Hessian only steers the step); above it, truncated Newton steps
(:func:`probes.newton.newton_cg`: conjugate gradients on batched Hessian-vector products). Converged problems drop
out of the work. The objective is scikit-learn's, ``C * sum(log-loss) + ||w||^2 / 2`` on standardised
features with an unpenalised intercept, so :func:`torch_solve` and :func:`sklearn_fit` agree up to
convergence. The cross-validation protocol that poses these problems (folds, choice of C) is :mod:`probes.logistic`.
"""
from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from .newton import (
    PRODUCTS_BUDGET,
    Work,
    backward,
    backward_squares,
    linear,
    newton_cg,
    row_products,
)
from .newton import newton as newton_step
from .options import ProbeOptions, memory_budget, probe_device

GRADIENT_FLOOR = {"float64": 0.0, "float32": 1e-6}
"""The smallest relative gradient a problem is asked to reach, by compute dtype (float32's rounding of
``X v`` over thousands of features leaves gradients of about 1e-7 relative at the optimum)."""


class ProbeConvergenceWarning(RuntimeWarning):
    """Some problems of one :func:`torch_solve` stopped at ``max_iter``: ``problems`` of ``total``.
    :func:`probes.sweep.probe_sweep` collects these and reports them once per sweep in words (and in its
    manifest); called directly, :func:`torch_solve` warns with it."""

    def __init__(self, message: str, problems: int = 0, total: int = 0, max_iter: int = 0):
        super().__init__(message)
        self.problems, self.total, self.max_iter = problems, total, max_iter


@dataclass(frozen=True)
class SolvePlan:
    """How :func:`torch_solve` streams sites through the device, and the memory it expects."""
    dtype: str
    """Compute dtype (float32 or float64)."""
    device: str
    """The device the sites are solved on (``opts.device`` resolved: :func:`probes.options.probe_device`)."""
    sites_per_group: int
    """Sites copied to the device and solved together."""
    groups: int
    """Number of site groups."""
    budget_bytes: int
    """What the working set may hold (:func:`probes.options.memory_budget`: ``opts.memory_budget``, on CUDA a
    share of the device's free memory, on a CPU 4 GiB)."""
    expected_peak_bytes: int
    """The working set the plan expects at its peak: one group's features and per-problem tensors, the
    transients of one site, on a CPU one group's outputs (above the budget only when a single site does not fit)."""


@dataclass
class SolveResult:
    """Every problem's solution, its predictions on all rows, and the solver's report."""
    W: np.ndarray
    """Weights on standardised features, [S, P, K, d]."""
    b: np.ndarray
    """Intercepts, [S, P, K]."""
    mu: np.ndarray
    """Per-mask feature means, [S, P, d]."""
    sd: np.ndarray
    """Per-mask feature scales, [S, P, d]."""
    logits: np.ndarray
    """Every problem's logit on every row, [S, P, K, n] (float64)."""
    plan: SolvePlan
    newton_steps: int
    """Newton steps taken, summed over site groups and the C path."""
    contractions: int
    """Passes of a product over a site group's features (standardisation, gradients, Hessian-vector
    products, line-search objectives, predictions), summed over groups."""
    converged: bool
    """Every problem stopped on the gradient tolerance or a negligible step, none at ``max_iter``."""
    unconverged: int
    """Problems that reached ``max_iter``."""

    def report(self) -> dict:
        """The plan and the counts as a JSON-able dict (recorded in sweep manifests)."""
        return solver_report(self.plan, self.newton_steps, self.contractions, self.unconverged)


def solver_report(plan: SolvePlan, newton_steps: int, contractions: int, unconverged: int) -> dict:
    """A solve's plan and counts as a JSON-able dict (:meth:`SolveResult.report`)."""
    return {**asdict(plan), "newton_steps": newton_steps, "contractions": contractions,
            "converged": unconverged == 0, "unconverged": unconverged}


def sklearn_fit(X: np.ndarray, y: np.ndarray, mask: np.ndarray, C: float, opts: ProbeOptions):
    """The reference fit of one problem: a ``StandardScaler`` and scikit-learn's
    ``LogisticRegression(C)`` fitted on the rows ``mask`` of ``X``; returns ``(scaler, classifier)``."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    X = np.asarray(X, np.float64)
    sc = StandardScaler().fit(X[mask])
    clf = LogisticRegression(C=C, max_iter=opts.max_iter, tol=opts.tol)
    clf.fit(sc.transform(X[mask]), y[mask])
    return sc, clf


def compute_dtype(opts: ProbeOptions) -> str:
    """The torch solver's compute dtype for ``opts``: ``opts.dtype``, or for ``auto`` float64 on a CPU
    and float32 on other devices."""
    if opts.dtype != "auto":
        return opts.dtype
    return "float64" if probe_device(opts).split(":")[0] == "cpu" else "float32"


def gradient_tolerance(opts: ProbeOptions, dtype: str) -> float:
    """The relative gradient (max |gradient| / (C * training rows)) below which a problem has converged:
    ``tol / 100``, floored at what ``dtype`` can reach (``GRADIENT_FLOOR``).

    Precision: the solver computes in ``opts.dtype`` (``auto``: float64 on a CPU, float32 on other devices,
    :func:`compute_dtype`). In float64 the tolerance is ``tol / 100``, but never below ``GRADIENT_FLOOR`` for the
    dtype, the level its rounding lets the gradient reach (float32 cannot reach ``1e-8``, so a float32 run with
    that tolerance would take every step up to ``max_iter``). The line search accepts a step whose objective rises
    by no more than the dtype's rounding of it (:data:`probes.newton.OBJECTIVE_SLACK`)."""
    return max(opts.tol * 1e-2, GRADIENT_FLOOR[dtype])


def memory_plan(sites: int, rows: int, dim: int, problems: int, n_C: int, dtype: str, newton: bool,
                budget: int, device: str = "cpu") -> SolvePlan:
    """Group the sites so that a group's working set fits ``budget`` bytes (at least one site a group).

    Sites are streamed through the device in these groups: each group is copied (centred, in the compute dtype)
    while it is solved, and as many sites share a group as fit the budget together with the problems' per-row
    tensors; on a CPU the budget also counts one group's outputs (on the host, which is the device there), on
    CUDA it does not (they are copied to the host). The caller's features are read one site at a time (``Xs[i]``
    once per fit; a :class:`probes.features.SiteSequence` reads each from the cache when indexed) and never
    copied whole. The plan states the device, the budget and the peak it expects.

    Per site: its centred features in the compute dtype (and a float32 copy for Newton's Hessian GEMM
    when computing in float64), about 16 per-row tensors per problem and 24 per-feature ones (Newton:
    6 Hessians per problem), and on a CPU ``device`` its outputs in float64 (weights, logits, means and
    scales: they live on the host, which there is the device; a CUDA budget does not count them). Once:
    one site's squared features (a transient of the standardisation and the preconditioner), the masks,
    the cached row products (Newton, at most ``PRODUCTS_BUDGET``), and on a CPU one site's float32
    matrix as read (the transient of copying a site that is read from a cache)."""
    c = 8 if dtype == "float64" else 4
    host = device.split(":")[0] == "cpu"
    per_site = rows * dim * c + problems * (16 * rows + 24 * (dim + 1)) * c
    if host:
        per_site += problems * (n_C * (dim + rows + 1) + 2 * dim) * 8
    if newton:
        per_site += (rows * dim * 4 if c == 8 else 0) + 6 * problems * (dim + 1) ** 2 * c
    fixed = rows * dim * c + problems * rows * c + (rows * dim * 4 if host else 0)
    if newton:
        fixed += 4 * min(PRODUCTS_BUDGET, sites * rows * dim * (dim + 1) // 2)
    per_group = int(min(sites, max(1, (budget - fixed) // per_site)))
    groups = -(-sites // per_group)
    return SolvePlan(dtype, device, per_group, groups, int(budget), int(fixed + per_group * per_site))


def _load_group(Xs: Sequence[np.ndarray], idx: range, dtype, dev, work: Work, check=None):
    """The features of the sites ``idx`` on ``dev`` in ``dtype``, each column centred on its mean over all
    rows (accumulated in float64): one [g, n, d] tensor, the only copy of the group. Each site is read
    (``Xs[i]``) once, checked by ``check`` and copied in before the next is read."""
    import torch

    first = np.shape(Xs[idx[0]])
    n, d = first
    X = torch.empty(len(idx), n, d, dtype=dtype, device=dev)
    centre = torch.empty(len(idx), 1, d, dtype=torch.float64, device=dev)
    for j, i in enumerate(idx):
        x = Xs[i]
        if np.shape(x) != first:
            raise ValueError(f"sites differ in shape: {sorted({tuple(first), tuple(np.shape(x))})}")
        if check is not None:
            check(x)
        X[j].copy_(torch.from_numpy(np.ascontiguousarray(x)))
        del x
        centre[j, 0] = X[j].mean(0, dtype=torch.float64)
        X[j] -= centre[j].to(dtype)
    work.contractions += 1
    return X, centre


def _masked_moments(X, M, work: Work):
    """Per site and mask: the means and the second moments of the centred features, [g, P, d] each."""
    g = X.shape[0]
    n_tr = M.sum(1)[None, :, None]
    Mg = M.expand(g, *M.shape)
    work.contractions += 2
    return backward(X, Mg) / n_tr, backward_squares(X, Mg) / n_tr


@dataclass
class GroupSolution:
    """One site group's solutions (:class:`SolveResult`'s arrays for the sites ``sites``), on the host."""
    sites: slice
    W: np.ndarray
    b: np.ndarray
    mu: np.ndarray
    sd: np.ndarray
    logits: np.ndarray


class GroupSolver:
    """:func:`torch_solve` one site group at a time: iterating yields a :class:`GroupSolution` per group
    (sites read one at a time, ``Xs[i]`` once each, and ``check``-ed as they are read), so a caller that
    reduces each group before the next holds one group's outputs, whatever the number of sites;
    :meth:`finish` (after the last group) returns the counts and warns on unconverged problems."""

    def __init__(self, Xs: Sequence[np.ndarray], y: np.ndarray, masks: list[np.ndarray], Cs: Sequence[float],
                 opts: ProbeOptions, check=None, shape: tuple[int, int] | None = None):
        import torch

        self.Xs, self.Cs, self.opts, self.check = Xs, Cs, opts, check
        device = probe_device(opts)
        self.dev = torch.device(device)
        self.dname = compute_dtype(opts)
        self.dtype = getattr(torch, self.dname)
        n, d = shape if shape is not None else np.shape(Xs[0])
        self.M = torch.as_tensor(np.stack(masks), dtype=self.dtype, device=self.dev)           # [P, n]
        self.P, self.K = self.M.shape[0], len(Cs)
        self.yy = torch.as_tensor(2.0 * np.asarray(y) - 1.0, dtype=self.dtype, device=self.dev)
        self.newton = d + 1 <= opts.newton_max_dim
        self.plan = memory_plan(len(Xs), n, d, self.P, self.K, self.dname, self.newton,
                                memory_budget(opts, device), device)
        self.gtol = gradient_tolerance(opts, self.dname)
        self.work = Work()

    def __iter__(self):
        import torch

        S, P, K, dtype, dev, M = len(self.Xs), self.P, self.K, self.dtype, self.dev, self.M
        solve = newton_step if self.newton else newton_cg
        n_tr = M.sum(1)[None, :, None].to(torch.float64)
        eps = float(np.finfo(np.float64).eps)
        for g0 in range(0, S, self.plan.sites_per_group):
            sl = slice(g0, min(S, g0 + self.plan.sites_per_group))
            g = sl.stop - sl.start
            X, centre = _load_group(self.Xs, range(sl.start, sl.stop), dtype, dev, self.work, self.check)
            n, d = X.shape[1:]
            W_out, b_out = np.zeros((g, P, K, d)), np.zeros((g, P, K))
            logits = np.zeros((g, P, K, n))
            mu, ex2 = _masked_moments(X, M, self.work)
            var = (ex2 - mu * mu).clamp_min(0).to(torch.float64)
            mu_raw = mu.to(torch.float64) + centre
            # constant features get scale 1, as scikit-learn's StandardScaler does (same tolerance)
            constant = var <= n_tr * eps * var + (n_tr * mu_raw * eps) ** 2
            sd = torch.where(constant, torch.ones_like(var), var.sqrt()).to(dtype)
            mu_out, sd_out = mu_raw.cpu().numpy(), sd.to(torch.float64).cpu().numpy()
            extra = {}
            if self.newton:
                X32 = X if dtype == torch.float32 else X.to(torch.float32)   # the Hessian's GEMM: it only steers
                extra = {"X32": X32, "products": row_products(X32)}
            W = torch.zeros(g, P, d, dtype=dtype, device=dev)
            b = torch.zeros(g, P, dtype=dtype, device=dev)
            for k in np.argsort(np.asarray(self.Cs, float), kind="stable"):
                C = torch.full((P,), float(self.Cs[k]), dtype=dtype, device=dev)
                W, b = solve(X, self.yy, M, C, mu, sd, self.opts, self.gtol, self.work, W, b, **extra)
                W_out[:, :, k] = W.to(torch.float64).cpu().numpy()
                b_out[:, :, k] = b.to(torch.float64).cpu().numpy()
                logits[:, :, k] = linear(X, mu, W / sd, b).to(torch.float64).cpu().numpy()
                self.work.contractions += 1
            del X, extra, W, b, mu, ex2, var, sd
            yield GroupSolution(sl, W_out, b_out, mu_out, sd_out, logits)

    def finish(self) -> tuple[int, int, int]:
        """(Newton steps, contractions, unconverged problems) after the last group; warns
        (:class:`ProbeConvergenceWarning`) when a problem stopped at ``max_iter``."""
        work = self.work
        if work.unconverged:
            total = len(self.Xs) * self.P * self.K
            warnings.warn(ProbeConvergenceWarning(
                f"torch probe solver: {work.unconverged} of {total} problem(s) stopped at max_iter={self.opts.max_iter} "
                f"before the relative gradient reached {self.gtol:g} ({self.dname}); their weights are near, not at, "
                f"the optimum", work.unconverged, total, self.opts.max_iter), stacklevel=3)
        return work.steps, work.contractions, work.unconverged


def torch_solve(Xs: Sequence[np.ndarray], y: np.ndarray, masks: list[np.ndarray], Cs: Sequence[float],
                opts: ProbeOptions) -> SolveResult:
    """Minimise every (site, mask, C) problem for P masks and K values of C (see :class:`SolveResult`).

    ``Xs`` are the sites' [n, d] features in any float dtype; they are read one at a time, never copied
    whole: sites are streamed through the device (:func:`probes.options.probe_device`) in the groups of
    :func:`memory_plan` (:class:`GroupSolver`; this function gathers every group's outputs, a caller
    that needs one group at a time iterates a :class:`GroupSolver` itself, as
    :func:`probes.logistic.fit_torch` does). Standardisation depends on the mask only, so it is computed
    once per mask and group. The Cs are solved as a regularisation path: from the smallest C up, every
    mask's problems at once, each started from its solution at the previous C (warm starts need a few
    Newton steps where a cold start needs many); each solution is the same minimum a cold start reaches
    (the objective is strictly convex). Warns (:class:`ProbeConvergenceWarning`) when a problem stops at
    ``max_iter``."""
    solver = GroupSolver(Xs, y, masks, Cs, opts)
    parts = list(solver)
    steps, contractions, unconverged = solver.finish()

    def gather(name):
        return np.concatenate([getattr(p, name) for p in parts])
    return SolveResult(gather("W"), gather("b"), gather("mu"), gather("sd"), gather("logits"), solver.plan,
                       steps, contractions, unconverged == 0, unconverged)
