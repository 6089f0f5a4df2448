"""The runner interface (:class:`Runner`: the verbs every pass asks) and the
runner of this process (:class:`InProcess`), with the in-process budget
(:func:`in_process_budget`). The placement rule and the resolution of a
``scheduler=`` argument are in :mod:`.runners`; the ``distributed`` runner in
:mod:`.cluster_runner`."""

from __future__ import annotations

import abc
import contextlib
import contextvars
import itertools
import os
from typing import Any, Callable

import numpy as np

from .. import _scheduler
from . import execute
from .blocks import _auto_rows, _is_dask, as_array

__all__ = ["Runner", "InProcess", "in_process_budget", "IN_PROCESS_MAX_BYTES"]

#: the in-process budget is at most this many bytes of input (and at most 1/8 of the available memory)
IN_PROCESS_MAX_BYTES = 2**30


def in_process_budget() -> int:
    """Bytes of input a fit with no scheduler named reads into this
    process: ``$INFOCLUST_IN_PROCESS_BYTES`` if set, else an eighth of the
    memory available now, at most :data:`IN_PROCESS_MAX_BYTES` (1 GiB)."""
    from .._support.settings import env_number

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
        self.data_notes: list[str] = []  # where prepare() put the call's lazy input (describe's "data")

    # ----- what it is
    @property
    @abc.abstractmethod
    def kind(self) -> str:  # the scheduler family, for messages and summaries
        """"sync", "threads" or "distributed"."""

    def note_data(self, note: str) -> None:
        """Record where :meth:`prepare` put a fit's lazy input (for :meth:`describe`)."""
        if note not in self.data_notes:
            self.data_notes.append(note)

    def describe(self) -> dict:
        """``{"runner": str(self), "reason": ...}`` for run summaries, and
        ``"data"`` when :meth:`prepare` placed lazy input (where it lives
        for the passes: held in the workers' memory, or streamed)."""
        out = {"runner": str(self), "reason": self.reason}
        if self.data_notes:
            out["data"] = "; ".join(self.data_notes)
        return out

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
                from .._support.progress import dask_progress

                with dask_progress():  # stderr (stdout: results, the CLI's JSON); plain lines when not a terminal
                    out = dask.compute(obj, scheduler=name, optimize_graph=False)[0]
            else:
                out = dask.compute(obj, scheduler=name, optimize_graph=False)[0]
        return type(obj)(out) if isinstance(obj, (tuple, list)) else out

    def each(self, func: Callable[[Any], Any], items: list) -> list:
        if self.threads == 1 or len(items) <= 1:
            return [func(i) for i in items]
        with execute.one_blas_thread():
            return _share(func, items, min(self.threads, len(items)))

    def prepare(self, a: Any, limit: int | None = None) -> Any:
        """Lazy input of at most ``limit`` bytes (default
        :func:`in_process_budget`) read into a numpy array once (later
        passes run on it without a graph); larger lazy input streams from
        its store at every pass; numpy stays as it is."""
        a = as_array(a)
        if not _is_dask(a):
            return a
        budget = in_process_budget() if limit is None else limit
        reads = a.nbytes <= budget
        self.note_data(f"{_size(a.nbytes)} of lazy input read into this process once" if reads else
                       f"{_size(a.nbytes)} of lazy input stream from the store at every pass (above the "
                       f"in-process budget of {_size(budget)})")
        return self._read(a) if reads else a

    def _read(self, a: Any) -> np.ndarray:
        """A lazy array read into one numpy array: each chunk's task writes
        its rows into their place (``dask.array.store``): the peak is the
        array and the chunks in flight, not a second copy joining them
        (``benchmarks/read_into_place.py``)."""
        import dask.array as da

        out = np.empty(a.shape, dtype=a.dtype)
        if a.size:
            self.compute(da.store(a, out, lock=False, compute=False))
        return out


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
            from .._support.progress import dask_progress

            ctx = dask_progress()
        with ctx, execute.checksums_named():
            return tuple(dask.persist(*arrays, scheduler=self._dask_scheduler(), optimize_graph=False))


def _share(func: Callable[[Any], Any], items: list, threads: int) -> list:
    """``[func(i) for i in items]`` on the calling thread and ``threads - 1``
    threads of the pool, each taking the next item as it finishes one: the
    caller works instead of waiting for a pool thread to wake, and never
    more than ``threads`` items run at once (a Lloyd iteration over 1e6 x
    16 rows on 2 threads, against the pool alone: 17.0 -> 15.9 ms float64,
    12.7 -> 11.3 ms float32). The first error stops the others taking
    items and is raised once they have stopped."""
    out: list = [None] * len(items)
    order = itertools.count()  # next() is atomic (one C call under the GIL)
    failed: list[BaseException] = []

    def drain() -> None:
        while not failed:
            i = next(order)
            if i >= len(items):
                return
            try:
                out[i] = func(items[i])
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller below
                failed.append(exc)
                return

    helpers = [_scheduler.thread_pool().submit(drain) for _ in range(threads - 1)]
    drain()
    for h in helpers:  # a helper that never started has nothing left to take (and a busy pool cannot hold us)
        if not h.cancel():
            h.result()
    if failed:
        raise failed[0]
    return out


def _lazy(o: Any) -> bool:
    """A dask collection (an xarray object backed by numpy is not)."""
    import dask

    return bool(dask.is_dask_collection(o))



#: the runner installed by :func:`~.runners.installed` in this context (one fit, one predict), if any
_INSTALLED: contextvars.ContextVar[Runner | None] = contextvars.ContextVar("infoclust_runner", default=None)
