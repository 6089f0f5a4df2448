"""Workers short of memory, seen from the client while a pass runs.

A dask worker near its memory limit does not fail: at 80 % of the limit it
pauses (runs no task, and the pass waits), at 95 % its nanny kills and
restarts it (the task runs again, maybe to be killed again), and after a
task's workers died three times the scheduler gives up with
``KilledWorker`` that says nothing about memory. :class:`Watch` reads the
workers' state from the scheduler (its public ``scheduler_info``: each
worker's status, memory limit and process memory) every poll of a pass and
turns each of those into one line, within
``$INFOCLUST_MEMORY_PRESSURE_TIMEOUT`` seconds (default
:data:`PRESSURE_TIMEOUT`) of the first sign: what the workers have, what
the fit holds there, and what to change.
"""

from __future__ import annotations

import time

__all__ = ["WorkerMemoryError", "Watch", "PRESSURE_TIMEOUT", "worker_free_bytes", "WORKER_BASE_BYTES",
           "describe_workers", "worker_room_bytes", "limit_to_take", "pause_fraction", "UNLIMITED_WORKER_BYTES",
           "WHOLE_FIT_BASE_BYTES", "worker_capacity_bytes"]

#: seconds a worker may stay paused, or workers may keep being restarted, before the pass ends
PRESSURE_TIMEOUT = 60.0
#: a worker's process memory once it has run this package's passes (distributed, dask, zarr and the
#: compiled kernels loaded: 250-280 MB measured on this machine, benchmarks/worker_memory.py), counted
#: as used when a worker reports less (before its first pass)
WORKER_BASE_BYTES = 280 * 2**20
#: ... and once it has run a whole fit (the estimators, scikit-learn and pandas loaded too: 400 MB
#: measured), for :meth:`~.cluster_runner.Distributed.loop_budget`
WHOLE_FIT_BASE_BYTES = 450 * 2**20
#: what a worker without a memory limit counts for in the placement rule
UNLIMITED_WORKER_BYTES = 2 * 2**30
#: distributed's default fractions of a worker's memory limit (``distributed.worker.memory``)
_TARGET, _PAUSE = 0.60, 0.80

#: how a pass ends when its workers keep dying: dask gave up on a task, or the pass was cancelled because data it
#: needed went with a worker (a scattered block: "already forgotten")
_GAVE_UP = ("KilledWorker", "FutureCancelledError", "CancelledError")

_FIX = ("give each worker more memory (`dask worker --memory-limit`, `deploy/local/up.sh --memory-limit`; a "
        "worker needs about {base} before it holds any data), run fewer threads per worker, let the store stream "
        "from disk instead of being held (INFOCLUST_PERSIST_BYTES=0), or write it with smaller chunks "
        "(`infoclust ingest --chunk-mb`)")


class WorkerMemoryError(MemoryError):
    """The dask workers could not run a pass within their memory limits:
    paused, restarted in a loop, or killed (module notes)."""


def _mb(n: float) -> str:
    return f"{n / 2**20:.0f} MB"


def _used(info: dict) -> int:
    """A worker's process memory now, as the scheduler last reported it (0 when unreported)."""
    return int((info.get("metrics") or {}).get("memory") or 0)


def _headroom(info: dict, fraction: float, base: int, now: bool = True) -> int:
    """``fraction`` of a worker's limit minus its process memory now (at
    least ``base``; only ``base`` when not ``now``), never below 0;
    :data:`UNLIMITED_WORKER_BYTES` without a limit."""
    limit = int(info.get("memory_limit") or 0)
    if not limit:
        return UNLIMITED_WORKER_BYTES
    return max(0, int(fraction * limit) - max(_used(info) if now else 0, int(base)))


def worker_free_bytes(info: dict, base: int = WORKER_BASE_BYTES) -> int:
    """Bytes a worker can still take before distributed starts spilling
    (``target`` fraction of its limit) given its process memory now (at
    least ``base``: what the work to come loads)."""
    return _headroom(info, _TARGET, base)


def worker_capacity_bytes(info: dict, base: int = WORKER_BASE_BYTES) -> int:
    """Bytes a worker of this memory limit can take before distributed
    starts spilling (``target`` fraction of its limit) once its process
    holds ``base``, never below 0; :data:`UNLIMITED_WORKER_BYTES` without a
    limit. The limit only, not the process memory now: a choice made from
    it (:meth:`~.cluster_runner.Distributed.loop_budget`) is the same at
    every call on the same cluster, whatever the workers happen to hold."""
    return _headroom(info, _TARGET, base, now=False)


def pause_fraction() -> float:
    """The fraction of its memory limit at which dask pauses a worker (distributed's default)."""
    return _PAUSE


def worker_room_bytes(info: dict) -> int:
    """Bytes a worker can take before distributed pauses it (``pause``
    fraction of its limit) given its process memory now (at least
    :data:`WORKER_BASE_BYTES`)."""
    return _headroom(info, _PAUSE, WORKER_BASE_BYTES)


def limit_to_take(info: dict, nbytes: int) -> int:
    """The memory limit at which this worker, using what its process uses
    now (at least :data:`WORKER_BASE_BYTES`), could take ``nbytes`` more
    below the pause threshold: the limit :func:`worker_room_bytes` would
    need. From the process memory now, not only the base: workers that
    hold a store were told a limit below the one they had."""
    return int(-(-(int(nbytes) + max(_used(info), WORKER_BASE_BYTES)) // _PAUSE))


def describe_workers(workers: dict) -> str:
    """``2 workers: 500 MB limit each, using 262 and 270 MB``."""
    if not workers:
        return "no workers"
    limits = sorted({int(w.get("memory_limit") or 0) for w in workers.values()})
    used = [_used(w) for w in workers.values()]
    lim = " / ".join(_mb(v) if v else "no" for v in limits)
    return (f"{len(workers)} worker{'s' if len(workers) != 1 else ''}: {lim} memory limit"
            f"{' each' if len(workers) > 1 and len(limits) == 1 else ''}, using "
            + " and ".join(_mb(u) for u in used))


class Watch:
    """The memory state of the workers across the polls of one pass."""

    def __init__(self, held: int = 0, timeout: float | None = None) -> None:
        from .._support.settings import env_number

        self.held = int(held)
        self.timeout = float(timeout if timeout is not None else
                             env_number("INFOCLUST_MEMORY_PRESSURE_TIMEOUT", PRESSURE_TIMEOUT, seconds=True))
        self.paused_since: dict[str, float] = {}
        self.last: dict[str, dict] = {}
        self.died_full: list[tuple[str, int, int]] = []  # (address, last memory seen, limit)
        self.first_death: float | None = None

    def see(self, workers: dict, now: float | None = None) -> None:
        """One poll: ``workers`` as ``scheduler_info()["workers"]``. Raises
        :class:`WorkerMemoryError` when a worker has been paused, or workers
        near their limit have kept dying, for :attr:`timeout` seconds."""
        now = time.monotonic() if now is None else now
        for addr, old in self.last.items():
            if addr not in workers:
                limit = int(old.get("memory_limit") or 0)
                mem = _used(old)
                if limit and mem >= _TARGET * limit:  # it left near its limit: the nanny's kill, most likely
                    self.died_full.append((addr, mem, limit))
                    self.first_death = self.first_death or now
        for addr, w in workers.items():
            if w.get("status") == "paused":
                self.paused_since.setdefault(addr, now)
            else:
                self.paused_since.pop(addr, None)
        self.last = dict(workers)
        paused = {a: t for a, t in self.paused_since.items() if now - t >= self.timeout}
        if paused:
            addr = next(iter(paused))
            w = workers[addr]
            raise WorkerMemoryError(self.message(
                f"worker {addr} has been paused for {now - paused[addr]:.0f} s at "
                f"{_mb(int((w.get('metrics') or {}).get('memory') or 0))} of its "
                f"{_mb(int(w.get('memory_limit') or 0))} limit (dask pauses a worker at "
                f"{_PAUSE:.0%}), so the pass cannot go on", workers))
        if len(self.died_full) >= 2 and self.first_death is not None and now - self.first_death >= self.timeout:
            raise WorkerMemoryError(self.message(self.deaths(), workers))

    def deaths(self) -> str:
        addr, mem, limit = self.died_full[-1]
        return (f"{len(self.died_full)} workers left the cluster near their memory limit (the last, {addr}, at "
                f"{_mb(mem)} of {_mb(limit)}: the nanny restarts a worker at 95 %), so the pass keeps starting over")

    def message(self, what: str, workers: dict) -> str:
        held = f"; the fit holds {_mb(self.held)} of data on the workers" if self.held else ""
        return (f"The dask workers ran out of memory: {what} ({describe_workers(workers or self.last)}{held}). "
                "To fix it: " + _FIX.format(base=_mb(WORKER_BASE_BYTES)) + ".")

    def killed(self, exc: BaseException) -> WorkerMemoryError | None:
        """A ``KilledWorker``, or a pass cancelled because its data went
        with the workers (``FutureCancelledError``: "already forgotten"), as
        a :class:`WorkerMemoryError` when workers were seen leaving near
        their limit (else None: another cause)."""
        if type(exc).__name__ not in _GAVE_UP or not self.died_full:
            return None
        return WorkerMemoryError(self.message(self.deaths() + f"; dask gave up ({exc})", self.last))
