"""Checkpoint and resume of a fit: a journal of its passes.

Every estimator's driver loop (Lloyd iterations, annealing, conjugate
gradients, EM) is deterministic given its seed and the results of its
map-reduce passes. A :class:`Journal` records, in a run folder, the result of
every pass as it completes (``passes/NNNNNN.npz``, written atomically: a
temporary file, then a rename). A fit resumed from that folder replays the
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

The journal holds small statistics only (what the driver holds anyway), one
file per pass. The folder may be a URL (``s3://bucket/runs/...``): there
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
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np

from ._paths import is_url

__all__ = ["Journal", "active", "recording"]

_ACTIVE: contextvars.ContextVar = contextvars.ContextVar("infoclust_journal", default=None)


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
        from ._location import run_path

        self.folder = run_path(folder, "checkpoint folder")
        self.remote = is_url(self.folder)
        self.passes = self.folder / "passes"
        self.fingerprint = fingerprint
        self.position = 0
        self.replaying = False
        self.replayed = 0
        self.entries: list[dict] = []
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
        _atomic_write(meta, json.dumps({"journal_version": 1, **self.fingerprint}, indent=1).encode())

    def _open_existing(self):
        meta = self.folder / "checkpoint.json"
        if not meta.exists():
            raise FileNotFoundError(f"No checkpoint in '{self.folder}' (no checkpoint.json): nothing to resume. "
                                    "Start a fit with a checkpoint folder first.")
        try:
            saved = json.loads(meta.read_text())
        except ValueError as exc:
            raise ValueError(f"'{meta}' is damaged ({exc}); start a new fit.") from None
        diff = {k: (saved.get(k), v) for k, v in json.loads(json.dumps(self.fingerprint)).items()
                if saved.get(k) != v}
        if diff:
            detail = "; ".join(f"{k}: checkpoint {a!r}, now {b!r}" for k, (a, b) in diff.items())
            raise ValueError(f"The checkpoint in '{self.folder}' was made by another fit ({detail}); resume "
                             "with the same estimator, parameters and data, or start a new fit.")
        index = []
        listed = list(self.passes.iterdir()) if self.passes.exists() else []
        for f in sorted((p for p in listed if p.name.endswith(".tmp.npz")), key=lambda p: p.name):
            f.unlink(missing_ok=True)  # a record torn by the kill, never renamed into place
        for f in sorted((p for p in listed if p.name.endswith(".npz") and not p.name.startswith(".")),
                        key=lambda p: p.name):
            try:
                with np.load(io.BytesIO(f.read_bytes()), allow_pickle=False) as z:
                    meta_ = json.loads(bytes(z["__meta__"]).decode())
                    index.append({"file": f, **meta_})
            except Exception:  # noqa: BLE001 - a file torn by a kill ends the journal
                break
        for i, e in enumerate(index):  # a journal is a prefix: it ends at the first gap
            if e.get("position") != i:
                break
            self.entries.append(e)
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
                with np.load(io.BytesIO(e["file"].read_bytes()), allow_pickle=False) as z:
                    out = {k: (z[k][()] if z[k].ndim == 0 else z[k]) for k in z.files if k != "__meta__"}
                self.position += 1
                self.replayed += 1
                return out
        self._cut()
        return None

    def record(self, name: str, params: Any, result: Any) -> None:
        """Write the result of the pass at the current position."""
        arrays = _storable(result)
        meta = {"position": self.position, "name": name, "params": _digest(params), "stored": arrays is not None}
        path = self.passes / f"{self.position:07d}.npz"
        if self.remote:  # one PUT: the object is whole or absent
            buf = io.BytesIO()
            np.savez(buf, __meta__=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), **(arrays or {}))
            path.write_bytes(buf.getvalue())
            self.position += 1
            return
        tmp = self.passes / f".{self.position:07d}.{uuid.uuid4().hex[:6]}.tmp.npz"
        with open(tmp, "wb") as fh:
            np.savez(fh, __meta__=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), **(arrays or {}))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        self.position += 1

    def _cut(self):
        self.replaying = False
        for e in self.entries[self.position:]:
            e["file"].unlink(missing_ok=True)
        self.entries = self.entries[: self.position]


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
    j = Journal(folder, fingerprint, resume=resume)
    token = _ACTIVE.set(j)
    try:
        yield j
    finally:
        _ACTIVE.reset(token)

