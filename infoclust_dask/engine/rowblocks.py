"""Objects kept where they are made, one per row block (:class:`RowBlocks`),
and the all-to-all :func:`exchange` that makes them."""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

import numpy as np

from .blocks import _align, _auto_rows, _block_starts, _is_dask, _keyed_blocks, _same_rows, as_array
from .choose import Runner, resolve_scheduler


class RowBlocks:
    """One object per row block (e.g. the rows of a sparse matrix), made by
    :func:`exchange` and kept where it was made: in the workers' memory on a
    ``distributed`` scheduler (futures), in this process otherwise.
    :meth:`apply` runs a function on every block with one shared argument
    (e.g. the vector of a matrix-vector product: sent to each worker once
    per call) and returns the per-block results in row order. Call
    :meth:`release` (or drop the object) to free the blocks."""

    def __init__(self, sched: Runner, blocks: list | None, starts: list[int], sizes: list[int], name: str,
                 keep: Any = None) -> None:
        self.sched, self.blocks, self.name = sched, blocks, name
        self.starts, self.sizes = list(starts), list(sizes)
        self.calls = 0
        # scattered inputs the blocks were made from: a block lost with a worker is made again from them
        self._keep = keep

    @property
    def n_rows(self) -> int:
        return int(sum(self.sizes))

    def apply(self, func: Callable[[Any, Any], Any], shared: Any = None) -> list:
        """``[func(block, shared) for block in blocks]``, where the blocks are."""
        self.calls += 1
        if self.blocks is None:
            raise RuntimeError(f"{self.name}: the row blocks were released.")
        return self.sched.apply(self.blocks, func, shared, f"{self.name}-apply-{self.calls}")

    def release(self) -> None:
        if self.blocks is not None:
            self.sched.release(self.blocks)
        self.blocks = self._keep = None


def _exchange_split(split, params, shared, bounds, start, *blocks):
    return split(*blocks, start=start, bounds=bounds, **params, **shared)


def _exchange_join(join, params, shared, n, start, incoming, *blocks):
    return join(*blocks, list(incoming), start=start, n=n, **params, **shared)


def exchange(split: Callable[..., Any], join: Callable[..., Any], *arrays: Any, params: dict | None = None,
             shared: Any = None, block_rows: int | None = None, scheduler: Any = None, name: str = "exchange",
             progress: bool = False) -> RowBlocks:
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
    arrays = tuple(as_array(a) for a in arrays)
    if any(_is_dask(a) for a in arrays):
        aligned = _align(arrays, fixed=block_rows is None)
        if block_rows is not None:
            aligned = [a.rechunk({0: int(block_rows)}) for a in aligned]
    else:
        _same_rows(arrays)
        rows = int(block_rows or _auto_rows(arrays[0]))
        aligned = [sched.persist(a, chunk_rows=rows) for a in arrays]
    aligned = [a.rechunk({1: -1}) if a.ndim == 2 and len(a.chunks[1]) > 1 else a for a in aligned]
    sizes = list(aligned[0].chunks[0])
    bounds = _block_starts(sizes)
    starts = bounds[:-1]
    n = int(bounds[-1])
    token = tokenize(split, join, params, {k: tokenize(v) for k, v in (shared or {}).items()}, *aligned)
    shared = {k: sched.broadcast(np.asarray(v)) for k, v in (shared or {}).items()}
    block_lists = _keyed_blocks(aligned)
    sp = dask.delayed(partial(_exchange_split, split, params), pure=True)
    jn = dask.delayed(partial(_exchange_join, join, params), pure=True)
    splits = [sp(shared, [int(b) for b in bounds], int(starts[i]), *[bl[i] for bl in block_lists],
                 dask_key_name=f"{name}-split-{token}-{i}") for i in range(len(sizes))]
    joins = [jn(shared, n, int(starts[b]), [splits[s][b] for s in range(len(sizes))],
                *[bl[b] for bl in block_lists], dask_key_name=f"{name}-join-{token}-{b}")
             for b in range(len(sizes))]
    blocks = sched.keep(joins, progress=progress)
    return RowBlocks(sched, blocks, starts, sizes, name, keep=shared)
