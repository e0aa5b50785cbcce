"""The solver behind the logistic probes: a batched torch engine and the scikit-learn reference fit.

:func:`torch_solve` minimises many L2-regularised logistic problems at once. Every (site, training
mask, C) is one problem; problems share the feature matrix of their site and differ by a mask of
training rows, so one ``einsum`` evaluates all of them. The Cs are solved as a regularisation path
(smallest first, each problem warm-started from its solution at the previous C). Up to
``newton_max_dim`` features each problem takes damped Newton steps (:func:`_newton`: all Hessians
from one GEMM per site, the rows' outer products built once times every problem's weights; the
GEMM in single precision, since the Hessian only steers the step); above it, truncated Newton steps
(:func:`_newton_cg`: conjugate gradients on batched Hessian-vector products). Converged problems drop
out of the work. The objective is scikit-learn's, ``C * sum(log-loss) + ||w||^2 / 2`` on standardised
features with an unpenalised intercept, so :func:`torch_solve` and :func:`sklearn_fit` agree up to
convergence.

Precision: the engine computes in ``opts.dtype`` (``auto``: float64 on a CPU, float32 on other
devices). A problem has converged when its gradient, relative to ``C * rows``, is below
:func:`gradient_tolerance`: ``tol / 100`` in float64, but never below ``GRADIENT_FLOOR`` for the dtype,
the level its rounding lets the gradient reach (float32 cannot reach ``1e-8``, so a float32 run with
that tolerance would take every step up to ``max_iter``). The line search accepts a step whose
objective rises by no more than the dtype's rounding of it.

Memory: the caller's features are held once, in their stored dtype. Sites are streamed through the
device in groups (:func:`memory_plan`): each group is copied (centred, in the compute dtype) while it
is solved, and as many sites share a group as fit ``opts.memory_budget`` bytes together with the
problems' per-row tensors and the outputs. :class:`SolveResult` states the plan and the peak it
expects, and counts the work: Newton steps and contractions (passes of a product over a group's
features).

The cross-validation protocol that poses these problems (folds, choice of C) is
:mod:`probes.logistic`.
"""
from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from .options import ProbeOptions

GRADIENT_FLOOR = {"float64": 0.0, "float32": 1e-6}
"""The smallest relative gradient a problem is asked to reach, by compute dtype (float32's rounding of
``X v`` over thousands of features leaves gradients of about 1e-7 relative at the optimum)."""

PRODUCTS_BUDGET = 1 << 26
"""Most numbers held at once in cached outer products of rows (single precision: 256 MiB)."""


@dataclass(frozen=True)
class SolvePlan:
    """How :func:`torch_solve` streams sites through the device, and the memory it expects."""
    dtype: str
    """Compute dtype (float32 or float64)."""
    sites_per_group: int
    """Sites copied to the device and solved together."""
    groups: int
    """Number of site groups."""
    budget_bytes: int
    """``opts.memory_budget``: what the working set may hold."""
    expected_peak_bytes: int
    """The working set the plan expects at its peak: one group's features and per-problem tensors, the
    transients of one site, the outputs (above the budget only when a single site does not fit)."""


@dataclass
class SolveResult:
    """Every problem's solution, its predictions on all rows, and the engine's report."""
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
        return {**asdict(self.plan), "newton_steps": self.newton_steps, "contractions": self.contractions,
                "converged": self.converged, "unconverged": self.unconverged}


class _Work:
    """Counts a solve's Newton steps, contractions and problems stopped at ``max_iter``."""

    def __init__(self) -> None:
        self.steps = 0
        self.contractions = 0
        self.unconverged = 0


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
    """The torch engine's compute dtype for ``opts``: ``opts.dtype``, or for ``auto`` float64 on a CPU
    and float32 on other devices."""
    if opts.dtype != "auto":
        return opts.dtype
    return "float64" if str(opts.device).split(":")[0] == "cpu" else "float32"


def gradient_tolerance(opts: ProbeOptions, dtype: str) -> float:
    """The relative gradient (max |gradient| / (C * training rows)) below which a problem has converged:
    ``tol / 100``, floored at what ``dtype`` can reach (``GRADIENT_FLOOR``)."""
    return max(opts.tol * 1e-2, GRADIENT_FLOOR[dtype])


def memory_plan(sites: int, rows: int, dim: int, problems: int, n_C: int, dtype: str, newton: bool,
                budget: int) -> SolvePlan:
    """Group the sites so that a group's working set fits ``budget`` bytes (at least one site a group).

    Per site: its centred features in the compute dtype (and a float32 copy for Newton's Hessian GEMM
    when computing in float64), about 16 per-row tensors per problem and 24 per-feature ones (Newton:
    6 Hessians per problem). Once: one site's squared features (a transient of the standardisation and
    the preconditioner), the masks, the cached row products (Newton, at most ``PRODUCTS_BUDGET``), and
    the outputs for all sites in float64 (weights, logits, means and scales)."""
    c = 8 if dtype == "float64" else 4
    per_site = rows * dim * c + problems * (16 * rows + 24 * (dim + 1)) * c
    if newton:
        per_site += (rows * dim * 4 if c == 8 else 0) + 6 * problems * (dim + 1) ** 2 * c
    fixed = rows * dim * c + problems * rows * c \
        + sites * problems * (n_C * (dim + rows + 1) + 2 * dim) * 8
    if newton:
        fixed += 4 * min(PRODUCTS_BUDGET, sites * rows * dim * (dim + 1) // 2)
    per_group = int(min(sites, max(1, (budget - fixed) // per_site)))
    groups = -(-sites // per_group)
    return SolvePlan(dtype, per_group, groups, int(budget), int(fixed + per_group * per_site))


def _load_group(Xs: Sequence[np.ndarray], idx: range, dtype, dev, work: _Work):
    """The features of the sites ``idx`` on ``dev`` in ``dtype``, each column centred on its mean over all
    rows (accumulated in float64): one [g, n, d] tensor, the only copy of the group."""
    import torch

    n, d = Xs[idx[0]].shape
    X = torch.empty(len(idx), n, d, dtype=dtype, device=dev)
    centre = torch.empty(len(idx), 1, d, dtype=torch.float64, device=dev)
    for j, i in enumerate(idx):
        X[j].copy_(torch.from_numpy(np.ascontiguousarray(Xs[i])))
        centre[j, 0] = X[j].mean(0, dtype=torch.float64)
        X[j] -= centre[j].to(dtype)
    work.contractions += 1
    return X, centre


def _forward(X, V):
    """``X v`` for every site and problem: [g, P, n] from X [g, n, d] and V [g, P, d] (a batched GEMM
    that reads ``X`` in place: ``einsum`` would copy it)."""
    import torch
    return torch.bmm(X, V.transpose(1, 2)).transpose(1, 2)


def _backward(X, r):
    """``X^T r`` for every site and problem: [g, P, d] from r [g, P, n]."""
    import torch
    return torch.bmm(r, X)


def _backward_squares(X, h):
    """``(X * X)^T h`` for every site and problem, one site's squares at a time: [g, P, d]."""
    import torch
    return torch.cat([torch.bmm(h[i:i + 1], (X[i] * X[i])[None]) for i in range(X.shape[0])])


def _masked_moments(X, M, work: _Work):
    """Per site and mask: the means and the second moments of the centred features, [g, P, d] each."""
    g = X.shape[0]
    n_tr = M.sum(1)[None, :, None]
    Mg = M.expand(g, *M.shape)
    work.contractions += 2
    return _backward(X, Mg) / n_tr, _backward_squares(X, Mg) / n_tr


STEP_FLOOR = {"float64": 1e-12, "float32": 1e-6}
"""A step on the standardised weights smaller than this (largest coordinate) is negligible: the problem stops."""

OBJECTIVE_SLACK = {"float64": 1e-12, "float32": 1e-6}
"""The line search accepts a step whose objective rises by at most this fraction (the dtype's rounding)."""


def torch_solve(Xs: Sequence[np.ndarray], y: np.ndarray, masks: list[np.ndarray], Cs: Sequence[float],
                opts: ProbeOptions) -> SolveResult:
    """Minimise every (site, mask, C) problem for P masks and K values of C (see :class:`SolveResult`).

    ``Xs`` are the sites' [n, d] features in any float dtype; they are read, never copied whole:
    sites are streamed through ``opts.device`` in the groups of :func:`memory_plan`. Standardisation
    depends on the mask only, so it is computed once per mask and group. The Cs are solved as a
    regularisation path: from the smallest C up, every mask's problems at once, each started from its
    solution at the previous C (warm starts need a few Newton steps where a cold start needs many);
    each solution is the same minimum a cold start reaches (the objective is strictly convex). Warns
    when a problem stops at ``max_iter``."""
    import torch

    dev = torch.device(opts.device)
    dname = compute_dtype(opts)
    dtype = getattr(torch, dname)
    S = len(Xs)
    n, d = np.shape(Xs[0])
    M = torch.as_tensor(np.stack(masks), dtype=dtype, device=dev)           # [P, n]
    P, K = M.shape[0], len(Cs)
    yy = torch.as_tensor(2.0 * np.asarray(y) - 1.0, dtype=dtype, device=dev)
    newton = d + 1 <= opts.newton_max_dim
    solve = _newton if newton else _newton_cg
    plan = memory_plan(S, n, d, P, K, dname, newton, opts.memory_budget)
    gtol = gradient_tolerance(opts, dname)
    work = _Work()
    W_out, b_out = np.zeros((S, P, K, d)), np.zeros((S, P, K))
    mu_out, sd_out, logits = np.zeros((S, P, d)), np.zeros((S, P, d)), np.zeros((S, P, K, n))
    n_tr = M.sum(1)[None, :, None].to(torch.float64)
    eps = float(np.finfo(np.float64).eps)
    for g0 in range(0, S, plan.sites_per_group):
        sl = slice(g0, min(S, g0 + plan.sites_per_group))
        X, centre = _load_group(Xs, range(sl.start, sl.stop), dtype, dev, work)
        mu, ex2 = _masked_moments(X, M, work)
        var = (ex2 - mu * mu).clamp_min(0).to(torch.float64)
        mu_raw = mu.to(torch.float64) + centre
        # constant features get scale 1, as scikit-learn's StandardScaler does (same tolerance)
        constant = var <= n_tr * eps * var + (n_tr * mu_raw * eps) ** 2
        sd = torch.where(constant, torch.ones_like(var), var.sqrt()).to(dtype)
        mu_out[sl], sd_out[sl] = mu_raw.cpu().numpy(), sd.to(torch.float64).cpu().numpy()
        extra = {}
        if newton:
            X32 = X if dtype == torch.float32 else X.to(torch.float32)   # the Hessian's GEMM: it only steers
            extra = {"X32": X32, "products": _row_products(X32)}
        W = torch.zeros(X.shape[0], P, d, dtype=dtype, device=dev)
        b = torch.zeros(X.shape[0], P, dtype=dtype, device=dev)
        for k in np.argsort(np.asarray(Cs, float), kind="stable"):
            C = torch.full((P,), float(Cs[k]), dtype=dtype, device=dev)
            W, b = solve(X, yy, M, C, mu, sd, opts, gtol, work, W, b, **extra)
            W_out[sl, :, k] = W.to(torch.float64).cpu().numpy()
            b_out[sl, :, k] = b.to(torch.float64).cpu().numpy()
            logits[sl, :, k] = _linear(X, mu, W / sd, b).to(torch.float64).cpu().numpy()
            work.contractions += 1
        del X, extra
    if work.unconverged:
        warnings.warn(f"torch probe engine: {work.unconverged} problem(s) stopped at max_iter={opts.max_iter} "
                      f"before the relative gradient reached {gtol:g} ({dname})", RuntimeWarning, stacklevel=2)
    return SolveResult(W_out, b_out, mu_out, sd_out, logits, plan, work.steps, work.contractions,
                       work.unconverged == 0, work.unconverged)


def _triu_products(Xc):
    """The outer products of the rows of ``Xc`` [n, d], upper triangle in ``triu_indices`` order: [n, T]
    (rows of the transpose multiplied slice by slice: several times faster than an index gather)."""
    import torch

    Xt = Xc.T.contiguous()
    return torch.cat([Xt[i:i + 1] * Xt[i:] for i in range(Xt.shape[0])], 0).T


def _row_products(X):
    """The rows' outer products, upper triangle, per site: a list of [n, d(d+1)/2] tensors, or None when
    they would hold more than ``PRODUCTS_BUDGET`` numbers in all (then :func:`_weighted_gram` builds them
    chunk by chunk at every call). Built once, they serve every Newton step of every problem."""
    S, n, d = X.shape
    T = d * (d + 1) // 2
    if S * n * T > PRODUCTS_BUDGET:
        return None
    return [_triu_products(X[i]) for i in range(S)]


def _weighted_gram(X, s, active=None, budget: int = 1 << 23, products=None):
    """``X^T diag(s_p) X`` for every site and active problem: [S, P, d, d] (zeros where inactive).

    One GEMM per site (and chunk of rows): the rows' outer products (upper triangle, ``n x d(d+1)/2``;
    ``products`` from :func:`_row_products`, or built chunk by chunk so at most ``budget`` numbers are
    held) times the weights ``s`` of every active problem at once. The flops equal a per-problem
    ``X^T S X``, but one large GEMM runs far faster on a CPU than many small ones over a broadcast copy
    of ``X``."""
    import torch

    S, n, d = X.shape
    P = s.shape[1]
    iu, ju = torch.triu_indices(d, d, device=X.device)
    T = iu.numel()
    out = torch.zeros(S, P, d, d, dtype=X.dtype, device=X.device)
    step = max(1, budget // max(1, T))
    for i in range(S):
        rows = torch.arange(P, device=X.device) if active is None else active[i].nonzero().flatten()
        if rows.numel() == 0:
            continue
        si = s[i, rows]                                                        # [p, n]
        if products is not None:
            G = si @ products[i]
        else:
            G = torch.zeros(rows.numel(), T, dtype=X.dtype, device=X.device)
            for j in range(0, n, step):
                Xc = X[i, j:j + step]
                G.addmm_(si[:, j:j + step], _triu_products(Xc))
        full = torch.zeros(rows.numel(), d, d, dtype=X.dtype, device=X.device)
        full[:, iu, ju] = G
        full[:, ju, iu] = G
        out[i, rows] = full
    return out


def _spd_solve(H, g, chunk: int = 256):
    """Solve H x = g for a batch of symmetric positive definite H [..., k, k] (Cholesky, in chunks)."""
    import torch

    shape = g.shape
    Hf = H.reshape(-1, shape[-1], shape[-1])
    gf = g.reshape(-1, shape[-1], 1)
    out = torch.empty_like(gf)
    eye = torch.eye(shape[-1], dtype=H.dtype, device=H.device)
    for i in range(0, Hf.shape[0], chunk):
        h = Hf[i:i + chunk]
        L, info = torch.linalg.cholesky_ex(h)
        if bool((info > 0).any()):  # numerically semi-definite (the intercept direction): add a ridge
            L, _ = torch.linalg.cholesky_ex(h + 1e-8 * (1 + h.diagonal(dim1=-2, dim2=-1).abs().amax(-1))[:, None, None]
                                            * eye)
        out[i:i + chunk] = torch.cholesky_solve(gf[i:i + chunk], L)
    return out.reshape(shape)


def _linear(X, mu, V, c):
    """``X v - mu.v + c`` for every site and problem: [S, P, n] (the logits on standardised features
    when ``V = W / sd``, without a standardised copy of ``X`` per problem)."""
    return _forward(X, V) - (mu * V).sum(-1, keepdim=True) + c[..., None]


def _objective(X, yy, M, C, mu, sd, work: _Work):
    """Every problem's objective ``C * sum(log-loss over its rows) + ||w||^2 / 2`` as a function of (W, b)."""
    import torch

    def objective(W, b):
        work.contractions += 1
        z = _linear(X, mu, W / sd, b)
        return C[None, :] * (M[None] * torch.nn.functional.softplus(-yy * z)).sum(-1) + 0.5 * (W * W).sum(-1)
    return objective


def _backtrack(objective, W, b, f, dW, db, active):
    """One damped step ``(W, b) - alpha * (dW, db)`` per problem: alpha starts at 1 for active problems
    (0 for the others) and halves until the objective does not rise beyond its rounding
    (``OBJECTIVE_SLACK``). Returns the new ``(W, b, f, active)``; a problem whose accepted step is
    negligible (``STEP_FLOOR``) is no longer active."""
    import torch

    dname = str(W.dtype).removeprefix("torch.")
    alpha = torch.where(active, torch.ones_like(f), torch.zeros_like(f))
    for _ in range(30):
        W_new = W - alpha[..., None] * dW
        b_new = b - alpha * db
        f_new = objective(W_new, b_new)
        bad = f_new > f + OBJECTIVE_SLACK[dname] * f.abs()
        if not bad.any():
            break
        alpha = torch.where(bad, alpha / 2, alpha)
    active = active & ((alpha[..., None] * dW).abs().amax(-1) >= STEP_FLOOR[dname])
    return W_new, b_new, torch.minimum(f_new, f), active


def _stop(active, gnorm, gtol: float, it: int, opts: ProbeOptions, work: _Work):
    """Drop the problems whose relative gradient is below ``gtol``; at ``max_iter`` count the rest as
    unconverged and drop them too. Returns the problems that take another step."""
    active = active & (gnorm >= gtol)
    if it == opts.max_iter and bool(active.any()):
        work.unconverged += int(active.sum())
        return active & False
    if bool(active.any()):
        work.steps += 1
    return active


def _newton(X, yy, M, C, mu, sd, opts: ProbeOptions, gtol: float, work: _Work, W=None, b=None, X32=None,
            products=None):
    """Batched damped Newton for every problem at once (small feature dimension).

    Works on the raw features: with ``v = w / sd``, ``z = X v - mu.v + b``; the
    Hessian of each problem in (w, b) is assembled from ``X^T diag(s) X`` without
    materialising a standardised copy of ``X`` per problem."""
    import torch

    S, P, d = mu.shape
    t = (yy + 1) / 2                                                           # [n] in {0, 1}
    W = torch.zeros(S, P, d, dtype=X.dtype, device=X.device) if W is None else W.clone()
    b = torch.zeros(S, P, dtype=X.dtype, device=X.device) if b is None else b.clone()
    eye = torch.eye(d + 1, dtype=X.dtype, device=X.device)
    eye[d, d] = 0
    objective = _objective(X, yy, M, C, mu, sd, work)
    f = objective(W, b)
    scale = C[None, :] * M.sum(1)[None, :]
    active = torch.ones(S, P, dtype=torch.bool, device=X.device)
    if X32 is None:
        X32 = X.to(torch.float32)   # the Hessian's GEMM in single precision: it only steers the step
    for it in range(opts.max_iter + 1):
        z = _linear(X, mu, W / sd, b)
        p = torch.sigmoid(z)
        r = C[None, :, None] * M[None] * (p - t)                               # [S, P, n]
        s = C[None, :, None] * M[None] * p * (1 - p)
        g_w = (_backward(X, r) - r.sum(-1, keepdim=True) * mu) / sd + W
        g_b = r.sum(-1)
        g = torch.cat([g_w, g_b[..., None]], -1)
        work.contractions += 2
        active = _stop(active, g.abs().amax(-1) / scale, gtol, it, opts, work)
        if not active.any():
            break
        Xs = _backward(X, s)
        ss = s.sum(-1, keepdim=True)
        XsX = _weighted_gram(X32, s.to(torch.float32), active, products=products).to(X.dtype)
        work.contractions += 2
        H_ww = XsX - Xs[..., :, None] * mu[..., None, :] - mu[..., :, None] * Xs[..., None, :] \
            + ss[..., None] * mu[..., :, None] * mu[..., None, :]
        H_ww = H_ww / sd[..., :, None] / sd[..., None, :]
        H_wb = (Xs - ss * mu) / sd
        H = torch.cat([torch.cat([H_ww, H_wb[..., :, None]], -1),
                       torch.cat([H_wb, ss], -1)[..., None, :]], -2) + eye
        step = torch.zeros_like(g)
        step[active] = _spd_solve(H[active], g[active])
        W, b, f, active = _backtrack(objective, W, b, f, step[..., :d], step[..., d], active)
        if not active.any():
            break
    return W, b


def _newton_cg(X, yy, M, C, mu, sd, opts: ProbeOptions, gtol: float, work: _Work, W=None, b=None):
    """Batched truncated Newton for every problem at once (large feature dimension).

    The same objective and parameterisation as :func:`_newton`, but each Newton direction is found
    by preconditioned conjugate gradients (Jacobi) on Hessian-vector products, two batched matrix
    products each, so no [d, d] matrix is ever formed. CG stops per problem at a relative residual of
    ``min(0.5, sqrt(|g| / scale))`` (a forcing sequence: inexact far from the optimum, tight near it);
    steps are backtracked per problem; a problem whose gradient is below tolerance takes no more steps."""
    import torch

    S, P, d = mu.shape
    t = (yy + 1) / 2
    W = torch.zeros(S, P, d, dtype=X.dtype, device=X.device) if W is None else W.clone()
    b = torch.zeros(S, P, dtype=X.dtype, device=X.device) if b is None else b.clone()

    def lin(V, c):
        return _linear(X, mu, V, c)

    objective = _objective(X, yy, M, C, mu, sd, work)

    def back(q):                                    # the transpose of lin for weights q [S, P, n]
        qs = q.sum(-1)
        return (_backward(X, q) - qs[..., None] * mu) / sd, qs

    f = objective(W, b)
    scale = C[None, :] * M.sum(1)[None, :]
    active = torch.ones(S, P, dtype=torch.bool, device=X.device)
    tiny = torch.finfo(X.dtype).tiny
    for it in range(opts.max_iter + 1):
        p = torch.sigmoid(lin(W / sd, b))
        gw, gb = back(C[None, :, None] * M[None] * (p - t))
        gw = gw + W
        work.contractions += 2
        gnorm = torch.maximum(gw.abs().amax(-1), gb.abs()) / scale
        active = _stop(active, gnorm, gtol, it, opts, work)
        if not active.any():
            break
        h = C[None, :, None] * M[None] * p * (1 - p)                          # [S, P, n]
        hs = h.sum(-1, keepdim=True)
        Xh = _backward(X, h)
        diag_w = (_backward_squares(X, h) - 2 * mu * Xh + mu * mu * hs) / (sd * sd) + 1
        diag_b = hs[..., 0].clamp_min(1e-12)
        work.contractions += 2
        eta = torch.clamp(gnorm.sqrt(), max=0.5)                               # forcing term per problem

        def hvp(uw, ub):
            work.contractions += 2
            hw, hb = back(h * lin(uw / sd, ub))
            return hw + uw, hb

        xw, xb = torch.zeros_like(W), torch.zeros_like(b)
        rw, rb = gw.clone(), gb.clone()
        zw, zb = rw / diag_w, rb / diag_b
        pw, pb = zw.clone(), zb.clone()
        rz = (rw * zw).sum(-1) + rb * zb
        r0 = torch.sqrt((rw * rw).sum(-1) + rb * rb)
        solving = active.clone()
        for _ in range(opts.cg_max_iter):
            Hw, Hb = hvp(pw, pb)
            pHp = (pw * Hw).sum(-1) + pb * Hb
            alpha = torch.where(solving, rz / pHp.clamp_min(tiny), torch.zeros_like(rz))
            xw, xb = xw + alpha[..., None] * pw, xb + alpha * pb
            rw, rb = rw - alpha[..., None] * Hw, rb - alpha * Hb
            solving &= torch.sqrt((rw * rw).sum(-1) + rb * rb) > eta * r0
            if not solving.any():
                break
            zw, zb = rw / diag_w, rb / diag_b
            rz_new = (rw * zw).sum(-1) + rb * zb
            beta = torch.where(solving, rz_new / rz.clamp_min(tiny), torch.zeros_like(rz))
            pw, pb = zw + beta[..., None] * pw, zb + beta * pb
            rz = torch.where(solving, rz_new, rz)
        W, b, f, active = _backtrack(objective, W, b, f, xw, xb, active)
        if not active.any():
            break
    return W, b
