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
    an existing dask scheduler; clients are cached per address. One hard
    deadline covers reaching it (``$INFOCLUST_CONNECT_TIMEOUT``, default
    10 s): a refused port fails at once, a server that is not a dask
    scheduler at the deadline.
a ``distributed.Client``
    used as it is.
a dask cluster object
    ``LocalCluster``, dask-jobqueue's and dask-kubernetes' clusters, anything
    with a ``scheduler_address``: a client of that cluster (cached per
    address, like an address string).

Only :mod:`infoclust_dask.engine` uses this module; nothing here builds a
graph.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

__all__ = ["Scheduler", "resolve_scheduler", "installed", "local_client", "close_local_client", "thread_pool",
           "run_default"]

_LOCK = threading.Lock()
_LOCAL: dict[str, Any] = {"cluster": None, "client": None}
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
        cluster = _without_sigint(lambda: LocalCluster(
            n_workers=n,
            threads_per_worker=threads_per_worker,
            processes=True,
            host="127.0.0.1",
            # the scheduler's HTTP endpoints start even without a dashboard: a free loopback port, so that
            # a second process does not warn that 8787 is taken
            dashboard_address="127.0.0.1:0",
            silence_logs=logging.WARNING,
        ))
        client = Client(cluster, set_as_default=False)
        _LOCAL["cluster"], _LOCAL["client"] = cluster, client
        # registered after distributed's own exit handlers, so it runs before them (last in, first out):
        # the quiet shutdown below, not distributed's
        atexit.register(close_local_client)
        return client


def close_local_client():
    """Stop the on-demand LocalCluster, if one was started."""
    with _LOCK:
        client, cluster = _LOCAL["client"], _LOCAL["cluster"]
        _LOCAL["client"] = _LOCAL["cluster"] = None
    # Stopping the cluster makes distributed log about data "lost" with the workers and transfers cut
    # short: expected here, so the workers and this process' distributed loggers are quiet meanwhile.
    logging.disable(logging.CRITICAL)
    try:
        if client is not None:
            with contextlib.suppress(Exception):
                client.run(_silence, wait=True, on_error="ignore")
            client.close()
        if cluster is not None:
            cluster.close()
    finally:
        logging.disable(logging.NOTSET)



def _silence():
    logging.disable(logging.CRITICAL)


def quiet_local_workers():
    """After Ctrl-C / SIGTERM: the local cluster's workers stop logging, so
    that shutting down the interrupted work prints nothing (their errors about
    cancelled transfers are expected then). A no-op without a local cluster."""
    client = _LOCAL["client"]
    if client is None:
        return
    _silence()  # this process' distributed loggers too
    with contextlib.suppress(Exception):  # the workers may be gone already
        client.run(_silence, wait=True, on_error="ignore")


def connect_timeout() -> float:
    """Seconds allowed to reach a scheduler: ``$INFOCLUST_CONNECT_TIMEOUT``
    (a number, or with an ``s`` suffix), default 10."""
    raw = os.environ.get("INFOCLUST_CONNECT_TIMEOUT", "10").strip().lower().removesuffix("s")
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"INFOCLUST_CONNECT_TIMEOUT={raw!r} is not a number of seconds.") from None
    if not value > 0:
        raise ValueError(f"INFOCLUST_CONNECT_TIMEOUT must be > 0 seconds; got {value}.")
    return value


def _probe_tcp(address: str, timeout: float):
    """Fail fast on a refused or unreachable port (distributed would retry
    until its timeout)."""
    import socket
    from urllib.parse import urlsplit

    if not address.startswith(("tcp://", "tls://")):
        return
    parts = urlsplit(address)
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        raise ConnectionError(f"The scheduler address {address!r} has no valid port.") from None
    if host is None or port is None:
        raise ConnectionError(f"The scheduler address {address!r} needs a host and a port, e.g. "
                              "tcp://127.0.0.1:8786.")
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        raise ConnectionError(f"Could not connect to the dask scheduler at {address!r}: {exc.strerror or exc}. "
                              "Start one (`dask scheduler`) or pass scheduler='local' for a LocalCluster on "
                              "this machine.") from None


def _what_answered(exc: BaseException | None) -> str:
    """What a failed dask handshake says about the listener, in words."""
    text = str(exc) or type(exc).__name__
    if isinstance(exc, MemoryError) or "Unable to allocate" in text:
        return ("something listens there but does not speak dask's protocol (its first bytes announced a "
                "message of an impossible size)")
    if "reset by peer" in text or "closed" in text.lower():
        return f"something listens there but closed the connection without a dask handshake ({text})"
    return text


def _remote_client(address: str):
    """A client of the scheduler at ``address``, within one hard deadline
    (:func:`connect_timeout`): a refused port fails at once, and an address
    that accepts connections but does not speak dask (another server) fails
    at the deadline instead of hanging in ``Client.__init__``."""
    with _LOCK:
        client = _REMOTE.get(address)
        if client is not None and client.status == "running":
            return client
        from distributed import Client

        timeout = connect_timeout()
        _probe_tcp(address, timeout)
        box: dict = {}
        handover = threading.Lock()

        def connect():
            import gc

            try:
                c = Client(address, set_as_default=False, timeout=timeout)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller below
                box["error"] = exc
                # the half-made client is garbage now: collect it here, so that its __del__ (which stops
                # distributed's loop runner under a process-wide lock) does not run at some later
                # collection inside that lock - seen to deadlock every later Client() of the process
                gc.collect()
                return
            with handover:
                if box.get("abandoned"):  # the caller gave up waiting: close it here, not in a __del__
                    with contextlib.suppress(Exception):
                        c.close(timeout=2)
                    return
                box["client"] = c

        t = threading.Thread(target=connect, name=f"connect {address}", daemon=True)
        t.start()
        t.join(timeout + 2.0)
        with handover:
            if t.is_alive():
                box["abandoned"] = True
        if t.is_alive() or "error" in box:
            exc = box.get("error")
            why = (f"something listens there but gave no dask handshake within {timeout:g} s (is it a dask "
                   "scheduler?)" if t.is_alive()
                   else _what_answered(exc))
            raise ConnectionError(
                f"Could not connect to the dask scheduler at {address!r}: {why}. Start one (`dask scheduler`), "
                "pass scheduler='local' for a LocalCluster on this machine, or raise "
                "$INFOCLUST_CONNECT_TIMEOUT."
            ) from (exc if isinstance(exc, Exception) else None)
        client = box["client"]
        if not _REMOTE:
            import atexit

            atexit.register(close_remote_clients)  # before distributed's own handler (atexit runs in reverse)
        _REMOTE[address] = client
        return client


def close_remote_clients(timeout: float = 2.0) -> None:
    """Close the clients of remote schedulers quietly and quickly: against a
    scheduler that died, distributed's own close at exit waits 20 s and
    prints a ``TimeoutError`` traceback ("Exception ignored in
    Client.__del__"); here each gets ``timeout`` seconds and its errors are
    dropped (there is nothing left to tell the scheduler)."""
    import contextlib
    import logging

    loggers = [logging.getLogger(n) for n in ("distributed", "distributed.client", "distributed.comm",
                                                "distributed.core", "distributed.utils")]
    for address, client in list(_REMOTE.items()):
        _REMOTE.pop(address, None)
        levels = [lg.level for lg in loggers]
        for lg in loggers:  # its cancelled reconnect loop logs a traceback at ERROR
            lg.setLevel(logging.CRITICAL)
        try:
            with contextlib.suppress(Exception):
                client.close(timeout=timeout)
        finally:
            for lg, level in zip(loggers, levels, strict=True):
                lg.setLevel(level)


_ADDRESS_PREFIXES = ("tcp://", "tls://", "inproc://", "ucx://", "ws://", "wss://")


#: the scheduler installed by :func:`installed` in this context (one fit, one predict), if any
_INSTALLED: contextvars.ContextVar[Scheduler | None] = contextvars.ContextVar("infoclust_scheduler", default=None)


@contextlib.contextmanager
def installed(scheduler=None):
    """Resolve ``scheduler`` once and install it for the ``with`` block:
    every engine call inside that is not given a scheduler of its own runs
    on it. An estimator's ``fit`` (and ``predict``, ``score``, ...) installs
    its ``scheduler=`` this way, so that nothing below it carries the
    scheduler by hand; blocks nest (the inner one wins until it ends) and
    belong to one thread or task (a ``contextvars`` variable). ``None``
    inside an installed block means the installed scheduler; outside, the
    default of the module docstring. Yields the :class:`Scheduler`."""
    sched = resolve_scheduler(scheduler)
    token = _INSTALLED.set(sched)
    try:
        yield sched
    finally:
        _INSTALLED.reset(token)


def resolve_scheduler(scheduler=None) -> Scheduler:
    """Turn a ``scheduler=`` argument into a :class:`Scheduler` (see module
    doc); ``None`` is the scheduler :func:`installed` around this call, if
    any."""
    if isinstance(scheduler, Scheduler):
        return scheduler
    current = _INSTALLED.get()
    if scheduler is None and current is not None:
        return current
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
    address = getattr(scheduler, "scheduler_address", None)
    if isinstance(address, str) and address.startswith(_ADDRESS_PREFIXES):  # a Cluster object
        return Scheduler("distributed", _remote_client(address))
    raise TypeError(
        f"scheduler must be None, a string, a distributed.Client or a dask cluster (with a scheduler_address); "
        f"got {type(scheduler).__name__}."
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


def _without_sigint(start):
    """Run ``start()`` with SIGINT ignored, so that the worker processes it
    spawns inherit the ignored disposition (it survives fork and exec): Ctrl-C
    in a terminal reaches the whole process group, and workers that took it
    would print pages of tracebacks while this process shuts them down in
    order (their SIGINT stays blocked and ignored). Only from the main thread
    (signal handlers cannot be set elsewhere)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return start()
    # blocked as well: on Linux a blocked signal is never discarded as ignored, so a Ctrl-C during the
    # start stays pending and interrupts this process as soon as the handler is back
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return start()
    finally:
        signal.signal(signal.SIGINT, old)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
