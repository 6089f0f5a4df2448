"""k nearest neighbours, block against block (the neighbour lists of
SMIC's kernel (7), Sugiyama, Niu, Yamada, Kimura & Hachiya 2014). The
engine's block-pairs primitive meets every query block with every data
block (:data:`KNN`); new rows meet the training blocks (:data:`KNN_QUERY`).
"""

from __future__ import annotations

import numpy as np

from ._common import Pass

__all__ = ["knn_block", "knn_top", "knn_merge", "KNN", "knn_query_block", "KNN_QUERY"]


def knn_block(xq, xd, *, q_start=None, d_start=0, t):
    """The ``t`` nearest rows of the data block ``xd`` to each query row of
    ``xq`` (global row numbers ``d_start..`` for ``xd``). When the queries are
    rows of the same data set (``q_start`` given), a row is never its own
    neighbour. Returns ``(dist2 (nq, t), index (nq, t))`` sorted by
    distance, padded with ``inf`` / ``-1`` when ``xd`` has fewer than ``t``
    candidates.

    The candidates come from scikit-learn's ``NearestNeighbors``
    (``algorithm="auto"``: a k-d tree in low dimension, its chunked brute
    force above 15 features); the squared distances of the kept pairs are
    then recomputed from the differences, so duplicates are exactly 0.
    Each query asks for one neighbour more than needed and drops its own
    row if present, else its farthest candidate.
    """
    from sklearn.neighbors import NearestNeighbors

    xq, xd = np.asarray(xq, dtype=np.float64), np.asarray(xd, dtype=np.float64)
    nq, nd = xq.shape[0], xd.shape[0]
    self_query = q_start is not None
    k = min(t + (1 if self_query else 0), nd)
    if nq == 0 or k == 0:
        return knn_top(np.zeros((nq, 0)), np.zeros((nq, 0), dtype=np.int64), t)
    ind = NearestNeighbors(n_neighbors=k, algorithm="auto").fit(xd).kneighbors(xq, return_distance=False)
    if self_query:
        own = np.arange(nq) + (q_start - d_start)
        drop = ind == own[:, None]
        drop[~drop.any(axis=1), -1] = True
        ind = ind[~drop].reshape(nq, k - 1)
    diff = xq[:, None, :] - xd[ind]
    d2 = np.einsum("ijk,ijk->ij", diff, diff)
    return knn_top(d2, ind.astype(np.int64) + d_start, t)


def knn_top(d2, idx, t):
    """The ``t`` smallest entries per row of ``d2`` with their ``idx``
    (ties broken by the smaller index), sorted; padded with inf / -1."""
    n, m = d2.shape
    if m < t:
        d2 = np.hstack([d2, np.full((n, t - m), np.inf)])
        idx = np.hstack([idx, np.full((n, t - m), -1)])
        m = t
    order = np.lexsort((idx, d2), axis=1)[:, :t] if n else np.zeros((0, t), dtype=np.intp)
    return np.take_along_axis(d2, order, 1), np.take_along_axis(np.asarray(idx), order, 1)


def knn_merge(parts):
    """Merge partial ``(dist2, index)`` lists of the same query rows (each
    already ``t`` wide, :func:`knn_top`): the top-k combine."""
    t = parts[0][0].shape[1]
    d2 = np.hstack([p[0] for p in parts])
    idx = np.hstack([p[1] for p in parts])
    return knn_top(d2, idx, t)


def knn_query_block(xd, *, start=0, xq, t):
    """``t`` nearest rows of one data block to the (new) query rows ``xq``;
    a map-reduce kernel over the data blocks (merge with :func:`knn_merge`)."""
    return knn_block(xq, xd, q_start=None, d_start=start, t=t)


#: block pairs: ``chunk(query_block, data_block, q_start=, d_start=, t=)``
KNN = Pass("knn_block", knn_block, combine=knn_merge, inputs=("xq", "xd"))
KNN_QUERY = Pass("knn_query_block", knn_query_block, combine=knn_merge, inputs=("xd",), start=True)
