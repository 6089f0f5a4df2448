"""Checkpoint and resume of a fit: a journal of its passes.

Every estimator's driver loop (Lloyd iterations, annealing, conjugate
gradients, EM) is deterministic given its seed and the results of its
map-reduce passes. A :class:`Journal` records, in a run folder, the result of
every pass as it completes. Locally the records are written in batches
(``passes/NNNNNNN.npz``, named by the first pass they hold, at most
:data:`BATCH_SECONDS` of passes each, written atomically: a temporary file,
then a rename) - a file per pass cost more than the passes of a small fit;
a driver killed between two batches loses the unwritten passes, which the
resumed fit computes again. A fit resumed from that folder replays the
journal: while the driver asks for the same pass with the same parameters
(the same centres, the same widths, ...) as recorded, the recorded result is
returned without touching the data; from the first pass past the journal on,
passes run for real and are recorded. The resumed fit therefore takes the
same path and ends where an uninterrupted one ends (the same floats, not just
close ones), whichever optimizer runs on the driver - scipy's conjugate
gradients included, whose internal state cannot be saved directly.

A pass is matched by its name and a hash of its parameters; the first
mismatch (another seed, other data, changed code) ends the replay and the
journal is cut there. ``checkpoint.json`` records the estimator, its
parameters and the data's shape: resuming with others is an error.

The journal holds small statistics only (what the driver holds anyway), in
batch files forced to the disk at most once a second (:data:`SYNC_SECONDS`).
The folder may be a URL (``s3://bucket/runs/...``): there
each record is one PUT of a whole object, which readers see complete or not
at all, so no temporary name is needed.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import io
import json
import os
import time
import uuid
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np

from .storage.paths import is_url

__all__ = ["Journal", "active", "recording", "recorded_passes", "truncate", "BATCH_SECONDS"]

_ACTIVE: contextvars.ContextVar = contextvars.ContextVar("infoclust_journal", default=None)

#: a record's bytes are forced to the disk (fsync) at most this often. Every record is complete once renamed
#: into place, whatever kills the process (the kernel holds the bytes); only a crash of the machine itself can
#: lose the records of the last second, and a record it leaves torn (empty) ends the journal where it is, as a
#: record torn by a kill does: a resumed fit recomputes those passes. An fsync per record cost more than the
#: passes themselves on small data (6807 records: 2.7 s -> 7.0 s for a DC fit on digits).
SYNC_SECONDS = 1.0
#: local records are buffered and written together, one file per this many seconds of passes (or per
#: BATCH_RECORDS passes): a file per pass cost ~0.75 ms (creating the file, the zip), more than a small pass
BATCH_SECONDS = 0.5
BATCH_RECORDS = 1024


def _digest(params) -> str:
    """A stable hash of pass parameters (numbers, arrays, strings, nested)."""
    h = hashlib.sha256()

    def feed(v):
        if isinstance(v, dict):
            h.update(b"{")
            for k in sorted(v, key=str):
                h.update(str(k).encode())
                feed(v[k])
            h.update(b"}")
        elif isinstance(v, (list, tuple)):
            h.update(b"[")
            for x in v:
                feed(x)
            h.update(b"]")
        elif isinstance(v, np.ndarray):
            a = np.ascontiguousarray(v)
            h.update(f"{a.dtype.str}{a.shape}".encode())
            h.update(a.tobytes())
        elif isinstance(v, (np.generic, int, float, bool, str, bytes)) or v is None:
            h.update(repr(v.item() if isinstance(v, np.generic) else v).encode())
        else:  # something without a stable value: never matches a recorded pass
            h.update(uuid.uuid4().bytes)

    feed(params)
    return h.hexdigest()[:32]


def _arrays_digest(arrays: dict) -> str:
    """A checksum of a record's result arrays (names, dtypes, shapes, bytes):
    a batch file edited or damaged after it was written no longer matches."""
    h = hashlib.sha256()
    for k in sorted(arrays):
        a = np.ascontiguousarray(arrays[k])
        h.update(f"{k}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:32]


def _checkpoint_digest(doc: dict) -> str:
    """A checksum of ``checkpoint.json``'s fields (the fit's estimator,
    parameters and data shape): an edited checkpoint is refused on resume."""
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32]


def _storable(result):
    """``{name: array}`` of a pass result that round-trips exactly, or None."""
    if not isinstance(result, dict):
        return None
    out = {}
    for k, v in result.items():
        number = isinstance(v, (np.generic, int, float, bool)) and np.asarray(v).dtype.kind in "biuf"
        if not isinstance(k, str) or not (number or (isinstance(v, np.ndarray) and v.dtype.kind in "biuf")):
            return None
        out[k] = np.asarray(v)
    return out


class Journal:
    """The pass journal of one fit in ``folder`` (see the module docstring)."""

    def __init__(self, folder: str | os.PathLike, fingerprint: dict, *, resume: bool) -> None:
        from .storage.location import run_path

        self.folder = run_path(folder, "checkpoint folder")
        self.remote = is_url(self.folder)
        self.passes = self.folder / "passes"
        self.fingerprint = fingerprint
        self.position = 0
        self.replaying = False
        self.replayed = 0
        self.entries: list[dict] = []
        self._synced = 0.0  # time of the last fsync of a record
        self._buffer: list[tuple[dict, dict | None]] = []  # records not yet written (local folders)
        self._buffer_since = 0.0
        self._cache: tuple[Any, dict] | None = None  # the batch file read last, while replaying
        if resume:
            self._open_existing()
        else:
            self._start_new()

    # -- files ---------------------------------------------------------
    def _start_new(self):
        meta = self.folder / "checkpoint.json"
        if meta.exists():
            raise FileExistsError(f"'{self.folder}' already holds a checkpoint; resume from it "
                                  "(fit(..., resume=folder), CLI --resume) or choose a new folder.")
        if not self.remote:
            self.passes.mkdir(parents=True, exist_ok=True)
        doc = {"journal_version": 1, **json.loads(json.dumps(self.fingerprint))}
        _atomic_write(meta, json.dumps({**doc, "sha": _checkpoint_digest(doc)}, indent=1).encode())

    def _open_existing(self):
        meta = self.folder / "checkpoint.json"
        if not meta.exists():
            raise FileNotFoundError(f"No checkpoint in '{self.folder}' (no checkpoint.json): nothing to resume. "
                                    "Start a fit with a checkpoint folder first.")
        try:
            saved = json.loads(meta.read_text())
        except ValueError as exc:
            raise ValueError(f"'{meta}' is damaged ({exc}); start a new fit.") from None
        if not isinstance(saved, dict):
            raise ValueError(f"'{meta}' is damaged (not a JSON object); start a new fit.")
        if "sha" in saved and saved["sha"] != _checkpoint_digest({k: v for k, v in saved.items() if k != "sha"}):
            raise ValueError(f"'{meta}' does not match the checksum written with it: it was edited or damaged, so "
                             "its passes cannot be trusted to belong to this fit. Start a new fit (another run "
                             "folder).")
        diff = {k: (saved.get(k), v) for k, v in json.loads(json.dumps(self.fingerprint)).items()
                if saved.get(k) != v}
        if diff:
            detail = "; ".join(f"{k}: checkpoint {a!r}, now {b!r}" for k, (a, b) in diff.items())
            raise ValueError(f"The checkpoint in '{self.folder}' was made by another fit ({detail}); resume "
                             "with the same estimator, parameters and data, or start a new fit.")
        if not self.passes.is_dir():  # deleted: nothing to replay, every pass runs again and is recorded anew
            warnings.warn(f"The checkpoint in '{self.folder}' has no passes/ folder: nothing to replay; the fit "
                          "runs every pass again.", RuntimeWarning, stacklevel=3)
            self.passes.mkdir(parents=True, exist_ok=True)
        self.entries = _read_entries(self.passes, clean=True)
        self.replaying = bool(self.entries)

    # -- the engine's side --------------------------------------------
    def lookup(self, name: str, params: Any) -> dict | None:
        """The recorded result of the next pass if it is this one, else None
        (and the journal is cut: everything from here on runs for real)."""
        if not self.replaying:
            return None
        if self.position < len(self.entries):
            e = self.entries[self.position]
            if e["name"] == name and e["params"] == _digest(params):
                if not e.get("stored", True):  # same pass, result not storable: run it, keep replaying
                    return None
                out = self._load(e)
                if out is None:  # the record does not match its checksum: recompute from here
                    self._cut()
                    return None
                self.position += 1
                self.replayed += 1
                return out
        self._cut()
        return None

    def record(self, name: str, params: Any, result: Any) -> None:
        """Write the result of the pass at the current position."""
        if self.replaying and self.position < len(self.entries):
            # a pass whose result could not be stored, matched and run again while replaying: its entry is there
            self.position += 1
            return
        arrays = _storable(result)
        meta = {"position": self.position, "name": name, "params": _digest(params), "stored": arrays is not None,
                "sha": _arrays_digest(arrays or {})}
        path = self.passes / f"{self.position:07d}.npz"
        if self.remote:  # one PUT: the object is whole or absent
            buf = io.BytesIO()
            np.savez(buf, __meta__=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), **(arrays or {}))
            path.write_bytes(buf.getvalue())
            self.position += 1
            return
        if not self._buffer:
            self._buffer_since = time.monotonic()
        self._buffer.append((meta, arrays))
        self.position += 1
        if len(self._buffer) >= BATCH_RECORDS or time.monotonic() - self._buffer_since >= BATCH_SECONDS:
            self.flush()

    def flush(self) -> None:
        """Write the buffered records as one batch file (atomically)."""
        if self.remote or not self._buffer:
            return
        records, self._buffer = self._buffer, []
        first = records[0][0]["position"]
        self._synced, _ = _write_batch(self.passes / f"{first:07d}.npz", records, self._synced)

    def _load(self, e: dict) -> dict | None:
        """The result arrays of journal entry ``e`` (its batch file read
        once); None, with a warning, when they do not match the checksum
        recorded with them (the file was edited or damaged after it was
        written: the fit recomputes that pass and the ones after it)."""
        if self._cache is None or self._cache[0] != e["file"]:
            with np.load(io.BytesIO(e["file"].read_bytes()), allow_pickle=False) as z:
                self._cache = (e["file"], {k: z[k] for k in z.files})
        arrays = _entry_arrays(self._cache[1], e)
        if "sha" in e and _arrays_digest(arrays) != e["sha"]:
            import warnings

            warnings.warn(f"The journal record of pass {e['position']} in '{e['file']}' does not match its checksum "
                          "(the file was edited or damaged after it was written): the fit recomputes from that pass "
                          "on instead of replaying it.", RuntimeWarning, stacklevel=4)
            return None
        return {k: (v[()] if v.ndim == 0 else v) for k, v in arrays.items()}

    def _cut(self):
        self.replaying = False
        _cut_entries(self.entries, self.position)
        self.entries = self.entries[: self.position]
        self._cache = None


def _write_batch(path: Any, records: list, synced: float) -> tuple[float, list[tuple[int, int]]]:
    """Write ``records`` (``(meta, arrays)``) as one file at ``path``: a
    temporary file renamed into place; fsync'd when the last one was at
    least :data:`SYNC_SECONDS` ago. Records whose arrays have the same
    names, dtypes and shapes form a group, each of its arrays stacked into
    one (``g{group}.{name}``, a row per record) and the metadata one JSON
    list (``__batch__``): a zip member per record and array cost ~30 us
    each, more than a small pass (a soft K-means pass over Letter: ~1 ms).
    Returns the time of the last fsync and each record's ``(group, row)``."""
    groups: dict[tuple, int] = {}  # a kind of record ((name, dtype, shape) of each array) -> its group
    members: list[list[int]] = []  # the records of each group
    places: list[tuple[int, int]] = []
    for i, (_, arrays) in enumerate(records):
        kind = tuple((k, v.dtype.str, v.shape) for k, v in (arrays or {}).items())
        if kind not in groups:
            groups[kind] = len(members)
            members.append([])
        g = groups[kind]
        places.append((g, len(members[g])))
        members[g].append(i)
    metas = [{**meta, "group": g, "row": r} for (meta, _), (g, r) in zip(records, places, strict=True)]
    payload: dict[str, np.ndarray] = {"__batch__": np.frombuffer(json.dumps(metas).encode(), dtype=np.uint8)}
    for kind, g in groups.items():
        for k, _, _ in kind:
            payload[f"g{g}.{k}"] = np.stack([records[i][1][k] for i in members[g]])
    tmp = path.with_name(f".{path.stem}.{uuid.uuid4().hex[:6]}.tmp.npz")
    with open(tmp, "wb") as fh:
        np.savez(fh, **payload)  # type: ignore[arg-type]
        fh.flush()
        now = time.monotonic()
        if now - synced >= SYNC_SECONDS:
            os.fsync(fh.fileno())
            synced = now
    os.replace(tmp, path)
    return synced, places


def _entry_arrays(data: dict, e: dict) -> dict:
    """The result arrays of entry ``e`` among its file's arrays ``data``:
    a row of its group's stacked arrays (batches), or the ``a{slot}.``
    arrays of the batches written before the groups, or the whole file (a
    file of one record: URLs, and journals written before the batches)."""
    if "group" in e:
        prefix, row = f"g{e['group']}.", e["row"]
        return {k[len(prefix):]: np.array(v[row]) for k, v in data.items() if k.startswith(prefix)}
    slot = e.get("slot")
    if slot is None:
        return {k: v for k, v in data.items() if k != "__meta__"}
    prefix = f"a{slot}."
    return {k[len(prefix):]: v for k, v in data.items() if k.startswith(prefix)}


def _read_entries(passes: Any, *, clean: bool = False) -> list[dict]:
    """The journal's entries in order (``{"file", "slot", "position",
    "name", "params", "stored"}``), up to the first gap or torn file.
    Temporary files (a batch being written, or one a kill interrupted) are
    skipped; with ``clean`` - only the process that takes the journal over
    on resume, whose writer is gone - they are removed. A reader beside a
    live fit must not: it would delete the batch the fit is renaming."""
    index: list[dict] = []
    listed = list(passes.iterdir()) if passes.exists() else []
    if clean:
        for f in sorted((p for p in listed if p.name.endswith(".tmp.npz")), key=lambda p: p.name):
            f.unlink(missing_ok=True)  # a batch torn by the kill, never renamed into place
    for f in sorted((p for p in listed if p.name.endswith(".npz") and not p.name.startswith(".")),
                    key=lambda p: p.name):
        try:
            with np.load(io.BytesIO(f.read_bytes()), allow_pickle=False) as z:
                if "__batch__" in z.files:  # a batch of grouped records
                    index.extend({"file": f, **m} for m in json.loads(bytes(z["__batch__"]).decode()))
                    continue
                if "__meta__" in z.files:  # one record per file (URLs, and journals before the batches)
                    index.append({"file": f, "slot": None, **json.loads(bytes(z["__meta__"]).decode())})
                    continue
                i = 0
                while f"m{i}" in z.files:
                    index.append({"file": f, "slot": i, **json.loads(bytes(z[f"m{i}"]).decode())})
                    i += 1
        except Exception:  # noqa: BLE001 - a file torn by a crash ends the journal
            break
    entries = []
    for i, e in enumerate(index):  # a journal is a prefix: it ends at the first gap
        if e.get("position") != i:
            break
        entries.append(e)
    return entries


def _cut_entries(entries: list[dict], keep: int) -> None:
    """Remove the records from position ``keep`` on: files holding only
    later records are deleted, a batch holding both is rewritten with its
    earlier records."""
    files: dict[Any, list[dict]] = {}
    for e in entries:
        files.setdefault(e["file"], []).append(e)
    for f, es in files.items():
        kept = [e for e in es if e["position"] < keep]
        if not kept:
            f.unlink(missing_ok=True)
        elif len(kept) < len(es):
            with np.load(io.BytesIO(f.read_bytes()), allow_pickle=False) as z:
                data = {k: z[k] for k in z.files}
            records = [({k: e[k] for k in ("position", "name", "params", "stored", "sha") if k in e},
                        _entry_arrays(data, e)) for e in kept]
            _, places = _write_batch(f, records, 0.0)
            for e, (group, row) in zip(kept, places, strict=True):
                e.pop("slot", None)
                e["group"], e["row"] = group, row


def recorded_passes(folder: str | os.PathLike) -> int:
    """The number of passes recorded in the checkpoint ``folder`` (a local folder)."""
    from .storage.location import run_path

    return len(_read_entries(run_path(folder, "checkpoint folder") / "passes"))


def truncate(folder: str | os.PathLike, keep: int) -> None:
    """Keep only the first ``keep`` recorded passes of the checkpoint
    ``folder`` (a local folder): as if its driver had been killed there."""
    from .storage.location import run_path

    passes = run_path(folder, "checkpoint folder") / "passes"
    _cut_entries(_read_entries(passes), int(keep))


def _atomic_write(path: Any, data: bytes):
    if is_url(path):
        path.write_bytes(data)
        return
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:6]}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def active() -> Journal | None:
    """The journal of the fit running in this context, if any."""
    return _ACTIVE.get()


@contextlib.contextmanager
def recording(folder: str | os.PathLike | None, fingerprint: dict, *, resume: bool) -> Iterator[Journal | None]:
    """Journal the passes run inside the block into ``folder`` (replaying an
    existing journal first when ``resume``); no-op when ``folder`` is None."""
    if folder is None:
        yield None
        return
    from .storage.location import run_path
    from .storage.runlock import holding

    where = run_path(folder, "checkpoint folder")
    # one writer at a time (infoclust_dask.storage.runlock), taken before the journal is read or started
    lock = not is_url(where) and (not resume or where.exists())  # a missing folder to resume: the journal says so
    with holding(where) if lock else contextlib.nullcontext():
        j = Journal(where, fingerprint, resume=resume)
        token = _ACTIVE.set(j)
        try:
            yield j
        finally:
            _ACTIVE.reset(token)
            j.flush()  # the buffered records, whether the fit ended or raised (a kill loses them: recomputed)

