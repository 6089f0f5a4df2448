"""Labels added to an existing store (the clusters of a fit, ``infoclust
predict --write-labels``): a new integer variable chunked like ``x``, moved
in atomically; the store's own classes and ingested known clusterings are
never replaced."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from .. import engine
from ..storage.atomic import (
    StoreError,
    WriteLock,
    atomic_write_text,
    clean_stale_temporaries,
    disk_error,
    remove_tree,
    temp_name,
)
from ..storage.manifest import stamp_group, write_manifest
from ..storage.paths import URLNotSupported, is_url, local_path
from ..storage.reading import SCHEMA_VERSION, open_dataset
from .store import _compressors, is_store_of_ours

__all__ = ["add_labels", "check_label_name"]


def check_label_name(name: str) -> str:
    """A label variable's name: a Python identifier other than x, y and fold."""
    if not str(name).isidentifier() or name in ("x", "y", "fold"):
        raise ValueError(f"{name!r} cannot name a label variable (x, y and fold are taken; use a Python identifier).")
    return name


@engine.entry_point(data_here=("labels",))
def add_labels(path: str | os.PathLike, name: str, labels: Any, *, overwrite: bool = False, scheduler: Any = None,
               attrs: dict | None = None) -> Path:
    """Add an integer label variable ``name`` (sample,) to the store at
    ``path`` (e.g. the clusters of a fit), chunked like ``x``.

    Atomic: the variable is written (with its chunk manifest) into a hidden
    sibling of the store, then moved in with one rename; the group's
    ``label_columns`` attribute is rewritten atomically. An existing variable
    of that name is replaced only with ``overwrite`` (never ``x``, ``y`` or
    ``fold``). ``labels`` may be lazy: it is written block by block on
    ``scheduler``. Returns the store path.
    """
    import json

    import dask.array as da
    import xarray as xr


    if is_url(path):
        raise URLNotSupported(
            f"add_labels writes into a store on a local or shared file system (it renames the new variable into "
            f"place); '{path}' is a URL. Write the labels to a file instead (`infoclust predict ... --out "
            "labels.npy`), or ingest a copy of the store to a local path and add them there.")
    path = local_path(path, "store")
    ds = open_dataset(path)
    if not is_store_of_ours(path):
        raise StoreError(f"'{path}' is not a store written by infoclust_dask; labels are added only to those.")
    check_label_name(name)
    added = set(ds.attrs.get("added_labels", [])) | set(ds.attrs.get("label_attrs", {}))  # results, by add_labels
    ingested = ["label"] * ("label" in ds) + [c for c in ds.attrs.get("label_columns", []) if c in ds and c not in added]
    if name in ingested:  # the data's own classes or known clusterings, not a result that may be replaced
        raise StoreError(f"The store '{path}' holds {name!r} as data (its {'class labels' if name == 'label' else 'known clustering'}"
                         f"), which overwrite=True does not replace. Write the clusters under another name "
                         f"(e.g. '{name}_clusters'; CLI: --write-labels NAME).")
    if name in ds and not overwrite:
        raise StoreError(f"The store '{path}' already has a variable {name!r}. Pass overwrite=True (CLI: "
                         "--overwrite) to replace it, or choose another name.")
    n = ds.sizes["sample"]
    arr = engine.as_array(labels)
    if arr.shape != (n,):
        raise ValueError(f"The labels have shape {arr.shape}; the store has {n} samples, so they must be ({n},).")
    if not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"Labels must be integers; got dtype {arr.dtype}.")
    rows = ds["x"].chunks[0][0]
    arr = (arr if engine.is_lazy(arr) else da.from_array(np.asarray(arr), chunks=rows)).astype(np.int32)
    arr = arr.rechunk(rows)
    clean_stale_temporaries(path)
    with WriteLock(path.parent / f"{path.name}.{name}"):
        tmp = temp_name(path, "var")
        old = None
        try:
            piece = xr.Dataset({name: (("sample",), arr)}, attrs={"schema_version": SCHEMA_VERSION})
            writes = piece.to_zarr(tmp, mode="w-", zarr_format=3, consolidated=False, compute=False,
                                   encoding={name: {"chunks": (rows,), "compressors": _compressors("lz4", 4)}},
                                   write_empty_chunks=True)
            engine.compute(writes)
            write_manifest(tmp)
            # the manifest lists paths relative to the store root, which are the same in the target
            target = path / name
            if target.exists():
                old = temp_name(path, "old")
                os.rename(target, old)
            os.rename(tmp / name, target)
            meta = path / "zarr.json"
            doc = json.loads(meta.read_text())
            at = doc.setdefault("attributes", {})
            cols = [c for c in at.get("label_columns", []) if c != name]
            at["label_columns"] = cols + [name]
            at["added_labels"] = [c for c in at.get("added_labels", []) if c != name] + [name]
            if attrs:
                at.setdefault("label_attrs", {})[name] = attrs
            atomic_write_text(meta, json.dumps(doc, indent=2), overwrite=True)
            stamp_group(path)  # the manifests record the new attributes' hash
        except OSError as exc:
            raise disk_error(exc, path, int(arr.nbytes)) from exc
        finally:
            remove_tree(tmp, wait=1.0)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
    return path
