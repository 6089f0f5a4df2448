"""The zarr data layout (docs/ARCHITECTURE.md), read lazily through xarray.

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
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from .. import engine
from .._support.sizes import store_chunk_rows
from ..storage.atomic import (  # noqa: F401 - StoreError and atomic_write_text are part of this module's interface
    StoreError,
    WriteLock,
    atomic_write_text,
    clean_stale_temporaries,
    disk_error,
    remove_tree,
    temp_name,
)
from ..storage.location import Location, resolve
from ..storage.manifest import (  # noqa: F401
    MANIFEST,
    PREVIOUS_ATTRS,
    bound_store,
    check_chunks,
    check_group,
    check_metadata,
    committed_rows,
    manifest_problems,
    read_manifests,
    stamp_group,
    unmanifested,
    write_manifest,
)
from ..storage.reading import OPENED_MAX, SCHEMA_VERSION, forget_opened, open_dataset  # noqa: F401 - opening is part of this module's interface
from .verify import verify_store  # noqa: F401 - part of this module's interface

__all__ = [
    "SCHEMA_VERSION",
    "StoreError",
    "write_dataset",
    "open_dataset",
    "choose_chunk_rows",
    "choose_codec",
    "atomic_write_text",
    "check_destination",
    "verify_store",
    "is_store_of_ours",
]

_CODECS = ("lz4", "zstd", "none")


# --------------------------------------------------------------------------
# the chunk and codec policy of every store this package writes
# --------------------------------------------------------------------------
#: LZ4 must shrink the data at least this much to be worth its decode time
MIN_COMPRESSION_RATIO = 1.15


def choose_chunk_rows(n_samples: int, n_features: int, itemsize: int = 8) -> int:
    """Rows per stored chunk (:func:`infoclust_dask._support.sizes.store_chunk_rows`:
    ~64 MB chunks, the measured sweet spot for zarr reads, at least 8 chunks
    while they keep 8 MB; small data sets get one chunk)."""
    return store_chunk_rows(n_samples, n_features, itemsize)


def choose_codec(sample: Any) -> tuple[str, float]:
    """``"lz4"`` when Blosc-LZ4 + shuffle shrinks a sample of the rows by at
    least 15 %, else ``"none"``: incompressible data (e.g. continuous
    measurements with random mantissas) read faster uncompressed (measured
    in ``docs/BENCHMARKS.md``, "Reading speed by codec"). Returns ``(codec, ratio)``."""
    from numcodecs import Blosc

    buf = np.ascontiguousarray(np.asarray(sample, dtype=np.float64))
    if buf.size == 0:
        return "lz4", 1.0
    comp = Blosc(cname="lz4", clevel=5, shuffle=Blosc.SHUFFLE, typesize=8)
    ratio = buf.nbytes / max(1, len(comp.encode(buf)))
    return ("lz4" if ratio >= MIN_COMPRESSION_RATIO else "none"), float(ratio)


def _compressors(codec: str, itemsize: int) -> tuple:
    """The bytes-to-bytes codecs of a stored array: the compressor, then a
    CRC-32C of the compressed bytes (zarr's ``crc32c`` codec), so that every
    read of every chunk - by any pass, on any worker, from disk or a
    bucket - checks its bytes: a flipped bit fails the read instead of
    feeding wrong numbers to a fit (4.7 ms per 64 MB chunk, measured in
    docs/BENCHMARKS.md)."""
    from zarr.codecs import BloscCodec, Crc32cCodec, ZstdCodec

    crc = Crc32cCodec()
    if codec == "lz4":
        return (BloscCodec(cname="lz4", clevel=5, shuffle="shuffle", typesize=itemsize), crc)
    if codec == "zstd":
        return (ZstdCodec(level=0), crc)
    return (crc,)


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


def _check_finite_rows(name: str, arr: Any) -> None:
    """Refuse NaN/inf in ``arr`` (one pass for lazy input)."""
    from ..kernels.stats import MOMENTS

    bad = int(engine.map_reduce(MOMENTS, arr)["n_bad"])
    if bad:
        raise ValueError(f"'{name}' contains {bad} NaN or infinite values. Drop or impute those rows first "
                         "(CLI: `infoclust ingest --drop-nonfinite`).")


def is_store_of_ours(path: str | os.PathLike | Location, *, storage_options: dict | None = None) -> bool:
    """True when ``path`` (a local path or URL) holds a zarr group whose
    attributes carry our ``schema_version`` (a store this library wrote)."""
    import json

    loc = resolve(path, "store", storage_options)
    if loc.local is not None and not loc.local.is_dir():
        return False
    try:
        doc = json.loads(loc.read_bytes("zarr.json"))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("node_type") == "group" and \
        "schema_version" in (doc.get("attributes") or {})


def check_destination(path: str | os.PathLike | Location, overwrite: bool = False, *,
                      storage_options: dict | None = None) -> Any:
    """Refuse an existing ``path`` unless ``overwrite``, and refuse to
    overwrite anything that is not a store this library wrote (a project
    folder, a regular file, someone else's zarr): callers that compute before
    writing check first, so they fail before the work, not after. Returns
    the local :class:`~pathlib.Path`, or the URL as given.

    At a URL a finished store is never replaced (an object store cannot
    swap one version for another at once: a kill would leave neither);
    an interrupted write (no manifest) may be with ``overwrite``."""
    loc = resolve(path, "store", storage_options)
    if loc.local is None:
        return _check_url_destination(loc, overwrite)
    path = loc.local
    groups = [p for p in path.absolute().parents if (p / "zarr.json").is_file()]
    if groups:  # a store inside another would become part of its group
        parent = groups[-1]
        raise StoreError(f"'{path}' lies inside the zarr store '{parent}': a store written there would be "
                             "read as part of that store (and change what its manifests describe). Choose a "
                             "destination outside it.")
    if not (path.exists() or path.is_symlink()):
        return path
    if not overwrite:
        raise StoreError(
            f"A store already exists at '{path}'. Pass overwrite=True (CLI: --overwrite) "
            "to replace it, or choose another path."
        )
    if path.is_symlink() or not is_store_of_ours(path):
        what = "a symbolic link" if path.is_symlink() else "a file" if path.is_file() else \
            "a folder that is not an infoclust store (no zarr.json with a schema_version)"
        raise StoreError(
            f"'{path}' is {what}; overwrite replaces only stores written by infoclust_dask, so it was left "
            "untouched. Choose another destination, or remove it yourself if it really should go."
        )
    return path


def _check_url_destination(loc: Location, overwrite: bool) -> str:
    if not loc.find():
        return loc.url
    if not is_store_of_ours(loc):
        raise StoreError(f"'{loc}' holds objects that are not an infoclust store; nothing there is replaced. "
                         "Choose another URL.")
    if read_manifests(loc) is not None:
        raise StoreError(f"A store already exists at '{loc}'. At a URL a finished store is not replaced (an object "
                         "store cannot swap versions at once, so a killed write would lose both): write to a new "
                         "URL, or add rows with `infoclust ingest SRC STORE --append`.")
    if not overwrite:
        raise StoreError(f"'{loc}' holds an interrupted write (no manifest). Pass overwrite=True (CLI: --overwrite) "
                         "to replace it, or choose another URL.")
    return loc.url


@engine.entry_point(data_here=("x", "y"))
def write_dataset(
    path: str | os.PathLike,
    x: Any,
    *,
    label: Any = None,
    y: Any = None,
    fold: Any = None,
    chunks: int | None = None,
    dtype: Any = None,
    codec: str = "lz4",
    overwrite: bool = False,
    class_names: Any = None,
    provenance: dict | None = None,
    attrs: dict | None = None,
    check_finite: bool = True,
    progress: bool = False,
    scheduler: Any = None,
    extra_labels: dict | None = None,
    label_class_names: dict | None = None,
    feature_names: Any = None,
    storage_options: dict | None = None,
) -> Any:
    """Write a dataset store (see module docstring) and return its path
    (the URL, for a store at a URL).

    Parameters
    ----------
    path : str or Path
        Target folder, conventionally ``*.zarr``, or an fsspec URL
        (``s3://bucket/d.zarr``; :mod:`infoclust_dask.storage.location`): the
        chunks are written by the workers, the manifests last.
    x : array-like of shape (n_samples, n_features)
        numpy, dask or xarray; dask input is written block by block, never
        materialised.
    label : array-like of shape (n_samples,), optional
        Integer classes (DC auxiliary data, a known clustering), >= 0.
    y : array-like of shape (n_samples, n_features_y), optional
        Second view for associative clustering.
    fold : array-like of shape (n_samples,), optional
        Cross-validation fold number of each row (see :mod:`infoclust_dask.io.folds`).
    chunks : int, optional
        Rows per chunk (chunks span all features). Default:
        :func:`choose_chunk_rows` (~64 MB chunks, at least 8 chunks while
        they stay >= 8 MB, one chunk for small data).
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
    feature_names : list of str, optional
        One name per column of ``x`` (a CSV header, DataFrame columns), kept in
        the attributes of ``x``; estimators fitted on the store report them as
        ``feature_names_in_``.
    check_finite : bool, default=True
        Refuse NaN/inf in ``x`` and ``y`` (one extra pass for dask input).
    progress : bool, default=False
        Show a progress bar while writing.
    scheduler : see :mod:`infoclust_dask.engine.choose`, default=None
        Where the checks and the chunk writes of dask input run (the workers
        of a distributed scheduler: the store path must be reachable from
        them). Input given entirely as numpy arrays lives in this process and
        is written from here, by local threads.
    storage_options : dict, optional
        fsspec options of a URL (``endpoint_url``, ``region``...), never
        credentials (refused: :mod:`infoclust_dask.storage.location`).

    Returns
    -------
    Path, or str for a URL
    """
    import dask.array as da
    import xarray as xr

    loc = resolve(path, "store", storage_options)
    if codec not in _CODECS:
        raise ValueError(f"codec must be one of {_CODECS}; got {codec!r}.")
    check_destination(loc, overwrite)

    x = engine.as_array(x)
    _check_2d("x", x)
    _check_float("x", x)
    n = x.shape[0]
    if n == 0:
        raise ValueError("'x' has 0 samples; a dataset needs at least one row.")
    out_dtype = _stored_dtype(x, dtype)
    binary = out_dtype == np.uint8
    rows = int(chunks) if chunks is not None else choose_chunk_rows(n, x.shape[1], out_dtype.itemsize)
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
        encoding[name]["compressors"] = _compressors(codec, np.dtype(dt).itemsize)

    add("x", x, ("sample", "feature"), out_dtype)
    if feature_names is not None:
        feature_names = [str(f) for f in feature_names]
        if len(feature_names) != x.shape[1]:
            raise ValueError(f"feature_names has {len(feature_names)} names for {x.shape[1]} columns of 'x'.")
        variables["x"] = (("sample", "feature"), variables["x"][1], {"feature_names": feature_names})
    if y is not None:
        y = engine.as_array(y)
        _check_2d("y", y)
        _check_float("y", y)
        if y.shape[0] != n:
            raise ValueError(f"'y' has {y.shape[0]} rows but 'x' has {n}; views must be paired row by row.")
        add("y", y, ("sample", "feature_y"), np.float64 if binary else out_dtype)
    _add_labels(add, n, label, extra_labels, fold)

    if check_finite:
        for name in ("x", "y"):
            if name in variables:
                _check_finite_rows(name, variables[name][1])
    for name in ["label"] * (label is not None) + list(extra_labels or {}):
        lmin = int(engine.compute(variables[name][1].min()))
        if lmin < 0:
            raise ValueError(f"'{name}' must be >= 0; found {lmin}.")

    ds = xr.Dataset(variables, attrs=_store_attrs(provenance, class_names, extra_labels, label_class_names, attrs))
    if loc.local is None:
        return _write_at_url(loc, ds, encoding, overwrite, progress)
    return _write_local(loc.local, ds, encoding, overwrite, progress)

def _stored_dtype(x: Any, dtype: Any) -> np.dtype:
    """The dtype ``x`` is stored in: ``dtype`` when given (a float, or uint8
    for binary 0/1 data, whose values are checked by one pass), else float32
    or float64 as given, float64 for integer input."""
    out_dtype = np.dtype(dtype) if dtype is not None else (
        x.dtype if np.issubdtype(x.dtype, np.floating) else np.dtype(np.float64)
    )
    binary = out_dtype == np.uint8
    if not (np.issubdtype(out_dtype, np.floating) or binary):
        raise TypeError(f"dtype must be a float dtype, or uint8 for binary 0/1 data; got {out_dtype}.")
    if binary:  # binary features (CMBC): one byte per value, and only 0 and 1 may be stored
        from ..kernels.stats import LABEL_VALUES

        values = engine.map_reduce(LABEL_VALUES, x)["values"]
        bad = values[(values != 0) & (values != 1)]
        if bad.size:
            raise ValueError(f"dtype=uint8 stores binary data, but 'x' holds the values {bad[:5].tolist()}; "
                             "binarize it first (e.g. (x > 0)) or keep a float dtype.")
    return out_dtype


def _add_labels(add: Any, n: int, label: Any, extra_labels: dict | None, fold: Any) -> None:
    """Check the class labels, the extra label columns and the fold numbers
    of :func:`write_dataset` against the ``n`` rows and ``add`` them."""
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
        if not engine.is_lazy(fold) and n and (np.min(fold) < 0 or np.max(fold) > np.iinfo(np.int16).max):
            raise ValueError(f"'fold' numbers must be 0 .. 32767; got {np.min(fold)} .. {np.max(fold)}.")
        add("fold", fold, ("sample",), np.int16)


def _store_attrs(provenance: dict | None, class_names: Any, extra_labels: dict | None,
                 label_class_names: dict | None, attrs: dict | None) -> dict:
    """The group attributes of a new store: schema version, provenance (with
    a new ``store_id``), class names, label columns, then ``attrs``."""
    from .. import __version__

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
    return all_attrs


def _write_local(path: Path, ds: Any, encoding: dict, overwrite: bool, progress: bool) -> Path:
    """Write ``ds`` into a temporary folder beside ``path`` (the chunks as one
    graph on the chosen scheduler, every chunk on disk), its manifests, then
    move it into place under the write lock."""
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_temporaries(path)
    with WriteLock(path):
        check_destination(path, overwrite)  # again, under the lock: another writer may have finished meanwhile
        tmp = temp_name(path, "tmp")
        try:
            # metadata now; the chunk writes as one graph on the chosen scheduler
            writes = ds.to_zarr(tmp, mode="w-", zarr_format=3, encoding=encoding, consolidated=False,
                                compute=False, write_empty_chunks=True)  # every chunk on disk: none reads as fill
            engine.compute(writes, progress=progress)
            write_manifest(tmp)
            _replace(tmp, path, overwrite)
        except OSError as exc:
            raise disk_error(exc, path, int(ds.nbytes)) from exc
        finally:
            remove_tree(tmp)
    return path

def _write_at_url(loc: Location, ds: Any, encoding: dict, overwrite: bool, progress: bool) -> str:
    """Chunks and metadata straight to the URL (on the workers), then the
    manifests, which commit the store (:mod:`infoclust_dask.storage.manifest`)."""
    _check_url_destination(loc, overwrite)
    if loc.find():
        loc.remove()  # an interrupted write, and overwrite was asked
    writes = ds.to_zarr(loc.url, mode="w-", zarr_format=3, encoding=encoding, consolidated=False, compute=False,
                        write_empty_chunks=True, storage_options=loc.storage_options or None)
    engine.compute(writes, progress=progress)
    write_manifest(loc)
    return loc.url


def _replace(tmp: Path, path: Path, overwrite: bool):
    """Move the finished ``tmp`` to ``path``; an old store is removed only
    after the new one is in place."""
    if not path.exists():
        os.rename(tmp, path)
        return
    if not overwrite:
        raise StoreError(f"A store appeared at '{path}' while writing; not overwriting it.")
    check_destination(path, overwrite)
    old = temp_name(path, "old")
    os.rename(path, old)
    try:
        os.rename(tmp, path)
    except OSError:
        os.rename(old, path)
        raise
    shutil.rmtree(old, ignore_errors=True)
