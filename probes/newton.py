"""The batched Newton kernels of the torch probe solver (:func:`probes.solver.torch_solve`).

Every (site, mask, C) problem minimises ``C * sum(log-loss) + ||w||^2 / 2`` on standardised features.
:func:`newton` takes damped Newton steps (all Hessians from one GEMM per site over the rows' cached outer
products, in single precision: the Hessian only steers the step); :func:`newton_cg` takes truncated Newton
steps (conjugate gradients on batched Hessian-vector products). Products with a site group's features are
batched GEMMs that read the features in place (:func:`forward`, :func:`backward`); :class:`Work` counts
the steps and contractions. The line search and the negligible-step test use the compute dtype's rounding
(``OBJECTIVE_SLACK``, ``STEP_FLOOR``).
"""
from __future__ import annotations

from .options import ProbeOptions

PRODUCTS_BUDGET = 1 << 26
"""Most numbers held at once in cached outer products of rows (single precision: 256 MiB)."""



class Work:
    """Counts a solve's Newton steps, contractions and problems stopped at ``max_iter``."""

    def __init__(self) -> None:
        self.steps = 0
        self.contractions = 0
        self.unconverged = 0


def forward(X, V):
    """``X v`` for every site and problem: [g, P, n] from X [g, n, d] and V [g, P, d] (a batched GEMM
    that reads ``X`` in place: ``einsum`` would copy it)."""
    import torch
    return torch.bmm(X, V.transpose(1, 2)).transpose(1, 2)


def backward(X, r):
    """``X^T r`` for every site and problem: [g, P, d] from r [g, P, n]."""
    import torch
    return torch.bmm(r, X)


def backward_squares(X, h):
    """``(X * X)^T h`` for every site and problem, one site's squares at a time: [g, P, d]."""
    import torch
    return torch.cat([torch.bmm(h[i:i + 1], (X[i] * X[i])[None]) for i in range(X.shape[0])])


STEP_FLOOR = {"float64": 1e-12, "float32": 1e-6}
"""A step on the standardised weights smaller than this (largest coordinate) is negligible: the problem stops."""

OBJECTIVE_SLACK = {"float64": 1e-12, "float32": 1e-6}
"""The line search accepts a step whose objective rises by at most this fraction (the dtype's rounding)."""


def _triu_products(Xc):
    """The outer products of the rows of ``Xc`` [n, d], upper triangle in ``triu_indices`` order: [n, T]
    (rows of the transpose multiplied slice by slice: several times faster than an index gather)."""
    import torch

    Xt = Xc.T.contiguous()
    return torch.cat([Xt[i:i + 1] * Xt[i:] for i in range(Xt.shape[0])], 0).T


def row_products(X):
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
    ``products`` from :func:`row_products`, or built chunk by chunk so at most ``budget`` numbers are
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


def linear(X, mu, V, c):
    """``X v - mu.v + c`` for every site and problem: [S, P, n] (the logits on standardised features
    when ``V = W / sd``, without a standardised copy of ``X`` per problem)."""
    return forward(X, V) - (mu * V).sum(-1, keepdim=True) + c[..., None]


def _objective(X, yy, M, C, mu, sd, work: Work):
    """Every problem's objective ``C * sum(log-loss over its rows) + ||w||^2 / 2`` as a function of (W, b)."""
    import torch

    def objective(W, b):
        work.contractions += 1
        z = linear(X, mu, W / sd, b)
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


def _stop(active, gnorm, gtol: float, it: int, opts: ProbeOptions, work: Work):
    """Drop the problems whose relative gradient is below ``gtol``; at ``max_iter`` count the rest as
    unconverged and drop them too. Returns the problems that take another step."""
    active = active & (gnorm >= gtol)
    if it == opts.max_iter and bool(active.any()):
        work.unconverged += int(active.sum())
        return active & False
    if bool(active.any()):
        work.steps += 1
    return active


def newton(X, yy, M, C, mu, sd, opts: ProbeOptions, gtol: float, work: Work, W=None, b=None, X32=None,
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
        z = linear(X, mu, W / sd, b)
        p = torch.sigmoid(z)
        r = C[None, :, None] * M[None] * (p - t)                               # [S, P, n]
        s = C[None, :, None] * M[None] * p * (1 - p)
        g_w = (backward(X, r) - r.sum(-1, keepdim=True) * mu) / sd + W
        g_b = r.sum(-1)
        g = torch.cat([g_w, g_b[..., None]], -1)
        work.contractions += 2
        active = _stop(active, g.abs().amax(-1) / scale, gtol, it, opts, work)
        if not active.any():
            break
        Xs = backward(X, s)
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


def newton_cg(X, yy, M, C, mu, sd, opts: ProbeOptions, gtol: float, work: Work, W=None, b=None):
    """Batched truncated Newton for every problem at once (large feature dimension).

    The same objective and parameterisation as :func:`newton`, but each Newton direction is found
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
        return linear(X, mu, V, c)

    objective = _objective(X, yy, M, C, mu, sd, work)

    def back(q):                                    # the transpose of lin for weights q [S, P, n]
        qs = q.sum(-1)
        return (backward(X, q) - qs[..., None] * mu) / sd, qs

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
        Xh = backward(X, h)
        diag_w = (backward_squares(X, h) - 2 * mu * Xh + mu * mu * hs) / (sd * sd) + 1
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
