"""LEACE: least-squares concept erasure in closed form (Belrose et al. 2023).

Given activations X [n, d] and a concept Z (a binary/categorical label, or a matrix of
concept features), LEACE finds the affine map ``r(x) = x - proj (x - mean_x)`` that

1. makes the cross-covariance between ``r(X)`` and ``Z`` exactly zero, which is equivalent
   to *linear guardedness*: no linear predictor of Z from r(X) has lower loss (for any
   convex loss, e.g. the log-loss) than the best constant predictor; and
2. among all such maps moves the data the least, in mean squared distance (under any
   inner product, the paper's Theorem 4.1).

With ``W = Sigma_XX^(-1/2)`` (the whitening matrix; pseudo-inverse square root for a
rank-deficient covariance) and ``P`` the orthogonal projection onto the column space of
``W Sigma_XZ``, the eraser is ``proj = W^+ P W``, an *oblique* projection: it moves points
only along the columns of ``Sigma_XZ`` (for a binary label, the difference of class means),
by an amount read off in whitened coordinates.

Across layers (:func:`fit_leace_sequential`), the erasers are fitted in order, each on activations
already erased upstream, as Belrose et al. do for a whole network (section 6, "concept scrubbing"):
a later layer recomputes from the erased earlier one, so an eraser fitted on un-erased activations
guards the concept only for inputs it will no longer see.

Implemented here with numpy (float64) because the ``concept-erasure`` package is not
available offline; :meth:`LeaceEraser.as_affine` gives the same map as a
:class:`steering.hooks.Affine` edit for :func:`steering.hooks.steer`; the ``leace``
intervention (:mod:`interventions.steered`) applies exactly this eraser.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from steering.hooks import Affine

_EPS = np.finfo(np.float64).eps


def _concept_matrix(Z, n: int) -> np.ndarray:
    """``Z`` as a float64 matrix [n, k]: a 1-D label is one-hot encoded over its distinct values;
    a 2-D array is taken as concept features as given (a continuous concept is passed as [n, 1])."""
    a = np.asarray(Z)
    if a.ndim not in (1, 2):
        raise ValueError(f"Z must be a 1-D label vector [n] or a 2-D concept matrix [n, k]; got shape {a.shape}")
    if a.shape[0] != n:
        raise ValueError(f"Z has {a.shape[0]} rows but X has {n}")
    if a.ndim == 1:
        classes, idx = np.unique(a, return_inverse=True)
        if len(classes) < 2:
            raise ValueError(f"Z has a single class ({classes.tolist()}): there is no concept to erase")
        onehot = np.zeros((n, len(classes)), dtype=np.float64)
        onehot[np.arange(n), idx.reshape(-1)] = 1.0
        return onehot
    m = a.astype(np.float64)
    if m.shape[1] == 0:
        raise ValueError("Z has zero columns")
    if not np.all(np.isfinite(m)):
        raise ValueError("Z contains NaN or infinite values")
    return m


@dataclass(frozen=True, eq=False)
class LeaceEraser:
    """The fitted eraser ``x -> x - proj (x - mean)``.

    ``mean`` [d] is the training mean of X; ``proj`` [d, d] is ``W^+ P W`` (an oblique
    projection of rank = the number of erased directions). Both are stored read-only."""

    mean: np.ndarray
    proj: np.ndarray

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


def fit_leace(X, Z, shrinkage: float = 0.0) -> LeaceEraser:
    """Fit the LEACE eraser of concept ``Z`` from activations ``X`` [n, d].

    ``Z`` is a label vector [n] (binary or categorical, one-hot encoded internally) or a
    concept matrix [n, k] (centred internally). ``shrinkage`` in [0, 1] shrinks the
    covariance of X towards ``tr(Sigma)/d * I`` before whitening (useful when n is small
    relative to d); the cross-covariance guarantee holds for every value, least-squares
    optimality only at 0. Returns a :class:`LeaceEraser`."""
    A = np.asarray(X, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] < 2 or A.shape[1] == 0:
        raise ValueError(f"X must be a 2-D array [n, d] with n >= 2; got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ValueError("X contains NaN or infinite values")
    if not (0.0 <= float(shrinkage) <= 1.0):
        raise ValueError(f"shrinkage must be in [0, 1]; got {shrinkage!r}")
    n, d = A.shape
    Zm = _concept_matrix(Z, n)

    mean = A.mean(axis=0)
    Xc = A - mean
    Zc = Zm - Zm.mean(axis=0)
    sigma_xx = Xc.T @ Xc / n
    if shrinkage > 0:
        sigma_xx = (1 - shrinkage) * sigma_xx + shrinkage * (np.trace(sigma_xx) / d) * np.eye(d)
    sigma_xz = Xc.T @ Zc / n

    # Whitening W = Sigma^(-1/2) and its pseudo-inverse Sigma^(1/2), on the covariance's support.
    lam, V = np.linalg.eigh((sigma_xx + sigma_xx.T) / 2)
    top = float(lam.max()) if lam.size else 0.0
    if top <= 0:  # X is constant: nothing varies, nothing can predict Z
        return LeaceEraser(mean, np.zeros((d, d)))
    keep = lam > top * d * _EPS
    Vk, lk = V[:, keep], lam[keep]
    W = (Vk / np.sqrt(lk)) @ Vk.T
    W_pinv = (Vk * np.sqrt(lk)) @ Vk.T

    # P: orthogonal projection onto the column space of W Sigma_XZ.
    M = W @ sigma_xz
    U, s, _ = np.linalg.svd(M, full_matrices=False)
    if s.size == 0 or s[0] == 0:
        return LeaceEraser(mean, np.zeros((d, d)))
    Ur = U[:, s > s[0] * max(M.shape) * _EPS]
    proj = W_pinv @ (Ur @ (Ur.T @ W))
    return LeaceEraser(mean, proj)


def fit_leace_sequential(collect: Callable[[str, dict], np.ndarray], sites: Sequence[str], Z,
                         shrinkage: float = 0.0) -> dict[str, LeaceEraser]:
    """LEACE erasers for ``sites`` fitted layer by layer, in order (concept scrubbing, Belrose et al. 2023).

    ``collect(site, erasers)`` returns the activations [n, d] at ``site`` (rows aligned with ``Z``)
    computed with ``erasers`` (site -> :class:`LeaceEraser`, the ones fitted so far, all upstream of
    ``site``) applied. Each eraser is fitted on what the previous ones leave, so after applying all of
    them the cross-covariance with ``Z`` is zero at every site, on these inputs. Returns
    ``{site: eraser}`` in the order of ``sites``."""
    if not sites:
        raise ValueError("fit_leace_sequential needs at least one site")
    erasers: dict[str, LeaceEraser] = {}
    for site in sites:
        erasers[site] = fit_leace(collect(site, dict(erasers)), Z, shrinkage)
    return erasers
