"""The runner protocol: :class:`Runner`, the verbs every pass asks of where
it runs, and the runner installed for the current call. The kinds: this
process (:mod:`.in_process`) and a ``distributed`` scheduler
(:mod:`.cluster_runner`); choosing one - resolving ``scheduler=`` and the
placement rule - is :mod:`.choose`."""

from __future__ import annotations

import abc
import contextvars
from typing import Any, Callable

__all__ = ["Runner"]


def _size(nbytes: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("kiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{int(nbytes)} bytes"


class Runner(abc.ABC):
    """Where the passes of one call run (see the module docstring).
    ``reason`` says why this runner was chosen; what a pass needs to know
    of it is asked by method (:meth:`in_this_process`,
    :meth:`parallel_blocks`), not read from flags."""

    client: Any = None

    def __init__(self, reason: str = "") -> None:
        self.reason = reason
        self.data_notes: list[str] = []  # where prepare() put the call's lazy input (describe's "data")
        self.path_notes: list[str] = []  # which kernel paths the call's passes took, and why (describe's "paths")

    # ----- what it is
    @property
    @abc.abstractmethod
    def kind(self) -> str:  # the scheduler family, for messages and summaries
        """"sync", "threads" or "distributed"."""

    def note_data(self, note: str) -> None:
        """Record where :meth:`prepare` put a fit's lazy input (for :meth:`describe`)."""
        if note not in self.data_notes:
            self.data_notes.append(note)

    def note_path(self, note: str) -> None:
        """Record which path a kernel or a loop took and why (for :meth:`describe`; issue 63)."""
        if note not in self.path_notes:
            self.path_notes.append(note)

    def describe(self) -> dict:
        """``{"runner": str(self), "reason": ...}`` for run summaries,
        ``"data"`` when :meth:`prepare` placed lazy input (where it lives
        for the passes: held in the workers' memory, or streamed), and
        ``"paths"`` when a pass noted the path its kernels took
        (:meth:`note_path`)."""
        out = {"runner": str(self), "reason": self.reason}
        if self.data_notes:
            out["data"] = "; ".join(self.data_notes)
        if self.path_notes:
            out["paths"] = "; ".join(self.path_notes)
        return out

    @abc.abstractmethod
    def in_this_process(self) -> bool:
        """Whether numpy blocks run in this process, without a task graph
        (the passes then call :meth:`each`)."""

    def parallel_blocks(self) -> int:
        """Numpy blocks :meth:`each` runs at once (a reduce pass over a small
        array is cut into at least this many blocks when they stay large)."""
        return 1

    def threads_total(self) -> int:
        """Threads that run this runner's tasks, on all its workers (a task
        alone on the cluster may use several: :func:`~.pairs.partition_pairs`)."""
        return 1

    def slots(self) -> dict[str, tuple[int, int]]:
        """Each worker's address, threads and the bytes it can take now
        (:func:`~.pressure.worker_room_bytes`), for tasks placed on a
        worker by their expected cost (:func:`~.pairs.partition_pairs`);
        empty where the runner places nothing (one process: its threads
        take the tasks in priority order)."""
        return {}

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

    def check_task(self, nbytes: int, what: str, fix: str) -> None:
        """Refuse, before it starts, one task that needs about ``nbytes``
        when no worker can take that much (a :class:`~.pressure.WorkerMemoryError`
        naming ``what`` and ``fix``); in this process nothing is refused. The
        task itself is the same wherever it runs: only whether it can run
        depends on the workers."""
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


def _lazy(o: Any) -> bool:
    """A dask collection (an xarray object backed by numpy is not)."""
    import dask

    return bool(dask.is_dask_collection(o))


#: the runner installed by :func:`~.choose.installed` in this context (one fit, one predict), if any
_INSTALLED: contextvars.ContextVar[Runner | None] = contextvars.ContextVar("infoclust_runner", default=None)
