"""Running the passes the kernels declare: :func:`map_reduce` (reduce),
:func:`map_blocks` (map), :func:`fold_blocks` (fold) and :func:`generate`
(lazy arrays made block by block)."""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

import numpy as np

from .. import journal
from ..kernels import Pass, numpy_form, numpy_form_fits, run_chunk, run_fold_step
from .blocks import (
    _align,
    _array_slices,
    _block_starts,
    _block_tasks,
    _check_pass,
    _is_dask,
    _keyed_blocks,
    _params_key,
    _same_rows,
    _token,
    _tree,
    as_array,
    build_reduction,
)
from .choose import current_runner, resolve_scheduler


# --------------------------------------------------------------------------
# running passes
# --------------------------------------------------------------------------
def map_reduce(
    bp: Pass,
    *arrays: Any,
    params: dict | None = None,
    scheduler: Any = None,
    split_every: int = 8,
    block_rows: int | None = None,
    progress: bool = False,
) -> Any:
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
    scheduler : see :mod:`infoclust_dask.engine.choose`.
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


def _in_process(bp, kind, arrays, scheduler, block_rows=None):
    """The inputs of a pass coerced and checked, the resolved scheduler, and
    the logical row blocks of the in-process path (numpy input on a local
    scheduler: blocks are views, no graph) or ``None`` for a graph. The
    blocks are the data's own (:func:`~.blocks.block_rows_of`), whatever
    the runner's threads: each thread takes the next block."""
    arrays = [as_array(a) for a in arrays]
    _check_pass(bp, kind, arrays)
    sched = resolve_scheduler(scheduler)
    if not sched.in_this_process() or any(_is_dask(a) for a in arrays if a is not None):
        return arrays, sched, None
    _same_rows(arrays)
    return arrays, sched, _array_slices(arrays[0], block_rows)


def _tiny(arrays) -> bool:
    """Whether a pass reads so few bytes that its kernels take their numpy
    forms (:func:`infoclust_dask.kernels.numpy_form`: a fit on
    tiny data then never loads numba). Decided by the whole inputs' size
    (numpy or lazy), so a block gives the same bits in this process and
    in a task."""
    total = 0
    for a in arrays:
        if a is not None:
            nbytes = getattr(a, "nbytes", None)
            if nbytes is None:  # sparse blocks
                return False
            total += int(nbytes)
    return numpy_form_fits(total)


def _rows(arrays, sl):
    """Row slice ``sl`` of every input (``None`` inputs stay ``None``)."""
    return [None if a is None else a[sl] for a in arrays]


def _map_reduce(bp, arrays, params, scheduler, split_every, block_rows, progress):
    arrays, sched, slices = _in_process(bp, "reduce", arrays, scheduler, block_rows)
    small = _tiny(arrays)
    if slices is not None:

        def run(sl):
            with numpy_form(small):
                return run_chunk(bp, sl.start, _rows(arrays, sl), params)

        parts = sched.each(run, slices)
        result = _tree(parts, bp.combine, split_every)
        return bp.finalize(result) if bp.finalize is not None else result

    result = build_reduction(bp, *arrays, params=params, split_every=split_every, block_rows=block_rows,
                             small=small)
    return sched.compute(result, progress=progress)


def _fold_call(bp, small, start, state, params, sl, *blocks):
    with numpy_form(small):
        return run_fold_step(bp, start, state, [None if b is None else b[sl] for b in blocks], params)


def fold_blocks(bp: Pass, *arrays: Any, state: Any, params: dict | None = None, order: Any = None,
                scheduler: Any = None, block_rows: int | None = None) -> Any:
    """Run a ``kind="fold"`` pass: thread a small ``state`` through the row
    blocks, one after another.

    ``chunk(state, *blocks, **params) -> new state`` runs where the block is
    (a chain of tasks: block i's task depends on block i-1's result), so a
    sequential on-line algorithm streams over data of any size while only
    the state travels. The blocks are the data's logical blocks
    (:func:`n_blocks`; ``block_rows`` fixes their rows), whatever the
    chunks: a chunk's task runs one of its blocks. ``order`` permutes the
    blocks (e.g. shuffled per epoch). One ``compute`` per call; returns the
    final state.
    """
    params = dict(params or {})
    arrays, sched, slices = _in_process(bp, "fold", arrays, scheduler, block_rows)
    small = _tiny(arrays)
    if slices is not None:
        with numpy_form(small):
            for i in (range(len(slices)) if order is None else order):
                sl = slices[i]
                state = run_fold_step(bp, sl.start, state, _rows(arrays, sl), params)
        return state
    import dask

    aligned = _align(arrays, block_rows)
    lead = aligned[0]
    blocks = _array_slices(lead, block_rows)  # the logical blocks (n_blocks' count): a chunk holds whole ones
    starts = _block_starts(lead.chunks[0])
    chunk_of = np.searchsorted(starts, [b.start for b in blocks], side="right") - 1
    token = _token(bp, params, aligned, state, None if order is None else list(order), block_rows)
    block_lists = _keyed_blocks(aligned)
    p = _params_key(bp, params, token)
    step = dask.delayed(partial(_fold_call, bp, small), pure=True)
    out = dask.delayed(state, pure=True, traverse=False, name=f"{bp.name}-state-{token}")
    for n, i in enumerate(range(len(blocks)) if order is None else order):
        b, c = blocks[i], int(chunk_of[i])
        if b.stop == b.start:
            continue
        local = slice(b.start - int(starts[c]), b.stop - int(starts[c]))
        out = step(int(b.start), out, p, local, *[None if bl is None else bl[c] for bl in block_lists],
                   dask_key_name=f"{bp.name}-{token}-{n}")
    return sched.compute(out)


def n_blocks(data: Any, block_rows: int | None = None) -> int:
    """Number of logical row blocks :func:`map_reduce` / :func:`fold_blocks`
    use: set by the data (numpy or lazy, any chunks) alone."""
    return len(_array_slices(as_array(data), block_rows))


def map_blocks(
    bp: Pass,
    *arrays: Any,
    params: dict | None = None,
    trailing_shape: tuple = (),
    block_rows: int | None = None,
) -> Any:
    """Run a ``kind="map"`` pass: per-row output over aligned row blocks.

    Returns a numpy array for numpy inputs (computed here, block by block)
    and a lazy dask array (one task per block, parameters as one shared key)
    for dask inputs. The chunk returns an array of shape
    ``(n_block,) + trailing_shape`` and dtype ``bp.dtype``.
    """
    params = dict(params or {})
    arrays = tuple(as_array(a) for a in arrays)
    _check_pass(bp, "map", arrays)
    if not any(_is_dask(a) for a in arrays if a is not None):
        _same_rows(arrays)
        here = current_runner()  # the threads of the enclosing call's runner in this process, if it has some
        here = here if here is not None and here.in_this_process() else None

        small = _tiny(arrays)

        def run(sl):
            with numpy_form(small):
                return np.asarray(run_chunk(bp, sl.start, _rows(arrays, sl), params))

        slices = _array_slices(arrays[0], block_rows)
        outs = here.each(run, slices) if here is not None else [run(sl) for sl in slices]
        return np.concatenate(outs, axis=0).astype(bp.dtype, copy=False)

    import dask.array as da

    token = _token(bp, params, arrays, trailing_shape, block_rows)
    pieces = [
        da.from_delayed(d, shape=(size,) + tuple(trailing_shape), dtype=bp.dtype)
        for size, d in _block_tasks(bp, arrays, params, token, block_rows=block_rows, small=_tiny(arrays))
    ]
    return da.concatenate(pieces, axis=0)


def generate(func: Callable[..., Any], n_rows: int, *, block_rows: int, outputs: tuple,
             block_params: Callable[[int, int], dict], name: str) -> tuple:
    """Lazy arrays of ``n_rows`` rows made block by block where they are
    computed (synthetic data sets): ``func(start, stop, **block_params(start,
    stop))`` returns one array per entry of ``outputs`` (``(dtype,
    trailing_shape)``). Task keys are ``name-<token>-<block>``."""
    import dask
    import dask.array as da
    from dask.base import tokenize

    bounds = [(s, min(s + int(block_rows), int(n_rows))) for s in range(0, int(n_rows), int(block_rows))]
    per_output: list[list] = [[] for _ in outputs]
    for i, (s, e) in enumerate(bounds):
        kw = block_params(s, e)
        d = dask.delayed(partial(func, **kw), pure=True, nout=len(outputs))(
            s, e, dask_key_name=f"{name}-{tokenize(func, s, e, kw)}-{i}")
        for k, (dtype, trailing) in enumerate(outputs):
            per_output[k].append(da.from_delayed(d[k], shape=(e - s,) + tuple(trailing), dtype=dtype))
    return tuple(da.concatenate(parts) for parts in per_output)


def rows_at(data: Any, index: Any, *, columns: Any = None, scheduler: Any = None) -> np.ndarray:
    """``data[index]`` (rows at integer positions, in the order given; with
    ``columns``, ``data[index][:, columns]``) as a numpy array. For dask
    input only the row blocks that hold them are read, each by one task of
    this package's (no ``dask.array`` slicing task reaches a worker: a
    worker that unpickles one imports ``dask.array`` and with it xarray and
    pandas, ~100 MB)."""
    a = as_array(data)
    idx = np.asarray(index, dtype=np.int64).reshape(-1)
    if not _is_dask(a) or any(len(c) != 1 for c in a.chunks[1:]):
        out = np.asarray(resolve_scheduler(scheduler).compute(a[idx]) if _is_dask(a) else np.asarray(a)[idx])
        return out if columns is None else out[:, columns]
    import dask

    bounds = np.cumsum((0,) + tuple(a.chunks[0]))
    if idx.size and (idx.min() < 0 or idx.max() >= bounds[-1]):
        raise IndexError(f"row positions must lie in 0 .. {bounds[-1] - 1}; got {idx.min()} .. {idx.max()}.")
    which = np.searchsorted(bounds, idx, side="right") - 1
    blocks = a.to_delayed(optimize_graph=False).reshape(-1)
    used = np.unique(which)
    tasks = [dask.delayed(_take_rows_of)(blocks[b], _as_slice(idx[which == b] - bounds[b]), columns) for b in used]
    parts = list(resolve_scheduler(scheduler).compute(tasks)) if tasks else []
    trailing = a.shape[1:] if columns is None else np.empty(a.shape[1:])[columns].shape
    out = np.empty((idx.size,) + tuple(trailing), dtype=a.dtype)
    for b, part in zip(used, parts, strict=True):
        out[which == b] = part
    return out


def _as_slice(local: np.ndarray) -> Any:
    """A run of consecutive row positions as a slice (a few bytes in the
    task graph instead of 8 a row: SMIC's local scales read every row),
    other positions as they are."""
    if local.size > 1 and local[-1] - local[0] == local.size - 1 and (np.diff(local) == 1).all():
        return slice(int(local[0]), int(local[-1]) + 1)
    return local


def _take_rows_of(block: Any, local: Any, columns: Any) -> np.ndarray:
    rows = np.asarray(block)[local]
    return rows if columns is None else rows[:, columns]
