"""The ``distributed`` runner (:class:`Distributed`): passes as tasks on a
dask cluster's workers, through a ``Client``; numpy input scattered once,
lazy input that fits the workers' memory (:meth:`Distributed.persist_budget`)
held there, larger input streamed from its store at every pass, and a whole
call whose data fit one worker run there as one task."""

from __future__ import annotations

import uuid
from typing import Any, Callable

import numpy as np

from .._support.progress import futures_progress
from . import execute
from .blocks import _auto_rows, _is_dask, _on_blocks, _row_slices, as_array, block_rows_of, misaligned_note
from .in_process import IN_PROCESS_MAX_BYTES, InProcess
from .pressure import UNLIMITED_WORKER_BYTES
from .runner import _INSTALLED, Runner, _lazy, _size

__all__ = ["Distributed", "UNLIMITED_WORKER_BYTES", "SCATTER_KEY_PREFIX"]

#: the keys of numpy blocks scattered by :meth:`Distributed.persist` start with this (then a fresh uuid4)
SCATTER_KEY_PREFIX = "infoclust-block-"


class Distributed(Runner):
    """A ``distributed`` scheduler, through ``client``."""


    def __init__(self, client: Any, reason: str = "") -> None:
        super().__init__(reason)
        self.client = client
        execute.set_up_workers(client)  # once per client: the workers' mmap threshold (execute.set_up_workers)
        #: bytes of lazy input this runner read into the workers' memory (for messages)
        self.held = 0

    @property
    def kind(self) -> str:
        return "distributed"

    def in_this_process(self) -> bool:
        return False

    def __str__(self) -> str:
        return f"distributed ({self.client.scheduler.address})"

    def __repr__(self) -> str:
        return f"Distributed({self.client.scheduler.address!r})"

    def workers(self) -> list[str]:
        return sorted(execute._workers(self.client))

    def threads_total(self) -> int:
        return max(1, sum(int(v) for v in self.client.nthreads().values()))

    def slots(self) -> dict[str, tuple[int, int]]:
        from .pressure import worker_room_bytes

        return {str(a): (max(1, int(w.get("nthreads") or 1)), worker_room_bytes(w))
                for a, w in execute._worker_info(self.client).items() if w.get("status", "running") == "running"}

    def compute(self, obj: Any, *, progress: bool = False) -> Any:
        import dask

        many = isinstance(obj, (tuple, list))
        items = [_unwrap(o) for o in (obj if many else [obj])]
        if not any(_lazy(o) for o in items):
            return obj
        # dask arrays as their blocks (joined here, _assemble); everything in one graph, one compute
        parts = [_blocks(o) if _is_dask(o) and o.ndim >= 1 else o for o in items]
        with execute.checksums_named():
            got = execute.compute_distributed(self.client, dask.delayed(list)(parts), progress=progress,
                                              held=self.held)
        out = [_assemble(o, g) if _is_dask(o) and o.ndim >= 1 else g for o, g in zip(items, got, strict=True)]
        return type(obj)(out) if many else out[0]

    def each(self, func: Callable[[Any], Any], items: list) -> list:
        raise RuntimeError("A distributed runner runs blocks on its workers, through a graph (this is a bug).")

    def prepare(self, a: Any, limit: int | None = None) -> Any:
        """Numpy input scattered to the workers once, block by block; lazy
        input of at most ``limit`` bytes (default :meth:`persist_budget`)
        persisted in the workers' memory; larger lazy input streams."""
        from distributed import futures_of

        a = as_array(a)
        if not _is_dask(a) or futures_of(a):  # numpy, or already in the workers' memory
            return self.persist(a)
        budget = self.persist_budget() if limit is None else limit
        streams = a.nbytes > budget
        self.note_data(f"{_size(a.nbytes)} of lazy input stream from the store at every pass (above the "
                       f"{_size(budget)} the workers hold: half of their free memory)" if streams else
                       f"{_size(a.nbytes)} of lazy input read once and held in the workers' memory (at most "
                       f"{_size(budget)}: half of their free memory)")
        if streams:
            note = misaligned_note(a)
            if note:
                self.note_data(note)
            return a
        self.held += int(a.nbytes)
        return self.persist(a)

    def persist_budget(self) -> int:
        """Bytes of lazy input a many-pass fit holds in the workers' memory,
        read from its store once instead of at every pass:
        ``$INFOCLUST_PERSIST_BYTES`` if set, else half of what the workers
        have free (:func:`~.pressure.worker_free_bytes`: up to distributed's
        spill target, 60 % of a limit, minus what each process uses now - at
        least what a worker uses once the kernels are loaded;
        :data:`UNLIMITED_WORKER_BYTES` for a worker without a limit) and,
        when the workers run on this machine, at most a quarter of the
        memory available on it now. The other half is room for each pass's
        working set. (A quarter of the limits, the rule before, held 100 MB
        on two 400 MB workers that use 260 MB each before holding anything:
        they paused.)"""
        from .._support.settings import env_number

        value = env_number("INFOCLUST_PERSIST_BYTES", None, kind=int, allow_zero=True)
        if value is not None:
            return value
        from .pressure import worker_free_bytes

        workers = execute._worker_info(self.client)  # one round trip: limits, use and addresses
        budget = sum(worker_free_bytes(w) for w in workers.values()) // 2
        if _on_this_machine(workers):
            import psutil

            budget = min(budget, psutil.virtual_memory().available // 4)
        return int(budget)

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
            # held in chunks of whole logical blocks, so that no pass rechunks what the workers hold; read now,
            # so that a worker the object store does not answer is left out while the others read its blocks
            return self.persist_all((_on_blocks(a, block_rows_of(a)) if a.shape[0] else a,))[0]
        _check_room(self.client, int(a.nbytes))
        rows = chunk_rows or _auto_rows(a)
        slices = _row_slices(a.shape[0], rows)
        blocks = [a[sl] for sl in slices]
        # A fresh key per block, never one from its bytes (scatter's hash=True): the same bytes scattered
        # again while the scheduler still releases an earlier scatter's key lose the new copy (a race of
        # distributed, dask/distributed#8576: blocks reported lost with no worker lost; suspected of a pass
        # that never finished in CI). A re-send after a worker loss passes these keys again
        # (execute._rescatter_lost), so the graphs run unchanged.
        keys = [f"{SCATTER_KEY_PREFIX}{uuid.uuid4().hex}" for _ in blocks]
        sent = self.client.scatter(dict(zip(keys, blocks, strict=True)))
        futures = [sent[k] for k in keys]
        execute._remember_scattered(futures, blocks)
        pieces = [da.from_delayed(dask.delayed(f), shape=(sl.stop - sl.start,) + a.shape[1:], dtype=a.dtype)
                  for f, sl in zip(futures, slices, strict=True)]
        return da.concatenate(pieces, axis=0)

    def persist_all(self, arrays: tuple, progress: bool = False) -> tuple:
        from distributed import futures_of

        def hold(place: dict) -> tuple:
            out = self.client.persist(list(arrays), optimize_graph=False, **place)
            if progress:
                futures_progress(out, graph_of=arrays)  # a bar on a terminal, else lines counting the graph's tasks
            try:
                execute.wait_futures(self.client, futures_of(out), self.held)
            except BaseException:
                for f in futures_of(out):  # none of a failed hold stays on the workers
                    f.release()
                raise
            return tuple(out)

        # a worker that cannot reach the object store: its blocks are read by the others
        return execute.around_unreachable(self.client, hold)

    def broadcast(self, value: Any) -> Any:
        if isinstance(value, np.ndarray):
            return self.client.scatter(value, broadcast=True, hash=False)
        return value

    def keep(self, tasks: list, progress: bool = False) -> list:
        def run(place: dict) -> list:
            blocks = self.client.compute(tasks, optimize_graph=False, **place)
            if progress:
                futures_progress(blocks, graph_of=tasks)
            try:
                execute.wait_futures(self.client, blocks, self.held)
            except BaseException:
                self.release(blocks)
                raise
            return blocks

        return execute.around_unreachable(self.client, run)

    def apply(self, blocks: list, func: Callable[[Any, Any], Any], shared: Any, key: str) -> list:
        arg = self.broadcast(shared)
        futs = [self.client.submit(func, b, arg, key=f"{key}-{i}", pure=False) for i, b in enumerate(blocks)]
        try:
            execute.wait_futures(self.client, futs, self.held)  # watched: a paused worker ends it in one line
            return self.client.gather(futs)
        finally:
            for f in futs:
                f.release()
            if arg is not shared:
                arg.release()

    def release(self, blocks: list) -> None:
        for f in blocks:
            f.release()

    def check_task(self, nbytes: int, what: str, fix: str) -> None:
        """Refuse a task of about ``nbytes`` that no worker can take below
        dask's pause threshold after what its process uses
        (:func:`~.pressure.worker_room_bytes`; a worker without a memory
        limit takes anything): run, it would get its worker killed at 95 %
        of the limit, then the next one, until the scheduler gives up."""
        from .pressure import WorkerMemoryError, describe_workers, limit_to_take, worker_room_bytes

        workers = execute._worker_info(self.client)
        if not workers:
            return
        room = max(worker_room_bytes(w) for w in workers.values())
        if nbytes > room:
            need = min(limit_to_take(w, nbytes) for w in workers.values())
            raise WorkerMemoryError(
                f"{what} needs about {_size(nbytes)} in one task, more than any worker can take ({_size(room)} at "
                f"most below dask's pause threshold, after what the process uses; {describe_workers(workers)}). "
                f"To fix it: give a worker a memory limit of at least {_size(need)} (`dask worker --memory-limit`, "
                f"`deploy/local/up.sh --memory-limit`), or {fix}.")

    def loop_budget(self) -> int:
        """An eighth of the smallest worker's room once a whole fit has
        loaded the estimators there (:func:`~.pressure.worker_capacity_bytes`
        with :data:`~.pressure.WHOLE_FIT_BASE_BYTES`: from the memory limit,
        not from what the process holds now; 0 on workers too small for
        that: the fit then runs pass by pass, which loads less), at most
        :data:`IN_PROCESS_MAX_BYTES` (the in-process rule, on a worker).

        From the limits only, so that the same fit on the same cluster runs
        the same way at every call: the rule used to subtract the workers'
        process memory now, and a worker of 1 GB holding 600 MB for a
        moment (another whole fit running there) sent the next fit pass by
        pass - a round trip per pass, queued behind whole fits on one-thread
        workers: the deployment guide's nightly sweep 415 s and weekly
        bootstrap over 950 s in CI (35-42 s and 32-54 s when every fit ran
        whole). Memory short while a fit runs is the pressure watch's
        (:class:`~.pressure.Watch`)."""
        from .pressure import WHOLE_FIT_BASE_BYTES, worker_capacity_bytes

        workers = list(execute._worker_info(self.client).values())
        if not workers:
            return 0
        room = [worker_capacity_bytes(w, WHOLE_FIT_BASE_BYTES) if w.get("memory_limit") else 8 * IN_PROCESS_MAX_BYTES
                for w in workers]
        return int(min(IN_PROCESS_MAX_BYTES, min(room) // 8))

    def files_shared(self) -> bool:
        """True when every worker runs on this machine (127.0.0.1, localhost)."""
        return _on_this_machine(self.workers())

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
        from .pressure import Watch

        watch = Watch()
        try:
            out, caught, where = execute.result(self.client, fut, watch)
        except Exception as exc:
            memory = watch.killed(exc)
            if memory is not None:
                raise memory from None
            raise
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


def _check_room(client: Any, nbytes: int) -> None:
    """Refuse, in one line, numpy input that the workers cannot hold below
    their pause threshold (:func:`~.pressure.worker_room_bytes`): scattering
    it would kill them one after another (the nanny restarts a worker at
    95 % of its limit) and end in "No valid workers found"."""
    from .pressure import Watch, WorkerMemoryError, worker_room_bytes

    workers = execute._worker_info(client)
    room = sum(worker_room_bytes(w) for w in workers.values())
    if workers and nbytes > room:
        raise WorkerMemoryError(Watch().message(
            f"the fit's numpy input ({_size(nbytes)}) is more than the workers can hold ({_size(room)} below the "
            "pause threshold, after what each process uses)", workers))


def _unwrap(o: Any) -> Any:
    """A DataArray backed by dask as its dask array (numpy comes back)."""
    if type(o).__module__.startswith("xarray.") and _is_dask(getattr(o, "data", None)):
        return o.data
    return o


def _blocks(a: Any) -> Any:
    """The blocks of the dask array ``a`` as one delayed list, in C order:
    computed on the workers as they are, and joined in this process
    (:func:`_assemble`). Computing the array itself would send dask.array's
    own ``finalize`` task, and a worker that unpickles it imports
    ``dask.array`` - and with it xarray and pandas (~100 MB of a worker's
    memory) - for a concatenation this process does anyway."""
    import dask

    return dask.delayed(list)(list(a.to_delayed(optimize_graph=False).ravel()))


def _assemble(a: Any, blocks: list) -> Any:
    """The numpy array of ``a``'s computed ``blocks`` (C order)."""
    from dask.array.core import concatenate3

    grid = np.empty(a.numblocks, dtype=object)
    for i, b in enumerate(blocks):
        grid.flat[i] = b
    return concatenate3(grid.tolist())


def _on_this_machine(addresses: Any) -> bool:
    """True when every worker address is on this machine's loopback."""
    from urllib.parse import urlparse

    parsed = [urlparse(a) for a in addresses]
    hosts = {p.hostname for p in parsed if p.scheme != "inproc"}  # inproc://: threads of this very process
    return bool(parsed) and hosts <= {"127.0.0.1", "localhost", "::1"}
