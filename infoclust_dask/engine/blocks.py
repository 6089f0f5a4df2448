"""Inputs as row blocks: coercion of numpy / dask / xarray input, alignment of
row-aligned inputs, task tokens, keyed blocks, block recipes run inside
the task that uses them, and the block tasks and reduction tree of a pass."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from .._support.sizes import PASS_BLOCK_BYTES, lazy_rows, pass_rows
from ..kernels._common import Pass, run_chunk

#: target size of a numpy row block (bytes of float64 data): the policy of :mod:`infoclust_dask._support.sizes`
DEFAULT_BLOCK_BYTES = PASS_BLOCK_BYTES


# --------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------
def _is_dask(a) -> bool:
    return type(a).__module__.startswith("dask.array") and hasattr(a, "chunks")  # not a Delayed (any attribute)


def is_lazy(a: Any) -> bool:
    """True for dask arrays (and DataArrays backed by them)."""
    return _is_dask(getattr(a, "data", a))


def as_array(data: Any) -> Any:
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


def as_lazy(a: Any) -> Any:
    """A dask array over ``a`` (numpy, in row blocks of the engine's size),
    or ``a`` itself when it is already lazy: per-sample results of a fit whose
    caller gave lazy input stay lazy (dask in, dask out) even when the fit
    read the data into memory."""
    if a is None or _is_dask(a):
        return a
    import dask.array as da

    a = np.asarray(a)
    return da.from_array(a, chunks=(_auto_rows(a),) + a.shape[1:])


def n_rows(a: Any) -> int:
    return int(a.shape[0])


def _array_slices(a, block_rows=None, threads=1):
    """The row blocks of a numpy input: ~4 MB of float64 each by default, at
    least one per thread while each keeps ``PARALLEL_MIN_ROWS`` rows
    (:func:`infoclust_dask._support.sizes.pass_rows`)."""
    return _row_slices(a.shape[0], 8 * int(np.prod(a.shape[1:], dtype=np.int64) or 1), block_rows, threads)


def _row_slices(n, row_bytes, block_rows=None, threads=1):
    if block_rows is None:
        block_rows = pass_rows(row_bytes, n, threads)
    return [slice(i, min(i + block_rows, n)) for i in range(0, n, block_rows)] or [slice(0, 0)]


def _auto_rows(a):
    return lazy_rows(8 * int(np.prod(a.shape[1:], dtype=np.int64) or 1))


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
    out: list[Any] = []
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
    return run_chunk(bp, start, [b() if isinstance(b, _Load) else b for b in blocks], params)


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
    seen: set = set()
    out: list[Any] = []
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


def build_reduction(bp: Pass, *arrays: Any, params: dict | None = None, split_every: int = 8) -> Any:
    """The lazy (``dask.delayed``) graph of :func:`map_reduce` for array inputs.

    One task per non-empty row block, all depending on ONE key that holds
    ``params``; a tree of the pass's combine with fan-in ``split_every``;
    the pass's finalize at the root.
    """
    import dask

    arrays = tuple(as_array(a) for a in arrays)
    _check_pass(bp, "reduce", arrays)
    token = _token(bp, params, arrays, split_every)
    parts = [d for size, d in _block_tasks(bp, arrays, params, token, inline=True) if size > 0]
    if not parts:
        raise ValueError("All blocks of the input are empty (0 rows); nothing to reduce.")
    result = _tree(parts, bp.combine, split_every, delayed=dask.delayed, name=f"{bp.name}-combine-{token}")
    if bp.finalize is not None:
        result = dask.delayed(bp.finalize, pure=True)(result, dask_key_name=f"{bp.name}-finalize-{token}")
    return result
