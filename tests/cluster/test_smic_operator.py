"""SMIC's kernel kept on the workers as row blocks and its eigensolver on
products (issue 16) against independent references: the row blocks made by
the all-to-all exchange equal the kernel assembled in one process; the
LinearOperator eigensolver equals ``eigsh`` and dense ``eigh`` on the
assembled matrix; SMIC fitted either way gives the same clustering."""

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp
from helpers import graph_kernel
from scipy.sparse.linalg import eigsh
from sklearn.datasets import make_blobs

from infoclust_dask import SMIC, engine
from infoclust_dask.cluster import _smic, _smic_solve
from infoclust_dask.cluster._smic import _neighbour_lists
from infoclust_dask.kernels.smic import (
    RankedRows,
    kernel_row_block,
    kernel_row_sums,
    kernel_transpose_pieces,
    sparse_matmat,
)
from infoclust_dask.objectives.smic import kernel_matrix, operator_eigenvectors


def _data(n=2500, seed=0, std=2.5):
    # overlapping blobs: one connected graph, so the top eigenvalues are simple (no degenerate eigenspace)
    X, y = make_blobs(n_samples=n, centers=4, n_features=5, cluster_std=std, random_state=seed)
    return X, y


def _row_blocks(d2, idx, t, sched, rows):
    sigma = np.sqrt(d2[:, t - 1])
    return engine.exchange(kernel_transpose_pieces, kernel_row_block, d2, idx, params={"t": t},
                           shared={"sigma": sigma}, block_rows=rows, scheduler=sched, name="test-kernel")


@pytest.mark.parametrize("rows", [300, 1000, 2500])
def test_row_blocks_equal_the_assembled_kernel(scheduler, rows):
    X, _ = _data()
    t = 7
    d2, idx = _neighbour_lists(X, t)
    K, _, degree = kernel_matrix(d2, idx, t)
    blocks = _row_blocks(d2, idx, t, scheduler, rows)
    try:
        assert blocks.sizes == [len(range(a, min(a + rows, 2500))) for a in range(0, 2500, rows)]
        if scheduler == "sync":  # in this process: the blocks themselves, stacked
            stacked = sp.vstack(blocks.blocks).tocsr()
            assert (stacked != K).nnz == 0  # the same entries, bit for bit
        v = np.random.default_rng(1).normal(size=2500)
        np.testing.assert_allclose(np.concatenate(blocks.apply(sparse_matmat, v)), K @ v, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(np.concatenate(blocks.apply(kernel_row_sums)), degree, rtol=1e-14)
        assert blocks.calls == 2
    finally:
        blocks.release()
    with pytest.raises(RuntimeError, match="released"):
        blocks.apply(kernel_row_sums)


@pytest.mark.parametrize("order", ["locality", "random"])
def test_ranked_row_blocks_give_the_same_bits_in_the_blocks_order(scheduler, order):
    """Row blocks held in a locality order (RankedRows: rows sorted by rank,
    columns renamed to ranks, each row's entries in their stored order) give
    the plain blocks' products and row sums bit for bit, in the blocks' own
    row order, when the input comes in rank order - whatever the rank."""
    X, _ = _data(3000, seed=3)
    t = 7
    d2, idx = _neighbour_lists(X, t)
    if order == "locality":
        rank = _smic_solve.locality_rank(X, 0)
        assert rank is None  # one cell of LOCALITY_ROWS rows: no order
        rank = np.empty(3000, dtype=np.int32)
        rank[np.argsort(np.round(X[:, 0]), kind="stable")] = np.arange(3000, dtype=np.int32)
    else:
        rank = np.random.default_rng(5).permutation(3000).astype(np.int32)
    sigma = np.sqrt(d2[:, t - 1])
    plain = _row_blocks(d2, idx, t, scheduler, 700)
    ranked = engine.exchange(kernel_transpose_pieces, kernel_row_block, d2, idx, params={"t": t},
                             shared={"sigma": sigma, "rank": rank}, block_rows=700, scheduler=scheduler,
                             name="test-ranked")
    order_ = np.empty(3000, dtype=np.int64)
    order_[rank] = np.arange(3000)
    try:
        if scheduler == "sync":
            from dask.sizeof import sizeof

            assert all(isinstance(b, RankedRows) for b in ranked.blocks)
            assert not all(np.array_equal(b.local, np.arange(len(b.local))) for b in ranked.blocks)
            # a worker's memory accounting sees the block's bytes, as it does a plain block's
            assert all(sizeof(r) >= sizeof(p) for r, p in zip(ranked.blocks, plain.blocks, strict=True))
        for V in (np.random.default_rng(1).normal(size=3000), np.random.default_rng(2).normal(size=(3000, 3))):
            want = np.concatenate(plain.apply(sparse_matmat, V))
            got = np.concatenate(ranked.apply(sparse_matmat, V[order_]))
            assert np.array_equal(got, want)
        assert np.array_equal(np.concatenate(ranked.apply(kernel_row_sums)),
                              np.concatenate(plain.apply(kernel_row_sums)))
        wrong = np.concatenate(ranked.apply(sparse_matmat, np.random.default_rng(1).normal(size=3000)))
        assert not np.allclose(wrong, np.concatenate(plain.apply(sparse_matmat,
                                                                 np.random.default_rng(1).normal(size=3000))))
    finally:
        plain.release()
        ranked.release()


def test_smic_on_the_workers_gives_the_same_model_with_the_locality_order(monkeypatch):
    """The kernel's products in the locality order (cells of 400 rows here)
    and in the rows' own order: the same model, bit for bit."""
    X, _ = _data(3000, seed=2)
    monkeypatch.setattr(_smic, "DRIVER_KERNEL_MAX_ROWS", 0)
    monkeypatch.setattr(_smic_solve, "KERNEL_BLOCK_ROWS", 500)
    monkeypatch.setattr(_smic_solve, "LOCALITY_ROWS", 400)
    ranks = []
    real = _smic_solve.locality_rank
    monkeypatch.setattr(_smic, "locality_rank", lambda A, seed: ranks.append(real(A, seed)) or ranks[-1])
    ordered = SMIC(4, t=8, random_state=0, scheduler="threads").fit(X)
    assert ranks and ranks[0] is not None and sorted(ranks[0].tolist()) == list(range(3000))
    assert not np.array_equal(ranks[0], np.arange(3000))
    monkeypatch.setattr(_smic, "locality_rank", lambda A, seed: None)
    plain = SMIC(4, t=8, random_state=0, scheduler="threads").fit(X)
    for key in ("labels_", "eigenvalues_", "eigenvectors_", "degree_", "local_scales_"):
        assert np.array_equal(getattr(ordered, key), getattr(plain, key)), key


def test_row_blocks_drop_padded_neighbours():
    """An approximate search may return fewer than t neighbours (index -1,
    distance inf): those entries are no edges, in both constructions."""
    X, _ = _data(600)
    t = 5
    d2, idx = _neighbour_lists(X, t)
    idx, d2 = idx.copy(), d2.copy()
    idx[::7, -1], d2[::7, -1] = -1, np.inf
    d2[::7, -1] = d2[::7, -2]  # a finite local scale for those rows
    K, _, _ = kernel_matrix(d2, idx, t)
    blocks = _row_blocks(d2, idx, t, "sync", 128)
    assert (sp.vstack(blocks.blocks).tocsr() != K).nnz == 0
    assert K.nnz < 600 * (2 * t + 1)


@pytest.mark.parametrize("normalization", ["none", "symmetric"])
def test_operator_eigensolver_equals_eigsh_and_eigh_on_the_assembled_matrix(normalization):
    X, _ = _data()
    t, c = 7, 4
    d2, idx = _neighbour_lists(X, t)
    K, _, degree = kernel_matrix(d2, idx, t, normalization=normalization)
    blocks = _row_blocks(d2, idx, t, "threads", 400)
    scale = 1 / np.sqrt(degree) if normalization == "symmetric" else np.ones(2500)
    products = []

    def matvec(X):
        return scale[:, None] * np.concatenate(blocks.apply(sparse_matmat, scale[:, None] * X))

    lam, V = operator_eigenvectors(matvec, 2500, c, random_state=3, callback=lambda: products.append(1))
    ref_lam, ref_V = eigsh(K, k=c, which="LA", tol=1e-12, v0=np.ones(2500))  # ARPACK on the assembled matrix
    ref_lam, ref_V = ref_lam[::-1], ref_V[:, ::-1]
    dense = scipy.linalg.eigh(K.toarray(), eigvals_only=True)[::-1][:c]
    np.testing.assert_allclose(lam, ref_lam, rtol=0, atol=1e-8)
    np.testing.assert_allclose(lam, dense, rtol=0, atol=1e-8)
    # the same invariant subspace (an eigenvalue 1 of the normalized kernel can be multiple: one per
    # connected component, and any basis of it is right)
    assert scipy.linalg.subspace_angles(V, ref_V).max() < 1e-6
    np.testing.assert_allclose(K @ V, V * lam, rtol=0, atol=1e-8)  # eigenpairs of the assembled matrix
    assert len(products) == blocks.calls > c
    direct = eigsh(K, k=c, which="LA", tol=1e-12)[0]
    np.testing.assert_allclose(np.sort(direct)[::-1], lam, rtol=0, atol=1e-8)


def test_operator_eigensolver_refuses_too_many_eigenvectors():
    with pytest.raises(ValueError, match="Cannot take 9 eigenvectors of a 10 x 10 kernel through products of 1"):
        operator_eigenvectors(lambda v: v, 10, 9)


@pytest.mark.parametrize("normalization", ["none", "symmetric"])
def test_smic_with_the_kernel_on_the_workers_equals_the_driver_kernel(scheduler, normalization, monkeypatch):
    X, y = _data(3000, seed=2)
    on_driver = SMIC(4, t=8, random_state=0, scheduler=scheduler, kernel_normalization=normalization).fit(X)
    monkeypatch.setattr(_smic, "DRIVER_KERNEL_MAX_ROWS", 0)
    monkeypatch.setattr(_smic_solve, "KERNEL_BLOCK_ROWS", 500)
    on_workers = SMIC(4, t=8, random_state=0, scheduler=scheduler, kernel_normalization=normalization).fit(X)
    np.testing.assert_allclose(on_workers.eigenvalues_, on_driver.eigenvalues_, rtol=0, atol=1e-8)
    np.testing.assert_array_equal(on_workers.labels_, on_driver.labels_)
    np.testing.assert_allclose(on_workers.eigenvectors_, on_driver.eigenvectors_, rtol=0, atol=1e-6)
    np.testing.assert_allclose(on_workers.degree_, on_driver.degree_, rtol=1e-13)
    np.testing.assert_allclose(on_workers.local_scales_, on_driver.local_scales_, rtol=0, atol=0)
    np.testing.assert_array_equal(on_workers.predict(X[:50] + 0.01), on_driver.predict(X[:50] + 0.01))


def test_smic_model_selection_with_the_kernel_on_the_workers(monkeypatch):
    """t="auto" with dask input: the neighbour lists stay persisted (lazy)
    while every candidate's kernel is made from them, and the LSMI choice is
    the driver kernel's. Here t=6 and t=9 give the same partition, whose
    LSMI values differ by round-off between numpy and chunked input (8.9e-16
    on one machine): the tie rule must pick t=6 on either."""
    import dask.array as da

    X, y = _data(2000, seed=4, std=1.5)
    ref = SMIC(4, t_candidates=(3, 6, 9), random_state=0, scheduler="threads").fit(X)
    monkeypatch.setattr(_smic, "DRIVER_KERNEL_MAX_ROWS", 0)
    got = SMIC(4, t_candidates=(3, 6, 9), random_state=0, scheduler="threads").fit(da.from_array(X, chunks=700))
    assert got.t_ == ref.t_
    np.testing.assert_allclose([got.lsmi_[t] for t in (3, 6, 9)], [ref.lsmi_[t] for t in (3, 6, 9)], rtol=1e-10)
    np.testing.assert_array_equal(got.labels_, ref.labels_)


def test_auto_solver_shifts_components_and_falls_back_to_the_block_method():
    """``block_size="auto"``: (1) exact copies of a component (eigenvalue
    repeated across components) with their labels: the single-vector
    method on the component-shifted matrix returns the eigenvalues of
    ``eigh`` (without the labels it finds one copy only); (2) a connected
    matrix with three eigenvalues 1e-9 apart: the single-vector result shows
    the group and the block method (c + 2) solves again; (3) more
    components than c + 2: the block method, unshifted."""
    rng = np.random.default_rng(0)
    n_each = 400
    B = graph_kernel(n_each, 4, 9, 0)
    A = sp.block_diag([B, B, B]).tocsr()
    comp = np.repeat(np.arange(3), n_each)
    ref = scipy.linalg.eigh(A.toarray(), eigvals_only=True)[::-1][:5]
    rep = {}
    lam, V = operator_eigenvectors(lambda X: A @ X, 3 * n_each, 5, components=comp, norm=10.0, report=rep)
    assert rep["per_component"] and rep["block_size"] == 1
    np.testing.assert_allclose(lam, ref, rtol=0, atol=1e-8)
    np.testing.assert_allclose(A @ V, V * lam, rtol=0, atol=1e-7)
    plain, _ = operator_eigenvectors(lambda X: A @ X, 3 * n_each, 5, block_size=1)
    assert np.abs(plain - ref).max() > 1e-3  # one copy of each eigenvalue only

    # (3) many small components (30 copies of one, as t = 1 makes them): the block method, no shifts
    small = B[:40, :40]
    A30 = sp.block_diag([small] * 30).tocsr()
    ref30 = scipy.linalg.eigh(A30.toarray(), eigvals_only=True)[::-1][:4]
    rep = {}
    lam, V = operator_eigenvectors(lambda X: A30 @ X, 1200, 4, components=np.repeat(np.arange(30), 40), norm=10.0,
                                   report=rep)
    assert rep["block_size"] == 6 and not rep["per_component"]
    np.testing.assert_allclose(lam, ref30, rtol=0, atol=1e-8)

    Q, _ = np.linalg.qr(rng.normal(size=(300, 300)))
    d = np.linspace(0.0, 3.0, 300)
    d[-3:] = [5.0, 5.0 + 1e-9, 5.0 + 2e-9]
    M = (Q * d) @ Q.T
    rep = {}
    lam, V = operator_eigenvectors(lambda X: M @ X, 300, 4, report=rep)
    assert rep["block_size"] == 6 and not rep["per_component"]
    np.testing.assert_allclose(lam, np.sort(d)[::-1][:4], rtol=0, atol=1e-9)
