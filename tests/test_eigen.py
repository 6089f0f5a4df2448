"""The driver's Krylov-Schur eigensolver against independent references:
dense LAPACK ``eigh`` and ARPACK's ``eigsh`` on the same matrices, an
exhausted Krylov space (invariant subspace), its memory rule and its
errors."""

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp
from helpers import graph_kernel
from scipy.sparse.linalg import eigsh

from infoclust_dask.solvers.eigen import ConvergenceError, basis_size, block_size, krylov_schur


def _sym(n, seed):
    G = np.random.default_rng(seed).standard_normal((n, n))
    return (G + G.T) / 2


@pytest.mark.parametrize("n, k, m, block", [(300, 5, None, 64), (300, 5, 8, 1 << 18), (120, 1, 4, 50)])
def test_equals_dense_eigh(n, k, m, block):
    A = _sym(n, 0)
    calls = []
    lam, V = krylov_schur(lambda v: A @ v, n, k, v0=np.ones(n), m=m, block=block,
                          callback=lambda: calls.append(1))
    w, U = scipy.linalg.eigh(A)
    np.testing.assert_allclose(lam, w[::-1][:k], rtol=0, atol=1e-10)
    assert V.shape == (n, k) and V.flags.c_contiguous
    np.testing.assert_allclose(V.T @ V, np.eye(k), rtol=0, atol=1e-12)
    np.testing.assert_allclose(A @ V, V * lam, rtol=0, atol=1e-9)
    # the same eigenvectors up to sign (the top eigenvalues of a random matrix are simple)
    np.testing.assert_allclose(np.abs(np.sum(V * U[:, ::-1][:, :k], axis=0)), 1.0, rtol=0, atol=1e-9)
    assert len(calls) > k


def test_equals_arpack_on_a_sparse_graph_kernel_with_fewer_vectors():
    """A kNN-like sparse kernel with clustered top eigenvalues: the same
    eigenvalues as ARPACK to 1e-10, with fewer basis vectors than ARPACK
    uses."""
    n = 4000
    K = graph_kernel(n, 6, 40, 1)
    ref = np.sort(eigsh(K, k=10, which="LA", tol=1e-12, v0=np.ones(n))[0])[::-1]
    lam, V = krylov_schur(lambda v: K @ v, n, 10, v0=np.ones(n), m=14)
    np.testing.assert_allclose(lam, ref, rtol=0, atol=1e-10)
    np.testing.assert_allclose(K @ V, V * lam, rtol=0, atol=1e-8)


def test_an_exhausted_krylov_space_continues_from_a_random_vector():
    """``v0`` in a two-dimensional invariant subspace of a diagonal matrix:
    the expansion breaks down after two products, continues from random
    vectors orthogonal to the basis, and still finds the top eigenvalues
    (which ``v0`` does not touch)."""
    d = np.linspace(0.0, 1.0, 200)
    d[-4:] = [2.0, 3.0, 4.0, 5.0]
    v0 = np.zeros(200)
    v0[[0, 1]] = 1.0
    lam, V = krylov_schur(lambda v: d * v, 200, 3, v0=v0, m=12, random_state=5)
    np.testing.assert_allclose(lam, [5.0, 4.0, 3.0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.abs(V[[-1, -2, -3], [0, 1, 2]]), 1.0, rtol=0, atol=1e-10)


def test_basis_size_follows_the_budget():
    assert basis_size(10**6, 10) == 21
    assert basis_size(10**7, 10, 3 * 2**29) == 19  # 20 vectors of 80 MB in 1.5 GiB
    assert basis_size(10**8, 10, 3 * 2**29) == 13  # k + 3 at least, over the budget
    assert basis_size(12, 10) == 11  # m + b <= n
    assert basis_size(10**6, 10, block_size=12) == 94  # k + 7b
    assert basis_size(10**7, 10, 3 * 2**29, block_size=12) == 22  # k + b at least, over the budget
    assert block_size(10**6, 10) == 12
    assert block_size(10**6, 10, 3 * 2**29) == 12  # 201 vectors fit
    assert block_size(10**7, 10, 3 * 2**29) == 2  # (20 - 10) // 4: basis k + 2b and a product's 2b fit


def test_errors_name_the_values():
    A = _sym(50, 2)
    with pytest.raises(ValueError, match=r"1 <= k < m, k \+ b <= m and m \+ b <= n; got k=10, m=10, b=1, n=50"):
        krylov_schur(lambda v: A @ v, 50, 10, v0=np.ones(50), m=10)
    with pytest.raises(ValueError, match="finite nonzero vector of length 50"):
        krylov_schur(lambda v: A @ v, 50, 3, v0=np.zeros(50))
    with pytest.raises(ValueError, match=r"matvec returned shape \(49,\); expected \(50,\)"):
        krylov_schur(lambda v: (A @ v)[:49], 50, 3, v0=np.ones(50))
    with pytest.raises(ConvergenceError, match="did not reach tol=1e-12 in 0 restarts"):
        krylov_schur(lambda v: A @ v, 50, 3, v0=np.ones(50), m=5, max_restarts=0)


def _copies(r, n_each, seed, gap=0.0):
    """``r`` copies of one connected sparse graph kernel, normalized as
    ``D^-1/2 K D^-1/2`` (top eigenvalue exactly 1 in each copy: multiplicity
    ``r``), the copy ``q`` shifted by ``q * gap`` (near-duplicates)."""
    K = graph_kernel(n_each, 4, 9, seed)
    d = np.asarray(K.sum(axis=1)).ravel()
    K = sp.diags(1 / np.sqrt(d)) @ K @ sp.diags(1 / np.sqrt(d))
    return sp.block_diag([K + q * gap * sp.identity(n_each) for q in range(r)]).tocsr()


@pytest.mark.parametrize("gap", [0.0, 1e-8])
def test_a_block_finds_a_repeated_eigenvalue_whole_where_one_vector_cannot(gap):
    """Four identical components (eigenvalue 1 four times, or four values
    1e-8 apart) and a start vector symmetric across them: the block method
    (b = k + 2) returns the eigenvalues of ``eigh`` to 1e-10 and the same
    invariant subspace; the single-vector method (b = 1) from the same
    start cannot see more than one vector of an exactly repeated eigenspace
    (its Krylov space is symmetric across the copies) and returns wrong
    eigenvalues; 1e-8 apart, the copies are distinct eigenvalues it finds."""
    A = _copies(4, 150, 3, gap)
    n, k = A.shape[0], 6
    w, U = scipy.linalg.eigh(A.toarray())
    ref = w[::-1][:k]
    lam, V = krylov_schur(lambda X: A @ X, n, k, v0=np.ones(n), block_size=k + 2, random_state=1)
    np.testing.assert_allclose(lam, ref, rtol=0, atol=1e-10)
    np.testing.assert_allclose(A @ V, V * lam, rtol=0, atol=1e-9)
    top = U[:, ::-1][:, :4]  # the (nearly) repeated eigenspace: the same projector
    np.testing.assert_allclose(V[:, :4] @ V[:, :4].T, top @ top.T, rtol=0, atol=1e-6 if gap else 1e-9)
    lam1, _ = krylov_schur(lambda v: A @ v, n, k, v0=np.ones(n), block_size=1, random_state=1)
    assert (np.abs(lam1 - ref).max() > 1e-3) == (gap == 0.0)


@pytest.mark.parametrize("b", [2, 5, 7])
def test_block_sizes_agree_with_dense_eigh(b):
    A = _sym(300, 4)
    lam, V = krylov_schur(lambda X: A @ X, 300, 5, v0=np.ones(300), block_size=b, block=64)
    w, U = scipy.linalg.eigh(A)
    np.testing.assert_allclose(lam, w[::-1][:5], rtol=0, atol=1e-10)
    np.testing.assert_allclose(np.abs(np.sum(V * U[:, ::-1][:, :5], axis=0)), 1.0, rtol=0, atol=1e-9)
    np.testing.assert_allclose(V.T @ V, np.eye(5), rtol=0, atol=1e-12)


def test_a_block_space_that_runs_out_continues_from_random_vectors():
    """A matrix with three distinct eigenvalues: a block of 3 start vectors
    spans an invariant subspace of dimension 9 after two products, the
    block step replaces the vanished columns by random directions, and the
    result is still the top of the spectrum (eigenvalue 5 four times)."""
    d = np.repeat([1.0, 2.0, 5.0], [100, 60, 40])
    calls = []
    lam, V = krylov_schur(lambda X: d[:, None] * X, 200, 4, v0=np.ones(200), block_size=3, m=16,
                          random_state=2, callback=lambda: calls.append(1))
    np.testing.assert_allclose(lam, [5.0] * 4, rtol=0, atol=1e-12)
    np.testing.assert_allclose(d[:, None] * V, V * lam, rtol=0, atol=1e-10)
    np.testing.assert_allclose(V.T @ V, np.eye(4), rtol=0, atol=1e-12)


def test_a_random_direction_is_a_unit_vector_orthogonal_to_the_basis_or_an_error_naming_the_solver():
    """The one helper both Krylov-Schur solvers restart from
    (``random_direction``): orthogonal to the basis and of unit norm, the
    same vector for the same seed; a basis that leaves nothing after five
    draws is an error naming the caller."""
    from infoclust_dask.solvers.eigen import random_direction

    n = 40
    Q, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((n, 7)))

    def project(w, B=Q):
        h = B.T @ w
        w -= B @ h
        h2 = B.T @ w  # twice: orthogonal to rounding
        w -= B @ h2
        return h + h2, float(np.linalg.norm(w))

    w = random_direction(project, n, np.random.default_rng(3), "a test")
    np.testing.assert_allclose(Q.T @ w, 0.0, atol=1e-14)
    assert np.linalg.norm(w) == pytest.approx(1.0, abs=1e-14)
    np.testing.assert_array_equal(w, random_direction(project, n, np.random.default_rng(3), "a test"))

    def nothing_left(w):  # a basis of the whole space (in exact arithmetic)
        w[:] = 0.0
        return None, 0.0

    with pytest.raises(ConvergenceError, match="the solver under test: no direction orthogonal"):
        random_direction(nothing_left, n, np.random.default_rng(3), "the solver under test")
