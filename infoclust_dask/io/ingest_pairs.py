"""Two paired views into one store: ``x`` and ``y`` with the same rows (the
input of associative clustering, Sinkkonen, Kaski, Nikkilä & Lahti), from
the same kinds of sources as :func:`infoclust_dask.io.ingest.ingest` (.npy,
.npz, .csv, .parquet, a bundled name for ``x``). ``infoclust ingest X DEST
--y Y`` calls it."""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from .readers import IngestError
from .sources import read_source

__all__ = ["ingest_paired"]


def _dense(a: Any, what: str) -> np.ndarray:
    if hasattr(a, "tocsr"):
        raise IngestError(f"{what} is a sparse matrix; a paired store takes dense views (save it with np.save).")
    a = np.asarray(a)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2:
        raise IngestError(f"{what} has shape {a.shape}; give rows x features.")
    if a.dtype.kind not in "biuf":
        raise IngestError(f"{what} has dtype {a.dtype}; the features must be numbers.")
    return a


def _finite(a: np.ndarray, what: str) -> None:
    bad = ~np.isfinite(a)
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise IngestError(f"{what} has {int(bad.sum())} NaN/inf value(s), first at row {int(row)}, column "
                          f"{int(col)} ({a[row, col]}); clean or drop those rows in both views first.")


def _standardized(a: np.ndarray, what: str) -> np.ndarray:
    a = a.astype(np.float64)
    sd = a.std(axis=0)
    if np.any(sd == 0):
        raise IngestError(f"{what}: column(s) {np.flatnonzero(sd == 0)[:5].tolist()} are constant; "
                          "standardizing would divide by zero (drop them, or ingest without --standardize).")
    return (a - a.mean(axis=0)) / sd


def ingest_paired(x_src: Any, y_src: Any, dest: str | os.PathLike, *, label_column: Any = None,
                  labels: Any = None, standardize: bool = False, chunks: int | None = None,
                  dtype: str = "auto", overwrite: bool = False, encoding: str = "utf-8",
                  progress: bool = False) -> tuple[Any, dict]:
    """Read the two views, check that they pair (same number of rows, finite
    numbers), optionally standardize each by its own moments, and write one
    store with ``x``, ``y`` and the ``label`` of ``x``'s source if it has
    one. Returns ``(path, report)``; nothing is written when a check fails,
    and an existing ``dest`` is kept unless ``overwrite``."""
    from .store import write_dataset

    t0 = time.perf_counter()
    X, xlabels, xprov = read_source(x_src, label_column=label_column, labels=labels, encoding=encoding)
    Y, ylabels, yprov = read_source(y_src, encoding=encoding)
    X, Y = _dense(X, f"x ('{x_src}')"), _dense(Y, f"y ('{y_src}')")
    if X.shape[0] != Y.shape[0]:
        raise IngestError(f"x ('{x_src}') has {X.shape[0]} rows but y ('{y_src}') has {Y.shape[0]}: the two views "
                          "must hold the same samples in the same order.")
    _finite(X, f"x ('{x_src}')")
    _finite(Y, f"y ('{y_src}')")
    if standardize:
        X, Y = _standardized(X, f"x ('{x_src}')"), _standardized(Y, f"y ('{y_src}')")
    if dtype not in ("auto", "float32", "float64"):
        raise IngestError(f"dtype must be 'auto', 'float32' or 'float64'; got {dtype!r}.")
    store_dtype = None if dtype == "auto" else dtype
    codes, names = xlabels.get("label", (None, None))
    extra = {k: v[0] for k, v in xlabels.items() if k != "label"}
    path = write_dataset(dest, X, y=Y, label=codes, class_names=names, chunks=chunks, dtype=store_dtype,
                         overwrite=overwrite, progress=progress, extra_labels=extra or None,
                         label_class_names={k: v[1] for k, v in xlabels.items() if k != "label" and v[1]} or None,
                         provenance={"source": xprov.get("source"), "y_source": yprov.get("source"),
                                     "standardized": bool(standardize)})
    report = {"rows": int(X.shape[0]), "x_features": int(X.shape[1]), "y_features": int(Y.shape[1]),
              "label": codes is not None, "standardized": bool(standardize),
              "seconds": round(time.perf_counter() - t0, 2)}
    return path, report
