"""The runner of this process (:class:`InProcess`): numpy blocks run
directly, on one thread or a small pool, and the in-process budget
(:func:`in_process_budget`) of lazy input read into memory."""

from __future__ import annotations

import contextlib
import itertools
import os
from typing import Any, Callable

import numpy as np

from . import clients, execute
from .blocks import _auto_rows, _is_dask, _on_blocks, as_array, block_rows_of, misaligned_note
from .runner import Runner, _lazy, _size

__all__ = ["InProcess", "in_process_budget", "IN_PROCESS_MAX_BYTES"]

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



class InProcess(Runner):
    """This process: ``threads`` = 1 runs block after block on the calling
    thread (``"sync"``); more run numpy blocks on a pool and dask graphs on
    dask's thread scheduler."""

    def __init__(self, threads: int | None = None, reason: str = "") -> None:
        super().__init__(reason)
        self.threads = int(threads or os.cpu_count() or 2)

    def in_this_process(self) -> bool:
        return True

    def parallel_blocks(self) -> int:
        return self.threads

    def threads_total(self) -> int:
        return self.threads

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
        with execute.one_blas_thread():
            if self.threads == 1 or len(items) <= 1:
                return [func(i) for i in items]
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
        if not reads:
            note = misaligned_note(a)
            if note:
                self.note_data(note)
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
                a = _on_blocks(a, block_rows_of(a)) if a.shape[0] else a  # whole logical blocks per chunk
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

    helpers = [clients.thread_pool().submit(drain) for _ in range(threads - 1)]
    drain()
    for h in helpers:  # a helper that never started has nothing left to take (and a busy pool cannot hold us)
        if not h.cancel():
            h.result()
    if failed:
        raise failed[0]
    return out
