"""The chunk manifest of a store: every chunk file each array was written
with, its size and CRC-32 (``<array>/infoclust-manifest.json``), written
when a store is written; opening a store checks sizes, :func:`verify_store`
reads every chunk and checks the CRCs."""

from __future__ import annotations

import os
from pathlib import Path

from ._atomic import StoreError
from ._paths import local_path

__all__ = ["MANIFEST", "verify_store"]


#: per array: ``<array>/infoclust-manifest.json`` (inside the array's folder,
#: where zarr does not look; a file beside the arrays would be reported by
#: zarr as an unknown member of the group)
MANIFEST = "infoclust-manifest.json"


def _arrays(root: Path):
    return sorted(p for p in root.iterdir() if p.is_dir() and (p / "zarr.json").exists())


def _crc32(path: Path) -> int:
    import zlib

    crc = 0
    with open(path, "rb") as fh:
        while block := fh.read(1 << 22):
            crc = zlib.crc32(block, crc)
    return crc


def _write_manifest(root: Path):
    """Record every chunk file of the freshly written arrays with its size
    and CRC-32, one manifest per array: opening
    checks that each listed chunk is there with its size (a deleted or
    truncated chunk would otherwise read as fill values), :func:`verify_store`
    checks the CRCs (garbage of the same size)."""
    import json

    for var in _arrays(root):
        chunks = {}
        for dirpath, _, files in os.walk(var / "c"):
            for f in files:
                full = os.path.join(dirpath, f)
                chunks[os.path.relpath(full, root)] = [os.path.getsize(full), _crc32(Path(full))]
        (var / MANIFEST).write_text(json.dumps({"manifest_version": 1, "chunks": dict(sorted(chunks.items()))}))


def _read_manifest(path: Path):
    """All arrays' manifests merged (chunk path -> (size, crc)), or None when
    no array has one (a store written by an older version or another tool)."""
    import json

    out, found = {}, False
    for var in _arrays(path):
        m = var / MANIFEST
        if not m.exists():
            continue
        found = True
        try:
            doc = json.loads(m.read_text())
            out.update({k: tuple(v) for k, v in doc["chunks"].items()})
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise StoreError(f"The chunk manifest '{m}' is damaged ({exc}); the store cannot be checked. "
                             "Re-ingest it, or delete that manifest to read the array unchecked.") from None
    return out if found else None


def _describe_chunk(rel: str) -> str:
    parts = rel.split("/")
    return f"array {parts[0]!r}, chunk {tuple(int(i) for i in parts[2:] if i.isdigit())}"


def _check_chunks(path: Path, manifest: dict, *, crc: bool = False) -> list[str]:
    """Problems of the stored chunks against the manifest: missing, wrong
    size, (with ``crc``) wrong content. Returns readable lines (empty: all good)."""
    problems = []
    root = path.resolve()
    for rel, (size, want) in manifest.items():
        f = path / rel
        if Path(rel).is_absolute() or not f.resolve().is_relative_to(root):
            problems.append(f"manifest entry '{rel}' points outside the store (not opened)")
            continue
        try:
            got = f.stat().st_size
        except FileNotFoundError:
            problems.append(f"{_describe_chunk(rel)} ('{rel}') is missing")
            continue
        if got != size:
            problems.append(f"{_describe_chunk(rel)} ('{rel}') has {got} bytes, {size} were written")
        elif crc and _crc32(f) != want:
            problems.append(f"{_describe_chunk(rel)} ('{rel}') has different bytes from those written (CRC-32)")
    return problems


def verify_store(path: str | os.PathLike) -> dict:
    """Read every chunk of the store at ``path`` and compare it with the
    manifest written with it (sizes and CRC-32). Returns a report
    ``{"store", "chunks", "bytes", "problems"}``; an empty ``problems`` means
    the bytes are those written. Stores without a manifest (written by an
    older version or another tool) are reported as unverifiable."""
    path = local_path(path, "store")
    if not (path / "zarr.json").exists():
        raise FileNotFoundError(f"No zarr store at '{path}'.")
    manifest = _read_manifest(path)
    if manifest is None:
        return {"store": str(path), "chunks": 0, "bytes": 0,
                "problems": [f"no {MANIFEST}: the store was not written by this version; it cannot be verified"]}
    return {"store": str(path), "chunks": len(manifest), "bytes": int(sum(v[0] for v in manifest.values())),
            "problems": _check_chunks(path, manifest, crc=True)}
