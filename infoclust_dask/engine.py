"""The map-reduce engine: the only module that builds dask graphs.

:func:`map_reduce` applies a pure-numpy block kernel (``infoclust_dask._kernels``)
to aligned row blocks of its inputs and tree-reduces the dicts of partial sums
in one ``compute``. :func:`map_blocks` does the same without the reduction, for
per-sample outputs (labels), lazily when the input is a dask array.

Inputs may be numpy arrays, dask arrays, xarray DataArrays or the path of a
store written by :func:`infoclust_dask.store.write_dataset` (its ``x``).

Schedulers (``scheduler=``):

``None`` (default)
    the scheduler at ``DASK_SCHEDULER_ADDRESS`` if that variable is set, else
    the active ``distributed.Client`` if there is one, else local threads.
``"sync"``
    one thread, block after block (debugging, exact reproducibility).
``"threads"``
    a local thread pool (numpy releases the GIL in the heavy parts).
``"local"`` / ``"distributed"``
    a ``distributed.LocalCluster`` on this machine, started on first use and
    shared by every later call (2 single-threaded worker processes by default).
``"tcp://host:port"``
    an existing dask scheduler; clients are cached per address (connection
    timeout ``$INFOCLUST_CONNECT_TIMEOUT``, default 20 s).
a ``distributed.Client``
    used as it is.

Small parameters (prototypes, count tables) are placed in the graph once, as
one key every block task depends on, not copied into each task.
"""

from __future__ import annotations

import atexit
import inspect
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ._kernels import combine_sum

__all__ = [
    "map_reduce",
    "map_blocks",
    "build_reduction",
    "fold_blocks",
    "n_blocks",
    "as_array",
    "resolve_scheduler",
    "local_client",
    "persist",
    "compute",
    "n_rows",
    "is_lazy",
    "take_rows",
    "persist_if_small",
    "tall_svd",
    "knn",
    "DEFAULT_BLOCK_BYTES",
]

#: target size of a numpy row block (bytes of float64 data)
DEFAULT_BLOCK_BYTES = 4 * 2**20

_LOCK = threading.Lock()
_LOCAL = {"cluster": None, "client": None}
_REMOTE: dict[str, Any] = {}
_POOL: list = []


def _thread_pool() -> ThreadPoolExecutor:
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
        cluster = LocalCluster(
            n_workers=n,
            threads_per_worker=threads_per_worker,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            silence_logs=logging.WARNING,
        )
        client = Client(cluster, set_as_default=False)
        _LOCAL["cluster"], _LOCAL["client"] = cluster, client
        return client


def close_local_client():
    """Stop the on-demand LocalCluster, if one was started."""
    with _LOCK:
        client, cluster = _LOCAL["client"], _LOCAL["cluster"]
        _LOCAL["client"] = _LOCAL["cluster"] = None
    # persisted data still held at exit is expected; don't warn that it is "lost"
    logging.getLogger("distributed.scheduler").setLevel(logging.ERROR)
    if client is not None:
        client.close()
    if cluster is not None:
        cluster.close()


atexit.register(close_local_client)


def _remote_client(address: str):
    with _LOCK:
        client = _REMOTE.get(address)
        if client is not None and client.status == "running":
            return client
        from distributed import Client

        try:
            timeout = os.environ.get("INFOCLUST_CONNECT_TIMEOUT", "20s")
            client = Client(address, set_as_default=False, timeout=timeout)
        except OSError as exc:
            raise ConnectionError(
                f"Could not connect to the dask scheduler at {address!r}: {exc}. "
                "Start one (`dask scheduler`) or pass scheduler='local' for a "
                "LocalCluster on this machine."
            ) from exc
        _REMOTE[address] = client
        return client


_ADDRESS_PREFIXES = ("tcp://", "tls://", "inproc://", "ucx://", "ws://", "wss://")


def resolve_scheduler(scheduler=None) -> Scheduler:
    """Turn a ``scheduler=`` argument into a :class:`Scheduler` (see module doc)."""
    if isinstance(scheduler, Scheduler):
        return scheduler
    if scheduler is None:
        address = os.environ.get("DASK_SCHEDULER_ADDRESS")
        if address:
            return Scheduler("distributed", _remote_client(address))
        try:
            from distributed import default_client

            return Scheduler("distributed", default_client())
        except (ImportError, ValueError):
            return Scheduler("threads")
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
    raise TypeError(
        f"scheduler must be None, a string or a distributed.Client; got {type(scheduler).__name__}."
    )


# --------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------
def _is_dask(a) -> bool:
    return type(a).__module__.startswith("dask.") and hasattr(a, "chunks")


def is_lazy(a) -> bool:
    """True for dask arrays (and DataArrays backed by them)."""
    return _is_dask(getattr(a, "data", a))


def as_array(data, *, variable: str = "x"):
    """Numpy or dask array behind ``data`` (numpy, dask, xarray, store path).

    For a path, ``variable`` names the store variable to read lazily.
    Dask arrays must have known chunk sizes and be chunked along rows only;
    columns are brought into one chunk.
    """
    if data is None:
        return None
    if isinstance(data, (str, Path)):
        from .store import open_dataset

        ds = open_dataset(data)
        if variable not in ds:
            raise KeyError(
                f"The store {str(data)!r} has no variable {variable!r}; it holds "
                f"{sorted(ds.data_vars)}."
            )
        data = ds[variable]
    if type(data).__module__.startswith("xarray."):
        data = data.data
    if _is_dask(data):
        if any(np.isnan(c) for cs in data.chunks for c in cs):
            raise ValueError(
                "The dask array has unknown chunk sizes (NaN in .chunks), so its "
                "blocks cannot be aligned. Call `x.compute_chunk_sizes()` first."
            )
        if data.ndim == 2 and len(data.chunks[1]) > 1:
            data = data.rechunk({1: -1})
        return data
    return np.asarray(data)


def n_rows(a) -> int:
    return int(a.shape[0])


def _array_slices(a, block_rows=None):
    """The row blocks of a numpy input: ~4 MB of float64 each by default."""
    return _row_slices(a.shape[0], 8 * int(np.prod(a.shape[1:], dtype=np.int64) or 1), block_rows)


def _row_slices(n, row_bytes, block_rows=None):
    if block_rows is None:
        block_rows = max(256, DEFAULT_BLOCK_BYTES // max(8, row_bytes))
    return [slice(i, min(i + block_rows, n)) for i in range(0, n, block_rows)] or [slice(0, 0)]


def _wants_start(kernel) -> bool:
    try:
        return "start" in inspect.signature(kernel).parameters
    except (TypeError, ValueError):
        return False


def _apply(kernel, wants_start, start, params, *blocks):
    if wants_start:
        return kernel(*blocks, start=start, **params)
    return kernel(*blocks, **params)


def _apply_block(kernel, wants_start, start, *blocks_and_params):
    *blocks, params = blocks_and_params
    return _apply(kernel, wants_start, start, params, *blocks)


def _tree(parts, combine, split_every, delayed=None):
    while len(parts) > 1:
        groups = [parts[i : i + split_every] for i in range(0, len(parts), split_every)]
        if delayed is None:
            parts = [combine(g) if len(g) > 1 else g[0] for g in groups]
        else:
            parts = [delayed(combine, pure=True)(g) if len(g) > 1 else g[0] for g in groups]
    return parts[0]


def _align(arrays):
    """Dask arrays aligned on the first one's row chunks (None kept)."""
    import dask.array as da

    lead = next(a for a in arrays if a is not None)
    if not _is_dask(lead):
        lead = da.from_array(lead, chunks=(_auto_rows(lead),) + lead.shape[1:])
    out = []
    for a in arrays:
        if a is None:
            out.append(None)
            continue
        if a.shape[0] != lead.shape[0]:
            raise ValueError(
                f"Inputs must have the same number of rows; got {lead.shape[0]} and "
                f"{a.shape[0]}."
            )
        if not _is_dask(a):
            a = da.from_array(a, chunks=(lead.chunks[0],) + a.shape[1:])
        elif a.chunks[0] != lead.chunks[0]:
            a = a.rechunk({0: lead.chunks[0]})
        if a.ndim == 2 and len(a.chunks[1]) > 1:
            a = a.rechunk({1: -1})
        out.append(a)
    return out


def _auto_rows(a):
    row_bytes = 8 * int(np.prod(a.shape[1:], dtype=np.int64) or 1)
    return max(256, (16 * DEFAULT_BLOCK_BYTES) // row_bytes)


def map_reduce(
    kernel: Callable[..., dict],
    *arrays,
    params: dict | None = None,
    combine: Callable[[list], dict] = combine_sum,
    finalize: Callable[[dict], Any] | None = None,
    scheduler=None,
    split_every: int = 8,
    block_rows: int | None = None,
    progress: bool = False,
):
    """Map ``kernel`` over aligned row blocks of ``arrays``; tree-reduce.

    Parameters
    ----------
    kernel : callable
        ``kernel(*blocks, **params) -> dict`` of numpy partial sums (or any
        objects ``combine`` can merge). If it declares ``start``, it also gets
        the global index of the block's first row.
    *arrays : array-like or None
        Row-aligned inputs (numpy, dask, xarray, store path). ``None`` is
        passed through to the kernel (e.g. absent sample weights).
    params : dict, optional
        Small parameters, placed once in the graph.
    combine : callable, default=:func:`~infoclust_dask._kernels.combine_sum`
        Merges a list of partial results; must be associative.
    finalize : callable, optional
        Applied to the reduced dict on the worker before it is returned.
    scheduler : see module docstring.
    split_every : int, default=8
        Fan-in of the reduction tree.
    block_rows : int, optional
        Row block size for numpy inputs (default ~4 MB per block).
    progress : bool, default=False
        Show a progress bar for dask inputs.

    Returns
    -------
    dict
        The reduced partial sums (``finalize`` applied if given).

    Notes
    -----
    One ``compute`` per call; empty blocks are skipped. The result equals the
    in-memory computation up to float64 round-off for any chunking.
    """
    params = dict(params or {})
    arrays = [as_array(a) for a in arrays]
    if not arrays or arrays[0] is None:
        raise ValueError("map_reduce needs at least one array as its first input.")
    sched = resolve_scheduler(scheduler)
    wants_start = _wants_start(kernel)
    lazy = any(_is_dask(a) for a in arrays if a is not None)

    if not lazy and sched.kind in ("sync", "threads"):
        lead = arrays[0]
        for a in arrays[1:]:
            if a is not None and a.shape[0] != lead.shape[0]:
                raise ValueError(
                    f"Inputs must have the same number of rows; got {lead.shape[0]} and "
                    f"{a.shape[0]}."
                )
        slices = _array_slices(lead, block_rows)

        def run(sl):
            blocks = [None if a is None else a[sl] for a in arrays]
            return _apply(kernel, wants_start, sl.start, params, *blocks)

        if sched.kind == "sync" or len(slices) == 1:
            parts = [run(sl) for sl in slices]
        else:
            parts = list(_thread_pool().map(run, slices))
        result = _tree(parts, combine, split_every)
        return finalize(result) if finalize is not None else result

    result = build_reduction(kernel, *arrays, params=params, combine=combine, finalize=finalize,
                             split_every=split_every)
    return compute(result, scheduler=sched, progress=progress)


def _block_starts(chunks):
    """Global index of the first row of each block (and the total at the end)."""
    return np.concatenate([[0], np.cumsum(chunks)]).astype(int)


def _block_tasks(kernel, arrays, params):
    """``(n_rows, delayed kernel call)`` for every row block of the aligned
    inputs, all depending on ONE key that holds ``params``."""
    import dask

    wants_start = _wants_start(kernel)
    aligned = _align([as_array(a) for a in arrays])
    lead = aligned[0]
    starts = _block_starts(lead.chunks[0])
    block_lists = [
        None if a is None else a.to_delayed(optimize_graph=True).reshape(-1) for a in aligned
    ]
    p = dask.delayed(dict(params or {}), pure=True, traverse=False)
    apply_d = dask.delayed(_apply_block, pure=True)
    for i, size in enumerate(lead.chunks[0]):
        blocks = [None if bl is None else bl[i] for bl in block_lists]
        yield int(size), apply_d(kernel, wants_start, int(starts[i]), *blocks, p)


def build_reduction(kernel, *arrays, params=None, combine=combine_sum, finalize=None, split_every=8):
    """The lazy (``dask.delayed``) graph of :func:`map_reduce` for array inputs.

    One task per non-empty row block, all depending on ONE key that holds
    ``params``; a tree of ``combine`` tasks with fan-in ``split_every``.
    """
    import dask

    parts = [d for size, d in _block_tasks(kernel, arrays, params) if size > 0]
    if not parts:
        raise ValueError("All blocks of the input are empty (0 rows); nothing to reduce.")
    result = _tree(parts, combine, split_every, delayed=dask.delayed)
    if finalize is not None:
        result = dask.delayed(finalize, pure=True)(result)
    return result


def compute(obj, *, scheduler=None, progress: bool = False):
    """Compute one dask object (array or delayed), or a tuple / list of them,
    on the resolved scheduler."""
    sched = resolve_scheduler(scheduler)
    if isinstance(obj, (tuple, list)):
        if not any(is_lazy(o) or hasattr(o, "dask") for o in obj):
            return obj
        import dask

        return type(obj)(compute(dask.delayed(list)(list(obj)), scheduler=sched, progress=progress))
    if not is_lazy(obj) and not hasattr(obj, "dask"):
        return obj
    if sched.kind == "distributed":
        fut = sched.client.compute(obj)
        if progress:
            from distributed import progress as dprogress

            dprogress(fut)
        return fut.result()
    import dask

    scheduler_name = "sync" if sched.kind == "sync" else "threads"
    if progress:
        from dask.diagnostics import ProgressBar

        with ProgressBar():
            return dask.compute(obj, scheduler=scheduler_name)[0]
    return dask.compute(obj, scheduler=scheduler_name)[0]


def _fold_step(kernel, wants_start, start, state, params, *blocks):
    if wants_start:
        return kernel(state, *blocks, start=start, **params)
    return kernel(state, *blocks, **params)


def fold_blocks(kernel, *arrays, state, params=None, order=None, scheduler=None):
    """Thread a small ``state`` through the row blocks, one after another.

    ``kernel(state, *blocks, **params) -> new state`` runs where the block is
    (a chain of tasks: block i's task depends on block i-1's result), so a
    sequential on-line algorithm streams over data of any size while only
    the state travels. ``order`` permutes the blocks (e.g. shuffled per
    epoch). One ``compute`` per call; returns the final state.
    """
    params = dict(params or {})
    arrays = [as_array(a) for a in arrays]
    wants_start = _wants_start(kernel)
    sched = resolve_scheduler(scheduler)
    lazy = any(_is_dask(a) for a in arrays if a is not None)
    if not lazy and sched.kind in ("sync", "threads"):
        lead = arrays[0]
        slices = _array_slices(lead)
        for i in (range(len(slices)) if order is None else order):
            sl = slices[i]
            state = _fold_step(kernel, wants_start, sl.start, state, params,
                               *[None if a is None else a[sl] for a in arrays])
        return state
    import dask

    aligned = _align(arrays)
    lead = aligned[0]
    starts = _block_starts(lead.chunks[0])
    block_lists = [None if a is None else a.to_delayed(optimize_graph=True).reshape(-1) for a in aligned]
    p = dask.delayed(params, pure=True, traverse=False)
    step = dask.delayed(_fold_step, pure=True)
    out = dask.delayed(state, pure=True, traverse=False)
    for i in (range(len(lead.chunks[0])) if order is None else order):
        if lead.chunks[0][i] == 0:
            continue
        out = step(kernel, wants_start, int(starts[i]), out, p, *[None if bl is None else bl[i] for bl in block_lists])
    return compute(out, scheduler=sched)


def n_blocks(data, block_rows=None) -> int:
    """Number of row blocks :func:`map_reduce` / :func:`fold_blocks` use."""
    a = as_array(data)
    if _is_dask(a):
        return len(a.chunks[0])
    return len(_array_slices(a, block_rows))


def map_blocks(
    kernel: Callable[..., np.ndarray],
    *arrays,
    params: dict | None = None,
    dtype=np.float64,
    trailing_shape: tuple = (),
    block_rows: int | None = None,
):
    """Per-row output of ``kernel`` over aligned row blocks.

    Returns a numpy array for numpy inputs and a lazy dask array (one task per
    block, parameters as one shared key) for dask inputs. The kernel returns
    an array of shape ``(n_block,) + trailing_shape``.
    """
    params = dict(params or {})
    arrays = [as_array(a) for a in arrays]
    wants_start = _wants_start(kernel)
    if not any(_is_dask(a) for a in arrays if a is not None):
        lead = arrays[0]
        outs = []
        for sl in _array_slices(lead, block_rows):
            blocks = [None if a is None else a[sl] for a in arrays]
            outs.append(np.asarray(_apply(kernel, wants_start, sl.start, params, *blocks)))
        return np.concatenate(outs, axis=0).astype(dtype, copy=False)

    import dask.array as da

    pieces = [
        da.from_delayed(d, shape=(size,) + tuple(trailing_shape), dtype=dtype)
        for size, d in _block_tasks(kernel, arrays, params)
    ]
    return da.concatenate(pieces, axis=0)


#: inputs up to this size are loaded into memory before many-pass fits (crossval cells, bootstrap replicates)
PERSIST_BYTES = 512 * 2**20


def persist_if_small(data, *, scheduler=None, limit: int | None = None, variable: str = "x"):
    """:func:`persist` the array behind ``data`` when it is at most ``limit``
    bytes (default :data:`PERSIST_BYTES`); otherwise return it lazily, so
    that passes stream it from the store with bounded memory."""
    a = as_array(data, variable=variable)
    if a.nbytes <= (PERSIST_BYTES if limit is None else limit):
        return persist(a, scheduler=scheduler)
    return a


def persist(data, *, scheduler=None, chunk_rows: int | None = None):
    """Load ``data`` into the memory of the scheduler's workers (or into this
    process for local schedulers) and return a dask array over it.

    For a ``distributed`` scheduler numpy data are scattered block by block,
    not embedded in the graph.
    """
    import dask
    import dask.array as da

    sched = resolve_scheduler(scheduler)
    a = as_array(data)
    if sched.kind != "distributed":
        if _is_dask(a):
            return a.persist(scheduler="sync" if sched.kind == "sync" else "threads")
        return da.from_array(a, chunks=(chunk_rows or _auto_rows(a),) + a.shape[1:])
    client = sched.client
    if _is_dask(a):
        return client.persist(a)
    rows = chunk_rows or _auto_rows(a)
    slices = _row_slices(a.shape[0], 1, rows)
    futures = client.scatter([a[sl] for sl in slices])
    pieces = [
        da.from_delayed(dask.delayed(f), shape=(sl.stop - sl.start,) + a.shape[1:], dtype=a.dtype)
        for f, sl in zip(futures, slices, strict=True)
    ]
    return da.concatenate(pieces, axis=0)


def _take_block(x, keep):
    return x[np.asarray(keep, dtype=bool)]


def take_rows(data, keep, *, scheduler=None, variable: str = "x"):
    """The rows of ``data`` where ``keep`` is true, without copying the data.

    ``keep`` is a boolean vector (numpy or dask) with one entry per row, e.g.
    ``fold != f`` from a stored fold vector. For numpy data the result is a
    numpy array. For dask / xarray / store data it is a lazy dask array with
    *known* chunk sizes: one small pass over ``keep`` counts the kept rows per
    block (``keep`` is a byte per row, ``x`` is not read), and each output
    block selects its rows from the matching input block only when computed.
    """
    import dask.array as da

    a = as_array(data, variable=variable)
    if not _is_dask(a):
        k = np.asarray(keep.compute(scheduler="sync") if _is_dask(keep) else keep)
        if k.shape != (a.shape[0],):
            raise ValueError(f"keep must have one entry per row ({a.shape[0]}); got shape {k.shape}.")
        return a[k.astype(bool, copy=False)]
    keep = as_array(keep)
    if keep.shape != (a.shape[0],):
        raise ValueError(f"keep must have one entry per row ({a.shape[0]}); got shape {keep.shape}.")
    if not _is_dask(keep):
        keep = da.from_array(np.asarray(keep, dtype=bool), chunks=(a.chunks[0],))
    elif keep.chunks[0] != a.chunks[0]:
        keep = keep.rechunk({0: a.chunks[0]})
    keep = keep.astype(bool)
    counts = compute(keep.map_blocks(lambda b: np.array([np.count_nonzero(b)]), chunks=((1,) * keep.numblocks[0],),
                                     dtype=np.int64), scheduler=scheduler)
    pieces = [da.from_delayed(task, shape=(int(cnt),) + a.shape[1:], dtype=a.dtype)
              for (_, task), cnt in zip(_block_tasks(_take_block, [a, keep], {}), counts, strict=True) if cnt]
    if not pieces:
        raise ValueError("No rows are kept (keep is all false).")
    return da.concatenate(pieces, axis=0)


def tall_svd(data, *, center=None, scheduler=None, variable: str = "x"):
    """Singular values and right singular vectors of a tall-and-skinny array.

    Uses dask's out-of-core direct TSQR SVD (``dask.array.linalg.svd``: a QR
    per row block, then one small QR and SVD of the stacked R factors), so no
    process ever holds more than one block. ``center`` (a row vector, e.g. the
    column means) is subtracted lazily first. Returns ``(s, vt)`` as numpy
    arrays of shapes ``(d,)`` and ``(d, d)``; the left factor is not formed.
    """
    import dask.array as da

    a = as_array(data, variable=variable)
    if not _is_dask(a):
        a = da.from_array(a, chunks=(max(_auto_rows(a), a.shape[1]),) + a.shape[1:])
    if center is not None:
        a = a - np.asarray(center)[None, :]
    a = a.astype(np.float64)
    d = a.shape[1]
    small = [c for c in a.chunks[0] if c < d]
    if small:  # TSQR needs blocks at least as tall as they are wide
        rows = max(d, max(a.chunks[0]))
        a = a.rechunk({0: rows})
    _, s, vt = da.linalg.svd(a)
    s, vt = compute((s, vt), scheduler=scheduler)
    return np.asarray(s), np.asarray(vt)


#: rows per block of the kNN search (a query block meets every data block)
KNN_BLOCK_ROWS = 16384


def knn(data, t, *, scheduler=None, variable: str = "x", split_every: int = 8, block_rows: int | None = None):
    """The ``t`` nearest neighbours of every row (never itself), block
    against block: each row block is compared with every block
    (:func:`~infoclust_dask._kernels.knn_block`) and the partial lists are
    merged in a tree (:func:`~infoclust_dask._kernels.knn_merge`), so no
    task holds more than two blocks and a ``(block, t)`` list. Blocks larger
    than ``block_rows`` (default :data:`KNN_BLOCK_ROWS`) are split, so even a
    store with a few large chunks gives (n / block_rows)^2 tasks to share
    among the workers.

    Returns ``(dist2, index)`` of shape ``(n, t)``, sorted by distance: numpy
    arrays for numpy input, lazy dask arrays (one block per row block) for
    dask / xarray / store input.
    """
    from functools import partial

    import dask
    import dask.array as da

    from ._kernels import knn_block, knn_merge

    a = as_array(data, variable=variable)
    t = int(t)
    if not 1 <= t < a.shape[0]:
        raise ValueError(f"t must be between 1 and n_samples - 1 = {a.shape[0] - 1}; got {t}.")
    lazy = _is_dask(a)
    # at least 4 blocks when possible, so the (block, block) pairs keep every worker busy
    rows = max(int(block_rows or min(KNN_BLOCK_ROWS, -(-a.shape[0] // 4))), t + 1)
    if not lazy:
        a = da.from_array(np.asarray(a, dtype=np.float64), chunks=(rows,) + a.shape[1:])
    elif max(a.chunks[0]) > rows:
        a = a.rechunk({0: rows})
    blocks = a.to_delayed().ravel()
    starts = _block_starts(a.chunks[0])[:-1]
    merge = partial(knn_merge, t=t)
    d_parts, i_parts = [], []
    for qb, qs, qn in zip(blocks, starts, a.chunks[0], strict=True):
        parts = [dask.delayed(knn_block, pure=True)(qb, db, q_start=int(qs), d_start=int(ds), t=t)
                 for db, ds in zip(blocks, starts, strict=True)]
        res = _tree(parts, merge, split_every, delayed=dask.delayed)
        d_parts.append(da.from_delayed(res[0], shape=(qn, t), dtype=np.float64))
        i_parts.append(da.from_delayed(res[1], shape=(qn, t), dtype=np.int64))
    d2, idx = da.concatenate(d_parts), da.concatenate(i_parts)
    if lazy:
        return d2, idx
    d2, idx = compute((d2, idx), scheduler=scheduler if scheduler is not None else "threads")
    return np.asarray(d2), np.asarray(idx)
