"""Connected components of a k-nearest-neighbour graph, one row block at a
time (SMIC's kernel (7), Sugiyama, Yamada, Kimura & Hachiya 2011: the
kernel links ``i`` and ``j`` when either is among the other's ``t``
nearest neighbours, so its components are the weak components of the
directed kNN graph).

Each block's edges ``(row, neighbour)`` are reduced to a spanning forest
that maps every node it touches to the smallest node of its component
(:func:`knn_forest`); two forests combine by the same union over their
edges (:func:`combine_forests`), so a tree reduction over the blocks leaves
the forest of the whole graph, and :func:`component_labels` numbers the
components. A forest never has more entries than the nodes its edges
touch. Node numbers travel as int32 when the neighbour lists are int32
(fewer than 2**31 rows): at 1e7 rows the forest of the whole graph holds
about 1e7 (node, root) pairs, 80 MB in int32 against 160 MB in int64.
"""

from __future__ import annotations

import numpy as np

from ._common import Pass

__all__ = ["knn_forest", "combine_forests", "component_labels", "COMPONENTS", "DENSE_SPAN_MAX", "COMPONENT_BLOCK_ROWS"]

#: node numbers spanning up to this many are numbered densely however few the edges (the union-find's arrays:
#: 5 bytes a number in int32, 84 MB at most; a block of 65 536 rows of neighbour lists at 1e7 rows spans ~1e7
#: numbers with 655 360 edges, whose sort costs more than the arrays); wider spans are numbered by np.unique
DENSE_SPAN_MAX = 1 << 24
#: rows of numpy neighbour lists per block of SMIC's components pass (lazy lists: a chunk a block): one union-find
#: per block spans every row number its edges reach, so few large blocks (5.2e6 edges each at t = 10)
COMPONENT_BLOCK_ROWS = 1 << 19


def _forest(u, v):
    """The spanning forest of the undirected graph with edges ``(u, v)``:
    ``{"node": n, "root": r}`` for every touched node that is not the
    smallest node ``r`` of its component. The node numbers keep the
    inputs' integer dtype (int32 stays int32)."""
    u = np.asarray(u)
    v = np.asarray(v)
    dtype = np.int32 if u.dtype == np.int32 and v.dtype == np.int32 else np.int64
    u = u.astype(dtype, copy=False)
    v = v.astype(dtype, copy=False)
    if u.size == 0:
        return {"node": np.zeros(0, dtype), "root": np.zeros(0, dtype)}
    from ._union_find import dense_forest

    e = u.size
    lo = int(min(u.min(), v.min()))
    span = int(max(u.max(), v.max())) - lo + 1
    if (span <= 8 * e + 1024 or span <= DENSE_SPAN_MAX) and span < 2**31:  # arrays of at most 2**31 numbers
        # dense numbering of the span (a block's neighbours and the forests near the top of the tree
        # cover most rows): no sort, no inverse; untouched numbers are singletons and are left out
        node, root = dense_forest(u - dtype(lo), v - dtype(lo), span)
        return {"node": node + dtype(lo), "root": root + dtype(lo)}
    nodes, inv = np.unique(np.concatenate([u, v]), return_inverse=True)  # sorted: dense ids keep the order
    inv = inv.reshape(-1).astype(dtype, copy=False)
    node, root = dense_forest(inv[:e], inv[e:], nodes.size)
    return {"node": nodes[node], "root": nodes[root]}


def knn_forest(idx: np.ndarray, *, start: int, t: int) -> dict[str, np.ndarray]:
    """The forest (:func:`_forest`) of this block's edges: row ``start + i``
    to its ``t`` nearest neighbours ``idx[i, :t]`` (padding ``-1`` of an
    approximate search is no edge). int32 lists give an int32 forest
    when the block's row numbers fit in int32."""
    idx = np.asarray(idx)[:, :t]
    narrow = idx.dtype == np.int32 and start + idx.shape[0] < 2**31
    dtype = np.int32 if narrow else np.int64
    rows = np.repeat(np.arange(start, start + idx.shape[0], dtype=dtype), idx.shape[1])
    cols: np.ndarray = idx.ravel().astype(dtype, copy=False)
    ok = cols >= 0
    return _forest(rows[ok], cols[ok])


def combine_forests(parts: list[dict]) -> dict[str, np.ndarray]:
    """The forest of the union of the parts' graphs (associative: a forest
    has the same components as the edges it came from). Parts of mixed
    dtypes combine in int64."""
    dtype = np.result_type(*[p["node"].dtype for p in parts]) if parts else np.int64
    return _forest(np.concatenate([p["node"] for p in parts]).astype(dtype, copy=False),
                   np.concatenate([p["root"] for p in parts]).astype(dtype, copy=False))


def component_labels(forest: dict, n: int) -> tuple[np.ndarray, int]:
    """Component numbers ``0 .. k-1`` of the ``n`` nodes (numbered by their
    smallest node, so the labels do not depend on the blocks) and ``k``."""
    if not n:
        return np.zeros(0, dtype=np.int64), 0
    roots = np.arange(n, dtype=np.int32 if n < 2**31 else np.int64)
    roots[forest["node"]] = forest["root"]
    is_root = roots == np.arange(n, dtype=roots.dtype)  # a component's smallest node is its own root
    number = np.cumsum(is_root) - 1  # components numbered in the order of their smallest nodes
    return number[roots], int(number[-1]) + 1


COMPONENTS = Pass("knn_components", knn_forest, inputs=("idx",), start=True, combine=combine_forests)
