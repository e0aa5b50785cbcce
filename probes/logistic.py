"""L2-regularised logistic-regression probes with grouped, nested cross-validation.

One protocol, two engines:

- ``sklearn`` (the reference): for every site and outer fold, each ``C`` is
  scored by inner cross-validation on the outer-training rows, the best is
  refitted on all of them, and the held-out fold is predicted. Features are
  standardised on the rows each fit sees (a ``StandardScaler`` in the pipeline).
- ``torch``: the same fits, all at once. Every (site, outer fold, inner fold or
  refit, C) is one problem; problems share the feature matrix of their site and
  differ by a mask of training rows, so one ``einsum`` evaluates all of them.
  The Cs are solved as a regularisation path (smallest first, each problem
  warm-started from its solution at the previous C). Up to ``newton_max_dim``
  features each problem takes damped Newton steps (all Hessians from one GEMM
  per site: the rows' outer products, built once, times every problem's
  weights; the GEMM in single precision, since the Hessian only steers the step,
  while gradient and objective stay in double); above it, truncated Newton steps
  (conjugate gradients on batched Hessian-vector products). Converged problems
  drop out of the work. The objective is scikit-learn's,
  ``C * sum(log-loss) + ||w||^2 / 2`` on standardised features with an
  unpenalised intercept, so the two engines agree up to convergence (tests:
  probabilities within 1e-3, the same chosen C).

``engine="auto"`` picks by measurement (``benchmarks/bench_probes.py``): torch on
CUDA devices; on a CPU, torch with Newton for small feature dimensions
(``d + 1 <= newton_max_dim``) and scikit-learn above it (its L-BFGS needs fewer
flops than the batched truncated Newton there). Measured ratios are in the README
("Probes").

Folds are assigned here, not by either library, so both engines see exactly the
same splits: scenarios (groups) are dealt to folds in an order fixed by a seeded
hash, largest first, each to the fold with the fewest rows so far. No group is
ever in both the training and the test rows of a fit.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np


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

    def predict(self, X: np.ndarray) -> np.ndarray:
        """P(label = 1) for new rows from the all-rows probe."""
        if self.full_fit is None:
            raise ValueError("this result has no all-rows probe (fit with keep_full=True)")
        w, b, mu, sd = self.full_fit
        z = ((np.asarray(X, np.float64) - mu) / sd) @ w + b
        return _sigmoid(z)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    """The logistic function without overflow warnings for large |z|."""
    from scipy.special import expit
    return expit(z)


def _hash(seed: int, key: object) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}|{key}".encode()).digest()[:8], "big")


def grouped_folds(groups: np.ndarray, k: int, seed: int = 0) -> np.ndarray:
    """A fold index in ``0..k-1`` for every row; rows of one group share a fold; folds balanced by rows."""
    groups = np.asarray(groups)
    uniq, inverse, counts = np.unique(groups, return_inverse=True, return_counts=True)
    k = min(k, len(uniq))
    if k < 2:
        raise ValueError(f"grouped cross-validation needs at least 2 groups, got {len(uniq)}")
    order = sorted(range(len(uniq)), key=lambda g: (-counts[g], _hash(seed, uniq[g])))
    sizes = np.zeros(k, int)
    assign = np.empty(len(uniq), int)
    for g in order:
        f = int(np.argmin(sizes))
        assign[g] = f
        sizes[f] += counts[g]
    return assign[inverse]


def _plan(groups: np.ndarray, opts: ProbeOptions) -> tuple[np.ndarray, list[tuple[int, int, np.ndarray]]]:
    """Outer folds and the training masks of every fit: (outer fold, inner fold or -1 for refit, mask)."""
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


def _check(X: np.ndarray, y: np.ndarray, groups: np.ndarray) -> None:
    if X.ndim != 2:
        raise ValueError(f"features must be 2-D (rows x dims), got shape {X.shape}")
    if not (len(X) == len(y) == len(groups)):
        raise ValueError(f"features, labels and groups differ in length: {len(X)}, {len(y)}, {len(groups)}")
    if not np.isfinite(X).all():
        raise ValueError("features contain NaN or infinite values")
    if len(np.unique(y)) < 2:
        raise ValueError("probe labels have a single class; nothing to predict")


def _select(inner_acc: np.ndarray, Cs: tuple[float, ...]) -> int:
    """Index of the best C by mean inner accuracy (ties: the stronger regularisation)."""
    best = inner_acc.max()
    return int(np.flatnonzero(inner_acc >= best - 1e-12)[0])


def fit_sklearn(X: np.ndarray, y: np.ndarray, groups: np.ndarray, opts: ProbeOptions = ProbeOptions(),
                keep_full: bool = False) -> FoldResult:
    """The reference engine: nested grouped CV with scikit-learn, one site."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    X = np.asarray(X, np.float64)
    y = np.asarray(y).astype(int)
    groups = np.asarray(groups)
    _check(X, y, groups)
    outer, fits = _plan(groups, opts)

    def fit(mask, C):
        sc = StandardScaler().fit(X[mask])
        clf = LogisticRegression(C=C, max_iter=opts.max_iter, tol=opts.tol)
        clf.fit(sc.transform(X[mask]), y[mask])
        return sc, clf

    prob = np.zeros(len(y))
    chosen = []
    for f in range(outer.max() + 1):
        inner = [(m) for (ff, i, m) in fits if ff == f and i >= 0]
        acc = np.zeros(len(opts.Cs))
        for c, C in enumerate(opts.Cs):
            for m in inner:
                test = (outer != f) & ~m
                sc, clf = fit(m, C)
                acc[c] += (clf.predict(sc.transform(X[test])) == y[test]).mean() / len(inner)
        C = opts.Cs[_select(acc, opts.Cs)]
        chosen.append(C)
        sc, clf = fit(outer != f, C)
        prob[outer == f] = clf.predict_proba(sc.transform(X[outer == f]))[:, 1]
    res = FoldResult(prob, outer, chosen)
    if keep_full:
        C = max(set(chosen), key=chosen.count)
        sc, clf = fit(np.ones(len(y), bool), C)
        res.full_fit = (clf.coef_[0].copy(), float(clf.intercept_[0]), sc.mean_.copy(), sc.scale_.copy())
    return res


def _torch_solve(Xs, y, masks, Cs, opts: ProbeOptions):
    """Minimise every (site, mask, C) problem. Returns w [S,P,K,d], b [S,P,K], mu, sd [S,P,d] (numpy),
    for P masks and K values of C.

    Standardisation depends on the mask only, so it is computed once per mask. The Cs are solved as a
    regularisation path: from the smallest C up, every mask's problems at once, each started from
    its solution at the previous C (warm starts need a few Newton steps where a cold start needs
    many); each solution is the same minimum a cold start reaches (the objective is strictly convex)."""
    import torch

    dev = torch.device(opts.device)
    dtype = torch.float64 if dev.type == "cpu" else torch.float32
    raw = np.stack(Xs).astype(np.float64)                                  # [S, n, d]
    centre = raw.mean(1, keepdims=True)             # centred once: no cancellation in the variances below
    X = torch.as_tensor(raw - centre, dtype=dtype, device=dev)
    M = torch.as_tensor(np.stack(masks), dtype=dtype, device=dev)           # [P, n]
    yy = torch.as_tensor(2.0 * np.asarray(y) - 1.0, dtype=dtype, device=dev)
    n_tr = M.sum(1)                                                          # [P]
    mu = torch.einsum("pn,snd->spd", M, X) / n_tr[None, :, None]            # [S, P, d]
    ex2 = torch.einsum("pn,snd->spd", M, X * X) / n_tr[None, :, None]
    var = (ex2 - mu * mu).clamp_min(0)
    # constant features get scale 1, as scikit-learn's StandardScaler does (same tolerance)
    eps = float(np.finfo(np.float64).eps)
    mu_raw = mu + torch.as_tensor(centre, dtype=dtype, device=dev)
    nn_ = n_tr[None, :, None]
    constant = var <= nn_ * eps * var + (nn_ * mu_raw * eps) ** 2
    sd = torch.where(constant, torch.ones_like(var), var.sqrt())
    S, P, d = mu.shape
    newton = d + 1 <= opts.newton_max_dim
    solve = _newton if newton else _newton_cg
    K = len(Cs)
    W_out = np.zeros((S, P, K, d))
    b_out = np.zeros((S, P, K))
    # sites in groups whose rows' outer products (Newton) fit the products budget together
    per_group = max(1, _PRODUCTS_BUDGET // max(1, X.shape[1] * d * (d + 1) // 2)) if newton else S
    for g0 in range(0, S, per_group):
        sl = slice(g0, min(S, g0 + per_group))
        Xg, mug, sdg = X[sl], mu[sl], sd[sl]
        if newton:
            X32 = Xg.to(torch.float32)   # the Hessian's GEMM in single precision: it only steers the step
            extra = {"X32": X32, "products": _row_products(X32)}
        else:
            extra = {}
        W = torch.zeros(Xg.shape[0], P, d, dtype=dtype, device=dev)
        b = torch.zeros(Xg.shape[0], P, dtype=dtype, device=dev)
        for k in np.argsort(np.asarray(Cs, float), kind="stable"):
            C = torch.full((P,), float(Cs[k]), dtype=dtype, device=dev)
            W, b = solve(Xg, yy, M, C, mug, sdg, opts, W, b, **extra)
            W_out[sl, :, k] = W.cpu().numpy()
            b_out[sl, :, k] = b.cpu().numpy()
    return W_out, b_out, mu_raw.cpu().numpy(), sd.cpu().numpy()


def _triu_products(Xc):
    """The outer products of the rows of ``Xc`` [n, d], upper triangle in ``triu_indices`` order: [n, T]
    (rows of the transpose multiplied slice by slice: several times faster than an index gather)."""
    import torch

    Xt = Xc.T.contiguous()
    return torch.cat([Xt[i:i + 1] * Xt[i:] for i in range(Xt.shape[0])], 0).T


_PRODUCTS_BUDGET = 1 << 26
"""Most numbers held at once in cached outer products of rows (single precision: 256 MiB)."""


def _row_products(X):
    """The rows' outer products, upper triangle, per site: a list of [n, d(d+1)/2] tensors, or None when
    they would hold more than ``_PRODUCTS_BUDGET`` numbers in all (then :func:`_weighted_gram` builds them
    chunk by chunk at every call). Built once, they serve every Newton step of every problem."""
    S, n, d = X.shape
    T = d * (d + 1) // 2
    if S * n * T > _PRODUCTS_BUDGET:
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
    import torch
    return torch.einsum("snd,spd->spn", X, V) - (mu * V).sum(-1, keepdim=True) + c[..., None]


def _objective(X, yy, M, C, mu, sd):
    """Every problem's objective ``C * sum(log-loss over its rows) + ||w||^2 / 2`` as a function of (W, b)."""
    import torch

    def objective(W, b):
        z = _linear(X, mu, W / sd, b)
        return C[None, :] * (M[None] * torch.nn.functional.softplus(-yy * z)).sum(-1) + 0.5 * (W * W).sum(-1)
    return objective


def _backtrack(objective, W, b, f, dW, db, active):
    """One damped step ``(W, b) - alpha * (dW, db)`` per problem: alpha starts at 1 for active problems
    (0 for the others) and halves until the objective does not increase. Returns the new
    ``(W, b, f, active)``; a problem whose accepted step is negligible is no longer active."""
    import torch

    alpha = torch.where(active, torch.ones_like(f), torch.zeros_like(f))
    for _ in range(30):
        W_new = W - alpha[..., None] * dW
        b_new = b - alpha * db
        f_new = objective(W_new, b_new)
        bad = f_new > f + 1e-12 * f.abs()
        if not bad.any():
            break
        alpha = torch.where(bad, alpha / 2, alpha)
    active = active & ((alpha[..., None] * dW).abs().amax(-1) >= 1e-12)
    return W_new, b_new, torch.minimum(f_new, f), active


def _newton(X, yy, M, C, mu, sd, opts: ProbeOptions, W=None, b=None, X32=None, products=None):
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

    def logits(W, b):
        return _linear(X, mu, W / sd, b)

    objective = _objective(X, yy, M, C, mu, sd)
    f = objective(W, b)
    scale = C[None, :] * M.sum(1)[None, :]
    active = torch.ones(S, P, dtype=torch.bool, device=X.device)
    if X32 is None:
        X32 = X.to(torch.float32)   # the Hessian's GEMM in single precision: it only steers the step
    for _ in range(opts.max_iter):
        z = logits(W, b)
        p = torch.sigmoid(z)
        r = C[None, :, None] * M[None] * (p - t)                               # [S, P, n]
        s = C[None, :, None] * M[None] * p * (1 - p)
        Xr = torch.einsum("snd,spn->spd", X, r)
        g_w = (Xr - r.sum(-1, keepdim=True) * mu) / sd + W
        g_b = r.sum(-1)
        g = torch.cat([g_w, g_b[..., None]], -1)
        # a problem whose gradient is below tolerance is done: it takes no more steps
        active &= (g.abs().amax(-1) / scale) >= opts.tol * 1e-2
        if not active.any():
            break
        Xs = torch.einsum("snd,spn->spd", X, s)
        ss = s.sum(-1, keepdim=True)
        XsX = _weighted_gram(X32, s.to(torch.float32), active, products=products).to(X.dtype)
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


def _newton_cg(X, yy, M, C, mu, sd, opts: ProbeOptions, W=None, b=None):
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
    X2 = X * X

    def lin(V, c):
        return _linear(X, mu, V, c)

    objective = _objective(X, yy, M, C, mu, sd)

    def back(q):                                    # the transpose of lin for weights q [S, P, n]
        qs = q.sum(-1)
        return (torch.einsum("snd,spn->spd", X, q) - qs[..., None] * mu) / sd, qs

    f = objective(W, b)
    scale = C[None, :] * M.sum(1)[None, :]
    active = torch.ones(S, P, dtype=torch.bool, device=X.device)
    for _ in range(opts.max_iter):
        p = torch.sigmoid(lin(W / sd, b))
        gw, gb = back(C[None, :, None] * M[None] * (p - t))
        gw = gw + W
        gnorm = torch.maximum(gw.abs().amax(-1), gb.abs()) / scale
        active &= gnorm >= opts.tol * 1e-2
        if not active.any():
            break
        h = C[None, :, None] * M[None] * p * (1 - p)                          # [S, P, n]
        hs = h.sum(-1, keepdim=True)
        Xh = torch.einsum("snd,spn->spd", X, h)
        diag_w = (torch.einsum("snd,spn->spd", X2, h) - 2 * mu * Xh + mu * mu * hs) / (sd * sd) + 1
        diag_b = hs[..., 0].clamp_min(1e-12)
        eta = torch.clamp(gnorm.sqrt(), max=0.5)                               # forcing term per problem

        def hvp(uw, ub):
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
            alpha = torch.where(solving, rz / pHp.clamp_min(1e-300), torch.zeros_like(rz))
            xw, xb = xw + alpha[..., None] * pw, xb + alpha * pb
            rw, rb = rw - alpha[..., None] * Hw, rb - alpha * Hb
            solving &= torch.sqrt((rw * rw).sum(-1) + rb * rb) > eta * r0
            if not solving.any():
                break
            zw, zb = rw / diag_w, rb / diag_b
            rz_new = (rw * zw).sum(-1) + rb * zb
            beta = torch.where(solving, rz_new / rz.clamp_min(1e-300), torch.zeros_like(rz))
            pw, pb = zw + beta[..., None] * pw, zb + beta * pb
            rz = torch.where(solving, rz_new, rz)
        W, b, f, active = _backtrack(objective, W, b, f, xw, xb, active)
        if not active.any():
            break
    return W, b


def fit_torch(Xs: list[np.ndarray], y: np.ndarray, groups: np.ndarray, opts: ProbeOptions = ProbeOptions(),
              keep_full: bool = False) -> list[FoldResult]:
    """Nested grouped CV for every site at once (same splits and objective as :func:`fit_sklearn`)."""
    y = np.asarray(y).astype(int)
    groups = np.asarray(groups)
    Xs = [np.asarray(X, np.float64) for X in Xs]
    for X in Xs:
        _check(X, y, groups)
    outer, fits = _plan(groups, opts)
    masks = [m for _, _, m in fits] + ([np.ones(len(y), bool)] if keep_full else [])
    pos = {(f, i): j for j, (f, i, _) in enumerate(fits)}
    pos[(-1, -1)] = len(fits)
    W, b, mu, sd = _torch_solve(Xs, y, masks, opts.Cs, opts)
    out = []
    for s, X in enumerate(Xs):
        def prob(j, c, rows):
            z = ((X[rows] - mu[s, j]) / sd[s, j]) @ W[s, j, c] + b[s, j, c]
            return _sigmoid(z)
        p = np.zeros(len(y))
        chosen = []
        for f in range(outer.max() + 1):
            inner = [(i, m) for (ff, i, m) in fits if ff == f and i >= 0]
            acc = np.zeros(len(opts.Cs))
            for c in range(len(opts.Cs)):
                for i, m in inner:
                    test = (outer != f) & ~m
                    acc[c] += ((prob(pos[(f, i)], c, test) >= 0.5) == y[test]).mean() / len(inner)
            c = _select(acc, opts.Cs)
            chosen.append(opts.Cs[c])
            p[outer == f] = prob(pos[(f, -1)], c, outer == f)
        res = FoldResult(p, outer, chosen)
        if keep_full:
            c = opts.Cs.index(max(set(chosen), key=chosen.count))
            j = pos[(-1, -1)]
            res.full_fit = (W[s, j, c].copy(), float(b[s, j, c]), mu[s, j].copy(), sd[s, j].copy())
        out.append(res)
    return out


def resolved_engine(opts: ProbeOptions, dim: int | None = None) -> str:
    """The engine ``opts`` runs for features of dimension ``dim``: ``auto`` is torch on CUDA devices,
    and on a CPU torch up to ``newton_max_dim`` features and scikit-learn above (see the module docstring)."""
    if opts.engine != "auto":
        return opts.engine
    if str(opts.device).startswith("cuda"):
        return "torch"
    return "torch" if dim is not None and dim + 1 <= opts.newton_max_dim else "sklearn"


def fit_sites(Xs: list[np.ndarray], y: np.ndarray, groups: np.ndarray, opts: ProbeOptions = ProbeOptions(),
              keep_full: bool = False) -> list[FoldResult]:
    """Out-of-fold predictions for each site's features with the chosen engine."""
    if resolved_engine(opts, max((np.shape(X)[1] for X in Xs), default=None)) == "sklearn":
        return [fit_sklearn(X, y, groups, opts, keep_full) for X in Xs]
    return fit_torch(Xs, y, groups, opts, keep_full)
