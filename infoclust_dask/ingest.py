"""Ingest: .npy / .npz / .csv / .parquet files, a bundled dataset name, or an
existing store -> a dataset store.

Validation reports what is rejected with the row and column and the fix;
nothing is written unless the whole input is valid (the store write itself is
atomic, see :mod:`infoclust_dask.store`). Per-feature mean and standard
deviation are computed as a map-reduce pass and stored in the attributes;
standardization, PCA, a fold vector, the chunk size and the codec are
handled by :mod:`infoclust_dask.preprocess`.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from .datasets import BUNDLED, load_bundled

__all__ = ["read_source", "ingest", "IngestError"]


class IngestError(ValueError):
    """The source cannot be turned into a dataset store."""


def _read_csv(path: Path, label_column):
    with path.open(newline="") as fh:
        rows = [r for r in csv.reader(fh) if r and any(v.strip() for v in r)]
    if not rows:
        raise IngestError(f"'{path}' has no data rows.")
    header = None
    first_row = [v.strip() for v in rows[0]]
    n0 = sum(_is_number(v) for v in first_row)
    n1 = sum(_is_number(v) for v in rows[1]) if len(rows) > 1 else len(first_row)
    named = isinstance(label_column, str) and not label_column.lstrip("-").isdigit()
    if n0 == 0 or n0 < n1 or (named and label_column in first_row):
        header, rows = first_row, rows[1:]
    if not rows:
        raise IngestError(f"'{path}' has a header but no data rows.")
    width = len(header) if header is not None else len(rows[0])
    li = _label_index(header, label_column, width)
    X = np.empty((len(rows), width - (li is not None)), dtype=np.float64)
    labels = []
    first = 2 if header is not None else 1
    for r, row in enumerate(rows):
        line = r + first
        if len(row) != width:
            raise IngestError(
                f"'{path}' line {line} has {len(row)} fields, expected {width}: the file is "
                "ragged. Fix or remove that line."
            )
        j = 0
        for col, v in enumerate(row):
            if col == li:
                labels.append(v.strip())
                continue
            try:
                X[r, j] = float(v)
            except ValueError:
                name = f" ({header[col]!r})" if header is not None else ""
                raise IngestError(
                    f"'{path}' line {line}, column {col + 1}{name}: {v!r} is not a number. "
                    "Remove non-numeric columns or name the class column with --label-column."
                ) from None
            j += 1
    label = class_names = None
    if li is not None:
        class_names, label = np.unique(labels, return_inverse=True)
        class_names = [str(c) for c in class_names]
    return X, label, class_names


def _is_number(v):
    try:
        float(v)
    except ValueError:
        return False
    return True


def _label_index(header, label_column, width):
    if label_column is None:
        return None
    if isinstance(label_column, int) or str(label_column).lstrip("-").isdigit():
        i = int(label_column)
        if width is not None:
            i = i % width if i < 0 else i
            if not 0 <= i < width:
                raise IngestError(f"--label-column {label_column} is out of range for {width} columns.")
        return i
    if header is None:
        raise IngestError(f"--label-column {label_column!r} names a column but the file has no header.")
    if label_column not in header:
        raise IngestError(f"No column named {label_column!r}; the header has {header}.")
    return header.index(label_column)


def _read_parquet(path: Path, label_column):
    import pandas as pd

    try:
        df = pd.read_parquet(path)
    except ImportError as exc:  # pragma: no cover - pyarrow is a dependency
        raise IngestError(f"Reading '{path}' needs pyarrow: pip install pyarrow ({exc}).") from exc
    if df.shape[0] == 0:
        raise IngestError(f"'{path}' has no rows.")
    cols = [str(c) for c in df.columns]
    li = _label_index(cols, label_column, len(cols))
    label = class_names = None
    if li is not None:
        class_names, label = np.unique(df.iloc[:, li].astype(str).to_numpy(), return_inverse=True)
        class_names = [str(c) for c in class_names]
        df = df.drop(columns=df.columns[li])
    for name, dtype in df.dtypes.items():
        if not (pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype)):
            bad = df[name].map(lambda v: not _is_number(str(v)) and v is not None)
            row = int(np.flatnonzero(bad.to_numpy())[0]) if bad.any() else 0
            raise IngestError(
                f"'{path}' column {name!r} has dtype {dtype} (e.g. row {row}: {df[name].iloc[row]!r}), "
                "not numbers. Drop that column or name the class column with --label-column."
            )
    return df.to_numpy(dtype=np.float64, na_value=np.nan), label, class_names


def read_source(src, *, label_column=None):
    """Read ``src`` into ``(X, label or None, class_names or None, provenance)``.

    ``src`` is a bundled dataset name (``letter``, ``satimage``, ``digits``,
    ``wine``, ``iris``), a ``.npy`` file (x only), a ``.npz`` file (arrays
    ``x`` and optionally ``label``), a ``.csv`` file (numeric columns; an
    optional header; ``label_column`` by index or name holds the classes) or
    a ``.parquet`` file (numeric columns; ``label_column`` by name or index).
    """
    s = str(src)
    if s in BUNDLED:
        X, c, names = load_bundled(s)
        return X, c, names, {"source": f"bundled:{s}"}
    path = Path(s)
    if not path.exists():
        raise FileNotFoundError(
            f"No file '{path}' and no bundled dataset of that name (bundled: {sorted(BUNDLED)})."
        )
    suffix = path.suffix.lower()
    prov = {"source": str(path.resolve())}
    if suffix == ".npy":
        return np.load(path, allow_pickle=False), None, None, prov
    if suffix == ".npz":
        with np.load(path, allow_pickle=False) as z:
            if "x" not in z:
                raise IngestError(f"'{path}' has no array 'x' (it has {list(z.keys())}).")
            return z["x"], (z["label"] if "label" in z else None), None, prov
    if suffix in (".csv", ".txt"):
        X, label, names = _read_csv(path, label_column)
        return X, label, names, prov
    if suffix in (".parquet", ".pq"):
        X, label, names = _read_parquet(path, label_column)
        return X, label, names, prov
    raise IngestError(
        f"Cannot ingest '{path}': use .npy, .npz, .csv, .parquet, a store or a bundled dataset name."
    )


def _is_store(src) -> bool:
    p = Path(str(src))
    return p.is_dir() and (p / "zarr.json").exists()


def ingest(src, dest, *, label_column=None, drop_nonfinite=False, standardize=False, pca=None, pca_method="gram",
           n_folds=None, fold_seed=0, chunks=None, codec="auto", overwrite=False, progress=False,
           scheduler=None, binary=False):
    """Read ``src``, validate, optionally standardize / project, and write a store at ``dest``.

    ``src`` may also be an existing store, which is then preprocessed block by
    block (:func:`infoclust_dask.preprocess.preprocess_store`) instead of
    being read into memory.

    Parameters
    ----------
    standardize : bool
        Subtract the per-feature mean and divide by the standard deviation.
    pca : int, optional
        Project onto the top ``pca`` principal components (after
        standardization when both are asked).
    pca_method : {"gram", "tsqr"}
        One ``X^T X`` pass (default) or dask's out-of-core TSQR SVD; see
        :func:`~infoclust_dask.preprocess.fit_transform`.
    n_folds : int, optional
        Also store a ``fold`` vector for cross-validation (seeded by ``fold_seed``).
    chunks : int, optional
        Rows per chunk; default from :func:`~infoclust_dask.preprocess.choose_chunk_rows`.
    codec : {"auto", "lz4", "zstd", "none"}
        ``"auto"`` keeps LZ4 only when it shrinks the data by >= 15 %.
    binary : bool
        The features are binary (0/1, e.g. documents x terms for CMBC):
        stored as uint8, one byte per value; any other value is an error.
        Not with ``standardize`` or ``pca``.

    Returns ``(path, report)``; the report says what was read, rejected and
    dropped, and which chunk size and codec were chosen.
    """
    from .preprocess import fit_transform, preprocess_store, write_preprocessed
    from .store import check_destination

    if codec not in ("auto", "lz4", "zstd", "none"):
        raise IngestError(f"codec must be 'auto', 'lz4', 'zstd' or 'none'; got {codec!r}.")
    check_destination(dest, overwrite)
    if binary and (standardize or pca is not None):
        raise IngestError("binary=True keeps the 0/1 values as they are; it cannot be combined with "
                          "standardize or pca.")
    if _is_store(src):
        return preprocess_store(src, dest, standardize=standardize, pca=pca, pca_method=pca_method, n_folds=n_folds,
                                fold_seed=fold_seed, chunks=chunks, codec=codec, overwrite=overwrite,
                                scheduler=scheduler, progress=progress)
    X, label, names, prov = read_source(src, label_column=label_column)
    X = np.asarray(X)
    if X.ndim == 1:
        raise IngestError(f"The data from {src!r} are 1-D (shape {X.shape}); reshape to (n, 1) first.")
    if not np.issubdtype(X.dtype, np.number):
        raise IngestError(f"The data from {src!r} have dtype {X.dtype}; they must be numeric.")
    report = {"source": prov["source"], "rows_read": int(X.shape[0]), "features": int(X.shape[1]),
              "rejected": []}
    bad = ~np.isfinite(X).all(axis=1)
    if bad.any():
        first = np.flatnonzero(bad)[:5].tolist()
        cols = np.flatnonzero(~np.isfinite(X[bad]).all(axis=0))[:5].tolist()
        if not drop_nonfinite:
            raise IngestError(
                f"{int(bad.sum())} row(s) of {src!r} contain NaN or inf (first at rows {first}, "
                f"0-based; columns {cols}). Re-run with --drop-nonfinite to drop them."
            )
        X = X[~bad]
        label = None if label is None else np.asarray(label)[~bad]
        report["rows_dropped_nonfinite"] = int(bad.sum())
        report["rejected"].append({"reason": "NaN or inf", "rows": int(bad.sum()), "first_rows": first,
                                   "columns": cols})
    if X.shape[0] == 0:
        raise IngestError(f"No rows of {src!r} are left after dropping non-finite rows.")
    if binary:
        bad = np.unique(X[(X != 0) & (X != 1)])
        if bad.size:
            raise IngestError(f"--binary: the data from {src!r} hold values other than 0 and 1 "
                              f"({bad[:5].tolist()}); binarize them first.")
        Xt = X.astype(np.uint8)
        info = {"feature_mean": Xt.mean(axis=0), "feature_std": Xt.std(axis=0)}
    else:
        Xt, info = fit_transform(X.astype(np.float64, copy=False), standardize=standardize, pca=pca,
                                 pca_method=pca_method, scheduler=scheduler)
    path, written = write_preprocessed(
        dest, Xt, info, standardize=standardize, pca=pca, n_folds=n_folds, fold_seed=fold_seed, chunks=chunks,
        codec=codec, label=label, class_names=names, provenance=prov, overwrite=overwrite, progress=progress,
        scheduler=scheduler, dtype=np.uint8 if binary else None)
    report.update(rows_written=int(Xt.shape[0]), features_written=int(Xt.shape[1]), **written)
    return path, report
