"""Appending rows to a store, all at once or not at all, on a local disk or
at an object-storage URL (no rename needed).

:func:`append_dataset` writes the new rows (with the old, partly filled
last chunk's rows before them) as a staging store beside the target, with
the target's chunk size and codecs, so that staging chunk ``j`` is target
chunk ``j + first``. It then

1. moves the staging chunks that lie wholly beyond the committed rows into
   the target (invisible: readers read the committed rows only);
2. records the new size of the old last chunk (``infoclust-pending.json``)
   and moves its rewritten version in (its old rows are unchanged, so the
   committed version still reads the same numbers);
3. writes each array's metadata with the new row count, the group's
   attributes, and last the arrays' manifests, which commit the rows
   (:mod:`infoclust_dask.storage.manifest`).

A kill at any point leaves the previous version readable and whole (a
reader takes the manifests' row count and the attributes they recorded);
the next append starts again from the committed rows. It removes a killed
append's chunk files beyond the rows that the arrays' metadata declares
before it writes, and those beyond its own rows just before its manifests:
the metadata never declares rows whose chunks are gone, however many
appends are killed in a row. The new rows get the same treatment as the stored ones:
the stored standardization / PCA transform applied, fold numbers from the
same seeded hash of the row number, label codes in the stored class names
(new class names are added at the end), per-feature moments of untransformed
data updated. Writers must not run at once on the same store (one lock on
a local disk; on an object store there is no lock, so run one writer).
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from typing import Any

import numpy as np

from .. import engine
from ..preprocess import feature_moments, moments_from_sums
from ..storage.atomic import StoreError, WriteLock, clean_stale_temporaries, clean_stale_temporaries_within, temp_name
from ..storage.bound import pending_entry
from ..storage.commits import committed_attributes, committed_rows, interrupted_rows, row_chunk, row_step
from ..storage.location import Location, resolve
from ..storage.manifest import (
    PREVIOUS_ATTRS,
    read_manifests,
    stored_arrays,
    write_manifest,
    write_pending,
)

__all__ = ["append_dataset"]


def _combined_moments(n0: int, mean0: np.ndarray, std0: np.ndarray, n1: int, mean1: np.ndarray,
                      std1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation (population) of two row sets from their
    counts and moments (Chan, Golub & LeVeque's pairwise update)."""
    n = n0 + n1
    delta = mean1 - mean0
    m2 = std0 ** 2 * n0 + std1 ** 2 * n1 + delta ** 2 * n0 * n1 / n
    return mean0 + delta * n1 / n, np.sqrt(np.maximum(m2 / n, 0.0))


def _transform(x: Any, attrs: dict, prov: dict) -> Any:
    """The new rows through the store's stored preprocessing."""
    if not prov.get("standardized") and prov.get("pca") is None:
        return x
    mean = np.asarray(attrs["feature_mean"], dtype=np.float64)
    std = np.asarray(attrs["feature_std"], dtype=np.float64)
    out = x
    if prov.get("standardized"):
        out = (out - mean) / np.where(std > 0, std, 1.0)
    if prov.get("pca") is not None:
        comps = np.asarray(attrs["components"], dtype=np.float64)
        center = np.zeros(mean.shape) if prov.get("standardized") else mean
        out = (out - center) @ comps.T
    return out


def _label_codes(name: str, codes: Any, names: Any, stored_names: list | None) -> tuple[Any, list | None]:
    """New rows' label codes in the store's numbering, and the class names
    after the append (new names added at the end)."""
    codes = engine.as_array(codes)
    if names is None:
        if stored_names is not None:
            bad = int(engine.compute(codes.max(), scheduler="threads")) if codes.size else -1
            if bad >= len(stored_names):
                raise ValueError(f"'{name}' holds the code {bad}, but the store names only {len(stored_names)} "
                                 f"classes ({stored_names[:5]}...); pass codes below {len(stored_names)}.")
        return codes, stored_names
    stored = list(stored_names or [])
    index = {c: i for i, c in enumerate(stored)}
    new = [str(c) for c in names if str(c) not in index]
    merged = stored + new
    index = {c: i for i, c in enumerate(merged)}
    table = np.array([index[str(c)] for c in names], dtype=np.int32)
    return (table[np.asarray(codes)] if not engine.is_lazy(codes) else codes.map_blocks(
        lambda b: table[b], dtype=np.int32)), merged


def _fold_ids(n_old: int, n_new: int, attrs: dict, rows: int) -> Any:
    from .folds import fold_vector

    full = fold_vector(n_old + n_new, int(attrs["n_folds"]), seed=int(attrs.get("fold_seed", 0)), chunks=rows)
    return full[n_old:]


#: new values at most this large: their squares (distances, variances) stay finite in float64
MAX_APPEND_VALUE = 1e150


def _refuse_huge(largest: float, variable: str) -> None:
    if largest > MAX_APPEND_VALUE:
        raise ValueError(
            f"'{variable}' holds values as large as {largest:.3g}: their squares overflow float64, so the store's "
            "moments would become NaN and every later fit would refuse the store. Rescale the new rows (e.g. "
            f"divide those columns by a power of ten) so that values stay below {MAX_APPEND_VALUE:.0e}. Nothing "
            "was appended.")


def _refuse_nonfinite(block: np.ndarray, variable: str) -> np.ndarray:
    bad = int(np.count_nonzero(~np.isfinite(block)))
    if bad:
        raise ValueError(f"'{variable}' contains {bad} NaN or infinite values in one block of the new rows. Drop or "
                         "impute those rows first (CLI: `infoclust ingest --drop-nonfinite`).")
    if block.size:
        _refuse_huge(float(np.abs(block).max()), variable)
    return block


def _refuse_codes(block: np.ndarray, variable: str, n_names: int | None) -> np.ndarray:
    if block.size and int(block.min()) < 0:
        raise ValueError(f"'{variable}' must be >= 0; found {int(block.min())}.")
    if n_names is not None and block.size and int(block.max()) >= n_names:
        raise ValueError(f"'{variable}' holds the code {int(block.max())}, but the store names only {n_names} "
                         f"classes; pass codes below {n_names}.")
    return block


def _checked(arr: Any, check: Any, **kw: Any) -> Any:
    """A lazy ``arr`` whose blocks are checked as the append writes them (one
    pass over the new rows instead of a pass per check: a failed check
    aborts the staged write, and nothing is committed)."""
    return arr.map_blocks(check, dtype=arr.dtype, **kw)


@engine.entry_point
def append_dataset(path: str | os.PathLike, x: Any, *, label: Any = None, y: Any = None,
                   extra_labels: dict | None = None, class_names: Any = None,
                   label_class_names: dict | None = None, feature_names: Any = None,
                   source: str | None = None, storage_options: dict | None = None, scheduler: Any = None,
                   progress: bool = False) -> dict:
    """Append the rows ``x`` (and their ``label``, ``y``, extra label
    columns) to the store at ``path`` (a local path or a URL), all at once
    or not at all (module notes).

    The store's variables decide what must be given: a store with ``label``
    needs ``label`` (integer codes, or codes with their ``class_names``,
    which are matched to the stored names by name); one with ``y`` needs
    ``y``; extra label columns by name. ``x`` is raw data as it was before
    ingest: a standardized or projected store applies its stored transform.
    ``feature_names`` (e.g. a CSV header) must equal the stored names.

    Returns a report ``{"store", "rows_before", "rows_added", "rows",
    "seconds"}``.
    """
    import time

    t0 = time.perf_counter()
    loc = resolve(path, "store", storage_options)
    ds = _appendable(loc)
    n_old = int(ds.sizes["sample"])
    attrs = dict(ds.attrs)
    x = engine.as_array(x)
    _check_columns(x, ds, feature_names)
    n_new = int(x.shape[0])
    if n_new == 0:
        raise ValueError("There are no rows to append.")
    given = {"label": label, "y": y, **{k: v for k, v in (extra_labels or {}).items()}}
    wanted = _wanted_variables(ds, given)
    if not np.issubdtype(x.dtype, np.number):
        raise TypeError(f"'x' must be numeric; got dtype {x.dtype}.")
    new_attrs = dict(attrs)
    x, moments = _checked_rows(x.astype(np.float64), attrs, n_old, new_attrs)
    new_vars: dict[str, Any] = {"x": _transform(x, attrs, dict(attrs.get("provenance", {})))}
    for name in wanted:
        if name == "y":
            new_vars["y"] = _checked_y(y, n_new, int(ds.sizes["feature_y"]))
        else:
            new_vars[name] = _checked_codes(name, given[name], n_new, attrs, new_attrs, class_names,
                                            label_class_names)
    rows = int(ds["x"].chunks[0][0])
    if "fold" in ds.data_vars:
        new_vars["fold"] = _fold_ids(n_old, n_new, attrs, rows)
    first = n_old // rows  # the first chunk the append writes
    staged_vars = _staged_variables(ds, new_vars, first * rows, n_old, rows)
    staging = _staging_location(loc)
    encoding = _encodings(loc, staged_vars)
    lock = WriteLock(loc.local) if loc.local is not None else contextlib.nullcontext()
    with lock:
        if loc.local is not None:
            clean_stale_temporaries(loc.local)
            clean_stale_temporaries_within(loc.local)
        remove_leftovers(loc, read_manifests(loc) or {}, keep=staging)
        _write_staged(loc, staging, staged_vars, encoding, first, n_old + n_new, new_attrs, source, n_new,
                      progress, moments)
    return {"store": str(loc), "rows_before": n_old, "rows_added": n_new, "rows": n_old + n_new,
            "seconds": round(time.perf_counter() - t0, 3)}


def _appendable(loc: Location) -> Any:
    """The store at ``loc`` opened, after checking that it exists and has the
    row-counting manifests an append commits through."""
    from .store import open_dataset

    if not loc.exists("zarr.json"):
        raise FileNotFoundError(f"No dataset store at '{loc}' to append to. Create it first with "
                                f"`infoclust ingest SRC {loc}`.")
    docs = read_manifests(loc)
    if docs is None or committed_rows(docs) is None:
        raise StoreError(f"The store at '{loc}' has no row-counting manifest (it was written by an older version "
                         "or another tool), so rows cannot be appended to it safely. Re-ingest it with this version.")
    return open_dataset(loc)


def _check_columns(x: Any, ds: Any, feature_names: Any) -> None:
    """The new rows have the columns of the raw data the store was made from
    (before a stored projection), with the stored names when both are known."""
    attrs = ds.attrs
    prov = dict(attrs.get("provenance", {}))
    if x.ndim != 2:
        raise ValueError(f"'x' must be 2-D (rows, features); got shape {x.shape}.")
    d_in = len(attrs["feature_mean"]) if prov.get("pca") is not None and "feature_mean" in attrs else ds.sizes["feature"]
    if x.shape[1] != d_in:
        raise ValueError(f"The new rows have {x.shape[1]} columns; the store's rows have {d_in}. Append rows with "
                         "the same columns.")
    stored_features = ds["x"].attrs.get("feature_names")
    if feature_names is not None and stored_features is not None:
        new = [str(f) for f in feature_names]
        if new != list(stored_features):
            extra = [f for f in new if f not in stored_features]
            lost = [f for f in stored_features if f not in new]
            what = "; ".join(p for p in (f"new columns {extra}" if extra else "",
                                         f"missing columns {lost}" if lost else "",
                                         "same columns in another order" if not (extra or lost) else "") if p)
            raise ValueError(f"The new rows' columns differ from the store's ({what}). Append a file with the "
                             f"store's columns: {list(stored_features)}.")


def _wanted_variables(ds: Any, given: dict) -> list[str]:
    """The store's variables the new rows must carry (all but ``x`` and
    ``fold``), refusing a missing one or one the store does not hold."""
    wanted = [v for v in ds.data_vars if v not in ("x", "fold")]
    missing = [v for v in wanted if given.get(v) is None]
    unknown = [k for k, v in given.items() if v is not None and k not in ds.data_vars]
    if missing or unknown:
        raise ValueError("The new rows must carry exactly the store's variables: "
                         + "; ".join(p for p in (f"missing {missing}" if missing else "",
                                                 f"not in the store {unknown}" if unknown else "") if p)
                         + f". The store holds {sorted(ds.data_vars)}.")
    return wanted


def _checked_rows(x: Any, attrs: dict, n_old: int, new_attrs: dict) -> tuple[Any, Any]:
    """``x`` checked for non-finite values, and the store's raw moments
    brought up to date (into ``new_attrs``) when it keeps them. Lazy new rows
    (a file being read, a generator) are gone through once: their checks run
    inside the staged write and the moments as a reduction in the same graph
    (returned as ``(reduction, combine)``); in-memory rows are checked first
    (cheap). Returns ``(x, moments or None)``."""
    from .store import _check_finite_rows

    prov = dict(attrs.get("provenance", {}))
    lazy = engine.is_lazy(x)
    n_new = int(x.shape[0])
    if not lazy and n_new:
        with np.errstate(invalid="ignore"):
            _refuse_huge(float(np.nanmax(np.abs(np.where(np.isfinite(x), x, 0.0)))), "x")
    if prov.get("standardized") or prov.get("pca") is not None or "feature_mean" not in attrs:
        if lazy:
            return _checked(x, _refuse_nonfinite, variable="x"), None
        _check_finite_rows("x", x)
        return x, None
    from ..kernels.stats import MOMENTS

    old_m, old_s = np.asarray(attrs["feature_mean"]), np.asarray(attrs["feature_std"])
    if lazy:
        x = _checked(x, _refuse_nonfinite, variable="x")
        shift = np.asarray(engine.compute(x[:1]), dtype=np.float64)[0]

        def combined(st, shift=shift):
            return _combined_moments(n_old, old_m, old_s, n_new, *moments_from_sums(st, shift)[:2])

        return x, (engine.build_reduction(MOMENTS, x, params={"shift": shift, "plain": True}), combined)
    # one pass: the moments' pass also counts the non-finite values
    m1, s1, _, n_bad = feature_moments(x)
    if n_bad:
        _check_finite_rows("x", x)  # raises, naming the count and the fix
    m, s = _combined_moments(n_old, old_m, old_s, n_new, m1, s1)
    new_attrs.update(feature_mean=m.tolist(), feature_std=s.tolist())
    return x, None


def _checked_y(y: Any, n_new: int, d_y: int) -> Any:
    """The new rows' second view, of the stored width and finite."""
    from .store import _check_finite_rows

    yy = engine.as_array(y)
    if yy.ndim != 2 or yy.shape != (n_new, d_y):
        raise ValueError(f"'y' must have shape ({n_new}, {d_y}); got {yy.shape}.")
    if engine.is_lazy(yy):
        return _checked(yy.astype(np.float64), _refuse_nonfinite, variable="y")
    _check_finite_rows("y", yy.astype(np.float64))
    if yy.size:
        _refuse_huge(float(np.abs(np.asarray(yy, dtype=np.float64)).max()), "y")
    return yy


def _checked_codes(name: str, values: Any, n_new: int, attrs: dict, new_attrs: dict, class_names: Any,
                   label_class_names: dict | None) -> Any:
    """The new rows' codes of the label column ``name``: given names matched
    to the stored ones by name (new names added to ``new_attrs``, with a
    warning), codes checked >= 0 (lazy codes as they are written)."""
    arr = engine.as_array(values)
    if arr.shape != (n_new,):
        raise ValueError(f"'{name}' must have one entry per new row ({n_new}); got shape {arr.shape}.")
    if name == "label":
        stored = attrs.get("class_names")
        names = class_names
    else:
        stored = (attrs.get("label_class_names") or {}).get(name)
        names = (label_class_names or {}).get(name)
    if engine.is_lazy(arr) and names is None:  # checked as they are written
        codes, merged = _checked(arr, _refuse_codes, variable=name, n_names=None if stored is None else len(stored)), stored
    else:
        codes, merged = _label_codes(name, arr, names, stored)
        low = int(engine.compute(codes.min()))
        if low < 0:
            raise ValueError(f"'{name}' must be >= 0; found {low}.")
    if merged is not None and merged != stored:
        import warnings

        added = [c for c in merged if c not in (stored or [])]
        warnings.warn(f"The append adds the class name{'s' if len(added) > 1 else ''} {added} to the store's "
                      f"'{name}' classes ({len(stored or [])} before, {len(merged)} after): models fitted on "
                      "the earlier rows have never seen them.", UserWarning, stacklevel=3)
        if name == "label":
            new_attrs["class_names"] = merged
        else:
            new_attrs["label_class_names"] = {**(attrs.get("label_class_names") or {}), name: merged}
    return codes


def _staged_variables(ds: Any, new_vars: dict, keep_from: int, n_old: int, rows: int) -> dict:
    """What the staged write holds per variable: the old rows that share the
    first chunk the append writes (``keep_from:n_old``), then the new rows in
    the stored dtype, in chunks of the store's ``rows``."""
    import dask.array as da

    staged = {}
    for name, arr in new_vars.items():
        old = ds[name].data[keep_from:n_old]
        rows_new = da.asarray(arr) if not isinstance(arr, da.Array) else arr
        staged[name] = (ds[name].dims, da.concatenate([old, rows_new.astype(ds[name].dtype)]).rechunk(
            (rows,) + tuple(rows_new.shape[1:])))
    return staged


def _staging_location(loc: Location) -> Location:
    """Where the staged write goes: a temporary folder beside a local store;
    beside the store at a URL too (a killed append leaves it behind: remove
    ``STORE.append-*`` with your bucket tools)."""
    if loc.local is not None:
        return resolve(temp_name(loc.local, "append"), "store")
    return resolve(f"{loc.url}.append-{os.getpid()}-{uuid.uuid4().hex[:8]}", "store", loc.storage_options or None)


def _encodings(loc: Location, names: Any) -> dict:
    """The stored chunking and compressors of each array in ``names``."""
    import zarr

    encoding = {}
    for name in names:
        arr = zarr.open_array(loc.zarr_target(), path=name, mode="r", storage_options=loc.storage_options or None)
        encoding[name] = {"chunks": arr.chunks, "compressors": arr.compressors}
    return encoding

def remove_leftovers(loc: Location, docs: dict[str, dict], keep: Location | None = None) -> list[str]:
    """What a killed append left behind, removed before the next write
    starts (writers do not run at once on one store): chunk files beyond the
    committed rows in the arrays' folders and, at a URL, staging stores
    ``STORE.append-*`` beside it (local staging folders are removed by
    :func:`infoclust_dask.storage.atomic.clean_stale_temporaries`). Returns what
    was removed."""
    rows = committed_rows(docs)
    removed: list[str] = []
    if rows is None:
        return removed
    for var, doc in docs.items():
        step = row_step(doc.get("metadata"))
        # the chunks an interrupted append's metadata declares stay until a commit declares fewer rows: removed
        # now, they would leave metadata declaring rows without their chunks - a damaged store if this append
        # is killed too before its commit rewrites that metadata
        kept = max(rows, interrupted_rows(loc, var, doc, rows) or 0)
        first_beyond = -(-kept // step) if step > 0 else None
        if first_beyond is None:
            continue
        # a manifest ahead of the store's committed rows (an append killed between two arrays' manifests)
        # lists chunks beyond them that nothing commits: they go too
        listed = doc["chunks"] if int(doc.get("rows", rows)) <= rows else {}
        for rel in loc.find(f"{var}/c"):
            if row_chunk(rel) >= first_beyond and rel not in listed:
                loc.remove(rel, recursive=False)
                removed.append(rel)
    if loc.local is None:
        parent, _, name = loc.full_path("").rstrip("/").rpartition("/")
        own = keep.full_path("").rstrip("/") if keep is not None and keep.local is None else None
        for p in loc.fs.glob(f"{parent}/{name}.append-*"):
            if p.rstrip("/") != own:
                loc.fs.rm(p, recursive=True)
                removed.append(p)
    return removed


def _write_staged(loc, staging, staged_vars, encoding, first, n_total, new_attrs, source, n_new, progress, moments=None):
    """Write the staged chunks (and, with ``moments = (lazy sums, combine)``,
    the new rows' moments in the same graph), then commit."""
    import xarray as xr

    try:
        piece = xr.Dataset({k: v for k, v in staged_vars.items()})
        writes = piece.to_zarr(staging.zarr_target(), mode="w-", zarr_format=3, consolidated=False, compute=False,
                               encoding=encoding, write_empty_chunks=True,
                               storage_options=staging.storage_options or None)
        if moments is None:
            engine.compute(writes, progress=progress)
        else:
            _, sums = engine.compute((writes, moments[0]), progress=progress)
            m, s = moments[1](sums)
            new_attrs = {**new_attrs, "feature_mean": m.tolist(), "feature_std": s.tolist()}
        _commit(loc, staging, list(staged_vars), first, n_total, new_attrs, source, n_new)
    finally:
        staging.remove()


def _commit(loc: Location, staging: Location, names: list[str], first: int, n_total: int, attrs: dict,
            source: str | None, n_added: int) -> None:
    """Steps 1-3 of the module notes."""
    import datetime as _dt

    partial = {}
    written: set[str] = set()
    for name in names:
        for rel in sorted(staging.find(f"{name}/c")):
            parts = rel.split("/")  # name/c/<i>/<j>...
            i = int(parts[2])
            target = "/".join([name, "c", str(i + first)] + parts[3:])
            written.add(target)
            if i == 0 and loc.exists(target):
                partial[(name, rel)] = target  # the old last chunk: moved last, after the pending record
                continue
            staging.move_to(rel, loc, target)
    by_var: dict[str, dict[str, list]] = {}
    for (name, rel), target in partial.items():  # the new version's exact entry: either version verifies
        by_var.setdefault(name, {})[target] = pending_entry(staging.read_bytes(rel))
    for name, chunks in by_var.items():
        write_pending(loc, name, chunks)
    for (_, rel), target in partial.items():
        staging.move_to(rel, loc, target)
    for name in names:
        meta = json.loads(loc.read_text(f"{name}/zarr.json"))
        meta["shape"][0] = int(n_total)
        loc.write_text(f"{name}/zarr.json", json.dumps(meta, indent=2))
    root = json.loads(loc.read_text("zarr.json"))
    # the attributes a reader keeps seeing until the manifests commit the rows they describe: those the
    # manifests committed (the group's metadata may hold those of an earlier append killed before its commit)
    docs = read_manifests(loc) or {}  # the committed manifests: nothing below rewrites them before write_manifest
    committed = committed_attributes(docs)
    loc.write_text(f"x/{PREVIOUS_ATTRS}", json.dumps(root.get("attributes", {}) if committed is None else committed))
    prov = dict(attrs.get("provenance", {}))
    prov.setdefault("appends", []).append({
        "rows": int(n_added), "source": source,
        "at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")})
    prov["store_id"] = uuid.uuid4().hex  # new contents: caches keyed on the store see a new store
    root["attributes"] = {**attrs, "provenance": prov}
    loc.write_text("zarr.json", json.dumps(root, indent=2))
    arrays = stored_arrays(loc)
    # the appended arrays' manifests last; only the chunks written now are read for their CRC
    # an earlier killed append's chunks beyond the rows this one declares (it added more rows): removed before
    # the manifests, which record every chunk file they find
    remove_leftovers(loc, docs, keep=staging)
    write_manifest(loc, [a for a in arrays if a not in names] + names, changed=written)
    loc.remove(f"x/{PREVIOUS_ATTRS}", recursive=False)

