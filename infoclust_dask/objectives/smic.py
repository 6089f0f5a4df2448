"""SMI-based clustering (SMIC): the driver-side mathematics.

Sugiyama, Yamada, Kimura & Hachiya, *On Information-Maximization Clustering:
Tuning Parameter Selection and Analytic Solution* (2011, ICML), §2.3.

- :func:`kernel_matrix`: the sparse local-scaling kernel (7) from the ``t``
  nearest neighbours of every sample (found block against block by
  :data:`infoclust_dask.kernels.knn.KNN`), optionally normalized.
- :func:`top_eigenvectors`: the ``c`` principal eigenvectors of the kernel,
  which maximize the SMI approximation (8) under orthonormality.
- :func:`align`: inside a group of (nearly) repeated eigenvalues, the
  rotation of scikit-learn's ``cluster_qr`` (Damle, Minden & Ying 2019), so
  the partition does not depend on which basis the eigensolver returned.
- :func:`orient`: the sign rule ``phi~ = phi sign(phi^T 1)``.
- :func:`assign`: the assignment rule of §2.3 with class prior pi.

Conventions (not spelled out in the paper, fixed here):

- a point is not its own neighbour: ``sigma_i`` is the distance to the
  ``t``-th *other* point;
- the kernel is symmetrized by the "or" rule of (7) (elementwise maximum of
  the directed kNN kernel and its transpose, not the average), and
  ``K_ii = 1`` (the out-of-sample rule divides by the eigenvalue, which
  presumes the diagonal);
- when ``sigma_i sigma_j = 0`` (duplicates) the entry is the limit: 1 for
  identical points, 0 otherwise (never NaN);
- largest *algebraic* eigenvalues; eigenvector entries below ``1e-10`` of
  the vector's largest magnitude are round-off and set to 0 before the sign
  rule, and ``sign(0) = +1``, so different eigensolvers label points of
  disconnected components alike;
- ``normalization="symmetric"`` replaces ``K`` by ``D^-1/2 K D^-1/2``
  (``D`` the row sums, §3.2's spectral-clustering kernel). The Fig. 4 numbers
  of the paper are reached only with it (see ``docs/RESULTS.md``).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from ..kernels.smic import directed_kernel_entries
from ..solvers.component_eigen import component_krylov_schur
from ..solvers.eigen import ConvergenceError, basis_size, block_size, krylov_schur

__all__ = [
    "NORMALIZATIONS",
    "assign",
    "ROUNDOFF",
    "check_prior",
    "kernel_matrix",
    "orient",
    "align",
    "eigen_block_size",
    "operator_eigenvectors",
    "top_eigenvectors",
    "component_eigenvectors",
]

#: accepted values of ``kernel_normalization``
NORMALIZATIONS = ("none", "symmetric")
#: eigenvector entries below this fraction of the vector's largest entry are zeroed
ROUNDOFF = 1e-10
#: problems up to this size use a dense symmetric eigensolver (exact, fast)
DENSE_MAX = 1500
#: eigenvalues closer than this (relative to the largest magnitude) form one (nearly) repeated eigenspace
ALIGN_GAP = 1e-6


def kernel_matrix(d2: np.ndarray, idx: np.ndarray, t: int, *, normalization: str = "none"
                 ) -> tuple[Any, np.ndarray, np.ndarray]:
    """Sparse kernel (7) from the kNN lists.

    Parameters
    ----------
    d2, idx : ndarray, shape (n, T) with T >= t
        Squared distances and indices of every sample's nearest *other*
        samples, sorted by distance (:data:`infoclust_dask.kernels.knn.KNN`).
    t : int
        Kernel parameter: neighbourhood size and the rank of the neighbour
        whose distance is the local scale ``sigma_i``.
    normalization : {"none", "symmetric"}
        ``"symmetric"`` returns ``D^-1/2 K D^-1/2``.

    Returns
    -------
    K : scipy.sparse.csr_matrix, shape (n, n)
        Symmetric, ``K_ii = 1`` before normalization.
    sigma : ndarray, shape (n,)
        Local scales ``sigma_i = ||x_i - x_i^(t)||``.
    degree : ndarray, shape (n,)
        Row sums of the un-normalized ``K`` (>= 1).
    """
    d2 = np.asarray(d2, dtype=np.float64)
    idx = np.asarray(idx)
    n = d2.shape[0]
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"normalization must be one of {NORMALIZATIONS}; got {normalization!r}.")
    if not 1 <= t <= d2.shape[1]:
        raise ValueError(f"t={t} needs at least t neighbours per sample; the lists have {d2.shape[1]}.")
    sigma = np.sqrt(d2[:, t - 1])
    rows, cols, vals = directed_kernel_entries(d2, idx, start=0, t=t, sigma=sigma)
    A = sp.csr_matrix((vals, (rows, cols)), shape=(n, n))
    K = A.maximum(A.T).tolil()
    K.setdiag(1.0)
    K = K.tocsr()
    K.eliminate_zeros()
    degree = np.asarray(K.sum(axis=1)).ravel()
    if normalization == "symmetric":
        # 1/sqrt(d_i d_j) as one product, so K stays exactly symmetric
        row = np.repeat(np.arange(n), np.diff(K.indptr))
        K.data = K.data / np.sqrt(degree[row] * degree[K.indices])
    return K, sigma, degree


def top_eigenvectors(K: Any, c: int, *, tol: float = 1e-12, random_state: int | None = 0, components: Any = None,
                     norm: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """The ``c`` largest (algebraic) eigenvalues of symmetric ``K`` and their
    unit eigenvectors, eigenvalues in decreasing order.

    Dense ``eigh`` up to :data:`DENSE_MAX` samples; above, a kernel whose
    graph (``components``) has more than ``c + 2`` components by
    :func:`component_eigenvectors` (each component of the kernel on its
    own); else :func:`operator_eigenvectors` on products with the assembled
    sparse ``K`` (the same solver as the kernel kept on the workers, so both
    paths return the same eigenpairs; ``components`` and ``norm`` as there).
    """
    n = K.shape[0]
    if not 1 <= c <= n:
        raise ValueError(f"Cannot take {c} eigenvectors of a {n} x {n} kernel.")
    if n <= DENSE_MAX or c + 2 * eigen_block_size(n, c) + 3 > n:
        # all eigenvalues (LAPACK syevd): the subset driver (syevr) can return
        # fewer than asked when the top eigenvalue is highly degenerate (many
        # disconnected components at t = 1)
        from threadpoolctl import threadpool_limits

        with threadpool_limits(1 if n <= 500 else None, user_api="blas"):
            w, V = scipy.linalg.eigh(K.toarray() if sp.issparse(K) else K, driver="evd")
        w, V = w[n - c:], V[:, n - c:]
        order = np.argsort(-w, kind="stable")
        return w[order], V[:, order]
    comp = None if components is None else np.asarray(components)
    if comp is not None and comp.size and int(comp.max()) + 1 > c + BLOCK_MARGIN:
        # the kernel's own components: finer than the neighbour graph's where duplicate rows (sigma = 0) have
        # zero entries to their other neighbours (Letter, t = 2..4: the graph's giant component holds groups
        # of duplicates detached in the kernel, whose equal spectra would send it to the block method)
        return component_eigenvectors(K, c, None, tol=tol, random_state=random_state)
    return operator_eigenvectors(lambda X: K @ X, n, c, tol=tol, random_state=random_state, components=components,
                                 norm=norm)


#: :func:`component_eigenvectors` solves a component of at most this many rows by dense ``eigh``, a larger one
#: by Krylov-Schur: O(s^3) against a few products (60 components of 600-900 rows: 0.68 s, against 2.27 s with
#: 1500 here and 6.84 s for the block method on the whole kernel; Letter: the same times with either bound)
COMPONENT_DENSE_MAX = 256
#: entries of the dense blocks that one batched ``eigh`` of equal-sized components holds
COMPONENT_BATCH_ENTRIES = 1 << 23


def component_eigenvectors(K: Any, c: int, components: Any = None, *, tol: float = 1e-12,
                           random_state: int | None = 0, dense_max: int | None = None
                           ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`top_eigenvectors` of a symmetric ``K`` with no entry between
    the groups of rows labelled by ``components`` (default: the connected
    components of ``K``'s nonzero pattern, by scipy's ``connected_components``;
    block diagonal up to a permutation), from the top eigenpairs of each
    block: its spectrum is the union of the blocks' spectra, and each
    block's eigenvectors, zero elsewhere, are eigenvectors of ``K``.

    A block of at most ``dense_max`` rows (:data:`COMPONENT_DENSE_MAX`, 256) is
    solved by LAPACK ``eigh``, blocks of equal size in one batched call;
    a larger one by :func:`operator_eigenvectors` on its own products
    (connected: the single-vector method, the block method if its
    eigenvalues show a repeated group). Blocks are taken largest bound
    first, and a block whose bound on its eigenvalues (its largest row sum
    of ``|K|``, Gershgorin) is below the ``c``-th eigenvalue found so far
    is skipped: none of its eigenvalues can be among the top ``c``.

    Why: the Krylov space of the whole kernel holds one vector of each
    eigenspace, and identical small components (duplicate rows of real data,
    e.g. Letter) give exactly repeated eigenvalues, so the whole kernel
    needs the block method with ``c + 2`` vectors per product - 1.6-3.9 s
    a candidate ``t`` on Letter's 20 000 rows against 0.2-0.4 s this way
    (``docs/BENCHMARKS.md``). Ties are ordered by the component's first
    row, then by the component's own order; a repeated eigenvalue cut by
    the ``c``-th place keeps whole components' vectors (any orthonormal
    basis of the top-``c`` space is a solution of (8))."""
    K = sp.csr_matrix(K)
    n = K.shape[0]
    if components is None:
        from scipy.sparse.csgraph import connected_components

        components = connected_components(K, directed=False)[1]
    comp = np.asarray(components, dtype=np.int64)
    if comp.shape != (n,):
        raise ValueError(f"components has shape {comp.shape}; the kernel has {n} rows.")
    dense_max = COMPONENT_DENSE_MAX if dense_max is None else int(dense_max)
    n_comp = int(comp.max()) + 1 if n else 0
    sizes = np.bincount(comp, minlength=n_comp)
    order = np.argsort(comp, kind="stable")  # rows component by component, each in increasing order
    start = np.concatenate([[0], np.cumsum(sizes)])
    bound = np.zeros(n_comp)
    np.maximum.at(bound, comp, np.asarray(abs(K).sum(axis=1)).ravel())
    found: list = []  # (eigenvalues (k,), component, rows (s,), vectors (s, k))

    def threshold() -> float:
        if sum(len(f[0]) for f in found) < c:
            return -np.inf
        return float(np.sort(np.concatenate([f[0] for f in found]))[-c])

    def operator_block(q: int) -> None:
        rows = order[start[q]:start[q + 1]]
        Kq = K[rows][:, rows]
        k = min(c, rows.size)
        if k + 2 * eigen_block_size(rows.size, k) + 3 > rows.size:
            w, U = scipy.linalg.eigh(Kq.toarray(), driver="evd")
            lam, V = w[::-1][:k], U[:, ::-1][:, :k]
        else:
            lam, V = operator_eigenvectors(lambda X: Kq @ X, rows.size, k, tol=tol, random_state=random_state)
        found.append((lam, q, rows, V))

    def dense_blocks(qs: np.ndarray, s: int) -> None:
        m = qs.size
        rows = order[start[qs][:, None] + np.arange(s)[None, :]].ravel()  # (m * s,), component by component
        local = np.empty(n, dtype=np.int64)
        local[rows] = np.tile(np.arange(s), m)
        sub = K[rows]
        r = np.repeat(np.arange(m * s), np.diff(sub.indptr))
        B = np.zeros((m, s, s))
        B[r // s, r % s, local[sub.indices]] = sub.data
        w, U = np.linalg.eigh(B)
        k = min(c, s)
        for i, q in enumerate(qs):
            # copies: views would keep the batch's s x s vectors of every block alive until the end
            found.append((w[i, ::-1][:k].copy(), int(q), rows[i * s:(i + 1) * s], U[i, :, ::-1][:, :k].copy()))

    by_bound = np.argsort(-bound, kind="stable")
    for q in by_bound[sizes[by_bound] > dense_max]:
        if bound[q] >= threshold():
            operator_block(int(q))
    small = by_bound[sizes[by_bound] <= dense_max]
    while small.size:  # the next batch: the components of the size of the best bound left
        theta = threshold()
        small = small[bound[small] >= theta]
        if not small.size:
            break
        s = int(sizes[small[0]])
        same = small[sizes[small] == s][: max(1, COMPONENT_BATCH_ENTRIES // (s * s))]
        dense_blocks(same, s)
        small = small[~np.isin(small, same)]
    lam = np.concatenate([f[0] for f in found])
    first = np.concatenate([np.full(len(f[0]), f[2][0]) for f in found])  # rows ascend within a component
    rank = np.concatenate([np.arange(len(f[0])) for f in found])
    owner = np.concatenate([np.full(len(f[0]), i) for i, f in enumerate(found)])
    top = np.lexsort((rank, first, -lam))[:c]
    V = np.zeros((n, c))
    for j, e in enumerate(top):
        f = found[owner[e]]
        V[f[2], j] = f[3][:, rank[e]]
    return lam[top], V


#: bytes of the Krylov basis and product blocks that :func:`operator_eigenvectors` aims to stay within
OPERATOR_BYTES = 3 * 2**29
#: block size of the eigensolver beyond ``c``: eigenvalues repeated up to ``c + 2`` times are found whole
BLOCK_MARGIN = 2
#: the block method's tolerance when :func:`operator_eigenvectors` chooses it (``block_size="auto"``) whatever
#: ``tol``: its vectors mix the graph's components at about the tolerance, and a vector's entries in components it
#: does not cover must stay below :data:`ROUNDOFF` (at 1e-8, 170 of 760 rows of eight blobs in three clusters changed
#: cluster); the per-component runs' vectors are zero outside their component by construction
BLOCK_TOL = 1e-12


def eigen_block_size(n: int, c: int) -> int:
    """Vectors per product of :func:`operator_eigenvectors`:
    :func:`infoclust_dask.solvers.eigen.block_size` with margin
    :data:`BLOCK_MARGIN` within :data:`OPERATOR_BYTES` (``c + 2``; at
    ``n = 1e7``, ``c = 10``: 2)."""
    return block_size(n, c, OPERATOR_BYTES, BLOCK_MARGIN)


def operator_eigenvectors(matvec: Callable[[np.ndarray], np.ndarray], n: int, c: int, *, tol: float = 1e-12,
                          random_state: int | None = 0, m: int | None = None, block_size: int | str = "auto",
                          components: Any = None, norm: float = 1.0, callback: Callable[[], Any] | None = None,
                          report: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`top_eigenvectors` of a symmetric ``n x n`` matrix known only
    through products ``matvec(X) -> K X`` of ``(n, b)`` blocks (e.g. a
    map-reduce pass over kernel row blocks kept on the workers), by the
    (block) Krylov-Schur method of :func:`infoclust_dask.solvers.eigen.krylov_schur`
    with ARPACK's tolerance rule (``tol``; the block method when chosen by
    ``block_size="auto"`` at most :data:`BLOCK_TOL`); the first start column is
    ``top_eigenvectors``' seeded vector.

    A single-vector Krylov space holds ONE vector of each eigenspace, so an
    eigenvalue repeated ``r`` times is found once. ``block_size``:

    - an int: the block method with that block size (``b >= r`` finds a
      multiplicity ``r`` whole; :func:`eigen_block_size` is ``c + 2``);
    - ``"auto"`` (default): where the kernel's graph has between 2 and
      ``c + 2`` connected components (``components``: their labels), ``K``
      is block diagonal, often with (nearly) equal spectra on different
      components (exact copies; every component of a normalized kernel).
      Then one Krylov-Schur run per component, all driven by the same
      single-vector products
      (:func:`infoclust_dask.solvers.component_eigen.component_krylov_schur`:
      a product of a vector made of every component's own Lanczos vector
      is every component's product): ties between components need no
      breaking and each component converges at the rate of its own gap
      (10 separated blobs, 2e5 rows: 35 products, where the single-vector
      method on ``K`` shifted by ``1e-8 ||K||`` per component, this
      solver's rule before, took 111; the block method if it does not
      converge). With more components (many small ones, e.g.
      ``t = 1``), the block method with ``c + 2``. On a connected graph (or
      without ``components``) the single-vector method runs on ``K``, and
      if its eigenvalues show a (nearly) repeated group
      (:func:`eigen_groups`) the block method with ``c + 2`` solves again.

    Why not the block method always: on a connected kernel it needs fewer
    products but of ``c + 2`` vectors each, several times the work of the
    single-vector method (each product a pass over the kernel on the
    workers, each vector a projection against the basis on the driver;
    measured in ``docs/BENCHMARKS.md``, "Eigensolver: block or single
    vector"). ``report`` (a dict) receives ``"products"``,
    ``"block_size"`` and ``"per_component"``. ``norm`` (a bound of
    ``||K||``) is not used by this rule; it is kept for callers.

    This process holds ``m + b`` basis vectors (``m`` from
    :func:`infoclust_dask.solvers.eigen.basis_size`, within :data:`OPERATOR_BYTES`,
    1.5 GiB, together with a product's input and output) and forms the
    ``n x c`` eigenvectors while freeing the basis: ``O(n (m + b))``
    numbers, never the matrix. ``callback()`` runs after every product
    (progress)."""
    b = eigen_block_size(n, c) if block_size == "auto" else int(block_size)
    if not 1 <= c or c + 2 * b + 3 > n:
        raise ValueError(f"Cannot take {c} eigenvectors of a {n} x {n} kernel through products of {b} vectors "
                         f"(needs c + 2b + 3 <= n).")
    v0 = np.random.default_rng(random_state).uniform(0.5, 1.5, size=n)
    report = {} if report is None else report
    report.update(products=0, block_size=1 if block_size == "auto" else b, per_component=False)

    def counted(X):
        report["products"] += 1
        if callback is not None:
            callback()
        return matvec(X)

    def solve(bs, op, tol=tol):
        budget = max(OPERATOR_BYTES - 2 * bs * 8 * n, 0)
        return krylov_schur(op if bs > 1 else (lambda v: op(v[:, None])[:, 0]), n, c, v0=v0, tol=tol,
                            m=m or basis_size(n, c, budget, block_size=bs), block_size=bs,
                            random_state=random_state)

    if block_size != "auto":
        return solve(b, counted)
    comp = None if components is None else np.asarray(components)
    n_comp = int(comp.max()) + 1 if comp is not None and comp.size else 1
    if n_comp > c + BLOCK_MARGIN:
        # many components (small ones: their equal spectra are exact ties, which a block takes whole, while
        # shifts eps q would turn them into a crowd of near ties that converge slowly)
        report["block_size"] = b
        return solve(b, counted, min(tol, BLOCK_TOL))
    if n_comp > 1 and comp is not None:
        report["per_component"] = True
        budget = max(OPERATOR_BYTES - 6 * 8 * n, 0)  # the basis, and a product's input and output (copies)
        try:
            lam, V = component_krylov_schur(lambda v: counted(v[:, None])[:, 0], comp, c, v0=v0, tol=tol,
                                            m=m or basis_size(n, c, budget), random_state=random_state)
            # nearly equal eigenvalues inside one component: one Krylov space per component is no better
            # at them than one for a connected graph, so the block method solves again (as there)
            if not any(len(set(comp[np.argmax(np.abs(V[:, g]), axis=0)].tolist())) < len(g)
                       for g in eigen_groups(lam)):
                return lam, V
            del V
        except ConvergenceError:
            pass
        report.update(per_component=False, block_size=b)
        return solve(b, counted, min(tol, BLOCK_TOL))
    lam, V = solve(1, counted)
    if any(len(g) > 1 for g in eigen_groups(lam)):
        del V
        report["block_size"] = b
        lam, V = solve(b, counted, min(tol, BLOCK_TOL))
    return lam, V


def orient(V: np.ndarray, *, roundoff: float = ROUNDOFF, copy: bool = True, return_signs: bool = False) -> Any:
    """The sign rule of §2.3 after zeroing round-off entries (module notes).
    Column by column (``copy=False``: in place), so an ``n x c`` matrix
    needs no ``n x c`` temporaries.

    Every write goes through a binary operation on the column view
    (``col *= -1``), never a unary ufunc with ``out=`` the same strided
    view: numpy's SIMD loop for ``np.negative(col, out=col)`` on a float64
    column of a C-ordered array with 8 columns (float32: 4) writes wrong
    values on AVX-512 machines (numpy 2.2-2.4; the eigenvectors of the
    operator path are C-ordered, so SMIC with ``n_clusters=8`` mislabelled
    most rows above 200 000 rows). ``return_signs=True`` also returns the
    ``+-1`` applied to each column."""
    V = np.array(V, dtype=np.float64, copy=True) if copy else np.asarray(V, dtype=np.float64)
    signs = np.ones(V.shape[1])
    for y in range(V.shape[1]):
        col = V[:, y]
        col[np.abs(col) < roundoff * np.abs(col).max()] = 0.0
        if col.sum() < 0:
            col *= -1.0
            signs[y] = -1.0
    return (V, signs) if return_signs else V


def eigen_groups(lam: Any, *, rel_gap: float = ALIGN_GAP) -> list[list[int]]:
    """Runs of consecutive eigenvalues (decreasing order) whose gaps are at
    most ``rel_gap * max |lambda|``: the (nearly) repeated eigenspaces, in
    which an eigensolver may return any orthonormal basis. Returns lists of
    column indices (singletons included)."""
    lam = np.asarray(lam, dtype=np.float64)
    scale = max(float(np.abs(lam).max()), np.finfo(np.float64).tiny) if lam.size else 1.0
    groups = [[0]] if lam.size else []
    for y in range(1, lam.size):
        if lam[y - 1] - lam[y] <= rel_gap * scale:
            groups[-1].append(y)
        else:
            groups.append([y])
    return groups


def _pivot_rows(V, cols, rows=1 << 16):
    """The ``r = len(cols)`` rows of ``V[:, cols]`` chosen by QR with column
    pivoting of its transpose (the largest remaining norm after projecting
    out the rows already chosen; ties: the first), streamed over row blocks
    (``O(n)`` extra memory). The choice depends only on the rows' geometry in
    ``R^r``, so a rotation ``V[:, cols] Q`` chooses the same rows."""
    n, r = V.shape[0], len(cols)
    res = np.empty(n)
    for a in range(0, n, rows):
        blk = V[a:a + rows, cols]
        res[a:a + rows] = np.einsum("ij,ij->i", blk, blk)
    Q = np.zeros((r, 0))
    piv = []
    for _ in range(r):
        i = int(np.argmax(res))
        v = np.asarray(V[i, cols], dtype=np.float64)
        v = v - Q @ (Q.T @ v)
        v = v - Q @ (Q.T @ v)
        q = v / np.linalg.norm(v)
        Q = np.column_stack([Q, q])
        for a in range(0, n, rows):
            res[a:a + rows] -= (V[a:a + rows, cols] @ q) ** 2
        piv.append(i)
        res[piv] = -np.inf
    return piv


def align(V: np.ndarray, lam: np.ndarray, *, rel_gap: float = ALIGN_GAP, copy: bool = True, rows: int = 1 << 16
         ) -> tuple[np.ndarray, np.ndarray]:
    """Make the eigenvector basis of every (nearly) repeated eigenspace
    (:func:`eigen_groups`) independent of the solver: inside each group of
    ``r >= 2`` columns, the rotation of scikit-learn's ``cluster_qr``
    (Damle, Minden & Ying, 2019): the ``r`` rows picked by pivoted QR
    (:func:`_pivot_rows`), ``M = V[piv, group]``, and the orthogonal polar
    factor ``R = U W^T`` of ``M^T = U S W^T``, applied as ``V[:, group] R``.
    For any rotation ``Q`` of the group, ``V Q`` gives the same pivots and
    ``(V Q)(Q^T U W^T) = V U W^T``: the same aligned vectors, column by
    column, in pivot order. Columns of simple eigenvalues are untouched, so
    where the eigenvectors are determined the paper's rule sees them as they
    are. Returns ``(aligned V, R)`` with ``R`` the ``c x c`` block-diagonal
    rotation (``V_aligned = V R``)."""
    V = np.array(V, dtype=np.float64, copy=True) if copy else np.asarray(V, dtype=np.float64)
    c = V.shape[1]
    R = np.eye(c)
    for cols in eigen_groups(lam, rel_gap=rel_gap):
        if len(cols) < 2:
            continue
        piv = _pivot_rows(V, cols, rows)
        U, _, Wt = np.linalg.svd(V[np.ix_(piv, cols)].T)
        Rg = U @ Wt
        for a in range(0, V.shape[0], rows):
            V[a:a + rows, cols] = V[a:a + rows, cols] @ Rg
        R[np.ix_(cols, cols)] = Rg
    return V, R


def check_prior(prior: Any, c: int) -> np.ndarray:
    """``prior`` (None = uniform (4)) as a positive vector summing to 1, sorted
    ascending as §2.3 assumes (``pi_1 <= ... <= pi_c``, cluster ``y`` pairs
    with the ``y``-th largest eigenvalue)."""
    if prior is None:
        return np.full(c, 1.0 / c)
    p = np.asarray(prior, dtype=np.float64)
    if p.shape != (c,) or not np.all(np.isfinite(p)) or np.any(p <= 0):
        raise ValueError(
            f"class_prior must be {c} positive numbers (one per cluster); got {prior!r}."
        )
    if abs(p.sum() - 1.0) > 1e-6:  # a prior that does not sum to 1 is a mistake, not a prior to rescale silently
        raise ValueError(f"class_prior must sum to 1; got {prior!r} (sum {p.sum():.6g}). Pass prior / sum(prior) "
                         "if those are relative sizes.")
    return np.sort(p / p.sum())


def assign(Vt: np.ndarray, prior: np.ndarray, *, rows: int = 1 << 16) -> np.ndarray:
    """The in-sample clusters of §2.3: per row the argmax over y of
    ``pi_y [max(0, phi~_y)]_i / (max(0, phi~_y)^T 1)`` (the clipped,
    normalized class-posterior estimates up to a common factor per row),
    computed ``rows`` rows at a time (no ``n x c`` temporary)."""
    scale = prior / np.array([np.maximum(Vt[:, y], 0.0).sum() for y in range(Vt.shape[1])])
    out = np.empty(Vt.shape[0], dtype=np.int64)
    for a in range(0, Vt.shape[0], rows):
        out[a:a + rows] = np.argmax(np.maximum(Vt[a:a + rows], 0.0) * scale[None, :], axis=1)
    return out
