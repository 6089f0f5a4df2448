"""The top eigenpairs of a symmetric, block-diagonal matrix known only through
products ``v -> A v``, whose blocks are given by a labelling of the rows
(e.g. the connected components of a neighbour graph, whose kernel has no
entry between two components): one Krylov-Schur run per block, all driven
by the same products.

Why: for a block-diagonal ``A`` and a vector ``v`` whose pieces ``v_q`` lie
on the blocks, one product gives every block's product at once,
``(A v)_q = A_q v_q``. :func:`krylov_schur` on the whole matrix builds ONE
Krylov space of dimension ``m`` from ``m`` products; here the same ``m``
products build one space of dimension ``m`` per block, whose direct sum
holds that space (``K_m(A, v)`` lies in the sum of the ``K_m(A_q, v_q)``),
so its Ritz values are at least as good (Cauchy interlacing). Nothing has
to break ties between blocks with equal spectra, and each block converges
at the rate of its own spectral gap: SMIC's kernel of 10 separated blobs
(2e5 rows) needs a top eigenvalue about 13.0 per blob, its second about
10.5; the whole matrix's ten top eigenvalues lie within 0.2 of each other,
which the single-vector method on the shifted matrix resolved in 111
products, the per-block runs in far fewer (docs/BENCHMARKS.md).

The method is Krylov-Schur in its symmetric form (Stewart, SIAM J. Matrix
Anal. Appl. 23(3), 2001, §§2-3; thick-restart Lanczos, Wu & Simon 2000)
run block by block on segments of one basis: the rows are put in block
order, slot ``i`` of the basis holds every block's ``i``-th vector on its
segment, each block keeps its own Rayleigh quotient ``S_q`` and residual,
and Gram-Schmidt (classical, with the DGKS correction) runs segment by
segment. The ``k`` wanted pairs are the ``k`` largest Ritz values over all
blocks; the stopping rule is ARPACK's (``tol`` as in
:func:`krylov_schur`), applied to those ``k``. A block no larger than the
basis is solved exactly once its Krylov space is exhausted (its rows no
longer take part in the products)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .eigen import ConvergenceError, gram_schmidt, random_direction

__all__ = ["component_krylov_schur"]

_EPS = np.finfo(np.float64).eps


class _Blocks:
    """The basis ``V`` (``(m + 1, n)``, rows in block order) with one
    Rayleigh quotient per block; ``done[q]``: block ``q`` solved exactly
    (``values[q]``, ``vectors[q]`` over its segment)."""

    def __init__(self, bounds, m, rng):
        self.bounds, self.m, self.rng = bounds, m, rng
        n = bounds[-1][1] if bounds else 0
        self.V = np.zeros((m + 1, n))
        self.H = [np.zeros((m + 1, m)) for _ in bounds]
        self.done: list[Any] = [None] * len(bounds)

    def active(self):
        return [q for q in range(len(self.bounds)) if self.done[q] is None]

    def start(self, v):
        for a, b in self.bounds:
            seg = v[a:b]
            if not np.linalg.norm(seg) > 0:  # a zero piece: a seeded one instead
                seg = self.rng.uniform(0.5, 1.5, b - a)
            self.V[0, a:b] = seg / np.linalg.norm(seg)

    def expand(self, s, W):
        """Column ``s`` of every active block's decomposition from
        ``W = A V[s]``: ``A v_s = sum_{l <= s + 1} H[l, s] v_l``."""
        for q in self.active():
            a, b = self.bounds[q]
            w = np.array(W[a:b], dtype=np.float64, copy=True)
            h, beta = _project(self.V[:s + 1, a:b], w)
            self.H[q][:s + 1, s] = h
            if beta > 0.0:
                self.H[q][s + 1, s] = beta
                self.V[s + 1, a:b] = w / beta
            elif s + 1 < b - a:  # an invariant subspace of the block: go on from a new direction
                self.V[s + 1, a:b] = _new_direction(self.V[:s + 1, a:b], self.rng)
            else:  # the block's whole space: solved exactly, and out of the products from now on
                theta, Y = np.linalg.eigh(_sym(self.H[q][:s + 1, :s + 1]))
                self.done[q] = (theta[::-1].copy(), (Y[:, ::-1].T @ self.V[:s + 1, a:b]).T)
                self.V[:, a:b] = 0.0

    def ritz(self, mu):
        """Every active block's Ritz values, vectors (in its basis) and residual norms."""
        out = {}
        for q in self.active():
            theta, Y = np.linalg.eigh(_sym(self.H[q][:mu, :mu]))
            theta, Y = theta[::-1], Y[:, ::-1]
            out[q] = (theta, Y, self.H[q][mu, :mu] @ Y)
        return out

    def restart(self, ritz, p, mu):
        """Keep each active block's ``p`` best Ritz vectors (Krylov-Schur restart)."""
        for q, (theta, Y, B) in ritz.items():
            a, b = self.bounds[q]
            last = self.V[mu, a:b].copy()
            self.V[:p, a:b] = Y[:, :p].T @ self.V[:mu, a:b]
            self.V[p, a:b] = last
            self.V[p + 1:, a:b] = 0.0
            H = self.H[q]
            H[:] = 0.0
            H[np.arange(p), np.arange(p)] = theta[:p]
            H[p, :p] = B[:p]


def _sym(S):
    return 0.5 * (S + S.T)


def _project(V, w):
    """``h = V^T w``, ``w -= V h`` in place against the rows of ``V``
    (:func:`~infoclust_dask.solvers.eigen.gram_schmidt`); returns ``(h, ||w||)``."""

    def remove(g, w):
        w -= g @ V

    return gram_schmidt(w, V.shape[0], lambda w: V @ w, remove)


def _new_direction(V, rng):
    """A random unit vector orthogonal to the rows of ``V``
    (:func:`~infoclust_dask.solvers.eigen.random_direction`)."""
    return random_direction(lambda w: _project(V, w), V.shape[1], rng, "component_krylov_schur (a block's basis)")


def _wanted(blocks, ritz, k, tol):
    """The ``k`` largest Ritz values over the blocks, as ``(value, block,
    index)`` (ties: the smaller block, then index), and whether their
    residuals meet ARPACK's rule."""
    pairs, ok = [], {}
    for q, (theta, _, B) in ritz.items():
        for i, t in enumerate(theta):
            pairs.append((-float(t), q, i))
            ok[(q, i)] = abs(B[i]) <= tol * max(abs(t), _EPS ** (2 / 3))
    for q, solved in enumerate(blocks.done):
        if solved is not None:
            for i, t in enumerate(solved[0]):
                pairs.append((-float(t), q, i))
                ok[(q, i)] = True
    top = sorted(pairs)[:k]
    return [(-v, q, i) for v, q, i in top], len(top) == k and all(ok[(q, i)] for _, q, i in top)


def component_krylov_schur(matvec: Callable[[np.ndarray], np.ndarray], labels: np.ndarray, k: int, *,
                           v0: np.ndarray, tol: float = 1e-12, m: int = 20, max_restarts: int = 1000,
                           random_state: int | None = 0,
                           callback: Callable[[], Any] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest (algebraic) eigenvalues and orthonormal
    eigenvectors of a symmetric ``n x n`` matrix ``A`` with no entry
    between rows of different ``labels`` (module notes), from products
    ``matvec(v) = A v`` of ``(n,)`` float64 vectors only.

    ``labels``: ``(n,)`` non-negative integers, the block of each row (e.g.
    the connected components of ``A``'s graph; a matrix with entries
    between blocks gives wrong answers). ``v0``: the start vector (each
    block starts from its piece; a zero piece is replaced by a seeded
    one). ``m``: vectors per block's Krylov basis (``k`` of them may come
    from one block: ``m > k``); the process holds ``(m + 1) n`` float64
    numbers plus a few vectors of length ``n``. ``callback()`` runs after
    every product. Returns eigenvalues ``(k,)`` (decreasing; ties: the
    block of the smaller label) and eigenvectors ``(n, k)`` (C-ordered),
    each supported on one block. Raises :class:`ConvergenceError` after
    ``max_restarts`` restarts."""
    labels = np.asarray(labels)
    n = int(labels.shape[0])
    m = int(m)
    if labels.ndim != 1 or not 1 <= k < m or m + 1 > n:
        raise ValueError(f"component_krylov_schur needs 1 <= k < m and m + 1 <= n rows; got k={k}, m={m}, n={n}.")
    v = np.asarray(v0, dtype=np.float64).reshape(-1)
    if v.shape != (n,) or not np.all(np.isfinite(v)):
        raise ValueError(f"v0 must be a finite vector of length {n}.")
    order = np.argsort(labels, kind="stable")
    sizes = np.bincount(labels[order] - labels[order[0]] if n else labels)
    sizes = sizes[sizes > 0]
    ends = np.cumsum(sizes)
    blocks = _Blocks([(int(e - s), int(e)) for s, e in zip(sizes, ends, strict=True)], m, np.random.default_rng(random_state))
    blocks.start(v[order])
    p = 0
    x = np.empty(n)
    for restart in range(max_restarts + 1):
        for s in range(p, m):
            if blocks.active():
                x[order] = blocks.V[s]
                W = np.asarray(matvec(x.copy()), dtype=np.float64).reshape(-1)
                if W.shape != (n,):
                    raise ValueError(f"matvec returned shape {W.shape}; expected {(n,)}.")
                if callback is not None:
                    callback()
                blocks.expand(s, W[order])
            # the residual norms are exact for any basis size: the check runs after every product
            ritz = blocks.ritz(s + 1)
            top, converged = _wanted(blocks, ritz, k, tol)
            if converged:
                return _extract(blocks, ritz, top, order, s + 1)
        if restart == max_restarts:
            break
        # each block keeps as many Ritz vectors as the block with most of the wanted pairs needs (Krylov-Schur's
        # (m + k) / 2 with that block's k): ten blocks of one wanted pair each keep 11 of 21, not 15 - and with
        # the basis that fits at 1e7 rows (m = 13) 7, not 11: 6 new vectors a restart instead of 2
        most = max(int(np.sum([q == b for _, q, _ in top])) for b in ritz) if ritz else 1
        p = min(max(most + 1, (m + most) // 2), m - 1)
        blocks.restart(ritz, p, m)
    raise ConvergenceError(
        f"component_krylov_schur: the {k} wanted eigenpairs did not reach tol={tol:g} in {max_restarts} "
        f"restarts (basis of {m} + 1 vectors per block); raise max_restarts or m.")


def _extract(blocks, ritz, top, order, mu):
    """The eigenvalues and the ``(n, k)`` eigenvectors (rows in the caller's order) of the wanted pairs."""
    n = order.size
    lam = np.array([v for v, _, _ in top])
    out = np.zeros((n, len(top)))
    for col, (_, q, i) in enumerate(top):
        a, b = blocks.bounds[q]
        if blocks.done[q] is not None:
            piece = blocks.done[q][1][:, i]
        else:
            piece = ritz[q][1][:, i] @ blocks.V[:mu, a:b]
        out[order[a:b], col] = piece
    return lam, out
