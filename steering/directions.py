"""Directions in activation space, estimated from labelled or paired activations.

Numpy in, numpy out; every computation is float64. Three estimators of a concept
direction and the control every steering method is compared against:

- :func:`diff_of_means`: mean of the ``z == 1`` rows minus mean of the ``z == 0`` rows;
- :func:`pca_paired`: top principal directions of paired differences ``Xa - Xb``
  (RepE-style reading vectors, Zou et al. 2023);
- :func:`probe_direction`: the weight vector of an L2 logistic-regression probe;
- :func:`random_like`: a seeded Gaussian direction with the same norm (the control).
"""
from __future__ import annotations

import numpy as np


def _matrix(X, name: str) -> np.ndarray:
    """``X`` as a finite float64 matrix [n, d]; ValueError naming ``name`` otherwise."""
    A = np.asarray(X, dtype=np.float64)
    if A.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array [n, d]; got shape {A.shape}")
    if A.shape[0] == 0 or A.shape[1] == 0:
        raise ValueError(f"{name} must be non-empty; got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return A


def _binary_labels(z, n: int, name: str = "z") -> np.ndarray:
    """``z`` as a boolean vector of length ``n`` (values must be 0/1 or booleans)."""
    a = np.asarray(z)
    if a.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of 0/1 labels; got shape {a.shape}")
    if a.shape[0] != n:
        raise ValueError(f"{name} has {a.shape[0]} labels but X has {n} rows")
    values = set(np.unique(a).tolist())
    if not values <= {0, 1, False, True}:
        raise ValueError(f"{name} must hold only 0/1 (or boolean) labels; got values {sorted(values)[:5]}")
    b = a.astype(bool)
    for cls in (0, 1):
        if int((b == bool(cls)).sum()) == 0:
            raise ValueError(f"{name} has no rows of class {cls}: both classes are needed")
    return b


def unit(v) -> np.ndarray:
    """``v`` scaled to unit L2 norm along its last axis (each row of a matrix separately).

    Returns a float64 array of ``v``'s shape; ValueError if ``v`` (or a row) has zero norm."""
    a = np.asarray(v, dtype=np.float64)
    if a.ndim == 0 or a.shape[-1] == 0:
        raise ValueError(f"v must be a non-empty vector (or matrix of row vectors); got shape {a.shape}")
    norms = np.linalg.norm(a, axis=-1, keepdims=True)
    if np.any(norms == 0) or not np.all(np.isfinite(norms)):
        raise ValueError("v has zero (or non-finite) norm: it has no direction")
    return a / norms


def random_like(v, seed: int) -> np.ndarray:
    """A random Gaussian direction with ``v``'s shape and the same L2 norm (row-wise for a matrix).

    Returns float64; the same ``seed`` gives the same vector. This is the control for
    every steering method: an edit of the same size in a direction that means nothing."""
    a = np.asarray(v, dtype=np.float64)
    if a.ndim == 0 or a.shape[-1] == 0:
        raise ValueError(f"v must be a non-empty vector (or matrix of row vectors); got shape {a.shape}")
    r = np.random.default_rng(seed).standard_normal(a.shape)
    return unit(r) * np.linalg.norm(a, axis=-1, keepdims=True)


def diff_of_means(X, z) -> np.ndarray:
    """Mean of the rows of ``X`` with ``z == 1`` minus the mean of the rows with ``z == 0``.

    Returns a float64 vector [d] (not normalised: its norm is the class separation)."""
    A = _matrix(X, "X")
    b = _binary_labels(z, A.shape[0])
    return A[b].mean(axis=0) - A[~b].mean(axis=0)


def pca_paired(Xa, Xb, k: int = 1, *, center: bool = False) -> np.ndarray:
    """Top-``k`` principal directions of the paired differences ``D = Xa - Xb`` (row i of Xa pairs row i of Xb).

    Returns a float64 array [k, d] of orthonormal rows, each sign-aligned so that the mean
    difference projects non-negatively on it.

    Centring: by default the differences are **not** centred, i.e. the directions are the
    right singular vectors of ``D`` itself (the principal axes of its second moment). Pairs
    here are ordered (``a`` is always the same side of the contrast), so the concept *is* the
    mean difference, and centring would subtract exactly the signal. RepE (Zou et al. 2023)
    centres because it shuffles the order within pairs, which makes the mean difference
    ~0; pass ``center=True`` for that variant (then the first direction is the axis of the
    largest variance of the differences around their mean).
    """
    A = _matrix(Xa, "Xa")
    B = _matrix(Xb, "Xb")
    if A.shape != B.shape:
        raise ValueError(f"Xa and Xb must have the same shape (rows are paired); got {A.shape} and {B.shape}")
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k must be a positive integer; got {k!r}")
    D = A - B
    mean = D.mean(axis=0)
    M = D - mean if center else D
    rank_max = min(M.shape)
    if k > rank_max:
        raise ValueError(f"k={k} exceeds the number of available directions min(n, d) = {rank_max}")
    _, s, Vt = np.linalg.svd(M, full_matrices=False)
    if s[k - 1] <= s[0] * max(M.shape) * np.finfo(np.float64).eps:
        raise ValueError(f"k={k}: the paired differences span fewer than {k} directions "
                         f"(singular values {np.round(s[:k], 12).tolist()})")
    V = Vt[:k].copy()
    signs = np.where(V @ mean < 0, -1.0, 1.0)
    return V * signs[:, None]


def probe_direction(X, z, C: float = 1.0) -> np.ndarray:
    """Unit-norm weight vector of an L2 logistic regression of ``z`` on ``X``, in raw feature space.

    The probe is fitted on standardised features (zero mean, unit variance per column;
    constant columns are left unscaled); its weights ``w`` act on ``(x - mu) / s``, so the
    raw-space direction is ``w / s``. Returns a float64 vector [d], pointing towards ``z == 1``."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    A = _matrix(X, "X")
    b = _binary_labels(z, A.shape[0])
    if not (np.isfinite(C) and C > 0):
        raise ValueError(f"C must be a positive finite number; got {C!r}")
    scaler = StandardScaler().fit(A)
    clf = LogisticRegression(C=C, max_iter=5000).fit(scaler.transform(A), b.astype(int))
    w = clf.coef_[0] / scaler.scale_
    if not np.any(w):
        raise ValueError("the probe's weights are all zero: X carries no linear signal about z at this C")
    return unit(w)
