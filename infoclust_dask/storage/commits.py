"""What the manifests commit across a store's arrays, and what an unfinished
append left (:mod:`infoclust_dask.io.append`'s commit protocol): the committed
row count (the smallest the manifests record), the attributes they recorded
with those rows, and the rows an interrupted append's metadata declares.

An append's manifests are written one array after another, last: a kill
between two leaves one manifest ahead of the others (it records the new
rows); the store's committed rows are then the others', and what that
manifest lists beyond them is not committed.
"""

from __future__ import annotations

import json
from typing import Any

from .location import Location

__all__ = ["committed_rows", "committed_attributes", "interrupted_rows", "row_step", "row_chunk"]


def committed_rows(docs: dict[str, dict] | None) -> int | None:
    """The committed row count: the smallest ``rows`` of the manifests
    (None for manifests of version 1, which do not record it)."""
    rows = [int(d["rows"]) for d in (docs or {}).values() if "rows" in d]
    return min(rows) if rows else None


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def row_chunk(rel: str) -> int:
    """The row index of a chunk key ``var/c/<i>/...`` (-1 for other keys)."""
    parts = rel.split("/")
    return int(parts[2]) if len(parts) >= 3 and parts[1] == "c" and parts[2].isdigit() else -1


def row_step(meta: Any) -> int:
    """Rows per chunk from an array's metadata (0 when it does not say, or
    says something malformed)."""
    return _int_at(meta, "chunk_grid", "configuration", "chunk_shape", 0) or 0


def _first_uncommitted_chunk(doc: dict, rows: int | None) -> int | None:
    """For a manifest that records more rows than the store commits (an
    append killed between two arrays' manifests wrote this one), the first
    row chunk beyond the committed ``rows``; None for every other manifest."""
    step = row_step(doc.get("metadata"))
    own = _int_at(doc, "rows") if _is_int(doc.get("rows")) else None
    if rows is None or own is None or own <= rows or step <= 0:
        return None
    return -(-rows // step)


def _int_at(doc: Any, *keys: Any) -> int | None:
    """``doc[k1][k2]...`` as an int, or None where the metadata is missing
    or malformed: no such key or index, not a number, NaN, or JSON's
    ``Infinity`` (``int()`` raises OverflowError for it)."""
    try:
        value = doc
        for k in keys:
            value = value[k]
        return int(value)
    except (KeyError, TypeError, ValueError, IndexError, OverflowError):
        return None


def interrupted_rows(loc: Location, var: str, doc: dict, rows: int | None = None) -> int | None:
    """The rows ``var``'s metadata declares when it equals the one its
    manifest records but for the row count, declares more than the store's
    committed ``rows`` (default: the manifest's own) and every chunk of
    those rows is there: an append wrote its chunks and metadata, not (all)
    its manifests. None otherwise."""
    try:
        meta = json.loads(loc.read_bytes(f"{var}/zarr.json"))
    except (FileNotFoundError, ValueError):
        return None
    want = doc.get("metadata")
    declared, recorded = _int_at(meta, "shape", 0), _int_at(doc, "rows")
    committed = recorded if rows is None else rows
    if declared is None or recorded is None or committed is None or not isinstance(want, dict) or declared <= committed:
        return None
    meta["shape"][0] = recorded
    if meta != want:
        return None
    # an append writes the new rows' chunks before the metadata that declares them: they must be there
    step = row_step(want)
    row_chunks = {row_chunk(rel) for rel in loc.find(f"{var}/c")}
    return declared if step > 0 and all(i in row_chunks for i in range(-(-declared // step))) else None


def committed_attributes(docs: dict[str, dict] | None) -> dict | None:
    """The group's attributes as the manifests of the committed rows
    recorded them (an append killed between two arrays' manifests left some
    recording its attributes and rows, not yet committed); None when they do
    not record them (manifests written before they did)."""
    rows = committed_rows(docs)
    for doc in (docs or {}).values():
        if isinstance(doc.get("group_attributes"), dict) and (rows is None or doc.get("rows") == rows):
            return doc["group_attributes"]
    return None
