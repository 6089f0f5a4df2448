"""Opening a dataset store (the layout is described in
:mod:`infoclust_dask.io.store`, which writes it): the manifests read and
checked, every chunk bound to its key (:mod:`infoclust_dask.storage.bound`), the
attributes and variables validated, and the opened stores of this process
kept for reuse (the most recently used :data:`OPENED_MAX`)."""

from __future__ import annotations

import os
import threading
from typing import Any

from .atomic import StoreError, live_writer
from .location import Location, resolve
from .manifest import (
    MANIFEST,
    PREVIOUS_ATTRS,
    check_chunks,
    check_metadata,
    read_manifests,
    bound_store,
    check_group,
    committed_rows,
    manifest_problems,
    unmanifested,
)

__all__ = ["open_dataset", "forget_opened", "OPENED_MAX", "SCHEMA_VERSION"]

SCHEMA_VERSION = 1

class StoreChanged(StoreError):
    """A writer committed while the store was being opened: opening again reads the new version."""


_OPENED_LOCK = threading.Lock()
_OPENED: dict = {}
#: stores kept open per process (the most recently used ones)
OPENED_MAX = 16


def forget_opened() -> None:
    """Forget the stores this process keeps open (:func:`open_dataset`
    reads their manifests and chunks' checks again on the next open): for
    a caller that changed a store's bytes behind the manifests' back (a
    test, a repair)."""
    with _OPENED_LOCK:
        _OPENED.clear()


def _refuse_unmanifested(loc: Location, docs: dict | None, path: Any) -> None:
    """A store of ours (it has ``schema_version``) with an array without a
    manifest cannot be checked: refuse it (``trust=True`` reads it)."""
    import json

    try:
        ours = "schema_version" in json.loads(loc.read_bytes("zarr.json")).get("attributes", {})
    except (ValueError, AttributeError, FileNotFoundError):
        return  # unreadable metadata: reported by the open that follows
    missing = unmanifested(loc, docs)
    if ours and missing:
        raise StoreError(f"The store at '{path}' was written by infoclust_dask but {', '.join(map(repr, missing))} "
                         f"{'has' if len(missing) == 1 else 'have'} no chunk manifest ({MANIFEST}: deleted, or the "
                         "store was copied without it), so its bytes cannot be checked. Re-ingest it from its source, "
                         "or read it unchecked with --trust (Python: open_dataset(path, trust=True)).")


def _open_group(loc: Location, docs: dict | None, bind: bool = True) -> Any:
    """The zarr group at ``loc`` as an xarray Dataset. When an append was
    killed between rewriting one array's metadata and the next (some arrays
    declare more rows than the manifests commit, others not yet), the
    arrays cannot share the ``sample`` dimension: each is then opened alone
    and cut to the committed rows (the rows beyond are not committed)."""
    import xarray as xr

    def open_(drop=None):
        if docs is None or not bind:  # no manifest (a store of another tool), or read with trust=True
            return xr.open_zarr(loc.zarr_target(), consolidated=False, zarr_format=3, chunks={},
                                storage_options=loc.storage_options or None, drop_variables=drop)
        # every chunk read (here and on the workers) is checked against the manifest entry of its own key
        store = bound_store(loc, docs)
        ds = xr.open_zarr(store, consolidated=False, zarr_format=3, chunks={}, drop_variables=drop)
        return _read_by_zarr(ds, store)

    rows = committed_rows(docs)
    try:
        return open_()
    except ValueError:
        if rows is None:
            raise
    names = list(docs or {})
    parts = []
    for var in names:
        part = open_([v for v in names if v != var])
        parts.append(part.isel(sample=slice(0, rows)) if "sample" in part.dims else part)
    ds = xr.merge(parts, combine_attrs="override", compat="override", join="exact")
    return ds


def _read_by_zarr(ds: Any, store: Any) -> Any:
    """``ds`` with each variable's dask array reading its row chunks from
    ``store`` by :func:`infoclust_dask.storage.bound.read_rows` (same chunks, same
    task names) instead of through xarray's lazy indexing wrappers and
    ``dask.array``'s getter: the tasks that reach the workers then name
    zarr and this package only. A worker that unpickles a ``dask.array``
    function imports ``dask.array``, which imports xarray and pandas when
    they are installed (~100 MB of a worker's memory, measured). A variable
    xarray decoded into another dtype or shape, or chunked along another
    dimension than ``sample``, keeps xarray's array."""
    import zarr

    group = zarr.open_group(store, mode="r", zarr_format=3)
    for name, var in ds.variables.items():
        data = var.data
        if not hasattr(data, "dask") or name not in group:
            continue
        arr = group[name]
        if (not isinstance(arr, zarr.Array) or arr.shape != data.shape or arr.dtype != data.dtype
                or any(len(c) != 1 for c in data.chunks[1:])):
            continue
        var.data = _row_chunks(arr, data.chunks, f"read-{data.name}")  # a name of its own: never merged with xarray's
    return ds


def _row_chunks(arr: Any, chunks: tuple, name: str) -> Any:
    """A dask array over the zarr array ``arr``, one task per row chunk
    (:func:`infoclust_dask.storage.bound.read_rows`)."""
    import dask.array as da
    import numpy as np
    from dask.highlevelgraph import HighLevelGraph

    from .bound import read_rows

    bounds = np.cumsum((0,) + tuple(chunks[0]))
    rest = (0,) * (arr.ndim - 1)
    dsk: dict[Any, Any] = {(name, i, *rest): (read_rows, arr, int(a), int(b)) for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True))}
    return da.Array(HighLevelGraph.from_collections(name, dsk, dependencies=()), name, chunks, dtype=arr.dtype,
                    meta=np.empty((0,) * arr.ndim, dtype=arr.dtype))


#: seconds a reader waits for a write or an append in progress on a local store before saying so
WRITER_WAIT_SECONDS = 30.0


def open_dataset(path: str | os.PathLike | Location, *, storage_options: dict | None = None,
                 trust: bool = False) -> Any:
    """Open a dataset store lazily (dask-backed xarray Dataset), from a local
    path or an fsspec URL (``s3://bucket/d.zarr``, with non-secret
    ``storage_options``; credentials come from the environment:
    :mod:`infoclust_dask.storage.location`). Only the rows the manifests commit
    are read (an append that did not finish is not seen), every listed
    chunk must be there with its size, and each array's metadata and the
    group's attributes must be those the manifests record.

    Every chunk read from the returned arrays (here or on the workers) is
    checked against the manifest entry of its own key - its size and the
    CRC-32C trailer its codec wrote (:mod:`infoclust_dask.storage.bound`) - so a
    moved, swapped or substituted chunk fails the read (:class:`StoreError`).

    A store written by infoclust_dask whose manifest is missing (deleted, or
    copied without it) is refused: its bytes cannot be checked. ``trust=True``
    (CLI ``--trust``) reads it unchecked. Stores written by other tools
    (no ``schema_version``) have no manifest and are read as they are.

    A store is opened once per process and version (its path and the
    bytes of its metadata and manifests): every call returns a shallow
    copy of that one opening. Two openings of the same store give dask graphs
    with the same keys but different zarr objects inside, which a
    distributed scheduler reports as "different run_spec for key" (and which
    can cancel one caller's tasks) when threads of one process - the cells
    of a cross-validation sweep, bootstrap replicates - compute at once.

    A local store that reads as damaged while another process holds its
    write lock (an append in progress: its chunks are ahead of its
    manifests) is not damaged: the reader waits for the writer (at most
    ``$INFOCLUST_WRITER_WAIT`` seconds, 30 by default) and opens it then, or
    says that the write is still in progress.

    Raises
    ------
    FileNotFoundError
        no store at ``path``.
    StoreError
        the folder is not a zarr group, lacks ``x``, has the wrong dims or a
        schema version this library does not read; at a URL, the store has
        no manifest (its write did not finish).
    """
    try:
        return _open_dataset(path, storage_options=storage_options, trust=trust)
    except StoreError as exc:
        loc = resolve(path, "store", storage_options)
        if "damaged" not in str(exc) and not isinstance(exc, StoreChanged):
            raise
        if loc.local is None or live_writer(loc.local) is None:
            return _open_again(path, storage_options, trust, exc)
        import time

        from .._support.settings import env_number

        limit = float(env_number("INFOCLUST_WRITER_WAIT", WRITER_WAIT_SECONDS, seconds=True, allow_zero=True))
        deadline = time.monotonic() + limit
        while (pid := live_writer(loc.local)) is not None and time.monotonic() < deadline:
            time.sleep(0.2)
        if pid is not None:
            raise StoreError(f"The store at '{loc.local}' is being written by another process (PID {pid}: an append "
                             f"or a write in progress) and was still being written after {limit:g} s; wait for it "
                             "to finish and try again (the store is not damaged: `infoclust verify` checks it "
                             "once the writer is done).") from None
        return _open_dataset(path, storage_options=storage_options, trust=trust)


#: seconds between a reader's attempts to open a store it found inconsistent while no writer holds its lock,
#: as long as the store keeps changing between attempts (a writer committing: a local writer may have
#: released its lock, an object store has none); a store that does not change is damaged, said at once
CHANGING_RETRIES = (0.3, 0.6, 1.0, 2.0)


def _state(path: Any, storage_options: dict | None) -> str | None:
    """A digest of the store's group metadata and manifests (None when they cannot be read)."""
    from .manifest import store_digest

    try:
        return store_digest(path, storage_options)
    except (OSError, ValueError, KeyError):
        return None


def _open_again(path: Any, storage_options: dict | None, trust: bool, first: StoreError) -> Any:
    """Open once more at once (a writer may have committed between the first open's reads); then, while
    the store's metadata keeps changing, after each of :data:`CHANGING_RETRIES`; else the first error."""
    import time

    seen = _state(path, storage_options)
    for pause in (0.0, *CHANGING_RETRIES):
        time.sleep(pause)
        try:
            return _open_dataset(path, storage_options=storage_options, trust=trust)
        except StoreError as exc:
            if "damaged" not in str(exc) and not isinstance(exc, StoreChanged):
                raise
        now = _state(path, storage_options)
        if now == seen:  # nothing is being written: the damage is real
            raise first
        seen = now
    raise first


def _open_dataset(path: str | os.PathLike | Location, *, storage_options: dict | None = None,
                 trust: bool = False) -> Any:
    """:func:`open_dataset` without the wait for a writer in progress."""

    loc = resolve(path, "store", storage_options)
    path = loc.local if loc.local is not None else loc.url
    if not loc.exists():
        raise FileNotFoundError(_no_store(loc, path))
    if not loc.exists("zarr.json"):
        raise StoreError(
            f"'{path}' is not a zarr (format 3) group: no zarr.json inside. Was it written "
            "by infoclust_dask.write_dataset / `infoclust ingest`?"
        )
    key = (_version_key(loc), bool(trust))
    with _OPENED_LOCK:
        ds = _OPENED.pop(key, None)
        if ds is None:
            docs = read_manifests(loc)
            if not trust and loc.local is not None:
                _refuse_unmanifested(loc, docs, path)
            if docs is None and loc.local is None:
                raise StoreError(f"The store at '{path}' has no manifest: its write did not finish (or another tool "
                                 "wrote it). Write it again (overwrite=True replaces an interrupted write).")
            problems = manifest_problems(docs) if docs is not None else []
            if not problems and docs is not None:
                problems, _ = check_metadata(loc, docs, group=False)
            if problems:  # before zarr reads metadata that does not describe the bytes
                raise StoreError(f"The store at '{path}' is damaged: " + "; ".join(problems[:3]) +
                                 ". Re-ingest it from its source (or restore the file); `infoclust verify` lists "
                                 "every problem.")
            try:
                ds = _open_group(loc, docs, bind=not trust)
            except Exception as exc:  # zarr raises many types for corrupt metadata
                raise StoreError(f"Could not open the store at '{path}': {exc}") from exc
            problems = check_chunks(loc, docs) if docs is not None else []
            if problems:
                more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
                raise StoreError(f"The store at '{path}' is damaged: " + "; ".join(problems[:3]) + more +
                                 ". Re-ingest it from its source; `infoclust verify` lists every damaged chunk.")
            rows = committed_rows(docs)
            if rows is not None and "sample" in ds.sizes and ds.sizes["sample"] > rows:
                # an append that did not finish: neither its rows nor the attributes it wrote are committed
                ds = ds.isel(sample=slice(0, rows))
                if loc.exists(f"x/{PREVIOUS_ATTRS}"):
                    import json

                    try:
                        ds.attrs = json.loads(loc.read_text(f"x/{PREVIOUS_ATTRS}"))
                    except FileNotFoundError:  # the append committed since the manifests were read
                        raise StoreChanged(f"The store at '{path}' changed while it was opened (an append "
                                           "committed); open it again.") from None
            if docs is not None:  # the attributes: first what they should hold, then that they are those written
                _validate_opened(ds, path)
                group_problems, _ = check_group(loc, docs)
                if group_problems:
                    raise StoreError(f"The store at '{path}' is damaged: {group_problems[0]}. Re-ingest it from its "
                                     "source (or restore the file); `infoclust verify` lists every problem.")
        _OPENED[key] = ds  # most recent last
        while len(_OPENED) > OPENED_MAX:
            _OPENED.pop(next(iter(_OPENED)))
    ds = ds.copy(deep=False)
    _validate_opened(ds, path)
    return ds


def _no_store(loc: Location, path: Any) -> str:
    """Why there is no store at ``path``, and what to do: a missing bucket
    is named; an http(s) URL is read-only (nothing can be ingested there)."""
    if loc.local is None and loc.protocol in ("http", "https"):
        return (f"No dataset store at '{path}' (nothing answers there as a zarr store). http(s) URLs are read-only: "
                "ingest to a local path or an object store (s3://...) and serve that folder.")
    if loc.local is None and loc.protocol not in ("memory",):
        bucket = loc.fspath.strip("/").split("/", 1)[0]
        try:
            present = loc.fs.exists(bucket)
        except Exception:  # noqa: BLE001 - the check is only for the message; the endpoint error comes later
            present = True
        if not present:
            return (f"No dataset store at '{path}': the bucket '{bucket}' does not exist at this endpoint. Check the "
                    "URL and the endpoint setting (FSSPEC_S3_ENDPOINT_URL / AWS_ENDPOINT_URL), or create the "
                    "bucket, then ingest into it.")
    return (f"No dataset store at '{path}'. Create one with `infoclust ingest SRC {path}` "
            "or infoclust_dask.write_dataset(...).")


def _validate_opened(ds: Any, path: Any) -> None:
    """The layout and attributes an infoclust_dask store must have."""
    version = ds.attrs.get("schema_version")
    if version is None:
        raise StoreError(
            f"The store at '{path}' has no 'schema_version' attribute; it was not written by infoclust_dask."
        )
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise StoreError(f"The store at '{path}' has a damaged attribute 'schema_version': expected an integer >= 1, "
                         f"found {type(version).__name__} {version!r}. Re-ingest the store (or restore its zarr.json).")
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
    _check_attrs(ds, path)


def _check_attrs(ds: Any, path: Any) -> None:
    """The attributes this package reads, checked on open: a damaged or
    edited one is named instead of surfacing later as a wrong number or a
    traceback deep in a fit."""
    a = ds.attrs
    d = int(ds.sizes["feature"])

    def bad(name, what):
        raise StoreError(f"The store at '{path}' has a damaged attribute {name!r}: {what}. Re-ingest the store "
                         "(or restore its zarr.json).")

    def names(name, value):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            bad(name, f"expected a list of class names, found {type(value).__name__} {str(value)[:60]!r}")

    if "class_names" in a:
        names("class_names", a["class_names"])
    for name in ("label_class_names",):
        if name in a:
            if not isinstance(a[name], dict):
                bad(name, f"expected a dict of column -> class names, found {type(a[name]).__name__}")
            for k, v in a[name].items():
                names(f"{name}[{k!r}]", v)
    width = len(a["components"][0]) if isinstance(a.get("components"), list) and a["components"] and \
        isinstance(a["components"][0], list) else d
    for name in ("feature_mean", "feature_std"):
        if name in a:
            v = a[name]
            ok = isinstance(v, list) and all(isinstance(t, (int, float)) and not isinstance(t, bool) for t in v)
            if not ok:
                bad(name, f"expected a list of {width} numbers, found {type(v).__name__} {str(v)[:60]!r}")
            if len(v) != width:
                bad(name, f"it has {len(v)} values for {width} features")
            if name == "feature_std" and any(t < 0 for t in v):
                bad(name, "a standard deviation is negative")
    if "n_folds" in a and a["n_folds"] is not None:
        if isinstance(a["n_folds"], bool) or not isinstance(a["n_folds"], int) or a["n_folds"] < 2:
            bad("n_folds", f"expected an integer >= 2, found {a['n_folds']!r}")
    if "label_columns" in a:
        cols = a["label_columns"]
        if not isinstance(cols, list) or not all(isinstance(c, str) and c in ds for c in cols):
            bad("label_columns", f"expected names of the store's label variables, found {str(cols)[:60]!r}")


def _version_key(loc: Location) -> tuple:
    """What identifies one version of a store: a local folder's and its
    metadata's modification times (a rewrite renames a new folder into place;
    adding a variable adds an entry; an append rewrites zarr.json and the
    manifests), or the bytes of a URL store's group metadata and manifests."""
    import hashlib

    if loc.local is not None:
        path = loc.local
        stamps = [path.stat().st_mtime_ns, (path / "zarr.json").stat().st_mtime_ns]
        for m in sorted(path.glob(f"*/{MANIFEST}")):
            stamps.append(m.stat().st_mtime_ns)
        return (str(path.resolve()), *stamps)
    h = hashlib.sha256(loc.read_bytes("zarr.json"))
    for rel in sorted(r for r in loc.find() if r.endswith(MANIFEST)):
        h.update(loc.read_bytes(rel))
    return (loc.url, repr(sorted(loc.storage_options.items())), h.hexdigest())


