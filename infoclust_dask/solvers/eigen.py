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
``scipy.sparse.linalg.eigsh``). With ``block_size = b > 1`` the same runs in
block form (Zhou & Saad, *Block Krylov-Schur method for large symmetric
eigenvalue problems*, Numer. Algorithms 47, 2008): ``b`` vectors per
product, ``v_{m+1} b^T`` replaced by a block ``V_res B``, block Gram-Schmidt
twice against the basis and an in-block orthonormalization; an eigenvalue
repeated up to ``b`` times is found whole.

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

from typing import Any, Callable

import numpy as np

__all__ = ["BLOCK", "ConvergenceError", "basis_size", "block_size", "gram_schmidt", "krylov_schur", "random_direction"]

#: entries per column block of the basis (its ``m + 1`` rows of a block are contiguous)
BLOCK = 1 << 18
_EPS = np.finfo(np.float64).eps


class ConvergenceError(RuntimeError):
    """The wanted Ritz pairs did not converge within ``max_restarts``."""


def basis_size(n: int, k: int, budget: float | None = None, block_size: int = 1) -> int:
    """Number of Ritz columns ``m`` of the basis (which holds ``m + b``
    vectors for block size ``b``): ``max(2k + 1, 20, k + 7b)`` (at most
    ``n - b``); with a ``budget`` in bytes, fewer when ``(m + b) n`` float64
    numbers would not fit - but at least ``k + max(b, 3)`` (more restarts,
    the same eigenpairs). A block method needs the larger basis: on a
    sparse graph kernel (``n = 150 000``, ``k = 8``, ``b = 10``) it took
    274 products with ``m = 28``, 59 with ``m = 58`` and 43 with ``m = 78``
    (the single-vector method: 230 products of one vector)."""
    b = int(block_size)
    m = max(2 * k + 1, 20, k + 7 * b)
    if budget is not None:
        m = min(m, max(k + max(b, 3), int(budget // (8 * n)) - b))
    return min(m, n - b)


def block_size(n: int, k: int, budget: float | None = None, margin: int = 2) -> int:
    """Block size of :func:`krylov_schur` for ``k`` wanted eigenpairs:
    ``k + margin`` (an eigenvalue of multiplicity up to ``k + margin`` is
    found whole), smaller only when the smallest basis (``k + 2b``
    vectors of length ``n``) and a product's input and output (``2b``)
    would not fit in ``budget`` bytes: then the largest ``b >= 1`` that
    fits (``n = 1e7``, ``k = 10``, 1.5 GiB: 2)."""
    b = k + int(margin)
    if budget is not None:
        b = min(b, (int(budget // (8 * n)) - k) // 4)
    return max(1, min(b, (n - k) // 3))


def gram_schmidt(w: np.ndarray, j: int, coefficients: Callable[[np.ndarray], np.ndarray],
                 remove: Callable[[np.ndarray, np.ndarray], None]) -> tuple[np.ndarray, float]:
    """Classical Gram-Schmidt of ``w`` against ``j`` orthonormal vectors
    with the DGKS correction (ARPACK's ``dsaitr`` rule: project again while
    a projection removes more than 30 % of the norm, at most three passes):
    ``coefficients(w)`` gives ``V^T w``, ``remove(g, w)`` does ``w -= V g``
    in place. Returns ``(h, ||w||)``, ``h`` the summed coefficients; the
    norm is 0 when ``w`` lies in the span to working precision."""
    h = np.zeros(j)
    before = float(np.linalg.norm(w))
    for _ in range(3):
        g = coefficients(w)
        remove(g, w)
        h += g
        after = float(np.linalg.norm(w))
        if after > 0.717 * before:
            return h, after
        before = after
    return h, 0.0


class _Basis:
    """``rows`` orthonormal vectors of length ``n`` held as column blocks
    ``(rows, BLOCK)``: projections and updates run block by block (BLAS
    gemv on contiguous rows) and the blocks can be freed one at a time."""

    def __init__(self, n, rows, block):
        self.n, self.bounds = n, [(a, min(a + block, n)) for a in range(0, n, block)]
        self.blocks: list[Any] = [np.empty((rows, b - a)) for a, b in self.bounds]

    def get(self, j, b=None):
        """Vector ``j`` (``b=None``), or vectors ``j .. j + b`` as a C-ordered ``(n, b)`` array."""
        if b is None:
            return np.concatenate([blk[j] for blk in self.blocks])
        return np.concatenate([blk[j:j + b].T for blk in self.blocks])

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
        if j == 0:
            return np.zeros(0), float(np.linalg.norm(w))
        pairs = list(zip(self.blocks, self.bounds, strict=True))

        def coefficients(w):
            return sum(blk[:j] @ w[a:b] for blk, (a, b) in pairs)

        def remove(g, w):
            for blk, (a, b) in pairs:
                w[a:b] -= g @ blk[:j]

        return gram_schmidt(w, j, coefficients, remove)

    def project_block(self, j, W):
        """``G = V[:j]^T W`` and ``W -= V[:j] G`` in place for an ``(n, b)``
        block, by block classical Gram-Schmidt applied twice (BLAS3: one
        ``(j, L) x (L, b)`` product per basis block and pass). Returns
        ``G`` of shape ``(j, b)``."""
        G = np.zeros((j, W.shape[1]))
        if j == 0:
            return G
        for _ in range(2):
            g = sum(blk[:j] @ W[a:b] for blk, (a, b) in zip(self.blocks, self.bounds, strict=True))
            for blk, (a, b) in zip(self.blocks, self.bounds, strict=True):
                W[a:b] -= blk[:j].T @ g
            G += g
        return G

    def rotate(self, Y, p, mu, b):
        """``V[:p] <- V[:mu] Y`` and ``V[p:p + b] <- V[mu:mu + b]`` (the restart), in place."""
        for blk in self.blocks:
            last = blk[mu:mu + b].copy()
            blk[:p] = Y.T @ blk[:mu]
            blk[p:p + b] = last

    def extract(self, Y):
        """``V[:m] Y`` as a C-ordered ``(n, k)`` array, freeing each basis
        block once its rows are written (the peak stays near the basis)."""
        m, k = Y.shape
        out = np.empty((self.n, k))
        for q, (a, b) in enumerate(self.bounds):
            out[a:b] = self.blocks[q][:m].T @ Y
            self.blocks[q] = None
        return out


def random_direction(project: Callable[[np.ndarray], tuple], n: int, rng: np.random.Generator,
                     what: str) -> np.ndarray:
    """A unit vector of length ``n`` orthogonal to a basis, from random
    draws (an exhausted Krylov space, or a start column in the span of the
    others): ``project(w)`` removes the basis from ``w`` in place and
    returns ``(coefficients, norm left)``. Five draws, then
    :class:`ConvergenceError` naming ``what``."""
    for _ in range(5):
        w = rng.standard_normal(n)
        _, beta = project(w)
        if beta > 0.0:
            return w / beta
    raise ConvergenceError(f"{what}: no direction orthogonal to the basis was found.")


def _new_direction(V, j, rng, n):
    """:func:`random_direction` orthogonal to ``V[:j]``."""
    return random_direction(lambda w: V.project(j, w), n, rng,
                            f"krylov_schur ({j} basis vectors of length {n})")


def _expand_block(V, H, W, s, b, rng, n):
    """The block step of :func:`krylov_schur`: ``W = A V[:, s:s+b]`` made
    orthogonal to the ``j = s + b`` basis vectors by block Gram-Schmidt
    twice (``H[:j, s:s+b]``), then orthonormalized within itself column by
    column (the triangular ``H[j:j+b, s:s+b]``, block Lanczos' ``B``), the
    columns stored as ``V[:, j:j+b]``. A column that vanishes (an invariant
    subspace: ``A V`` inside the span) gets a zero row and a random
    direction orthogonal to everything, which keeps ``A V = V H`` exact."""
    j = s + b
    norms = np.linalg.norm(W, axis=0)
    H[:j, s:s + b] = V.project_block(j, W)
    for i in range(b):
        w = W[:, i]
        r = np.zeros(i)
        for _ in range(2):  # against the block's earlier columns (already orthogonal to the basis)
            if i:
                g = W[:, :i].T @ w
                w -= W[:, :i] @ g
                r += g
        beta = float(np.linalg.norm(w))
        H[j:j + i, s + i] += r
        if beta > 1e-12 * max(norms[i], np.finfo(np.float64).tiny) and beta > 0.0:
            H[j + i, s + i] = beta
            w /= beta
        else:
            H[j + i, s + i] = 0.0
            V.set(j + i, np.zeros(n))  # rows j .. j+i-1 hold the block's earlier columns, set below
            for q in range(i):
                V.set(j + q, W[:, q])
            w[:] = _new_direction(V, j + i, rng, n)
        W[:, i] = w
    for i in range(b):
        V.set(j + i, W[:, i])


def krylov_schur(matvec: Callable[[np.ndarray], np.ndarray], n: int, k: int, *, v0: np.ndarray | None,
                 tol: float = 1e-12, m: int | None = None, block_size: int = 1, max_restarts: int = 1000,
                 random_state: int | None = 0, callback: Callable[[], Any] | None = None,
                 block: int = BLOCK) -> tuple[np.ndarray, Any]:
    """The ``k`` largest (algebraic) eigenvalues of a symmetric ``n x n``
    matrix ``A`` and their orthonormal eigenvectors, from products
    ``matvec(v) = A v`` only (module notes).

    Parameters
    ----------
    matvec : callable
        ``block_size == 1``: ``(n,) float64 -> (n,)``; else ``(n, b) ->
        (n, b)`` (one product of a block of ``b`` vectors, e.g. one pass
        over the row blocks of ``A``). Called once per expansion step.
    n, k : int
        Size of ``A`` and number of eigenpairs (``1 <= k < m``, ``m + b <= n``).
    v0 : array of shape (n,)
        Start vector (need not be normalized; must not be zero); the other
        ``b - 1`` start columns are drawn from ``random_state``.
    tol : float
        Relative residual tolerance (ARPACK's rule).
    m : int, optional
        Ritz columns of the basis; :func:`basis_size` by default. The
        process holds ``(m + b) n`` float64 numbers plus a few blocks of
        ``b`` vectors of length ``n``.
    block_size : int, default=1
        ``b``: vectors per product. A single-vector Krylov space holds ONE
        vector of each eigenspace, so an eigenvalue of multiplicity ``r``
        needs ``b >= r`` to be found whole (e.g. the eigenvalue 1 of a
        normalized graph kernel with ``r`` connected components); nearly
        equal eigenvalues converge in fewer products with ``b`` above
        their number.
    max_restarts : int
        Restarts before :class:`ConvergenceError`.
    random_state : int
        Seed of the start columns after the first and of the vectors that
        replace an exhausted Krylov space (an invariant subspace of ``A``).
    callback : callable, optional
        Called after every product (progress).

    Returns
    -------
    eigenvalues : array of shape (k,), decreasing
    eigenvectors : array of shape (n, k), C-ordered
    """
    b = int(block_size)
    m = basis_size(n, k, block_size=b) if m is None else int(m)
    if b < 1 or not 1 <= k < m or m + b > n or m < k + b:
        raise ValueError(f"krylov_schur needs 1 <= k < m, k + b <= m and m + b <= n; got k={k}, m={m}, "
                         f"b={b}, n={n}.")
    v = np.array(v0, dtype=np.float64).reshape(-1)
    if v.shape != (n,) or not np.all(np.isfinite(v)) or not np.linalg.norm(v) > 0:
        raise ValueError(f"v0 must be a finite nonzero vector of length {n}.")
    rng = np.random.default_rng(random_state)
    V = _Basis(n, m + b, block)
    V.set(0, v / np.linalg.norm(v))
    for j in range(1, b):
        V.set(j, _new_direction(V, j, rng, n))
    H = np.zeros((m + b, m))  # Rayleigh quotient S (upper mu x mu) and the residual block B (rows mu .. mu + b)
    p = 0  # vectors kept by the last restart
    keep = min(max(k + 1, (m + k) // 2), m - b)
    for restart in range(max_restarts + 1):
        s = p
        while s + b <= m:
            X = V.get(s) if b == 1 else V.get(s, b)
            W = np.asarray(matvec(X), dtype=np.float64)
            if W.shape != X.shape:
                raise ValueError(f"matvec returned shape {W.shape}; expected {X.shape}.")
            if callback is not None:
                callback()
            if b == 1:
                j = s + 1  # the new column; A v_s = sum_{l <= j} H[l, s] v_l
                w = np.array(W.reshape(n), dtype=np.float64, copy=True)
                H[:j, s], beta = V.project(j, w)
                if beta > 0.0:
                    H[j, s] = beta
                    V.set(j, w / beta)
                else:
                    # A v_s lies in the basis' span (an invariant subspace): the decomposition holds with a
                    # zero entry here, and the expansion goes on from a random vector orthogonal to the basis
                    H[j, s] = 0.0
                    V.set(j, _new_direction(V, j, rng, n))
            else:
                _expand_block(V, H, np.array(W, dtype=np.float64, order="F", copy=True), s, b, rng, n)
            s += b
        mu = s
        S = H[:mu, :mu]
        theta, Y = np.linalg.eigh(0.5 * (S + S.T))
        theta, Y = theta[::-1], Y[:, ::-1]
        B = H[mu:mu + b, :mu] @ Y  # residual of Ritz pair i: ||B[:, i]|| (the basis is orthonormal)
        res = np.linalg.norm(B, axis=0)
        done = res[:k] <= tol * np.maximum(np.abs(theta[:k]), _EPS ** (2 / 3))
        if done.all():
            return theta[:k].copy(), V.extract(Y[:, :k])
        if restart == max_restarts:
            break
        p = keep
        V.rotate(Y[:, :p], p, mu, b)
        H[:] = 0.0
        H[np.arange(p), np.arange(p)] = theta[:p]
        H[p:p + b, :p] = B[:, :p]
    raise ConvergenceError(
        f"krylov_schur: {int((~done).sum())} of the {k} wanted eigenpairs did not reach tol={tol:g} in "
        f"{max_restarts} restarts (basis of {m} + {b} vectors, block size {b}); raise max_restarts or the basis "
        "size m.")
