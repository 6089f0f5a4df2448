"""Chunks bound to their place: a read-only zarr store wrapper that checks
every chunk it hands to zarr against the manifest entry of *that* key.

zarr's ``crc32c`` codec checks that a chunk's bytes match the checksum the
chunk carries, which moves with the chunk: two intact chunk files swapped,
or a chunk copied from another store, decode cleanly and pair rows with
other rows. The manifest (:mod:`infoclust_dask.storage.manifest`, version 3)
records, for each chunk key, its size and the 4-byte CRC-32C trailer the
codec wrote at its end; :class:`BoundStore` compares both on every read
(a length and a 4-byte comparison: no hashing beyond the codec's own), so
a moved, swapped, substituted or resized chunk fails the read - in this
process and on the workers, which receive the wrapper inside the task graph
- with the same message ``infoclust verify`` would print. Chunks of a
manifest written before version 3 are checked by size only.
"""

from __future__ import annotations

import zlib
from typing import Any

from zarr.storage import WrapperStore

from .._support.unreachable import StorageUnreachable, is_connection_error
from .atomic import StoreError
from .server_errors import retry_server_errors

__all__ = ["BoundStore", "missing_chunk_message", "read_rows", "tail_of", "describe_chunk", "crc_and_tail", "tails", "pending_entry",
]

def describe_chunk(rel: str) -> str:
    """``array 'x', chunk (3, 0)`` for the chunk key ``x/c/3/0``."""
    parts = rel.split("/")
    return f"array {parts[0]!r}, chunk {tuple(int(i) for i in parts[2:] if i.isdigit())}"


def tail_of(data: bytes | memoryview) -> int | None:
    """The last 4 bytes of an encoded chunk as an integer (little-endian):
    the CRC-32C trailer zarr's ``crc32c`` codec appends; None when shorter."""
    return int.from_bytes(bytes(data[-4:]), "little") if len(data) >= 4 else None


def crc_and_tail(path: Any) -> tuple[int, int | None]:
    """CRC-32 of a local file and its last 4 bytes (:func:`tail_of`)."""
    crc, last = 0, b""
    with open(path, "rb") as fh:
        while block := fh.read(1 << 22):
            crc = zlib.crc32(block, crc)
            last = (last + block)[-4:]
    return crc, tail_of(last)


def tails(loc: Any, rels: list[str], sizes: dict[str, int]) -> dict[str, int | None]:
    """The 4-byte trailers of chunks at a URL: one ranged read each, issued
    together (fsspec's ``cat_ranges``)."""
    rels = [r for r in rels if sizes[r] >= 4]
    if not rels:
        return {}
    paths = [loc.full_path(r) for r in rels]
    got = loc.fs.cat_ranges(paths, [sizes[r] - 4 for r in rels], [sizes[r] for r in rels])
    return {r: tail_of(b) for r, b in zip(rels, got, strict=True)}


def read_rows(array: Any, start: int, stop: int) -> Any:
    """Rows ``start:stop`` of a zarr array (every column): the task that
    reads one row chunk of a store (:mod:`infoclust_dask.storage.reading`). It
    lives here, beside the bound store it reads through, so that a worker
    running it imports zarr and this module only (and its small helpers). On a dask worker, a read
    the object store did not answer (after its configured attempts) raises
    :class:`StorageUnreachable` naming the
    worker: the engine runs the reads again on the other workers."""
    retry_server_errors()  # on a worker that reads from S3: its first read installs the rule (once)
    try:
        return array[start:stop]
    except Exception as exc:
        worker = _worker_address() if is_connection_error(exc) else None
        if worker is None:
            raise
        raise StorageUnreachable(worker, f"{type(exc).__name__}: {exc}") from exc


def pending_entry(data: bytes) -> list:
    """The manifest entry ``[size, CRC-32, trailer]`` of a chunk's bytes."""
    return [len(data), zlib.crc32(data), tail_of(data)]


def _worker_address() -> str | None:
    """The address of the dask worker running this task; None outside one."""
    import sys

    if "distributed" not in sys.modules:
        return None
    from distributed import get_worker

    try:
        return str(get_worker().address)
    except ValueError:  # not inside a worker's task
        return None


def _where_read() -> str:
    """Which process reads: the dask worker's address, host and working
    folder inside a worker, else this host and process."""
    import os
    import socket

    worker = _worker_address()
    who = f"dask worker {worker}" if worker else "this process"
    return f"{who} (host {socket.gethostname()}, pid {os.getpid()}, working folder {os.getcwd()})"


def missing_chunk_message(key: str, where: str) -> str:
    """One line for a chunk the manifest lists that the reading process
    cannot find: it names the chunk, the path looked at, the process (a
    worker's address) and the fix."""
    return (f"{describe_chunk(key)} ('{key}') of the store at '{where}' is listed in its manifest but "
            f"{_where_read()} finds no such chunk; nothing was computed from it. If `infoclust verify` passes where "
            "the client runs, the workers do not see the client's files: keep the store on a folder every worker "
            "sees at the same path (a shared file system) or in a bucket (s3://...). Else restore the chunk or "
            "re-ingest the store.")


class BoundStore(WrapperStore):
    """``store`` whose chunk reads are checked against ``expected``
    (``{key: ((size, tail or None), ...)}``: the versions the key may hold -
    the committed one, and the pending one while an append replaces it;
    keys as zarr asks for them, e.g. ``x/c/3/0``); keys not listed
    (metadata, chunks beyond the committed rows) pass unchecked; a listed
    key that is missing fails the read (zarr would otherwise hand out fill
    values, e.g. on a worker that resolves the store's path in another
    folder). ``where`` names the store in messages."""

    def __init__(self, store: Any, expected: dict[str, tuple[tuple[int, int | None], ...]] | None = None,
                 where: str = "", grown: Any = None) -> None:
        super().__init__(store)
        self.expected = expected or {}
        self.where = where
        self.grown = grown

    def _with_store(self, store: Any) -> BoundStore:
        return type(self)(store, self.expected, self.where, self.grown)

    def __repr__(self) -> str:
        return f"BoundStore({self._store!r}, {len(self.expected)} chunks)"

    def _check(self, key: str, buf: Any) -> None:
        want = self.expected.get(key)
        if want is None:
            return
        if buf is None:
            raise StoreError(missing_chunk_message(key, self.where))
        raw = buf.as_numpy_array()  # a view of the bytes read, no copy
        got = tail_of(raw[-4:].tobytes())

        def fits(versions):
            return any(raw.nbytes == size and (tail is None or got == tail) for size, tail in versions)

        if not fits(want):
            if self.grown is not None and fits(self.grown(key, want)):
                return  # an append committed (or is committing) a grown version of this chunk: old rows unchanged
            if self.grown is not None and fits(self.grown.current(key)):
                raise StoreError(f"{describe_chunk(key)} ('{key}') of the store at '{self.where}' was rewritten "
                                 "after the store was opened (a later write replaced it, e.g. labels written with "
                                 "overwrite); nothing was computed from it. Open the store again to read the new "
                                 "version.")
            size = want[0][0]
            what = (f"has {raw.nbytes} bytes, {size} were written there" if raw.nbytes != size else
                    "holds bytes written for another position or another store (its CRC-32C differs from the one "
                    "the manifest records for this key: a moved, swapped or substituted chunk file)")
            raise StoreError(f"{describe_chunk(key)} ('{key}') of the store at '{self.where}' {what}; nothing "
                             "was computed from it. Run `infoclust verify` on the store, then re-ingest it from "
                             "its source (or restore the chunk from a backup).")

    async def get(self, key: str, prototype: Any, byte_range: Any = None) -> Any:
        buf = await self._store.get(key, prototype, byte_range)
        if byte_range is None or buf is None:
            self._check(key, buf)
        return buf

    async def get_partial_values(self, prototype: Any, key_ranges: Any) -> list:
        key_ranges = list(key_ranges)
        out = await self._store.get_partial_values(prototype, key_ranges)
        for (key, rng), buf in zip(key_ranges, out, strict=True):
            if rng is None or buf is None:
                self._check(key, buf)
        return out
