"""Inputs as row blocks: coercion of numpy / dask / xarray input, alignment of
row-aligned inputs, task tokens, keyed blocks, block recipes run inside
the task that uses them, and the block tasks and reduction tree of a pass.

Every pass works on **logical row blocks** fixed by the data alone
(:func:`infoclust_dask._support.sizes.logical_rows`: the number of rows
and their width), never by threads, dask chunks or workers: a dask chunk
holds whole logical blocks (input in other chunks is rechunked on them,
:func:`_align`), a task computes one partial result per logical block it
holds, and the partial results combine in ONE tree over the block indices
(fan-in ``split_every``; :func:`_tree` in this process, :func:`_grow` for
the pieces of it that chunk tasks and combine tasks hold). So a pass gives
the same bits whatever runs it (the same-answer contract,
``docs/conventions.md``)."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from .._support.sizes import PASS_BLOCK_BYTES, aligned_rows, lazy_rows, logical_rows
from ..kernels import Pass, numpy_form, run_chunk

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


def row_bytes(a: Any) -> int:
    """Bytes of one row of ``a`` counted as float64 (8 per value, whatever
    the dtype): the width the block sizes are set by."""
    return 8 * int(np.prod(a.shape[1:], dtype=np.int64) or 1)


def block_rows_of(a: Any, block_rows: int | None = None) -> int:
    """Rows of the logical blocks of ``a``'s passes: ``block_rows`` when the
    caller fixes them, else :func:`~infoclust_dask._support.sizes.logical_rows`
    of its number of rows and their width."""
    if block_rows:
        return int(block_rows)
    return logical_rows(int(a.shape[0]), row_bytes(a))


def _array_slices(a, block_rows=None):
    """The logical row blocks of an input (numpy or dask), as slices."""
    return _row_slices(int(a.shape[0]), block_rows_of(a, block_rows))


def _row_slices(n, rows):
    rows = max(1, int(rows))
    return [slice(i, min(i + rows, n)) for i in range(0, n, rows)] or [slice(0, 0)]


def _auto_rows(a):
    """Rows of a dask chunk made from numpy ``a``: ~64 MiB, whole logical blocks."""
    return lazy_rows(row_bytes(a), int(a.shape[0]))


def misaligned_note(a: Any) -> str | None:
    """A note for lazy input that streams in chunks that are not whole
    logical blocks (a store chunked by another tool): every pass rechunks
    it (measured ~30 % slower on 1e6 x 16 rows in 100 000-row chunks);
    ``None`` when its chunks are aligned."""
    if not _is_dask(a) or not a.shape[0]:
        return None
    rows = block_rows_of(a)
    if all(int(c) % rows == 0 for c in a.chunks[0][:-1]):
        return None
    return (f"its row chunks ({int(a.chunks[0][0])} rows first) are not whole logical blocks of {rows} rows: "
            "rechunked at every pass (slower; a store written by infoclust_dask, e.g. write_dataset or "
            "`infoclust ingest`, is chunked in whole blocks)")


def _on_blocks(a, rows):
    """Dask array ``a`` with every chunk but the last a whole multiple of
    ``rows`` (the logical blocks): unchanged when it already is, else each
    chunk boundary moved to the nearest multiple (chunks stay about as
    large as they were)."""
    chunks = tuple(int(c) for c in a.chunks[0])
    if all(c % rows == 0 for c in chunks[:-1]):
        return a
    n = int(sum(chunks))
    bounds = np.cumsum(chunks)[:-1]
    cuts = sorted({int(round(b / rows)) * rows for b in bounds} - {0} - {n})
    cuts = [c for c in cuts if c < n]
    edges = [0, *cuts, n]
    return a.rechunk({0: tuple(int(e - s) for s, e in zip(edges[:-1], edges[1:], strict=True))})


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


def _align(arrays, block_rows=None, fixed=True):
    """Dask arrays aligned on the first one's row chunks (None kept); with
    ``fixed``, those chunks hold whole logical blocks (:func:`_on_blocks`)."""
    import dask.array as da

    _same_rows(arrays)
    lead = arrays[0]
    rows = block_rows_of(lead, block_rows)
    if not _is_dask(lead):
        lead = da.from_array(lead, chunks=(aligned_rows(lazy_rows(row_bytes(lead)), rows),) + lead.shape[1:])
    if fixed and lead.shape[0]:
        lead = _on_blocks(lead, rows)
    out: list[Any] = []
    for i, a in enumerate(arrays):
        if i == 0:
            a = lead
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


def _loaded(blocks):
    return [b() if isinstance(b, _Load) else b for b in blocks]


def _pieces(start, size, rows):
    """``(global start, local slice)`` of the logical blocks of ``rows``
    rows inside a chunk of ``size`` rows that starts at row ``start`` (a
    whole multiple of ``rows``)."""
    return [(start + i, slice(i, min(i + rows, size))) for i in range(0, max(size, 1), rows)]


def _reduce_chunk(bp, rows, n_leaves, split_every, small, whole, start, params, *blocks):
    """A reduce pass's task: the chunk kernel on every logical block of its
    chunk, the partial results grown into their subtrees of the pass's one
    tree (:func:`_grow`); with ``whole`` (the pass's only chunk) the tree's
    root, finalized (no task after it: on a cluster each costs a hop)."""

    blocks = _loaded(blocks)
    size = next(b for b in blocks if b is not None).shape[0]
    nodes = []
    with numpy_form(small):
        for s0, sl in _pieces(start, size, rows):
            part = run_chunk(bp, s0, [None if b is None else b[sl] for b in blocks], params)
            nodes.append((0, s0 // rows, part))
    nodes = _grow(nodes, n_leaves, split_every, bp.combine)
    return _root(nodes, bp.finalize) if whole else nodes


def _map_chunk(bp, rows, small, start, params, *blocks):
    """A map pass's task: the chunk kernel on every logical block of its
    chunk, outputs joined in row order."""

    blocks = _loaded(blocks)
    size = next(b for b in blocks if b is not None).shape[0]
    with numpy_form(small):
        outs = [np.asarray(run_chunk(bp, s0, [None if b is None else b[sl] for b in blocks], params))
                for s0, sl in _pieces(start, size, rows)]
    return outs[0] if len(outs) == 1 else np.concatenate(outs, axis=0)


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


def _block_tasks(bp, arrays, params, token, inline=False, block_rows=None, small=False, split_every=8,
                 fixed=True, whole=False):
    """``(n_rows, delayed chunk call)`` for every chunk of the aligned
    inputs (whole logical blocks each), all depending on ONE key that holds
    ``params``. A reduce pass's task returns its logical blocks' partial
    results as nodes of the pass's tree (:func:`_reduce_chunk`); a map
    pass's its rows' outputs (:func:`_map_chunk`). With ``inline`` (reduce
    passes, whose block results are small) each task loads its input
    blocks itself where :func:`_inline_loads` allows it. ``fixed=False``
    (a map pass that only selects rows) keeps the inputs' chunks."""
    import dask

    aligned = _align(arrays, block_rows, fixed=fixed)
    lead = aligned[0]
    rows = block_rows_of(lead, block_rows)
    n_leaves = len(_row_slices(int(lead.shape[0]), rows))
    starts = _block_starts(lead.chunks[0])
    block_lists = _keyed_blocks(aligned)
    if inline:
        block_lists = _inline_loads(aligned, block_lists) or block_lists
    p = _params_key(bp, params, token)
    if bp.kind == "reduce":
        func = partial(_reduce_chunk, bp, rows, n_leaves, int(split_every), bool(small), bool(whole))
    else:
        func = partial(_map_chunk, bp, rows, bool(small))
    call = dask.delayed(func, pure=True)
    for i, size in enumerate(lead.chunks[0]):
        blocks = [None if bl is None else bl[i] for bl in block_lists]
        yield int(size), call(int(starts[i]), p, *blocks, dask_key_name=f"{bp.name}-{token}-{i}")


def _tree(parts, combine, split_every, delayed=None, name=None):
    """The pass's one tree over its logical blocks' partial results, in
    block order: groups of ``split_every`` consecutive results combined,
    level after level (a group of one is passed up as it is). With
    ``delayed``, the groups are tasks (their items are pieces of the tree,
    joined by :func:`_grow`)."""
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


def _level_sizes(n_leaves, split_every):
    """Nodes per level of the tree over ``n_leaves`` leaves (the root's level last)."""
    sizes = [max(int(n_leaves), 1)]
    while sizes[-1] > 1:
        sizes.append(-(-sizes[-1] // split_every))
    return sizes


def _grow(nodes, n_leaves, split_every, combine):
    """Nodes ``(level, index, value)`` of the tree of :func:`_tree` over
    ``n_leaves`` leaves, covering consecutive leaves in order: every group
    of siblings that is complete here combined into its parent, level
    after level, exactly as :func:`_tree` combines them. Pieces of the tree
    grown by different tasks and grown again together therefore give the
    same bits as the whole tree grown at once."""
    sizes = _level_sizes(n_leaves, split_every)
    grown = True
    while grown:
        grown = False
        out: list = []
        i = 0
        while i < len(nodes):
            m, j, v = nodes[i]
            if m + 1 < len(sizes) and j % split_every == 0:
                count = min(split_every, sizes[m] - j)
                group = nodes[i:i + count]
                if len(group) == count and all(g[0] == m and g[1] == j + c for c, g in enumerate(group)):
                    values = [g[2] for g in group]
                    out.append((m + 1, j // split_every, combine(values) if count > 1 else values[0]))
                    i += count
                    grown = True
                    continue
            out.append(nodes[i])
            i += 1
        nodes = out
    return nodes


def _join_grown(n_leaves, split_every, combine, pieces):
    """Pieces of the tree (lists of nodes from consecutive chunks) joined and grown."""
    return _grow([node for piece in pieces for node in piece], n_leaves, split_every, combine)


def _join_root(n_leaves, split_every, combine, finalize, pieces):
    """The last pieces of the tree joined, grown to the root and finalized (the pass's last task)."""
    return _root(_join_grown(n_leaves, split_every, combine, pieces), finalize)


def _root(nodes, finalize):
    """The root's value of a fully grown tree, finalized."""
    if len(nodes) != 1:
        raise RuntimeError(f"The reduction tree did not close ({len(nodes)} pieces left; this is a bug).")
    value = nodes[0][2]
    return finalize(value) if finalize is not None else value


def build_reduction(bp: Pass, *arrays: Any, params: dict | None = None, split_every: int = 8,
                    block_rows: int | None = None, small: bool = False) -> Any:
    """The lazy (``dask.delayed``) graph of :func:`map_reduce` for array inputs.

    One task per chunk (whole logical blocks; a partial result per logical
    block), all depending on ONE key that holds ``params``; combine tasks
    (fan-in ``split_every``) join the pieces of the pass's one tree over the
    logical blocks (:func:`_grow`); the pass's finalize at the root. The
    result is the same bits as the in-process pass over the same rows.
    """
    import dask

    arrays = tuple(as_array(a) for a in arrays)
    _check_pass(bp, "reduce", arrays)
    token = _token(bp, params, arrays, split_every, block_rows)
    rows = block_rows_of(arrays[0], block_rows)
    n_leaves = len(_row_slices(int(arrays[0].shape[0]), rows))
    aligned = _align(arrays, block_rows)
    whole = sum(1 for c in aligned[0].chunks[0] if c > 0) == 1
    parts = [d for size, d in _block_tasks(bp, aligned, params, token, inline=True, block_rows=block_rows,
                                           small=small, split_every=split_every, whole=whole) if size > 0]
    if not parts:
        raise ValueError("All blocks of the input are empty (0 rows); nothing to reduce.")
    if whole:  # one chunk: its task returns the finalized root
        return parts[0]
    join = partial(_join_grown, n_leaves, int(split_every), bp.combine)
    level = 0
    while len(parts) > split_every:  # the tree's levels, until one task can join the rest into the root
        groups = [parts[i:i + split_every] for i in range(0, len(parts), split_every)]
        parts = [dask.delayed(join, pure=True)(g, dask_key_name=f"{bp.name}-combine-{token}-{level}-{j}")
                 if len(g) > 1 else g[0] for j, g in enumerate(groups)]
        level += 1
    finish = partial(_join_root, n_leaves, int(split_every), bp.combine, bp.finalize)
    return dask.delayed(finish, pure=True)(parts, dask_key_name=f"{bp.name}-root-{token}")
