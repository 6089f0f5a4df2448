"""The compiled loop (numba) of :mod:`infoclust_dask.kernels.components`:
a union-find over an edge list on dense node numbers ``0 .. span - 1``
(Tarjan 1975; path halving, and the larger root always linked under the
smaller, so every root is the smallest node of its component). One thread,
without the GIL, as the other compiled loops.

Replaces ``scipy.sparse.csgraph.connected_components`` there, which builds
a ``span x span`` sparse matrix for each block of neighbour lists and each
combine of forests: on the neighbour lists of 2e6 rows (t = 10, 8 blocks
of 262 144 rows) the blocks' forests took 2.98 s and the combines 1.12 s
with scipy (one process, one thread); figures with this loop in
``docs/BENCHMARKS.md``."""

from __future__ import annotations

import numba
import numpy as np

from ._cache import can_cache

CACHE = can_cache()

__all__ = ["dense_forest"]


@numba.njit(cache=CACHE, nogil=True)
def _find(parent, x):  # pragma: no cover - compiled
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


@numba.njit(cache=CACHE, nogil=True)
def dense_forest(u: np.ndarray, v: np.ndarray, span: int) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
    """The spanning forest of the undirected graph with edges ``(u[i],
    v[i])`` on nodes ``0 .. span - 1``: ``(node, root)`` for every node an
    edge touches that is not the smallest node ``root`` of its component,
    in increasing ``node`` order, in the dtype of ``u``."""
    parent = np.arange(span).astype(u.dtype)
    touched = np.zeros(span, dtype=np.bool_)
    for i in range(u.shape[0]):
        a = u[i]
        b = v[i]
        touched[a] = True
        touched[b] = True
        ra = _find(parent, a)
        rb = _find(parent, b)
        if ra < rb:
            parent[rb] = ra
        elif rb < ra:
            parent[ra] = rb
    count = 0
    for x in range(span):
        if touched[x] and _find(parent, x) != x:
            count += 1
    node = np.empty(count, dtype=u.dtype)
    root = np.empty(count, dtype=u.dtype)
    j = 0
    for x in range(span):
        if touched[x]:
            r = parent[x]  # compressed to the root by the count above
            if r != x:
                node[j] = x
                root[j] = r
                j += 1
    return node, root
