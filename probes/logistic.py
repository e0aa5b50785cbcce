"""L2-regularised logistic-regression probes with grouped, nested cross-validation.

One protocol, two solvers (the solvers are in :mod:`probes.solver`): ``sklearn``, the reference
(:func:`fit_sklearn`), and ``torch``, the same fits all at once (:func:`fit_torch`); they agree up to convergence.
Folds are assigned here (:func:`grouped_folds`), not by either library, so both solvers see exactly the same
splits. :func:`resolved_solver` says which one ``solver="auto"`` runs."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from .features import widths
from .options import ProbeOptions, probe_device
from .solver import GroupSolver, sklearn_fit, solver_report

__all__ = ["ProbeOptions", "FoldResult", "grouped_folds", "plan_fits", "check_inputs", "select_C", "fit_sklearn",
           "fit_torch", "resolved_solver", "fit_sites", "time_solver"]


@dataclass
class FoldResult:
    """Out-of-fold predictions of one site's probe."""
    prob: np.ndarray
    """P(label = 1) for every row, each predicted by the probe of the fold that held it out."""
    fold: np.ndarray
    """Outer fold of every row."""
    chosen_C: list[float]
    """C chosen by inner CV, per outer fold."""
    labels: np.ndarray | None = field(default=None, repr=False)
    """The labels the probe was fitted to (set by callers that fit to derived labels, e.g. the control)."""
    full_fit: tuple[np.ndarray, float, np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    """(w, b, mean, scale) of a probe fitted on all rows with the most often chosen C (for transfer)."""
    solver: dict | None = field(default=None, repr=False)
    """The torch solver's report (:meth:`probes.solver.SolveResult.report`); None for scikit-learn."""
    fold_fits: list[tuple[np.ndarray, float, np.ndarray, np.ndarray]] | None = field(default=None, repr=False)
    """(w, b, mean, scale) of each outer fold's probe (fitted on the other folds' rows with its chosen C)."""

    def predict(self, X: np.ndarray) -> np.ndarray:
        """P(label = 1) for new rows from the all-rows probe."""
        if self.full_fit is None:
            raise ValueError("this result has no all-rows probe (fit with keep_full=True)")
        return _apply(self.full_fit, X)

    def predict_out_of_fold(self, X: np.ndarray) -> np.ndarray:
        """P(label = 1) for other features of the *same rows* (e.g. the same items with names ablated), each
        row by the probe of the outer fold that held it out: no probe sees the row it scores."""
        X = np.asarray(X)
        if self.fold_fits is None:
            raise ValueError("this result has no per-fold probes")
        if len(X) != len(self.fold):
            raise ValueError(f"out-of-fold prediction needs features for the same {len(self.fold)} rows, "
                             f"got {len(X)}")
        out = np.empty(len(X))
        for f, fit in enumerate(self.fold_fits):
            rows = self.fold == f
            out[rows] = _apply(fit, X[rows])
        return out


def _apply(fit: tuple[np.ndarray, float, np.ndarray, np.ndarray], X: np.ndarray) -> np.ndarray:
    w, b, mu, sd = fit
    return _sigmoid(((np.asarray(X, np.float64) - mu) / sd) @ w + b)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    """The logistic function without overflow warnings for large |z|."""
    from scipy.special import expit
    return expit(z)


def seeded_hash(seed: int, key: object) -> int:
    """A 64-bit hash of (seed, key), the same on every machine: the seeded orders of folds and control labels."""
    return int.from_bytes(hashlib.sha256(f"{seed}|{key}".encode()).digest()[:8], "big")


def grouped_folds(groups: np.ndarray, k: int, seed: int = 0) -> np.ndarray:
    """A fold index in ``0..k-1`` for every row; rows of one group share a fold; folds balanced by rows.

    Folds are assigned here, not by either library, so both solvers see exactly the same splits: scenarios
    (groups) are dealt to folds in an order fixed by a seeded hash, largest first, each to the fold with the fewest
    rows so far. No group is ever in both the training and the test rows of a fit."""
    groups = np.asarray(groups)
    uniq, inverse, counts = np.unique(groups, return_inverse=True, return_counts=True)
    k = min(k, len(uniq))
    if k < 2:
        raise ValueError(f"grouped cross-validation needs at least 2 groups, got {len(uniq)}")
    order = sorted(range(len(uniq)), key=lambda g: (-counts[g], seeded_hash(seed, uniq[g])))
    sizes = np.zeros(k, int)
    assign = np.empty(len(uniq), int)
    for g in order:
        f = int(np.argmin(sizes))
        assign[g] = f
        sizes[f] += counts[g]
    return assign[inverse]


def plan_fits(groups: np.ndarray, opts: ProbeOptions) -> tuple[np.ndarray, list[tuple[int, int, np.ndarray]]]:
    """The nested grouped CV plan: the outer fold of every row, and the training mask of every fit as
    ``(outer fold, inner fold or -1 for the refit on all outer-training rows, mask)``."""
    outer = grouped_folds(groups, opts.folds, opts.seed)
    fits = []
    for f in range(outer.max() + 1):
        train = outer != f
        if len(np.unique(groups[train])) < 2:
            raise ValueError("too few scenarios for nested grouped cross-validation")
        inner = np.full(len(groups), -1)
        inner[train] = grouped_folds(groups[train], opts.inner_folds, opts.seed + 1 + f)
        for i in range(inner.max() + 1):
            fits.append((f, i, train & (inner != i)))
        fits.append((f, -1, train))
    return outer, fits


def check_inputs(X: np.ndarray, y: np.ndarray, groups: np.ndarray) -> None:
    """Raise ``ValueError`` unless ``X`` is 2-D, finite and as long as ``y`` and ``groups``, and ``y``
    has two classes."""
    if X.ndim != 2:
        raise ValueError(f"features must be 2-D (rows x dims), got shape {X.shape}")
    if not (len(X) == len(y) == len(groups)):
        raise ValueError(f"features, labels and groups differ in length: {len(X)}, {len(y)}, {len(groups)}")
    if not np.isfinite(X).all():
        raise ValueError("features contain NaN or infinite values")
    if len(np.unique(y)) < 2:
        raise ValueError("probe labels have a single class; nothing to predict")


def select_C(inner_acc: np.ndarray, Cs: tuple[float, ...]) -> int:
    """Index of the best C by mean inner accuracy (ties: the first, i.e. the stronger regularisation
    for Cs in increasing order)."""
    best = inner_acc.max()
    return int(np.flatnonzero(inner_acc >= best - 1e-12)[0])


def fit_sklearn(X: np.ndarray, y: np.ndarray, groups: np.ndarray, opts: ProbeOptions = ProbeOptions(),
                keep_full: bool = False) -> FoldResult:
    """The reference solver: nested grouped CV with scikit-learn, one site.

    For every outer fold, each ``C`` is scored by inner cross-validation on the outer-training rows, the best is
    refitted on all of them, and the held-out fold is predicted. Features are standardised on the rows each fit
    sees (a ``StandardScaler`` in the pipeline)."""
    X = np.asarray(X, np.float64)
    y = np.asarray(y).astype(int)
    groups = np.asarray(groups)
    check_inputs(X, y, groups)
    outer, fits = plan_fits(groups, opts)

    def fit(mask, C):
        return sklearn_fit(X, y, mask, C, opts)

    prob = np.zeros(len(y))
    chosen, fold_fits = [], []
    for f in range(outer.max() + 1):
        inner = [(m) for (ff, i, m) in fits if ff == f and i >= 0]
        acc = np.zeros(len(opts.Cs))
        for c, C in enumerate(opts.Cs):
            for m in inner:
                test = (outer != f) & ~m
                sc, clf = fit(m, C)
                acc[c] += (clf.predict(sc.transform(X[test])) == y[test]).mean() / len(inner)
        C = opts.Cs[select_C(acc, opts.Cs)]
        chosen.append(C)
        sc, clf = fit(outer != f, C)
        prob[outer == f] = clf.predict_proba(sc.transform(X[outer == f]))[:, 1]
        fold_fits.append((clf.coef_[0].copy(), float(clf.intercept_[0]), sc.mean_.copy(), sc.scale_.copy()))
    res = FoldResult(prob, outer, chosen, fold_fits=fold_fits)
    if keep_full:
        C = max(set(chosen), key=chosen.count)
        sc, clf = fit(np.ones(len(y), bool), C)
        res.full_fit = (clf.coef_[0].copy(), float(clf.intercept_[0]), sc.mean_.copy(), sc.scale_.copy())
    return res


def fit_torch(Xs: list[np.ndarray], y: np.ndarray, groups: np.ndarray, opts: ProbeOptions = ProbeOptions(),
              keep_full: bool = False) -> list[FoldResult]:
    """Nested grouped CV for every site at once (same splits and objective as :func:`fit_sklearn`).

    The same fits, all at once: every (site, outer fold, inner fold or refit, C) is one problem of
    :func:`probes.solver.torch_solve` (batched damped Newton, or truncated Newton for many features, along a
    regularisation path). The objective is scikit-learn's, ``C * sum(log-loss) + ||w||^2 / 2`` on standardised
    features with an unpenalised intercept, so the two solvers agree up to convergence (tests: probabilities within
    1e-3, the same chosen C). It computes in float64 on a CPU and float32 on a GPU (``ProbeOptions.dtype``), reads
    the sites one at a time and streams them through the device within the memory budget
    (:func:`probes.options.memory_budget`).

    The features are read in their own dtype, one site at a time and never copied whole
    (:class:`probes.solver.GroupSolver` streams them by site group; ``Xs`` may be a
    :class:`probes.features.SiteSequence` that reads each site when indexed), each checked as it is read;
    each group's solutions are reduced to its sites' results before the next group is solved, so the host
    holds one group's outputs. Each result's ``solver`` is the solver's report (plan, expected peak
    memory, Newton steps, contractions, convergence)."""
    y = np.asarray(y).astype(int)
    groups = np.asarray(groups)
    if len(Xs) == 0:
        return []
    first = np.asarray(Xs[0])
    check_inputs(first, y, groups)
    shape = first.shape
    del first
    outer, fits = plan_fits(groups, opts)
    masks = [m for _, _, m in fits] + ([np.ones(len(y), bool)] if keep_full else [])
    pos = {(f, i): j for j, (f, i, _) in enumerate(fits)}
    pos[(-1, -1)] = len(fits)
    solver = GroupSolver(Xs, y, masks, opts.Cs, opts, check=lambda X: check_inputs(np.asarray(X), y, groups),
                         shape=shape)
    out = []
    for part in solver:
        for s in range(part.sites.stop - part.sites.start):
            out.append(_site_result(part, s, y, outer, fits, pos, opts, keep_full))
        del part                                   # one group's outputs alive at a time
    steps, contractions, unconverged = solver.finish()
    report = solver_report(solver.plan, steps, contractions, unconverged)
    for res in out:
        res.solver = report
    return out


def _site_result(sol, s: int, y, outer, fits, pos, opts: ProbeOptions, keep_full: bool) -> FoldResult:
    """Site ``s`` of a group's solutions (:class:`probes.solver.GroupSolution`) as its out-of-fold result."""
    def prob(j, c, rows):
        return _sigmoid(sol.logits[s, j, c, rows])
    p = np.zeros(len(y))
    chosen, fold_fits = [], []
    for f in range(outer.max() + 1):
        inner = [(i, m) for (ff, i, m) in fits if ff == f and i >= 0]
        acc = np.zeros(len(opts.Cs))
        for c in range(len(opts.Cs)):
            for i, m in inner:
                test = (outer != f) & ~m
                acc[c] += ((prob(pos[(f, i)], c, test) >= 0.5) == y[test]).mean() / len(inner)
        c = select_C(acc, opts.Cs)
        chosen.append(opts.Cs[c])
        j = pos[(f, -1)]
        p[outer == f] = prob(j, c, outer == f)
        fold_fits.append((sol.W[s, j, c].copy(), float(sol.b[s, j, c]), sol.mu[s, j].copy(), sol.sd[s, j].copy()))
    res = FoldResult(p, outer, chosen, fold_fits=fold_fits)
    if keep_full:
        c = opts.Cs.index(max(set(chosen), key=chosen.count))
        j = pos[(-1, -1)]
        res.full_fit = (sol.W[s, j, c].copy(), float(sol.b[s, j, c]), sol.mu[s, j].copy(), sol.sd[s, j].copy())
    return res


def resolved_solver(opts: ProbeOptions, dim: int | None = None) -> str:
    """The solver ``opts`` runs for features of dimension ``dim``: ``auto`` is torch on CUDA devices
    (``device="auto"`` is CUDA whenever torch sees one: :func:`probes.options.probe_device`), and on a
    CPU torch up to ``newton_max_dim`` features and scikit-learn above.

    ``ProbeOptions.device="auto"`` (the default) is CUDA whenever torch sees a device, else the CPU; the budget
    (``memory_budget=None``) is then 80% of the device's free memory when the solve starts
    (``torch.cuda.mem_get_info``), and 4 GiB on a CPU. ``solver="auto"`` picks by measurement
    (benchmarks/bench_probes.py): torch on CUDA devices (never scikit-learn's nested CV at 3,840 dims when a GPU is
    there); on a CPU, torch with Newton for small feature dimensions (``d + 1 <= newton_max_dim``) and scikit-learn
    above it (its L-BFGS needs fewer flops than the batched truncated Newton there). Measured ratios are in the
    README ("Probes")."""
    if opts.solver != "auto":
        return opts.solver
    if probe_device(opts).startswith("cuda"):
        return "torch"
    return "torch" if dim is not None and dim + 1 <= opts.newton_max_dim else "sklearn"


def fit_sites(Xs: list[np.ndarray], y: np.ndarray, groups: np.ndarray, opts: ProbeOptions = ProbeOptions(),
              keep_full: bool = False) -> list[FoldResult]:
    """Out-of-fold predictions for each site's features with the chosen solver (``Xs``: a list, or a
    :class:`probes.features.SiteSequence` read one site at a time)."""
    if resolved_solver(opts, max(widths(Xs), default=None)) == "sklearn":
        return [fit_sklearn(Xs[i], y, groups, opts, keep_full) for i in range(len(Xs))]  # no site kept between fits
    return fit_torch(Xs, y, groups, opts, keep_full)


def time_solver(sites: int = 49, dim: int = 3840, rows: int = 10_000, device: str = "auto",
                opts: ProbeOptions | None = None, seed: int = 0) -> dict:
    """Time the torch probe solver at a given shape on ``device`` (for the GPU smoke check: FairStress's
    49 sites x 3,840 dims, here 10k rows): synthetic float32 features made one site at a time (a planted
    direction per site, scenarios of 8 rows), fitted with the probes' nested grouped CV
    (:func:`fit_torch`; the features are made one site at a time when the solver reads them, which the time
    includes, about as long as reading them from a cache). Returns seconds, the peak memory (on CUDA
    ``torch.cuda.max_memory_allocated``; on a CPU the plan's expected peak), the plan and the solver's counts."""
    import time
    from dataclasses import replace

    import torch

    from .features import SiteSequence
    opts = replace(opts or ProbeOptions(), solver="torch", device=device)
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, rows)
    groups = np.repeat(np.arange(rows // 8 + 1), 8)[:rows]

    def site(i: int) -> np.ndarray:
        r = np.random.default_rng([seed, i])
        u = r.normal(size=dim)
        u /= np.linalg.norm(u)
        return (r.standard_normal((rows, dim), np.float32)
                + np.outer(2 * y - 1, u).astype(np.float32) * (0.5 + 1.5 * i / max(1, sites - 1)))

    Xs = SiteSequence(site, sites, [dim] * sites)
    dev = probe_device(opts)
    cuda = dev.split(":")[0] == "cuda"
    if cuda:
        torch.cuda.synchronize(dev)
        torch.cuda.reset_peak_memory_stats(dev)
    t0 = time.perf_counter()
    res = fit_torch(Xs, y, groups, opts)
    if cuda:
        torch.cuda.synchronize(dev)
    seconds = time.perf_counter() - t0
    report = res[0].solver
    peak = int(torch.cuda.max_memory_allocated(dev)) if cuda else int(report["expected_peak_bytes"])
    return {"sites": sites, "dim": dim, "rows": rows, "device": dev, "seconds": round(seconds, 3),
            "peak_bytes": peak, "peak_measured": cuda, "solver": report}
