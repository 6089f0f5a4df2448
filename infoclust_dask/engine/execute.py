"""Computing on a distributed scheduler (:func:`compute_distributed`: one
call per pass, retried after re-sending scattered blocks lost with a
worker), the registry of scattered blocks that makes the retry possible,
chunk checksum errors named, and one BLAS thread while dask's threads run
kernels in this process. The runners (:mod:`.choose`) call these."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from .._support.unreachable import NoWorkerReachesStorage, StorageUnreachable
from .pressure import Watch, WorkerMemoryError


class ChecksumError(ValueError):
    """A chunk read by a pass failed its stored CRC-32C: its bytes are not
    those written (a damaged disk or object, a partial copy)."""


@contextlib.contextmanager
def checksums_named() -> Iterator[None]:
    """Turn zarr's "Stored and computed checksum do not match" raised in
    the block into a :class:`ChecksumError` that says what it means."""
    try:
        yield
    except ValueError as exc:
        if "checksum do not match" not in str(exc) or isinstance(exc, ChecksumError):
            raise
        raise ChecksumError(
            "A chunk of the input data failed its CRC-32C check: its bytes are not those written (zarr: "
            f"{exc}). Nothing was computed from it. `infoclust verify STORE` lists the damaged chunks; "
            "re-ingest the store from its source.") from None


def compute_distributed(client: Any, obj: Any, *, progress: bool = False, held: int = 0) -> Any:
    """``obj`` computed on a distributed ``client``: a pass whose scattered
    blocks were lost with a worker is retried after they are sent again
    (:func:`_rescatter_lost`); one a worker could not read because the
    object store did not answer it is run again without that worker
    (:func:`around_unreachable`); a pass left without workers ends in
    :class:`NoWorkersError`, one whose workers are out of memory in
    :class:`~.pressure.WorkerMemoryError` (``held``: bytes of data the
    fit holds on the workers, for its message)."""
    return around_unreachable(client, lambda place: _compute(client, obj, place, progress, held))


_SET_UP_LOCK = threading.Lock()
_SET_UP: set = set()  # (id of a client, its scheduler's address) whose workers got the plugin


def set_up_workers(client: Any) -> None:
    """Register :class:`~.worker_setup.LargeBlocks` with ``client``'s
    scheduler, once per client: every worker, and every worker that joins
    later, fixes its mmap threshold before it runs a pass (3.5-4x faster
    kernels that allocate product tiles under the nanny's
    ``MALLOC_TRIM_THRESHOLD_``, :mod:`.worker_setup`). A scheduler that
    does not answer is left alone here: the pass that follows reports it
    with the engine's own message."""
    key = (id(client), _address(client))
    with _SET_UP_LOCK:
        if key in _SET_UP:
            return
        from .worker_setup import LargeBlocks

        try:
            client.register_plugin(LargeBlocks())
        except (OSError, TimeoutError):  # (distributed's CommClosedError is an OSError)
            return
        _SET_UP.add(key)


def _compute(client: Any, obj: Any, place: dict, progress: bool, held: int) -> Any:
    watch = Watch(held)  # one across the attempts: workers dying near their limit count however often it retries
    for attempt in range(RESCATTER_ATTEMPTS + 1):
        fut = client.compute(obj, optimize_graph=False, **place)
        if progress:
            from .._support.progress import futures_progress

            futures_progress([fut], graph_of=obj)  # stderr: a bar on a terminal, else plain lines
        try:
            return result(client, fut, watch)
        except Exception as exc:
            if isinstance(exc, StorageUnreachable):
                # forgotten before the pass is sent again without that worker: the scheduler would otherwise
                # hand the same erred keys back at once (release and resubmission travel in order)
                fut.release()
                raise
            if isinstance(exc, (NoWorkersError, WorkerMemoryError)):
                raise
            if type(exc).__name__ == "KilledWorker" or "cancel" in type(exc).__name__.lower():
                watch.see(_worker_info(client))  # a worker gone since the last look (raises if that settles it)
            memory = watch.killed(exc)
            if memory is not None:
                raise memory from None
            # the scheduler cut off ends the pass cancelled or with the client's own connection error
            # (distributed's CommClosedError, an OSError, around "TimeoutError: [Errno 110] Connection timed out"),
            # whichever of the client's comms notices first: the same message either way (a CI run on the hosts)
            cancelled = "cancel" in type(exc).__name__.lower()
            if (cancelled or isinstance(exc, (OSError, TimeoutError))) and not _scheduler_alive(client):
                raise _stopped_answering(client, ", which was cancelled" if cancelled else
                                         f" ({type(exc).__name__})") from None
            if attempt == RESCATTER_ATTEMPTS or not _SCATTERED:
                raise
            if not cancelled and not _lost_keys(client):
                raise  # an error of the pass itself
            # let the scheduler notice the dead worker first: blocks re-sent before it does may be
            # placed on that worker and lost again (seen on a loaded machine)
            import time

            time.sleep(min(8.0, 0.5 * 2 ** attempt))
            if not _rescatter_lost(client):
                raise
    raise AssertionError("unreachable")


#: seconds a worker that could not reach the object store is left out of the passes, then tried again
#: ($INFOCLUST_UNREACHABLE_PAUSE)
UNREACHABLE_PAUSE = 120.0
#: times a pass is sent again when its error is one the scheduler kept from before (:func:`around_unreachable`)
STALE_ATTEMPTS = 4
_AVOIDED_LOCK = threading.Lock()
_AVOIDED: dict = {}  # scheduler address -> {worker address: time.monotonic() until which it is left out}


def avoided(client: Any) -> set:
    """Workers of ``client``'s scheduler left out of the passes now: they
    could not reach the object store less than :data:`UNREACHABLE_PAUSE`
    seconds ago."""
    import time

    now = time.monotonic()
    with _AVOIDED_LOCK:
        table = _AVOIDED.get(_address(client), {})
        for w in [w for w, until in table.items() if until <= now]:
            del table[w]
        return set(table)


def placement(client: Any) -> dict:
    """Keyword arguments of ``compute``/``persist`` that keep the tasks off
    the :func:`avoided` workers (none when no worker is avoided). Where a
    task runs never changes its result: the passes reduce in a fixed order."""
    out = avoided(client)
    if not out:
        return {}
    others = sorted(_workers(client) - out)
    return {"workers": others, "allow_other_workers": False} if others else {}


def around_unreachable(client: Any, run: Any) -> Any:
    """``run(placement)`` - a pass, or holding input on the workers - run
    again without each worker whose read of a store raised
    :class:`~infoclust_dask._support.unreachable.StorageUnreachable` (one that
    cannot reach the object store while the others can: a firewall, a route,
    its own network), each left out for :data:`UNREACHABLE_PAUSE` seconds
    with one line on the package logger. Bounded: when every worker has
    failed so (the store is down, or the endpoint is wrong everywhere), one
    line names them all. The model is the same whichever workers read."""
    import gc
    import logging
    import time

    from .._support.settings import env_number

    pause = float(env_number("INFOCLUST_UNREACHABLE_PAUSE", UNREACHABLE_PAUSE, seconds=True))
    failed: list = []
    stale = 0
    while True:
        try:
            return run(placement(client))
        except StorageUnreachable as exc:
            if isinstance(exc, NoWorkerReachesStorage):
                raise
            if exc.worker in failed:
                if exc.worker not in avoided(client):
                    raise
                # The run just sent was kept off that worker, so its error is an old one: the scheduler keeps a
                # failed task while results of this client still hold blocks computed from it, and hands its error
                # back for the same key. Seen in tests/hosts: futures of blocks an earlier fit of the same store held,
                # kept alive by a reference cycle until Python's collector ran. Collected, and sent again a
                # bounded number of times; then one line saying so.
                if stale == STALE_ATTEMPTS:
                    raise StorageUnreachable(exc.worker, (
                        f"{exc.args[1]}; the scheduler handed back this failed read although the fit was sent "
                        "without this worker: it keeps a failed task while results of this client still hold "
                        "blocks computed from it (an earlier fit of the same store): release them, or let this "
                        "worker reach the object store, then fit again")) from None
                stale += 1
                logging.getLogger("infoclust_dask").debug(
                    "the scheduler handed back the old error of dask worker %s; sending the run again (%d of %d)",
                    exc.worker, stale, STALE_ATTEMPTS)
                gc.collect()
                time.sleep(0.5 * 2 ** stale)
                continue
            failed.append(exc.worker)
            with _AVOIDED_LOCK:
                _AVOIDED.setdefault(_address(client), {})[exc.worker] = time.monotonic() + pause
            left = sorted(_workers(client) - avoided(client))
            if not left:
                raise NoWorkerReachesStorage(", ".join(failed), (
                    f"no dask worker of the scheduler at {_address(client)} could read the store (each tried: "
                    f"{', '.join(failed)}); the last said: {exc.args[1]}")) from None
            logging.getLogger("infoclust_dask").warning(
                "dask worker %s could not reach the object store; its reads run on the other %d worker(s), "
                "and it is left out for %.0f s", exc.worker, len(left), pause)


def wait_futures(client: Any, futures: Any, held: int = 0) -> None:
    """Wait until every future is done (their data stay where they are),
    watched as :func:`result` watches a pass; raise the first error."""
    futures = list(futures)
    finished = threading.Event()  # set once every future is done (distributed.wait needs a default client)
    left = [len(futures)]
    lock = threading.Lock()

    def one_done(_):
        with lock:
            left[0] -= 1
            if left[0] <= 0:
                finished.set()

    if not futures:
        finished.set()
    for f in futures:
        f.add_done_callback(one_done)

    def done(timeout):
        return finished.wait(timeout), None

    def cancel():
        for f in futures:
            f.cancel()

    _watched(client, done, cancel, Watch(held))
    for f in futures:
        if f.status == "error":
            f.result()


class NoWorkersError(RuntimeError):
    """The scheduler of a pass has had no worker for longer than
    :data:`NO_WORKER_TIMEOUT`, or stopped answering: the pass cannot finish."""


#: seconds a pass waits on a scheduler without any worker before it gives up ($INFOCLUST_NO_WORKER_TIMEOUT)
NO_WORKER_TIMEOUT = 120.0


def _address(client: Any) -> str:
    return str(getattr(client.scheduler, "address", None) or client.scheduler)


def _workers(client: Any) -> set:
    """Addresses of the scheduler's workers now (:func:`_worker_info`)."""
    return set(_worker_info(client))


def _worker_info(client: Any) -> dict:
    """Every worker's ``scheduler_info`` entry (status, memory limit,
    metrics), by address, asked of the scheduler now.

    Not ``client.scheduler_info()``: it refreshes the client's cached
    identity and returns the cache, which the client's own periodic poll
    (every ``distributed.client.scheduler-info-interval``, 2 s, asking for no
    workers) may overwrite in between - an empty ``workers`` dict about once
    in 20 calls at a 5 ms interval here, and the cause of a flaky test on a
    loaded machine (issue 61). An empty answer made the whole-fit budget 0
    (the fit ran pass by pass), the held-data budget 0 (the store streamed)
    and the pressure watch take every worker for gone. The scheduler's
    ``identity`` handler, asked directly as distributed's own
    documentation of ``scheduler_info`` advises, has no such cache."""
    try:
        return dict(client.sync(client.scheduler.identity, n_workers=-1)["workers"])
    except Exception:  # noqa: BLE001 - unreachable in any way
        raise _stopped_answering(client) from None


def _stopped_answering(client: Any, how: str = "") -> NoWorkersError:
    """The one error of a pass whose scheduler stopped answering (``how``:
    what the pass saw, after "during a pass")."""
    return NoWorkersError(f"The dask scheduler at {_address(client)} stopped answering during a pass{how}. Start it "
                          "again (and its workers); a fit with a run folder continues with --resume.")


#: seconds a scheduler has to answer whether it is there, after a pass ended with a connection error
SCHEDULER_ANSWER_TIMEOUT = 20.0


def _scheduler_alive(client: Any) -> bool:
    """Whether the client is connected and its scheduler answers within
    :data:`SCHEDULER_ANSWER_TIMEOUT` (a scheduler cut off drops packets
    silently: an unbounded question could wait for TCP's own timeout)."""
    if client.status != "running":
        return False
    try:
        client.sync(client.scheduler.identity, n_workers=0, callback_timeout=SCHEDULER_ANSWER_TIMEOUT)
        return True
    except Exception:  # noqa: BLE001 - unreachable in any way
        return False


def result(client: Any, fut: Any, watch: Any = None) -> Any:
    """``fut.result()``, watched every 2 s (:func:`_watched`)."""

    # waited on through a done-callback, then read once: distributed's result(timeout=...) can lose its value
    # when the timeout races the result under load (UnboundLocalError in distributed.utils.sync)
    finished = threading.Event()
    fut.add_done_callback(lambda _: finished.set())

    def done(timeout):
        if not finished.wait(timeout):
            return False, None
        return True, fut.result()

    return _watched(client, done, fut.cancel, watch if watch is not None else Watch())


def _watched(client: Any, done: Any, cancel: Any, watch: Any) -> Any:
    """Call ``done(2.0)`` - ``(finished, value)`` - until it finishes, and
    between calls look at the workers: a pass left without any worker for
    :data:`NO_WORKER_TIMEOUT` seconds (every worker killed, none coming
    back) ends in :class:`NoWorkersError` naming the scheduler and the
    workers it had, and workers out of memory (paused, restarted in a loop:
    :class:`~.pressure.Watch`) in :class:`~.pressure.WorkerMemoryError`,
    instead of waiting forever; ``cancel()`` first."""
    import time

    from .._support.settings import env_number

    limit = float(env_number("INFOCLUST_NO_WORKER_TIMEOUT", NO_WORKER_TIMEOUT, seconds=True))
    seen = _workers(client)
    alone_since = None
    while True:
        finished, value = done(2.0)
        if finished:
            return value
        info = _worker_info(client)
        try:
            watch.see(info)
        except MemoryError:
            cancel()
            raise
        now = set(info)
        seen |= now
        if now:
            alone_since = None
            continue
        alone_since = alone_since or time.monotonic()
        if time.monotonic() - alone_since >= limit:
            cancel()
            lost = ", ".join(sorted(seen)) or "none had joined"
            raise NoWorkersError(
                f"The dask scheduler at {_address(client)} has had no worker for {limit:.0f} s (workers lost: "
                f"{lost}), so the pass cannot finish. Start workers (`dask worker {_address(client)}`) and run "
                "again - a fit with a run folder continues with --resume - or set INFOCLUST_NO_WORKER_TIMEOUT "
                "to wait longer.")


_BLAS: list = []


def one_blas_thread(scheduler_name: str = "threads") -> Any:
    """While a fit or a pass runs in this process, each BLAS / OpenMP call
    uses one thread: two dask threads on two cores must not each start two
    BLAS threads, and a matrix product summed by two threads may round
    otherwise than by one (OpenBLAS splits a long inner dimension), while
    a fit must give the same bits whatever runs it (the same-answer
    contract, ``docs/conventions.md``) - on ``"sync"`` too. Worker processes
    of a ``distributed`` cluster get the same from their nanny
    (``OMP_NUM_THREADS=1`` etc. in ``distributed.nanny.pre-spawn-environ``);
    the compiled kernels start no threads at all. ``scheduler_name`` is
    kept for callers of earlier releases; every name limits."""
    from threadpoolctl import ThreadpoolController

    if not _BLAS:
        # the compiled kernels' products call scipy's BLAS (numba's np.dot): loaded before the controller looks,
        # or its threads would not be limited (a script that imports the engine only: two dask threads then ran
        # two OpenBLAS threads each, a Lloyd step over 2e5 x 128 rows, k = 1024, 2.7x slower than one thread)
        import scipy.linalg.cython_blas  # noqa: F401 - loaded for the controller to find

        _BLAS.append(ThreadpoolController())
    return _BLAS[0].limit(limits=1)

#: times a pass is retried after re-sending scattered blocks lost with a worker
RESCATTER_ATTEMPTS = 5
_SCATTERED_LOCK = threading.Lock()
_SCATTERED: dict = {}  # key -> [driver's block, live futures, future of a re-send]


def _remember_scattered(futures, blocks):
    """Keep the driver's copy of every scattered block (views of the caller's
    array, no copies) while a future of it lives, so that blocks lost with a
    worker can be sent again (:func:`_rescatter_lost`)."""
    import weakref

    for f, b in zip(futures, blocks, strict=True):
        with _SCATTERED_LOCK:
            entry = _SCATTERED.setdefault(f.key, [b, 0, None])  # block, live futures, re-sent future
            entry[1] += 1
        weakref.finalize(f, _forget_scattered, f.key)


def _forget_scattered(key):
    with _SCATTERED_LOCK:
        entry = _SCATTERED.get(key)
        if entry is not None:
            entry[1] -= 1
            if entry[1] <= 0:
                del _SCATTERED[key]


def _on_scattered(a) -> bool:
    """Whether the dask array's graph reads blocks this process scattered."""
    with _SCATTERED_LOCK:
        if not _SCATTERED:
            return False
        keys = set(_SCATTERED)
    return any(k in keys for k in a.__dask_graph__())


def _lost_keys(client) -> list:
    """Remembered scattered blocks that no worker holds."""
    with _SCATTERED_LOCK:
        keys = list(_SCATTERED)
    if not keys:
        return []
    who = client.who_has(keys)
    return [k for k in keys if not who.get(k)]


def _rescatter_lost(client) -> bool:
    """Send again the scattered blocks that no worker holds any more (their
    worker died) under their keys, so the graphs that use them run
    unchanged. Returns whether anything was lost."""
    lost = _lost_keys(client)
    if not lost:
        return False
    with _SCATTERED_LOCK:
        held = {k: _SCATTERED[k][0] for k in lost if k in _SCATTERED}
    lost = list(held)
    import logging

    logging.getLogger("infoclust_dask").warning(
        "%d scattered block(s) were lost with a worker; sending them again from this process", len(lost))
    again = list(client.scatter(held).values())  # under the same keys
    # The scheduler keeps data only while a client future wants it, and the graphs' old futures of these
    # keys were cancelled with the loss: the new futures live in the entry, as long as the old ones do.
    with _SCATTERED_LOCK:
        for f in again:
            if f.key in _SCATTERED:
                _SCATTERED[f.key][2] = f
    return True
