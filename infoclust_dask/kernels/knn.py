"""k nearest neighbours, block against block (the neighbour lists of
SMIC's kernel (7), Sugiyama, Niu, Yamada, Kimura & Hachiya 2014). The
engine's block-pairs primitive meets every query block with every data
block: exactly (:data:`KNN`, O(n^2 d)) or through an approximate HNSW index
built once per data block where the block lives (:data:`KNN_HNSW`: faiss'
``IndexHNSWFlat``, O(n B log(n/B)) for B blocks); new rows meet the
training blocks (:data:`KNN_QUERY`).
"""

from __future__ import annotations

import numpy as np

from ._common import Pass

__all__ = ["knn_block", "knn_top", "knn_merge", "KNN", "knn_query_block", "KNN_QUERY", "hnsw_index",
           "hnsw_block", "KNN_HNSW", "HNSW_DEFAULTS", "have_faiss"]


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
        ind = _without_own(ind, np.arange(nq) + (q_start - d_start))
    diff = xq[:, None, :] - xd[ind]
    d2 = np.einsum("ijk,ijk->ij", diff, diff)
    return knn_top(d2, ind.astype(np.int64) + d_start, t)


def _without_own(ind, own):
    """Candidate lists ``ind`` (rows, k) asked one wider than needed, without
    each row's own index ``own`` (local to the data block); a row whose own
    index is not among its candidates loses its farthest one instead."""
    drop = ind == own[:, None]
    drop[~drop.any(axis=1), -1] = True
    return ind[~drop].reshape(ind.shape[0], ind.shape[1] - 1)


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


#: HNSW parameters of faiss' IndexHNSWFlat: links per node, build and search beam widths
HNSW_DEFAULTS = {"M": 16, "ef_construction": 40, "ef_search": 32}


def have_faiss() -> bool:
    import importlib.util

    return importlib.util.find_spec("faiss") is not None


def _faiss():
    try:
        import faiss
    except ImportError:
        raise ImportError("Approximate neighbour search needs faiss: pip install 'infoclust_dask[knn]' "
                          "(faiss-cpu), or pass knn='exact'.") from None
    faiss.omp_set_num_threads(1)  # one thread per task: a worker runs as many tasks as it has threads
    return faiss


def hnsw_index(xd, *, t=None, M=HNSW_DEFAULTS["M"], ef_construction=HNSW_DEFAULTS["ef_construction"],
               ef_search=HNSW_DEFAULTS["ef_search"]):
    """An HNSW graph over the rows of one data block (faiss ``IndexHNSWFlat``,
    float32, L2), serialized to bytes so that it travels and persists like
    any array. Returns ``(xd, index bytes)``: the block is kept beside its
    index for the exact distances of the pairs found."""
    faiss = _faiss()
    xd = np.ascontiguousarray(xd, dtype=np.float64)
    index = faiss.IndexHNSWFlat(xd.shape[1], int(M))
    index.hnsw.efConstruction = int(ef_construction)
    if xd.shape[0]:
        index.add(xd.astype(np.float32))
    return xd, faiss.serialize_index(index)


def hnsw_block(xq, prepared, *, q_start=None, d_start=0, t, M=None, ef_construction=None,
               ef_search=HNSW_DEFAULTS["ef_search"]):
    """The ``t`` (approximately) nearest rows of one indexed data block
    (:func:`hnsw_index`) to each query row, as :func:`knn_block` returns them:
    a row is never its own neighbour, squared distances are recomputed
    exactly in float64 from the differences, padded with inf / -1."""
    faiss = _faiss()
    xd, blob = prepared
    xq = np.asarray(xq, dtype=np.float64)
    nq, nd = xq.shape[0], xd.shape[0]
    # the query rows may be rows of this data block (or some of them): ask one more, drop the own row
    self_query = q_start is not None and q_start < d_start + nd and d_start < q_start + nq
    k = min(t + (1 if self_query else 0), nd)
    if nq == 0 or k == 0:
        return knn_top(np.zeros((nq, 0)), np.zeros((nq, 0), dtype=np.int64), t)
    index = faiss.deserialize_index(blob)
    index.hnsw.efSearch = max(int(ef_search), k)
    out_d2, out_idx = [], []
    for a in range(0, nq, 8192):  # sub-blocks: the (rows, k, d) differences stay small
        q = xq[a:a + 8192]
        _, ind = index.search(np.ascontiguousarray(q, dtype=np.float32), k)
        ind = ind.astype(np.int64)
        if self_query:
            ind = _without_own(ind, np.arange(a, a + q.shape[0]) + (q_start - d_start))
        valid = ind >= 0
        safe = np.where(valid, ind, 0)
        diff = q[:, None, :] - xd[safe]
        out_d2.append(np.where(valid, np.einsum("ijk,ijk->ij", diff, diff), np.inf))
        out_idx.append(np.where(valid, safe + d_start, -1))
    return knn_top(np.vstack(out_d2), np.vstack(out_idx), t)


#: block pairs: ``chunk(query_block, data_block, q_start=, d_start=, t=)``
KNN = Pass("knn_block", knn_block, combine=knn_merge, inputs=("xq", "xd"))
KNN_QUERY = Pass("knn_query_block", knn_query_block, combine=knn_merge, inputs=("xd",), start=True)
#: block pairs through an HNSW index per data block: ``prepare`` builds it, ``chunk`` queries it
KNN_HNSW = Pass("knn_hnsw", hnsw_block, combine=knn_merge, inputs=("xq", "xd"), prepare=hnsw_index)
