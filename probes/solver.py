"""The solver behind the logistic probes: a batched torch engine and the scikit-learn reference fit.

:func:`torch_solve` minimises many L2-regularised logistic problems at once. Every (site, training
mask, C) is one problem; problems share the feature matrix of their site and differ by a mask of
training rows, so one ``einsum`` evaluates all of them. The Cs are solved as a regularisation path
(smallest first, each problem warm-started from its solution at the previous C). Up to
``newton_max_dim`` features each problem takes damped Newton steps (:func:`_newton`: all Hessians
from one GEMM per site, the rows' outer products built once times every problem's weights; the
GEMM in single precision, since the Hessian only steers the step, while gradient and objective
stay in double); above it, truncated Newton steps (:func:`_newton_cg`: conjugate gradients on
batched Hessian-vector products). Converged problems drop out of the work. The objective is
scikit-learn's, ``C * sum(log-loss) + ||w||^2 / 2`` on standardised features with an unpenalised
intercept, so :func:`torch_solve` and :func:`sklearn_fit` agree up to convergence.

The cross-validation protocol that poses these problems (folds, choice of C) is
:mod:`probes.logistic`.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .options import ProbeOptions


def sklearn_fit(X: np.ndarray, y: np.ndarray, mask: np.ndarray, C: float, opts: ProbeOptions):
    """The reference fit of one problem: a ``StandardScaler`` and scikit-learn's
    ``LogisticRegression(C)`` fitted on the rows ``mask`` of ``X``; returns ``(scaler, classifier)``."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    sc = StandardScaler().fit(X[mask])
    clf = LogisticRegression(C=C, max_iter=opts.max_iter, tol=opts.tol)
    clf.fit(sc.transform(X[mask]), y[mask])
    return sc, clf


def torch_solve(Xs: list[np.ndarray], y: np.ndarray, masks: list[np.ndarray], Cs: Sequence[float],
                opts: ProbeOptions) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
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
    per_group = max(1, PRODUCTS_BUDGET // max(1, X.shape[1] * d * (d + 1) // 2)) if newton else S
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


PRODUCTS_BUDGET = 1 << 26
"""Most numbers held at once in cached outer products of rows (single precision: 256 MiB)."""


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
