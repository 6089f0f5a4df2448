"""Preprocessing as map-reduce passes: per-feature moments, standardization,
principal axes and PCA projection, chunk size and codec for a new store, and
store-to-store preprocessing that never holds the data in one process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from . import engine
from ._support.hints import DataLike, NumbersLike, PathLike, SchedulerLike, Sequence
from ._support.sizes import lazy_rows
from .io.store import choose_chunk_rows, choose_codec
from .kernels.stats import GRAM, MOMENTS

__all__ = [
    "principal_axes",
    "feature_moments",
    "fit_transform",
    "preprocess_store",
    "write_preprocessed",
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


@engine.entry_point
def write_preprocessed(dest: PathLike, x: Any, info: dict, *, standardize: bool, pca: int | None,
                       n_folds: int | None = None, fold_seed: int = 0, chunks: int | None = None, codec: str = "auto",
                       label: Any = None, y: Any = None, class_names: Sequence[str] | None = None,
                       provenance: dict | None = None, overwrite: bool = False, progress: bool = False,
                       scheduler: SchedulerLike = None, dtype: Any = None, labels: dict | None = None,
                       extra_labels: dict | None = None, label_class_names: Any = None,
                       feature_names: Sequence[str] | None = None) -> tuple[Path, dict]:
    """Write ``x`` (from :func:`fit_transform`, with its ``info``) as a store:
    chunk size and codec chosen for the data, ``feature_mean``/``feature_std``
    (and PCA's ``components``) in the attributes, an optional hashed ``fold``
    vector. ``labels`` maps label variables to ``(codes, class names or
    None)`` (from :func:`infoclust_dask.io.ingest.read_source`; ``"label"``
    first); ``label``/``class_names``/``extra_labels`` are the arrays
    themselves. Returns ``(path, report)``, the report saying what was chosen."""
    from .io.folds import fold_vector
    from .io.store import write_dataset

    n, d = x.shape
    itemsize = np.dtype(dtype).itemsize if dtype is not None else 8
    rows = min(int(chunks) if chunks is not None else choose_chunk_rows(n, d, itemsize), n)
    extra_labels = dict(extra_labels or {})
    label_class_names = dict(label_class_names or {})
    for name, (codes, names) in (labels or {}).items():
        if name == "label":
            label, class_names = codes, names
        else:
            extra_labels[name] = codes
            if names is not None:
                label_class_names[name] = names
    codec, ratio = _codec_for(x, codec)
    prov = {**(provenance or {}), "standardized": bool(standardize), "pca": pca}
    attrs = {"feature_mean": info["feature_mean"].tolist(), "feature_std": info["feature_std"].tolist()}
    report = {"chunk_rows": rows, "codec": codec, "compression_ratio_lz4": round(ratio, 3),
              "standardized": bool(standardize), "pca": pca, "n_folds": n_folds}
    if pca is not None:
        attrs.update(components=info["components"].tolist(),
                     explained_variance_ratio=info["explained_variance_ratio"].tolist())
        report["explained_variance_ratio"] = float(np.sum(info["explained_variance_ratio"]))
    fold = None
    if n_folds:
        fold = fold_vector(n, n_folds, seed=fold_seed, chunks=rows)
        attrs.update(n_folds=int(n_folds), fold_seed=int(fold_seed))
    path = write_dataset(dest, x, label=label, y=y, fold=fold, chunks=rows, codec=codec, overwrite=overwrite,
                         class_names=class_names, provenance=prov, attrs=attrs, progress=progress, dtype=dtype, extra_labels=extra_labels or None,
                         label_class_names=label_class_names or None, feature_names=feature_names)
    return path, report


def preprocess_store(src: PathLike, dest: PathLike, *, standardize: bool = False, pca: int | None = None,
                     pca_method: str = "gram", n_folds: int | None = None, fold_seed: int = 0,
                     chunks: int | None = None, codec: str = "auto", overwrite: bool = False,
                     scheduler: SchedulerLike = None, progress: bool = False) -> tuple[Path, dict]:
    """Write a preprocessed copy of the store ``src`` at ``dest``, block by block.

    Keeps ``label`` / ``y`` and the provenance chain; stores ``feature_mean``,
    ``feature_std`` (of ``src``'s x) and, with PCA, ``components`` and
    ``explained_variance_ratio`` in the attributes; with ``n_folds`` adds a
    ``fold`` vector (hashed, seeded). Returns ``(path, report)``.
    """
    from .io.store import check_destination, open_dataset

    src, dest = Path(src), Path(dest)
    if src.resolve() == dest.resolve():
        raise ValueError(f"Source and destination are the same store ('{src}'); choose another destination.")
    check_destination(dest, overwrite)
    ds = open_dataset(src)
    with engine.installed(scheduler, data=ds["x"]):  # placed once, by the store's size
        x, info = fit_transform(ds["x"], standardize=standardize, pca=pca, pca_method=pca_method)
        path, report = write_preprocessed(
            dest, x, info, standardize=standardize, pca=pca, n_folds=n_folds, fold_seed=fold_seed, chunks=chunks,
            codec=codec, label=ds["label"].data if "label" in ds else None, y=ds["y"].data if "y" in ds else None,
            class_names=ds.attrs.get("class_names"), overwrite=overwrite, progress=progress,
            extra_labels={k: ds[k].data for k in ds.attrs.get("label_columns", []) if k in ds},
            feature_names=ds["x"].attrs.get("feature_names") if pca is None else None,
            label_class_names=ds.attrs.get("label_class_names"),
            provenance={**ds.attrs.get("provenance", {}), "derived_from": str(src.resolve())})
    return path, {"source": str(src), "rows": int(x.shape[0]), "features": int(x.shape[1]), **report}


def _codec_for(x, codec):
    """Resolve ``codec="auto"`` from the first rows of ``x``."""
    sample = engine.compute(x[: min(x.shape[0], 4096)])
    auto, ratio = choose_codec(sample)
    return (auto if codec == "auto" else codec), ratio
