"""The chunk manifest of a store, and what it commits.

Each array holds ``<array>/infoclust-manifest.json`` (inside the array's
folder, where zarr does not look; a file beside the arrays would be reported
by zarr as an unknown member of the group)::

    {"manifest_version": 3, "rows": N, "metadata_sha256": "...",
     "chunks": {"x/c/0/0": [size, crc32 or null, crc32c trailer], ...}}

  The third field (version 3) is the 4-byte CRC-32C trailer zarr's
  ``crc32c`` codec wrote at the end of the chunk: every read checks it
  against the key it was read from (:mod:`infoclust_dask.storage.bound`), which
  binds each chunk to its position at the cost of a 4-byte comparison.

- Written **last**, after every chunk and every ``zarr.json``: on an object
  store, where nothing can be renamed into place, the manifests are the
  commit. A store at a URL without them is an interrupted write and is not
  opened.
- ``rows`` is the committed row count: an append writes its chunks beyond
  the old rows, then the arrays' metadata, then the manifests; a reader
  takes the smallest ``rows`` of the arrays' manifests and reads only those
  rows, so an interrupted append leaves the previous version readable and
  whole. Before an append replaces the old, partly filled last chunk (one
  atomic rename or object PUT: never a write into the committed file) it
  records the new chunk's size, CRC-32 and trailer in
  ``<array>/infoclust-pending.json``: until the manifests commit, that key
  may hold either version, both checked exactly (their committed rows hold
  the same numbers), so a kill at any instant leaves a store that reads and
  verifies clean.
- Opening checks that every listed chunk is there with its size (a deleted
  or truncated chunk would read as fill values); :func:`verify_store` also
  checks each chunk's content (CRC-32 of local files; on an object store a
  read of every chunk, which the ``crc32c`` codec checks) and each array's
  metadata against its hash.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .atomic import StoreError, temporary_writer
from .bound import crc_and_tail as _crc_and_tail
from .bound import describe_chunk as _describe_chunk
from .bound import tails as _tails
from .commits import (
    _first_uncommitted_chunk,
    _is_int,
    row_chunk,
    committed_rows,
    interrupted_rows,
    row_step,
)
from .location import Location, resolve

__all__ = ["MANIFEST", "PENDING", "PREVIOUS_ATTRS", "committed_rows", "stamp_group", "check_group", "store_digest",
           "stored_arrays", "read_manifests", "write_manifest", "write_pending", "check_chunks", "check_metadata",
           "well_formed"]

MANIFEST = "infoclust-manifest.json"
#: the manifest format written (readers take versions 1 to this one)
MANIFEST_VERSION = 3
PENDING = "infoclust-pending.json"
#: the group's attributes before an append rewrote them (in ``x/``), until its manifests commit it
PREVIOUS_ATTRS = "infoclust-previous-attrs.json"


def stored_arrays(loc: Location) -> list[str]:
    """Names of the arrays of the group at ``loc``."""
    if loc.local is not None:
        if not loc.local.is_dir():
            return []
        return sorted(p.name for p in loc.local.iterdir() if p.is_dir() and (p / "zarr.json").exists())
    names = set()
    for rel in loc.find():
        parts = rel.split("/")
        if len(parts) == 2 and parts[1] == "zarr.json":
            names.add(parts[0])
    return sorted(names)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_manifest(loc: Location | Any, arrays: list[str] | None = None, *,
                    changed: set[str] | None = None) -> None:
    """Record every chunk of the arrays (all, or ``arrays``) with its size
    and, on a local disk, its CRC-32, the row count and the hash of the
    array's metadata; one manifest per array, each written whole, after
    everything it describes. With ``changed`` (an append: the chunk paths it
    wrote), the other chunks keep their entries of the current manifest
    when their size is unchanged, so only the new chunks are read for their
    CRC. Pending records of those arrays are removed after their manifests."""
    loc = resolve(loc, "store")
    old = (read_manifests(loc) or {}) if changed is not None else {}
    arrays = arrays if arrays is not None else stored_arrays(loc)
    group, group_attrs = _group(loc)
    for var in arrays:
        sizes = loc.find(f"{var}/c")
        known = old.get(var, {}).get("chunks", {})
        chunks = {}
        new = []
        for rel, size in sorted(sizes.items()):
            prev = known.get(rel)
            if changed is not None and rel not in changed and prev is not None and prev[0] == size:
                chunks[rel] = list(prev)
                continue
            if loc.local is not None:
                chunks[rel] = [size, *_crc_and_tail(loc.local / rel)]
            else:
                chunks[rel] = [size, None, None]
                new.append(rel)
        for rel, tail in _tails(loc, new, sizes).items() if new else ():
            chunks[rel][2] = tail
        meta = loc.read_bytes(f"{var}/zarr.json")
        parsed = json.loads(meta)
        doc = {"manifest_version": MANIFEST_VERSION, "rows": int(parsed["shape"][0]) if parsed.get("shape") else 0,
               "metadata_sha256": _sha256(meta), "metadata": parsed, "group_sha256": group,
               "group_attributes": group_attrs, "chunks": chunks}
        replaced = _replaced(old.get(var, {}), chunks) if changed is not None else {}
        if replaced:
            doc["replaced"] = replaced
        loc.write_text(f"{var}/{MANIFEST}", json.dumps(doc))
    for var in arrays:
        if loc.exists(f"{var}/{PENDING}"):
            loc.remove(f"{var}/{PENDING}", recursive=False)


def _group(loc: Location) -> tuple[str | None, Any]:
    """The group's metadata (``zarr.json``) read once: its hash and its
    attributes (``(None, None)`` when missing; attributes None when it is
    not a JSON object)."""
    try:
        raw = loc.read_bytes("zarr.json")
    except FileNotFoundError:
        return None, None
    try:
        doc = json.loads(raw)
    except ValueError:
        doc = None
    return _sha256(raw), doc.get("attributes") if isinstance(doc, dict) else None


def _fields(now: Any, written: Any, prefix: str = "") -> list[str]:
    """The keys (dotted, nested dicts followed) whose values differ between
    two JSON documents; ``[]`` when ``now`` is not a dict (unparseable)."""
    if not isinstance(now, dict) or not isinstance(written, dict):
        return []
    out = []
    for k in sorted(set(now) | set(written)):
        a, b = now.get(k, "<absent>"), written.get(k, "<absent>")
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            out += _fields(a, b, f"{prefix}{k}.") or [f"{prefix}{k}"]
        else:
            out.append(f"{prefix}{k}")
    return out


def _differs(what: str, raw: bytes, written: Any) -> str:
    """``what`` differs from that written, naming the fields that changed."""
    try:
        now = json.loads(raw)
    except ValueError as exc:
        return f"{what} differs from that written: it is not JSON ({exc})"
    fields = _fields(now, written)
    return f"{what} differs from that written" + (f" in {', '.join(fields[:6])}" if fields else "")


def stamp_group(loc: Location | Any) -> None:
    """After the group's attributes were rewritten (new labels): record
    their hash in every manifest (each rewritten whole; no chunk is read)."""
    loc = resolve(loc, "store")
    group, attrs = _group(loc)
    for var in _manifested(loc):
        doc = _read_json(loc, f"{var}/{MANIFEST}", "chunk manifest")
        if doc is not None:
            doc["group_sha256"], doc["group_attributes"] = group, attrs
            loc.write_text(f"{var}/{MANIFEST}", json.dumps(doc))


def _manifested(loc: Location) -> list[str]:
    """Names of the folders of the group that hold a manifest (an array whose
    metadata was deleted still has its manifest)."""
    if loc.local is not None:
        if not loc.local.is_dir():
            return []
        return sorted(p.name for p in loc.local.iterdir() if p.is_dir() and (p / MANIFEST).exists())
    return sorted({rel.split("/")[0] for rel in loc.find() if rel.count("/") == 1 and rel.endswith("/" + MANIFEST)})


def write_pending(loc: Location, var: str, chunks: dict[str, Any]) -> None:
    """Before replacing committed chunks of ``var``: the entries of their
    new versions (``[size, crc, trailer]``; a bare size from older callers),
    added to those already pending - an earlier append killed after its
    replacement left its version there - so that the store reads and
    verifies as any of them meanwhile (the committed rows are the same
    numbers in each)."""
    before = _read_json(loc, f"{var}/{PENDING}", "pending-append record")
    versions = _pending_versions(before["chunks"]) if before else {}
    for k, v in chunks.items():
        entry = list(v) if isinstance(v, (list, tuple)) else [int(v), None, None]
        if entry not in versions.setdefault(k, []):
            versions[k].append(entry)
    loc.write_text(f"{var}/{PENDING}", json.dumps({"chunks": versions}))


def _pending_versions(chunks: dict) -> dict[str, list]:
    """``{key: [entry, ...]}`` from a pending record: one entry per key (as
    written before several could be pending) or a list of them."""
    out: dict[str, list] = {}
    for k, v in chunks.items():
        out[k] = [list(e) for e in v] if isinstance(v, list) and v and isinstance(v[0], list) else [v]
    return out


def _read_json(loc: Location, rel: str, what: str) -> dict | None:
    if loc.local is not None and (loc.local / rel).is_symlink():
        raise StoreError(f"The {what} '{loc}/{rel}' is a symbolic link; the store's records are read only as "
                         "regular files inside the store. Replace the link with the file (or re-ingest the store).")
    try:
        raw = loc.read_bytes(rel)
    except FileNotFoundError:
        return None
    try:
        doc = json.loads(raw)
        if not isinstance(doc, dict) or not isinstance(doc.get("chunks"), dict):
            raise ValueError("no 'chunks' table")
        return doc
    except (ValueError, TypeError) as exc:
        raise StoreError(f"The {what} '{loc}/{rel}' is damaged ({exc}); the store cannot be checked. "
                         "Re-ingest it, or delete that file to read the array unchecked.") from None


def _replaced(old_doc: dict, chunks: dict) -> dict[str, list]:
    """An append's record of the committed entries it replaced, per key
    (``{key: [oldest entry, ..., previous entry]}``): an append rewrites
    a key only to grow its chunk (the old rows unchanged), so a reader of
    an earlier version may still read it (:class:`GrownChunks`). Entries of
    earlier appends are kept."""
    out = {k: list(v) for k, v in old_doc.get("replaced", {}).items() if isinstance(v, list) and k in chunks}
    for rel, prev in old_doc.get("chunks", {}).items():
        if rel in chunks and list(prev) != list(chunks[rel]) and well_formed(prev):
            out.setdefault(rel, []).append(list(prev))
    return out


def _version(entry: list) -> tuple[int, int | None]:
    """A manifest entry as the version :class:`BoundStore` compares: (size, trailer or None)."""
    return int(entry[0]), (entry[2] if len(entry) > 2 and _is_int(entry[2]) else None)


class GrownChunks:
    """For :class:`infoclust_dask.storage.bound.BoundStore`: the versions a
    committed chunk may hold now, for a reader that opened the store
    before an append rewrote that chunk. Only the versions that grew from
    the reader's own - the append's pending version, or committed ones
    whose manifest records the reader's version among those it replaced -
    count; a variable rewritten whole (``add_labels --overwrite``, a new
    ingest) has no such record, and its reader fails as before. Picklable
    (it holds the store's location), so workers can call it."""

    def __init__(self, loc: Location) -> None:
        self.loc = loc

    def __call__(self, key: str, want: tuple) -> tuple:
        doc = (read_manifests(self.loc) or {}).get(key.split("/c/", 1)[0])
        if not doc:
            return ()
        current = doc["chunks"].get(key)
        lineage = [*doc.get("replaced", {}).get(key, []), *([current] if current is not None else [])]
        lineage = [_version(e) for e in lineage if well_formed(e)]
        mine = [i for i, v in enumerate(lineage) if v in want]
        if not mine:
            return ()
        pending = [_version(e) for e in doc.get("pending", {}).get(key, []) if well_formed(e)]
        return (*lineage[mine[0] + 1:], *pending)

    def current(self, key: str) -> tuple:
        """The versions the store's manifests list for ``key`` now (committed and pending)."""
        doc = (read_manifests(self.loc) or {}).get(key.split("/c/", 1)[0])
        if not doc or not well_formed(doc["chunks"].get(key)):
            return ()
        return (_version(doc["chunks"][key]),
                *(_version(e) for e in doc.get("pending", {}).get(key, []) if well_formed(e)))


def read_manifests(loc: Location) -> dict[str, dict] | None:
    """Each array's manifest (``{array: doc}``) with its pending record merged
    in as ``doc["pending"]``, or None when no array has one (a store
    written by an older version or another tool)."""
    out: dict[str, dict] = {}
    loc.refresh()  # a writer in another process (or one killed) may have changed the store since our last look
    for var in sorted(set(stored_arrays(loc)) | set(_manifested(loc))):
        # the pending record before the manifest: a writer removes it only after writing the manifest that
        # commits its versions, so a reader that finds none reads that manifest or a later one. The other
        # way round, a commit between the two reads hides the version a reader of a grown chunk may already
        # hold (GrownChunks: "rewritten after the store was opened" while rows were only added)
        pending = _read_json(loc, f"{var}/{PENDING}", "pending-append record")
        doc = _read_json(loc, f"{var}/{MANIFEST}", "chunk manifest")
        if doc is None:
            continue
        doc["pending"] = _pending_versions(pending["chunks"]) if pending else {}
        out[var] = doc
    return out or None


def expected_chunks(docs: dict[str, dict] | None) -> dict[str, tuple[tuple[int, int | None], ...]]:
    """``{key: ((size, trailer or None), ...)}``: the versions each
    committed chunk may hold, for :class:`infoclust_dask.storage.bound.BoundStore`
    - the committed one, and the pending one while an append replaces it."""
    out: dict[str, tuple[tuple[int, int | None], ...]] = {}

    version = _version

    for doc in (docs or {}).values():
        pending = doc.get("pending", {})
        for rel, entry in doc["chunks"].items():
            if not well_formed(entry):
                continue
            versions = [version(entry)]
            versions += [version(e) for e in pending.get(rel, []) if well_formed(e)]
            out[rel] = tuple(versions)
    return out


def unmanifested(loc: Location, docs: dict[str, dict] | None) -> list[str]:
    """The arrays of the group that have no manifest."""
    return [v for v in stored_arrays(loc) if v not in (docs or {})]


def _inside(loc: Location, rel: str) -> bool:
    if rel.startswith("/") or "\\" in rel or any(p in ("..", "") for p in rel.split("/")):
        return False
    if loc.local is not None:
        root = loc.local.resolve()
        return (loc.local / rel).resolve().is_relative_to(root)
    return True


def well_formed(entry: Any) -> bool:
    """A manifest entry is ``[size, crc or None(, trailer or None)]``:
    a non-negative integer size, integers (or null) after it."""
    return (isinstance(entry, list) and 1 <= len(entry) <= 3 and _is_int(entry[0]) and entry[0] >= 0
            and all(v is None or (_is_int(v) and 0 <= v < 2**32) for v in entry[1:]))


def _chunk_keys(var: str, meta: dict, rows: int) -> list[str] | None:
    """The chunk keys of ``var`` covering its first ``rows`` rows, from its
    recorded metadata (None when the metadata does not say)."""
    try:
        shape = [int(n) for n in meta["shape"]]
        step = [int(n) for n in meta["chunk_grid"]["configuration"]["chunk_shape"]]
        sep = meta.get("chunk_key_encoding", {}).get("configuration", {}).get("separator", "/")
    except (KeyError, TypeError, ValueError):
        return None
    if len(shape) != len(step) or not shape or any(n <= 0 for n in step):
        return None
    counts = [-(-rows // step[0])] + [-(-n // c) for n, c in zip(shape[1:], step[1:], strict=True)]
    keys = [()]  # type: list[tuple[int, ...]]
    for count in counts:
        keys = [k + (i,) for k in keys for i in range(count)]
    return [f"{var}/c{sep}" + sep.join(str(i) for i in k) for k in keys]


def manifest_problems(docs: dict[str, dict]) -> list[str]:
    """What is wrong with the manifests themselves (they are checked data,
    not trusted): a format this version does not read, a committed row
    count that is not a non-negative integer or disagrees with the array
    metadata recorded beside it, malformed entries (named as malformed),
    and chunks missing from the table up to the committed rows."""
    problems = []
    for var, doc in docs.items():
        version = doc.get("manifest_version", 1)
        if not _is_int(version) or not 1 <= version <= MANIFEST_VERSION:
            problems.append(f"array {var!r}: its manifest has manifest_version {version!r}, which this version "
                            f"reads only from 1 to {MANIFEST_VERSION}: upgrade infoclust_dask, or re-ingest")
            continue
        rows = doc.get("rows")
        meta = doc.get("metadata")
        if rows is not None and (not _is_int(rows) or rows < 0):
            problems.append(f"array {var!r}: its manifest commits rows={rows!r}, not a non-negative integer")
            continue
        if rows is not None and isinstance(meta, dict):
            declared = meta.get("shape", [None])[0] if isinstance(meta.get("shape"), list) else None
            if declared != rows:
                problems.append(f"array {var!r}: its manifest commits {rows} rows but the metadata it records "
                                f"declares {declared}: the manifest was edited")
                continue
        bad = [rel for rel, e in doc["chunks"].items() if not well_formed(e)]
        for rel in bad[:3]:
            problems.append(f"manifest entry '{rel}' is malformed ({str(doc['chunks'][rel])[:60]}; expected "
                            "[size >= 0, CRC-32 or null, CRC-32C trailer or null] as integers)")
        if len(bad) > 3:
            problems.append(f"array {var!r}: {len(bad) - 3} more malformed manifest entries")
        if rows is not None and isinstance(meta, dict):
            expected = _chunk_keys(var, meta, rows)
            if expected is not None:
                absent = [k for k in expected if k not in doc["chunks"]]
                if absent:
                    problems.append(f"array {var!r}: its manifest has no entry for {len(absent)} of the "
                                    f"{len(expected)} chunks of its {rows} committed rows (first: '{absent[0]}'): "
                                    "those chunks could not be checked")
    return problems


def unlisted_files(loc: Location, docs: dict[str, dict]) -> tuple[list[str], list[str]]:
    """Files in the arrays' folders that no manifest names: problems (an
    extra chunk, a copy, a backup), and notes for chunks beyond the
    committed rows (an append that did not finish; the next write removes
    them)."""
    own = {MANIFEST, PENDING, PREVIOUS_ATTRS, "zarr.json"}
    problems, beyond, crumbs = [], [], []
    listed = loc.find()
    store_rows = committed_rows(docs)
    for var, doc in docs.items():
        names = set(doc["chunks"]) | set(doc.get("pending", {}))
        rows: int = doc["rows"] if _is_int(doc.get("rows")) else -1
        if store_rows is not None and rows > store_rows:
            rows = store_rows  # a manifest ahead of the others (an append killed between them)
        meta: Any = doc.get("metadata")
        # unknown (0): no chunk counts as beyond the committed rows
        step = row_step(meta)
        for rel in sorted(r for r in listed if r.startswith(var + "/")):
            name = rel[len(var) + 1:]
            if name in own or rel in names:
                continue
            if temporary_writer(name) is not None:  # a writer's temporary (a killed one's: the next write removes it)
                crumbs.append(rel)
                continue
            if rows >= 0 and step > 0 and row_chunk(rel) >= -(-rows // step):
                beyond.append(rel)
                continue
            problems.append(f"'{rel}' is in array {var!r}'s folder but no manifest names it (an extra or copied "
                            "chunk, a backup, another array's files): remove it, or re-ingest")
    notes = [f"{len(beyond)} chunk files beyond the committed rows (first: '{beyond[0]}'): an append did not "
             "finish and left them; the store reads as its committed rows, and the next append replaces them"
             ] if beyond else []
    if crumbs:
        notes.append(f"{len(crumbs)} temporary file(s) of a writer (first: '{crumbs[0]}'): left by a write that was "
                     "killed (or is running); the store reads as its committed rows, and the next append removes "
                     "them")
    return problems, notes


def check_chunks(loc: Location | Any, docs: dict[str, dict], *, crc: bool = False) -> list[str]:
    """Problems of the stored chunks against the manifests: missing, wrong
    size, (with ``crc``, local files) wrong content. A chunk may also match
    its pending-append entry. Returns readable lines (empty: all good)."""
    loc = resolve(loc, "store")
    problems = []
    present = None if loc.local is not None else loc.find()
    rows = committed_rows(docs)
    for doc in docs.values():
        pending = doc.get("pending", {})
        ahead = _first_uncommitted_chunk(doc, rows)
        for rel, entry in doc["chunks"].items():
            if not well_formed(entry):
                continue  # named by manifest_problems
            if ahead is not None and row_chunk(rel) >= ahead:
                continue  # beyond the store's committed rows: not committed (the next append replaces it)
            size = entry[0]
            if not _inside(loc, rel):
                problems.append(f"manifest entry '{rel}' points outside the store (not opened)")
                continue
            got = loc.size(rel) if present is None else present.get(rel)
            if got is None:
                problems.append(f"{_describe_chunk(rel)} ('{rel}') is missing")
                continue
            versions = [entry] + [e for e in pending.get(rel, []) if well_formed(e)]
            sized = [v for v in versions if v[0] == got]  # an append replacing it: either version is whole
            if not sized:
                problems.append(f"{_describe_chunk(rel)} ('{rel}') has {got} bytes, {size} were written")
            elif crc and loc.local is not None and any(len(v) > 1 and v[1] is not None for v in sized):
                got_crc, got_tail = _crc_and_tail(loc.local / rel)
                if all(v[1] is not None and v[1] != got_crc for v in sized):
                    tail = entry[2] if len(entry) > 2 else None
                    moved = tail is not None and got_tail != tail and got_tail in _tails_of(docs)
                    problems.append(f"{_describe_chunk(rel)} ('{rel}') has different bytes from those written "
                                    f"(CRC-32){': it holds another chunk of the store (moved or swapped)' if moved else ''}")
    return problems


def _tails_of(docs: dict[str, dict]) -> set:
    return {e[2] for d in docs.values() for _, e in d["chunks"].items() if well_formed(e) and len(e) > 2}


def check_metadata(loc: Location, docs: dict[str, dict], *, group: bool = True) -> tuple[list[str], list[str]]:
    """Problems of the arrays' metadata against the manifests' hashes, and
    notes (an interrupted append: the committed rows read as before)."""
    problems, notes = [], []
    rows = committed_rows(docs)
    for var, doc in docs.items():
        want = doc.get("metadata_sha256")
        if want is None:
            continue
        try:
            raw = loc.read_bytes(f"{var}/zarr.json")
        except FileNotFoundError:
            problems.append(f"array {var!r}: its metadata ({var}/zarr.json) is missing")
            continue
        if _sha256(raw) == want:
            continue
        # the bytes differ from those recorded: only a row count of an unfinished append may explain it
        if interrupted_rows(loc, var, doc, rows) not in (None, doc.get("rows")):
            notes.append(f"array {var!r}: an append did not finish (its metadata declares more rows than the "
                         f"{rows} committed); the store reads as its committed rows, unchanged - run the "
                         "append again")
            continue
        problems.append(_differs(f"array {var!r}: its metadata ({var}/zarr.json)", raw, doc.get("metadata")))
    if group:
        more_problems, more_notes = check_group(loc, docs)
        problems += more_problems
        notes += more_notes
    return problems, notes


def check_group(loc: Location, docs: dict[str, dict]) -> tuple[list[str], list[str]]:
    """Problems of the group's metadata (its attributes) against the hash
    the manifests record, naming the attributes that changed; a note when
    an unfinished append rewrote them (the committed ones are read)."""
    problems: list[str] = []
    notes: list[str] = []
    groups = {d["group_sha256"] for d in docs.values() if d.get("group_sha256")}
    sha, now = _group(loc)
    if groups and sha not in groups:
        if loc.exists(f"x/{PREVIOUS_ATTRS}"):
            notes.append("the store's attributes: an append did not finish (it rewrote them); the store reads "
                         "with its committed attributes - run the append again")
        else:
            written = next((d.get("group_attributes") for d in docs.values() if "group_attributes" in d), None)
            fields = [f"attributes.{f}" for f in _fields(now, written)] if written is not None else []
            problems.append("the store's group metadata (zarr.json) differs from that written" +
                            (f" in {', '.join(fields[:6])}" if fields else "" if now is not None else
                             ": it is not a JSON object with attributes"))
    return problems, notes


def store_digest(path: Any, storage_options: dict | None = None) -> str:
    """SHA-256 over a store's group metadata and every array's manifest
    (which name each chunk's size and CRC and the array's metadata): any
    rewrite, append or edit of the store changes it."""
    loc = resolve(path, "store", storage_options)
    h = hashlib.sha256(loc.read_bytes("zarr.json"))
    for var in _manifested(loc):
        h.update(var.encode())
        h.update(loc.read_bytes(f"{var}/{MANIFEST}"))
    return h.hexdigest()


def bound_store(loc: Location, docs: dict[str, dict] | None) -> Any:
    """The zarr store at ``loc``, read-only, its chunk reads checked against
    the manifests ``docs`` (:class:`infoclust_dask.storage.bound.BoundStore`)."""
    from zarr.storage import FsspecStore, LocalStore

    from .bound import BoundStore

    inner: Any = (LocalStore(loc.local, read_only=True) if loc.local is not None else
                  FsspecStore.from_url(loc.url, storage_options=loc.storage_options or None, read_only=True))
    return BoundStore(inner, expected_chunks(docs), str(loc), grown=GrownChunks(loc))
