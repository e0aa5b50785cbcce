"""LEACE: least-squares concept erasure in closed form (Belrose et al. 2023), fitted by ``concept-erasure``.

The eraser ``r(x) = x - proj (x - mean)`` makes the cross-covariance between ``r(X)`` and the concept Z zero
(linear guardedness: no linear predictor of Z from r(X) beats the best constant) and, among such maps, moves
the data least (the paper's Theorem 4.1). ``proj = W^+ P W`` with ``W`` the whitening matrix of the covariance
of X and ``P`` the orthogonal projection onto the column space of ``W Sigma_XZ``."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from steering.hooks import Affine

# The library's (concept_erasure.LeaceFitter, Belrose et al.'s own package, with its defaults): the estimator
# (fit_leace). Ours (a thin adapter): the concept's encoding (concept_matrix); LeaceEraser, the fitted map as
# float64 mean/proj with LeaceEraser.as_affine so that steering.hooks.steer applies exactly this map at any model
# site and LeaceEraser.operator_norm; and fit_leace_sequential, the layer-by-layer fit over any sites through a
# collect callback (its docstring says why not the library's scrubber).


def concept_matrix(Z, n: int) -> np.ndarray:
    """``Z`` as the float64 concept matrix [n, k] handed to the library: a binary label vector becomes one 0/1
    column (as in the library's own examples), a categorical one (3+ classes) its one-hot encoding, and a 2-D
    array is taken as concept features as given (a continuous concept is passed as [n, 1])."""
    a = np.asarray(Z)
    if a.ndim not in (1, 2):
        raise ValueError(f"Z must be a 1-D label vector [n] or a 2-D concept matrix [n, k]; got shape {a.shape}")
    if a.shape[0] != n:
        raise ValueError(f"Z has {a.shape[0]} rows but X has {n}")
    if a.ndim == 1:
        classes, idx = np.unique(a, return_inverse=True)
        if len(classes) < 2:
            raise ValueError(f"Z has a single class ({classes.tolist()}): there is no concept to erase")
        idx = idx.reshape(-1)
        if len(classes) == 2:
            return (idx == 1).astype(np.float64)[:, None]
        return np.eye(len(classes))[idx]
    m = a.astype(np.float64)
    if m.shape[1] == 0:
        raise ValueError("Z has zero columns")
    if not np.all(np.isfinite(m)):
        raise ValueError("Z contains NaN or infinite values")
    return m


def _spectral_norm_of_identity_minus(left: np.ndarray, right: np.ndarray) -> float:
    """``||I - left @ right||_2`` for ``left`` [d, k], ``right`` [k, d], through the <= 2k-dimensional subspace
    where the map is not the identity (exact; a full SVD of a [d, d] matrix is slow at model widths)."""
    d = left.shape[0]
    if 2 * left.shape[1] >= d:
        return float(np.linalg.norm(np.eye(d) - left @ right, 2))
    Q, _ = np.linalg.qr(np.concatenate([left, right.T], axis=1))
    inner = np.linalg.norm(np.eye(Q.shape[1]) - (Q.T @ left) @ (right @ Q), 2)
    return float(max(inner, 1.0))  # on the complement of span(Q) the map is the identity


@dataclass(frozen=True, eq=False)
class LeaceEraser:
    """The fitted eraser ``x -> x - proj (x - mean)``.

    ``mean`` [d] is the training mean of X; ``proj`` [d, d] the library's ``I - P`` (an oblique projection of
    rank = the number of erased directions). Both are stored read-only. ``norm``: the operator norm, when
    already known (else computed on first use)."""

    mean: np.ndarray
    proj: np.ndarray
    norm: float | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        mean = np.array(self.mean, dtype=np.float64)
        proj = np.array(self.proj, dtype=np.float64)
        if mean.ndim != 1:
            raise ValueError(f"LeaceEraser.mean must be a vector [d]; got shape {mean.shape}")
        if proj.shape != (mean.shape[0], mean.shape[0]):
            raise ValueError(f"LeaceEraser.proj must be [d, d] = {(mean.shape[0],) * 2}; got shape {proj.shape}")
        mean.setflags(write=False)
        proj.setflags(write=False)
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "proj", proj)

    @property
    def dim(self) -> int:
        """Returns d, the dimension of the activations the eraser acts on."""
        return self.mean.shape[0]

    @property
    def rank(self) -> int:
        """Returns the number of directions erased (the rank of ``proj``)."""
        return int(np.linalg.matrix_rank(self.proj)) if np.any(self.proj) else 0

    @property
    def operator_norm(self) -> float:
        """The spectral norm of the map's linear part ``I - proj``: the most it stretches the difference of two
        activations (1 for an orthogonal projection; an ill-conditioned whitening makes it large)."""
        if self.norm is None:
            object.__setattr__(self, "norm", float(np.linalg.norm(np.eye(self.dim) - self.proj, 2)))
        return float(self.norm)

    def __call__(self, X) -> np.ndarray:
        """Returns the erased activations, float64, of ``X``'s shape ([d] or [n, d])."""
        A = np.asarray(X, dtype=np.float64)
        if A.ndim not in (1, 2) or A.shape[-1] != self.dim:
            raise ValueError(f"X must be [d] or [n, d] with d = {self.dim}; got shape {A.shape}")
        return A - (A - self.mean) @ self.proj.T

    def as_affine(self, strength: float = 1.0) -> Affine:
        """Returns the same map as a torch :class:`~steering.hooks.Affine` edit
        (``matrix = I - proj``, ``bias = proj @ mean``); ``strength`` interpolates from the identity."""
        import torch

        matrix = np.eye(self.dim) - self.proj
        bias = self.proj @ self.mean
        return Affine(torch.from_numpy(matrix), torch.from_numpy(bias), strength)


def check_shrinkage(shrinkage) -> bool:
    """``shrinkage`` if it is a bool (the library's option: its optimal linear shrinkage on or off), else a
    :class:`ValueError` naming it."""
    if not isinstance(shrinkage, (bool, np.bool_)):
        raise ValueError(f"shrinkage must be true or false (concept-erasure's optimal linear shrinkage of the "
                         f"covariance on or off); got {shrinkage!r}")
    return bool(shrinkage)


def fit_leace(X, Z, shrinkage: bool = True) -> LeaceEraser:
    """The LEACE eraser of concept ``Z`` from activations ``X`` [n, d], fitted by ``concept_erasure.LeaceFitter``
    in float64 with the library's defaults; ``shrinkage`` (default true, the library's default) turns its
    optimal linear shrinkage of the covariance on or off.

    ``Z`` is a label vector [n] (binary, or categorical and one-hot encoded) or a concept matrix [n, k]
    (:func:`concept_matrix`). Returns a :class:`LeaceEraser` with its operator norm.

    The covariance of X is the library's optimal linear shrinkage estimate (``shrinkage=True``, default;
    Ledoit-Wolf-type shrinkage toward ``tr(Sigma)/d I``) or the sample covariance (``shrinkage=False``); singular
    values of ``W Sigma_XZ`` under ``svd_tol`` 0.01 are dropped; the covariance-trace constraint is on. Without
    shrinkage, whitening an ill-conditioned covariance (activations often have a condition number of 1e7) gives
    an eraser that stretches activations hundreds of times (operator norm 375 on the organism's first layer);
    the shrunk estimate keeps it moderate and still zeroes the cross-covariance on the fitting data."""
    import torch
    from concept_erasure import LeaceFitter

    shrinkage = check_shrinkage(shrinkage)
    A = np.asarray(X, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] < 2 or A.shape[1] == 0:
        raise ValueError(f"X must be a 2-D array [n, d] with n >= 2; got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ValueError("X contains NaN or infinite values")
    Zm = concept_matrix(Z, A.shape[0])
    with torch.no_grad():
        eraser = LeaceFitter.fit(torch.from_numpy(A), torch.from_numpy(Zm), shrinkage=shrinkage).eraser
    left = eraser.proj_left.numpy()
    right = eraser.proj_right.numpy()
    mean = eraser.bias.numpy() if eraser.bias is not None else np.zeros(A.shape[1])
    return LeaceEraser(mean, left @ right, _spectral_norm_of_identity_minus(left, right))


def fit_leace_sequential(collect: Callable[[str, dict], np.ndarray], sites: Sequence[str], Z,
                         shrinkage: bool = True) -> dict[str, LeaceEraser]:
    """LEACE erasers for ``sites`` fitted layer by layer, in order (concept scrubbing, Belrose et al. 2023,
    section 6), over any sites: the library's own scrubber patches Llama and GPT-NeoX modules only and erases at
    every token, while the methods here read the decision token at ``blocks.<l>.resid_post`` of any supported
    model.

    ``collect(site, erasers)`` returns the activations [n, d] at ``site`` (rows aligned with ``Z``)
    computed with ``erasers`` (site -> :class:`LeaceEraser`, the ones fitted so far, all upstream of
    ``site``) applied. Each eraser is fitted (:func:`fit_leace`, ``shrinkage``) on what the previous ones
    leave, so after applying all of them the cross-covariance with ``Z`` is zero at every site, on these
    inputs. Returns ``{site: eraser}`` in the order of ``sites``."""
    if not sites:
        raise ValueError("fit_leace_sequential needs at least one site")
    erasers: dict[str, LeaceEraser] = {}
    for site in sites:
        erasers[site] = fit_leace(collect(site, dict(erasers)), Z, shrinkage)
    return erasers
