"""Where passes run: the runners, and the one rule that places a fit.

A runner is chosen once per fit (``predict``, ``score``, ...) and every pass
below it asks the runner, never a scheduler name:

:class:`InProcess`
    this process, on the compiled kernels; numpy blocks are run directly
    (no dask graph per pass), on one thread (``"sync"``) or a small pool
    (``"threads"``); lazy input that fits :func:`in_process_budget` is read
    into memory once, by :meth:`Runner.prepare`.
:class:`Distributed`
    a ``distributed`` scheduler: the shared :func:`~infoclust_dask._scheduler.local_client`
    LocalCluster, a scheduler at an address, a ``Client`` or a cluster
    object. Numpy input is scattered once, small lazy input persisted on the
    workers, larger input streams from its store at every pass; a whole
    call whose data fit one worker runs there as one task
    (:meth:`Runner.run_whole`, :meth:`Runner.loop_budget`).

The verbs: :meth:`~Runner.compute`, :meth:`~Runner.each` (numpy blocks in
this process), :meth:`~Runner.prepare`, :meth:`~Runner.persist`,
:meth:`~Runner.persist_all`, :meth:`~Runner.broadcast`, :meth:`~Runner.keep`
(results kept where they are made), :meth:`~Runner.apply` and
:meth:`~Runner.release` (functions on kept blocks), :meth:`~Runner.workers`,
:meth:`~Runner.run_whole` (a whole call in one place).

``scheduler=`` of every estimator and engine call, resolved by
:func:`resolve_scheduler`:

``None`` (default)
    the scheduler at ``DASK_SCHEDULER_ADDRESS`` if that variable is set, else
    the active ``distributed.Client`` if there is one, else the runner of an
    enclosing call; else, for a fit (or predict) the data decide
    (:func:`place`): numpy input, and lazy input whose bytes fit
    :func:`in_process_budget`, run in this process; larger lazy input on the
    shared LocalCluster. An engine call outside any fit runs in this process
    (``dask.config.set(scheduler="synchronous")`` is honoured: one thread).
``"sync"``
    in this process, one thread, block after block.
``"threads"``
    in this process, a thread pool (numpy releases the GIL in the heavy parts).
``"local"`` / ``"distributed"``
    a ``distributed.LocalCluster`` on this machine, started on first use and
    shared by every later call (2 single-threaded worker processes by default).
``"tcp://host:port"``
    an existing dask scheduler (see :mod:`infoclust_dask._scheduler` for the
    connection's deadline).
a ``distributed.Client`` / a dask cluster object
    used as it is / a client of its ``scheduler_address``.

A scheduler named by argument, by ``$DASK_SCHEDULER_ADDRESS`` or by an
active client is always honoured; the data decide only where nothing is
named.
"""

from __future__ import annotations

import abc
import contextlib
import contextvars
import os
import sys
from collections.abc import Iterator
from typing import Any, Callable

import numpy as np

from .. import _scheduler
from . import execute
from .blocks import _auto_rows, _is_dask, _row_slices, as_array

__all__ = ["Runner", "InProcess", "Distributed", "resolve_scheduler", "installed", "place", "in_process_budget",
           "compute", "runner_for", "data_bytes", "IN_PROCESS_MAX_BYTES"]

#: the in-process budget is at most this many bytes of input (and at most 1/8 of the available memory)
IN_PROCESS_MAX_BYTES = 2**30
#: lazy inputs up to this size are loaded into the workers' memory before a fit on a distributed
#: scheduler (many passes follow); larger ones stream from the store at every pass
PERSIST_BYTES = 512 * 2**20


def in_process_budget() -> int:
    """Bytes of input a fit with no scheduler named reads into this
    process: ``$INFOCLUST_IN_PROCESS_BYTES`` if set, else an eighth of the
    memory available now, at most :data:`IN_PROCESS_MAX_BYTES` (1 GiB)."""
    from .._settings import env_number

    value = env_number("INFOCLUST_IN_PROCESS_BYTES", None, kind=int, allow_zero=True)
    if value is not None:
        return value
    import psutil

    return int(min(IN_PROCESS_MAX_BYTES, psutil.virtual_memory().available // 8))


def _size(nbytes: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("kiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{int(nbytes)} bytes"


class Runner(abc.ABC):
    """Where the passes of one call run (see the module docstring).
    ``reason`` says why this runner was chosen; ``local`` is true when
    numpy blocks run in this process without a task graph."""

    local: bool = True
    client: Any = None
    #: numpy blocks :meth:`each` runs at once (a reduce pass over a small
    #: array is cut into at least this many blocks when they stay large)
    threads: int = 1

    def __init__(self, reason: str = "") -> None:
        self.reason = reason

    # ----- what it is
    @property
    @abc.abstractmethod
    def kind(self) -> str:  # the scheduler family, for messages and summaries
        """"sync", "threads" or "distributed"."""

    def describe(self) -> dict:
        """``{"runner": str(self), "reason": ...}`` for run summaries."""
        return {"runner": str(self), "reason": self.reason}

    @abc.abstractmethod
    def workers(self) -> list[str]:
        """Where the passes run: worker addresses, or this process."""

    # ----- verbs
    @abc.abstractmethod
    def compute(self, obj: Any, *, progress: bool = False) -> Any:
        """Compute one dask object, or a tuple / list of them (non-dask
        objects come back as they are)."""

    @abc.abstractmethod
    def each(self, func: Callable[[Any], Any], items: list) -> list:
        """``[func(i) for i in items]`` in this process (numpy blocks)."""

    @abc.abstractmethod
    def prepare(self, a: Any, limit: int | None = None) -> Any:
        """The data of a many-pass fit where its passes read them best."""

    @abc.abstractmethod
    def persist(self, a: Any, chunk_rows: int | None = None) -> Any:
        """A dask array over ``a`` held in memory (this process' or the workers')."""

    @abc.abstractmethod
    def persist_all(self, arrays: tuple, progress: bool = False) -> tuple:
        """Several lazy arrays of one graph held in memory together."""

    def broadcast(self, value: Any) -> Any:
        """A shared argument as every task should receive it."""
        return value

    def keep(self, tasks: list, progress: bool = False) -> list:
        """Run ``tasks`` (delayed) and keep each result where it was made."""
        return list(self.compute(tasks, progress=progress))

    def apply(self, blocks: list, func: Callable[[Any, Any], Any], shared: Any, key: str) -> list:
        """``[func(b, shared) for b in blocks]`` where the blocks are."""
        return [func(b, shared) for b in blocks]

    def release(self, blocks: list) -> None:
        """Free blocks made by :meth:`keep` (in this process: dropping them is enough)."""
        return None

    # ----- a whole loop in one place
    def loop_budget(self) -> int:
        """Bytes of data a whole iterative call may take to one worker and
        run there as one task (:meth:`run_whole`); 0: it runs here, pass by
        pass."""
        return 0

    def files_shared(self) -> bool:
        """Whether the places :meth:`run_whole` runs at see this machine's files."""
        return True

    def run_whole(self, func: Callable[..., Any], *args: Any) -> tuple[Any, str]:
        """``(func(*args), where)``: the whole call in one place, every pass
        inside it on that place's threads (here: this process)."""
        return func(*args), "this process"


class InProcess(Runner):
    """This process: ``threads`` = 1 runs block after block on the calling
    thread (``"sync"``); more run numpy blocks on a pool and dask graphs on
    dask's thread scheduler."""

    def __init__(self, threads: int | None = None, reason: str = "") -> None:
        super().__init__(reason)
        self.threads = int(threads or os.cpu_count() or 2)

    @property
    def kind(self) -> str:
        return "sync" if self.threads == 1 else "threads"

    def __str__(self) -> str:
        return f"in-process ({self.threads} thread{'s' if self.threads > 1 else ''})"

    def __repr__(self) -> str:
        return f"InProcess(threads={self.threads})"

    def workers(self) -> list[str]:
        return ["this process"]

    def _dask_scheduler(self) -> Callable[..., Any]:
        """dask's local scheduler as its get function: passed by name, dask
        would import distributed (0.3 s) to look for a client first."""
        import dask
        import dask.threaded

        return dask.get if self.threads == 1 else dask.threaded.get

    def compute(self, obj: Any, *, progress: bool = False) -> Any:
        if isinstance(obj, (tuple, list)):
            if not any(_lazy(o) for o in obj):
                return obj
        elif not _lazy(obj):
            return obj
        import dask

        name = self._dask_scheduler()
        with execute.checksums_named(), execute.one_blas_thread(self.kind):
            if progress:
                from .._progress import dask_progress

                with dask_progress():  # stderr (stdout: results, the CLI's JSON); plain lines when not a terminal
                    out = dask.compute(obj, scheduler=name, optimize_graph=False)[0]
            else:
                out = dask.compute(obj, scheduler=name, optimize_graph=False)[0]
        return type(obj)(out) if isinstance(obj, (tuple, list)) else out

    def each(self, func: Callable[[Any], Any], items: list) -> list:
        if self.threads == 1 or len(items) <= 1:
            return [func(i) for i in items]
        with execute.one_blas_thread():
            return list(_scheduler.thread_pool().map(func, items))

    def prepare(self, a: Any, limit: int | None = None) -> Any:
        """Lazy input of at most ``limit`` bytes (default
        :func:`in_process_budget`) read into a numpy array once (later
        passes run on it without a graph); larger lazy input streams from
        its store at every pass; numpy stays as it is."""
        a = as_array(a)
        if _is_dask(a) and a.nbytes <= (in_process_budget() if limit is None else limit):
            return np.asarray(self.compute(a))
        return a

    def persist(self, a: Any, chunk_rows: int | None = None) -> Any:
        import dask.array as da

        a = as_array(a)
        if _is_dask(a):
            with execute.checksums_named():
                return a.persist(scheduler=self._dask_scheduler(), optimize_graph=False)
        return da.from_array(a, chunks=(chunk_rows or _auto_rows(a),) + a.shape[1:])

    def persist_all(self, arrays: tuple, progress: bool = False) -> tuple:
        import dask

        ctx: Any = contextlib.nullcontext()
        if progress:
            from .._progress import dask_progress

            ctx = dask_progress()
        with ctx, execute.checksums_named():
            return tuple(dask.persist(*arrays, scheduler=self._dask_scheduler(), optimize_graph=False))


class Distributed(Runner):
    """A ``distributed`` scheduler, through ``client``."""

    local = False

    def __init__(self, client: Any, reason: str = "") -> None:
        super().__init__(reason)
        self.client = client

    @property
    def kind(self) -> str:
        return "distributed"

    def __str__(self) -> str:
        return f"distributed ({self.client.scheduler.address})"

    def __repr__(self) -> str:
        return f"Distributed({self.client.scheduler.address!r})"

    def workers(self) -> list[str]:
        return sorted(execute._workers(self.client))

    def compute(self, obj: Any, *, progress: bool = False) -> Any:
        if isinstance(obj, (tuple, list)):
            if not any(_lazy(o) for o in obj):
                return obj
            import dask

            return type(obj)(self.compute(dask.delayed(list)(list(obj)), progress=progress))
        if not _lazy(obj):
            return obj
        with execute.checksums_named():
            return execute.compute_distributed(self.client, obj, progress=progress)

    def each(self, func: Callable[[Any], Any], items: list) -> list:
        raise RuntimeError("A distributed runner runs blocks on its workers, through a graph (this is a bug).")

    def prepare(self, a: Any, limit: int | None = None) -> Any:
        """Numpy input scattered to the workers once, block by block; lazy
        input of at most ``limit`` bytes (default :data:`PERSIST_BYTES`)
        persisted in the workers' memory; larger lazy input streams."""
        a = as_array(a)
        if _is_dask(a) and a.nbytes > (PERSIST_BYTES if limit is None else limit):
            return a
        return self.persist(a)

    def persist(self, a: Any, chunk_rows: int | None = None) -> Any:
        import dask
        import dask.array as da

        a = as_array(a)
        if _is_dask(a):
            if execute._on_scattered(a):
                # already in the workers' memory (e.g. a nested KMeans seeding DC): results computed from
                # scattered blocks and held as futures could not be recomputed once lost with a worker,
                # while this graph still can after the blocks are sent again (execute._rescatter_lost)
                return a
            return self.client.persist(a, optimize_graph=False)
        rows = chunk_rows or _auto_rows(a)
        slices = _row_slices(a.shape[0], 1, rows)
        blocks = [a[sl] for sl in slices]
        futures = self.client.scatter(blocks, hash=True)  # keys from the bytes: a re-scatter recreates them
        execute._remember_scattered(futures, blocks)
        pieces = [da.from_delayed(dask.delayed(f), shape=(sl.stop - sl.start,) + a.shape[1:], dtype=a.dtype)
                  for f, sl in zip(futures, slices, strict=True)]
        return da.concatenate(pieces, axis=0)

    def persist_all(self, arrays: tuple, progress: bool = False) -> tuple:
        from distributed import futures_of

        out = self.client.persist(list(arrays), optimize_graph=False)
        if progress:
            _progress_bar(out)
        execute.wait_futures(self.client, futures_of(out))
        return tuple(out)

    def broadcast(self, value: Any) -> Any:
        if isinstance(value, np.ndarray):
            return self.client.scatter(value, broadcast=True, hash=False)
        return value

    def keep(self, tasks: list, progress: bool = False) -> list:
        blocks = self.client.compute(tasks, optimize_graph=False)
        if progress:
            _progress_bar(blocks)
        execute.wait_futures(self.client, blocks)
        return blocks

    def apply(self, blocks: list, func: Callable[[Any, Any], Any], shared: Any, key: str) -> list:
        arg = self.broadcast(shared)
        futs = [self.client.submit(func, b, arg, key=f"{key}-{i}", pure=False) for i, b in enumerate(blocks)]
        try:
            return self.client.gather(futs)
        finally:
            for f in futs:
                f.release()
            if arg is not shared:
                arg.release()

    def release(self, blocks: list) -> None:
        for f in blocks:
            f.release()

    def loop_budget(self) -> int:
        """An eighth of the smallest worker's memory limit, at most
        :data:`IN_PROCESS_MAX_BYTES` (the in-process rule, on a worker)."""
        workers = list(self.client.scheduler_info().get("workers", {}).values())
        if not workers:
            return 0
        limits = [int(w.get("memory_limit") or 0) or 8 * IN_PROCESS_MAX_BYTES for w in workers]
        return int(min(IN_PROCESS_MAX_BYTES, min(limits) // 8))

    def files_shared(self) -> bool:
        """True when every worker runs on this machine (127.0.0.1, localhost)."""
        from urllib.parse import urlparse

        hosts = {urlparse(a).hostname for a in self.workers()}
        return bool(hosts) and hosts <= {"127.0.0.1", "localhost", "::1"}

    def run_whole(self, func: Callable[..., Any], *args: Any) -> tuple[Any, str]:
        """``func(*args)`` as one task on a worker, with the worker's own
        threads installed (:class:`InProcess`) for every pass inside it: one
        round trip for the whole loop instead of one per pass. Warnings
        raised there are raised again here; if the worker is lost, the
        scheduler runs the task again elsewhere."""
        import warnings

        with warnings.catch_warnings():  # the data travel inside the task, so that a rerun has them
            warnings.filterwarnings("ignore", message="Sending large graph", category=UserWarning)
            fut = self.client.submit(_run_on_worker, func, args, pure=False)
        try:
            out, caught, where = fut.result()
        finally:
            fut.release()
        for message, category in caught:
            warnings.warn(message, category, stacklevel=4)
        return out, where


def _run_on_worker(func: Callable[..., Any], args: tuple) -> tuple[Any, list, str]:
    """On a worker: ``func(*args)`` with an :class:`InProcess` runner of the
    worker's threads installed; returns the result, the warnings raised
    (message, category) and the worker's address."""
    import warnings

    from distributed import get_worker

    worker = get_worker()
    threads = int(getattr(worker, "nthreads", 0) or 1)
    token = _INSTALLED.set(InProcess(threads, f"the whole call runs on worker {worker.address}"))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = func(*args)
    finally:
        _INSTALLED.reset(token)
    return out, [(str(w.message), w.category) for w in caught], str(worker.address)


def _progress_bar(futures: Any) -> None:
    import sys

    from distributed import progress as dprogress

    with contextlib.redirect_stdout(sys.stderr):  # its text bar writes to stdout, which is for results
        dprogress(futures)


def _lazy(o: Any) -> bool:
    return hasattr(o, "dask") or hasattr(o, "__dask_graph__")


# --------------------------------------------------------------------------
# resolution and placement
# --------------------------------------------------------------------------
#: the runner installed by :func:`installed` in this context (one fit, one predict), if any
_INSTALLED: contextvars.ContextVar[Runner | None] = contextvars.ContextVar("infoclust_runner", default=None)

_SYNC_NAMES = ("sync", "synchronous", "single-threaded")


def _named_default() -> Runner | None:
    """The runner named by the environment: ``$DASK_SCHEDULER_ADDRESS`` or
    the active ``distributed.Client``; None when nothing is named."""
    address = os.environ.get("DASK_SCHEDULER_ADDRESS")
    if address:
        return Distributed(_scheduler.remote_client(address), "$DASK_SCHEDULER_ADDRESS is set")
    if "distributed" not in sys.modules:  # no client can be active (importing it costs 0.25 s)
        return None
    try:
        from distributed import default_client

        return Distributed(default_client(), "an active distributed.Client")
    except (ImportError, ValueError):  # no distributed client is active
        return None


def _configured_local() -> InProcess:
    """dask's configured scheduler (``dask.config.set(scheduler=...)``) when
    it names one thread; this process' threads otherwise."""
    import dask

    name = dask.config.get("scheduler", None)
    if isinstance(name, str) and name.lower() in _SYNC_NAMES:
        return InProcess(1, "dask.config scheduler='synchronous'")
    return InProcess(None, "no scheduler named")


def resolve_scheduler(scheduler: Any = None) -> Runner:
    """Turn a ``scheduler=`` argument into a :class:`Runner` (see the module
    docstring); ``None`` is the runner :func:`installed` around this call,
    if any."""
    if isinstance(scheduler, Runner):
        return scheduler
    if scheduler is None:
        current = _INSTALLED.get()
        if current is not None:
            return current
        return _named_default() or _configured_local()
    if isinstance(scheduler, str):
        s = scheduler.strip()
        low = s.lower()
        if low in _SYNC_NAMES:
            return InProcess(1, "scheduler='sync' named")
        if low in ("threads", "threading", "threaded"):
            return InProcess(None, "scheduler='threads' named")
        if low in ("local", "distributed", "localcluster"):
            return Distributed(_scheduler.local_client(), "scheduler='local' named")
        if low.startswith(_scheduler.ADDRESS_PREFIXES):
            return Distributed(_scheduler.remote_client(s), "a scheduler address named")
        raise ValueError(
            f"Unknown scheduler {scheduler!r}. Use None, 'sync', 'threads', 'local' "
            "(a LocalCluster), an address such as 'tcp://127.0.0.1:8786', or a "
            "distributed.Client."
        )
    if hasattr(scheduler, "scheduler") and hasattr(scheduler, "compute"):
        return Distributed(scheduler, "a distributed.Client named")
    address = getattr(scheduler, "scheduler_address", None)
    if isinstance(address, str) and address.startswith(_scheduler.ADDRESS_PREFIXES):  # a Cluster object
        return Distributed(_scheduler.remote_client(address), "a dask cluster named")
    raise TypeError(
        f"scheduler must be None, a string, a distributed.Client or a dask cluster (with a scheduler_address); "
        f"got {type(scheduler).__name__}."
    )


def current_runner() -> Runner | None:
    """The runner installed by the enclosing :func:`installed` block, if any."""
    return _INSTALLED.get()


def data_bytes(data: Any) -> tuple[int, bool]:
    """``(bytes, lazy)`` of a fit's input: numpy, dask, xarray (a Dataset's
    variables summed), a zarr array or a store path (opened lazily by the
    caller); anything else counts as small numpy."""
    if data is None:
        return 0, False
    if isinstance(data, (list, tuple)):
        return int(np.asarray(data, dtype=object).size * 8), False
    arr = getattr(data, "data", data) if type(data).__module__.startswith("xarray.") else data
    if type(data).__module__.startswith("xarray.") and hasattr(data, "data_vars"):  # a Dataset
        vars_ = list(data.data_vars.values())
        lazy = any(_is_dask(v.data) for v in vars_)
        return int(sum(v.nbytes for v in vars_)), lazy
    if type(arr).__module__.startswith("zarr"):
        return int(getattr(arr, "nbytes", 0)), True
    nbytes = float(getattr(arr, "nbytes", 0) or 0)  # NaN for unknown chunk sizes: the fit says so
    return (int(nbytes) if np.isfinite(nbytes) else 0), _is_dask(arr)


def place(scheduler: Any, nbytes: int, lazy: bool) -> Runner:
    """The one placement rule: a named scheduler (argument, environment,
    active client, enclosing call) is honoured; otherwise numpy input runs
    where it already is, in this process, and lazy input of at most
    :func:`in_process_budget` bytes is read into this process; larger lazy
    input goes to the shared LocalCluster."""
    if scheduler is not None or _INSTALLED.get() is not None:
        return resolve_scheduler(scheduler)
    named = _named_default()
    if named is not None:
        return named
    configured = _configured_local()
    if configured.threads == 1 or not lazy:
        if not lazy:
            configured.reason = "numpy input: already in this process' memory"
        return configured
    budget = in_process_budget()
    if nbytes <= budget:
        return InProcess(None, f"{_size(nbytes)} of lazy input fit the in-process budget of {_size(budget)} "
                               "(1/8 of the available memory, at most 1 GiB; $INFOCLUST_IN_PROCESS_BYTES)")
    return Distributed(_scheduler.local_client(),
                       f"{_size(nbytes)} of lazy input exceed the in-process budget of {_size(budget)}: a "
                       "LocalCluster on this machine")


def runner_for(scheduler: Any, data: Any) -> Runner:
    """:func:`place` for ``data`` (numpy, dask, xarray, a zarr array)."""
    return place(scheduler, *data_bytes(data))


@contextlib.contextmanager
def installed(scheduler: Any = None, *, data: Any = None, nbytes: tuple[int, bool] | None = None
              ) -> Iterator[Runner]:
    """Choose the runner once and install it for the ``with`` block: every
    engine call inside that is given no scheduler of its own runs on it.
    With ``data`` (or its ``nbytes = (bytes, lazy)``), a ``None`` scheduler
    is placed by :func:`place`; without, resolved by
    :func:`resolve_scheduler`. Blocks nest (the inner one wins until it
    ends) and belong to one thread or task (a ``contextvars`` variable).
    Yields the :class:`Runner`."""
    if nbytes is None and data is not None:
        nbytes = data_bytes(data)
    runner = place(scheduler, *nbytes) if nbytes is not None else resolve_scheduler(scheduler)
    token = _INSTALLED.set(runner)
    try:
        yield runner
    finally:
        _INSTALLED.reset(token)


def compute(obj: Any, *, scheduler: Any = None, progress: bool = False) -> Any:
    """Compute one dask object (array or delayed), or a tuple / list of them,
    on the resolved runner. Non-dask objects come back as they are. A chunk
    whose bytes fail their CRC-32C raises
    :class:`~infoclust_dask.engine.ChecksumError`."""
    return resolve_scheduler(scheduler).compute(obj, progress=progress)
