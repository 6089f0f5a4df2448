"""SMIC's solution for one kernel parameter ``t`` (Sugiyama, Yamada, Kimura &
Hachiya 2011): the connected components of the neighbour graph, the sparse
local-scaling kernel (7) - assembled in this process, or made and kept as
row blocks on the workers - its top-c eigenvectors (8) and the assignment
rule of §2.3. The estimator (:class:`infoclust_dask.cluster.SMIC`) calls
these for every candidate ``t``; ``est`` is that estimator (its
``n_clusters``, ``kernel_normalization`` and ``verbose``)."""

from __future__ import annotations

import time

import numpy as np

from .. import engine
from .._support.progress import Steps, say
from ..kernels.components import COMPONENT_BLOCK_ROWS, COMPONENTS, component_labels
from ..kernels.smic import kernel_row_block, kernel_row_sums, kernel_transpose_pieces, sparse_matmat
from ..objectives.smic import align, assign, kernel_matrix, operator_eigenvectors, orient, top_eigenvectors

__all__ = ["graph_components", "solve", "component_vectors", "norm_bound", "eigen_on_workers", "locality_rank",
           "KERNEL_BLOCK_ROWS", "LOCALITY_ROWS"]

#: rows per kernel row block on the workers (at least 8 blocks)
KERNEL_BLOCK_ROWS = 1 << 20
#: rows per cell of the locality order of the kernel's rows (:func:`locality_rank`): a cell's share of a
#: product's input vector, 512 KiB of float64, stays in a core's cache while the cell's rows are multiplied
LOCALITY_ROWS = 1 << 16


def graph_components(idx, t):
    """Connected components of the neighbour graph at ``t`` (the
    kernel's nonzero pattern): a union-find forest per block of
    neighbour lists, where the lists are, tree-combined
    (:data:`~infoclust_dask.kernels.components.COMPONENTS`); this
    process receives the forest and numbers the components. Returns
    ``(labels, n_components)``. A block is a chunk of lazy lists (the
    largest chunk's rows) or :data:`~infoclust_dask.kernels.components.COMPONENT_BLOCK_ROWS`
    rows of numpy lists, not the passes' 4 MiB logical blocks: every
    block's union-find spans all row numbers its edges reach (at 1e7
    rows, 191 blocks of 52 428 rows took 29 s on two workers, 20 chunks
    of 524 288 rows 10 s, docs/BENCHMARKS.md). The components are exact
    integers, the same for any blocks. The forests combine two at a
    time: near the root of the tree each holds about one entry per row
    (1e7 rows: 80 MB of int32 pairs), and a combine holds its parts,
    their union and the union-find's arrays."""
    rows = max(idx.chunks[0]) if engine.is_lazy(idx) else COMPONENT_BLOCK_ROWS
    forest = engine.map_reduce(COMPONENTS, idx, params={"t": int(t)}, split_every=2, block_rows=int(rows))
    return component_labels(forest, int(idx.shape[0]))

def locality_rank(A, seed):
    """A locality order of the rows of ``A`` for the kernel's products on
    the workers (:class:`~infoclust_dask.kernels.smic.RankedRows`): the
    rank of each row when the rows are grouped by their nearest of
    ``ceil(n /`` :data:`LOCALITY_ROWS` ``)`` centres (this package's
    K-means on a seeded sample of 32 rows per centre, in this process;
    ties by row number). The products' results do not depend on it (the
    same bits in any order), only their speed. None below two cells."""
    from ..kernels.kmeans import ASSIGN
    from ._kmeans import KMeans

    n = int(A.shape[0])
    cells = -(-n // LOCALITY_ROWS)
    if cells < 2:
        return None
    rows = np.sort(np.random.default_rng([int(seed), 26]).choice(n, size=min(n, 32 * cells), replace=False))
    sample = np.asarray(engine.rows_at(A, rows), dtype=np.float64)
    k = min(cells, len(np.unique(sample, axis=0)))
    centres = KMeans(k, random_state=int(seed), n_init=1, max_iter=20, scheduler="sync").fit(sample).cluster_centers_
    label = np.asarray(engine.compute(engine.map_blocks(ASSIGN, A, params={"centers": centres.astype(A.dtype)})))
    rank = np.empty(n, dtype=np.int32 if n < 2**31 else np.int64)
    rank[np.argsort(label, kind="stable")] = np.arange(n, dtype=rank.dtype)
    return rank


def solve(est, lists, t, prior, seed, timings, on_workers=False, components=None, rank=None):
    """Kernel (7) at ``t``, its top-c eigenvectors, the alignment of
    (nearly) repeated eigenspaces, the sign rule and the in-sample
    assignment; adds the stage times to ``timings``. The solution is
    deterministic (dense ``eigh`` or Krylov-Schur from start
    vectors drawn from ``seed``), so solving a candidate twice gives the
    same labels. ``on_workers``: the kernel's row blocks are made and
    kept on the workers and the Krylov-Schur eigensolver runs on
    their products, which are map-reduce passes (this process holds
    ``O(n c)`` numbers). ``lists`` is ``[dist2, index]`` of the
    neighbours, with a third entry ``"release"`` when this is their
    last use (they are dropped once the kernel is made).
    ``rank``: a locality order of the rows for the products on the workers
    (:func:`locality_rank`; the results do not depend on it).
    ``components``: ``(labels, count)`` of the neighbour graph; with
    at least ``n_clusters`` components and the ``"symmetric"`` kernel no
    eigensolver runs: the top eigenspace is spanned by the components'
    ``D^1/2 1_q`` (eigenvalue 1, once per component), so the clusters
    are the components (:func:`component_vectors`). Returns ``(labels, eigenvalues, oriented
    eigenvectors, rotation, local scales, degrees)``."""
    by_components = (est.kernel_normalization == "symmetric" and components is not None
                     and components[1] >= est.n_clusters)
    t0 = time.perf_counter()
    if on_workers:
        lam, V, sigma, degree, t1 = eigen_on_workers(est, lists, t, seed, skip=by_components,
                                                           components=components, rank=rank)
    else:
        K, sigma, degree = kernel_matrix(lists[0], lists[1], t, normalization=est.kernel_normalization)
        if len(lists) > 2:
            lists.clear()
        t1 = time.perf_counter()
        lam = V = None
        if not by_components:
            lam, V = top_eigenvectors(K, est.n_clusters, random_state=seed, tol=est.eigen_tol,
                                      components=None if components is None else components[0],
                                      norm=norm_bound(degree, est.kernel_normalization))
        del K
    if by_components:
        lam, V = component_vectors(components[0], degree, est.n_clusters)
    t2 = time.perf_counter()
    V, R = align(V, lam, copy=False)
    Vt, signs = orient(V, copy=False, return_signs=True)
    R = R * signs[None, :]
    labels = assign(Vt, prior)
    timings["kernel"] += t1 - t0
    timings["eigen"] += t2 - t1
    timings["assign"] += time.perf_counter() - t2
    if est.verbose > 1:
        say(f"[SMIC] t={t}: kernel {t1 - t0:.1f} s, eigensolver {t2 - t1:.1f} s")
    return labels, lam, Vt, R, sigma, degree

def component_vectors(comp, degree, c):
    """The top eigenpairs of a ``"symmetric"`` kernel whose graph has
    ``k >= c`` components: ``D^1/2 1_q / ||D^1/2 1_q||`` of each
    component ``q``, all of eigenvalue 1 (each component's
    ``D^-1/2 K D^-1/2`` is similar to the row-stochastic ``D^-1 K``, and
    a connected component's top eigenvalue is simple). With ``k > c``
    any ``c`` of them are top eigenvectors: the ``c`` components with
    the most rows are kept (ties: the smaller first row), in the order
    of their first rows; the rows of the others are zero in every
    vector."""
    sizes = np.bincount(comp)
    kept = np.sort(np.argsort(-sizes, kind="stable")[:c])
    col = np.full(sizes.size, -1, dtype=np.int64)
    col[kept] = np.arange(c)
    col = col[comp]
    rows = np.flatnonzero(col >= 0)
    V = np.zeros((comp.size, c))
    V[rows, col[rows]] = np.sqrt(degree[rows])
    V /= np.sqrt(np.bincount(col[rows], weights=degree[rows], minlength=c))[None, :]
    return np.ones(c), V

def norm_bound(degree, normalization):
    """A bound of the kernel's norm: its largest row sum (1 for the
    ``"symmetric"`` kernel, whose top eigenvalue is 1)."""
    return 1.0 if normalization == "symmetric" else float(np.max(degree))

def eigen_on_workers(est, lists, t, seed, skip=False, components=None, rank=None):
    """Kernel row blocks made where the neighbour lists are (an
    all-to-all exchange transposes the directed kernel:
    :func:`infoclust_dask.engine.exchange`), then Krylov-Schur on
    their products (``skip``: only the degrees); with ``rank``, the blocks
    hold their rows in that locality order
    (:class:`~infoclust_dask.kernels.smic.RankedRows`: the same products,
    faster). Returns
    ``(eigenvalues, eigenvectors, local scales, degrees, time the kernel
    was ready)``."""
    d2, idx = lists[:2]
    n = int(d2.shape[0])
    sigma = np.sqrt(np.asarray(engine.rows_at(d2, np.arange(n), columns=t - 1), dtype=np.float64))
    rows = max(min(KERNEL_BLOCK_ROWS, -(-n // 8)), 1)
    if est.verbose:
        say(f"[SMIC] t={t}: kernel row blocks on the workers ({-(-n // rows)} blocks), then Krylov-Schur "
            "on their products")
    shared = {"sigma": sigma} if rank is None else {"sigma": sigma, "rank": rank}
    K = engine.exchange(kernel_transpose_pieces, kernel_row_block, d2, idx, params={"t": t},
                        shared=shared, block_rows=rows, name="smic-kernel",
                        progress=est.verbose >= 1)
    del d2, idx
    if len(lists) > 2:
        lists.clear()  # the workers free the persisted lists: only the kernel blocks stay
    try:
        degree = np.concatenate(K.apply(kernel_row_sums))
        t1 = time.perf_counter()
        if skip:
            return None, None, sigma, degree, t1
        scale = 1.0 / np.sqrt(degree)[:, None] if est.kernel_normalization == "symmetric" else None

        order = None
        if rank is not None:  # the blocks take a product's input in rank order
            order = np.empty(n, dtype=np.int64)
            order[rank] = np.arange(n)

        spent = [0.0]  # seconds in the products (sending, the workers' products, gathering)

        def matvec(X):
            Y = X if scale is None else scale * X
            Y = Y if order is None else Y[order]
            t_apply = time.perf_counter()
            Y = np.concatenate(K.apply(sparse_matmat, Y))
            spent[0] += time.perf_counter() - t_apply
            return Y if scale is None else scale * Y

        with Steps(est, None, f"SMIC t={t}: eigensolver products", unit="product") as bar:
            lam, V = operator_eigenvectors(matvec, n, est.n_clusters, random_state=seed, tol=est.eigen_tol,
                                           components=None if components is None else components[0],
                                           norm=norm_bound(degree, est.kernel_normalization), callback=lambda: bar.update(1))
        if est.verbose > 1:
            say(f"[SMIC] t={t}: {K.calls - 1} kernel products on {len(K.sizes)} row blocks, {spent[0]:.1f} s in "
                f"them (sent, multiplied, gathered), {time.perf_counter() - t1 - spent[0]:.1f} s in this process"
                + ("" if rank is None else ", rows in a locality order"))
    finally:
        K.release()
    return lam, V, sigma, degree, t1
