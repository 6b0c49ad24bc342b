"""Closed-form concept erasure beside INLP: LEACE (Belrose, Schneider-Joseph, Ravfogel, Cotterell,
Raff & Biderman 2023) and the projection out of the class-mean differences.

Both are fitted once on vectors X (n, d) and labels y (n,), without training a probe, and both
leave no linear correlation between the erased vectors and the one-hot labels Z on the data they
were fitted on: ``Cov(r(X), Z) = 0``, so no linear classifier does better there than a constant one
(LEACE, Theorem 3.1). They differ in what they change to get there:

- ``mean_projection`` removes the span of the class-conditional means minus the global mean (the
  columns of Sigma_XZ, rank at most k - 1 for k classes) by an orthogonal projection, a
  ``NullspaceProjection`` as INLP's.
- ``leace`` is the affine eraser of least mean squared change among all that make the
  cross-covariance zero: with W = Sigma_XX^(-1/2) (the pseudo-inverse square root, on the support of
  Sigma_XX) and P the orthogonal projection onto colspace(W Sigma_XZ),
  ``r(x) = x - W^+ P W (x - mu_X)``. It removes as many directions as the mean projection, but
  obliquely: where X's directions are correlated, it takes the part of the property that the
  other directions do not predict, and moves the vectors less.

The arithmetic is float64 numpy. A covariance of lower rank than d (a constant dimension, a
dimension that copies others, fewer vectors than dimensions) is whitened on its support only:
eigenvalues at most ``tol`` times the largest count as zero, as ``torch.linalg.pinv``'s default does
(and concept-erasure's ``LeaceFitter``, the authors' code, which ``tests/test_erasure.py``
compares this one with).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from probing.information.amnesic import NullspaceProjection


def _checked(X: np.ndarray, y: np.ndarray, method: str) -> tuple[np.ndarray, np.ndarray]:
    """X as float64 (n, d) and y's class index per row (n,), or one line saying what is wrong."""
    X = np.asarray(X)
    y = np.asarray(y)
    if X.ndim != 2:
        raise ValueError(f"{method} needs vectors X of shape (n, d), got shape {X.shape}")
    if y.ndim != 1 or len(y) != len(X):
        raise ValueError(f"{method} needs one label per row of X: {len(X)} rows, labels of shape {y.shape}")
    X = X.astype(np.float64)
    if not np.isfinite(X).all():
        raise ValueError(f"X holds NaN or infinite values: {method} needs finite vectors")
    classes, index = np.unique(y, return_inverse=True)
    if len(classes) < 2:
        raise ValueError(f"{method} needs at least 2 classes to erase, got {len(classes)}"
                         + (f" ({classes[0]!r})" if len(classes) else ""))
    return X, index


def _numerical_rank(singular: np.ndarray, shape: tuple[int, int]) -> int:
    """How many of the (descending) singular values of a matrix of ``shape`` are not rounding."""
    if not len(singular) or singular[0] <= 0:
        return 0
    return int(np.sum(singular > singular[0] * max(shape) * np.finfo(np.float64).eps))


@dataclass(frozen=True)
class LeaceEraser:
    """The affine eraser ``r(x) = x - W^+ P W (x - mean)``, stored as its rank-r factors:
    ``apply(X)`` = X - ((X - mean) @ read.T) @ write, with read = (W U)^T and write = (W^+ U)^T
    (r, d), U (d, r) an orthonormal basis of colspace(W Sigma_XZ)."""

    mean: np.ndarray
    read: np.ndarray
    write: np.ndarray

    @property
    def dim(self) -> int:
        """d, the width of the vectors it erases."""
        return int(self.mean.shape[0])

    @property
    def rank(self) -> int:
        """r, how many directions it removes (at most the number of classes less one)."""
        return int(self.read.shape[0])

    def matrix(self) -> np.ndarray:
        """The linear part (d, d) float64 on row vectors: ``apply(X) = mean + (X - mean) @ matrix()``.
        Idempotent; symmetric only where X's covariance is isotropic on the removed span."""
        return np.eye(self.dim) - self.read.T @ self.write

    def apply(self, X: np.ndarray) -> np.ndarray:
        """X (n, d) -> X erased (n, d), computed in float64, returned in X's float dtype."""
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != self.dim:
            raise ValueError(f"the eraser is {self.dim}-d; the vectors are of shape {X.shape}")
        out_dtype = X.dtype if X.dtype in (np.float32, np.float64) else np.float64
        X64 = X.astype(np.float64)
        if self.rank == 0:
            return X64.astype(out_dtype)
        return (X64 - ((X64 - self.mean) @ self.read.T) @ self.write).astype(out_dtype)


def leace(X: np.ndarray, y: np.ndarray, tol: float | None = None, correlation_tol: float = 1e-10) -> LeaceEraser:
    """LEACE fitted on vectors X (n, d) and labels y (n,): the least-squares affine eraser after
    which no linear classifier of y does better than a constant on X.

    Sigma_XX and Sigma_XZ are the (biased, 1/n) covariances of X and of X with the one-hot labels;
    their scale cancels in the eraser. ``tol``: eigenvalues of Sigma_XX at most ``tol`` times the
    largest are its null space (default d * float64's epsilon, ``torch.linalg.pinv``'s). The
    removed rank is that of W Sigma_XZ (at most k - 1 for k classes): its singular values are
    covariances of unit-variance directions of X with the labels, at most 1/2 whatever X's scale,
    and those at most ``correlation_tol`` are rounding. Sigma_XZ is taken over the first k - 1
    classes: its k columns sum to zero, so they span the same space, and the k-th would only add
    a rounding direction (about 3e-15 on a covariance of condition number 1e6, above any
    threshold relative to the largest singular value that a well-conditioned one needs)."""
    X, index = _checked(X, y, "LEACE")
    n, d = X.shape
    mean = X.mean(axis=0)
    centred = X - mean
    Z = np.zeros((n, int(index.max())))  # one-hot, less the last class (see above)
    rows = index < Z.shape[1]
    Z[np.flatnonzero(rows), index[rows]] = 1.0
    sigma_xx = centred.T @ centred / n
    sigma_xz = centred.T @ (Z - Z.mean(axis=0)) / n
    eigenvalues, vectors = np.linalg.eigh((sigma_xx + sigma_xx.T) / 2)
    threshold = eigenvalues[-1] * (d * np.finfo(np.float64).eps if tol is None else float(tol))
    support = eigenvalues > threshold
    if not support.any():  # every vector the same: nothing varies, nothing to erase
        raise ValueError(f"X has no variance ({n} identical vectors of {d} dims): there is no direction to erase")
    root = np.sqrt(np.where(support, eigenvalues, 0.0))
    inverse_root = np.zeros(d)
    inverse_root[support] = 1.0 / root[support]
    W = (vectors * inverse_root) @ vectors.T
    W_pinv = (vectors * root) @ vectors.T
    M = W @ sigma_xz
    u, singular, _ = np.linalg.svd(M, full_matrices=False)
    U = u[:, :int(np.sum(singular > correlation_tol))]
    return LeaceEraser(mean, (W @ U).T.copy(), (W_pinv @ U).T.copy())


def mean_projection(X: np.ndarray, y: np.ndarray) -> NullspaceProjection:
    """The orthogonal projection removing the span of the class-conditional means of X (n, d)
    minus its global mean (at most k - 1 directions for k classes): the simplest eraser after
    which no linear classifier of y does better than a constant on X (the cross-covariance of
    the projected X with the one-hot labels is zero), at more change than LEACE where X's
    directions are correlated."""
    X, index = _checked(X, y, "mean projection")
    mean = X.mean(axis=0)
    counts = np.bincount(index)
    class_means = np.zeros((len(counts), X.shape[1]))
    np.add.at(class_means, index, X)
    differences = class_means / counts[:, None] - mean
    _, singular, vt = np.linalg.svd(differences, full_matrices=False)
    return NullspaceProjection(vt[:_numerical_rank(singular, differences.shape)].copy())


def mean_squared_change(before: np.ndarray, after: np.ndarray) -> float:
    """The mean over vectors of ||after - before||^2: what an eraser cost the vectors."""
    difference = np.asarray(after, dtype=np.float64) - np.asarray(before, dtype=np.float64)
    return float(np.mean(np.sum(difference * difference, axis=1)))


__all__ = ["LeaceEraser", "leace", "mean_projection", "mean_squared_change"]
