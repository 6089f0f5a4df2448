"""SMI-based clustering (SMIC): the driver-side mathematics.

Sugiyama, Yamada, Kimura & Hachiya, *On Information-Maximization Clustering:
Tuning Parameter Selection and Analytic Solution* (2011, ICML), §2.3.

- :func:`kernel_matrix`: the sparse local-scaling kernel (7) from the ``t``
  nearest neighbours of every sample (found block against block by
  :data:`infoclust_dask.kernels.knn.KNN`), optionally normalized.
- :func:`top_eigenvectors`: the ``c`` principal eigenvectors of the kernel,
  which maximize the SMI approximation (8) under orthonormality.
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

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from scipy.sparse.linalg import eigsh

from ..eigen import basis_size, krylov_schur
from ..kernels.smic import directed_kernel_entries

__all__ = [
    "NORMALIZATIONS",
    "assign",
    "ROUNDOFF",
    "check_prior",
    "kernel_matrix",
    "orient",
    "operator_eigenvectors",
    "top_eigenvectors",
]

#: accepted values of ``kernel_normalization``
NORMALIZATIONS = ("none", "symmetric")
#: eigenvector entries below this fraction of the vector's largest entry are zeroed
ROUNDOFF = 1e-10
#: problems up to this size use a dense symmetric eigensolver (exact, fast)
DENSE_MAX = 1500


def kernel_matrix(d2, idx, t, *, normalization="none"):
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


def top_eigenvectors(K, c, *, tol=1e-12, random_state=0):
    """The ``c`` largest (algebraic) eigenvalues of symmetric ``K`` and their
    unit eigenvectors, eigenvalues in decreasing order.

    Dense ``eigh`` up to :data:`DENSE_MAX` samples, else ARPACK's ``eigsh``
    (``which="LA"``) with a tight tolerance (gaps between the ``c``-th and
    ``(c+1)``-th eigenvalue can be 1e-4) and a reproducible start vector.
    """
    n = K.shape[0]
    if not 1 <= c <= n:
        raise ValueError(f"Cannot take {c} eigenvectors of a {n} x {n} kernel.")
    if n <= DENSE_MAX or c >= n - 1:
        # all eigenvalues (LAPACK syevd): the subset driver (syevr) can return
        # fewer than asked when the top eigenvalue is highly degenerate (many
        # disconnected components at t = 1)
        from threadpoolctl import threadpool_limits

        with threadpool_limits(1 if n <= 500 else None, user_api="blas"):
            w, V = scipy.linalg.eigh(K.toarray() if sp.issparse(K) else K, driver="evd")
        w, V = w[n - c:], V[:, n - c:]
    else:
        v0 = np.random.default_rng(random_state).uniform(0.5, 1.5, size=n)
        w, V = eigsh(K, k=c, which="LA", tol=tol, v0=v0, ncv=eigsh_ncv(n, c), maxiter=100 * n)
    order = np.argsort(-w, kind="stable")
    return w[order], V[:, order]


#: bytes of the Krylov basis that :func:`operator_eigenvectors` aims to stay within
OPERATOR_BYTES = 3 * 2**29


def eigsh_ncv(n, c):
    """ARPACK's number of Lanczos vectors for :func:`top_eigenvectors`:
    ``max(2c + 1, 32)``, at most ``n - 1``."""
    return min(n - 1, max(2 * c + 1, 32))


def operator_eigenvectors(matvec, n, c, *, tol=1e-12, random_state=0, m=None, callback=None):
    """:func:`top_eigenvectors` of a symmetric ``n x n`` matrix known only
    through ``matvec(v) -> K v`` (e.g. a map-reduce pass over kernel row
    blocks kept on the workers): the Krylov-Schur method of
    :func:`infoclust_dask.eigen.krylov_schur` with ARPACK's tolerance rule
    and the same start vector as :func:`top_eigenvectors`, so both give the
    same eigenpairs. This process holds the ``m + 1`` basis vectors (``m``
    chosen so that they take at most :data:`OPERATOR_BYTES`, 1.5 GiB, when
    ``c + 3`` vectors allow it) and forms the ``n x c`` eigenvectors while
    freeing the basis: ``O(n m)`` numbers, never the matrix and never
    ARPACK's extra ``n x ncv`` extraction arrays. ``callback()`` runs after
    every product (progress)."""
    if not 1 <= c < n - 1:
        raise ValueError(f"Cannot take {c} eigenvectors of a {n} x {n} kernel through products "
                         "(needs c < n - 1).")
    v0 = np.random.default_rng(random_state).uniform(0.5, 1.5, size=n)
    return krylov_schur(matvec, n, c, v0=v0, tol=tol, m=m or basis_size(n, c, OPERATOR_BYTES),
                        random_state=random_state, callback=callback)


def orient(V, *, roundoff=ROUNDOFF, copy=True):
    """The sign rule of §2.3 after zeroing round-off entries (module notes).
    Column by column (``copy=False``: in place), so an ``n x c`` matrix
    needs no ``n x c`` temporaries.

    Every write goes through a binary operation on the column view
    (``col *= -1``), never a unary ufunc with ``out=`` the same strided
    view: numpy's SIMD loop for ``np.negative(col, out=col)`` on a float64
    column of a C-ordered array with 8 columns (float32: 4) writes wrong
    values on AVX-512 machines (numpy 2.2-2.4; the eigenvectors of the
    operator path are C-ordered, so SMIC with ``n_clusters=8`` mislabelled
    most rows above 200 000 rows)."""
    V = np.array(V, dtype=np.float64, copy=True) if copy else np.asarray(V, dtype=np.float64)
    for y in range(V.shape[1]):
        col = V[:, y]
        col[np.abs(col) < roundoff * np.abs(col).max()] = 0.0
        if col.sum() < 0:
            col *= -1.0
    return V


def check_prior(prior, c):
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
    return np.sort(p / p.sum())


def assign(Vt, prior, *, rows=1 << 16):
    """The in-sample clusters of §2.3: per row the argmax over y of
    ``pi_y [max(0, phi~_y)]_i / (max(0, phi~_y)^T 1)`` (the clipped,
    normalized class-posterior estimates up to a common factor per row),
    computed ``rows`` rows at a time (no ``n x c`` temporary)."""
    scale = prior / np.array([np.maximum(Vt[:, y], 0.0).sum() for y in range(Vt.shape[1])])
    out = np.empty(Vt.shape[0], dtype=np.int64)
    for a in range(0, Vt.shape[0], rows):
        out[a:a + rows] = np.argmax(np.maximum(Vt[a:a + rows], 0.0) * scale[None, :], axis=1)
    return out
