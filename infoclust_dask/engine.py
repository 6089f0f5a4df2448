"""The map-reduce engine: the only module that builds dask graphs and computes.

It runs the passes the kernels declare (:class:`~infoclust_dask.kernels.Pass`):

- :func:`map_reduce` (``kind="reduce"``): the chunk kernel over aligned row
  blocks, partial results tree-combined with the pass's combine, one
  ``compute`` per call;
- :func:`map_blocks` (``kind="map"``): one output row per input row, lazily
  for dask input;
- :func:`fold_blocks` (``kind="fold"``): a small state threaded block after
  block (on-line algorithms stream over data of any size);
- :func:`block_pairs`: every query block against every data block, combined
  per query block (all-pairs k nearest neighbours);
- :func:`partition_pairs`: rows split into the parts of a coarse partition,
  each part built and answered where it is gathered, answers sent back to
  the row blocks (the approximate neighbour search).

Inputs are numpy arrays, dask arrays or xarray DataArrays (store paths are
opened one layer up, by :mod:`infoclust_dask._validation`). Small
parameters travel once per call, as one key every block task depends on.
Task keys carry the pass's name and a token of the pass, its parameters and
its inputs (``dc_count_stats-<token>-<block>``), so the dashboard shows what
runs and a key never names two different tasks.

Schedulers are resolved by :mod:`infoclust_dask._scheduler`
(``resolve_scheduler`` is re-exported here). Results do not depend on the
chunking beyond float64 round-off.
"""

from __future__ import annotations

import threading
from functools import partial

import numpy as np

from . import journal
from ._scheduler import Scheduler, close_local_client, local_client, resolve_scheduler, thread_pool
from .kernels._common import Pass, run_chunk, run_fold_step

__all__ = [
    "map_reduce",
    "map_blocks",
    "fold_blocks",
    "block_pairs",
    "partition_pairs",
    "exchange",
    "RowBlocks",
    "generate",
    "build_reduction",
    "n_blocks",
    "as_array",
    "resolve_scheduler",
    "local_client",
    "close_local_client",
    "Scheduler",
    "persist",
    "persist_all",
    "prepare",
    "compute",
    "n_rows",
    "is_lazy",
    "take_rows",
    "DEFAULT_BLOCK_BYTES",
    "PERSIST_BYTES",
    "INLINE_LOAD_BYTES",
]

#: target size of a numpy row block (bytes of float64 data)
DEFAULT_BLOCK_BYTES = 4 * 2**20

#: lazy inputs up to this size are loaded into worker memory before a fit
#: (many passes follow); larger ones stream from the store at every pass
PERSIST_BYTES = 512 * 2**20


# --------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------
def _is_dask(a) -> bool:
    return type(a).__module__.startswith("dask.") and hasattr(a, "chunks")


def is_lazy(a) -> bool:
    """True for dask arrays (and DataArrays backed by them)."""
    return _is_dask(getattr(a, "data", a))


def as_array(data):
    """Numpy or dask array behind ``data`` (numpy, dask or xarray; a
    ``scipy.sparse`` matrix stays sparse, in CSR form, for kernels that take it).

    Dask arrays must have known chunk sizes and be chunked along rows only;
    columns are brought into one chunk.
    """
    if data is None:
        return None
    if isinstance(data, str) or hasattr(data, "__fspath__"):
        raise TypeError(
            f"The engine takes arrays, not paths; got {str(data)!r}. Open the store first "
            "(infoclust_dask.open_dataset(path)['x']) or pass the path to an estimator's fit."
        )
    if type(data).__module__.startswith("xarray."):
        data = data.data
    if hasattr(data, "tocsr") and hasattr(data, "nnz"):  # scipy.sparse: kernels that take it slice its rows
        return data.tocsr()
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


def _auto_rows(a):
    row_bytes = 8 * int(np.prod(a.shape[1:], dtype=np.int64) or 1)
    return max(256, (16 * DEFAULT_BLOCK_BYTES) // row_bytes)


def _check_pass(bp, kind, arrays):
    if not isinstance(bp, Pass):
        raise TypeError(f"The engine runs kernels.Pass blueprints; got {type(bp).__name__}.")
    if bp.kind != kind:
        raise ValueError(f"Pass {bp.name!r} is a {bp.kind!r} pass; it cannot run as {kind!r}.")
    if len(arrays) > len(bp.inputs):
        raise ValueError(f"Pass {bp.name!r} takes the inputs {bp.inputs}; got {len(arrays)} arrays.")
    if not arrays or arrays[0] is None:
        raise ValueError(f"Pass {bp.name!r} needs at least its first input ({bp.inputs[0]!r}).")


def _same_rows(arrays):
    lead = arrays[0]
    for a in arrays[1:]:
        if a is not None and a.shape[0] != lead.shape[0]:
            raise ValueError(
                f"Inputs must have the same number of rows; got {lead.shape[0]} and {a.shape[0]}."
            )


def _align(arrays):
    """Dask arrays aligned on the first one's row chunks (None kept)."""
    import dask.array as da

    _same_rows(arrays)
    lead = arrays[0]
    if not _is_dask(lead):
        lead = da.from_array(lead, chunks=(_auto_rows(lead),) + lead.shape[1:])
    out = []
    for a in arrays:
        if a is None:
            out.append(None)
            continue
        if not _is_dask(a):
            a = da.from_array(a, chunks=(lead.chunks[0],) + a.shape[1:])
        elif a.chunks[0] != lead.chunks[0]:
            a = a.rechunk({0: lead.chunks[0]})
        if a.ndim == 2 and len(a.chunks[1]) > 1:
            a = a.rechunk({1: -1})
        out.append(a)
    return out


def _block_starts(chunks):
    """Global index of the first row of each block (and the total at the end)."""
    return np.concatenate([[0], np.cumsum(chunks)]).astype(int)


def _token(bp, params, arrays, *extra):
    from dask.base import tokenize

    names = [None if a is None else (a.name if _is_dask(a) else tokenize(a)) for a in arrays]
    return tokenize(bp.name, bp.chunk, params, names, *extra)


# --------------------------------------------------------------------------
# graph building (dask.delayed with named keys)
# --------------------------------------------------------------------------
#: a reduce pass's block task loads its input blocks itself when the
#: recipe for a block (the store read, a slice, a dtype cast) is smaller
#: than this; above it the graph carries data (``da.from_array`` of a numpy
#: array) and the block stays a task of its own
INLINE_LOAD_BYTES = 64 * 2**10


class _Load:
    """The recipe of one input block, run inside the task that uses it:
    ``graph`` (culled to that block, no futures) and its output ``key``.

    A reduce pass whose block task depends on a separate load task keeps the
    loaded block (tens of MB) as a task result between the two; run inside
    the task, the block lives only while its kernel runs (measured in
    ``docs/BENCHMARKS.md``, issue-17 section)."""

    __slots__ = ("graph", "key")

    def __init__(self, graph, key):
        self.graph, self.key = graph, key

    def __call__(self):
        import dask

        return dask.get(self.graph, self.key)  # dask's synchronous scheduler, in this task's thread


def _call_block(bp, start, params, *blocks):
    blocks = [b() if isinstance(b, _Load) else b for b in blocks]
    return run_chunk(bp, start, blocks, params)


def _keyed_blocks(aligned):
    """Per aligned input, its row blocks as delayed keys of its unoptimized
    graph (``None`` stays ``None``)."""
    return [None if a is None else a.to_delayed(optimize_graph=False).reshape(-1) for a in aligned]


def _inline_loads(aligned, keyed):
    """Per input, one :class:`_Load` per block (``keyed``: the blocks as
    delayed keys, from :func:`_keyed_blocks`: unfused, so shared tasks stay
    visible), or ``None`` when the blocks must stay keys
    of the graph: an input holding futures (persisted data must be fetched
    by the scheduler), a block recipe holding data (more than
    :data:`INLINE_LOAD_BYTES`), or recipes that share a task (across blocks
    or inputs: a source chunk that two blocks need, or one input derived
    from another, would be read twice)."""
    from dask.core import istask
    from dask.optimization import cull
    from dask.sizeof import sizeof
    from distributed import futures_of

    if any(futures_of(a) for a in aligned if a is not None):
        return None
    seen = set()
    out = []
    for blocks in keyed:
        if blocks is None:
            out.append(None)
            continue
        full = dict(blocks[0].__dask_graph__()) if len(blocks) else {}
        loads = []
        for d in blocks:
            graph, _ = cull(full, [d.key])
            if sum(sizeof(v) for v in graph.values()) > INLINE_LOAD_BYTES:
                return None
            tasks = {k for k, v in graph.items() if istask(v)}  # constants (the zarr array object) may repeat
            if seen.intersection(tasks):
                return None
            seen.update(tasks)
            loads.append(_Load(graph, d.key))
        out.append(loads)
    return out


def _params_key(bp, params, token):
    import dask

    return dask.delayed(dict(params or {}), pure=True, traverse=False, name=f"{bp.name}-params-{token}")


def _block_tasks(bp, arrays, params, token, inline=False):
    """``(n_rows, delayed chunk call)`` for every row block of the aligned
    inputs, all depending on ONE key that holds ``params``. With ``inline``
    (reduce passes, whose block results are small) each task loads its
    input blocks itself where :func:`_inline_loads` allows it."""
    import dask

    aligned = _align(arrays)
    lead = aligned[0]
    starts = _block_starts(lead.chunks[0])
    block_lists = _keyed_blocks(aligned)
    if inline:
        block_lists = _inline_loads(aligned, block_lists) or block_lists
    p = _params_key(bp, params, token)
    call = dask.delayed(partial(_call_block, bp), pure=True)
    for i, size in enumerate(lead.chunks[0]):
        blocks = [None if bl is None else bl[i] for bl in block_lists]
        yield int(size), call(int(starts[i]), p, *blocks, dask_key_name=f"{bp.name}-{token}-{i}")


def _tree(parts, combine, split_every, delayed=None, name=None):
    level = 0
    while len(parts) > 1:
        groups = [parts[i : i + split_every] for i in range(0, len(parts), split_every)]
        if delayed is None:
            parts = [combine(g) if len(g) > 1 else g[0] for g in groups]
        else:
            parts = [delayed(combine, pure=True)(g, dask_key_name=f"{name}-{level}-{j}") if len(g) > 1 else g[0]
                     for j, g in enumerate(groups)]
        level += 1
    return parts[0]


def build_reduction(bp: Pass, *arrays, params=None, split_every: int = 8):
    """The lazy (``dask.delayed``) graph of :func:`map_reduce` for array inputs.

    One task per non-empty row block, all depending on ONE key that holds
    ``params``; a tree of the pass's combine with fan-in ``split_every``;
    the pass's finalize at the root.
    """
    import dask

    arrays = [as_array(a) for a in arrays]
    _check_pass(bp, "reduce", arrays)
    token = _token(bp, params, arrays, split_every)
    parts = [d for size, d in _block_tasks(bp, arrays, params, token, inline=True) if size > 0]
    if not parts:
        raise ValueError("All blocks of the input are empty (0 rows); nothing to reduce.")
    result = _tree(parts, bp.combine, split_every, delayed=dask.delayed, name=f"{bp.name}-combine-{token}")
    if bp.finalize is not None:
        result = dask.delayed(bp.finalize, pure=True)(result, dask_key_name=f"{bp.name}-finalize-{token}")
    return result


# --------------------------------------------------------------------------
# running passes
# --------------------------------------------------------------------------
def map_reduce(
    bp: Pass,
    *arrays,
    params: dict | None = None,
    scheduler=None,
    split_every: int = 8,
    block_rows: int | None = None,
    progress: bool = False,
):
    """Run a ``kind="reduce"`` pass over aligned row blocks of ``arrays``.

    Parameters
    ----------
    bp : Pass
        The pass: its chunk kernel returns partial results that its combine
        merges (associatively); its finalize, if any, is applied once.
    *arrays : array-like or None
        Row-aligned inputs in the order of ``bp.inputs`` (numpy, dask,
        xarray). ``None`` is passed through to the kernel (e.g. absent
        sample weights).
    params : dict, optional
        Small parameters, placed once in the graph.
    scheduler : see :mod:`infoclust_dask._scheduler`.
    split_every : int, default=8
        Fan-in of the reduction tree.
    block_rows : int, optional
        Row block size for numpy inputs (default ~4 MB per block).
    progress : bool, default=False
        Show a progress bar for dask inputs.

    Returns
    -------
    The combined (and finalized) result.

    Notes
    -----
    One ``compute`` per call; empty blocks are skipped. The result equals the
    in-memory computation up to float64 round-off for any chunking. Inside a
    fit with a checkpoint, results are recorded and, on resume, replayed
    (:mod:`infoclust_dask.journal`).
    """
    params = dict(params or {})
    j = journal.active()
    if j is not None:
        recorded = j.lookup(bp.name, params)
        if recorded is not None:
            return recorded
    result = _map_reduce(bp, arrays, params, scheduler, split_every, block_rows, progress)
    if j is not None:
        j.record(bp.name, params, result)
    return result


def _map_reduce(bp, arrays, params, scheduler, split_every, block_rows, progress):
    arrays = [as_array(a) for a in arrays]
    _check_pass(bp, "reduce", arrays)
    sched = resolve_scheduler(scheduler)
    lazy = any(_is_dask(a) for a in arrays if a is not None)

    if not lazy and sched.kind in ("sync", "threads"):
        _same_rows(arrays)
        slices = _array_slices(arrays[0], block_rows)

        def run(sl):
            return run_chunk(bp, sl.start, [None if a is None else a[sl] for a in arrays], params)

        if sched.kind == "sync" or len(slices) == 1:
            parts = [run(sl) for sl in slices]
        else:
            with one_blas_thread():
                parts = list(thread_pool().map(run, slices))
        result = _tree(parts, bp.combine, split_every)
        return bp.finalize(result) if bp.finalize is not None else result

    result = build_reduction(bp, *arrays, params=params, split_every=split_every)
    return compute(result, scheduler=sched, progress=progress)


def compute(obj, *, scheduler=None, progress: bool = False):
    """Compute one dask object (array or delayed), or a tuple / list of them,
    on the resolved scheduler. Non-dask objects come back as they are."""
    sched = resolve_scheduler(scheduler)
    if isinstance(obj, (tuple, list)):
        if not any(is_lazy(o) or hasattr(o, "dask") for o in obj):
            return obj
        import dask

        return type(obj)(compute(dask.delayed(list)(list(obj)), scheduler=sched, progress=progress))
    if not is_lazy(obj) and not hasattr(obj, "dask"):
        return obj
    if sched.kind == "distributed":
        for attempt in range(RESCATTER_ATTEMPTS + 1):
            fut = sched.client.compute(obj, optimize_graph=False)
            if progress:
                import contextlib
                import sys

                from distributed import progress as dprogress

                with contextlib.redirect_stdout(sys.stderr):  # its text bar writes to stdout, which is for results
                    dprogress(fut)
            try:
                return fut.result()
            except Exception as exc:
                if attempt == RESCATTER_ATTEMPTS or not _SCATTERED:
                    raise
                cancelled = "cancel" in type(exc).__name__.lower()
                if not cancelled and not _lost_keys(sched.client):
                    raise  # an error of the pass itself
                # let the scheduler notice the dead worker first: blocks re-sent before it does may be
                # placed on that worker and lost again (seen on a loaded machine)
                import time

                time.sleep(min(8.0, 0.5 * 2 ** attempt))
                if not _rescatter_lost(sched.client):
                    raise
    import dask

    scheduler_name = "sync" if sched.kind == "sync" else "threads"
    if progress:
        import sys

        from dask.diagnostics import ProgressBar

        with ProgressBar(out=sys.stderr), one_blas_thread(scheduler_name):  # stdout: results (CLI JSON)
            return dask.compute(obj, scheduler=scheduler_name, optimize_graph=False)[0]
    with one_blas_thread(scheduler_name):
        return dask.compute(obj, scheduler=scheduler_name, optimize_graph=False)[0]


_BLAS = []


def one_blas_thread(scheduler_name="threads"):
    """While dask's threads run block kernels in this process, each BLAS /
    OpenMP call uses one thread (two dask threads on two cores must not each
    start two BLAS threads). Worker processes of a ``distributed`` cluster
    get the same from their nanny (``OMP_NUM_THREADS=1`` etc. in
    ``distributed.nanny.pre-spawn-environ``); the compiled kernels start no
    threads at all. For ``"sync"`` (one thread) nothing is limited."""
    import contextlib

    from threadpoolctl import ThreadpoolController

    if scheduler_name != "threads":
        return contextlib.nullcontext()

    if not _BLAS:
        _BLAS.append(ThreadpoolController())
    return _BLAS[0].limit(limits=1)


def _fold_call(bp, start, state, params, *blocks):
    return run_fold_step(bp, start, state, blocks, params)


def fold_blocks(bp: Pass, *arrays, state, params=None, order=None, scheduler=None):
    """Run a ``kind="fold"`` pass: thread a small ``state`` through the row
    blocks, one after another.

    ``chunk(state, *blocks, **params) -> new state`` runs where the block is
    (a chain of tasks: block i's task depends on block i-1's result), so a
    sequential on-line algorithm streams over data of any size while only
    the state travels. ``order`` permutes the blocks (e.g. shuffled per
    epoch). One ``compute`` per call; returns the final state.
    """
    params = dict(params or {})
    arrays = [as_array(a) for a in arrays]
    _check_pass(bp, "fold", arrays)
    sched = resolve_scheduler(scheduler)
    lazy = any(_is_dask(a) for a in arrays if a is not None)
    if not lazy and sched.kind in ("sync", "threads"):
        _same_rows(arrays)
        slices = _array_slices(arrays[0])
        for i in (range(len(slices)) if order is None else order):
            sl = slices[i]
            state = run_fold_step(bp, sl.start, state, [None if a is None else a[sl] for a in arrays], params)
        return state
    import dask

    aligned = _align(arrays)
    lead = aligned[0]
    starts = _block_starts(lead.chunks[0])
    token = _token(bp, params, aligned, state, None if order is None else list(order))
    block_lists = _keyed_blocks(aligned)
    p = _params_key(bp, params, token)
    step = dask.delayed(partial(_fold_call, bp), pure=True)
    out = dask.delayed(state, pure=True, traverse=False, name=f"{bp.name}-state-{token}")
    for n, i in enumerate(range(len(lead.chunks[0])) if order is None else order):
        if lead.chunks[0][i] == 0:
            continue
        out = step(int(starts[i]), out, p, *[None if bl is None else bl[i] for bl in block_lists],
                   dask_key_name=f"{bp.name}-{token}-{n}")
    return compute(out, scheduler=sched)


def n_blocks(data, block_rows=None) -> int:
    """Number of row blocks :func:`map_reduce` / :func:`fold_blocks` use."""
    a = as_array(data)
    if _is_dask(a):
        return len(a.chunks[0])
    return len(_array_slices(a, block_rows))


def map_blocks(
    bp: Pass,
    *arrays,
    params: dict | None = None,
    trailing_shape: tuple = (),
    block_rows: int | None = None,
):
    """Run a ``kind="map"`` pass: per-row output over aligned row blocks.

    Returns a numpy array for numpy inputs (computed here, block by block)
    and a lazy dask array (one task per block, parameters as one shared key)
    for dask inputs. The chunk returns an array of shape
    ``(n_block,) + trailing_shape`` and dtype ``bp.dtype``.
    """
    params = dict(params or {})
    arrays = [as_array(a) for a in arrays]
    _check_pass(bp, "map", arrays)
    if not any(_is_dask(a) for a in arrays if a is not None):
        _same_rows(arrays)
        outs = [np.asarray(run_chunk(bp, sl.start, [None if a is None else a[sl] for a in arrays], params))
                for sl in _array_slices(arrays[0], block_rows)]
        return np.concatenate(outs, axis=0).astype(bp.dtype, copy=False)

    import dask.array as da

    token = _token(bp, params, arrays, trailing_shape)
    pieces = [
        da.from_delayed(d, shape=(size,) + tuple(trailing_shape), dtype=bp.dtype)
        for size, d in _block_tasks(bp, arrays, params, token)
    ]
    return da.concatenate(pieces, axis=0)


def block_pairs(
    bp: Pass,
    data,
    *,
    outputs: tuple,
    params: dict | None = None,
    scheduler=None,
    split_every: int = 8,
    block_rows: int = 16384,
    min_rows: int = 1,
    min_blocks: int = 4,
    progress: bool = False,
):
    """Every row block of ``data`` against every row block, combined per
    query block: ``bp.chunk(query_block, data_block, q_start=, d_start=,
    **params)`` for all pairs, merged with ``bp.combine`` in a tree.
    ``progress`` shows a bar of the tasks done (for numpy input, which is
    computed here).

    No task holds more than two blocks and one partial result. Blocks are at
    most ``block_rows`` rows (at least ``min_rows``), and there are at least
    ``min_blocks`` (default four) when the data allow it, so the (block,
    block) pairs keep every worker busy even for a store with a few large
    chunks.

    ``outputs`` gives ``(dtype, trailing_shape)`` of each array in the
    combined per-block result (a tuple of per-row arrays). Returns that tuple
    of arrays of ``n`` rows: numpy (computed) for numpy input, lazy dask
    arrays (one block per row block) for dask / xarray input.
    """
    import dask
    import dask.array as da

    params = dict(params or {})
    a = as_array(data)
    _check_pass(bp, "reduce", [a])
    lazy = _is_dask(a)
    rows = max(int(min(block_rows, -(-a.shape[0] // max(int(min_blocks), 1)))), int(min_rows))
    if not lazy:
        a = da.from_array(np.asarray(a, dtype=np.float64), chunks=(rows,) + a.shape[1:])
    elif max(a.chunks[0]) > rows:
        a = a.rechunk({0: rows})
    token = _token(bp, params, [a], split_every)
    blocks = a.to_delayed(optimize_graph=False).ravel()
    starts = _block_starts(a.chunks[0])[:-1]
    p = _params_key(bp, params, token)
    call = dask.delayed(partial(_call_pair, bp), pure=True)
    per_output = [[] for _ in outputs]
    for qi, (qb, qs, qn) in enumerate(zip(blocks, starts, a.chunks[0], strict=True)):
        parts = [call(qb, db, int(qs), int(ds), p, dask_key_name=f"{bp.name}-{token}-{qi}-{di}")
                 for di, (db, ds) in enumerate(zip(blocks, starts, strict=True))]
        res = _tree(parts, bp.combine, split_every, delayed=dask.delayed, name=f"{bp.name}-combine-{token}-{qi}")
        for k, (dtype, trailing) in enumerate(outputs):
            per_output[k].append(da.from_delayed(res[k], shape=(qn,) + tuple(trailing), dtype=dtype))
    result = tuple(da.concatenate(parts) for parts in per_output)
    if lazy:
        return result
    return tuple(np.asarray(r) for r in compute(result, scheduler=scheduler, progress=progress))


def cross_pairs(bp: Pass, queries, *data, outputs: tuple, params: dict | None = None,
                query_inputs: dict | None = None, scheduler=None, query_rows: int = 4096, split_every: int = 8,
                progress: bool = False):
    """Every block of ``queries`` (rows not in ``data``, e.g. new rows to
    predict) against every row block of the row-aligned ``data`` arrays, in
    ONE graph: ``bp.chunk(*data_blocks, start=, xq=query_block,
    **params, **query_inputs_block)`` for all pairs, combined per query block
    with ``bp.combine`` in a tree. ``query_inputs`` are arrays with one row
    per query row (e.g. each new row's neighbour list from a first
    ``cross_pairs``), handed to the chunk block by block. So the data are
    read once per call for any number of query rows (query blocks of
    ``query_rows`` rows bound the chunk's query x block tables).

    ``outputs``: ``(key, dtype, trailing_shape)`` per returned array, ``key``
    indexing the combined result (a tuple position or a dict name). Returns
    numpy arrays with one row per query row (computed here).
    """
    import dask
    import dask.array as da

    params = dict(params or {})
    arrays = [as_array(a) for a in data]
    _check_pass(bp, "reduce", arrays)
    q = as_array(queries)
    n_q = int(q.shape[0])
    if n_q == 0:
        return tuple(np.zeros((0,) + tuple(trailing), dtype=dtype) for _, dtype, trailing in outputs)
    rows = max(1, int(query_rows))

    def q_blocks(a):
        a = as_array(a)
        a = a.rechunk({0: rows}) if _is_dask(a) else da.from_array(np.asarray(a), chunks=(rows,) + a.shape[1:])
        if a.ndim == 2 and len(a.chunks[1]) > 1:
            a = a.rechunk({1: -1})
        return a.to_delayed(optimize_graph=False).reshape(-1), a

    qb, qa = q_blocks(q)
    extra = {k: q_blocks(v) for k, v in (query_inputs or {}).items()}
    for k, (_, v) in extra.items():
        if v.shape[0] != n_q:
            raise ValueError(f"query_inputs[{k!r}] has {v.shape[0]} rows; the queries have {n_q}.")
    aligned = _align(arrays)
    lead = aligned[0]
    starts = _block_starts(lead.chunks[0])
    block_lists = _keyed_blocks(aligned)
    token = _token(bp, params, [qa, *[v for _, v in extra.values()], *aligned], rows, split_every)
    p = _params_key(bp, params, token)
    call = dask.delayed(partial(_call_cross, bp, sorted(extra)), pure=True)
    per_output = [[] for _ in outputs]
    for qi, qn in enumerate(qa.chunks[0]):
        qextra = [extra[k][0][qi] for k in sorted(extra)]
        parts = [call(qb[qi], qextra, int(starts[di]), p, *[None if bl is None else bl[di] for bl in block_lists],
                      dask_key_name=f"{bp.name}-x-{token}-{qi}-{di}")
                 for di, size in enumerate(lead.chunks[0]) if size > 0]
        res = _tree(parts, bp.combine, split_every, delayed=dask.delayed, name=f"{bp.name}-x-combine-{token}-{qi}")
        for k, (key, dtype, trailing) in enumerate(outputs):
            part = dask.delayed(_pick, pure=True)(res, key)
            per_output[k].append(da.from_delayed(part, shape=(qn,) + tuple(trailing), dtype=dtype))
    result = tuple(da.concatenate(parts) for parts in per_output)
    return tuple(np.asarray(r) for r in compute(result, scheduler=scheduler, progress=progress))


def _cells_split(bp, params, start, x):
    return bp.split(x, start=start, **params)


def _cells_build(bp, params, *pieces):
    return bp.build(list(pieces), **params)


def _cells_route(bp, params, cell, built):
    return bp.route(built, cell=cell, **params)


def _cells_query(bp, params, built, *pieces):
    return bp.query(built, list(pieces), **params)


def _cells_scatter_own(bp, bounds, built):
    return bp.scatter(built["ids"], built["d2"], built["idx"], bounds=bounds)


def _cells_scatter(bp, bounds, answer):
    return bp.scatter(*answer, bounds=bounds)


def _cells_join(bp, params, rows, *pieces):
    return bp.join(list(pieces), rows=rows, **params)


def partition_pairs(bp, data, *, n_parts: int, outputs: tuple, params: dict | None = None,
                    build_params: dict | None = None, join_params: dict | None = None, block_rows: int | None = None,
                    scheduler=None, progress: bool = False):
    """A search through a coarse partition of the rows (``bp``: a
    :class:`~infoclust_dask.kernels.knn.Cells` blueprint), in one graph:

    1. every row block splits its rows into ``n_parts`` pieces
       (``bp.split``);
    2. every part gathers its pieces and builds (``bp.build``: e.g. an index
       over the part and its rows' answers within it);
    3. every built part routes the rows that must also ask other parts
       (``bp.route``), and every part answers the rows routed to it
       (``bp.query``);
    4. the answers travel back to the row blocks (``bp.scatter``, one piece
       per block) and each block joins its pieces (``bp.join``).

    ``params`` go to split and route, ``build_params`` to build and query,
    ``join_params`` to join; ``outputs`` gives ``(dtype, trailing_shape)``
    of each array of a join's tuple. Returns them as a tuple of lazy dask
    arrays of ``n`` rows (for dask input) or numpy arrays (computed here). No task holds more than one part and its pieces; a part's rows
    are read once from their blocks."""
    import dask
    import dask.array as da

    params, build_params, join_params = dict(params or {}), dict(build_params or {}), dict(join_params or {})
    a = as_array(data)
    lazy = _is_dask(a)
    if not lazy:
        a = da.from_array(np.asarray(a, dtype=np.float64), chunks=(int(block_rows or _auto_rows(a)),) + a.shape[1:])
    elif block_rows is not None and max(a.chunks[0]) > int(block_rows):
        a = a.rechunk({0: int(block_rows)})
    if a.ndim == 2 and len(a.chunks[1]) > 1:
        a = a.rechunk({1: -1})
    sizes = list(a.chunks[0])
    bounds = [int(b) for b in _block_starts(sizes)]
    from dask.base import tokenize

    token = tokenize(bp, params, build_params, join_params, a.name, n_parts)
    blocks = a.to_delayed(optimize_graph=False).reshape(-1)
    P = int(n_parts)
    name = bp.name

    def task(func, *args, key):
        return dask.delayed(func, pure=True)(*args, dask_key_name=f"{name}-{key}-{token}")

    splits = [task(partial(_cells_split, bp, params), bounds[b], blocks[b], key=f"split-{b}")
              for b in range(len(sizes))]
    built = [task(partial(_cells_build, bp, build_params), *[splits[b][g] for b in range(len(sizes))],
                  key=f"build-{g}") for g in range(P)]
    routes = [task(partial(_cells_route, bp, params), g, built[g], key=f"route-{g}") for g in range(P)]
    answers = [task(partial(_cells_query, bp, build_params), built[g], *[routes[h][g] for h in range(P)],
                    key=f"query-{g}") for g in range(P)]
    own = [task(partial(_cells_scatter_own, bp, bounds), built[g], key=f"scatter-own-{g}") for g in range(P)]
    other = [task(partial(_cells_scatter, bp, bounds), answers[g], key=f"scatter-{g}") for g in range(P)]
    joins = [task(partial(_cells_join, bp, join_params), sizes[b], *[own[g][b] for g in range(P)],
                  *[other[g][b] for g in range(P)], key=f"join-{b}") for b in range(len(sizes))]
    result = tuple(
        da.concatenate([da.from_delayed(dask.delayed(_pick, pure=True)(joins[b], k),
                                        shape=(sizes[b],) + tuple(trailing), dtype=dtype) for b in range(len(sizes))])
        for k, (dtype, trailing) in enumerate(outputs))
    if lazy:
        return result
    return tuple(np.asarray(r) for r in compute(result, scheduler=scheduler, progress=progress))


def _pick(result, key):
    return np.asarray(result[key])


def _call_cross(bp, names, xq, qextra, d_start, params, *blocks):
    kw = {**params, **dict(zip(names, qextra, strict=True)), "xq": xq}
    if bp.start:
        return bp.chunk(*blocks, start=d_start, **kw)
    return bp.chunk(*blocks, **kw)


def _call_pair(bp, xq, xd, q_start, d_start, params):
    return bp.chunk(xq, xd, q_start=q_start, d_start=d_start, **params)


class RowBlocks:
    """One object per row block (e.g. the rows of a sparse matrix), made by
    :func:`exchange` and kept where it was made: in the workers' memory on a
    ``distributed`` scheduler (futures), in this process otherwise.
    :meth:`apply` runs a function on every block with one shared argument
    (e.g. the vector of a matrix-vector product: sent to each worker once
    per call) and returns the per-block results in row order. Call
    :meth:`release` (or drop the object) to free the blocks."""

    def __init__(self, sched, blocks, starts, sizes, name, keep=None):
        self.sched, self.blocks, self.name = sched, blocks, name
        self.starts, self.sizes = list(starts), list(sizes)
        self.calls = 0
        # scattered inputs the blocks were made from: a block lost with a worker is made again from them
        self._keep = keep

    @property
    def n_rows(self) -> int:
        return int(sum(self.sizes))

    def apply(self, func, shared=None):
        """``[func(block, shared) for block in blocks]``, where the blocks are."""
        self.calls += 1
        if self.blocks is None:
            raise RuntimeError(f"{self.name}: the row blocks were released.")
        if self.sched.kind != "distributed":
            return [func(b, shared) for b in self.blocks]
        client = self.sched.client
        arg = client.scatter(shared, broadcast=True, hash=False) if isinstance(shared, np.ndarray) else shared
        futs = [client.submit(func, b, arg, key=f"{self.name}-apply-{self.calls}-{i}", pure=False)
                for i, b in enumerate(self.blocks)]
        try:
            return client.gather(futs)
        finally:
            for f in futs:
                f.release()
            if arg is not shared:
                arg.release()

    def release(self):
        if self.blocks is not None and self.sched.kind == "distributed":
            for f in self.blocks:
                f.release()
        self.blocks = self._keep = None


def _exchange_split(split, params, shared, bounds, start, *blocks):
    return split(*blocks, start=start, bounds=bounds, **params, **shared)


def _exchange_join(join, params, shared, n, start, incoming, *blocks):
    return join(*blocks, list(incoming), start=start, n=n, **params, **shared)


def exchange(split, join, *arrays, params=None, shared=None, block_rows=None, scheduler=None, name="exchange",
             progress=False):
    """An all-to-all exchange between the row blocks of the row-aligned
    ``arrays`` (e.g. transposing a sparse matrix held as row blocks), with
    the results kept where they are made (:class:`RowBlocks`).

    Source block ``s`` makes one piece per destination block:
    ``split(*blocks_s, start=, bounds=, **params, **shared)`` returns a list
    of ``B`` pieces (``bounds``: the ``B + 1`` row offsets of the blocks).
    Destination block ``b`` then receives piece ``b`` of every source:
    ``join(*blocks_b, [piece from each source], start=, n=, **params,
    **shared)`` makes the block's object. ``shared`` are arrays every task
    reads (e.g. one number per row of the whole data): sent to each worker
    once. ``block_rows`` rechunks the rows first (default: the arrays'
    chunks, or about 64 MB blocks for numpy input). No task holds more than
    one block's data and its pieces."""
    import dask
    from dask.base import tokenize

    params = dict(params or {})
    sched = resolve_scheduler(scheduler)
    arrays = [as_array(a) for a in arrays]
    if any(_is_dask(a) for a in arrays):
        aligned = _align(arrays)
        if block_rows is not None:
            aligned = [a.rechunk({0: int(block_rows)}) for a in aligned]
    else:
        _same_rows(arrays)
        rows = int(block_rows or _auto_rows(arrays[0]))
        aligned = [persist(a, scheduler=sched, chunk_rows=rows) for a in arrays]
    aligned = [a.rechunk({1: -1}) if a.ndim == 2 and len(a.chunks[1]) > 1 else a for a in aligned]
    sizes = list(aligned[0].chunks[0])
    bounds = _block_starts(sizes)
    starts = bounds[:-1]
    n = int(bounds[-1])
    token = tokenize(split, join, params, {k: tokenize(v) for k, v in (shared or {}).items()}, *aligned)
    if sched.kind == "distributed" and shared:
        shared = {k: sched.client.scatter(np.asarray(v), broadcast=True, hash=False) for k, v in shared.items()}
    shared = dict(shared or {})
    block_lists = _keyed_blocks(aligned)
    sp = dask.delayed(partial(_exchange_split, split, params), pure=True)
    jn = dask.delayed(partial(_exchange_join, join, params), pure=True)
    splits = [sp(shared, [int(b) for b in bounds], int(starts[i]), *[bl[i] for bl in block_lists],
                 dask_key_name=f"{name}-split-{token}-{i}") for i in range(len(sizes))]
    joins = [jn(shared, n, int(starts[b]), [splits[s][b] for s in range(len(sizes))],
                *[bl[b] for bl in block_lists], dask_key_name=f"{name}-join-{token}-{b}")
             for b in range(len(sizes))]
    if sched.kind == "distributed":
        blocks = sched.client.compute(joins, optimize_graph=False)
        if progress:
            import contextlib
            import sys

            from distributed import progress as dprogress

            with contextlib.redirect_stdout(sys.stderr):
                dprogress(blocks)
        _wait_futures(sched.client, blocks)
    else:
        blocks = list(compute(joins, scheduler=sched, progress=progress))
    return RowBlocks(sched, blocks, starts, sizes, name, keep=shared)


def generate(func, n_rows: int, *, block_rows: int, outputs: tuple, block_params, name: str):
    """Lazy arrays of ``n_rows`` rows made block by block where they are
    computed (synthetic data sets): ``func(start, stop, **block_params(start,
    stop))`` returns one array per entry of ``outputs`` (``(dtype,
    trailing_shape)``). Task keys are ``name-<token>-<block>``."""
    import dask
    import dask.array as da
    from dask.base import tokenize

    bounds = [(s, min(s + int(block_rows), int(n_rows))) for s in range(0, int(n_rows), int(block_rows))]
    per_output = [[] for _ in outputs]
    for i, (s, e) in enumerate(bounds):
        kw = block_params(s, e)
        d = dask.delayed(partial(func, **kw), pure=True, nout=len(outputs))(
            s, e, dask_key_name=f"{name}-{tokenize(func, s, e, kw)}-{i}")
        for k, (dtype, trailing) in enumerate(outputs):
            per_output[k].append(da.from_delayed(d[k], shape=(e - s,) + tuple(trailing), dtype=dtype))
    return tuple(da.concatenate(parts) for parts in per_output)


# --------------------------------------------------------------------------
# data placement
# --------------------------------------------------------------------------
def prepare(data, *, scheduler=None, limit: int | None = None):
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
    worker died): the same bytes get the same keys, so the graphs that use
    them run unchanged. Returns whether anything was lost."""
    lost = _lost_keys(client)
    if not lost:
        return False
    with _SCATTERED_LOCK:
        held = {k: _SCATTERED[k][0] for k in lost if k in _SCATTERED}
    lost = list(held)
    import logging

    logging.getLogger("infoclust_dask").warning(
        "%d scattered block(s) were lost with a worker; sending them again from this process", len(lost))
    again = client.scatter([held[k] for k in lost], hash=True)
    # The scheduler keeps data only while a client future wants it, and the graphs' old futures of these
    # keys were cancelled with the loss: the new futures live in the entry, as long as the old ones do.
    with _SCATTERED_LOCK:
        for f in again:
            if f.key in _SCATTERED:
                _SCATTERED[f.key][2] = f
    return True


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


def persist_all(arrays, *, scheduler=None, progress: bool = False):
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

            with ProgressBar(out=sys.stderr):
                return dask.persist(*arrays, scheduler="sync" if sched.kind == "sync" else "threads",
                                    optimize_graph=False)
        return dask.persist(*arrays, scheduler="sync" if sched.kind == "sync" else "threads", optimize_graph=False)
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


def take_rows(data, keep, *, scheduler=None):
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
        k = np.asarray(compute(keep, scheduler="sync") if _is_dask(keep) else keep)
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

    from .kernels.stats import COUNT_TRUE

    token = _token(COUNT_TRUE, {}, [keep])
    tasks = [d for _, d in _block_tasks(COUNT_TRUE, [keep], {}, token)]
    parts = compute(dask.delayed(list)(tasks), scheduler=scheduler)
    return [int(p["n"][0]) for p in parts]
