"""The compiled loops (numba) of the neighbour searches
(:mod:`infoclust_dask.kernels.knn`): the ``k`` smallest entries of each row
of the rows of a distance table, the exact squared distances of
candidate pairs, and each row's smallest entries of a table sorted.

One thread each, without the GIL (``nogil``), as the other compiled loops
(:mod:`infoclust_dask.kernels._loops`): a dask worker runs as many as it
has threads. Imported at the first search that needs them.
"""

from __future__ import annotations

import numba
import numpy as np

from ._cache import can_cache
from ._prefetch import prefetch_row

CACHE = can_cache()


@numba.njit(cache=CACHE, nogil=True)
def merge_smallest(prod: np.ndarray, dn: np.ndarray, start: int, best_d: np.ndarray, best_i: np.ndarray
                   ) -> None:  # pragma: no cover - compiled
    """Fold one tile of a distance table into running lists: the rows'
    values for the columns ``start ..`` are ``dn[j] - 2 prod[r, j]`` (the
    expansion of the squared distance without the row's own ``|q|^2``,
    which does not change its order; made here, so the tile needs no
    temporaries); ``best_d`` / ``best_i``
    (rows x k, sorted, ``inf`` / ``-1`` where empty) keep each row's ``k``
    smallest values seen so far and their columns, in place. An entry is
    compared once with the current ``k``-th and inserted only when smaller,
    so the cost is about one comparison per entry (``np.argpartition``
    costs several); tiles folded in column order keep the smaller column
    first among equal values."""
    m, n = prod.shape
    k = best_d.shape[1]
    for r in range(m):
        worst = best_d[r, k - 1]
        for j in range(n):
            v = dn[j] - 2.0 * prod[r, j]
            if v < worst:
                p = k - 1
                while p > 0 and best_d[r, p - 1] > v:
                    best_d[r, p] = best_d[r, p - 1]
                    best_i[r, p] = best_i[r, p - 1]
                    p -= 1
                best_d[r, p] = v
                best_i[r, p] = start + j
                worst = best_d[r, k - 1]


@numba.njit(cache=CACHE, nogil=True)
def pair_distances(xq: np.ndarray, xd: np.ndarray, ind: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """``|xq[r] - xd[ind[r, j]]|^2`` for every entry of ``ind`` (``inf``
    where ``ind < 0``), summed over the features in order from the
    differences: the same bits as numpy's
    ``((xq[:, None] - xd[ind]) ** 2).sum(-1)`` reduced left to right."""
    m, k = ind.shape
    d = xq.shape[1]
    out = np.empty((m, k), dtype=np.float64)
    for r in range(m):
        if r + 1 < m:  # the next row's candidates asked for now (1e6 x 28 at random: 1.8-2.3 -> 1.4 s)
            for j in range(k):
                if ind[r + 1, j] >= 0:
                    prefetch_row(xd, ind[r + 1, j])
        for j in range(k):
            c = ind[r, j]
            if c < 0:
                out[r, j] = np.inf
                continue
            s = 0.0
            for f in range(d):
                z = xq[r, f] - xd[c, f]
                s += z * z
            out[r, j] = s
    return out


@numba.njit(cache=CACHE, nogil=True)
def nearest_centres(x: np.ndarray, centers: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """Each row's nearest centre (ties: the first), by squared distances
    summed over the features in order from the differences."""
    n, d = x.shape
    out = np.empty(n, dtype=np.int64)
    for r in range(n):
        best = np.inf
        arg = 0
        for c in range(centers.shape[0]):
            s = 0.0
            for f in range(d):
                z = x[r, f] - centers[c, f]
                s += z * z
            if s < best:
                best = s
                arg = c
        out[r] = arg
    return out


@numba.njit(cache=CACHE, nogil=True)
def _before(da, ia, db, ib):  # pragma: no cover - compiled
    """``(da, ia)`` sorts before ``(db, ib)``: by the value, NaN last (as
    numpy sorts), then by the index."""
    if da < db or (db != db and da == da):
        return True
    if da == db or (da != da and db != db):
        return ia < ib
    return False


@numba.njit(cache=CACHE, nogil=True)
def smallest_sorted(d2: np.ndarray, idx: np.ndarray, t: int) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
    """Each row's ``t`` smallest entries of ``d2`` (``t`` at most the
    columns) with their ``idx``, sorted by value, ties by the smaller
    index, equal pairs in column order: what a stable ``np.lexsort((idx,
    d2), axis=1)[:, :t]`` picks (NaN last), by one insertion sort of ``t``
    a row (1e6 x 28 to 10: 2.2 s by ``lexsort`` and ``take_along_axis``)."""
    n, m = d2.shape
    od = np.empty((n, t), dtype=np.float64)
    oi = np.empty((n, t), dtype=np.int64)
    for r in range(n):
        c = 0
        for j in range(m):
            dv = d2[r, j]
            iv = idx[r, j]
            if c < t:
                p = c
                c += 1
            elif _before(dv, iv, od[r, t - 1], oi[r, t - 1]):
                p = t - 1
            else:
                continue
            while p > 0 and _before(dv, iv, od[r, p - 1], oi[r, p - 1]):
                od[r, p] = od[r, p - 1]
                oi[r, p] = oi[r, p - 1]
                p -= 1
            od[r, p] = dv
            oi[r, p] = iv
    return od, oi
