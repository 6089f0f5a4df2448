"""SMIC's neighbour graph: the ``t`` nearest neighbours of every row, found
exactly (every row block against every block) or approximately (an
NN-descent graph per cell of a coarse partition,
:data:`~infoclust_dask.kernels.knn.KNN_CELLS`),
and the recall of approximate lists against exact search. The lists feed
the local-scaling kernel (7) of Sugiyama, Niu, Yamada, Kimura & Hachiya
(2014)."""

from __future__ import annotations

import numbers
from typing import Any, NamedTuple

import numpy as np

from .. import engine
from .._inputs import open_input
from .._support.hints import DataLike, SchedulerLike
from ..kernels.knn import (
    KNN,
    KNN_CELLS,
    KNN_QUERY,
    KNN_QUERY_BOUNDED,
    NND_KEYS,
    cell_neighbors,
    cell_radii,
    cell_sizes,
    cell_task_bytes,
    merge_cells,
    nnd_settings,
)
from ..objectives.smic import kernel_matrix

__all__ = ["KnnParams", "CellPlan", "cell_plan", "knn_recall", "local_scaling_affinity", "EXACT_KNN_MAX_ROWS", "INDEX_MAX_ROWS", "MIN_CELLS", "CELL_SAMPLE_ROWS",
           "ROUTE_QUANTILE", "MIN_RECALL", "MERGE_GHOSTS", "MAX_CELL_ROWS"]


class KnnParams:
    """None, or a dict of NN-descent settings among n_neighbors, max_candidates, n_iters (ints >= 1)."""

    def accepts(self, v):
        return v is None or (isinstance(v, dict) and set(v) <= set(NND_KEYS)
                             and all(isinstance(x, numbers.Integral) and int(x) >= 1 for x in v.values()))

    def __str__(self):
        return f"None or a dict with keys among {sorted(NND_KEYS)} (ints >= 1; the HNSW keys M, ef_construction " \
               "and ef_search went with faiss' HNSW search, replaced by NN-descent)"


#: ``knn="auto"`` searches exactly up to this many rows, approximately above
EXACT_KNN_MAX_ROWS = 50_000
#: the approximate search makes about one cell per this many rows, and at least MIN_CELLS (several per worker,
#: so that cells of unequal size still balance the work)
INDEX_MAX_ROWS = 1_000_000
MIN_CELLS = 8
#: two cells whose bisector test would send each other ghosts amounting to this fraction of their own rows
#: share one index (a boundary through one natural cluster: in 16 dimensions nearly all of each half)
MERGE_GHOSTS = 0.5
#: a merged cell holds at most this many own rows (its task keeps ~1.5 kB a row with 16 features:
#: :func:`~infoclust_dask.kernels.knn.cell_task_bytes`)
MAX_CELL_ROWS = 2_000_000
#: rows per cell in the sample that places the cells' centres and sets their routing radii
CELL_SAMPLE_ROWS = 20_000
#: a cell's routing radius is this quantile of its sampled rows' estimated t-th neighbour distances: a row
#: farther from its t-th neighbour (the sparsest 1 %) may miss neighbours beyond its cell's boundary
ROUTE_QUANTILE = 0.99
#: ``knn_recall_`` below this gives a warning
MIN_RECALL = 0.9


def _neighbour_lists(X, t, method="exact", params=None, progress=False, keep=False, random_state=0, plan=None):
    """The ``t`` nearest neighbours of every row (never itself), sorted by
    distance, as numpy ``(dist2, index)`` of shape ``(n, t)`` on the driver
    (``keep=True``: dask arrays persisted on the workers for dask input).

    ``method="exact"``: every row block against every row block on the
    workers (:data:`~infoclust_dask.kernels.knn.KNN`), O(n^2 d), no task
    holding more than two blocks. ``"approximate"``: the rows split into
    ``P = max(8, n /`` :data:`INDEX_MAX_ROWS` ``)`` cells of a coarse
    partition (:func:`_cell_plan`: the centres of this package's K-means
    on a seeded sample of :data:`CELL_SAMPLE_ROWS` rows per cell, and a
    routing radius per cell from the same sample), an NN-descent graph
    per cell over its rows and the other cells' rows within its
    radius of its boundary, answering its own rows
    (:data:`~infoclust_dask.kernels.knn.KNN_CELLS`,
    :func:`infoclust_dask.engine.partition_pairs`): O(n log(n / P)), each
    row searched once; no task holds more than one cell, and no graph
    outlives the task that built it. ``params``: NN-descent's settings
    (:func:`~infoclust_dask.kernels.knn.nnd_settings`); ``random_state``
    also seeds each cell's graph; ``plan``: the cells (:func:`cell_plan`
    of the same ``X``, ``t`` and ``random_state``; made here when None) -
    the caller that measures the recall passes its centres to
    :func:`knn_recall`."""
    n = int(X.shape[0])
    t = int(t)
    if not 1 <= t < n:
        raise ValueError(f"t must be between 1 and n_samples - 1 = {n - 1}; got {t}.")
    outputs: tuple = ((np.float64, (t,)), (np.int64, (t,)))
    if method == "approximate":
        int32_ids = n < 2**31  # one decision: the cells answer with this type, the outputs declare it
        outputs = ((np.float64, (t,)), (np.int32 if int32_ids else np.int64, (t,)))
        centres, groups, radii, rows = cell_plan(X, t, random_state) if plan is None else plan
        given = nnd_settings(t, params)["n_neighbors"]
        largest = int(np.max(rows)) if len(rows) else 0
        needs = _check_cell_tasks(rows, int(X.shape[1]),
                                  (given or cell_neighbors(t, largest)) / cell_neighbors(t, 0))  # over the width measured
        d2, idx = engine.partition_pairs(KNN_CELLS, X, n_parts=len(radii), outputs=outputs,
                                         params={"t": t, "centers": centres, "groups": groups, "radii": radii},
                                         build_params={"t": t, **nnd_settings(t, params),
                                                       "seed": int(random_state), "int32_ids": int32_ids},
                                         join_params={"t": t}, costs=_build_cost(rows), needs=needs,
                                         progress=progress)
    else:
        d2, idx = engine.block_pairs(KNN, X, params={"t": t}, outputs=outputs, min_rows=t + 1,
                                     progress=progress)
    if engine.is_lazy(d2):
        if keep:  # row numbers fit in int32 below 2**31 rows: 4 bytes per entry less on the workers
            idx = idx.astype(np.int32) if n < 2**31 and idx.dtype != np.int32 else idx
            return engine.persist_all((d2, idx), progress=progress)
        d2, idx = engine.compute((d2, idx), progress=progress)
    return np.asarray(d2), np.asarray(idx)


def _build_cost(rows):
    """A cell build's expected work from its rows: ``n log2 n`` (NN-descent;
    on one 2-core Zen 5 machine a cell of 2e5 rows took 8.0-8.6 s, of 4e5
    rows 16.8-17.3 s: 2.1x, ``n log2 n`` says 2.11x)."""
    rows = np.asarray(rows, dtype=np.float64)
    return rows * np.log2(np.maximum(rows, 2.0))


class CellPlan(NamedTuple):
    """The cells of the approximate search (:func:`_cell_plan`)."""

    centres: np.ndarray
    groups: np.ndarray
    radii: np.ndarray
    rows: np.ndarray


def cell_plan(X, t, random_state=0) -> CellPlan:
    """The cells of the approximate search of the ``t`` nearest neighbours
    of every row of ``X``: :func:`_cell_plan` with one cell per
    :data:`INDEX_MAX_ROWS` rows, at least :data:`MIN_CELLS`."""
    n = int(X.shape[0])
    return _cell_plan(X, max(MIN_CELLS, -(-n // INDEX_MAX_ROWS)), int(t), random_state)


def _cell_plan(X, n_cells, t, random_state) -> CellPlan:
    """Centres, cells and routing radii of the approximate search: K-means
    (this package's, k-means++ start) on a seeded sample of
    :data:`CELL_SAMPLE_ROWS` rows per cell, fitted in this process (distinct
    centres only: a repeated centre would own no rows); the centres whose
    boundary would send most of each side to the other as ghosts share a
    cell (``groups``, :func:`~infoclust_dask.kernels.knn.merge_cells`: a cut
    through one natural cluster; merged cells of at most
    :data:`MAX_CELL_ROWS` rows); and each cell's radius from the same sample
    (:func:`~infoclust_dask.kernels.knn.cell_radii`, the
    :data:`ROUTE_QUANTILE` of its rows' estimated ``t``-th neighbour
    distance): the rows of other cells closer than that to the cell's
    boundary are indexed with it. Returns ``(centres, groups, radii,
    rows)``, ``groups[j]`` the cell of centre ``j``, ``radii[g]`` cell
    ``g``'s and ``rows[g]`` the rows (own and ghosts) its task is estimated
    to gather, from the same sample."""
    from ._kmeans import KMeans

    n = int(X.shape[0])
    rows = np.sort(np.random.default_rng([int(random_state), 24]).choice(
        n, size=min(n, CELL_SAMPLE_ROWS * n_cells), replace=False))
    sample = np.asarray(engine.rows_at(X, rows), dtype=np.float64)
    k = min(n_cells, len(np.unique(sample, axis=0)))
    centres = KMeans(k, random_state=int(random_state), scheduler="sync").fit(sample).cluster_centers_
    centres = np.unique(np.asarray(centres, dtype=np.float64), axis=0)
    # the sample in a seeded order: the radii's queries (the first rows of each cell) are a uniform draw
    order = np.random.default_rng([int(random_state), 25]).permutation(len(rows))
    sample = sample[order]
    radii = cell_radii(sample, centres, t=int(t), n_rows=n, quantile=ROUTE_QUANTILE)
    groups = merge_cells(sample, centres, radii, n_rows=n, max_rows=MAX_CELL_ROWS, min_ghosts=MERGE_GHOSTS)
    if groups.max() + 1 < len(centres):
        radii = cell_radii(sample, centres, t=int(t), n_rows=n, quantile=ROUTE_QUANTILE, groups=groups)
    return CellPlan(centres, groups, radii, cell_sizes(sample, centres, radii, n_rows=n, groups=groups))


def _check_cell_tasks(rows, d, wider=1.0):
    """Refuse, before any cell is searched, a plan whose largest cell (its
    estimated own and ghost ``rows``, :func:`~infoclust_dask.kernels.knn.cell_sizes`)
    needs more memory in its one task than any worker can take
    (:func:`infoclust_dask.engine.check_task`): rows whose neighbours cross
    every cell boundary (clusters that overlap, in many dimensions) make
    one cell of nearly all rows, or cells whose ghosts are most rows; run,
    the task would kill one worker after another. The plan, and so the
    graph, never depends on the workers: only whether it can be built
    there. ``wider``: the NN-descent lists' width over the default's (a
    task's memory grows about in proportion: its lists and heaps). Returns
    every cell's bytes, estimated the same way (where its build may be
    placed: :func:`infoclust_dask.engine.partition_pairs`)."""
    needs = np.array([int(cell_task_bytes(float(r), d) * max(1.0, float(wider))) for r in rows], dtype=np.int64)
    largest = float(np.max(rows)) if len(rows) else 0.0
    engine.check_task(int(needs.max(initial=0)), f"SMIC's approximate neighbour search: its largest cell (about {largest:,.0f} rows "
                            f"with the other cells' rows near its boundary, {len(rows)} cell{'s' * (len(rows) != 1)} in all)",
                      "pass knn='exact' (block against block: memory bounded by two row blocks, time growing "
                      "with the square of the rows), or fit on fewer rows")
    return needs


def knn_recall(X: DataLike, idx: Any, *, n_queries: int = 2000, random_state: int = 0,
               scheduler: SchedulerLike = None, d2: Any = None, centers: Any = None) -> float:
    """Recall of neighbour lists ``idx`` (n, t) against exact search on a
    seeded sample of ``n_queries`` rows: the mean fraction of each sampled
    row's true ``t`` nearest neighbours (itself excluded) found in its list.
    One pass over the data (:data:`~infoclust_dask.kernels.knn.KNN_QUERY`);
    given the lists' squared distances ``d2`` and any ``centers`` (the
    approximate search's cells'), a row is measured only against the
    centres' rows that may lie within its list's ``t``-th distance
    (:data:`~infoclust_dask.kernels.knn.KNN_QUERY_BOUNDED`: the same exact
    neighbours; 2000 rows against 2e6 in 8 cells: 3.8 -> 1.1 s on two
    workers)."""
    with engine.installed(scheduler):
        return _recall(X, idx, n_queries, random_state, d2, centers)


def _recall(X, idx, n_queries, random_state, d2=None, centers=None):
    n, t = idx.shape
    rows = np.sort(np.random.default_rng(random_state).choice(n, size=min(n_queries, n), replace=False))
    xq = np.asarray(engine.rows_at(X, rows), dtype=np.float64)
    if d2 is not None and centers is not None and len(centers) > 1:
        reach = np.sqrt(np.asarray(engine.rows_at(d2, rows, columns=t - 1), dtype=np.float64).reshape(-1))
        _, true = engine.map_reduce(KNN_QUERY_BOUNDED, X, params={"xq": xq, "t": t + 1, "reach": reach,
                                                                  "centers": np.asarray(centers, dtype=np.float64)})
    else:
        _, true = engine.map_reduce(KNN_QUERY, X, params={"xq": xq, "t": t + 1})
    if engine.is_lazy(idx):
        idx = dict(zip(rows.tolist(), engine.rows_at(idx, rows), strict=True))
    hits = 0
    for r, row in enumerate(rows):
        exact = [j for j in true[r] if j != row][:t]
        hits += len(set(exact) & set(idx[row].tolist()))
    return hits / (len(rows) * t)


def local_scaling_affinity(X: DataLike, t: int, *, normalization: str = "none",
                           scheduler: SchedulerLike = None) -> tuple:
    """The sparse local-scaling kernel (7) of the rows of ``X`` as a
    ``scipy.sparse`` matrix (with its local scales and row sums), e.g. to
    feed scikit-learn's ``SpectralClustering(affinity="precomputed")`` the
    self-tuning kernel SMIC uses. Neighbours are found block against block
    (:func:`infoclust_dask.engine.block_pairs`)."""
    with engine.installed(scheduler):
        d2, idx = _neighbour_lists(open_input(X), t)
    return kernel_matrix(d2, idx, t, normalization=normalization)
