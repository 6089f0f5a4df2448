"""k nearest neighbours, block against block (the neighbour lists of
SMIC's kernel (7), Sugiyama, Niu, Yamada, Kimura & Hachiya 2014). The
engine's block-pairs primitive meets every query block with every data
block exactly (:data:`KNN`, O(n^2 d)); new rows meet the training blocks
(:data:`KNN_QUERY`). The approximate search (:data:`KNN_CELLS`) grows
about linearly: the rows are split into the cells of a coarse partition
(nearest of ``P`` centres); each cell takes its rows together with the
rows of other cells that lie within its routing radius of its boundary
(ghosts, the bisector test of :func:`cell_split`, radius from a sample by
:func:`cell_radii`) and builds their NN-descent graph (Dong, Charikar & Li
2011, *Efficient k-nearest neighbor graph construction for generic
similarity measures*, WWW; this package's compiled
:func:`~infoclust_dask.kernels._nn_descent.nn_descent`, pynndescent's
``NNDescent`` before: its loops compiled again in every worker), which answers the
cell's own rows and is dropped when its task ends, so each row is searched
once and no graph waits for another task. (Earlier designs: an HNSW index
per row block queried by every block searched every row ``B`` times for
``B`` blocks; an HNSW index per cell kept until the rows near its boundary
had asked it held every cell's index in memory at once: 4.9 GB at 1e7 rows;
an HNSW index per cell answering its own rows, faiss' ``IndexHNSWFlat``,
cost 1.7-2.6x NN-descent's time at lower recall, docs/BENCHMARKS.md; a
partition into cells of ~1000 rows with each row's candidates from the
nearest 8-16 cells by matrix products reached recall 0.31-0.45 on
16-dimensional Gaussian rows: in 16 dimensions a row's tenth neighbour
lies beyond most small cells' boundaries.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ._common import Pass, sq_distances

__all__ = ["knn_block", "candidates", "knn_top", "knn_merge", "KNN", "knn_query_block", "KNN_QUERY",
           "knn_query_bounded", "KNN_QUERY_BOUNDED",
           "NND_KEYS", "NND_BASE_ROWS", "NND_WIDEN", "cell_neighbors", "nnd_settings", "nearest_cells", "cell_radii",
           "cell_split", "merge_cells", "cell_build",
           "cell_sizes", "cell_task_bytes", "CELL_BYTES_PER_ROW", "CELL_BYTES_PER_FEATURE",
           "result_split", "result_join", "Cells", "KNN_CELLS"]


def knn_block(xq: np.ndarray, xd: np.ndarray, *, q_start: int | None = None, d_start: int = 0, t: int
             ) -> tuple[np.ndarray, np.ndarray]:
    """The ``t`` nearest rows of the data block ``xd`` to each query row of
    ``xq`` (global row numbers ``d_start..`` for ``xd``). When the queries are
    rows of the same data set (``q_start`` given), a row is never its own
    neighbour. Returns ``(dist2 (nq, t), index (nq, t))`` sorted by
    distance, padded with ``inf`` / ``-1`` when ``xd`` has fewer than ``t``
    candidates.

    The candidates come from :func:`candidates` (a k-d tree in low
    dimension, blocked brute force above); the squared distances of the
    kept pairs are then recomputed from the differences, so duplicates are
    exactly 0. Each query asks for one neighbour more than needed and drops
    its own row if present, else its farthest candidate.
    """
    xq, xd = np.asarray(xq, dtype=np.float64), np.asarray(xd, dtype=np.float64)
    nq, nd = xq.shape[0], xd.shape[0]
    self_query = q_start is not None
    k = min(t + (1 if self_query else 0), nd)
    if nq == 0 or k == 0:
        return knn_top(np.zeros((nq, 0)), np.zeros((nq, 0), dtype=np.int64), t)
    ind = candidates(xq, xd, k)
    if q_start is not None:
        ind = _without_own(ind, np.arange(nq) + (q_start - d_start))
    diff = xq[:, None, :] - xd[ind]
    d2 = np.einsum("ijk,ijk->ij", diff, diff)
    return knn_top(d2, ind.astype(np.int64) + d_start, t)


#: up to this many features the candidates come from a k-d tree, above from blocked brute force (as
#: scikit-learn's ``algorithm="auto"`` chooses for NearestNeighbors)
KD_TREE_MAX_FEATURES = 15
#: bytes of one brute-force product tile (queries x data rows, float64): small enough to stay in cache while
#: it is folded (2000 x 262144 x 16, one thread: 1.8 ns a pair at 2 MB, 3.2 ns at 32 MB; tiles of 16 queries
#: against the whole block with np.argpartition 9.5 ns)
BRUTE_TILE_BYTES = 2 * 2**20
#: query rows of one brute-force tile (the data rows of a tile follow from BRUTE_TILE_BYTES)
BRUTE_QUERY_ROWS = 256


def candidates(xq: np.ndarray, xd: np.ndarray, k: int) -> np.ndarray:
    """The indices (into ``xd``) of the ``k`` nearest rows of ``xd`` to each
    row of ``xq`` (``k <= len(xd)``), unordered: scipy's ``cKDTree`` up to
    :data:`KD_TREE_MAX_FEATURES` features, else the squared distances
    ``|q|^2 - 2 q.d + |d|^2`` of a tile at a time (one matrix product
    each): tiles of up to :data:`BRUTE_QUERY_ROWS` queries against as many
    data rows as fit :data:`BRUTE_TILE_BYTES`, folded into running lists
    by a compiled loop
    (:func:`~infoclust_dask.kernels._knn_loops.merge_smallest`: about one
    comparison per entry, the smaller row first on ties). Exact up to the
    rounding of that expansion on near-ties; :func:`knn_block` recomputes
    the kept distances from differences. (Tiles of 16 queries against a
    whole block and ``np.argpartition`` took SMIC's recall check, 2000 rows
    against 2e6, 20.7 s on two workers.) (scikit-learn's NearestNeighbors did this before; its
    import costs a dask worker ~200 MB, scipy.spatial ~40 MB.)"""
    nq = xq.shape[0]
    if xd.shape[1] <= KD_TREE_MAX_FEATURES:
        from scipy.spatial import cKDTree

        _, ind = cKDTree(xd).query(xq, k=k)
        return np.asarray(ind, dtype=np.int64).reshape(nq, k)
    return brute_candidates(xq, xd, k)


def brute_candidates(xq: np.ndarray, xd: np.ndarray, k: int) -> np.ndarray:
    """:func:`candidates` by brute force whatever the number of features:
    the squared distances ``|q|^2 - 2 q.d + |d|^2`` of tiles of up to
    :data:`BRUTE_QUERY_ROWS` queries against as many data rows as fit
    :data:`BRUTE_TILE_BYTES` (one matrix product each), folded into running
    lists by a compiled loop
    (:func:`~infoclust_dask.kernels._knn_loops.merge_smallest`). Returns
    ``(len(xq), k)`` indices into ``xd``, sorted by that expansion."""
    nq = xq.shape[0]
    dn = np.einsum("ij,ij->i", xd, xd)
    nd = xd.shape[0]
    q_tile = max(1, min(nq, BRUTE_QUERY_ROWS))
    d_tile = max(k, BRUTE_TILE_BYTES // (8 * max(q_tile, 1)))
    out = np.empty((nq, k), dtype=np.int64)
    for a in range(0, nq, q_tile):
        q = xq[a:a + q_tile]
        best_d = np.full((q.shape[0], k), np.inf)
        best_i = np.full((q.shape[0], k), -1, dtype=np.int64)
        _fold_rows(q, xd, dn, 0, nd, d_tile, best_d, best_i)
        out[a:a + q_tile] = best_i
    return out


def _fold_rows(q, xd, dn, lo, hi, d_tile, best_d, best_i):
    """Rows ``lo .. hi - 1`` of ``xd`` (``dn``: their squared norms) folded
    into the running lists ``best_d`` / ``best_i`` of the queries ``q``, a
    tile of ``d_tile`` rows at a time (one matrix product each); the lists
    number the rows from 0 of ``xd``."""
    from ._knn_loops import merge_smallest

    for c in range(lo, hi, d_tile):
        e = min(hi, c + d_tile)
        merge_smallest(q @ xd[c:e].T, dn[c:e], c, best_d, best_i)


def _without_own(ind, own):
    """Candidate lists ``ind`` (rows, k) asked one wider than needed, without
    each row's own index ``own`` (local to the data block); a row whose own
    index is not among its candidates loses its farthest one instead."""
    drop = ind == own[:, None]
    drop[~drop.any(axis=1), -1] = True
    return ind[~drop].reshape(ind.shape[0], ind.shape[1] - 1)


def knn_top(d2: np.ndarray, idx: np.ndarray, t: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``t`` smallest entries per row of ``d2`` with their ``idx`` (ties
    broken by the smaller index), sorted, padded with inf / -1; float64 values,
    ``idx``'s integer type (compiled: :func:`~infoclust_dask.kernels._knn_loops.smallest_sorted`)."""
    from ._knn_loops import smallest_sorted

    n, m = d2.shape
    idx = np.asarray(idx)
    if m < t:
        d2 = np.hstack([d2, np.full((n, t - m), np.inf)])
        idx = np.hstack([idx, np.full((n, t - m), -1, dtype=idx.dtype)])
    if n == 0:
        return np.zeros((0, t)), np.zeros((0, t), dtype=idx.dtype)
    d2, wide = np.ascontiguousarray(d2, dtype=np.float64), np.ascontiguousarray(idx, dtype=np.int64)
    od, oi = smallest_sorted(d2, wide, int(t))
    return od, oi.astype(idx.dtype, copy=False)


def knn_merge(parts: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """Merge partial ``(dist2, index)`` lists of the same query rows (each
    already ``t`` wide, :func:`knn_top`): the top-k combine."""
    t = parts[0][0].shape[1]
    d2 = np.hstack([p[0] for p in parts])
    idx = np.hstack([p[1] for p in parts])
    return knn_top(d2, idx, t)


def knn_query_block(xd: np.ndarray, *, start: int = 0, xq: np.ndarray, t: int) -> tuple[np.ndarray, np.ndarray]:
    """``t`` nearest rows of one data block to the (new) query rows ``xq``;
    a map-reduce kernel over the data blocks (merge with :func:`knn_merge`)."""
    return knn_block(xq, xd, q_start=None, d_start=start, t=t)


#: NN-descent settings of a cell's graph (:func:`~infoclust_dask.kernels._nn_descent.nn_descent`):
#: ``n_neighbors`` (the list each row keeps while the graph improves; default :func:`cell_neighbors`: 2.5 t + 1,
#: wider in cells of at least :data:`NND_BASE_ROWS` rows)
#: and ``max_candidates`` (new candidates a row takes per round; default min(60, n_neighbors)), ``n_iters``
#: (rounds; default max(5, log2 rows)), pynndescent's defaults. Measured on a cell of 2e5 16-dimensional standard
#: Gaussian rows, one thread, t = 10 (docs/BENCHMARKS.md): 88 us a row at recall 0.9955 (pynndescent 66 us
#: warm, 227 us in a new process; faiss' HNSW 71 us at 0.972)
NND_KEYS = ("n_neighbors", "max_candidates", "n_iters")
#: a cell of at most this many rows (own and ghosts) is searched exactly, by brute force
#: (:func:`brute_candidates`): up to here that costs about what NN-descent does (32 768 x 16, one thread:
#: 1.78 s against 1.16 s, benchmarks/smic_knn_cells.py),
#: and is exact
EXACT_CELL_ROWS = 32_768


#: a cell of at least this many rows keeps :data:`NND_WIDEN` more entries a row, and as many again each time its
#: rows double: NN-descent's recall at a fixed width falls as the cell grows. One cell of 16-dimensional standard
#: Gaussian rows, t = 10, one thread on the 2-core EPYC (docs/BENCHMARKS.md): 2e5 rows, width 26: recall 0.9945;
#: 1e6 rows, width 26 / 28 / 30: recall 0.9906 / 0.9934 / 0.9960 at 81.0 / 88.2 / 98.1 s. The threshold sits
#: between 2**19 and 2**20 so that cells of 0.71-1.41 million rows (one natural cluster of a 1e7-row store in
#: 10) take 28: 30 made the 1e7 fit's graph 36 % slower for recall 0.9954
NND_BASE_ROWS = 707_107
NND_WIDEN = 2


def cell_neighbors(t: int, rows: int) -> int:
    """The default NN-descent list width of a cell of ``rows`` rows (own
    and ghosts) for ``t`` neighbours: ``ceil(2.5 t) + 1`` (a row keeps 2.5
    times the neighbours it needs, so that the ``t`` nearest are found:
    recall 0.993 at t = 10 on 2e5 Gaussian rows in 16 dimensions,
    docs/BENCHMARKS.md; 0.817 with ``t + 1`` in a one-off run), plus
    :data:`NND_WIDEN` for each of :data:`NND_BASE_ROWS`, twice that, four
    times that, ... that ``rows`` reaches (28 for a cell of 1e6 rows at
    t = 10). A function of the cell's rows alone: the same cell has the
    same width on every runner."""
    base = int(np.ceil(2.5 * int(t))) + 1
    rows = int(rows)
    doublings = 0
    while rows >= NND_BASE_ROWS << doublings:
        doublings += 1
    return max(base + NND_WIDEN * doublings, int(t) + 1)


def nnd_settings(t: int, params: dict | None = None) -> dict:
    """NN-descent's settings for ``t`` neighbours: ``params`` (keys among
    :data:`NND_KEYS`) over the defaults; ``n_neighbors`` None unless given
    (each cell's own, :func:`cell_neighbors`), at least ``t + 1``."""
    given = {k: v for k, v in (params or {}).items() if k in NND_KEYS}
    wide = given.pop("n_neighbors", None)
    wide = None if wide is None else max(int(wide), int(t) + 1)
    return {"n_neighbors": wide, "max_candidates": None, "n_iters": None, **given}


def knn_query_bounded(xd: np.ndarray, *, start: int = 0, xq: np.ndarray, t: int, centers: np.ndarray,
                      reach: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`knn_query_block` for queries whose ``t`` nearest rows are
    known to lie within distance ``reach[q]`` (e.g. an approximate list's
    ``t``-th distance: its rows are real, so the true ones are no farther),
    skipping the rows no nearer than that. Each row of the block belongs to
    its nearest of ``centers`` (squared distances from the differences); a
    row of centre ``c`` lies on ``c``'s side of the bisector with every other
    centre ``a``, so its distance to query ``q`` is at least
    ``(|q - mu_c|^2 - |q - mu_a|^2) / (2 |mu_a - mu_c|)``: the rows of a centre
    whose bound exceeds ``reach[q] (1 + 1e-6)`` are not measured against
    ``q``. The same answer as :func:`knn_query_block` (the rows measured hold
    every row within ``reach``; which of the rows tied at the ``t``-th
    distance are kept may differ); where the centres separate the data, a
    fraction of its work (SMIC's recall check: 2000 rows against 2e6 in 8
    cells)."""
    xd, xq = np.asarray(xd, dtype=np.float64), np.asarray(xq, dtype=np.float64)
    centers = np.asarray(centers, dtype=np.float64)
    nq, nd = xq.shape[0], xd.shape[0]
    k = min(int(t), nd)
    if nq == 0 or k == 0:
        return knn_top(np.zeros((nq, 0)), np.zeros((nq, 0), dtype=np.int64), t)
    near = _by_differences(xq, centers)  # (nq, P) squared distances
    gap = np.sqrt(_by_differences(centers, centers))
    bound = np.zeros((nq, len(centers)))
    for c in range(len(centers)):
        with np.errstate(divide="ignore", invalid="ignore"):
            side = (near[:, [c]] - near) / (2.0 * gap[c][None, :])
        side[:, gap[c] == 0] = 0.0  # a centre repeated: no bisector
        bound[:, c] = np.maximum(side.max(axis=1), 0.0)
    keep = ~(bound > np.asarray(reach, dtype=np.float64)[:, None] * (1.0 + 1e-6))
    if keep.all():  # nothing to skip (centres that do not separate the rows)
        return knn_query_block(xd, start=start, xq=xq, t=t)
    from ._knn_loops import nearest_centres

    label = nearest_centres(np.ascontiguousarray(xd), centers)
    order = np.argsort(label, kind="stable")
    cuts = np.searchsorted(label[order], np.arange(len(centers) + 1))
    ind = np.full((nq, k), -1, dtype=np.int64)
    best = np.full((nq, k), np.inf)
    xs = xd[order]  # the rows centre by centre: running lists hold positions in this order
    dn = np.einsum("ij,ij->i", xs, xs)
    for c in range(len(centers)):
        qs = np.flatnonzero(keep[:, c])
        if cuts[c + 1] == cuts[c] or qs.size == 0:
            continue
        for a in range(0, qs.size, BRUTE_QUERY_ROWS):
            q = qs[a:a + BRUTE_QUERY_ROWS]
            bd, bi = best[q], ind[q]
            _fold_rows(xq[q], xs, dn, cuts[c], cuts[c + 1], max(k, BRUTE_TILE_BYTES // (8 * q.size)), bd, bi)
            best[q], ind[q] = bd, bi
    ind = np.where(ind >= 0, order[np.maximum(ind, 0)], -1)
    diff = xq[:, None, :] - xd[np.maximum(ind, 0)]
    d2 = np.where(ind >= 0, np.einsum("ijk,ijk->ij", diff, diff), np.inf)
    return knn_top(d2, np.where(ind >= 0, ind + start, -1), t)


def _by_differences(x, centers):
    """``(rows, P)`` squared distances to the centres, summed from the differences."""
    out = np.empty((x.shape[0], len(centers)))
    for c in range(len(centers)):
        diff = x - centers[c]
        out[:, c] = np.einsum("ij,ij->i", diff, diff)
    return out


#: block pairs: ``chunk(query_block, data_block, q_start=, d_start=, t=)``
KNN = Pass("knn_block", knn_block, combine=knn_merge, inputs=("xq", "xd"))
KNN_QUERY = Pass("knn_query_block", knn_query_block, combine=knn_merge, inputs=("xd",), start=True)
KNN_QUERY_BOUNDED = Pass("knn_query_bounded", knn_query_bounded, combine=knn_merge, inputs=("xd",), start=True)


# --------------------------------------------------------------------------
# a coarse partition: an NN-descent graph per cell, each row searched about once
# --------------------------------------------------------------------------
def nearest_cells(x: np.ndarray, centers: np.ndarray) -> np.ndarray:
    """The cell of each row: its nearest centre (ties: the first)."""
    return np.argmin(sq_distances(np.asarray(x, dtype=np.float64), centers), axis=1)


def cell_radii(sample: np.ndarray, centers: np.ndarray, *, t: int, n_rows: int, quantile: float = 0.99,
               max_queries: int = 1000, groups: np.ndarray | None = None) -> np.ndarray:
    """A routing radius per cell, before any index exists: for each cell
    (the rows nearest to one of ``centers``, or to any centre of one group
    when ``groups`` maps each centre to its cell: :func:`merge_cells`), the
    ``quantile`` of its sampled rows' estimated distance to their ``t``-th
    nearest other row among all ``n_rows`` rows.

    ``sample`` is a uniform sample of ``m`` of the ``n_rows`` rows. A row's
    ``t``-th neighbour among ``n_rows`` rows lies at about the distance of its
    ``k = t m / n_rows``-th neighbour among the sample, rounded up to a whole
    neighbour (at least the first): an overestimate, so the estimate errs
    towards routing more rows. Up to ``max_queries`` sampled rows per cell
    are measured by brute force against the cell's sampled rows (a cell's
    own rows only: again an overestimate). A cell with ``k`` or fewer
    sampled rows gets an infinite radius (every row is routed to it).
    Exact (``k = t``, the ``quantile`` of the true ``t``-th distances
    within each cell) when the sample is all the rows."""
    sample = np.asarray(sample, dtype=np.float64)
    m = sample.shape[0]
    k = int(min(t, max(1, np.ceil(t * m / max(int(n_rows), 1)))))
    groups = _groups(groups, len(centers))
    cells = groups[nearest_cells(sample, centers)]
    radii = np.full(int(groups.max()) + 1, np.inf)
    for g in range(radii.size):
        rows = sample[cells == g]
        if rows.shape[0] <= k:
            continue
        # the queries are the cell's first sampled rows (rows 0.. of the data: never their own neighbour), their
        # k nearest by the compiled search of the exact graph (2e6 rows, 8 cells: 0.4 s here against 4.1 s by
        # numpy distance tables and introselect)
        d2, _ = knn_block(rows[:max_queries], rows, q_start=0, t=k)
        radii[g] = float(np.sqrt(max(np.quantile(d2[:, k - 1], quantile), 0.0)))
    return radii


def _groups(groups, n_centers):
    return np.arange(n_centers) if groups is None else np.asarray(groups, dtype=np.int64)


def cell_split(x: np.ndarray, *, start: int, centers: np.ndarray, radii: np.ndarray, t: int | None = None,
               groups: np.ndarray | None = None) -> list[tuple]:
    """This row block's rows split by cell, with the ghosts each cell needs:
    piece ``g`` is ``(rows, global row numbers, own)`` where ``own`` marks
    the rows of cell ``g`` (nearest centre ``g``; with ``groups``, a centre
    of group ``g``) and the others are rows of other cells that lie closer
    to the bisector between their centre ``c_h`` and a centre ``c_j`` of
    cell ``g`` than cell ``g``'s radius ``radii[g]``:
    ``min_j (|y - c_j|^2 - |y - c_h|^2) / (2 |c_j - c_h|) < radii[g]``.
    A row of cell ``g`` whose ``t``-th nearest neighbour lies within
    ``radii[g]`` has every one of its neighbours among cell ``g``'s rows
    and ghosts: a neighbour ``y`` nearest to ``c_h`` is at least its
    distance to that bisector away from the Voronoi region of ``c_j``, so
    at most ``|x - y|`` from the nearest one, ``x`` lying in one of them.
    ``t``, shared with the build, does not enter."""
    x = np.asarray(x, dtype=np.float64)
    centers = np.asarray(centers, dtype=np.float64)
    groups = _groups(groups, len(centers))
    d2c = sq_distances(x, centers)
    nearest = np.argmin(d2c, axis=1)
    cells = groups[nearest]
    mine = d2c[np.arange(x.shape[0]), nearest]
    ids = np.arange(start, start + x.shape[0], dtype=np.int64)
    pieces = []
    for g in range(int(groups.max()) + 1):
        own = cells == g
        margin = np.full(x.shape[0], np.inf)
        for j in np.flatnonzero(groups == g):
            gap = np.linalg.norm(centers[nearest] - centers[j], axis=1)
            with np.errstate(divide="ignore", invalid="ignore"):
                np.fmin(margin, (d2c[:, j] - mine) / (2.0 * gap), out=margin)
        take = own | (margin < radii[g])
        pieces.append((x[take], ids[take], own[take]))
    return pieces


def merge_cells(sample: np.ndarray, centers: np.ndarray, radii: np.ndarray, *, n_rows: int, max_rows: int,
                min_ghosts: float = 0.5) -> np.ndarray:
    """Which centres share a cell (``groups[j]``: the cell of centre ``j``),
    decided on a uniform ``sample`` of the ``n_rows`` rows before any
    index exists. Two cells are merged when the bisector test
    (:func:`cell_split` with the per-centre ``radii``) would send each the
    other's rows as ghosts so often that the pair's ghosts reach
    ``min_ghosts`` of their own rows - a boundary cut through one natural
    cluster, which in many dimensions sends nearly all of each half to the
    other half (issue 24's 1e7 rows: two of 8 blobs cut by 10 cells, each
    half indexing the other whole), so that two indexes cost more than one
    over the union. Pairs are merged in decreasing order of that ratio
    (union-find), while the merged cell's estimated rows stay at most
    ``max_rows`` (its index must fit one task). Without such pairs every
    centre keeps a cell of its own."""
    sample = np.asarray(sample, dtype=np.float64)
    P = len(centers)
    cells = nearest_cells(sample, centers)
    own = np.bincount(cells, minlength=P).astype(np.float64)
    ghosts = np.zeros((P, P))  # ghosts[g, h]: sampled rows of cell h sent to cell g
    for g, (_, ids, mine) in enumerate(cell_split(sample, start=0, centers=centers, radii=radii)):
        ghosts[g] += np.bincount(cells[ids[~mine]], minlength=P)
    pair = ghosts + ghosts.T
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = pair / (own[:, None] + own[None, :])
    parent = np.arange(P)

    def root(a):
        while parent[a] != a:
            a = parent[a]
        return a

    scale = n_rows / max(sample.shape[0], 1)
    size = own * scale
    first, second = np.triu_indices(P, 1)
    r = np.nan_to_num(ratio[first, second])
    for k in np.argsort(-r, kind="stable"):
        if r[k] < min_ghosts:
            break
        a, b = root(int(first[k])), root(int(second[k]))
        if a != b and size[a] + size[b] <= max_rows:
            parent[b] = a
            size[a] += size[b]
    roots = np.array([root(j) for j in range(P)])
    return np.unique(roots, return_inverse=True)[1].astype(np.int64)


#: bytes one cell's task takes per row (own or ghost) beyond ``CELL_BYTES_PER_FEATURE`` per feature and row
#: (its pieces as received, their concatenation in row order and the float32 copy): NN-descent's lists,
#: candidate heaps and random-projection forest, the candidates and their distances. Measured with 16 features
#: (the task's peak resident memory over the pieces it received, sampled every 20 ms in one process with
#: the compiled loops warm, a one-off script over :func:`cell_build`): 1007-1044 B a row at 4e5 rows (blobs apart or
#: overlapping), 1125 at 8e5, + 137 the pieces: 850 + 28 x 16 = 1298 B a row. With the rounds on two threads
#: (each step's updates, two trees at a time, a thread's malloc arena): 1381 B a row at 4e5 overlapping rows,
#: 1451 at 8e5 (one thread 1309 / 1384; before 1203 / 1294, 2026-12-06); with each thread's reverse lists of the
#: candidates (later on 2026-12-06): 1456 / 1463 (one thread 1294 / 1384): 1020 + 28 x 16 = 1468
CELL_BYTES_PER_ROW = 1020
#: ... and per feature and row (float64 pieces, their concatenation, the copy in row order, the float32 copy)
CELL_BYTES_PER_FEATURE = 28


def cell_sizes(sample: np.ndarray, centers: np.ndarray, radii: np.ndarray, *, n_rows: int,
               groups: np.ndarray | None = None) -> np.ndarray:
    """The rows (own and ghosts) each cell's task will gather, estimated on
    a uniform ``sample`` of the ``n_rows`` rows by the routing of
    :func:`cell_split` (its counts scaled by ``n_rows / len(sample)``)."""
    scale = n_rows / max(len(sample), 1)
    pieces = cell_split(np.asarray(sample, dtype=np.float64), start=0, centers=centers, radii=radii, groups=groups)
    return np.array([ids.size * scale for _, ids, _ in pieces])


def cell_task_bytes(rows: float, d: int, exact_rows: int | None = None) -> int:
    """The peak bytes of one cell's task (:func:`cell_build`) over ``rows``
    rows of ``d`` features: :data:`CELL_BYTES_PER_ROW` and
    :data:`CELL_BYTES_PER_FEATURE` a row for an NN-descent graph; a cell
    searched by brute force (at most ``exact_rows``, default
    :data:`EXACT_CELL_ROWS`) holds little beyond its rows."""
    per_feature = CELL_BYTES_PER_FEATURE * int(d)
    if rows <= (EXACT_CELL_ROWS if exact_rows is None else exact_rows):
        return int(rows * (per_feature + 8 * 16))
    return int(rows * (CELL_BYTES_PER_ROW + per_feature))


def _nn_descent(xd, own, k, *, n_neighbors, max_candidates, n_iters, seed, exact_rows, threads=1):
    """Candidate lists (``k`` wide, positions into ``xd``, each row's own
    entry removed) of the rows at positions ``own``: the NN-descent graph
    of all of ``xd`` (:func:`~infoclust_dask.kernels._nn_descent.nn_descent`:
    float32, seeded, the same graph on ``threads`` threads as on one), or brute force
    (:func:`brute_candidates`, whatever the number of features: a k-d tree
    took 3 ms a row in 16 dimensions) for a cell of at most ``exact_rows``
    rows (or four lists' worth)."""
    if xd.shape[0] <= max(int(exact_rows), 4 * int(n_neighbors)):
        return _without_own(brute_candidates(xd[own], xd, min(k, xd.shape[0])), own)
    from ._nn_descent import nn_descent

    ind = nn_descent(xd, int(n_neighbors), max_candidates=max_candidates, n_iters=n_iters, seed=int(seed),
                     threads=threads)[own]
    return _without_own(ind, own)


def cell_build(pieces: list, *, t: int, n_neighbors: int | None = None, max_candidates: int | None = None,
               n_iters: int | None = None, seed: int = 0, int32_ids: bool = False,
               exact_rows: int | None = None, threads: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One cell, in one task: its rows and ghosts gathered from every
    block's piece (:func:`cell_split`), their NN-descent graph (Dong,
    Charikar & Li 2011, :func:`~infoclust_dask.kernels._nn_descent.nn_descent`: each row's list
    improved by its neighbours' neighbours; settings :func:`nnd_settings`,
    ``n_neighbors`` None: :func:`cell_neighbors` of the cell's rows)
    and each own row's ``t`` nearest other rows among its candidates, by
    exact float64 distances (ties: the smaller row number). The graph is
    dropped when the task ends. The cell's rows are in the order of their
    global row numbers whatever the blocks, so the same rows and ``seed``
    give the same lists on every runner. A cell of at most ``exact_rows``
    rows (default :data:`EXACT_CELL_ROWS`) is searched exactly instead. ``threads``: NN-descent's threads
    (the same lists for any number). Returns ``(ids, d2, idx)`` of the
    own rows (``(rows, t)``, padded inf / -1; ``idx`` int32 when
    ``int32_ids`` - the caller says so for fewer than 2**31 rows - else
    int64)."""
    from ._knn_loops import pair_distances

    idx_dtype = np.int32 if int32_ids else np.int64
    xd = np.ascontiguousarray(np.concatenate([p[0] for p in pieces]), dtype=np.float64)
    ids = np.concatenate([p[1] for p in pieces]).astype(np.int64, copy=False)
    order = np.argsort(ids, kind="stable")  # the rows by global number: the graph does not see the blocks
    xd, ids = xd[order], ids[order]
    own = np.flatnonzero(np.concatenate([p[2] for p in pieces])[order])
    if n_neighbors is None:
        n_neighbors = cell_neighbors(t, xd.shape[0])
    k = min(max(int(n_neighbors), t + 1), xd.shape[0])
    if k <= 1 or own.size == 0:
        return ids[own], np.full((own.size, t), np.inf), np.full((own.size, t), -1, dtype=idx_dtype)
    ind = _nn_descent(xd, own, k, n_neighbors=n_neighbors, max_candidates=max_candidates, n_iters=n_iters,
                      seed=seed, exact_rows=EXACT_CELL_ROWS if exact_rows is None else exact_rows, threads=threads)
    d2 = pair_distances(xd[own], xd, ind)
    d2, idx = knn_top(d2, np.where(ind >= 0, ids[np.maximum(ind, 0)], -1), t)
    # row numbers below 2**31 travel as int32: 40 bytes a row less in every answer held until the join
    return ids[own], d2, idx.astype(idx_dtype, copy=False)


def result_split(ids: np.ndarray, d2: np.ndarray, idx: np.ndarray, *, bounds: np.ndarray) -> list[tuple]:
    """Candidate lists ``(ids, d2, idx)`` split by the row block of their
    row (``bounds``: the blocks' row offsets): piece ``b`` is ``(row local
    to block b, d2, idx)``."""
    ids = np.asarray(ids, dtype=np.int64)
    bounds = np.asarray(bounds, dtype=np.int64)
    dest = np.searchsorted(bounds, ids, side="right") - 1
    out = []
    for b in range(len(bounds) - 1):
        sel = dest == b
        out.append((ids[sel] - bounds[b], d2[sel], idx[sel]))
    return out


def result_join(pieces: list, *, rows: int, t: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``t`` nearest candidates of every row of one block, from the
    pieces every cell sent it (a row's answer comes from its own cell; a
    row answered in several pieces, on disjoint candidate sets, keeps the
    nearest ``t`` of all), sorted, padded inf / -1; row numbers stay int32
    when the pieces are int32. Rows answered once, by a sorted list ``t``
    wide (:func:`cell_build`'s answers: each row is its own cell's), are
    placed without the merge's sort."""
    int32 = bool(pieces) and pieces[0][2].dtype == np.int32
    answered = np.concatenate([np.asarray(p[0], dtype=np.int64) for p in pieces]) if pieces else np.zeros(0, np.int64)
    if np.bincount(answered, minlength=rows).max(initial=0) <= 1 and all(p[1].shape[1] == t for p in pieces):
        # every row answered at most once, by a list already sorted and t wide (the cells' case): placed as is
        out_d2 = np.full((rows, t), np.inf)
        out_idx = np.full((rows, t), -1, dtype=np.int32 if int32 else np.int64)
        for p in pieces:
            out_d2[p[0]] = p[1]
            out_idx[p[0]] = p[2]
        return out_d2, out_idx
    local = np.concatenate([np.repeat(p[0], p[1].shape[1]) for p in pieces]) if pieces else np.zeros(0, np.int64)
    d2 = np.concatenate([p[1].ravel() for p in pieces]) if pieces else np.zeros(0)
    idx = np.concatenate([p[2].ravel() for p in pieces]) if pieces else np.zeros(0, np.int32)
    keep = idx >= 0
    local, d2, idx = local[keep], d2[keep], idx[keep]
    order = np.lexsort((idx, d2, local))
    local, d2, idx = local[order], d2[order], idx[order]
    first = np.searchsorted(local, np.arange(rows))
    rank = np.arange(local.size) - first[local] if local.size else np.zeros(0, np.int64)
    ok = rank < t
    out_d2 = np.full((rows, t), np.inf)
    out_idx = np.full((rows, t), -1, dtype=np.int32 if int32 else np.int64)
    out_d2[local[ok], rank[ok]] = d2[ok]
    out_idx[local[ok], rank[ok]] = idx[ok]
    return out_d2, out_idx


@dataclass(frozen=True)
class Cells:
    """The blueprint of a search through a coarse partition, run by
    :func:`infoclust_dask.engine.partition_pairs`: ``split`` (row block ->
    one piece per cell), ``build`` (a cell's pieces -> the answers of its
    rows, in one task, called with ``threads``: it may use that many and
    must give the same answers for any number), ``scatter`` (answers ->
    one piece per row block)
    and ``join`` (a row block's pieces -> its ``(d2, idx)``)."""

    name: str
    split: Callable
    build: Callable
    scatter: Callable
    join: Callable


KNN_CELLS = Cells("knn_cells", cell_split, cell_build, result_split, result_join)
