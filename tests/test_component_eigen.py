"""The per-component Krylov-Schur eigensolver
(:func:`infoclust_dask.solvers.component_eigen.component_krylov_schur`)
against dense LAPACK ``eigh`` of the whole matrix: blocks of different
sizes, exact copies (equal spectra on different blocks), blocks smaller
than the basis and of one row, one block holding several of the wanted
eigenvalues, restarts, labels in any order; and against the single-vector
method on the shifted matrix it replaced, by the number of products."""

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp
from helpers import graph_kernel

from infoclust_dask.objectives.smic import operator_eigenvectors
from infoclust_dask.solvers.component_eigen import component_krylov_schur
from infoclust_dask.solvers.eigen import ConvergenceError, basis_size, krylov_schur


def _blocks(mats, perm_seed=None):
    """The block-diagonal matrix of ``mats`` and each row's block label, rows
    shuffled (and labels renumbered out of order) with ``perm_seed``."""
    A = sp.block_diag(mats).tocsr()
    labels = np.repeat(np.arange(len(mats)) * 3 + 7, [m.shape[0] for m in mats])
    if perm_seed is not None:
        p = np.random.default_rng(perm_seed).permutation(A.shape[0])
        A = A[p][:, p]
        labels = labels[p]
    return A, labels


def _check(A, labels, k, lam, V, atol=1e-8):
    dense = A.toarray()
    ref = scipy.linalg.eigh(dense, eigvals_only=True)[::-1][:k]
    np.testing.assert_allclose(lam, ref, rtol=0, atol=atol)
    assert V.shape == (A.shape[0], k) and V.flags.c_contiguous
    np.testing.assert_allclose(V.T @ V, np.eye(k), rtol=0, atol=1e-10)
    np.testing.assert_allclose(dense @ V, V * lam, rtol=0, atol=1e-7)
    for col in V.T:  # each eigenvector lies on one block
        assert np.unique(labels[np.abs(col) > 0]).size == 1


@pytest.mark.parametrize("perm_seed", [None, 3])
def test_blocks_of_every_kind_equal_dense_eigh(perm_seed):
    """Two exact copies (equal spectra: the tie a single Krylov space cannot
    hold), a third larger block, a block smaller than the basis (solved
    exactly when its space runs out), and a block of one row."""
    B = graph_kernel(300, 4, 9, 0)
    C = graph_kernel(500, 5, 12, 1)
    tiny = graph_kernel(6, 2, 3, 2)
    one = sp.csr_matrix(np.array([[2.5]]))
    A, labels = _blocks([B, C, B, tiny, one], perm_seed)
    count = []

    def mv(v):
        count.append(1)
        return A @ v

    lam, V = component_krylov_schur(mv, labels, 6, v0=np.random.default_rng(0).uniform(0.5, 1.5, A.shape[0]),
                                    m=20)
    _check(A, labels, 6, lam, V)
    assert np.isclose(lam, 2.5).sum() == (2.5 >= lam[-1])  # the one-row block's eigenvalue where it ranks


def test_one_block_holds_several_wanted_eigenvalues():
    """A strong block whose top 4 eigenvalues all exceed the weak blocks'
    top ones: 4 of the 5 wanted pairs come from it."""
    strong = graph_kernel(400, 6, 15, 3) * 10.0
    A, labels = _blocks([graph_kernel(300, 4, 9, 4), strong, graph_kernel(200, 3, 7, 5)], perm_seed=1)
    lam, V = component_krylov_schur(lambda v: A @ v, labels, 5, v0=np.ones(A.shape[0]), m=24)
    _check(A, labels, 5, lam, V)
    big = labels[np.argmax(np.abs(V), axis=0)]
    assert (big == big[0]).sum() >= 4


def test_restarts_give_the_same_pairs():
    """A basis of k + 2 vectors (restarting every two products) and a large
    one: the same eigenpairs; the small basis needs more products."""
    A, labels = _blocks([graph_kernel(400, 4, 9, 6), graph_kernel(350, 4, 9, 7), graph_kernel(300, 4, 9, 8)])
    runs = {}
    for m in (6, 40):
        count = []
        lam, V = component_krylov_schur(lambda v: count.append(1) or A @ v, labels, 4, v0=np.ones(A.shape[0]), m=m)
        _check(A, labels, 4, lam, V)
        runs[m] = (lam, len(count))
    np.testing.assert_allclose(runs[6][0], runs[40][0], rtol=0, atol=1e-9)
    assert runs[6][1] > runs[40][1]


@pytest.mark.slow  # 24 s (most of it the rule it replaced, on 5000 rows): make test's 8 minutes
def test_fewer_products_than_the_shifted_single_vector_method():
    """Ten separate kNN-like components (the kernel of separated blobs):
    every component's top eigenvalue wanted. The per-component runs need
    fewer products than one Krylov space on the matrix shifted by 1e-8
    per component (the rule they replaced), for the same eigenvalues."""
    mats = [graph_kernel(500, 6, 20, s) for s in range(10)]
    A, labels = _blocks(mats)
    n = A.shape[0]
    v0 = np.random.default_rng(0).uniform(0.5, 1.5, n)
    ours = []
    lam, V = component_krylov_schur(lambda v: ours.append(1) or A @ v, labels, 10, v0=v0, m=basis_size(n, 10))
    _check(A, labels, 10, lam, V)
    q, eps, theirs = (labels // 3).astype(float), 1e-8 * 20.0, []
    lam_s, V_s = krylov_schur(lambda v: theirs.append(1) or (A @ v + eps * q * v), n, 10, v0=v0,
                              m=basis_size(n, 10))
    lam_s = lam_s - eps * q[np.argmax(np.abs(V_s), axis=0)]  # each of its vectors lies on one component
    np.testing.assert_allclose(np.sort(lam_s)[::-1], lam, rtol=0, atol=1e-9)
    assert len(ours) < len(theirs) / 2, (len(ours), len(theirs))


def test_operator_eigenvectors_uses_blocks_and_goes_to_the_block_method_on_a_repeat_inside_one():
    """``operator_eigenvectors`` with a few components: the per-component
    runs. Nearly equal eigenvalues inside one component (a group of
    :func:`eigen_groups`): the block method solves again, as for a
    connected graph (an exactly repeated one inside a component leaves no
    trace in one Krylov space: neither rule sees it)."""
    A, labels = _blocks([graph_kernel(300, 4, 9, 0), graph_kernel(250, 4, 9, 1)])
    rep = {}
    lam, V = operator_eigenvectors(lambda X: A @ X, A.shape[0], 3, components=labels // 3 - 2, report=rep)
    assert rep["per_component"] and rep["block_size"] == 1
    _check(A, labels, 3, lam, V)

    # one component with three eigenvalues 1e-9 apart (a dense block), beside a weaker one: the
    # per-component result shows the group inside one component, the block method (c + 2) solves again
    Q, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(120, 120)))
    d = np.linspace(0.0, 3.0, 120)
    d[-3:] = [5.0, 5.0 + 1e-9, 5.0 + 2e-9]
    A, labels = _blocks([sp.csr_matrix((Q * d) @ Q.T), graph_kernel(150, 2, 5, 2) * 0.1])
    rep = {}
    lam, V = operator_eigenvectors(lambda X: A @ X, A.shape[0], 3, components=labels // 3 - 2, report=rep)
    assert not rep["per_component"] and rep["block_size"] == 5
    np.testing.assert_allclose(lam, [5.0 + 2e-9, 5.0 + 1e-9, 5.0], rtol=0, atol=1e-9)
    np.testing.assert_allclose(A @ V, V * lam, rtol=0, atol=1e-7)


def test_bad_arguments_and_no_convergence():
    A, labels = _blocks([graph_kernel(100, 3, 7, 0), graph_kernel(100, 3, 7, 1)])
    with pytest.raises(ValueError, match="1 <= k < m"):
        component_krylov_schur(lambda v: A @ v, labels, 5, v0=np.ones(200), m=5)
    with pytest.raises(ValueError, match="v0 must be"):
        component_krylov_schur(lambda v: A @ v, labels, 2, v0=np.ones(199), m=10)
    with pytest.raises(ValueError, match="matvec returned shape"):
        component_krylov_schur(lambda v: (A @ v)[:-1], labels, 2, v0=np.ones(200), m=10)
    with pytest.raises(ConvergenceError, match="did not reach"):
        component_krylov_schur(lambda v: A @ v, labels, 2, v0=np.ones(200), m=4, max_restarts=0, tol=1e-15)


def test_a_looser_tol_ends_the_per_component_runs_sooner_but_never_the_block_method():
    """``operator_eigenvectors(tol=1e-8)`` (SMIC's default ``eigen_tol``):
    the per-component runs take fewer products than at 1e-12, with the
    same eigenvalues (LAPACK, 1e-10) and eigenvectors within 1e-6, each
    still zero outside its block; the block method, chosen for many
    components, stops at ``BLOCK_TOL`` whatever ``tol`` (its vectors mix
    the blocks at about the tolerance): the same products and bits at
    1e-6 as at 1e-12."""
    from infoclust_dask.objectives.smic import BLOCK_TOL

    mats = [graph_kernel(n, 4, 25, seed) for n, seed in ((900, 1), (1100, 2), (1300, 3))]
    A, labels = _blocks(mats, perm_seed=5)
    runs = {}
    for tol in (1e-12, 1e-8):
        rep = {}
        runs[tol] = (*operator_eigenvectors(lambda X: A @ X, A.shape[0], 3, components=labels // 3 - 2, tol=tol,
                                            report=rep), rep["products"])
        assert rep["per_component"]
    (lam12, V12, p12), (lam8, V8, p8) = runs[1e-12], runs[1e-8]
    assert p8 < p12
    _check(A, labels, 3, lam8, V8, atol=1e-10)
    np.testing.assert_allclose(lam8, lam12, rtol=1e-13, atol=0)
    np.testing.assert_allclose(np.abs(V8), np.abs(V12), rtol=0, atol=1e-6)
    # many components (more than c + 2): the block method, at BLOCK_TOL for any tol
    many, many_labels = _blocks([graph_kernel(60 + 10 * q, 3, 12, q) for q in range(8)], perm_seed=6)
    out = {}
    for tol in (BLOCK_TOL, 1e-6):
        rep = {}
        out[tol] = (*operator_eigenvectors(lambda X: many @ X, many.shape[0], 3, components=many_labels // 3 - 2, tol=tol,
                                           report=rep), rep)
        assert out[tol][2]["block_size"] > 1
    assert out[1e-6][2]["products"] == out[BLOCK_TOL][2]["products"]
    np.testing.assert_array_equal(out[1e-6][1], out[BLOCK_TOL][1])
