"""SMIC block kernels (Sugiyama, Niu, Yamada, Kimura & Hachiya 2014): the
local-scaling kernel values of (7), the out-of-sample sums of §2.3 and the
per-fold sums behind LSMI (14). Their temporaries are (rows x bases) or
(rows x training rows), so they work in sub-blocks of
:data:`~infoclust_dask.kernels._common.SUB_ROWS` rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._common import Pass, in_sub_blocks, sq_distances
from .stats import hashed_fold_ids

__all__ = ["local_scaling_values", "directed_kernel_entries", "kernel_transpose_pieces", "kernel_row_block",
           "RankedRows", "kernel_row_sums", "sparse_matmat", "smic_oos_stats", "SMIC_OOS", "gaussian_basis", "lsmi_stats", "LSMI",
           "LSMI_TINY"]


def local_scaling_values(d2: np.ndarray, sigma_a: np.ndarray, sigma_b: np.ndarray) -> np.ndarray:
    """``exp(-d2 / (2 sigma_a sigma_b))`` of kernel (7), elementwise.

    Zero scales (a point with ``t`` exact duplicates) follow the limit:
    the value is 1 for a zero distance and 0 for a positive one, never NaN.
    """
    d2 = np.asarray(d2, dtype=np.float64)
    denom = 2.0 * np.asarray(sigma_a) * np.asarray(sigma_b)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(d2 <= 0.0, 0.0, d2 / denom)
    return np.exp(-ratio)


def directed_kernel_entries(d2: np.ndarray, idx: np.ndarray, *, start: int, t: int, sigma: np.ndarray
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The directed entries of kernel (7) for the rows ``start ..`` of one
    block: row ``i`` links to its ``t`` nearest other rows ``idx[i, :t]``
    with value ``exp(-d2 / (2 sigma_i sigma_j))``. ``sigma`` holds the local
    scales of ALL rows (the columns are global). Returns ``(rows local to the
    block, global columns, values)``; padded entries (index ``-1``, found by
    an approximate search that returned fewer than ``t``) are dropped."""
    d2 = np.asarray(d2, dtype=np.float64)[:, :t]
    cols = np.asarray(idx)[:, :t].ravel()
    rows = np.repeat(np.arange(d2.shape[0], dtype=np.int64), t)
    ok = cols >= 0
    rows, cols, d2 = rows[ok], cols[ok].astype(np.int64, copy=False), d2.ravel()[ok]
    sigma = np.asarray(sigma, dtype=np.float64)
    return rows, cols, local_scaling_values(d2, sigma[start + rows], sigma[cols])


def _directed_values(d2, idx, *, start, t, sigma):
    """The directed entries of :func:`directed_kernel_entries` as two
    tables: ``idx[:, :t]`` (``-1`` padded) and each entry's value (0 where
    padded), made by a compiled loop and numpy's ``exp``: the same bits,
    without the coordinate arrays."""
    from ._kernel_loops import scaled_distances

    d2 = np.asarray(d2, dtype=np.float64)[:, :t]
    idx = np.asarray(idx)[:, :t]
    vals = scaled_distances(d2, idx, np.asarray(sigma, dtype=np.float64), int(start), int(t))
    np.negative(vals, out=vals)
    np.exp(vals, out=vals)
    return idx, vals


def kernel_transpose_pieces(d2: np.ndarray, idx: np.ndarray, *, start: int, t: int, sigma: np.ndarray,
                            bounds: np.ndarray, rank: np.ndarray | None = None) -> list[tuple]:
    """This block's directed entries (:func:`directed_kernel_entries`)
    transposed and split by the row block of their column: piece ``b`` holds
    ``(row local to block b, global column = this block's row, value)`` for
    the rows ``bounds[b] .. bounds[b + 1]``. Indices are int32 when they fit
    (the pieces travel between workers). ``rank`` is
    :func:`kernel_row_block`'s (not used here)."""
    from ._kernel_loops import split_by_block

    idx, vals = _directed_values(d2, idx, start=start, t=t, sigma=sigma)
    bounds = np.asarray(bounds, dtype=np.int64)
    itype = np.int32 if bounds[-1] < 2**31 else np.int64
    size = int(np.count_nonzero(idx >= 0))
    local, glob = np.empty(size, dtype=itype), np.empty(size, dtype=itype)
    out_vals = np.empty(size, dtype=np.float64)
    cuts = split_by_block(idx, vals, bounds, int(start), local, glob, out_vals)
    return [(local[a:b], glob[a:b], out_vals[a:b]) for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True)]


def kernel_row_block(d2: np.ndarray, idx: np.ndarray, incoming: list, *, start: int, t: int, sigma: np.ndarray, n: int,
                     rank: np.ndarray | None = None) -> Any:
    """Rows ``start .. start + len(d2)`` of the symmetric kernel (7): the
    elementwise maximum of the directed kernel and its transpose (the "or"
    rule), ``K_ii = 1``, exact zeros removed - the rows of what
    :func:`infoclust_dask.objectives.smic.kernel_matrix` assembles.
    ``incoming`` are the pieces (:func:`kernel_transpose_pieces`) every
    block sent to this one. Built row by row by a compiled loop
    (:func:`~infoclust_dask.kernels._kernel_loops.symmetric_rows`: the
    arrays scipy's ``csr_matrix``, ``maximum`` and ``eliminate_zeros`` made,
    bit for bit, in fewer passes over the entries). Returns a
    ``scipy.sparse.csr_matrix`` of shape ``(rows, n)``, or with ``rank``
    (the position of every row in a locality order) the same rows as
    :class:`RankedRows`."""
    import scipy.sparse as sp

    from ._kernel_loops import symmetric_rows

    m = np.asarray(d2).shape[0]
    idx, vals = _directed_values(d2, idx, start=start, t=t, sigma=sigma)
    if incoming:
        in_rows = np.concatenate([np.asarray(p[0]) for p in incoming])
        in_cols = np.concatenate([np.asarray(p[1]) for p in incoming])
        in_vals = np.concatenate([np.asarray(p[2], dtype=np.float64) for p in incoming])
    else:
        in_rows = in_cols = np.zeros(0, dtype=np.int64)
        in_vals = np.zeros(0)
    indptr, indices, data = symmetric_rows(idx, vals, in_rows, in_cols, in_vals, int(start))
    itype = np.int32 if max(int(n), int(indptr[-1])) < 2**31 else np.int64
    K = sp.csr_matrix((data, indices.astype(itype), indptr.astype(itype)), shape=(m, n))
    K.has_sorted_indices = True
    return K if rank is None else RankedRows(K, rank, start)


class RankedRows:
    """One row block of the kernel held for fast products: its rows in the
    order of their ``rank`` (a locality order of all rows: rows near each
    other in the data get near ranks, e.g. grouped by the cell of a coarse
    partition) and its columns renamed to the ranks of their rows, while
    each row keeps its entries in their stored order.

    A product then takes its input in rank order (``V[order]``,
    ``order = argsort(rank)``): consecutive rows read neighbouring entries of
    it, which stay in the core's cache - the rows of a kernel made from a
    store in its own order read all of it at random (2e6 rows, 4e7 entries,
    one thread, a 2-core AMD EPYC: 539.7 ms a product in store order
    against 203.5 ms in a locality order, ``benchmarks/smic_product_order.py``,
    docs/BENCHMARKS.md). Each row's sum runs over the same entries in
    the same order, so :func:`sparse_matmat` and :func:`kernel_row_sums`
    return the same bits as on the plain block, in the block's own row
    order. ``local``: the block's rows in rank order (positions within the
    block)."""

    __slots__ = ("csr", "local")

    def __init__(self, K: Any, rank: np.ndarray, start: int) -> None:
        import scipy.sparse as sp

        from ._kernel_loops import rows_renamed

        rank = np.asarray(rank)
        K = sp.csr_matrix(K)
        self.local = np.argsort(rank[start:start + K.shape[0]], kind="stable")
        indptr, indices, data = rows_renamed(K.indptr, K.indices, K.data, self.local, rank)
        csr = sp.csr_matrix((data, indices.astype(K.indices.dtype, copy=False), indptr), shape=K.shape)
        csr.has_sorted_indices = False  # renamed: the stored order is kept, no longer sorted
        self.csr = csr

    def __sizeof__(self) -> int:
        """Bytes held (what dask's ``sizeof`` reports to a worker's memory
        accounting, as it does for the plain block)."""
        csr = self.csr
        return int(csr.data.nbytes + csr.indices.nbytes + csr.indptr.nbytes + self.local.nbytes) + 64

    def unranked(self, rows_in_rank_order: np.ndarray) -> np.ndarray:
        """Per-row results in rank order, back in the block's row order."""
        out = np.empty_like(rows_in_rank_order)
        out[self.local] = rows_in_rank_order
        return out


def kernel_row_sums(K: Any, _: Any = None) -> np.ndarray:
    """Row sums of one row block of the kernel (the degrees ``D``), in the
    block's row order (also of a :class:`RankedRows` block)."""
    if isinstance(K, RankedRows):
        return K.unranked(kernel_row_sums(K.csr))
    return np.asarray(K.sum(axis=1), dtype=np.float64).ravel()


def sparse_matmat(K: Any, V: np.ndarray) -> np.ndarray:
    """``K @ V`` of one row block (dense float64 result); a
    :class:`RankedRows` block takes ``V`` in rank order and returns its rows
    in the block's order."""
    if isinstance(K, RankedRows):
        return K.unranked(sparse_matmat(K.csr, V))
    return np.asarray(K @ np.asarray(V, dtype=np.float64))


def smic_oos_stats(xd: np.ndarray, phi: np.ndarray, sigma: np.ndarray, *, start: int = 0, xq: np.ndarray,
                   sigma_q: np.ndarray, nbr: np.ndarray) -> dict[str, np.ndarray]:
    """:func:`_smic_oos_rows` over sub-blocks of at most :data:`SUB_ROWS`
    training rows (the distance table is new rows x training rows)."""
    return in_sub_blocks(_smic_oos_rows, (xd, phi, sigma), start, xq=xq, sigma_q=sigma_q, nbr=nbr)


def _smic_oos_rows(xd, phi, sigma, *, start=0, xq, sigma_q, nbr):
    """One training block's share of the out-of-sample sums of SMIC, §2.3.

    For new rows ``xq`` with local scales ``sigma_q`` and their ``t``
    nearest training rows ``nbr`` (global indices), kernel (7) links a new
    row and a training row ``i`` when ``i`` is among the new row's
    neighbours or the new row is closer to ``i`` than ``i``'s own ``t``-th
    neighbour (``sigma[i]``). Returns ``kphi = K(xq, xd) @ phi`` and the row
    sums ``ksum`` of ``K(xq, xd)``.
    """
    xd = np.asarray(xd, dtype=np.float64)
    xq = np.asarray(xq, dtype=np.float64)
    sigma = np.asarray(sigma, dtype=np.float64)
    nq, nd = xq.shape[0], xd.shape[0]
    local = np.asarray(nbr, dtype=np.int64) - start
    r, c = np.nonzero((local >= 0) & (local < nd))
    is_nbr = np.zeros((nq, nd), dtype=bool)
    is_nbr[r, local[r, c]] = True
    # candidates: the new rows' neighbours, and the training rows whose scale
    # the expanded distance (with a little slack) reaches - decided on exact
    # differences below
    rows, cols = np.nonzero(is_nbr | (sq_distances(xq, xd) <= sigma[None, :] ** 2 * (1.0 + 1e-9) + 1e-300))
    diff = xq[rows] - xd[cols]
    d2e = np.einsum("ij,ij->i", diff, diff)
    keep = is_nbr[rows, cols] | (d2e <= sigma[cols] ** 2)
    rows, cols, d2e = rows[keep], cols[keep], d2e[keep]
    vals = local_scaling_values(d2e, np.asarray(sigma_q, dtype=np.float64)[rows], sigma[cols])
    phi = np.asarray(phi, dtype=np.float64)
    kphi = np.zeros((nq, phi.shape[1]))
    np.add.at(kphi, rows, vals[:, None] * phi[cols])
    return {"kphi": kphi, "ksum": np.bincount(rows, weights=vals, minlength=nq).astype(np.float64)}


#: Gaussian basis values below this are set to 0 (their products would be
#: denormal numbers, which make BLAS and LAPACK 10-100x slower)
LSMI_TINY = 1e-100


#: a width whose live rows have at most this share of nonzero basis values takes LSMI's sparse sums
#: (:func:`~infoclust_dask.kernels._exp._gaussian_sparse_sums`) instead of the dense product. 262 144 rows, 200
#: bases, one thread, Zen 4 EPYC (AVX-512, dgemm 104 Gflop/s), dense / sparse s: share 0.065 0.76 / 0.31, 0.118
#: 0.59 / 0.38, 0.184 0.60 / 0.51, 0.258 0.60 / 0.71, 0.380 0.62 / 1.11 (uniform rows, d = 2); 10 blobs, d = 16,
#: widths 0.1 (share 0.100) 0.62 / 0.31, 0.316 (0.89) 0.59 / 3.92; all 9 widths on 524 288 such rows: 8.26-8.62 s
#: dense, 7.74-8.00 s with this rule (the 5 widths >= 1 are dense in any case). A constant, not measured where the fit runs:
#: the two paths differ in the order of their sums (~1e-16), so the choice must be the same on every runner
LSMI_SPARSE_MAX = 0.15


def gaussian_basis(x: np.ndarray, centers: np.ndarray, width: float | np.ndarray, *, x_sq: np.ndarray | None = None,
                   d2: np.ndarray | None = None) -> np.ndarray:
    """Gaussian kernel (11) of SMIC's LSMI, ``exp(-||x - c||^2 / (2 width^2))``,
    with values below :data:`LSMI_TINY` floored to 0 (``d2``: the squared
    distances, if already computed)."""
    if d2 is None:
        d2 = sq_distances(x, centers, x_sq)
    phi = np.exp(d2 * (-0.5 / (width * width)))
    phi[phi < LSMI_TINY] = 0.0
    return phi


def lsmi_stats(x: np.ndarray, labels: np.ndarray, *, start: int = 0, centers: np.ndarray, widths: np.ndarray,
               n_classes: int, n_folds: int, seed: int, shift: np.ndarray, scale: np.ndarray) -> dict[str, np.ndarray]:
    """:func:`_lsmi_stats_rows` over sub-blocks of at most :data:`SUB_ROWS` rows."""
    return in_sub_blocks(_lsmi_stats_rows, (x, labels), start, centers=centers, widths=widths,
                          n_classes=n_classes, n_folds=n_folds, seed=seed, shift=shift, scale=scale)


def _lsmi_stats_rows(x, labels, *, start=0, centers, widths, n_classes, n_folds, seed, shift, scale):
    """Per-fold sums behind LSMI (Sugiyama et al., §2.4) for every width.

    Rows are standardized with ``shift``/``scale``, assigned to one of
    ``n_folds`` hashed folds, and expanded in the Gaussian bases at
    ``centers`` (already standardized). For fold ``m`` and width ``w``:
    ``G[m, w] = Phi_m^T Phi_m`` (the sum over samples inside H-hat; it does
    not depend on the labels), ``S[m, w] = onehot(y_m)^T Phi_m`` (h-hat for
    every class) and ``count[m]`` the label counts. ``labels`` of shape
    ``(n, L)`` give ``L`` labelings at once (``S (L, M, W, c, b)``,
    ``count (L, M, c)``): SMIC scores all its candidate clusterings in one
    pass.
    """
    # numba loads with the first pass, not with the estimators (tests/test_startup.py)
    from ._exp import _gaussian_rows, _gaussian_sparse_sums

    z = (np.asarray(x, dtype=np.float64) - shift) / scale
    lab = np.asarray(labels).astype(np.intp)
    single = lab.ndim == 1
    lab = lab.reshape(lab.shape[0], -1)
    n_lab = lab.shape[1]
    folds = hashed_fold_ids(z, start=start, seed=seed, n_folds=n_folds)
    order = np.argsort(folds, kind="stable")  # each fold a contiguous run
    z, lab = z[order], lab[order]
    bounds = np.concatenate([[0], np.cumsum(np.bincount(folds, minlength=n_folds))])
    b = centers.shape[0]
    G = np.zeros((n_folds, len(widths), b, b))
    S = np.zeros((n_lab, n_folds, len(widths), n_classes, b))
    count = np.zeros((n_lab, n_folds, n_classes))
    d2 = sq_distances(z, centers)
    onehot = np.ascontiguousarray(np.eye(n_classes)[lab].transpose(1, 2, 0))  # (L, c, rows): BLAS-ready slices
    # a row whose nearest basis centre is farther than this (in units of
    # 2 width^2) has phi below LSMI_TINY everywhere, i.e. a zero row: small
    # widths touch only the rows near a centre, the others are skipped
    reach = -np.log(LSMI_TINY)
    nearest = d2.min(axis=1)
    buf = np.empty_like(d2)
    scratch = np.empty(max(16384, centers.shape[0]))  # tiles of rows whose values stay in cache
    lab_rows = cols = None  # the sparse sums' labels, rows contiguous, and scratch
    for w, width in enumerate(widths):
        a = 0.5 / (width * width)
        live = np.flatnonzero(nearest * a < reach)
        if live.size == 0:
            continue
        full = live.size == d2.shape[0]
        cuts = bounds if full else np.searchsorted(live, bounds)
        # the share of the live rows' values that are not floored to 0; few: sums of the nonzero values only
        share = np.count_nonzero((d2 if full else d2[live]) < (reach + 1.0) / a) / (live.size * b)
        if share <= LSMI_SPARSE_MAX:
            if lab_rows is None:
                lab_rows = np.ascontiguousarray(lab.T.astype(np.int64))
                cols = np.empty(b, dtype=np.int64)
            for m in range(n_folds):
                g, h = G[m, w], np.zeros(S.shape[:1] + S.shape[3:])  # (b, b) of G is contiguous, S's (L, c, b) not
                _gaussian_sparse_sums(d2, live[cuts[m]:cuts[m + 1]].astype(np.int64), a, -reach - 1.0, LSMI_TINY,
                                      lab_rows, g, h, buf[0], scratch, cols)
                G[m, w] = np.triu(g) + np.triu(g, 1).T
                S[:, m, w] = h
            continue
        phi = buf if full else buf[:live.size]
        # exp(-a d2) of the live rows, arguments below -reach - 1 clipped (they give values under LSMI_TINY,
        # floored to 0: no subnormals in the products below), in cache-sized tiles (compiled: _exp)
        _gaussian_rows(d2, live.astype(np.int64), a, -reach - 1.0, LSMI_TINY, phi, scratch)
        for m in range(n_folds):
            lo, hi = cuts[m], cuts[m + 1]
            if hi > lo:
                p = phi[lo:hi]
                G[m, w] = p.T @ p
                rows = slice(lo, hi) if full else live[lo:hi]
                S[:, m, w] = np.matmul(onehot[:, :, rows], p)
    for m in range(n_folds):
        count[:, m] = onehot[:, :, bounds[m]:bounds[m + 1]].sum(axis=2)
    if single:
        S, count = S[0], count[0]
    return {"G": G, "S": S, "count": count}


SMIC_OOS = Pass("smic_oos_stats", smic_oos_stats, inputs=("xd", "phi", "sigma"), start=True)
LSMI = Pass("lsmi_stats", lsmi_stats, inputs=("x", "labels"), start=True)
