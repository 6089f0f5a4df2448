"""Ingest: .npy / .npz / .csv / .parquet files, a bundled dataset name, or an
existing store -> a dataset store.

Validation reports what is rejected with the row and column and the fix;
nothing is written unless the whole input is valid (the store write itself is
atomic, see :mod:`infoclust_dask.io.store`). Per-feature mean and standard
deviation are computed as a map-reduce pass and stored in the attributes;
standardization, PCA, a fold vector, the chunk size and the codec are
handled by :mod:`infoclust_dask.preprocess`.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import engine
from ..datasets import BUNDLED
from ..preprocess import fit_transform
from ..storage.paths import local_path, url_protocol
from . import readers as _readers
from .preprocessed import preprocess_store, write_preprocessed
from .readers import IngestError
from .sources import _TABLES, _finish_labels, _open_table, _table_labels, read_source

__all__ = ["read_source", "ingest", "IngestError", "existing_store_differences"]


def _is_store(src) -> bool:
    p = Path(str(src))
    return p.is_dir() and (p / "zarr.json").exists()


def existing_store_differences(dest: str | os.PathLike, src: Any, *, standardize: bool = False,
                               pca: int | None = None, n_folds: int | None = None, fold_seed: int = 0,
                               storage_options: dict | None = None) -> list[str] | None:
    """How the store at ``dest`` differs from what ``ingest(src, dest, ...)``
    with these options would write: ``None`` when there is no store there,
    ``[]`` when it was written from the same source with the same options
    (a scheduled ingest can then keep it), else one line per difference.
    A source file modified after the store was written counts as a
    difference; other options (chunks, codec, dtype) do not change the
    data and are not compared."""
    from datetime import datetime

    from .store import StoreError, open_dataset

    try:
        ds = open_dataset(dest, storage_options=storage_options)
    except (FileNotFoundError, StoreError):
        return None
    prov = dict(ds.attrs.get("provenance") or {})
    s = str(src)
    want_source = f"bundled:{s}" if s in BUNDLED else str(local_path(s, "source file").resolve())
    out = []
    if prov.get("source") != want_source:
        out.append(f"source: the store holds {prov.get('source')!r}, asked {want_source!r}")
    elif s not in BUNDLED and prov.get("created"):
        modified = datetime.fromtimestamp(Path(want_source).stat().st_mtime).astimezone()
        if modified > datetime.fromisoformat(prov["created"]):
            out.append(f"source: {want_source} was modified ({modified.isoformat(timespec='seconds')}) after the "
                       f"store was written ({prov['created']})")
    for name, have, want in (("standardize", bool(prov.get("standardized")), bool(standardize)),
                             ("pca", prov.get("pca"), pca),
                             ("n_folds", ds.attrs.get("n_folds"), n_folds),
                             ("fold_seed", ds.attrs.get("fold_seed", 0) if n_folds else 0, fold_seed if n_folds else 0)):
        if have != want:
            out.append(f"{name}: the store has {have!r}, asked {want!r}")
    return out


@engine.entry_point
def ingest(src: Any, dest: str | os.PathLike, *, label_column: str | None = None, drop_nonfinite: bool = False,
           standardize: bool = False, pca: int | None = None, pca_method: str = "gram", n_folds: int | None = None,
           fold_seed: int = 0, chunks: int | None = None, codec: str = "auto", overwrite: bool = False,
           progress: bool = False, scheduler: Any = None, binary: bool = False, labels: Any = None,
           encoding: str = "utf-8", dtype: str = "auto", append: bool = False,
           storage_options: dict | None = None, columns: Sequence[Any] | None = None,
           drop_columns: Sequence[Any] | None = None, impute: str = "none") -> tuple[Any, dict]:
    """Read ``src``, validate, optionally standardize / project, and write a store at ``dest``
    (a local path, or an fsspec URL such as ``s3://bucket/d.zarr``).

    ``src`` may also be an existing store, which is then preprocessed block by
    block (:func:`infoclust_dask.io.preprocessed.preprocess_store`) instead of
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
        Rows per chunk; default from :func:`~infoclust_dask.io.store.choose_chunk_rows`.
    codec : {"auto", "lz4", "zstd", "none"}
        ``"auto"`` keeps LZ4 only when it shrinks the data by >= 15 %.
    binary : bool
        The features are binary (0/1, e.g. documents x terms for CMBC):
        stored as uint8, one byte per value; any other value is an error.
        Not with ``standardize`` or ``pca``.
    dtype : {"auto", "float32", "float64"}, default="auto"
        Float type of ``x`` on disk. ``"auto"`` keeps the source's: float32
        data (a float32 ``.npy`` or array) stay float32 - half the disk and
        half the reading of every later pass - anything else is float64
        (CSV and parquet values are parsed as float64).
    label_column : int, str or list of them, optional
        CSV/parquet column(s) with classes or known clusterings; the first is
        stored as ``label``, the others under their header names.
    encoding : str, default="utf-8"
        Text encoding of a CSV file (e.g. ``"latin-1"``).
    labels : path, optional
        A ``.npy``/``.npz`` file of label columns (see :func:`read_source`),
        e.g. the known clusterings that go with a sparse ``.npz``.
    columns, drop_columns : list of str or int, optional
        CSV/parquet only: the feature columns to keep (by header name or
        0-based index; default every column that is not a label column), or
        columns to leave out (a text column of ids, a date). A column is a
        feature, a label or dropped, never two.
    impute : {"none", "mean"}, default="none"
        Missing values (empty fields and ``NA`` strings in a CSV, nulls in
        parquet, NaN in an array): ``"none"`` refuses the rows that hold
        them (or drops them with ``drop_nonfinite``); ``"mean"`` replaces each
        by its column's mean over the rows where it is present (one more
        pass; the report says how many values of which columns). Infinite
        values are never imputed. Not with ``append`` (appended rows must
        be complete).

    A scipy sparse ``.npz`` (``scipy.sparse.save_npz``) is written chunk by
    chunk: each stored chunk is densified on its own (one chunk of rows,
    ~64 MB), never the whole matrix, so documents x terms at 1e5+ columns
    fit. Its values are kept as they are (``binary`` stores them as uint8).

    append : bool, default=False
        Add the rows of ``src`` to the existing store ``dest`` instead
        (:func:`infoclust_dask.io.append.append_dataset`: all at once or not
        at all; the store's preprocessing, folds and class names apply, so
        ``standardize``, ``pca``, ``n_folds``, ``chunks``, ``codec``,
        ``binary`` and ``dtype`` are the store's and may not be given).
    storage_options : dict, optional
        fsspec options of a URL ``dest`` (never credentials).

    Returns ``(path, report)``; the report says what was read, rejected and
    dropped, and which chunk size and codec were chosen. A store at a URL
    is returned as its URL.
    """
    from .store import check_destination

    if impute not in ("none", "mean"):
        raise IngestError(f"impute must be 'none' or 'mean'; got {impute!r}.")
    chosen = _readers.Columns(tuple(columns or ()), tuple(drop_columns or ()))
    if append:
        if impute != "none":
            raise IngestError("--impute is for a new store: appended rows must be complete (the store's means "
                              "would change under the rows already imputed). Fill the values in first, or leave "
                              "the rows out with --drop-nonfinite.")
        return _append_source(src, dest, label_column=label_column, labels=labels, encoding=encoding,
                              drop_nonfinite=drop_nonfinite, progress=progress,
                              storage_options=storage_options, columns=chosen,
                              fixed={"standardize": standardize, "pca": pca, "n_folds": n_folds, "chunks": chunks,
                                     "codec": codec != "auto" and codec, "overwrite": overwrite, "binary": binary,
                                     "dtype": dtype != "auto" and dtype})

    if codec not in ("auto", "lz4", "zstd", "none"):
        raise IngestError(f"codec must be 'auto', 'lz4', 'zstd' or 'none'; got {codec!r}.")
    dest = check_destination(dest, overwrite, storage_options=storage_options)  # before anything is read
    if n_folds is not None and (isinstance(n_folds, bool) or not isinstance(n_folds, int) or n_folds < 2):
        raise IngestError(f"n_folds (--folds) must be an int >= 2 (or left out for no folds); got {n_folds!r}.")
    if url_protocol(src) not in (None, "file"):
        local_path(src, "source")
    if binary and (standardize or pca is not None):
        raise IngestError("binary=True keeps the 0/1 values as they are; it cannot be combined with "
                          "standardize or pca.")
    if dtype not in ("auto", "float32", "float64"):
        raise IngestError(f"dtype must be 'auto', 'float32' or 'float64'; got {dtype!r}.")
    if _is_store(src):
        return preprocess_store(src, dest, standardize=standardize, pca=pca, pca_method=pca_method, n_folds=n_folds,
                                fold_seed=fold_seed, chunks=chunks, codec=codec, overwrite=overwrite, progress=progress)
    path = Path(str(src))
    streamed = str(src) not in BUNDLED and path.suffix.lower() in _TABLES + (".npy",) and path.is_file()
    from .store import temp_name

    # the scratch copy of a parsed table lives beside a local store, in the temporary folder for a URL
    scratch_near = Path(dest) if isinstance(dest, Path) else Path(tempfile.gettempdir()) / "infoclust-ingest"
    scratch = temp_name(scratch_near, "raw") if streamed and path.suffix.lower() in _TABLES else None
    try:
        if streamed:
            X, labels, prov, finite = _read_streamed(path, label_column, labels, encoding, scratch, progress,
                                                     chosen)
        else:
            X, labels, prov = read_source(src, label_column=label_column, labels=labels, encoding=encoding,
                                          columns=chosen)
            finite = None
            if _is_sparse(X):
                return _ingest_sparse(X, labels, prov, dest, binary=binary, standardize=standardize, pca=pca,
                                      n_folds=n_folds, fold_seed=fold_seed, chunks=chunks, codec=codec,
                                      overwrite=overwrite, progress=progress)
        out_dtype = np.dtype(dtype) if dtype != "auto" else \
            np.dtype(np.float32 if np.dtype(X.dtype) == np.float32 else np.float64)
        return _validate_and_write(
            src, X, labels, prov, finite, dest, drop_nonfinite=drop_nonfinite, binary=binary,
            standardize=standardize, pca=pca, pca_method=pca_method, n_folds=n_folds, fold_seed=fold_seed,
            chunks=chunks, codec=codec, overwrite=overwrite, progress=progress,
            dtype=out_dtype, impute=impute)
    finally:
        if scratch is not None and scratch.exists():
            import shutil

            shutil.rmtree(scratch, ignore_errors=True)


def _refuse_ragged(src: Any, encoding: str = "utf-8") -> None:
    """Missing values of a CSV that come from a line with too few fields (or
    a trailing delimiter) are a ragged file, not NaN: name the line and its
    field count (dropping the rows would hide a broken file)."""
    path = Path(str(src)) if isinstance(src, (str, os.PathLike)) else None
    if path is None or path.suffix.lower() not in (".csv", ".txt", ".tsv") or not path.is_file():
        return
    try:
        first = _readers._sniff_csv(path, encoding)
        found = _readers.first_ragged_line(path, len(first[0][1]), encoding) if first else None
    except (IngestError, OSError, UnicodeDecodeError):
        return
    if found is not None:
        line, fields = found
        raise IngestError(f"'{path}' line {line} has {fields} fields, expected {len(first[0][1])}: the file is "
                          "ragged. Fix or remove that line.")


def _append_source(src, dest, *, label_column, labels, encoding, drop_nonfinite, progress, storage_options, fixed,
                   columns):
    """:func:`ingest` with ``append=True``: read ``src`` and append its rows."""
    from .append import append_dataset

    given = sorted(k for k, v in fixed.items() if v)
    if given:
        raise IngestError(f"--append adds rows with the store's own settings; these options cannot change them: "
                          f"{given}. Leave them out.")
    X, lab, prov = read_source(src, label_column=label_column, labels=labels, encoding=encoding, columns=columns)
    if _is_sparse(X):
        raise IngestError(f"'{src}' is a sparse matrix; append dense rows (or re-ingest the whole set).")
    X = np.asarray(X, dtype=np.float64)
    if drop_nonfinite:
        ok = np.isfinite(X).all(axis=1)
        X = X[ok]
        lab = {k: (np.asarray(v[0])[ok], v[1]) for k, v in (lab or {}).items()}
    lab = dict(lab or {})
    main = lab.pop("label", None)
    report = append_dataset(
        dest, X, label=None if main is None else main[0], class_names=None if main is None else main[1],
        extra_labels={k: v[0] for k, v in lab.items()} or None,
        label_class_names={k: v[1] for k, v in lab.items() if v[1] is not None} or None,
        feature_names=prov.get("feature_names"), source=str(prov.get("source", src)),
        storage_options=storage_options, progress=progress)
    return report["store"], report


def _read_streamed(path, label_column, label_file, encoding, scratch, progress, columns=_readers.ALL_COLUMNS):
    """A ``.npy``, CSV or parquet file as a lazy array, never whole in memory.

    ``.npy`` (C order) is read in blocks of rows at their file offset. CSV
    and parquet are parsed block by block into a scratch zarr array beside
    the destination (``.NAME.raw-PID-*``, removed afterwards, or by the next
    run if this one is killed), with the label columns' codes and a
    finite-row mask beside it, so that memory does not grow with the rows;
    everything after reads those arrays block by block (``scratch``: the caller removes it). Returns ``(x,
    labels, provenance, finite rows or None)``."""
    import dask.array as da


    cols = [] if label_column is None else list(label_column) if isinstance(label_column, (list, tuple)) \
        else [label_column]
    suffix = path.suffix.lower()
    prov = {"source": str(path.resolve())}
    labels, finite = {}, None
    if suffix == ".npy":
        if cols:
            raise IngestError(f"--label-column is for CSV/parquet files; '{path}' is .npy. Pass the labels "
                              "with --labels FILE.")
        if columns.keep or columns.drop:
            raise IngestError(f"--columns/--drop-columns are for CSV/parquet files; '{path}' is .npy.")
        shape, dtype, fortran, offset = _readers.npy_header(path)
        if len(shape) != 2:
            raise IngestError(f"The data from '{path}' have shape {shape}; store an (n_samples, n_features) "
                              "array (reshape 1-D data to (n, 1)).")
        if dtype.hasobject or dtype.fields is not None:
            raise IngestError(f"The data from '{path}' have dtype {dtype}; they must be numeric.")
        rows = _readers.block_rows(shape[1], dtype.itemsize)
        if fortran:  # column-major: a block of rows is not contiguous on disk; read through a memory map
            x = da.from_array(np.load(path, mmap_mode="r", allow_pickle=False), chunks=(rows, shape[1]))
        else:
            (x,) = engine.generate(_readers.NpyRows(path, dtype, shape, offset), shape[0], block_rows=rows,
                                   outputs=((dtype, (shape[1],)),), block_params=lambda a, b: {}, name="read-npy")
    else:
        import zarr

        table = _open_table(path, cols, encoding, columns=columns)
        d = len(table.feature_index)
        if d == 0:
            raise IngestError(f"'{path}' has no feature columns besides the label column(s).")
        rows = _readers.block_rows(d)
        scratch.parent.mkdir(parents=True, exist_ok=True)
        root = zarr.open_group(str(scratch), mode="w")
        z = root.create_array("x", shape=(0, d), chunks=(rows, d), dtype="f8",
                              compressors=zarr.codecs.BloscCodec(cname="lz4", clevel=1, shuffle="shuffle"))
        zf = root.create_array("finite", shape=(0,), chunks=(rows,), dtype="bool")
        encoders = {i: _readers.LabelEncoder(root.create_array(f"label{i}", shape=(0,), chunks=(rows,), dtype="i4"))
                    for i in table.label_index}
        shown = _Progress(f"reading {path.name}", progress)
        for block in table.blocks:
            z.append(block.x, axis=0)
            zf.append(np.isfinite(block.x).all(axis=1))
            for i, v in block.labels.items():
                encoders[i].add(v)
            shown.update(block.start + block.x.shape[0])
        shown.close()
        if z.shape[0] == 0:
            raise IngestError(f"'{path}' has no data rows.")
        finite = da.from_zarr(zf)
        x = da.from_zarr(z)
        labels = _table_labels(table, encoders)
    _finish_labels(labels, prov, label_file, x.shape[0], path)
    return x, labels, prov, finite


class _Progress:
    """Rows read so far, on stderr: rewritten in place on a terminal, one
    closing line otherwise (stdout stays for the CLI's JSON)."""

    def __init__(self, what, enabled):
        import sys
        import time

        self.what, self.enabled, self.t0, self.last, self.rows = what, enabled, time.monotonic(), 0.0, 0
        self.tty = enabled and sys.stderr.isatty()

    def update(self, rows):
        import sys
        import time

        self.rows = rows
        now = time.monotonic()
        if self.tty and now - self.last > 0.5:
            sys.stderr.write(f"\r{self.what}: {rows:,} rows ({now - self.t0:.0f} s)")
            sys.stderr.flush()
            self.last = now

    def close(self):
        import sys
        import time

        if self.enabled:
            sys.stderr.write(f"{chr(13) if self.tty else ''}{self.what}: {self.rows:,} rows in "
                             f"{time.monotonic() - self.t0:.1f} s\n")


def _first_bad_values(x, limit=5):
    """Up to ``limit`` distinct values of a block that are neither 0 nor 1."""
    v = np.unique(x[(x != 0) & (x != 1)])
    return v[:limit]


def _impute_means(src, X, report, names=None):
    """Missing values (NaN) of numpy or lazy ``X`` replaced by their column's mean over the rows where it is
    present (one pass for the means and counts); infinities stay (refused or dropped after)."""
    xp = np
    if engine.is_lazy(X):
        import dask.array as xp  # type: ignore[no-redef]
    present = ~xp.isnan(X)
    good = xp.isfinite(X)
    sums, counts, missing = engine.compute((xp.where(good, X, 0).sum(axis=0, dtype=np.float64),
                                            good.sum(axis=0), (~present).sum(axis=0)))
    sums, counts, missing = np.asarray(sums), np.asarray(counts), np.asarray(missing)
    if not missing.any():
        return X
    empty = np.flatnonzero((counts == 0) & (missing > 0))
    if empty.size:
        raise IngestError(f"--impute mean: column(s) {empty[:5].tolist()} (0-based among the features) of {src!r} "
                          "have no finite value to take a mean from; leave them out with --drop-columns.")
    means = sums / np.maximum(counts, 1)
    report["imputed"] = {"strategy": "mean", "values": int(missing.sum()),
                         "columns": {str(names[j]) if names is not None and len(names) == len(missing) else int(j):
                                     int(missing[j]) for j in np.flatnonzero(missing)}}
    return xp.where(present, X, means.astype(X.dtype))


def _validate_and_write(src, X, labels, prov, finite, dest, *, drop_nonfinite, binary, standardize, pca,
                        pca_method, n_folds, fold_seed, chunks, codec, overwrite, progress, dtype=np.float64,
                        impute="none"):
    """Check the rows (numeric, finite, binary when asked) of numpy or lazy
    ``X``, then standardize / project and write the store."""

    lazy = engine.is_lazy(X)
    if not lazy:
        X = np.asarray(X)
    if X.ndim == 1:
        raise IngestError(f"The data from {src!r} are 1-D (shape {X.shape}); reshape to (n, 1) first.")
    if np.issubdtype(X.dtype, np.complexfloating):
        raise IngestError(f"The data from {src!r} are complex ({X.dtype}); clustering needs real features. "
                          "Store the parts you mean, e.g. np.hstack([x.real, x.imag]) or np.abs(x).")
    if X.dtype == np.bool_:
        X = X.astype(np.uint8)
    if not np.issubdtype(X.dtype, np.number):
        raise IngestError(f"The data from {src!r} have dtype {X.dtype}; they must be numeric.")
    for name, (codes, _) in labels.items():
        if codes.shape[0] != X.shape[0]:
            raise IngestError(f"The label column {name!r} has {codes.shape[0]} entries but the data from {src!r} "
                              f"have {X.shape[0]} rows; they must match row by row.")
    report = {"source": prov["source"], "rows_read": int(X.shape[0]), "features": int(X.shape[1]),
              "rejected": [], "labels": list(labels)}
    if impute == "mean" and np.issubdtype(X.dtype, np.floating):
        X = _impute_means(src, X, report, prov.get("feature_names"))
        if "imputed" in report:
            finite = None  # the mask read with the rows counted the imputed values as missing
    if finite is None and lazy:
        import dask.array as da

        finite = da.isfinite(X).all(axis=1)
    elif finite is None:
        finite = np.isfinite(X).all(axis=1)
    # a lazy mask is brought into memory (a byte per row) only when some row is bad
    n_bad = int(engine.compute((~finite).sum())) if engine.is_lazy(finite) else int((~finite).sum())
    if n_bad:
        bad = ~np.asarray(engine.compute(finite) if engine.is_lazy(finite) else finite, dtype=bool)
        first = np.flatnonzero(bad)[:5].tolist()
        sample = np.asarray(engine.compute(X[np.flatnonzero(bad)[:1000]]) if lazy else X[bad])
        cols = np.flatnonzero(~np.isfinite(sample).all(axis=0))[:5].tolist()
        if not drop_nonfinite:
            _refuse_ragged(src)
            raise IngestError(
                f"{int(bad.sum())} row(s) of {src!r} contain NaN or inf (first at rows {first}, "
                f"0-based; columns {cols}). Re-run with --drop-nonfinite to drop them"
                + (", or --impute mean to fill missing values with their column's mean." if impute == "none"
                   else ".")
            )
        X = engine.take_rows(X, ~bad) if lazy else X[~bad]
        labels = {k: (engine.take_rows(c, ~bad) if engine.is_lazy(c) else np.asarray(c)[~bad], nm)
                  for k, (c, nm) in labels.items()}
        report["rows_dropped_nonfinite"] = int(bad.sum())
        report["rejected"].append({"reason": "NaN or inf", "rows": int(bad.sum()), "first_rows": first,
                                   "columns": cols})
    if X.shape[0] == 0:
        raise IngestError(f"No rows of {src!r} are left after dropping non-finite rows.")
    if binary:
        if lazy:
            bad_values = np.zeros(0)
            if int(engine.compute(((X != 0) & (X != 1)).sum())):  # then the first block that has some
                for i in range(X.numblocks[0]):
                    bad_values = _first_bad_values(np.asarray(engine.compute(X.blocks[i])))
                    if bad_values.size:
                        break
        else:
            bad_values = _first_bad_values(X)
        if bad_values.size:
            raise IngestError(f"--binary: the data from {src!r} hold values other than 0 and 1 "
                              f"({bad_values[:5].tolist()}); binarize them first.")
        Xt = X.astype(np.uint8)
        if lazy:
            mean, std = engine.compute((Xt.mean(axis=0, dtype=np.float64), Xt.std(axis=0, dtype=np.float64)))
        else:
            mean, std = Xt.mean(axis=0), Xt.std(axis=0)
        info = {"feature_mean": np.asarray(mean), "feature_std": np.asarray(std)}
    else:
        Xt, info = fit_transform(X if lazy else X.astype(np.float64, copy=False), standardize=standardize,
                                 pca=pca, pca_method=pca_method)
    names = prov.pop("feature_names", None)
    path, written = write_preprocessed(
        dest, Xt, info, standardize=standardize, pca=pca, n_folds=n_folds, fold_seed=fold_seed, chunks=chunks,
        codec=codec, labels=labels, provenance=prov, overwrite=overwrite, progress=progress, dtype=np.uint8 if binary else dtype,
        feature_names=names if pca is None and names is not None and len(names) == Xt.shape[1] else None)
    report.update(rows_written=int(Xt.shape[0]), features_written=int(Xt.shape[1]), **written)
    return path, report


def _is_sparse(X):
    import scipy.sparse as sp

    return sp.issparse(X)


def _ingest_sparse(X, labels, prov, dest, *, binary, standardize, pca, n_folds, fold_seed, chunks, codec,
                   overwrite, progress):
    """Write a scipy sparse matrix as a dense store, one chunk of rows at a
    time (the chunk densified inside its own write task)."""
    from .store import choose_chunk_rows

    if standardize or pca is not None:
        raise IngestError("A sparse .npz is stored as it is; --standardize and --pca would make it dense. "
                          "Ingest it first, then preprocess the store (infoclust ingest STORE DEST --standardize).")
    n, d = X.shape
    if n == 0 or d == 0:
        raise IngestError(f"The sparse matrix has shape {X.shape}; it needs rows and columns.")
    for name, (codes, _) in labels.items():
        if codes.shape[0] != n:
            raise IngestError(f"The label column {name!r} has {codes.shape[0]} entries but the sparse matrix "
                              f"has {n} rows; they must match row by row.")
    X.sum_duplicates()
    if not np.isfinite(X.data).all():
        raise IngestError("The sparse matrix holds NaN or inf values; drop or impute them first.")
    dtype = np.dtype(np.uint8) if binary else np.dtype(np.float64)
    if binary:
        bad = np.unique(X.data[(X.data != 0) & (X.data != 1)])
        if bad.size:
            raise IngestError(f"--binary: the sparse matrix holds values other than 0 and 1 ({bad[:5].tolist()});"
                              " binarize it first (e.g. X.data[:] = 1).")
    rows = int(chunks) if chunks is not None else choose_chunk_rows(n, d, dtype.itemsize)
    (x,) = engine.generate(_DenseRows(X, dtype), n, block_rows=rows, outputs=((dtype, (d,)),),
                           block_params=lambda a, b: {}, name="densify")
    mean = np.asarray(X.mean(axis=0)).ravel()
    sq = np.asarray(X.multiply(X).mean(axis=0)).ravel()
    info = {"feature_mean": mean, "feature_std": np.sqrt(np.maximum(sq - mean ** 2, 0.0))}
    with engine.installed("threads"):  # the matrix lives in this process: its chunks are made and written here
        path, written = write_preprocessed(
            dest, x, info, standardize=False, pca=None, n_folds=n_folds, fold_seed=fold_seed, chunks=rows,
            codec=codec, labels=labels,
            provenance={**prov, "sparse": {"nnz": int(X.nnz), "density": X.nnz / (n * d)}},
            overwrite=overwrite, progress=progress, dtype=dtype)
    report = {"source": prov["source"], "rows_read": n, "features": d, "rejected": [], "labels": list(labels),
              "sparse_nnz": int(X.nnz), "rows_written": n, "features_written": d, **written}
    return path, report


class _DenseRows:
    """Rows ``a:b`` of a sparse matrix as a dense block (one stored chunk).
    Tokenized by a random id, not by hashing the whole matrix per block."""

    def __init__(self, X, dtype):
        import uuid

        self.X, self.dtype, self.token = X, dtype, uuid.uuid4().hex

    def __dask_tokenize__(self):
        return self.token

    def __call__(self, a, b):
        return (self.X[a:b].toarray().astype(self.dtype, copy=False),)
