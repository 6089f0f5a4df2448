"""The compiled loops (numba) of SMIC's kernel pieces
(:func:`infoclust_dask.kernels.smic.kernel_transpose_pieces`): the exponent
of kernel (7) of Sugiyama et al. (2014) for a block's directed entries, and
those entries transposed and grouped by the row block of their column (a
counting sort, stable), without the coordinate arrays and the argsort the
numpy form made: the same pieces, bit for bit (numpy's ``exp`` makes the
values; the tests compare with ``tests/reference_kernels.py``). One
2**20-row block of a 1e7-row kernel, t = 10, on a 2-core Zen 5 EPYC:
0.36-0.57 s against 1.17-2.01 s (``benchmarks/smic_kernel_blocks.py``, two runs).

A compiled build of the block's rows (``max(A, A^T, I)`` row by row, and
the rows renamed to the locality rank in one pass) made the same arrays
but was no faster than scipy's chain (2.43-2.77 s against 2.04-3.38 s on
the same block): the blocks stay scipy's. One thread each, without the
GIL, imported at the first kernel piece.
"""

from __future__ import annotations

import numba
import numpy as np

from ._cache import can_cache

CACHE = can_cache()


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
