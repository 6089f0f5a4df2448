"""The compiled loops (numba) of SMIC's kernel row blocks
(:func:`infoclust_dask.kernels.smic.kernel_transpose_pieces` and
:func:`~infoclust_dask.kernels.smic.kernel_row_block`): the exponent of
kernel (7) of Sugiyama et al. (2014) for a block's directed entries (numpy's
``exp`` then makes the values), those entries transposed and grouped by the
row block of their column (a counting sort, stable), one block's rows of the
symmetric kernel built from its own directed entries and the transposed ones
the other blocks sent, and those rows reordered and renamed to a locality
rank (:class:`~infoclust_dask.kernels.smic.RankedRows`).

They make exactly what the numpy and scipy forms they replace made (an
argsort of the blocks; ``csr_matrix`` from coordinates, ``maximum`` with
the transpose, ``maximum`` with the identity, ``eliminate_zeros``, row
indexing and ``take``): the same pieces in the same order and the same CSR
arrays (each row's columns ascending, a value the larger of the directed
and the transposed one, missing ones counting 0, the diagonal at least 1,
exact zeros left out); the tests compare both with
``tests/reference_kernels.py``. They pass over the entries fewer times,
which counts most when both workers of a host build blocks at once: one
2**20-row block of a 1e7-row kernel (t = 10), a 2-core Zen 5 EPYC, two
processes at once, the split 0.53 s against 1.81 and the block 2.87 s
against 4.37 (medians; one process: 0.61 / 1.50 and 3.20 / 4.27;
``benchmarks/smic_kernel_blocks.py``). One thread each, without the GIL,
imported at the first kernel block.
"""

from __future__ import annotations

import numba
import numpy as np

from ._cache import can_cache
from ._prefetch import prefetch_item

CACHE = can_cache()

#: rows with more entries than this are sorted by a merge sort, smaller ones by insertion
INSERTION_ENTRIES = 48
#: the transposed entries' slots are asked for this many entries ahead
AHEAD = 16


@numba.njit(cache=CACHE, nogil=True, error_model="numpy")
def scaled_distances(d2, idx, sigma, start, t):  # pragma: no cover - compiled
    """``d2 / (2 sigma_i sigma_j)`` of each row's first ``t`` entries (0
    where ``d2 <= 0``, inf for a positive distance over a zero scale; 0 for
    padded entries, which the other loops skip): the exponent of kernel
    (7), computed as :func:`~infoclust_dask.kernels.smic.local_scaling_values`
    does, so the values are the same bits."""
    m = d2.shape[0]
    out = np.empty((m, t), dtype=np.float64)
    for i in range(m):
        si = sigma[start + i]
        for j in range(t):
            c = idx[i, j]
            v = d2[i, j]
            if c < 0 or v <= 0.0:
                out[i, j] = 0.0
            else:
                out[i, j] = v / (2.0 * si * sigma[c])
    return out


@numba.njit(cache=CACHE, nogil=True)
def split_by_block(idx, vals, bounds, start, local, glob, out_vals):  # pragma: no cover - compiled
    """Entries ``(row start + i, idx[i, j], vals[i, j])`` (``idx[i, j] >=
    0``, rows then columns in order) transposed and grouped by the block of
    their column (``bounds``: the blocks' row offsets; a counting sort,
    the entries' order kept within a block): ``local`` gets the column local
    to its block, ``glob`` the row's global number, ``out_vals`` the value.
    Returns the groups' offsets (``len(bounds)`` of them)."""
    nb = bounds.shape[0] - 1
    m, t = vals.shape
    dest = np.empty((m, t), dtype=np.int32)
    cuts = np.zeros(nb + 1, dtype=np.int64)
    for i in range(m):
        for j in range(t):
            c = idx[i, j]
            if c < 0:
                continue
            b = np.searchsorted(bounds, c, side="right") - 1
            if b < 0 or b >= nb:
                raise ValueError("a kernel entry's column lies outside the blocks' rows")
            dest[i, j] = b
            cuts[b + 1] += 1
    for b in range(nb):
        cuts[b + 1] += cuts[b]
    fill = cuts[:-1].copy()
    for i in range(m):
        for j in range(t):
            c = idx[i, j]
            if c < 0:
                continue
            b = dest[i, j]
            p = fill[b]
            local[p] = c - bounds[b]
            glob[p] = start + i
            out_vals[p] = vals[i, j]
            fill[b] = p + 1
    return cuts


@numba.njit(cache=CACHE, nogil=True)
def _sort_row(keys, vals, lo, hi):  # pragma: no cover - compiled
    """``keys[lo:hi]`` and ``vals`` with them sorted by key (stable):
    insertion for short rows, a merge sort for long ones."""
    if hi - lo > INSERTION_ENTRIES:
        o = np.argsort(keys[lo:hi], kind="mergesort")
        keys[lo:hi] = keys[lo:hi][o]
        vals[lo:hi] = vals[lo:hi][o]
        return
    for a in range(lo + 1, hi):
        key = keys[a]
        val = vals[a]
        b = a - 1
        while b >= lo and keys[b] > key:
            keys[b + 1] = keys[b]
            vals[b + 1] = vals[b]
            b -= 1
        keys[b + 1] = key
        vals[b + 1] = val


@numba.njit(cache=CACHE, nogil=True)
def symmetric_rows(idx, own_vals, in_rows, in_cols, in_vals, start):  # pragma: no cover - compiled
    """Rows ``start .. start + m - 1`` of ``max(A, A^T, I)`` in CSR arrays
    ``(indptr, indices, data)``: ``A``'s entries of these rows are
    ``(i, idx[i, j], own_vals[i, j])`` where ``idx[i, j] >= 0``, ``A^T``'s
    ``(in_rows local, in_cols global, in_vals)``; duplicates within one of
    them add up (as scipy's ``csr_matrix`` from coordinates), a value
    missing from one counts 0, the diagonal is at least 1 and exact zeros
    are left out; each row's columns ascending."""
    m, t = own_vals.shape
    count = np.ones(m + 1, dtype=np.int64)  # the diagonal; count[m] is spare
    for i in range(m):
        for j in range(t):
            if idx[i, j] >= 0:
                count[i] += 1
    for e in range(in_rows.shape[0]):
        if in_rows[e] < 0 or in_rows[e] >= m:
            raise ValueError("a transposed kernel entry's row lies outside the block")
        count[in_rows[e]] += 1
    ptr = np.zeros(m + 1, dtype=np.int64)
    for r in range(m):
        ptr[r + 1] = ptr[r] + count[r]
    total = ptr[m]
    keys = np.empty(total, dtype=np.int64)  # column * 4 + source: 0 own, 1 transposed, 2 the diagonal
    vals = np.empty(total, dtype=np.float64)
    fill = ptr[:-1].copy()
    for i in range(m):
        for j in range(t):
            if idx[i, j] >= 0:
                p = fill[i]
                keys[p] = np.int64(idx[i, j]) * 4
                vals[p] = own_vals[i, j]
                fill[i] = p + 1
    for e in range(in_rows.shape[0]):
        if e + AHEAD < in_rows.shape[0]:  # the slots of the entry AHEAD on asked for: rows met at random
            q = fill[in_rows[e + AHEAD]]
            prefetch_item(keys, q)
            prefetch_item(vals, q)
        r = in_rows[e]
        p = fill[r]
        keys[p] = np.int64(in_cols[e]) * 4 + 1
        vals[p] = in_vals[e]
        fill[r] = p + 1
    for r in range(m):
        p = fill[r]
        keys[p] = np.int64(start + r) * 4 + 2
        vals[p] = 1.0
    indptr = np.zeros(m + 1, dtype=np.int64)
    indices = np.empty(total, dtype=np.int64)
    data = np.empty(total, dtype=np.float64)
    out = 0
    for r in range(m):
        lo, hi = ptr[r], ptr[r + 1]
        _sort_row(keys, vals, lo, hi)
        a = lo
        while a < hi:
            col = keys[a] >> 2
            own = 0.0
            tr = 0.0
            diag = False
            while a < hi and (keys[a] >> 2) == col:
                src = keys[a] & 3
                if src == 0:
                    own += vals[a]
                elif src == 1:
                    tr += vals[a]
                else:
                    diag = True
                a += 1
            v = own if own >= tr else tr
            if diag and v < 1.0:
                v = 1.0
            if v != 0.0:
                indices[out] = col
                data[out] = v
                out += 1
        indptr[r + 1] = out
    return indptr, indices[:out], data[:out]


@numba.njit(cache=CACHE, nogil=True)
def rows_renamed(indptr, indices, data, local, rank):  # pragma: no cover - compiled
    """The rows ``local`` of a CSR block in that order, each row's entries
    in their stored order with column ``c`` renamed ``rank[c]``:
    :class:`~infoclust_dask.kernels.smic.RankedRows`' arrays (what scipy's
    row indexing and numpy's ``take`` made, in one pass). The names of the
    entries of the row ``AHEAD`` rows on are asked for early: they are
    read at random."""
    m = local.shape[0]
    out_ptr = np.zeros(m + 1, dtype=indptr.dtype)
    for w in range(m):
        r = local[w]
        out_ptr[w + 1] = out_ptr[w] + indptr[r + 1] - indptr[r]
    out_idx = np.empty(out_ptr[m], dtype=indices.dtype)
    out_data = np.empty(out_ptr[m], dtype=data.dtype)
    for w in range(m):
        if w + AHEAD < m:
            f = local[w + AHEAD]
            for e in range(indptr[f], indptr[f + 1]):
                prefetch_item(rank, indices[e])
        r = local[w]
        p = out_ptr[w]
        for e in range(indptr[r], indptr[r + 1]):
            out_idx[p] = rank[indices[e]]
            out_data[p] = data[e]
            p += 1
    return out_ptr, out_idx, out_data
