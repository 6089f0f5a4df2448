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
from ..kernels.components import COMPONENTS, component_labels
from ..kernels.smic import kernel_row_block, kernel_row_sums, kernel_transpose_pieces, sparse_matmat
from ..objectives.smic import align, assign, kernel_matrix, operator_eigenvectors, orient, top_eigenvectors

__all__ = ["graph_components", "solve", "component_vectors", "norm_bound", "eigen_on_workers",
           "KERNEL_BLOCK_ROWS"]

#: rows per kernel row block on the workers (at least 8 blocks)
KERNEL_BLOCK_ROWS = 1 << 20


def graph_components(idx, t):
    """Connected components of the neighbour graph at ``t`` (the
    kernel's nonzero pattern): a union-find forest per block of
    neighbour lists, where the lists are, tree-combined
    (:data:`~infoclust_dask.kernels.components.COMPONENTS`); this
    process receives the forest and numbers the components. Returns
    ``(labels, n_components)``. The forests combine two at a time:
    near the root of the tree each holds about one entry per row (1e7
    rows: 80 MB of int32 pairs), and a combine holds its parts, their
    union and scipy's graph of it."""
    forest = engine.map_reduce(COMPONENTS, idx, params={"t": int(t)}, split_every=2)
    return component_labels(forest, int(idx.shape[0]))

def solve(est, lists, t, prior, seed, timings, on_workers=False, components=None):
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
                                                           components=components)
    else:
        K, sigma, degree = kernel_matrix(lists[0], lists[1], t, normalization=est.kernel_normalization)
        if len(lists) > 2:
            lists.clear()
        t1 = time.perf_counter()
        lam = V = None
        if not by_components:
            lam, V = top_eigenvectors(K, est.n_clusters, random_state=seed,
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

def eigen_on_workers(est, lists, t, seed, skip=False, components=None):
    """Kernel row blocks made where the neighbour lists are (an
    all-to-all exchange transposes the directed kernel:
    :func:`infoclust_dask.engine.exchange`), then Krylov-Schur on
    their products (``skip``: only the degrees). Returns
    ``(eigenvalues, eigenvectors, local scales, degrees, time the kernel
    was ready)``."""
    d2, idx = lists[:2]
    n = int(d2.shape[0])
    sigma = np.sqrt(np.asarray(engine.rows_at(d2, np.arange(n), columns=t - 1), dtype=np.float64))
    rows = max(min(KERNEL_BLOCK_ROWS, -(-n // 8)), 1)
    if est.verbose:
        say(f"[SMIC] t={t}: kernel row blocks on the workers ({-(-n // rows)} blocks), then Krylov-Schur "
            "on their products")
    K = engine.exchange(kernel_transpose_pieces, kernel_row_block, d2, idx, params={"t": t},
                        shared={"sigma": sigma}, block_rows=rows, name="smic-kernel",
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

        def matvec(X):
            if scale is not None:
                return scale * np.concatenate(K.apply(sparse_matmat, scale * X))
            return np.concatenate(K.apply(sparse_matmat, X))

        with Steps(est, None, f"SMIC t={t}: eigensolver products", unit="product") as bar:
            lam, V = operator_eigenvectors(matvec, n, est.n_clusters, random_state=seed,
                                           components=None if components is None else components[0],
                                           norm=norm_bound(degree, est.kernel_normalization), callback=lambda: bar.update(1))
        if est.verbose > 1:
            say(f"[SMIC] t={t}: {K.calls - 1} kernel products on {len(K.sizes)} row blocks")
    finally:
        K.release()
    return lam, V, sigma, degree, t1
