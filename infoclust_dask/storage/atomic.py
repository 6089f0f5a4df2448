"""Writing safely on a local file system: one writer per destination (a
lock file naming its PID), temporaries beside the destination that name
their writer (so that the leftovers of a killed writer are recognised and
removed), readable messages for a full or read-only disk, and small text
files written whole or not at all. :mod:`infoclust_dask.io.store` builds its
atomic store writes on these."""

from __future__ import annotations

from typing import Any

import errno
import os
import re
import shutil
import time
import uuid
from pathlib import Path

from .paths import local_path

__all__ = ["StoreError", "clean_stale_temporaries", "clean_stale_temporaries_within", "temporary_writer",
           "atomic_write_text", "WriteLock", "temp_name", "disk_error", "file_error", "remove_tree"]

#: a temporary named by :func:`temp_name`: ``.NAME.KIND-PID-HEX``
_TEMPORARY = re.compile(r"^\.(?P<of>.+)\.(?P<kind>tmp|old|var|raw|append)-(?P<pid>\d+)-[0-9a-f]{8}$")


class StoreError(ValueError):
    """A dataset store is missing, malformed, or would be overwritten."""


def _pid_alive(pid: int) -> bool:
    import psutil

    return psutil.pid_exists(pid)


def temp_name(path: Path, kind: str) -> Path:
    """A hidden sibling of ``path`` that names its writer's PID, so that a
    later run can tell a crashed writer's leftovers from a live one's."""
    return path.parent / f".{path.name}.{kind}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def clean_stale_temporaries(path: Any) -> list[Path]:
    """Remove the leftovers of writers of ``path`` that died (killed mid-write:
    ``.NAME.tmp-PID-*``, ``.NAME.old-PID-*``, ``.NAME.var-PID-*``, ``.NAME.raw-PID-*``, ``.NAME.append-PID-*`` and a
    ``.NAME.lock`` whose PID is gone); leftovers of live processes stay. Returns what was removed."""
    path = Path(path)
    removed: list = []
    if not path.parent.is_dir():
        return removed
    prefix = f".{path.name}."
    for p in path.parent.iterdir():
        if not p.name.startswith(prefix):
            continue
        rest = p.name[len(prefix):]
        kind, _, tail = rest.partition("-")
        if kind not in ("tmp", "old", "lock", "var", "raw", "append"):
            continue
        pid = tail.split("-")[0] if kind != "lock" else _read_lock_pid(p)
        if not str(pid).isdigit() or _pid_alive(int(pid)):
            continue
        removed.append(_remove(p))
    return removed


def _remove(p: Path) -> Path:
    """A dead writer's leftover (a file or a folder) removed; returns its path."""
    if p.is_dir():
        shutil.rmtree(p, ignore_errors=True)
    else:
        p.unlink(missing_ok=True)
    return p


def temporary_writer(name: str) -> int | None:
    """The PID in the name of a writer's temporary (``.zarr.json.tmp-123-abcd0123``), else None."""
    m = _TEMPORARY.match(name)
    return int(m.group("pid")) if m else None


def clean_stale_temporaries_within(store: Any) -> list[Path]:
    """Remove the temporaries that killed writers left inside a store on disk:
    in its folder and its arrays' folders (an append killed while replacing
    an array's ``zarr.json`` leaves ``x/.zarr.json.tmp-PID-*``); a live
    writer's stay. Returns what was removed."""
    root = Path(store)
    removed: list = []
    if not root.is_dir():
        return removed
    for folder in [root, *(d for d in root.iterdir() if d.is_dir() and not d.name.startswith("."))]:
        for p in folder.iterdir():
            pid = temporary_writer(p.name)
            if pid is None or _pid_alive(pid):
                continue
            removed.append(_remove(p))
    return removed


def _older_than(p: Path, seconds: float) -> bool:
    try:
        return time.time() - p.stat().st_mtime > seconds
    except OSError:
        return False


def _read_lock_pid(p: Path):
    try:
        return p.read_text().strip()
    except OSError:
        return ""


def live_writer(path: Path) -> str | None:
    """The PID of a live process holding the write lock of ``path`` (a
    write or an append in progress), else None."""
    lock = path.parent / f".{path.name}.lock-"
    if not lock.exists():
        return None
    pid = _read_lock_pid(lock)
    return pid if pid.isdigit() and _pid_alive(int(pid)) else None


class WriteLock:
    """``.NAME.lock-`` beside the destination, created exclusively: one writer
    per destination at a time; a second gets a clear error naming the first's
    PID. A lock left by a killed writer is removed by the next writer."""

    def __init__(self, path: Path):
        self.lock = path.parent / f".{path.name}.lock-"
        self.path = path

    def __enter__(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(2):
            if self._claim():
                return self
            pid = _read_lock_pid(self.lock)
            if (pid.isdigit() and not _pid_alive(int(pid))) or (not pid and _older_than(self.lock, 60.0)):
                # a dead writer's lock, or an empty one (the fallback below, killed before it wrote its PID)
                self.lock.unlink(missing_ok=True)
                continue
            raise StoreError(f"Another process (PID {pid or '?'}) is writing '{self.path}'; wait for it "
                             f"to finish (or, if no such process runs, remove '{self.lock}').")
        raise StoreError(f"Cannot take the write lock '{self.lock}' for '{self.path}'.")

    def _claim(self) -> bool:
        """Create the lock with this process' PID already in it, or return
        False if it exists. The PID goes into a file of its own first, which
        is then hard-linked as the lock (a link fails if the name exists):
        a writer killed at any instant leaves either no lock or one naming
        it, never an empty one that the next writer would have to take for
        a live writer's (``.NAME.lock-PID-HEX``, left if killed before the
        link, is removed by :func:`clean_stale_temporaries`). Where the file
        system has no hard links, the lock is created exclusively and the PID
        written after."""
        staged = self.path.parent / f".{self.path.name}.lock-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            try:
                with open(staged, "x") as fh:
                    fh.write(str(os.getpid()))
            except OSError as exc:  # e.g. no space left
                raise self._failed(exc) from None
            try:
                os.link(staged, self.lock)
                return True
            except FileExistsError:
                return False
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EXDEV):
                    raise self._failed(exc) from None
        finally:
            staged.unlink(missing_ok=True)
        return self._claim_exclusively()

    def _claim_exclusively(self) -> bool:
        """The lock created with ``O_EXCL``, then the PID written into it."""
        try:
            fd = os.open(self.lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(str(os.getpid()))
        except OSError as exc:  # e.g. no space left: no empty lock may stay behind
            self.lock.unlink(missing_ok=True)
            raise self._failed(exc) from None
        return True

    def _failed(self, exc: OSError) -> StoreError:
        """The error of a lock that could not be written (e.g. no space left)."""
        return StoreError(f"Cannot take the write lock '{self.lock}' for '{self.path}': {exc.strerror}.")

    def __exit__(self, *exc):
        self.lock.unlink(missing_ok=True)
        return False


def disk_error(exc: OSError, path: Path, nbytes: int) -> Exception:
    """An OSError of a store write as a message naming the path and the fix
    (the half-written temporary is removed by the caller)."""
    import errno

    free = shutil.disk_usage(path.parent).free if path.parent.exists() else None
    gib = 2 ** 30
    if exc.errno == errno.EFBIG:
        return StoreError(f"The store '{path}' hit the file size limit of this process (ulimit -f) while "
                          f"writing; it needs up to {nbytes / gib:.2f} GiB uncompressed. Nothing was written; "
                          "raise the limit or use smaller chunks.")
    if exc.errno == errno.ENOSPC or exc.errno == errno.EDQUOT:
        return StoreError(f"No space left for the store '{path}': it needs up to {nbytes / gib:.2f} GiB "
                          f"uncompressed and {'?' if free is None else f'{free / gib:.2f}'} GiB are free there. Nothing was written; free "
                          "space or choose another destination.")
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return StoreError(f"Cannot write the store '{path}': {exc.strerror} ({exc.filename or path.parent}). "
                          "Choose a writable destination.")
    return StoreError(f"Writing the store '{path}' failed: {exc}. Nothing was written.")


def remove_tree(path: Path, wait: float = 10.0) -> None:
    """Remove a half-written folder. After a failed compute, tasks already
    running in the pool may still write a chunk or two, so retry until it
    stays gone."""
    if not path.exists():
        return
    deadline = time.monotonic() + wait
    quiet_since = None
    while time.monotonic() < deadline:
        if path.exists():
            shutil.rmtree(path, ignore_errors=True)
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since > 0.3:
            return
        time.sleep(0.05)


def atomic_write_bytes(path: Any, data: bytes, *, overwrite: bool = False) -> Path:
    """Write a small file atomically (temp file beside it, then rename)."""
    path = local_path(path, "file")
    if path.exists() and not overwrite:
        raise FileExistsError(f"'{path}' exists; pass overwrite=True to replace it.")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_name(path, "tmp")  # names this PID: a killed writer's leftover is recognised and removed
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError as exc:
        raise file_error(exc, path, len(data)) from exc
    finally:
        tmp.unlink(missing_ok=True)
    return path


def file_error(exc: OSError, path: Path, nbytes: int) -> OSError:
    """An OSError of a small-file write, naming the file, the space needed
    and free, and the fix (nothing was written)."""
    import errno

    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        free = shutil.disk_usage(path.parent).free if path.parent.exists() else None
        return OSError(exc.errno, f"No space left to write '{path}' ({nbytes} bytes; "
                                  f"{'?' if free is None else free} bytes free there). Nothing was written; free "
                                  "space or choose another folder.")
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return OSError(exc.errno, f"Cannot write '{path}': {exc.strerror}. Choose a writable folder.")
    return OSError(exc.errno, f"Writing '{path}' failed: {exc.strerror or exc}. Nothing was written.")


def atomic_write_text(path: Any, text: str, *, overwrite: bool = False) -> Path:
    """Write a small text file atomically (temp file beside it, then rename)."""
    return atomic_write_bytes(path, text.encode("utf-8"), overwrite=overwrite)
