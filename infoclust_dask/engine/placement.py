"""Where the data of a many-pass fit live: :func:`prepare` (read small lazy
input into this process, scatter numpy input to workers, persist small lazy
input there), :func:`persist`, :func:`persist_all` and :func:`take_rows`;
each asks the runner of the call (:mod:`.choose`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..kernels import Pass
from .blocks import _block_tasks, _is_dask, _token, as_array
from .choose import resolve_scheduler

__all__ = ["prepare", "source_of", "streams", "persist", "persist_all", "take_rows"]


# --------------------------------------------------------------------------
# data placement
# --------------------------------------------------------------------------
def prepare(data: Any, *, scheduler: Any = None, limit: int | None = None) -> Any:
    """The one place that decides where the data of a many-pass fit live,
    by asking the runner (:meth:`~.choose.Runner.prepare`):

    - in this process: lazy input that fits the in-process budget (or
      ``limit`` bytes) is read into a numpy array once, so that every later
      pass runs on it without a task graph; numpy input is used in place;
    - on a ``distributed`` scheduler: numpy input is scattered to the
      workers once, block by block; lazy input of at most ``limit`` bytes
      (default: the runner's
      :meth:`~.cluster_runner.Distributed.persist_budget`, half of the
      workers' free memory) is persisted in their memory, read from its
      store once;
    - larger lazy input streams from its store at every pass, with bounded
      memory.

    Lazy input held in the workers' memory is remembered with the graph it
    came from (:func:`source_of`): lazy results of the fit (its labels) are
    built on that graph, so that any scheduler computes them, not only the
    client whose workers hold the copy.
    """
    a = as_array(data)
    out = resolve_scheduler(scheduler).prepare(a, limit)
    if out is not a and _is_dask(a) and _is_dask(out):
        _SOURCES[out.name] = a
        while len(_SOURCES) > _SOURCES_KEPT:
            _SOURCES.pop(next(iter(_SOURCES)))
    return out


#: held copy's name -> the lazy input it was made from (the last few: a graph of reads, small)
_SOURCES: dict = {}
_SOURCES_KEPT = 64


def source_of(data: Any) -> Any:
    """The lazy input a held copy (:func:`prepare`) was made from, else
    ``data`` itself: per-row results built on it (``fit``'s lazy labels)
    compute on any scheduler - the held copy's futures need the client
    that holds them."""
    a = as_array(data)
    return _SOURCES.get(a.name, a) if _is_dask(a) else a


def streams(data: Any, *, scheduler: Any = None) -> bool:
    """Whether every pass over ``data`` (as :func:`prepare` left it) reads
    it from its store again: lazy data that were not held in memory - in
    this process every lazy input that :func:`prepare` kept lazy, on a
    distributed scheduler lazy input whose graph holds no data already on
    the workers (persisted or scattered blocks)."""
    a = as_array(data)
    if not _is_dask(a):
        return False
    if resolve_scheduler(scheduler).in_this_process():
        return True
    from distributed import futures_of

    return not futures_of(a)


def persist(data: Any, *, scheduler: Any = None, chunk_rows: int | None = None) -> Any:
    """Load ``data`` into the memory of the scheduler's workers (or into this
    process for in-process runners) and return a dask array over it.
    Numpy data go to a ``distributed`` scheduler block by block (scattered,
    not embedded in the graph)."""
    return resolve_scheduler(scheduler).persist(as_array(data), chunk_rows)


def persist_all(arrays: Any, *, scheduler: Any = None, progress: bool = False) -> Any:
    """Persist several lazy arrays of one graph together (their shared tasks
    run once), in the workers' memory or, in-process, this process'.
    ``progress`` shows a bar of the tasks done."""
    return resolve_scheduler(scheduler).persist_all(tuple(arrays), progress=progress)


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
        k = np.asarray(resolve_scheduler("sync").compute(keep) if _is_dask(keep) else keep)
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
    tasks = _block_tasks(_TAKE, [a, keep], {}, token, fixed=False)  # a selection: the input's own chunks
    pieces = [da.from_delayed(task, shape=(int(cnt),) + a.shape[1:], dtype=a.dtype)
              for (_, task), cnt in zip(tasks, counts, strict=True) if cnt]
    if not pieces:
        raise ValueError("No rows are kept (keep is all false).")
    return da.concatenate(pieces, axis=0)


def _per_block_counts(keep, scheduler):
    """True entries per chunk of ``keep`` (the chunks :func:`take_rows` selects from)."""
    import dask

    tasks = [dask.delayed(np.count_nonzero, pure=True)(b) for b in keep.to_delayed(optimize_graph=False).reshape(-1)]
    return [int(c) for c in resolve_scheduler(scheduler).compute(dask.delayed(list)(tasks))]
