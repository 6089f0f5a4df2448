"""The zarr data layout (DESIGN.md "Data layout"), read lazily through xarray.

A dataset store is one zarr (format 3) group::

    x      (sample, feature)    float32/float64   the primary data
    label  (sample,)            int32             optional: classes / a known clustering
    y      (sample, feature_y)  float             optional: a second, paired view
    fold   (sample,)            int16             optional: cross-validation fold per row
    <name> (sample,)            int32             optional: further label columns (known
                                                  clusterings), listed in attrs ``label_columns``

chunked along ``sample`` only, with attrs ``schema_version``, ``provenance``
(source, creation time, library version, anything the writer adds, and a
fresh random ``store_id`` per write, which cross-validation caches key on)
and optionally ``class_names``, ``feature_mean``/``feature_std`` (per-feature
moments of the ingested data), ``n_folds``.

Writes are atomic: the store is written to a hidden folder beside the target
and renamed into place; an existing store is replaced only with
``overwrite=True`` (and then only after the new one is complete).

Default codec
-------------
Blosc with LZ4 and byte shuffle (level 5). Measured on this machine
(docs/BENCHMARKS.md, a 2 GB float32 store, plain sum): zarr's default Zstd
reads at 0.59 GB/s with threads / 0.88 GB/s with 2 worker processes, Blosc-LZ4
+shuffle at 0.81 / 1.28 GB/s, uncompressed at 1.81 / 1.87 GB/s. LZ4 keeps
~70 % of the uncompressed speed with processes while still compressing the
data we actually store (integer-valued features such as Letter's, labels,
standardized data with few distinct values) several-fold; uncompressed stores
are offered by ``codec="none"`` for when disk is plentiful and speed is all.
"""

from __future__ import annotations

import datetime as _dt
import os
import shutil
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from . import engine

__all__ = [
    "SCHEMA_VERSION",
    "StoreError",
    "write_dataset",
    "open_dataset",
    "default_chunk_rows",
    "atomic_write_text",
    "check_destination",
]

SCHEMA_VERSION = 1
_CODECS = ("lz4", "zstd", "none")


class StoreError(ValueError):
    """A dataset store is missing, malformed, or would be overwritten."""


def default_chunk_rows(n_features: int, itemsize: int = 8, target_bytes: int = 64 * 2**20) -> int:
    """Rows per chunk for ~64 MB chunks (the size measured best for zarr reads)."""
    return int(max(1024, target_bytes // max(1, n_features * itemsize)))


def _compressors(codec: str, itemsize: int):
    from zarr.codecs import BloscCodec, ZstdCodec

    if codec == "lz4":
        return (BloscCodec(cname="lz4", clevel=5, shuffle="shuffle", typesize=itemsize),)
    if codec == "zstd":
        return (ZstdCodec(level=0),)
    return None


def _check_2d(name, a):
    if a.ndim != 2:
        fix = " Reshape it with x.reshape(-1, 1) for a single feature." if a.ndim == 1 else ""
        raise ValueError(f"'{name}' must be 2-D (sample, feature); got shape {a.shape}.{fix}")


def _check_float(name, a):
    if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer) or a.dtype == bool):
        raise TypeError(
            f"'{name}' must hold numbers; got dtype {a.dtype}. Convert it, e.g. "
            f"{name}.astype('float64')."
        )


def check_destination(path, overwrite: bool = False) -> Path:
    """Refuse an existing ``path`` unless ``overwrite``: callers that compute
    before writing check first, so they fail before the work, not after."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise StoreError(
            f"A store already exists at '{path}'. Pass overwrite=True (CLI: --overwrite) "
            "to replace it, or choose another path."
        )
    return path


def write_dataset(
    path,
    x,
    *,
    label=None,
    y=None,
    fold=None,
    chunks: int | None = None,
    dtype=None,
    codec: str = "lz4",
    overwrite: bool = False,
    class_names=None,
    provenance: dict | None = None,
    attrs: dict | None = None,
    check_finite: bool = True,
    progress: bool = False,
    scheduler=None,
    extra_labels: dict | None = None,
    label_class_names: dict | None = None,
) -> Path:
    """Write a dataset store (see module docstring) and return its path.

    Parameters
    ----------
    path : str or Path
        Target folder, conventionally ``*.zarr``.
    x : array-like of shape (n_samples, n_features)
        numpy, dask or xarray; dask input is written block by block, never
        materialised.
    label : array-like of shape (n_samples,), optional
        Integer classes (DC auxiliary data, a known clustering), >= 0.
    y : array-like of shape (n_samples, n_features_y), optional
        Second view for associative clustering.
    fold : array-like of shape (n_samples,), optional
        Cross-validation fold number of each row (see :mod:`infoclust_dask.folds`).
    chunks : int, optional
        Rows per chunk (chunks span all features). Default: ~64 MB chunks.
    dtype : numpy dtype, optional
        Float dtype of ``x``/``y`` on disk; default keeps float32/float64 and
        stores integer input as float64. ``uint8`` stores binary 0/1 ``x``
        (CMBC's data) in one byte per value, after checking the values
        (``y`` stays float).
    codec : {"lz4", "zstd", "none"}, default="lz4"
    overwrite : bool, default=False
        Replace an existing store. Without it an existing path is an error.
    class_names, provenance, attrs : optional
        Stored in the group attributes (JSON-serialisable).
    extra_labels : dict of name -> array of shape (n_samples,), optional
        Further integer label columns (e.g. several known clusterings for
        CMBC: ``infoclust fit cmbc STORE --known label,topic``), stored as
        variables of those names and listed in the attribute ``label_columns``.
    label_class_names : dict of name -> list of str, optional
        Class names of the extra label columns (attribute ``label_class_names``).
    check_finite : bool, default=True
        Refuse NaN/inf in ``x`` and ``y`` (one extra pass for dask input).
    progress : bool, default=False
        Show a progress bar while writing.
    scheduler : see :mod:`infoclust_dask._scheduler`, default=None
        Where the checks and the chunk writes of dask input run (the workers
        of a distributed scheduler: the store path must be reachable from
        them). Input given entirely as numpy arrays lives in this process and
        is written from here, by local threads.

    Returns
    -------
    Path
    """
    import dask.array as da
    import xarray as xr

    from . import __version__

    path = Path(path)
    if codec not in _CODECS:
        raise ValueError(f"codec must be one of {_CODECS}; got {codec!r}.")
    check_destination(path, overwrite)
    from .kernels.stats import MOMENTS

    if not any(a is not None and engine.is_lazy(a) for a in (x, y)):  # the data live in this process: write them from here
        scheduler = "threads"
    x = engine.as_array(x)
    _check_2d("x", x)
    _check_float("x", x)
    n = x.shape[0]
    if n == 0:
        raise ValueError("'x' has 0 samples; a dataset needs at least one row.")
    out_dtype = np.dtype(dtype) if dtype is not None else (
        x.dtype if np.issubdtype(x.dtype, np.floating) else np.dtype(np.float64)
    )
    binary = out_dtype == np.uint8
    if not (np.issubdtype(out_dtype, np.floating) or binary):
        raise TypeError(f"dtype must be a float dtype, or uint8 for binary 0/1 data; got {out_dtype}.")
    if binary:  # binary features (CMBC): one byte per value, and only 0 and 1 may be stored
        from .kernels.stats import LABEL_VALUES

        values = engine.map_reduce(LABEL_VALUES, x, scheduler=scheduler)["values"]
        bad = values[(values != 0) & (values != 1)]
        if bad.size:
            raise ValueError(f"dtype=uint8 stores binary data, but 'x' holds the values {bad[:5].tolist()}; "
                             "binarize it first (e.g. (x > 0)) or keep a float dtype.")
    rows = int(chunks) if chunks is not None else default_chunk_rows(x.shape[1], out_dtype.itemsize)
    if rows <= 0:
        raise ValueError(f"chunks must be a positive number of rows; got {chunks}.")
    rows = min(rows, n)

    variables: dict[str, Any] = {}
    encoding: dict[str, Any] = {}

    def add(name, arr, dims, dt):
        arr = da.asarray(arr) if not isinstance(arr, da.Array) else arr
        arr = arr.astype(dt).rechunk((rows,) + arr.shape[1:])
        variables[name] = (dims, arr)
        encoding[name] = {"chunks": (rows,) + arr.shape[1:]}
        comp = _compressors(codec, np.dtype(dt).itemsize)
        encoding[name]["compressors"] = comp if comp is not None else ()

    add("x", x, ("sample", "feature"), out_dtype)
    if y is not None:
        y = engine.as_array(y)
        _check_2d("y", y)
        _check_float("y", y)
        if y.shape[0] != n:
            raise ValueError(f"'y' has {y.shape[0]} rows but 'x' has {n}; views must be paired row by row.")
        add("y", y, ("sample", "feature_y"), np.float64 if binary else out_dtype)
    if label is not None:
        label = engine.as_array(label)
        if label.ndim != 1:
            raise ValueError(f"'label' must be 1-D (sample,); got shape {label.shape}.")
        if label.shape[0] != n:
            raise ValueError(
                f"'label' has {label.shape[0]} entries but 'x' has {n} rows; they must match."
            )
        if not np.issubdtype(label.dtype, np.integer):
            raise TypeError(
                f"'label' must be integer classes; got dtype {label.dtype}. Encode class "
                "names as 0..C-1 (e.g. np.unique(c, return_inverse=True)[1]) and pass "
                "class_names=."
            )
        add("label", label, ("sample",), np.int32)
    for name, arr in (extra_labels or {}).items():
        if not str(name).isidentifier() or name in ("x", "y", "fold", "label"):
            raise ValueError(f"extra_labels: {name!r} cannot name a label variable (x, y, fold and label are "
                             "taken; use a Python identifier).")
        arr = engine.as_array(arr)
        if arr.shape != (n,):
            raise ValueError(f"extra_labels[{name!r}] must have one entry per row ({n}); got shape {arr.shape}.")
        if not np.issubdtype(arr.dtype, np.integer):
            raise TypeError(f"extra_labels[{name!r}] must be integer classes; got dtype {arr.dtype}.")
        add(name, arr, ("sample",), np.int32)
    if fold is not None:
        fold = engine.as_array(fold)
        if fold.shape != (n,):
            raise ValueError(f"'fold' must have one entry per row ({n}); got shape {fold.shape}.")
        if not np.issubdtype(fold.dtype, np.integer):
            raise TypeError(f"'fold' must be integer fold numbers; got dtype {fold.dtype}.")
        add("fold", fold, ("sample",), np.int16)

    if check_finite:
        for name in ("x", "y"):
            if name in variables:
                bad = int(engine.map_reduce(MOMENTS, variables[name][1], scheduler=scheduler)["n_bad"])
                if bad:
                    raise ValueError(
                        f"'{name}' contains {bad} NaN or infinite values. Drop or impute those "
                        "rows first (CLI: `infoclust ingest --drop-nonfinite`)."
                    )
    for name in ["label"] * (label is not None) + list(extra_labels or {}):
        lmin = int(engine.compute(variables[name][1].min(), scheduler=scheduler))
        if lmin < 0:
            raise ValueError(f"'{name}' must be >= 0; found {lmin}.")

    all_attrs = {
        "schema_version": SCHEMA_VERSION,
        "provenance": {
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "library": f"infoclust_dask {__version__}",
            **(provenance or {}),
            "store_id": uuid.uuid4().hex,
        },
    }
    if class_names is not None:
        all_attrs["class_names"] = [str(c) for c in class_names]
    if extra_labels:
        all_attrs["label_columns"] = list(extra_labels)
    if label_class_names:
        all_attrs["label_class_names"] = {k: [str(c) for c in v] for k, v in label_class_names.items()}
    all_attrs.update(attrs or {})
    ds = xr.Dataset(variables, attrs=all_attrs)

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        # metadata now; the chunk writes as one graph on the chosen scheduler
        writes = ds.to_zarr(tmp, mode="w-", zarr_format=3, encoding=encoding, consolidated=False, compute=False)
        engine.compute(writes, scheduler=scheduler, progress=progress)
        _replace(tmp, path, overwrite)
    finally:
        _remove_tree(tmp)
    return path


def _remove_tree(path: Path, wait: float = 10.0):
    """Remove a half-written folder. After a failed compute, tasks already
    running in the pool may still write a chunk or two, so retry until it
    stays gone."""
    if not path.exists():
        return
    deadline = time.monotonic() + wait
    quiet_since = None
    while time.monotonic() < deadline:
        if path.exists():
            shutil.rmtree(path, ignore_errors=True)
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since > 0.3:
            return
        time.sleep(0.05)


def _replace(tmp: Path, path: Path, overwrite: bool):
    """Move the finished ``tmp`` to ``path``; an old store is removed only
    after the new one is in place."""
    if not path.exists():
        os.rename(tmp, path)
        return
    if not overwrite:
        raise StoreError(f"A store appeared at '{path}' while writing; not overwriting it.")
    old = path.parent / f".{path.name}.old-{uuid.uuid4().hex[:8]}"
    os.rename(path, old)
    try:
        os.rename(tmp, path)
    except OSError:
        os.rename(old, path)
        raise
    shutil.rmtree(old, ignore_errors=True)


_OPENED_LOCK = threading.Lock()
_OPENED: dict = {}
#: stores kept open per process (the most recently used ones)
OPENED_MAX = 16


def open_dataset(path):
    """Open a dataset store lazily (dask-backed xarray Dataset).

    A store is opened once per process and version (its path and the
    modification time of its ``zarr.json``): every call returns a shallow
    copy of that one opening. Two openings of the same store give dask graphs
    with the same keys but different zarr objects inside, which a
    distributed scheduler reports as "different run_spec for key" (and which
    can cancel one caller's tasks) when threads of one process - the cells
    of a cross-validation sweep, bootstrap replicates - compute at once.

    Raises
    ------
    FileNotFoundError
        no store at ``path``.
    StoreError
        the folder is not a zarr group, lacks ``x``, has the wrong dims or a
        schema version this library does not read.
    """
    import xarray as xr

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(
            f"No dataset store at '{path}'. Create one with `infoclust ingest SRC {path}` "
            "or infoclust_dask.write_dataset(...)."
        )
    if not (path / "zarr.json").exists():
        raise StoreError(
            f"'{path}' is not a zarr (format 3) group: no zarr.json inside. Was it written "
            "by infoclust_dask.write_dataset / `infoclust ingest`?"
        )
    # a rewrite renames a new folder into place; adding a variable adds an entry to the folder
    key = (str(path.resolve()), path.stat().st_mtime_ns, (path / "zarr.json").stat().st_mtime_ns)
    with _OPENED_LOCK:
        ds = _OPENED.pop(key, None)
        if ds is None:
            try:
                ds = xr.open_zarr(path, consolidated=False, zarr_format=3, chunks={})
            except Exception as exc:  # zarr raises many types for corrupt metadata
                raise StoreError(f"Could not open the store at '{path}': {exc}") from exc
        _OPENED[key] = ds  # most recent last
        while len(_OPENED) > OPENED_MAX:
            _OPENED.pop(next(iter(_OPENED)))
    ds = ds.copy(deep=False)
    version = ds.attrs.get("schema_version")
    if version is None:
        raise StoreError(
            f"The store at '{path}' has no 'schema_version' attribute; it was not written by infoclust_dask."
        )
    if int(version) > SCHEMA_VERSION:
        raise StoreError(
            f"The store at '{path}' has schema_version={version}, newer than this library "
            f"reads ({SCHEMA_VERSION}). Upgrade infoclust_dask."
        )
    if "x" not in ds:
        raise StoreError(f"The store at '{path}' has no variable 'x'; it holds {sorted(ds.data_vars)}.")
    if ds["x"].dims != ("sample", "feature"):
        raise StoreError(f"In '{path}', 'x' has dims {ds['x'].dims}; expected ('sample', 'feature').")
    for name, dims in (("label", ("sample",)), ("y", ("sample", "feature_y")), ("fold", ("sample",))):
        if name in ds and ds[name].dims != dims:
            raise StoreError(f"In '{path}', '{name}' has dims {ds[name].dims}; expected {dims}.")
    if len(ds["x"].chunks[1]) != 1:
        raise StoreError(f"In '{path}', 'x' is chunked along 'feature'; it must be chunked along 'sample' only.")
    return ds


def atomic_write_text(path, text: str, *, overwrite: bool = False) -> Path:
    """Write a small text file atomically (temp file beside it, then rename)."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"'{path}' exists; pass overwrite=True to replace it.")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.write_text(text)
    os.replace(tmp, path)
    return path
