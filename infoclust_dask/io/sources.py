"""Reading an ingest source whole: a bundled dataset name, a ``.npy`` /
``.npz`` file (dense, or a scipy sparse matrix), a CSV or parquet table,
and label columns from the table or from a separate file - into ``(X,
labels, provenance)``. Files too large for memory are streamed instead
(:mod:`infoclust_dask.io.readers`); :func:`infoclust_dask.io.ingest.ingest`
decides which."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from ..datasets import BUNDLED, load_bundled
from ..storage.paths import local_path
from . import readers as _readers
from .readers import IngestError

__all__ = ["read_source"]


def _encode(values):
    """Class strings -> (codes 0..C-1, sorted class names): the block-wise
    encoder of the streaming readers, given everything at once."""
    enc = _readers.LabelEncoder()
    enc.add(values)
    return enc.finish()


def _label_name(header, index, k):
    """Store variable of the k-th label column: the first is ``label`` (the
    layout's class variable); the others keep their header name, made a
    valid variable name, or ``label_<column>`` without a header."""
    if k == 0:
        return "label"
    name = header[index] if header is not None else f"label_{index}"
    name = re.sub(r"\W", "_", str(name).strip()) or f"label_{index}"
    if name in ("x", "y", "fold", "label") or name[0].isdigit():
        name = f"label_{name}"
    return name


def read_source(src: Any, *, label_column: str | None = None, labels: Any = None,
                encoding: str = "utf-8", columns: _readers.Columns = _readers.ALL_COLUMNS) -> tuple:
    """Read ``src`` into ``(X, labels, provenance)``.

    ``src`` is a bundled dataset name (``letter``, ``satimage``, ``digits``,
    ``wine``, ``iris``), a ``.npy`` file (x only), a ``.npz`` file (arrays
    ``x`` and optionally ``label``, or a scipy sparse matrix saved by
    ``scipy.sparse.save_npz``, kept sparse: see :func:`ingest`), a ``.csv``
    file (numeric columns; an optional header) or a ``.parquet`` file.

    ``columns`` (:class:`infoclust_dask.io.readers.Columns`) chooses the
    feature columns of a CSV/parquet table (``--columns``/``--drop-columns``).
    ``label_column`` (one column by index or header name, or a list of them)
    holds classes or known clusterings in a CSV/parquet file; ``labels`` is a
    separate file of label columns (``.npy``: 1-D, or (n, m) for m columns;
    ``.npz``: one 1-D array per column, by name). ``labels`` in the result
    maps store variable names to ``(codes 0..C-1, class names or None)``:
    the first CSV/parquet label column and a 1-D ``.npy`` become ``label``
    (the layout's class variable), named columns keep their names.
    """
    s = str(src)
    cols = [] if label_column is None else list(label_column) if isinstance(label_column, (list, tuple)) \
        else [label_column]
    if s in BUNDLED:
        if cols:
            raise IngestError(f"--label-column is for CSV/parquet files; the bundled {s!r} has its classes.")
        if columns.keep or columns.drop:
            raise IngestError(f"--columns/--drop-columns are for CSV/parquet files, not the bundled {s!r}.")
        X, c, names = load_bundled(s)
        out = {"label": (c, names)}
        prov = {"source": f"bundled:{s}"}
    else:
        path = local_path(s, "source file")
        if not path.exists():
            raise FileNotFoundError(
                f"No file '{path}' and no bundled dataset of that name (bundled: {sorted(BUNDLED)})."
            )
        suffix = path.suffix.lower()
        prov = {"source": str(path.resolve())}
        if (columns.keep or columns.drop) and suffix not in _TABLES:
            raise IngestError(f"--columns/--drop-columns are for CSV/parquet files; '{path}' is {suffix}.")
        if cols and suffix not in (".csv", ".txt", ".parquet", ".pq"):
            raise IngestError(f"--label-column is for CSV/parquet files; '{path}' is {suffix}. Put the labels "
                              "in the .npz as 'label' or pass them with --labels FILE.")
        out = {}
        if suffix == ".npy":
            X = np.load(path, allow_pickle=False, mmap_mode="r")
        elif suffix == ".npz":
            with np.load(path, allow_pickle=False) as z:
                keys = set(z.keys())
                if {"indptr", "indices", "data", "shape", "format"} <= keys:
                    X = _load_sparse(path)
                elif "x" not in keys:
                    raise IngestError(f"'{path}' has no array 'x' (it has {sorted(keys)}) and is not a "
                                      "scipy sparse matrix (scipy.sparse.save_npz).")
                else:
                    X = z["x"]
                    if "label" in keys:
                        out["label"] = _label_codes(z["label"], f"'{path}' array 'label'")
        elif suffix in _TABLES:
            X, out = _read_table_whole(_open_table(path, cols, encoding, columns=columns))
        else:
            raise IngestError(
                f"Cannot ingest '{path}': use .npy, .npz, .csv, .parquet, a store or a bundled dataset name."
            )
    _finish_labels(out, prov, labels, X.shape[0], s)
    return X, out, prov


def _finish_labels(labels, prov, label_file, n, src):
    """Move the feature names found with the label columns into the
    provenance, and add the label columns of ``label_file`` (``--labels``)."""
    names = labels.pop("__features__", None)
    if names is not None:
        prov["feature_names"] = names
    if label_file is not None:
        side = _read_label_file(label_file, n)
        clash = sorted(set(side) & set(labels))
        if clash:
            raise IngestError(f"--labels '{label_file}' gives {clash}, which '{src}' already holds; rename them.")
        labels.update(side)
        prov["labels"] = str(Path(label_file).resolve())


_TABLES = (".csv", ".txt", ".parquet", ".pq")


def _open_table(path: Path, cols, encoding="utf-8", rows=None, columns=_readers.ALL_COLUMNS):
    if path.suffix.lower() in (".parquet", ".pq"):
        return _readers.read_parquet(path, cols, rows=rows, columns=columns)
    return _readers.read_csv(path, cols, encoding, rows=rows, columns=columns)


def _table_labels(table, encoders):
    out = {}
    for k, i in enumerate(table.label_index):
        out[_label_name(table.header, i, k)] = encoders[i].finish()
    if table.header is not None:
        out["__features__"] = table.feature_names
    return out


def _read_table_whole(table):
    """A CSV/parquet table in memory (:func:`read_source`; :func:`ingest` streams instead)."""
    encoders = {i: _readers.LabelEncoder() for i in table.label_index}
    parts = []
    for block in table.blocks:
        parts.append(block.x)
        for i, v in block.labels.items():
            encoders[i].add(v)
    if not parts:
        raise IngestError("The file has no data rows.")
    return np.concatenate(parts), _table_labels(table, encoders)


def _load_sparse(path):
    import scipy.sparse as sp

    try:
        X = sp.load_npz(path)
    except (ValueError, OSError) as exc:
        raise IngestError(f"'{path}' looks like a scipy sparse matrix but cannot be read: {exc}") from None
    if X.ndim != 2:
        raise IngestError(f"'{path}' holds a sparse matrix of shape {X.shape}; it must be 2-D.")
    return X.tocsr()


def _read_label_file(path, n):
    """Label columns from ``.npy`` (1-D or (n, m)) or ``.npz`` (named 1-D arrays)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"No labels file '{path}'.")
    if path.suffix.lower() == ".npy":
        a = np.load(path, allow_pickle=False)
        cols = {"label": a} if a.ndim == 1 else {f"label_{j}": a[:, j] for j in range(a.shape[1])} \
            if a.ndim == 2 else None
        if cols is None:
            raise IngestError(f"--labels '{path}' has shape {a.shape}; give 1-D labels or an (n, m) array.")
    elif path.suffix.lower() == ".npz":
        with np.load(path, allow_pickle=False) as z:
            cols = {k: z[k] for k in z.keys()}
    else:
        raise IngestError(f"--labels '{path}': use a .npy or .npz file of integer label columns.")
    out = {}
    for name, a in cols.items():
        if not name.isidentifier() or name in ("x", "y", "fold"):
            raise IngestError(f"--labels '{path}': {name!r} cannot name a store variable; rename it.")
        if a.shape != (n,):
            raise IngestError(f"--labels '{path}': {name!r} has shape {a.shape} but the data have {n} rows; "
                              "each label column needs one entry per row.")
        out[name] = _label_codes(a, f"--labels '{path}' array {name!r}")
    return out


def _label_codes(a, what):
    """``(codes, class names or None)`` of one label column: integers >= 0
    are kept, strings are encoded (names kept), anything else is an error."""
    a = np.asarray(a)
    if a.ndim != 1:
        raise IngestError(f"{what} has shape {a.shape}; labels must be 1-D, one per row.")
    if np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.bool_):
        if a.size and a.min() < 0:
            return _encode(a)
        return a.astype(np.int64), None
    if a.dtype.kind in "US":
        return _encode(a)
    raise IngestError(f"{what} has dtype {a.dtype}; labels must be integer classes (or strings). "
                      "Convert them, e.g. np.asarray(labels).astype(int) if they are whole numbers.")
