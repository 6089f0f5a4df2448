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
touch.
"""

from __future__ import annotations

import numpy as np

from ._common import Pass

__all__ = ["knn_forest", "combine_forests", "component_labels", "COMPONENTS"]


def _forest(u, v):
    """The spanning forest of the undirected graph with edges ``(u, v)``:
    ``{"node": n, "root": r}`` for every touched node that is not the
    smallest node ``r`` of its component."""
    u = np.asarray(u, dtype=np.int64)
    v = np.asarray(v, dtype=np.int64)
    if u.size == 0:
        return {"node": np.zeros(0, np.int64), "root": np.zeros(0, np.int64)}
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    nodes, inv = np.unique(np.concatenate([u, v]), return_inverse=True)
    e = u.size
    graph = sp.coo_matrix((np.ones(e, dtype=np.int8), (inv[:e], inv[e:])), shape=(nodes.size, nodes.size))
    k, comp = connected_components(graph, directed=True, connection="weak")
    root = np.full(k, np.iinfo(np.int64).max)
    np.minimum.at(root, comp, nodes)  # nodes are sorted: the first of each component is its smallest
    r = root[comp]
    keep = r != nodes
    return {"node": nodes[keep], "root": r[keep]}


def knn_forest(idx, *, start, t):
    """The forest (:func:`_forest`) of this block's edges: row ``start + i``
    to its ``t`` nearest neighbours ``idx[i, :t]`` (padding ``-1`` of an
    approximate search is no edge)."""
    idx = np.asarray(idx)[:, :t]
    rows = np.repeat(np.arange(start, start + idx.shape[0], dtype=np.int64), idx.shape[1])
    cols = idx.ravel().astype(np.int64, copy=False)
    ok = cols >= 0
    return _forest(rows[ok], cols[ok])


def combine_forests(parts):
    """The forest of the union of the parts' graphs (associative: a forest
    has the same components as the edges it came from)."""
    return _forest(np.concatenate([p["node"] for p in parts]), np.concatenate([p["root"] for p in parts]))


def component_labels(forest, n):
    """Component numbers ``0 .. k-1`` of the ``n`` nodes (numbered by their
    smallest node, so the labels do not depend on the blocks) and ``k``."""
    roots = np.arange(n, dtype=np.int64)
    roots[forest["node"]] = forest["root"]
    _, labels = np.unique(roots, return_inverse=True)
    return labels.reshape(-1), int(labels.max()) + 1 if n else 0


COMPONENTS = Pass("knn_components", knn_forest, inputs=("idx",), start=True, combine=combine_forests)
