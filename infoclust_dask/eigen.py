"""An eigensolver on the driver for a symmetric matrix known only through
products ``v -> A v`` (e.g. a map-reduce pass over kernel row blocks kept on
the workers), with a memory footprint fixed in advance.

:func:`krylov_schur` is the Krylov-Schur method (Stewart, *A Krylov-Schur
algorithm for large eigenproblems*, SIAM J. Matrix Anal. Appl. 23(3), 2001,
§§2-3) in its symmetric form, i.e. thick-restart Lanczos (Wu & Simon, SIAM
J. Matrix Anal. Appl. 22(2), 2000): a Krylov decomposition

    A V_m = V_m S_m + v_{m+1} b^T,     V_{m+1}^T V_{m+1} = I,

is expanded by Lanczos steps with full re-orthogonalization (classical
Gram-Schmidt applied twice), the Rayleigh quotient ``S_m`` is diagonalized,
the ``p`` best Ritz vectors are kept (``V_p <- V_m Y_p``, ``b <- Y_p^T b``)
and the expansion starts again, until the residual norms ``|b^T y_i|`` of
the ``k`` wanted Ritz pairs are below ``tol * max(|theta_i|, eps^(2/3))``
(ARPACK's stopping rule, so ``tol`` means what it means for
``scipy.sparse.linalg.eigsh``).

Why not ``eigsh`` on a ``LinearOperator``: ARPACK's basis of ``ncv``
vectors is only part of its footprint - scipy's extraction step allocates a
second ``n x ncv`` array and then a C-ordered copy of the ``k``
eigenvectors, so at ``n = 1e7``, ``ncv = 16``, ``k = 10`` the solver alone
peaked at 3.05 GiB over the process' baseline. Here the basis is the only
``O(n)`` storage: ``m + 1`` vectors stored as column blocks of ``BLOCK``
entries, and the eigenvectors are formed block by block into the output
while each basis block is freed, so the peak is the basis plus a few
vectors of length ``n``.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = ["BLOCK", "ConvergenceError", "basis_size", "krylov_schur"]

#: entries per column block of the basis (its ``m + 1`` rows of a block are contiguous)
BLOCK = 1 << 18
_EPS = np.finfo(np.float64).eps


class ConvergenceError(RuntimeError):
    """The wanted Ritz pairs did not converge within ``max_restarts``."""


def basis_size(n, k, budget=None):
    """Number of basis vectors ``m``: ``max(2k + 1, 20)`` (at most ``n``);
    with a ``budget`` in bytes, fewer when ``(m + 1) n`` float64 numbers
    would not fit - but at least ``k + 3`` (more restarts, the same
    eigenpairs)."""
    m = max(2 * k + 1, 20)
    if budget is not None:
        m = min(m, max(k + 3, int(budget // (8 * n)) - 1))
    return min(m, n)


class _Basis:
    """``m + 1`` orthonormal vectors of length ``n`` held as column blocks
    ``(m + 1, BLOCK)``: projections and updates run block by block (BLAS
    gemv on contiguous rows) and the blocks can be freed one at a time."""

    def __init__(self, n, rows, block):
        self.n, self.bounds = n, [(a, min(a + block, n)) for a in range(0, n, block)]
        self.blocks = [np.empty((rows, b - a)) for a, b in self.bounds]

    def get(self, j):
        return np.concatenate([blk[j] for blk in self.blocks])

    def set(self, j, v):
        for blk, (a, b) in zip(self.blocks, self.bounds, strict=True):
            blk[j] = v[a:b]

    def project(self, j, w):
        """``h = V[:j]^T w`` and ``w -= V[:j] h`` in place, by classical
        Gram-Schmidt with the DGKS correction (ARPACK's ``dsaitr`` rule:
        project again while a projection removes more than 30% of the
        norm, at most twice). Returns ``(h, ||w||)``; the norm is 0 when
        ``w`` lies in the span of the basis to working precision (the
        caller must then replace it)."""
        h = np.zeros(j)
        before = float(np.linalg.norm(w))
        for _ in range(3):
            g = sum(blk[:j] @ w[a:b] for blk, (a, b) in zip(self.blocks, self.bounds, strict=True))
            for blk, (a, b) in zip(self.blocks, self.bounds, strict=True):
                w[a:b] -= g @ blk[:j]
            h += g
            after = float(np.linalg.norm(w))
            if after > 0.717 * before:
                return h, after
            before = after
        return h, 0.0

    def rotate(self, Y, p, m):
        """``V[:p] <- V[:m] Y`` and ``V[p] <- V[m]`` (the restart), in place."""
        for blk in self.blocks:
            last = blk[m].copy()
            blk[:p] = Y.T @ blk[:m]
            blk[p] = last

    def extract(self, Y):
        """``V[:m] Y`` as a C-ordered ``(n, k)`` array, freeing each basis
        block once its rows are written (the peak stays near the basis)."""
        m, k = Y.shape
        out = np.empty((self.n, k))
        for q, (a, b) in enumerate(self.bounds):
            out[a:b] = self.blocks[q][:m].T @ Y
            self.blocks[q] = None
        return out


def krylov_schur(matvec: Callable[[np.ndarray], np.ndarray], n, k, *, v0, tol=1e-12, m=None,
                 max_restarts=1000, random_state=0, callback=None, block=BLOCK):
    """The ``k`` largest (algebraic) eigenvalues of a symmetric ``n x n``
    matrix ``A`` and their orthonormal eigenvectors, from products
    ``matvec(v) = A v`` only (module notes).

    Parameters
    ----------
    matvec : callable
        ``(n,) float64 -> (n,)``; called once per Lanczos step.
    n, k : int
        Size of ``A`` and number of eigenpairs (``1 <= k < m <= n``).
    v0 : array of shape (n,)
        Start vector (need not be normalized; must not be zero).
    tol : float
        Relative residual tolerance (ARPACK's rule).
    m : int, optional
        Basis size; :func:`basis_size` by default. The process holds
        ``(m + 1) n`` float64 numbers plus a few vectors of length ``n``.
    max_restarts : int
        Restarts before :class:`ConvergenceError`.
    random_state : int
        Seed of the vectors that replace an exhausted Krylov space (when
        ``A`` has an invariant subspace containing ``v0``).
    callback : callable, optional
        Called after every product (progress).

    Returns
    -------
    eigenvalues : array of shape (k,), decreasing
    eigenvectors : array of shape (n, k), C-ordered
    """
    m = basis_size(n, k) if m is None else int(m)
    if not 1 <= k < m <= n:
        raise ValueError(f"krylov_schur needs 1 <= k < m <= n; got k={k}, m={m}, n={n}.")
    v = np.array(v0, dtype=np.float64).reshape(-1)
    if v.shape != (n,) or not np.all(np.isfinite(v)) or not np.linalg.norm(v) > 0:
        raise ValueError(f"v0 must be a finite nonzero vector of length {n}.")
    rng = np.random.default_rng(random_state)
    V = _Basis(n, m + 1, block)
    V.set(0, v / np.linalg.norm(v))
    H = np.zeros((m + 1, m))  # Rayleigh quotient S (upper m x m) and the residual row b (row m)
    p = 0  # vectors kept by the last restart
    keep = min(max(k + 1, (m + k) // 2), m - 1)
    for restart in range(max_restarts + 1):
        for j in range(p, m):
            w = np.asarray(matvec(V.get(j)), dtype=np.float64).reshape(-1)
            if w.shape != (n,):
                raise ValueError(f"matvec returned shape {w.shape}; expected ({n},).")
            if callback is not None:
                callback()
            w = w.copy()
            H[: j + 1, j], beta = V.project(j + 1, w)
            if beta > 0.0:
                H[j + 1, j] = beta
                V.set(j + 1, w / beta)
                continue
            # A v_j lies in the basis' span (an invariant subspace): the decomposition holds with
            # b = 0 here, and the expansion goes on from a random vector orthogonal to the basis
            H[j + 1, j] = 0.0
            for _ in range(3):
                w = rng.standard_normal(n)
                _, beta = V.project(j + 1, w)
                if beta > 0.0:
                    break
            V.set(j + 1, w / beta)
        S = H[:m, :m]
        theta, Y = np.linalg.eigh(0.5 * (S + S.T))
        theta, Y = theta[::-1], Y[:, ::-1]
        b = H[m, :m] @ Y  # residual of Ritz pair i: |b_i| (the basis is orthonormal)
        done = np.abs(b[:k]) <= tol * np.maximum(np.abs(theta[:k]), _EPS ** (2 / 3))
        if done.all():
            return theta[:k].copy(), V.extract(Y[:, :k])
        if restart == max_restarts:
            break
        p = keep
        V.rotate(Y[:, :p], p, m)
        H[:] = 0.0
        H[np.arange(p), np.arange(p)] = theta[:p]
        H[p, :p] = b[:p]
    raise ConvergenceError(
        f"krylov_schur: {int((~done).sum())} of the {k} wanted eigenpairs did not reach tol={tol:g} in "
        f"{max_restarts} restarts (basis of {m} vectors); raise max_restarts or the basis size m.")
