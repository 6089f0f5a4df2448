"""Where passes run: scheduler resolution and the shared LocalCluster.

``scheduler=`` of every estimator and engine call:

``None`` (default)
    the scheduler at ``DASK_SCHEDULER_ADDRESS`` if that variable is set, else
    the active ``distributed.Client`` if there is one, else dask's configured
    scheduler when it names a local one (``dask.config.set(scheduler=
    "synchronous")`` is honoured), else local threads.
``"sync"``
    one thread, block after block (debugging, exact reproducibility).
``"threads"``
    a local thread pool (numpy releases the GIL in the heavy parts).
``"local"`` / ``"distributed"``
    a ``distributed.LocalCluster`` on this machine, started on first use and
    shared by every later call (2 single-threaded worker processes by default).
``"tcp://host:port"``
    an existing dask scheduler; clients are cached per address (connection
    timeout ``$INFOCLUST_CONNECT_TIMEOUT``, default 20 s).
a ``distributed.Client``
    used as it is.

Only :mod:`infoclust_dask.engine` uses this module; nothing here builds a
graph.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

__all__ = ["Scheduler", "resolve_scheduler", "local_client", "close_local_client", "thread_pool", "run_default"]

_LOCK = threading.Lock()
_LOCAL = {"cluster": None, "client": None}
_REMOTE: dict[str, Any] = {}
_POOL: list = []


def thread_pool() -> ThreadPoolExecutor:
    """One process-wide pool for numpy inputs (created on first use)."""
    with _LOCK:
        if not _POOL:
            _POOL.append(ThreadPoolExecutor(max_workers=os.cpu_count() or 2, thread_name_prefix="infoclust"))
        return _POOL[0]


# --------------------------------------------------------------------------
# schedulers
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class Scheduler:
    """A resolved scheduler: ``kind`` is "sync", "threads" or "distributed"."""

    kind: str
    client: Any = None

    def __str__(self):
        if self.client is not None:
            return f"distributed ({self.client.scheduler.address})"
        return self.kind


def local_client(n_workers: int | None = None, threads_per_worker: int = 1):
    """The on-demand ``LocalCluster`` client (started on first use, closed at
    exit). Worker processes, not threads: decompression of zarr chunks and the
    Python parts of the kernels then run in parallel."""
    with _LOCK:
        client = _LOCAL["client"]
        if client is not None and client.status == "running":
            return client
        from distributed import Client, LocalCluster

        n = n_workers or min(2, os.cpu_count() or 1)
        for name in ("distributed", "distributed.scheduler", "distributed.nanny", "distributed.worker",
                     "distributed.core"):
            logging.getLogger(name).setLevel(logging.WARNING)
        cluster = LocalCluster(
            n_workers=n,
            threads_per_worker=threads_per_worker,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            silence_logs=logging.WARNING,
        )
        client = Client(cluster, set_as_default=False)
        _LOCAL["cluster"], _LOCAL["client"] = cluster, client
        return client


def close_local_client():
    """Stop the on-demand LocalCluster, if one was started."""
    with _LOCK:
        client, cluster = _LOCAL["client"], _LOCAL["cluster"]
        _LOCAL["client"] = _LOCAL["cluster"] = None
    # persisted data still held at exit is expected; don't warn that it is "lost"
    logging.getLogger("distributed.scheduler").setLevel(logging.ERROR)
    if client is not None:
        client.close()
    if cluster is not None:
        cluster.close()


atexit.register(close_local_client)


def _remote_client(address: str):
    with _LOCK:
        client = _REMOTE.get(address)
        if client is not None and client.status == "running":
            return client
        from distributed import Client

        try:
            timeout = os.environ.get("INFOCLUST_CONNECT_TIMEOUT", "20s")
            client = Client(address, set_as_default=False, timeout=timeout)
        except OSError as exc:
            raise ConnectionError(
                f"Could not connect to the dask scheduler at {address!r}: {exc}. "
                "Start one (`dask scheduler`) or pass scheduler='local' for a "
                "LocalCluster on this machine."
            ) from exc
        _REMOTE[address] = client
        return client


_ADDRESS_PREFIXES = ("tcp://", "tls://", "inproc://", "ucx://", "ws://", "wss://")


def resolve_scheduler(scheduler=None) -> Scheduler:
    """Turn a ``scheduler=`` argument into a :class:`Scheduler` (see module doc)."""
    if isinstance(scheduler, Scheduler):
        return scheduler
    if scheduler is None:
        address = os.environ.get("DASK_SCHEDULER_ADDRESS")
        if address:
            return Scheduler("distributed", _remote_client(address))
        try:
            from distributed import default_client

            return Scheduler("distributed", default_client())
        except (ImportError, ValueError):  # no distributed client is active
            return _configured_local()
    if isinstance(scheduler, str):
        s = scheduler.strip()
        low = s.lower()
        if low in ("sync", "synchronous", "single-threaded"):
            return Scheduler("sync")
        if low in ("threads", "threading", "threaded"):
            return Scheduler("threads")
        if low in ("local", "distributed", "localcluster"):
            return Scheduler("distributed", local_client())
        if low.startswith(_ADDRESS_PREFIXES):
            return Scheduler("distributed", _remote_client(s))
        raise ValueError(
            f"Unknown scheduler {scheduler!r}. Use None, 'sync', 'threads', 'local' "
            "(a LocalCluster), an address such as 'tcp://127.0.0.1:8786', or a "
            "distributed.Client."
        )
    if hasattr(scheduler, "scheduler") and hasattr(scheduler, "compute"):
        return Scheduler("distributed", scheduler)
    raise TypeError(
        f"scheduler must be None, a string or a distributed.Client; got {type(scheduler).__name__}."
    )



def _configured_local() -> Scheduler:
    """dask's configured scheduler (``dask.config.set(scheduler=...)``) when
    it is a local one; threads otherwise."""
    import dask

    name = dask.config.get("scheduler", None)
    if isinstance(name, str):
        low = name.lower()
        if low in ("sync", "synchronous", "single-threaded"):
            return Scheduler("sync")
    return Scheduler("threads")


def run_default(scheduler=None):
    """The scheduler of command-line runs and flows: the one given, else
    ``$DASK_SCHEDULER_ADDRESS``, else ``"local"`` (a LocalCluster on
    127.0.0.1 started on demand). Library calls default to ``None`` instead
    (see the module docstring)."""
    return scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS") or "local"
