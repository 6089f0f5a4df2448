"""Preprocessing statistics as map-reduce passes: moments and principal axes."""

from __future__ import annotations

import numpy as np

from . import engine
from ._kernels import gram_stats

__all__ = ["principal_axes"]


def principal_axes(X, n_components=2, *, scheduler=None):
    """Mean, top principal axes and their variances, from one pass.

    The covariance ``(X^T X)/n - mean mean^T`` is reduced from per-block
    ``X^T X`` (d x d) and diagonalised on the driver.

    Returns
    -------
    mean : ndarray (d,)
    axes : ndarray (n_components, d)
        Unit vectors, largest variance first.
    variances : ndarray (n_components,)
        Eigenvalues of the (biased, 1/n) covariance.
    """
    st = engine.map_reduce(gram_stats, X, scheduler=scheduler)
    n = float(st["n"])
    mean = st["s1"] / n
    cov = st["xtx"] / n - np.outer(mean, mean)
    vals, vecs = np.linalg.eigh((cov + cov.T) / 2)
    order = np.argsort(vals)[::-1][:n_components]
    axes = vecs[:, order].T
    # a deterministic sign: the largest |component| of each axis is positive
    signs = np.sign(axes[np.arange(axes.shape[0]), np.abs(axes).argmax(axis=1)])
    return mean, axes * signs[:, None], vals[order]
