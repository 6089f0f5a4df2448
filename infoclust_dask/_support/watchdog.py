"""Children die with their parent, however the parent dies.

A command-line run may start child processes: Prefect's temporary API server
(``uvicorn``, ~250 MB, an open API on a loopback port) and the LocalCluster's
nanny and worker processes. SIGINT and SIGTERM unwind the parent, whose
context managers stop them; ``kill -9`` does not. :func:`start` launches this
module as a small separate process that records the parent's descendants
every half second and, once the parent is gone, terminates the ones it saw
(SIGTERM, then SIGKILL after a grace period), then exits.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time

POLL_SECONDS = 0.5
GRACE_SECONDS = 3.0


def start(parent: int | None = None):
    """Watch ``parent`` (default: this process) from a separate process;
    returns its ``Popen`` (it exits on its own after the parent)."""
    parent = os.getpid() if parent is None else parent
    return subprocess.Popen([sys.executable, "-m", "infoclust_dask._support.watchdog", str(parent)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)  # Ctrl-C in the terminal must not kill the watchdog first


def watch(parent: int):
    import psutil

    try:
        proc = psutil.Process(parent)
    except psutil.NoSuchProcess:
        return
    me = os.getpid()
    seen: dict[int, psutil.Process] = {}
    while True:
        try:
            if not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE:
                break
            for child in proc.children(recursive=True):
                if child.pid != me:
                    seen.setdefault(child.pid, child)
        except psutil.NoSuchProcess:
            break
        time.sleep(POLL_SECONDS)
    alive = []
    for p in seen.values():
        with contextlib.suppress(psutil.NoSuchProcess):  # already gone: nothing to stop
            if p.is_running():  # is_running compares creation times: a recycled PID is not ours
                p.terminate()
                alive.append(p)
    _, still = psutil.wait_procs(alive, timeout=GRACE_SECONDS)
    for p in still:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()


if __name__ == "__main__":
    watch(int(sys.argv[1]))
