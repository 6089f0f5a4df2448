"""One writer per run folder: the fit that journals its passes into a run
folder (new or ``--resume``) holds ``run.lock`` there for as long as it runs.

The lock is a POSIX record lock (``fcntl.lockf``) on that file, which NFS
and other shared file systems honour across machines, so two scheduled
runs resuming one folder cannot both write its journal. The file also holds
who took it (host, PID, since when), for the message of the run that is
refused. The operating system drops the lock of a process that dies, however
it dies: a folder left by a killed run is taken over by the next one with no
stale-lock clean-up (and so no race between two runs cleaning it up). The
file is never removed: a run that removed it while another waited on the old
file would let a third lock a new one beside the second.

Run folders at URLs (object stores) have no such lock: there two runs must
not be started on one folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

__all__ = ["RunFolderBusy", "holding", "LOCK_NAME"]

LOCK_NAME = "run.lock"


class RunFolderBusy(RuntimeError):
    """Another process holds the run folder's lock."""


def _holder(path: Path) -> str:
    try:
        info = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        info = {}
    if not info:
        return "another process (it has not written its name yet)"
    return f"process {info.get('pid', '?')} on host {info.get('host', '?')}, since {info.get('since', '?')}"


@contextlib.contextmanager
def holding(folder: Path) -> Iterator[Path]:
    """Hold the lock of the local run folder ``folder`` (created if
    missing) for the ``with`` block; raise :class:`RunFolderBusy` naming
    the holder when another process has it."""
    import fcntl

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise RunFolderBusy(
                f"The run folder '{folder}' is in use by {_holder(path)}: one fit writes a run folder at a time. "
                "Wait for it to finish (or stop it), then --resume again; a folder of a process that died is "
                "free at once.") from None
        since = datetime.now(timezone.utc).isoformat(timespec="seconds")
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "since": since}).encode(), 0)
        try:
            yield path
        finally:
            os.ftruncate(fd, 0)  # released: no holder to name (the lock itself goes with the descriptor)
    finally:
        os.close(fd)
