"""Where a fit runs: the one module that decides. A ``scheduler=`` (or,
when none is named, the data's size) becomes one runner per fit
(``predict``, ``score``, ...) here - :func:`resolve_scheduler` for a named
scheduler through the registry :data:`NAMED_RUNNERS`, :func:`place` for the
placement rule, :func:`installed` / :func:`entry_point` to install the
choice for a call - and the runner records why it was chosen
(``Runner.reason``, an estimator's ``runner_["reason"]``). Every pass below
asks the installed runner, never a scheduler name. The runner kinds
(:mod:`.runner`: the protocol):

:class:`InProcess`
    this process, on the compiled kernels; numpy blocks are run directly
    (no dask graph per pass), on one thread (``"sync"``) or a small pool
    (``"threads"``); lazy input that fits :func:`in_process_budget` is read
    into memory once, by :meth:`Runner.prepare`.
:class:`Distributed`
    a ``distributed`` scheduler: the shared :func:`~infoclust_dask.engine.clients.local_client`
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
    an existing dask scheduler (see :mod:`infoclust_dask.engine.clients` for the
    connection's deadline).
a ``distributed.Client`` / a dask cluster object
    used as it is / a client of its ``scheduler_address``.

A scheduler named by argument, by ``$DASK_SCHEDULER_ADDRESS`` or by an
active client is always honoured; the data decide only where nothing is
named.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import sys
from collections.abc import Iterator
from typing import Any, Callable

import numpy as np

from . import clients, execute
from .blocks import _is_dask
from .cluster_runner import Distributed
from .in_process import IN_PROCESS_MAX_BYTES, InProcess, in_process_budget
from .runner import _INSTALLED, Runner, _size

__all__ = ["Runner", "InProcess", "Distributed", "resolve_scheduler", "installed", "place", "in_process_budget",
           "compute", "runner_for", "data_bytes", "IN_PROCESS_MAX_BYTES", "entry_point", "NAMED_RUNNERS",
           "whole_call", "check_task"]

# --------------------------------------------------------------------------
# resolution and placement
# --------------------------------------------------------------------------

_SYNC_NAMES = ("sync", "synchronous", "single-threaded")


def _named(names: tuple[str, ...], make: Any) -> dict[str, Any]:
    return dict.fromkeys(names, make)


#: the registry of scheduler names: each name (and its aliases) makes its runner, with the reason it records
NAMED_RUNNERS: dict[str, Any] = {
    **_named(_SYNC_NAMES, lambda: InProcess(1, "scheduler='sync' named")),
    **_named(("threads", "threading", "threaded"), lambda: InProcess(None, "scheduler='threads' named")),
    **_named(("local", "distributed", "localcluster"),
             lambda: Distributed(clients.local_client(), "scheduler='local' named")),
}


def _named_default() -> Runner | None:
    """The runner named by the environment: ``$DASK_SCHEDULER_ADDRESS`` or
    the active ``distributed.Client``; None when nothing is named."""
    address = os.environ.get("DASK_SCHEDULER_ADDRESS")
    if address:
        return Distributed(clients.remote_client(address), "$DASK_SCHEDULER_ADDRESS is set")
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
        if low in NAMED_RUNNERS:
            return NAMED_RUNNERS[low]()
        if low.startswith(clients.ADDRESS_PREFIXES):
            return Distributed(clients.remote_client(s), "a scheduler address named")
        raise ValueError(
            f"Unknown scheduler {scheduler!r}. Use None, 'sync', 'threads', 'local' "
            "(a LocalCluster), an address such as 'tcp://127.0.0.1:8786', or a "
            "distributed.Client."
        )
    if hasattr(scheduler, "scheduler") and hasattr(scheduler, "compute"):
        return Distributed(scheduler, "a distributed.Client named")
    address = getattr(scheduler, "scheduler_address", None)
    if isinstance(address, str) and address.startswith(clients.ADDRESS_PREFIXES):  # a Cluster object
        return Distributed(clients.remote_client(address), "a dask cluster named")
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
    if configured.parallel_blocks() == 1 or not lazy:
        if not lazy:
            configured.reason = "numpy input: already in this process' memory"
        return configured
    budget = in_process_budget()
    if nbytes <= budget:
        return InProcess(None, f"{_size(nbytes)} of lazy input fit the in-process budget of {_size(budget)} "
                               "(1/8 of the available memory, at most 1 GiB; $INFOCLUST_IN_PROCESS_BYTES)")
    return Distributed(clients.local_client(),
                       f"{_size(nbytes)} of lazy input exceed the in-process budget of {_size(budget)}: a "
                       "LocalCluster on this machine")


def whole_call(runner: Runner, sizes: Callable[[], list[int | None]], *, folder_given: bool = False,
               folder_is_url: bool = False, max_bytes: int | None = None) -> tuple[int, int] | None:
    """The rule for running a whole call (a fit's loop) as one task on a
    worker of ``runner`` (:meth:`Runner.run_whole`): ``(bytes, budget)``
    when the runner has a loop budget (:meth:`Runner.loop_budget`: a
    distributed scheduler), every argument can travel (``sizes()``: bytes of
    each, None for one that cannot, e.g. lazy input of unknown shape; asked
    only once the runner has a budget - measuring may open a store),
    together within the budget, and a run folder (``folder_given``) is one
    the workers see (an object store, or workers on this machine); None:
    the call runs here, pass by pass. ``max_bytes``: the caller's own cap
    on the budget (a call whose few passes are heavy loses more by taking
    one worker's threads instead of the cluster's than it saves in round
    trips). Never changes the model."""
    budget = runner.loop_budget()
    if max_bytes is not None:
        budget = min(budget, int(max_bytes))
    if budget <= 0:
        return None
    if folder_given and not (folder_is_url or runner.files_shared()):
        return None
    measured = sizes()
    if any(n is None for n in measured):
        return None
    total = int(sum(n for n in measured if n is not None))
    return (total, budget) if total <= budget else None


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
    outermost = _INSTALLED.get() is None
    token = _INSTALLED.set(runner)
    try:
        if outermost:  # the driver's products too: one BLAS thread, the same bits everywhere (execute.one_blas_thread)
            with execute.one_blas_thread():
                yield runner
        else:
            yield runner
    finally:
        _INSTALLED.reset(token)


def entry_point(func: Any = None, *, data_here: tuple[str, ...] = ()) -> Any:
    """Written on a public function that takes ``scheduler=``: the runner it
    names is chosen once and installed (:func:`installed`) for the whole
    call, so the passes and the helpers inside ask that runner and no
    internal function carries ``scheduler=``. ``scheduler=None`` installs
    nothing: an enclosing call's runner, else the default, as for any pass.

    ``data_here`` names arguments holding the call's data: when none of
    those given is lazy, the data live in this process and its passes run
    here, on threads, whatever scheduler is named (a store written from
    numpy arrays is written from this process; its path need not be
    reachable from the workers).
    """
    if func is None:
        return functools.partial(entry_point, data_here=data_here)
    sig = inspect.signature(func)
    if "scheduler" not in sig.parameters:
        raise TypeError(f"{func.__qualname__} takes no scheduler= argument; entry_point installs its runner.")

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        given = sig.bind_partial(*args, **kwargs).arguments
        scheduler = given.get("scheduler")
        if data_here and not any(given.get(n) is not None and _is_dask(getattr(given[n], "data", given[n]))
                                 for n in data_here):
            scheduler = "threads"
        if scheduler is None:
            return func(*args, **kwargs)
        with installed(scheduler):
            return func(*args, **kwargs)

    return wrapper


def compute(obj: Any, *, scheduler: Any = None, progress: bool = False) -> Any:
    """Compute one dask object (array or delayed), or a tuple / list of them,
    on the resolved runner. Non-dask objects come back as they are. A chunk
    whose bytes fail their CRC-32C raises
    :class:`~infoclust_dask.engine.ChecksumError`."""
    return resolve_scheduler(scheduler).compute(obj, progress=progress)


def check_task(nbytes: int, what: str, fix: str) -> None:
    """Refuse, before a pass starts, one task of about ``nbytes`` that no
    worker of the resolved runner can take (:meth:`Runner.check_task`: a
    :class:`~infoclust_dask.engine.WorkerMemoryError` naming ``what``, the
    memory limit that would do, and ``fix``); nothing is refused in this
    process."""
    resolve_scheduler(None).check_task(int(nbytes), what, fix)
