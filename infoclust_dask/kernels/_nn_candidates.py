"""NN-descent's candidates (Dong, Charikar & Li 2011, section 2.3; the
sampling of pynndescent): each round, every row's neighbours flagged *new*
since the last round and its *old* ones, with its reverse neighbours (the
rows listing it), sampled down to ``n_cand`` each; the local join
(:mod:`~infoclust_dask.kernels._nn_descent`) then pairs them.

The reverse neighbours are gathered first (a counting sort of the lists'
entries), then every row's reservoirs are filled from its own entries and
its reverse ones in one sweep of the row (the reverse neighbours scattered
into every row's reservoir straight from the lists took 0.61 s of a
2.5e5-row cell's first round against 0.37). A row's offers come in the same
order (its own entries, then the rows listing it in row order) and its
draws are a function of (round seed, row, offer number), so the parts of
the rows may be served by any number of threads with the same result.
"""

from __future__ import annotations

from functools import partial
from typing import Callable

import numba
import numpy as np

from ._cache import can_cache

__all__ = ["candidates", "mix64", "row_part"]

CACHE = can_cache()


@numba.njit(cache=CACHE, nogil=True)
def mix64(z):  # pragma: no cover - compiled
    """splitmix64's finalizer of the 64-bit value ``z`` (Steele, Lea &
    Flood 2014): NN-descent's stream (``_next``) and the reservoirs'
    draws (:func:`_mix`)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@numba.njit(cache=CACHE, nogil=True)
def row_part(row, n_parts):  # pragma: no cover - compiled
    """The part of ``row`` among ``n_parts`` (a power of two): runs of 16
    rows dealt out in turn, by a mask rather than a division."""
    return (row >> 4) & (n_parts - 1)


@numba.njit(cache=CACHE, nogil=True)
def _mix(seed, row, s):  # pragma: no cover - compiled
    """A draw for the ``s``-th offer to ``row``'s reservoir in one round
    (``seed``): a function of the three, not of the order rows are served."""
    return mix64((seed ^ (np.uint64(row) * np.uint64(0xD1B54A32D192ED03))
                  ^ (np.uint64(s) * np.uint64(0x8CB92BA72F3D8DD7))) + np.uint64(0x9E3779B97F4A7C15))


@numba.njit(cache=CACHE, nogil=True)
def _keep_at(cand, row, seen, which, j, check, seed):  # pragma: no cover - compiled
    """Offer ``j`` to ``row``'s reservoir, row ``row`` of ``cand`` (its
    slots; each of the ``seen[which]`` distinct rows offered so far kept
    with equal chance, the draw from :func:`_mix`); ``check``: skip a row
    already kept. The table and the row number are passed, not the row's
    view: with a view made per offer, three rounds' candidates of a 1e6-row
    cell took 2.83, 2.64 and 1.49 s, against 2.35, 1.82 and 0.62
    (2026-12-07, one process, the same lists)."""
    m = cand.shape[1]
    s = seen[which]
    if check:
        for c in range(min(s, m)):
            if cand[row, c] == j:
                return
    seen[which] = s + 1
    if s < m:
        cand[row, s] = j
    else:
        r = np.int64(_mix(seed, row, s) % np.uint64(s + 1))
        if r < m:
            cand[row, r] = j


@numba.njit(cache=CACHE, nogil=True)
def _active(ids, flags):  # pragma: no cover - compiled
    """The rows that take part in a round: those with a new entry in
    their own list or listed by another row as new (every other row has
    no new candidate, so the join skips it; in the last rounds they are
    most rows)."""
    n, k = ids.shape
    active = np.zeros(n, dtype=np.uint8)
    for i in range(n):
        for s in range(k):
            if flags[i, s] == 1 and ids[i, s] >= 0:
                active[i] = 1
                active[ids[i, s]] = 1
    return active


@numba.njit(cache=CACHE, nogil=True)
def _reverse(ids, flags, mask, active):  # pragma: no cover - compiled
    """The rows listing each ``active`` row of the parts ``mask`` holds
    (``mask[row_part(row, len(mask))]``, a power of two long), in row
    order, with the entry's flag: offsets ``ptr`` (row ``j``'s at ``ptr[j] .. ptr[j + 1] - 1``),
    ``src``, ``flag`` (a counting sort of the lists' entries)."""
    n, k = ids.shape
    n_parts = mask.shape[0]
    ptr = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        for s in range(k):
            j = ids[i, s]
            if j >= 0 and active[j] and mask[row_part(j, n_parts)]:
                ptr[j + 1] += 1
    for j in range(n):
        ptr[j + 1] += ptr[j]
    src = np.empty(ptr[n], dtype=np.int32)
    flag = np.empty(ptr[n], dtype=np.uint8)
    fill = ptr[:-1].copy()
    for i in range(n):
        for s in range(k):
            j = ids[i, s]
            if j >= 0 and active[j] and mask[row_part(j, n_parts)]:
                src[fill[j]] = i
                flag[fill[j]] = flags[i, s]
                fill[j] += 1
    return ptr, src, flag


@numba.njit(cache=CACHE, nogil=True)
def _candidates_rows(ids, flags, seed, new_i, old_i, mask, active, ptr, src, flag):  # pragma: no cover - compiled
    """A round's candidates for the rows of the parts ``mask`` holds, row
    by row (``ptr, src, flag``: :func:`_reverse` of the lists as the round
    began). Each row's new and old candidates: its own list's entries, then
    the rows listing it (reverse neighbours, in row order), up to
    ``n_cand`` each by reservoir sampling (draws from :func:`_mix`: the
    same candidates for any number of threads); old ones only for rows
    with a new one (the join pairs a row's old candidates only with its new
    ones: in the last rounds most rows have none). Then the row's new
    entries that were sampled are flagged old."""
    n, k = ids.shape
    n_parts = mask.shape[0]
    n_cand = new_i.shape[1]
    seen = np.zeros(2, dtype=np.int64)
    for i in range(n):
        if not (active[i] and mask[row_part(i, n_parts)]):
            continue
        for stage in range(2):  # 0: the new candidates (flag 1), 1: the old ones (flag 0)
            cand = new_i if stage == 0 else old_i
            want = np.uint8(1 - stage)
            if stage == 1 and seen[0] == 0:
                break
            seen[stage] = 0
            for s in range(k):
                if ids[i, s] >= 0 and flags[i, s] == want:
                    _keep_at(cand, i, seen, stage, ids[i, s], False, seed)
            for e in range(ptr[i], ptr[i + 1]):
                if flag[e] == want:
                    _keep_at(cand, i, seen, stage, src[e], True, seed)
        for s in range(k):
            if flags[i, s] == 1:
                for c in range(min(seen[0], n_cand)):
                    if new_i[i, c] == ids[i, s]:
                        flags[i, s] = 0
                        break


def candidates(ids: np.ndarray, flags: np.ndarray, n_cand: int, seed: int, run: Callable = map,
               shares: list | None = None, n_parts: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """A round's new and old candidates of every row (``(n, n_cand)``
    int32, -1 padded) and the new entries sampled flagged old in
    ``flags`` (:func:`_candidates_rows`; draws seeded by ``seed``).
    ``shares``: which of the ``n_parts`` parts of the rows (row ``i`` in
    part :func:`row_part`) each call of ``run`` (``map`` or a thread
    pool's) serves, all by default: the same candidates for any split
    (``n_parts`` a power of two)."""
    if n_parts < 1 or n_parts & (n_parts - 1):
        raise ValueError(f"n_parts must be a power of two (a row's part is a mask of its number); got {n_parts}.")
    n = ids.shape[0]
    new_i = np.full((n, n_cand), -1, dtype=np.int32)
    old_i = np.full((n, n_cand), -1, dtype=np.int32)
    masks = [np.isin(np.arange(n_parts), list(share)) for share in (shares or [range(n_parts)])]
    active = _active(ids, flags)  # (rows with no new candidate: nothing to sample, no flag to change)
    reverse = list(run(partial(_reverse, ids, flags, active=active), masks))  # all read before any flag changes
    list(run(lambda mask, rev: _candidates_rows(ids, flags, np.uint64(seed), new_i, old_i, mask, active, *rev),
             masks, reverse))
    return new_i, old_i
