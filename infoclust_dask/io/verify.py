"""``verify``: every chunk of a store checked against the manifests written
with it (:mod:`infoclust_dask.storage.manifest`); on an object store every
chunk is also read whole on the workers, a pass the storage package leaves
to this side (storage never computes)."""

from __future__ import annotations

import os
from typing import Any

from .. import engine
from ..storage.commits import committed_rows
from ..storage.location import Location, resolve
from ..storage.manifest import (
    MANIFEST,
    bound_store,
    check_chunks,
    check_metadata,
    manifest_problems,
    read_manifests,
    unlisted_files,
    unmanifested,
    well_formed,
)


@engine.entry_point
def verify_store(path: str | os.PathLike | Location, *, storage_options: dict | None = None,
                 scheduler: Any = None) -> dict:
    """Check every chunk of the store at ``path`` against the manifests
    written with it (sizes; CRC-32 of local files; on an object store every
    chunk is read, on ``scheduler``'s workers, which checks its CRC-32C) and
    each array's metadata against its hash. Returns a report ``{"store",
    "chunks", "bytes", "rows", "problems"}``; an empty ``problems`` means the
    bytes are those written. Stores without a manifest (written by an older
    version or another tool) are reported as unverifiable."""
    loc = resolve(path, "store", storage_options)
    if not loc.exists("zarr.json"):
        raise FileNotFoundError(f"No zarr store at '{loc}'.")
    docs = read_manifests(loc)
    if docs is None:
        return {"store": str(loc), "chunks": 0, "bytes": 0, "rows": None, "notes": [],
                "problems": [f"no {MANIFEST}: the store was not written by this version, or its write did not "
                             "finish; it cannot be verified"]}
    missing = unmanifested(loc, docs)
    problems = [f"array {v!r} has no manifest (added outside infoclust_dask, or its write did not finish)"
                for v in missing]
    problems += manifest_problems(docs)
    meta_problems, notes = check_metadata(loc, docs)
    problems += check_chunks(loc, docs, crc=True) + meta_problems
    extra, extra_notes = unlisted_files(loc, docs)
    problems += extra
    notes += extra_notes
    if loc.local is None and not problems:
        problems += _read_every_chunk(loc, list(docs), docs)
    chunks = {k: v for d in docs.values() for k, v in d["chunks"].items()}
    return {"store": str(loc), "chunks": len(chunks), "bytes": int(sum(v[0] for v in chunks.values() if well_formed(v))),
            "rows": committed_rows(docs), "problems": problems, "notes": notes}


def _read_every_chunk(loc: Location, arrays: list[str], docs: dict | None = None) -> list[str]:
    """Read every chunk of the arrays on the workers (the ``crc32c`` codec
    checks each one's bytes); a failure is reported, not raised."""
    import dask.array as da

    problems = []
    for var in arrays:
        try:
            arr = da.from_zarr(bound_store(loc, docs), component=var)
            engine.compute(arr.sum())
        except Exception as exc:  # noqa: BLE001 - any read failure is a finding of verify
            problems.append(f"array {var!r} could not be read whole: {exc}")
    return problems
