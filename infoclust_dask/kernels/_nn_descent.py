"""NN-descent: an approximate ``k``-nearest-neighbour graph of one set of
rows (Dong, Charikar & Li 2011, *Efficient k-nearest neighbor graph
construction for generic similarity measures*, WWW), compiled (numba,
cached on disk like every kernel of this package: ``infoclust compile``
builds it once per installation, where pynndescent's loops compiled
again in every worker process: 48-66 s before a worker's first cell).
One 2e5-row cell of 16-dimensional Gaussian rows, ``n_neighbors`` 26, one
thread on a 2-core Zen 4 EPYC: 8.4-8.8 s at recall 0.9940, 5.1 s on two
threads (2026-12-06; 11.4-12.7 s before the candidates were sampled row
by row, the updates prefetched and a row's candidates copied side by
side; on the Zen 3 EPYC 13.8-14.5 s then, pynndescent 0.7 13.2 s warm,
45.4 s in a new process). On a 2-core Zen 5 EPYC, width 28, interleaved
with the code before ``tops``, the next row's prefetch and the compiled
answer sort (``benchmarks/nn_descent_ab.py``, 2026-12-07): 2e5 rows
8.87 s against 10.30 (medians of 3), 1e6 rows 55.8 against 59.7 (one
turn of three the other way: the lists' random reads dominate there).

The algorithm, as in the paper with the refinements of pynndescent
(McInnes), which this module replaces:

1. **Start**: random-projection trees (each node split by the bisector of
   two of its rows drawn at random, down to leaves of at most
   ``n_neighbors`` rows); every pair inside a leaf is offered to both
   rows' lists; rows with lists still short get random rows.
2. **Rounds**: each row's neighbours flagged *new* since the last round
   and its *old* ones, together with the reverse neighbours (the rows
   listing it), sampled down to ``max_candidates`` each (a seeded
   reservoir: a row's own entries first,
   :mod:`~infoclust_dask.kernels._nn_candidates`; random
   priorities in a heap, pynndescent's way, took 1.1-1.4 s a round of a
   2e5-row cell against 0.4-0.65); every pair of candidates of a row (new with new, new with
   old) is offered to both rows' lists (the *local join*: a neighbour of
   my neighbour is likely my neighbour). Stops after ``n_iters`` rounds
   or when a round changes fewer than ``delta * n * n_neighbors`` entries.

The search runs on the rows in the leaf order of one more tree (rows near
each other in space near each other in memory) and answers in the rows'
own numbers.

A round's local join runs in steps of :data:`STEP_ROWS` rows: the pairs
of a step's rows are measured against the lists as they stand (blocks of
the step side by side on ``threads`` threads), then the pairs that may
enter a list are pushed, each row's in the order they were met (parts of
the rows side by side). A list keeps the nearest of the entries offered
to it whatever their order, but for equal distances and the count of
changes that ends the rounds: both fixed by the steps, not the threads.
The updates ask for the heap of the update :data:`AHEAD` on before they
reach it (:func:`~infoclust_dask.kernels._prefetch.prefetch`): the lists
are larger than the caches and a row's heap is met at random.
Each list's largest distance (its heap's root) is also kept in ``tops``,
4 bytes a row: the join and the updates compare with it there (a 1e6-row
cell's ``tops`` fits the caches, its lists do not), and the join asks for
the next row's candidates' rows while it joins this row's.

Deterministic: a seeded splitmix64 stream, entries offered in row order,
equal distances keeping the entry already listed: the same rows and seed
give the same graph on every runner, thread count and memory size. The float32 distances that steer the search are summed in
the order the compiler picks for the CPU (``fastmath``, as pynndescent's;
summed strictly in order they cost 29 ns a pair against 10), so two CPU
models may differ in the last bit of a distance and, on a near tie, in a
candidate; the lists a caller keeps are re-ranked by exact float64
distances (:func:`~infoclust_dask.kernels.knn.cell_build`).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from functools import partial

import numba
import numpy as np

from ._cache import can_cache
from ._nn_candidates import candidates, mix64, row_part
from ._prefetch import prefetch_item, prefetch_row

__all__ = ["nn_descent"]

CACHE = can_cache()


@numba.njit(cache=CACHE, nogil=True)
def _next(state):  # pragma: no cover - compiled
    """splitmix64: the next 64-bit value of the stream ``state`` (a 1-element uint64 array)."""
    state[0] += np.uint64(0x9E3779B97F4A7C15)
    return mix64(state[0])


@numba.njit(cache=CACHE, nogil=True)
def _below(state, m):  # pragma: no cover - compiled
    """A draw in ``0 .. m - 1``."""
    return np.int64(_next(state) % np.uint64(m))


@numba.njit(cache=CACHE, nogil=True, fastmath=True)
def _dist(x, a, b):  # pragma: no cover - compiled
    """Squared distance of rows ``a`` and ``b`` (float32; the compiler may
    sum in any order, vectorized: 29 ns a pair summed in order, 10 with
    ``fastmath``, 16 features)."""
    s = np.float32(0.0)
    for k in range(x.shape[1]):
        t = x[a, k] - x[b, k]
        s += t * t
    return s


@numba.njit(cache=CACHE, nogil=True)
def _push(keys, ids, flags, row, key, j, flag):  # pragma: no cover - compiled
    """Offer ``j`` with ``key`` to row ``row``'s max-heap (``keys[row, 0]``
    the largest): taken when smaller than the largest and not listed yet.
    Returns 1 when taken."""
    k = keys.shape[1]
    if not key < keys[row, 0]:
        return 0
    for s in range(k):
        if ids[row, s] == j:
            return 0
    # sift down from the root, the new entry replacing it
    pos = 0
    while True:
        left = 2 * pos + 1
        right = left + 1
        if left >= k:
            break
        child = left
        if right < k and keys[row, right] > keys[row, left]:
            child = right
        if keys[row, child] <= key:
            break
        keys[row, pos] = keys[row, child]
        ids[row, pos] = ids[row, child]
        flags[row, pos] = flags[row, child]
        pos = child
    keys[row, pos] = key
    ids[row, pos] = j
    flags[row, pos] = flag
    return 1


@numba.njit(cache=CACHE, nogil=True)
def _offer(x, dist, ids, flags, tops, p, q):  # pragma: no cover - compiled
    """The pair ``(p, q)`` offered to both rows' lists (as new entries)."""
    if p == q:
        return 0
    d = _dist(x, p, q)
    c = 0
    if d < tops[p] and _push(dist, ids, flags, p, d, q, np.uint8(1)):
        tops[p] = dist[p, 0]
        c += 1
    if d < tops[q] and _push(dist, ids, flags, q, d, p, np.uint8(1)):
        tops[q] = dist[q, 0]
        c += 1
    return c


@numba.njit(cache=CACHE, nogil=True, fastmath=True)
def _tree_leaves(x, leaf, seed):  # pragma: no cover - compiled
    """One random-projection tree (seeded): the rows in the order of its
    leaves, and the leaves (first, end) in the order they were reached.
    A node's rows are read :data:`TREE_AHEAD` rows ahead of the side test
    (below the root they lie scattered over ``x``)."""
    state = np.empty(1, dtype=np.uint64)
    state[0] = np.uint64(seed)
    n, dim = x.shape
    order = np.arange(n)
    stack = np.empty((2 * n + 2, 2), dtype=np.int64)
    stack[0, 0] = 0
    stack[0, 1] = n
    top = 1
    side = np.empty(n, dtype=np.uint8)
    tmp = np.empty(n, dtype=np.int64)
    leaves = np.empty((n + 1, 2), dtype=np.int64)
    n_leaves = 0
    while top > 0:
        top -= 1
        lo = stack[top, 0]
        hi = stack[top, 1]
        size = hi - lo
        if size <= leaf:
            leaves[n_leaves, 0] = lo
            leaves[n_leaves, 1] = hi
            n_leaves += 1
            continue
        a = order[lo + _below(state, size)]
        b = order[lo + _below(state, size)]
        left = 0
        for s in range(lo, hi):
            if s + TREE_AHEAD < hi:
                prefetch_row(x, order[s + TREE_AHEAD])
            r = order[s]
            v = np.float32(0.0)
            for k in range(dim):  # which side of the bisector of rows a and b
                v += (x[a, k] - x[b, k]) * (x[r, k] - np.float32(0.5) * (x[a, k] + x[b, k]))
            if v > 0 or (v == 0 and (_next(state) & np.uint64(1)) == 1):
                side[s] = 1
                left += 1
            else:
                side[s] = 0
        if left == 0 or left == size:  # no split (equal rows): halves at random
            for s in range(lo, hi):
                side[s] = np.uint8(s - lo < size // 2)
            left = size // 2
        # stable partition of order[lo:hi] by side (1 first)
        u = 0
        for s in range(lo, hi):
            if side[s] == 1:
                tmp[u] = order[s]
                u += 1
        for s in range(lo, hi):
            if side[s] == 0:
                tmp[u] = order[s]
                u += 1
        order[lo:hi] = tmp[:size]
        stack[top, 0] = lo
        stack[top, 1] = lo + left
        stack[top + 1, 0] = lo + left
        stack[top + 1, 1] = hi
        top += 2
    return order, leaves[:n_leaves].copy()


@numba.njit(cache=CACHE, nogil=True, fastmath=True)
def _join_updates(x, tops, new_i, old_i, lo, hi, n_parts):  # pragma: no cover - compiled
    """The local join of rows ``lo .. hi - 1`` (new with new, new with old) against
    the lists as they stand (read only): every pair closer than one of its
    rows' largest listed distance becomes an update ``(row, distance,
    other)`` for that row, in the order met; returned grouped by the
    row's part (:func:`~infoclust_dask.kernels._nn_candidates.row_part`; order kept within a part) with
    each part's offsets. A row's candidates (new, then old) and their
    lists' largest distances are copied side by side first (per pair from
    the rows in place: 1.57-1.61 s a round of a 2.5e5-row cell against
    1.30-1.39)."""
    nc = new_i.shape[1]
    dim = x.shape[1]
    cap = 1024
    up_r = np.empty(cap, dtype=np.int32)
    up_j = np.empty(cap, dtype=np.int32)
    up_d = np.empty(cap, dtype=np.float32)
    cid = np.empty(2 * nc, dtype=np.int64)
    top = np.empty(2 * nc, dtype=np.float32)
    cx = np.empty((2 * nc, dim), dtype=np.float32)
    m_up = 0
    for i in range(lo, hi):
        if i + 1 < hi:  # the next row's candidates asked for now: they arrive while this row is joined
            _prefetch_candidates(x, new_i, old_i, i + 1)
        n_new = 0
        for a in range(nc):
            if new_i[i, a] >= 0:
                cid[n_new] = new_i[i, a]
                n_new += 1
        if n_new == 0:
            continue
        m = n_new
        for b in range(nc):
            if old_i[i, b] >= 0:
                cid[m] = old_i[i, b]
                m += 1
        for u in range(m):  # the candidates' rows and largest listed distances copied once a row
            q = cid[u]
            top[u] = tops[q]
            for k in range(dim):
                cx[u, k] = x[q, k]
        if m_up + 2 * n_new * m > cap:  # room for this row's updates (at most two a pair)
            while m_up + 2 * n_new * m > cap:
                cap *= 2
            up_r = _grown(up_r, cap, m_up)
            up_j = _grown(up_j, cap, m_up)
            up_d = _grown(up_d, cap, m_up)
        for a in range(n_new):
            p = cid[a]
            tp = top[a]
            for u in range(a + 1, m):
                q = cid[u]
                if q == p:  # an old candidate that is also new
                    continue
                d = np.float32(0.0)
                for k in range(dim):
                    t = cx[a, k] - cx[u, k]
                    d += t * t
                if d < tp:
                    up_r[m_up] = p
                    up_j[m_up] = q
                    up_d[m_up] = d
                    m_up += 1
                if d < top[u]:
                    up_r[m_up] = q
                    up_j[m_up] = p
                    up_d[m_up] = d
                    m_up += 1
    return _grouped(up_r, up_j, up_d, m_up, n_parts)


@numba.njit(cache=CACHE, nogil=True)
def _prefetch_candidates(x, new_i, old_i, i):  # pragma: no cover - compiled
    """The rows of ``x`` of row ``i``'s candidates asked for (old ones only
    when it has a new one: the join skips it otherwise)."""
    if new_i[i, 0] < 0:
        return
    for a in range(new_i.shape[1]):
        if new_i[i, a] >= 0:
            prefetch_row(x, new_i[i, a])
    for a in range(old_i.shape[1]):
        if old_i[i, a] >= 0:
            prefetch_row(x, old_i[i, a])


@numba.njit(cache=CACHE, nogil=True)
def _grouped(up_r, up_j, up_d, m_up, n_parts):  # pragma: no cover - compiled
    """The first ``m_up`` updates grouped by their row's part, the order
    kept within a part (a counting sort), with each part's offsets."""
    offsets = np.zeros(n_parts + 1, dtype=np.int64)
    for u in range(m_up):
        offsets[row_part(up_r[u], n_parts) + 1] += 1
    for g in range(n_parts):
        offsets[g + 1] += offsets[g]
    fill = offsets[:-1].copy()
    out_r = np.empty(m_up, dtype=np.int32)
    out_j = np.empty(m_up, dtype=np.int32)
    out_d = np.empty(m_up, dtype=np.float32)
    for u in range(m_up):
        g = row_part(up_r[u], n_parts)
        v = fill[g]
        out_r[v] = up_r[u]
        out_j[v] = up_j[u]
        out_d[v] = up_d[u]
        fill[g] = v + 1
    return out_r, out_j, out_d, offsets


@numba.njit(cache=CACHE, nogil=True)
def _grown(a, cap, used):  # pragma: no cover - compiled
    out = np.empty(cap, dtype=a.dtype)
    out[:used] = a[:used]
    return out


@numba.njit(cache=CACHE, nogil=True)
def _apply_updates(dist, ids, flags, tops, up_r, up_j, up_d, start, stop):  # pragma: no cover - compiled
    """Updates ``start .. stop - 1`` pushed in order (:func:`_push`), each
    row's largest listed distance kept in ``tops``; returns the entries
    changed."""
    changed = 0
    for u in range(start, stop):
        if u + AHEAD < stop:  # the heap of the update AHEAD on asked for now (AHEAD: measured)
            _prefetch_rows(dist, ids, flags, up_r[u + AHEAD])
        r = up_r[u]
        d = up_d[u]
        if d < tops[r] and _push(dist, ids, flags, r, d, up_j[u], np.uint8(1)):
            tops[r] = dist[r, 0]
            changed += 1
    return changed


@numba.njit(cache=CACHE, nogil=True)
def _prefetch_rows(dist, ids, flags, r):  # pragma: no cover - compiled
    """Row ``r`` of the lists asked for (its first and last byte in each;
    the flags' first)."""
    prefetch_row(dist, r)
    prefetch_row(ids, r)
    prefetch_item(flags, r)


@numba.njit(cache=CACHE, nogil=True, fastmath=True)
def _leaf_updates(x, tops, order, leaves, a, b, n_parts):  # pragma: no cover - compiled
    """Every pair inside leaves ``a .. b - 1`` of one tree (rows ``order``)
    against the lists as they stand: an update for each row of a pair
    closer than its largest listed distance, grouped as
    :func:`_join_updates`'s. (The updates written out here as there: one
    inlined helper for both made a 2e5-row cell 16.4 s against 11.8 on
    one thread.)"""
    rows = 0
    for f in range(a, b):
        size = leaves[f, 1] - leaves[f, 0]
        rows += size * (size - 1)
    up_r = np.empty(rows, dtype=np.int32)
    up_j = np.empty(rows, dtype=np.int32)
    up_d = np.empty(rows, dtype=np.float32)
    m_up = 0
    for f in range(a, b):
        if f + 1 < b:  # the next leaf's rows asked for now: they arrive while this leaf's pairs are measured
            _prefetch_leaf(x, tops, order, leaves[f + 1, 0], leaves[f + 1, 1])
        for u in range(leaves[f, 0], leaves[f, 1]):
            p = order[u]
            for v in range(u + 1, leaves[f, 1]):
                q = order[v]
                d = np.float32(0.0)
                for k in range(x.shape[1]):
                    t = x[p, k] - x[q, k]
                    d += t * t
                if d < tops[p]:
                    up_r[m_up] = p
                    up_j[m_up] = q
                    up_d[m_up] = d
                    m_up += 1
                if d < tops[q]:
                    up_r[m_up] = q
                    up_j[m_up] = p
                    up_d[m_up] = d
                    m_up += 1
    return _grouped(up_r, up_j, up_d, m_up, n_parts)


@numba.njit(cache=CACHE, nogil=True)
def _prefetch_leaf(x, tops, order, lo, hi):  # pragma: no cover - compiled
    """The rows ``order[lo .. hi - 1]`` of ``x`` and their ``tops`` asked for."""
    for u in range(lo, hi):
        prefetch_row(x, order[u])
        prefetch_item(tops, order[u])


@numba.njit(cache=CACHE, nogil=True)
def _fill_short(x, dist, ids, flags, tops, state):  # pragma: no cover - compiled
    """Random rows offered to the lists still short after the trees."""
    n, n_neighbors = ids.shape
    for i in range(n):
        tries = 0
        while ids[i, 0] < 0 and tries < 4 * n_neighbors:
            _offer(x, dist, ids, flags, tops, i, _below(state, n))
            tries += 1


def _start(x, n_neighbors, n_trees, leaf, seed, run, shares):
    """The lists after the random-projection trees (each seeded from the
    stream, built side by side; their leaves' pairs offered tree after
    tree, in steps as a round's, :func:`_leaf_updates`) and random rows for
    lists still short, with the stream's state for the rounds."""
    n = x.shape[0]
    state = np.empty(1, dtype=np.uint64)
    state[0] = np.uint64(seed)
    dist = np.full((n, n_neighbors), np.inf, dtype=np.float32)
    ids = np.full((n, n_neighbors), -1, dtype=np.int32)
    flags = np.zeros((n, n_neighbors), dtype=np.uint8)
    tops = np.full(n, np.inf, dtype=np.float32)  # each list's largest distance (dist[:, 0]) in 4 bytes a row
    seeds = [int(_next(state)) & 0x3FFFFFFFFFFFFFFF for _ in range(n_trees)]
    for order, leaves in _trees(run, partial(_tree_leaves, x, leaf), seeds, len(shares)):
        rows = np.cumsum(leaves[:, 1] - leaves[:, 0])  # a step: the leaves reached until STEP_ROWS rows more
        cuts = np.unique(np.searchsorted(rows, np.arange(STEP_ROWS, n + STEP_ROWS, STEP_ROWS), side="right"))
        lo = 0
        for hi in cuts.tolist():
            if hi <= lo:
                continue
            block = -(-(hi - lo) // STEP_BLOCKS)
            spans = [(a, min(hi, a + block)) for a in range(lo, hi, block)]
            ups = list(run(partial(_leaves_joined, x, tops, order, leaves), spans))
            sum(run(partial(_applied, dist, ids, flags, tops, ups), shares))
            lo = hi
    _fill_short(x, dist, ids, flags, tops, state)
    return dist, ids, flags, tops, state


def _trees(run, build, seeds, workers):
    """The trees of ``seeds``, in their order, built ``workers`` at a time
    (no more held at once: 8 bytes a row each)."""
    for a in range(0, len(seeds), workers):
        yield from list(run(build, seeds[a:a + workers]))


def _leaves_joined(x, tops, order, leaves, span):
    return _leaf_updates(x, tops, order, leaves, span[0], span[1], ROW_PARTS)


#: the trees' side test reads a node's row this many rows on ahead (6 trees of a 1e6-row cell: 1.75-1.96 s at 16 or
#: 32, 2.2-2.9 s without)
TREE_AHEAD = 32
#: updates looked ahead: the row of the update this many on is prefetched (:func:`_apply_updates`; 8 / 16 / 32:
#: 0.52 / 0.52 / 0.56 s a round of a 2.5e5-row cell, none 0.87)
AHEAD = 16
#: rows of one step of a round: the lists change only between steps (the join of a step's rows reads them, then
#: its updates are pushed), so a step's blocks may be joined in parallel and its parts updated in parallel -
#: the same lists for any number of threads
STEP_ROWS = 8192
#: blocks of a step (joined independently) and parts of the rows (updated independently): fixed numbers, not the
#: threads'
STEP_BLOCKS = 4
ROW_PARTS = 8  # a power of two: a row's part is row_part(row, ROW_PARTS)


def _round(x, dist, ids, flags, tops, new_i, old_i, run, shares):
    """One round's local join in steps of :data:`STEP_ROWS` rows: a step's
    :data:`STEP_BLOCKS` blocks joined against the lists as they stand
    (:func:`_join_updates`), then its updates pushed part by part
    (:data:`ROW_PARTS` parts of the rows, each part's updates in the
    blocks' order, :func:`_apply_updates`). ``run`` (``map`` or a thread
    pool's) runs the blocks, then the parts (``shares``: each call's),
    side by side; the lists are the same for any number. Returns the
    entries changed."""
    n = x.shape[0]
    block = -(-STEP_ROWS // STEP_BLOCKS)
    changed = 0
    for lo in range(0, n, STEP_ROWS):
        spans = [(a, min(n, lo + STEP_ROWS, a + block)) for a in range(lo, min(n, lo + STEP_ROWS), block)]
        ups = list(run(partial(_joined, x, tops, new_i, old_i), spans))
        changed += sum(run(partial(_applied, dist, ids, flags, tops, ups), shares))
    return changed


def _joined(x, tops, new_i, old_i, span):
    return _join_updates(x, tops, new_i, old_i, span[0], span[1], ROW_PARTS)


def _applied(dist, ids, flags, tops, ups, parts):
    """The updates of the rows of ``parts``, every block's in order."""
    changed = 0
    for g in parts:
        for r, j, d, off in ups:
            if off[g + 1] > off[g]:
                changed += _apply_updates(dist, ids, flags, tops, r, j, d, off[g], off[g + 1])
    return changed


def nn_descent(x: np.ndarray, n_neighbors: int, *, max_candidates: int | None = None, n_iters: int | None = None,
               seed: int = 0, delta: float = 0.001, threads: int = 1) -> np.ndarray:
    """The approximate ``n_neighbors`` nearest other rows of every row of
    ``x`` (module notes), as ``(n, n_neighbors)`` int64 row numbers sorted
    by their float32 squared distance (ties: the smaller row), ``-1``
    where a row has fewer. ``max_candidates``: candidates a row takes per
    round (default ``min(60, n_neighbors)``); ``n_iters``: rounds at most
    (default ``max(5, round(log2 n))``); the random-projection trees:
    ``max(3, min(12, round(2 log10 n)))`` (pynndescent 0.7's defaults).
    ``threads``: the trees, the candidates' sampling
    (:mod:`~infoclust_dask.kernels._nn_candidates`) and the rounds' joins
    and updates on that many threads: the same graph for any number."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    n = x.shape[0]
    k = int(n_neighbors)
    if n == 0 or k < 1:
        return np.full((n, max(k, 0)), -1, dtype=np.int64)
    n_cand = int(min(60, k) if max_candidates is None else max_candidates)
    iters = int(max(5, round(np.log2(max(n, 2)))) if n_iters is None else n_iters)
    trees = int(max(3, min(12, round(2.0 * np.log10(max(n, 2))))))
    seed = int(seed) & 0x3FFFFFFFFFFFFFFF
    # the search runs on the rows in a tree's leaf order (its random reads then fall near each other: fewer
    # cache and TLB misses), the answer is given in the rows' own numbers
    perm = _tree_leaves(x, 256, seed ^ 0x2545F4914F6CDD1D)[0]
    xp = x[perm]
    workers = max(1, int(threads))
    pool = ThreadPoolExecutor(workers) if workers > 1 else None
    run = map if pool is None else pool.map
    shares = [range(w, ROW_PARTS, workers) for w in range(workers)]  # each thread's parts of the rows
    try:
        dist, ids, flags, tops, state = _start(xp, k, trees, max(k, 10), seed, run, shares)
        for _ in range(iters):
            new_i, old_i = candidates(ids, flags, n_cand, int(_next(state)), run, shares, ROW_PARTS)
            changed = _round(xp, dist, ids, flags, tops, new_i, old_i, run, shares)
            del new_i, old_i  # not held while the next round's are sampled: 8 bytes a row and candidate
            if changed <= float(delta) * n * k:
                break
    finally:
        if pool is not None:
            pool.shutdown()
    inverse = np.empty(n, dtype=np.int64)
    inverse[perm] = np.arange(n)
    return _answer(dist, ids, perm, inverse)


@numba.njit(cache=CACHE, nogil=True)
def _answer(dist, ids, perm, inverse):  # pragma: no cover - compiled
    """The lists in the rows' own order and numbers: row ``r``'s is row
    ``inverse[r]``'s of the search, sorted by distance (ties: the smaller
    position in leaf order; an insertion sort of each list, where numpy's
    ``lexsort`` and gathers of the whole arrays took 3.4 s of a 1e6-row
    cell), its entries mapped through ``perm``, ``-1`` where empty."""
    n, k = ids.shape
    out = np.empty((n, k), dtype=np.int64)
    d = np.empty(k, dtype=np.float32)
    j = np.empty(k, dtype=np.int64)
    for r in range(n):
        p = inverse[r]
        for s in range(k):  # insert entry s into the sorted d[:s], j[:s]
            ds = dist[p, s]
            js = np.int64(ids[p, s])
            c = s
            while c > 0 and (d[c - 1] > ds or (d[c - 1] == ds and j[c - 1] > js)):
                d[c] = d[c - 1]
                j[c] = j[c - 1]
                c -= 1
            d[c] = ds
            j[c] = js
        for s in range(k):
            out[r, s] = perm[j[s]] if j[s] >= 0 and d[s] < np.inf else -1
    return out
