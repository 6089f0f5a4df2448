"""Passes over pairs of row blocks: every query block against every data
block (:func:`block_pairs`, :func:`cross_pairs`) and the rows of a coarse
partition gathered per part (:func:`partition_pairs`)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from ..kernels import Pass
from .blocks import (
    _align,
    _auto_rows,
    _block_starts,
    _check_pass,
    _is_dask,
    _keyed_blocks,
    _params_key,
    _token,
    _tree,
    as_array,
)
from .choose import compute

if TYPE_CHECKING:
    from ..kernels.knn import Cells


def block_pairs(bp: Pass, data: Any, *, outputs: tuple, params: dict | None = None, scheduler: Any = None,
                split_every: int = 8, block_rows: int = 16384, min_rows: int = 1, min_blocks: int = 4,
                progress: bool = False) -> tuple:
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
    per_output: list[list] = [[] for _ in outputs]
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


def cross_pairs(bp: Pass, queries: Any, *data: Any, outputs: tuple, params: dict | None = None,
                query_inputs: dict | None = None, scheduler: Any = None, query_rows: int = 4096, split_every: int = 8,
                progress: bool = False) -> tuple:
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
    numpy arrays with one row per query row (computed here). Numpy queries,
    query inputs and data arrays go to the workers of a distributed
    scheduler by ``scatter``, block by block (:func:`~.placement.persist`),
    not inside the graph (a saved SMIC's eigenvectors and the new rows'
    neighbour lists made an 11 MB graph for 80 000 rows).
    """
    import dask
    import dask.array as da

    from .placement import persist

    params = dict(params or {})
    arrays = [as_array(a) for a in data]
    lazy = [a for a in arrays if a is not None and _is_dask(a)]
    data_rows = int(max(lazy[0].chunks[0])) if lazy else _auto_rows(arrays[0])
    arrays = [a if a is None or _is_dask(a) else persist(np.asarray(a), scheduler=scheduler, chunk_rows=data_rows)
              for a in arrays]
    _check_pass(bp, "reduce", arrays)
    q = as_array(queries)
    n_q = int(q.shape[0])
    if n_q == 0:
        return tuple(np.zeros((0,) + tuple(trailing), dtype=dtype) for _, dtype, trailing in outputs)
    rows = max(1, int(query_rows))

    def q_blocks(a):
        a = as_array(a)
        a = a.rechunk({0: rows}) if _is_dask(a) else persist(np.asarray(a), scheduler=scheduler, chunk_rows=rows)
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
    per_output: list[list] = [[] for _ in outputs]
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


def _cells_build(bp, params, threads, *pieces):
    """One part's build with up to ``threads`` threads (no more than this
    host's cores): its share of the runner's threads."""
    import os

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return bp.build(list(pieces), threads=max(1, min(int(threads), cores)), **params)


def _cells_scatter(bp, bounds, answer):
    return bp.scatter(*answer, bounds=bounds)


def _cells_join(bp, params, rows, *pieces):
    return bp.join(list(pieces), rows=rows, **params)


def partition_pairs(bp: Cells, data: Any, *, n_parts: int, outputs: tuple, params: dict | None = None,
                    build_params: dict | None = None, join_params: dict | None = None, block_rows: int | None = None,
                    costs: Any = None, needs: Any = None, scheduler: Any = None, progress: bool = False) -> tuple:
    """A search through a coarse partition of the rows (``bp``: a
    :class:`~infoclust_dask.kernels.knn.Cells` blueprint), in one graph:

    1. every row block splits its rows into ``n_parts`` pieces
       (``bp.split``: a part's own rows and the rows of other parts it
       needs beside them);
    2. every part gathers its pieces and answers its own rows in one task
       (``bp.build``: e.g. an index over the part, searched and dropped;
       called with ``threads``: the runner's threads over the parts, at
       least 1 and at most the host's cores - a build must give the same
       answer for any number);
    3. the answers travel back to the row blocks (``bp.scatter``, one piece
       per block) and each block joins its pieces (``bp.join``).

    ``params`` go to split, ``build_params`` to build, ``join_params`` to
    join; ``outputs`` gives ``(dtype, trailing_shape)`` of each array of a
    join's tuple. ``costs``: a number per part (e.g. its expected rows);
    the builds get dask priorities by cost, so a worker starts the
    costliest of the builds it holds first (the longest first keeps the last one short - the 8 cells of 2e6 rows, two of them
    twice the others' size, built in 62-73 s on 2 single-threaded workers
    in the parts' order, 55 s costliest first), and on a ``distributed``
    scheduler each build is placed on a worker by :func:`placed` (the
    scheduler may still move it; ``needs``: the bytes each part's build
    holds, so that none is placed on a worker without room for it):
    scheduling hints only, the answers do not depend on them. Returns them as a tuple of lazy dask arrays of ``n`` rows
    (for dask input) or numpy arrays (computed here). No task holds more
    than one part and its pieces, and nothing a part builds outlives its
    task: only the answers (one per row) wait for the join."""
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
    # a part's build may use the runner's threads that the parts leave idle (the same answer for any number:
    # the blueprint's promise; left out of the keys)
    from .choose import resolve_scheduler

    runner = resolve_scheduler(scheduler)
    threads = max(1, runner.threads_total() // P)
    where: list = [None] * P
    if costs is not None:
        if len(costs) != P:
            raise ValueError(f"costs has {len(costs)} numbers; there are n_parts = {P} parts.")
        ranks = np.empty(P, dtype=np.int64)  # the costliest part gets the highest priority (ties: the first part)
        ranks[np.lexsort((-np.arange(P), np.asarray(costs, dtype=np.float64)))] = np.arange(P)
        where = placed(costs, runner.slots(), needs)
    answers = []
    for g in range(P):  # the costliest parts first: the last one started is not the longest (dask priorities)
        hint = {} if where[g] is None else {"workers": [where[g]], "allow_other_workers": True}
        with dask.annotate(priority=0 if costs is None else int(ranks[g]), **hint):
            answers.append(task(partial(_cells_build, bp, build_params, threads),
                                *[splits[b][g] for b in range(len(sizes))], key=f"build-{g}"))
    back = [task(partial(_cells_scatter, bp, bounds), answers[g], key=f"scatter-{g}") for g in range(P)]
    joins = [task(partial(_cells_join, bp, join_params), sizes[b], *[back[g][b] for g in range(P)], key=f"join-{b}")
             for b in range(len(sizes))]
    result = tuple(
        da.concatenate([da.from_delayed(dask.delayed(_pick, pure=True)(joins[b], k),
                                        shape=(sizes[b],) + tuple(trailing), dtype=dtype) for b in range(len(sizes))])
        for k, (dtype, trailing) in enumerate(outputs))
    if lazy:
        return result
    return tuple(np.asarray(r) for r in compute(result, scheduler=scheduler, progress=progress))


def placed(costs: Any, slots: dict[str, tuple[int, int]], needs: Any = None) -> list:
    """The worker each part's build is placed on: the longest-processing-
    time-first rule (Graham 1969) on the parts' ``costs``, each part in
    turn (costliest first, ties: the first part) to the worker whose
    placed cost with it, per thread, is least (ties: the first address),
    among the workers with room for the part (``needs[g]`` bytes at most
    their room; ``None`` for a part no worker has room for: the scheduler
    places it) - a hint the scheduler may override (a worker lost, a task
    stolen), never an input of the answers. ``slots``: address ->
    (threads, room in bytes), :meth:`~.runner.Runner.slots`; ``None`` for
    every part when it has fewer than two workers.

    Left to the scheduler, which cannot know the builds' durations before
    the first ends, the 8 builds of a 2e6-row SMIC search were held mostly
    by one worker in the first fit on a new cluster, and the other stood
    idle 8-16 s of the search's 56 s (docs/BENCHMARKS.md)."""
    costs = np.asarray(costs, dtype=np.float64)
    if len(slots) < 2:
        return [None] * len(costs)
    names = sorted(slots)
    per = np.array([float(max(1, slots[w][0])) for w in names])
    room = np.array([float(slots[w][1]) for w in names])
    need = np.zeros(len(costs)) if needs is None else np.asarray(needs, dtype=np.float64)
    load = np.zeros(len(names))
    out: list = [None] * len(costs)
    for g in np.lexsort((np.arange(len(costs)), -costs)).tolist():
        c = max(0.0, float(costs[g]))
        finish = np.where(room >= need[g], (load + c) / per, np.inf)
        if not np.isfinite(finish).any():
            continue  # no worker has room now: the scheduler's choice
        w = int(np.argmin(finish))  # argmin: the first of equal loads
        out[g] = names[w]
        load[w] += c
    return out


def _pick(result, key):
    return np.asarray(result[key])


def _call_cross(bp, names, xq, qextra, d_start, params, *blocks):
    kw = {**params, **dict(zip(names, qextra, strict=True)), "xq": xq}
    if bp.start:
        return bp.chunk(*blocks, start=d_start, **kw)
    return bp.chunk(*blocks, **kw)


def _call_pair(bp, xq, xd, q_start, d_start, params):
    return bp.chunk(xq, xd, q_start=q_start, d_start=d_start, **params)
