"""Preprocessing as map-reduce passes: per-feature moments, standardization,
principal axes and PCA projection (:func:`fit_transform`). Writing the result
as a store - ingest's ``--standardize``/``--pca`` and store-to-store
preprocessing - is :mod:`infoclust_dask.io.preprocessed`, which calls these
(the store side calls the maths, never the other way).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import engine
from ._support.hints import DataLike, NumbersLike, SchedulerLike
from ._support.sizes import lazy_rows
from .kernels.stats import GRAM, MOMENTS

__all__ = [
    "principal_axes",
    "feature_moments",
    "fit_transform",
    "tall_svd",
]

@engine.entry_point
def principal_axes(X: DataLike, n_components: int = 2, *, scheduler: SchedulerLike = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
    st = engine.map_reduce(GRAM, X)
    n = float(st["n"])
    mean = st["s1"] / n
    cov = st["xtx"] / n - np.outer(mean, mean)
    vals, vecs = np.linalg.eigh((cov + cov.T) / 2)
    order = np.argsort(vals)[::-1][:n_components]
    axes = vecs[:, order].T
    return mean, _sign_fix(axes), vals[order]


def _sign_fix(axes):
    """A deterministic sign: the largest |component| of each axis is positive."""
    signs = np.sign(axes[np.arange(axes.shape[0]), np.abs(axes).argmax(axis=1)])
    signs[signs == 0] = 1.0
    return axes * signs[:, None]


@engine.entry_point
def feature_moments(X: DataLike, *, scheduler: SchedulerLike = None) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Per-feature mean and (population, ddof=0) standard deviation in one pass.

    The sums are taken about the first row (``moments_stats(shift=)``), so the
    variance stays accurate for data far from the origin. The kernel's
    numpy form runs at every size (``plain``): ``infoclust ingest``, which
    never loads the compiled loops, and a library call write the same
    standardized store, bit for bit. Returns ``(mean, std, n_samples,
    n_nonfinite)``.
    """
    a = engine.as_array(X)
    first = np.asarray(engine.compute(a[:1]), dtype=np.float64)[0]
    st = engine.map_reduce(MOMENTS, a, params={"shift": first, "plain": True})
    return moments_from_sums(st, first)


def moments_from_sums(st: dict, first: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, int]:
    """``(mean, std, n_samples, n_nonfinite)`` from the sums of the
    ``MOMENTS`` pass taken about the row ``first`` (:func:`feature_moments`;
    a caller may run that pass inside a larger graph)."""
    n = float(st["n"])
    with np.errstate(over="ignore", invalid="ignore"):  # squares beyond float64: NaN/inf, refused by the caller
        m1 = st["s1"] / n
        var = np.maximum(st["s2"] / n - m1 * m1, 0.0)
        return first + m1, np.sqrt(var), int(st["n"]), int(st["n_bad"])


@engine.entry_point
def fit_transform(X: DataLike, *, standardize: bool = False, pca: int | None = None, pca_method: str = "gram",
                  scheduler: SchedulerLike = None) -> tuple[Any, dict]:
    """Standardize and/or project onto the top ``pca`` principal components.

    Statistics come from map-reduce passes: the moments, then for PCA either
    ``pca_method="gram"`` (default: one pass reducing ``X^T X``, eigenvectors
    of the covariance on the driver, :func:`principal_axes`) or ``"tsqr"``
    (dask's out-of-core TSQR SVD of the centred data, :func:`tall_svd`;
    no squaring of the condition number, for data whose wanted components
    span many orders of magnitude of variance). Measured on a 2 GB store
    (docs/BENCHMARKS.md) TSQR took 34x a plain read, the Gram pass 0.7x:
    LAPACK's QR of each 64 MB block costs far more than its ``X^T X``. The
    transform itself is lazy for lazy input. Features with zero spread are
    left unscaled (divided by 1), as scikit-learn's StandardScaler does.

    Returns
    -------
    Xt : array (numpy for numpy input, else dask), float64
    info : dict
        ``feature_mean``, ``feature_std`` (of the input), and with PCA
        ``components`` (k, d, in the standardized space when both are asked),
        ``explained_variance`` (k,), ``explained_variance_ratio`` (k,).
    """
    a = engine.as_array(X)
    mean, std, n, n_bad = feature_moments(a)
    if n_bad:
        raise ValueError(
            f"The data contain {n_bad} NaN or infinite values; drop or impute them before preprocessing "
            "(CLI: `infoclust ingest --drop-nonfinite`)."
        )
    overflow = np.flatnonzero(~(np.isfinite(mean) & np.isfinite(std)))
    if overflow.size:
        j = int(overflow[0])
        raise ValueError(
            f"Feature {j} (and {overflow.size - 1} more) has values so large that their squares overflow float64 "
            f"(mean {mean[j]:.3g}, standard deviation {std[j]:.3g}): no distance between such rows is finite. "
            "Rescale the source first (e.g. divide those columns by a power of ten) so that values stay below "
            "about 1e150.")
    info = {"feature_mean": mean, "feature_std": std}
    scale = np.where(std > 0, std, 1.0) if standardize else np.ones_like(std)
    out = (a - mean) / scale if standardize else a
    if pca is not None:
        k = int(pca)
        d = a.shape[1]
        if not 1 <= k <= d:
            raise ValueError(f"pca must be between 1 and the number of features ({d}); got {pca}.")
        center = np.zeros(d) if standardize else mean
        if pca_method == "tsqr":
            s, vt = tall_svd(out, center=center)
            comps, var = _sign_fix(vt[:k]), s**2 / n
        elif pca_method == "gram":
            _, axes, var = principal_axes(out, d)
            comps, var = axes[:k], np.maximum(var, 0.0)
        else:
            raise ValueError(f"pca_method must be 'gram' or 'tsqr'; got {pca_method!r}.")
        info.update(components=comps, explained_variance=var[:k], explained_variance_ratio=var[:k] / var.sum())
        out = (out - center) @ comps.T
    if engine.is_lazy(out):
        out = out.astype(np.float64)
    else:
        out = np.asarray(out, dtype=np.float64)
    return out, info


@engine.entry_point
def tall_svd(data: DataLike, *, center: NumbersLike | None = None, scheduler: SchedulerLike = None
             ) -> tuple[np.ndarray, np.ndarray]:
    """Singular values and right singular vectors of a tall-and-skinny array.

    Uses dask's out-of-core direct TSQR SVD (``dask.array.linalg.svd``: a QR
    per row block, then one small QR and SVD of the stacked R factors), so no
    process ever holds more than one block; computed by the engine on the
    chosen scheduler. ``center`` (a row vector, e.g. the column means) is
    subtracted lazily first. Returns ``(s, vt)`` as numpy arrays of shapes
    ``(d,)`` and ``(d, d)``; the left factor is not formed.
    """
    import dask.array as da

    a = engine.as_array(data)
    if not engine.is_lazy(a):
        a = da.from_array(a, chunks=(max(lazy_rows(8 * a.shape[1]), a.shape[1]),) + a.shape[1:])
    if center is not None:
        a = a - np.asarray(center)[None, :]
    a = a.astype(np.float64)
    d = a.shape[1]
    if any(c < d for c in a.chunks[0]):  # TSQR needs blocks at least as tall as they are wide
        a = a.rechunk({0: max(d, max(a.chunks[0]))})
    _, s, vt = da.linalg.svd(a)
    s, vt = engine.compute((s, vt))
    return np.asarray(s), np.asarray(vt)
