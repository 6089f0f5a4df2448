"""Where the data of a many-pass fit live: :func:`prepare` (scatter numpy
input, persist small lazy input), :func:`persist`, :func:`persist_all` and
:func:`take_rows`."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._scheduler import resolve_scheduler
from ..kernels._common import Pass
from . import execute
from .blocks import _auto_rows, _block_tasks, _is_dask, _row_slices, _token, as_array
from .execute import _on_scattered, _remember_scattered, checksums_named

#: lazy inputs up to this size are loaded into worker memory before a fit
#: (many passes follow); larger ones stream from the store at every pass
PERSIST_BYTES = 512 * 2**20


# --------------------------------------------------------------------------
# data placement
# --------------------------------------------------------------------------
def prepare(data: Any, *, scheduler: Any = None, limit: int | None = None) -> Any:
    """The one place that decides where the data of a many-pass fit live.

    - numpy input on a ``distributed`` scheduler: scattered to the workers
      once, block by block (not shipped with every pass);
    - lazy input of at most ``limit`` bytes (default :data:`PERSIST_BYTES`):
      persisted in the workers' (or, for local schedulers, this process')
      memory, so later passes do not read the store again;
    - anything else is returned as it is: larger lazy input streams from its
      store at every pass with bounded memory, numpy input on local
      schedulers is used in place.
    """
    a = as_array(data)
    sched = resolve_scheduler(scheduler)
    if _is_dask(a):
        if a.nbytes <= (PERSIST_BYTES if limit is None else limit):
            return persist(a, scheduler=sched)
        return a
    if sched.kind == "distributed":
        return persist(a, scheduler=sched)
    return a


def persist(data: Any, *, scheduler: Any = None, chunk_rows: int | None = None) -> Any:
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
            with checksums_named():
                return a.persist(scheduler="sync" if sched.kind == "sync" else "threads", optimize_graph=False)
        return da.from_array(a, chunks=(chunk_rows or _auto_rows(a),) + a.shape[1:])
    client = sched.client
    if _is_dask(a):
        if _on_scattered(a):
            # already in the workers' memory (e.g. a nested KMeans seeding DC): results computed from
            # scattered blocks and held as futures could not be recomputed once lost with a worker,
            # while this graph still can after the blocks are sent again (:func:`_rescatter_lost`)
            return a
        return client.persist(a, optimize_graph=False)
    rows = chunk_rows or _auto_rows(a)
    slices = _row_slices(a.shape[0], 1, rows)
    blocks = [a[sl] for sl in slices]
    futures = client.scatter(blocks, hash=True)  # keys from the bytes: a re-scatter recreates the same keys
    _remember_scattered(futures, blocks)
    pieces = [
        da.from_delayed(dask.delayed(f), shape=(sl.stop - sl.start,) + a.shape[1:], dtype=a.dtype)
        for f, sl in zip(futures, slices, strict=True)
    ]
    return da.concatenate(pieces, axis=0)


def persist_all(arrays: Any, *, scheduler: Any = None, progress: bool = False) -> Any:
    """Persist several lazy arrays of one graph together (their shared tasks
    run once), in the workers' memory or, for local schedulers, this
    process'. ``progress`` shows a bar of the tasks done."""
    import dask

    sched = resolve_scheduler(scheduler)
    arrays = tuple(arrays)
    if sched.kind != "distributed":
        if progress:
            import sys

            from dask.diagnostics import ProgressBar

            with ProgressBar(out=sys.stderr), checksums_named():
                return dask.persist(*arrays, scheduler="sync" if sched.kind == "sync" else "threads",
                                    optimize_graph=False)
        with checksums_named():
            return dask.persist(*arrays, scheduler="sync" if sched.kind == "sync" else "threads",
                                optimize_graph=False)
    out = sched.client.persist(list(arrays), optimize_graph=False)
    from distributed import futures_of

    if progress:
        import contextlib
        import sys

        from distributed import progress as dprogress

        with contextlib.redirect_stdout(sys.stderr):
            dprogress(out)
    _wait_futures(sched.client, futures_of(out))
    return tuple(out)


def _wait_futures(client, futures):
    """Wait until every future is done (their data stay where they are);
    raise the first error."""
    from distributed import as_completed

    for f in as_completed(list(futures), loop=client.loop):
        if f.status == "error":
            f.result()


def _take_block(x, keep):
    return x[np.asarray(keep, dtype=bool)]


_TAKE = Pass("take_rows", _take_block, kind="map", inputs=("x", "keep"))


def take_rows(data: Any, keep: Any, *, scheduler: Any = None) -> Any:
    """The rows of ``data`` where ``keep`` is true, without copying the data.

    ``keep`` is a boolean vector (numpy or dask) with one entry per row, e.g.
    ``fold != f`` from a stored fold vector. For numpy data the result is a
    numpy array. For dask / xarray data it is a lazy dask array with *known*
    chunk sizes: one small pass over ``keep`` counts the kept rows per block
    (``keep`` is a byte per row, ``x`` is not read), and each output block
    selects its rows from the matching input block only when computed.
    """
    import dask.array as da

    a = as_array(data)
    if not _is_dask(a):
        k = np.asarray(execute.compute(keep, scheduler="sync") if _is_dask(keep) else keep)
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
    # per-block counts (combine by concat keeps block order; empty blocks are skipped, so count them all)
    counts = _per_block_counts(keep, scheduler)
    token = _token(_TAKE, {}, [a, keep])
    pieces = [da.from_delayed(task, shape=(int(cnt),) + a.shape[1:], dtype=a.dtype)
              for (_, task), cnt in zip(_block_tasks(_TAKE, [a, keep], {}, token), counts, strict=True) if cnt]
    if not pieces:
        raise ValueError("No rows are kept (keep is all false).")
    return da.concatenate(pieces, axis=0)


def _per_block_counts(keep, scheduler):
    import dask

    from ..kernels.stats import COUNT_TRUE

    token = _token(COUNT_TRUE, {}, [keep])
    tasks = [d for _, d in _block_tasks(COUNT_TRUE, [keep], {}, token)]
    parts = execute.compute(dask.delayed(list)(tasks), scheduler=scheduler)
    return [int(p["n"][0]) for p in parts]
