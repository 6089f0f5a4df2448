"""Connections to dask schedulers: the shared LocalCluster
(:func:`local_client`), clients of schedulers at an address
(:func:`remote_client`, one hard deadline: ``$INFOCLUST_CONNECT_TIMEOUT``,
default 10 s - a refused port fails at once, a server that is not a dask
scheduler at the deadline), their quiet shutdown, and the thread pool of
in-process passes.

Which scheduler a call uses is decided by the runners of
:mod:`infoclust_dask.engine.choose`; only the engine (and the CLI, for its
default and its quiet shutdown) uses this module. Nothing
here builds a graph.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = ["local_client", "close_local_client", "remote_client", "close_remote_clients", "thread_pool",
           "run_default", "ADDRESS_PREFIXES"]

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
def local_client(n_workers: int | None = None, threads_per_worker: int = 1) -> Any:
    """The on-demand ``LocalCluster`` client (started on first use, closed at
    exit). Worker processes, not threads: decompression of zarr chunks and the
    Python parts of the kernels then run in parallel."""
    with _LOCK:
        client = _LOCAL["client"]
        if client is not None and client.status == "running":
            return client
        from distributed import Client, LocalCluster

        n = n_workers or min(2, os.cpu_count() or 1)
        processes = not unguarded_main()
        if not processes:
            import warnings

            warnings.warn(UNGUARDED_NOTE, RuntimeWarning, stacklevel=2)
        for name in ("distributed", "distributed.scheduler", "distributed.nanny", "distributed.worker",
                     "distributed.core"):
            logging.getLogger(name).setLevel(logging.WARNING)
        cluster = _without_sigint(lambda: LocalCluster(
            n_workers=n,
            threads_per_worker=threads_per_worker,
            processes=processes,
            **({"host": "127.0.0.1"} if processes else {}),  # threads talk in-process (inproc://), no port
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


UNGUARDED_NOTE = (
    "This script starts infoclust's LocalCluster from code outside `if __name__ == \"__main__\":`, so its workers "
    "run as threads of this process: worker processes would run the script again from the top. Put the script's "
    "work under that guard for worker processes (faster reads of compressed stores).")


def unguarded_main() -> bool:
    """Whether this call comes from the top-level code of a ``__main__``
    script (or ``python -m`` module) outside an ``if __name__ ==
    "__main__":`` block. Worker processes that a LocalCluster spawns import
    ``__main__`` again, so there they would run the script's top level - the
    fit again, whose LocalCluster would spawn again ("Nanny failed to
    start", the script's body run several times). Interactive sessions,
    notebooks and calls from inside the guard are not affected."""
    import ast
    import sys

    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or not path or not str(path).endswith(".py"):
        return False
    frame: Any = sys._getframe(1)
    while frame is not None and not (frame.f_code.co_name == "<module>" and frame.f_globals is vars(main)):
        frame = frame.f_back
    if frame is None:  # not below the script's top level (another thread, a callback)
        return False
    try:
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
    except (OSError, SyntaxError, ValueError):
        return False
    line = frame.f_lineno
    return not any(isinstance(node, ast.If) and _is_main_test(node.test) and node.lineno <= line <= (node.end_lineno or 0)
                   for node in tree.body)


def _is_main_test(test) -> bool:
    """``__name__ == "__main__"`` (either side)."""
    import ast

    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return any(isinstance(a, ast.Name) and a.id == "__name__" for a in sides) and \
        any(isinstance(a, ast.Constant) and a.value == "__main__" for a in sides)


def close_local_client() -> None:
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


def quiet_local_workers() -> None:
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
    from .._support.settings import env_number

    return float(env_number("INFOCLUST_CONNECT_TIMEOUT", 10.0, seconds=True))


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


def _check_tls_settings(address: str) -> None:
    """A ``tls://`` address needs the TLS files in dask's configuration
    (``distributed.comm.tls``): refused in one line naming them when unset,
    instead of distributed's error and a client left to time out."""
    if not address.startswith("tls://"):
        return
    import dask.config

    tls = dask.config.get("distributed.comm.tls", {}) or {}
    client = tls.get("client") or {}
    if tls.get("ca-file") and client.get("cert"):
        return
    raise ConnectionError(
        f"Could not connect to the dask scheduler at {address!r}: it uses TLS, but this process has no TLS settings (dask's "
        "distributed.comm.tls: ca-file, client cert and key are unset). Put deploy/tls/dask-tls.yaml (with the "
        "paths of your certificates) in ~/.config/dask/ or point DASK_CONFIG at its folder, or set "
        "DASK_DISTRIBUTED__COMM__TLS__CA_FILE, DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT and "
        "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY; deploy/README.md shows the set-up.")


def _quiet_half_made_clients() -> None:
    """A ``Client`` whose connection failed is closed by its ``__del__``,
    which waits 20 s on a scheduler that never answered and prints
    "Exception ignored in Client.__del__ ... TimeoutError" (at exit, after
    this package already said in one line what went wrong). From the first
    connection attempt on, that one report is dropped; every other
    unraisable exception still reaches the previous hook."""
    import sys

    previous = sys.unraisablehook
    if getattr(previous, "_infoclust_quiet_client", False):
        return

    def hook(unraisable):
        where = getattr(unraisable.object, "__qualname__", "")
        if where == "Client.__del__" and isinstance(unraisable.exc_value, (TimeoutError, OSError)):
            return
        previous(unraisable)

    hook._infoclust_quiet_client = True  # type: ignore[attr-defined]
    sys.unraisablehook = hook


def remote_client(address: str) -> Any:
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
        _check_tls_settings(address)
        _probe_tcp(address, timeout)
        _quiet_half_made_clients()
        box: dict = {}
        handover = threading.Lock()

        def connect():
            import gc

            try:
                c = Client(address, set_as_default=False, timeout=timeout)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller below
                box["error"] = exc.with_traceback(None)  # its frames would keep the half-made client alive
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


ADDRESS_PREFIXES = ("tcp://", "tls://", "inproc://", "ucx://", "ws://", "wss://")


def run_default(scheduler: Any = None) -> Any:
    """The scheduler of command-line runs and flows: the one given, else
    ``$DASK_SCHEDULER_ADDRESS``, else ``None`` - the data decide
    (:func:`infoclust_dask.engine.choose.place`: in this process when they
    fit its budget, else a LocalCluster on 127.0.0.1 started on demand)."""
    return scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS") or None


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
