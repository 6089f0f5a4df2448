"""Soft K-means' step by matrix products, for many centres x features
(compiled, numba): per tile of rows, the squared distances as
``|x - s|^2 - 2 (x - s).(m_j - s) + |m_j - s|^2`` (``s`` the centres' mean;
the products by one BLAS call), the memberships (MacKay 2003, eq. 20.7) by
the SIMD exponential of :mod:`infoclust_dask.kernels._loops` (the compiled
loop; the normalization folded into the sums' weights), and the responsibility-weighted sums ``S`` (the numerator of 20.8)
by a second BLAS call. float64 rows: everything in float64; float32 rows:
the products, the exponentials (:func:`infoclust_dask.kernels._exp._exp_nonpos32`,
eight SIMD lanes; the memberships enter a float32 product anyway) and a
tile's sums in float32, the distances' assembly, the normalizers and the
sums across tiles in float64."""

from __future__ import annotations

import math

import numpy as np

from ._exp import _exp_nonpos, _exp_nonpos32
from ._loops import TILE, _jit


@_jit
def _soft_rows_gemm(x, w, cm, shift, scale, R, S, out_logz):
    """``R[j] += sum_r w_r g_jr``, ``S[j] += sum_r w_r g_jr x_r`` and
    ``out_logz[0] = sum_r w_r log sum_j exp(scale d_jr)`` with ``d`` the
    squared distances (clipped at 0) and ``g`` the memberships."""
    n, d = x.shape
    k = cm.shape[0]
    cs = np.empty((k, d), dtype=cm.dtype)
    cn = np.empty(k)
    for j in range(k):
        t = 0.0
        for f in range(d):
            cs[j, f] = cm[j, f] - shift[f]
            t += np.float64(cs[j, f]) * np.float64(cs[j, f])
        cn[j] = t
    xt = np.zeros((d, TILE), dtype=cm.dtype)
    xr = np.zeros((TILE, d), dtype=cm.dtype)
    xn = np.empty(TILE)
    acc = np.empty((k, TILE))
    single = cm.itemsize == 4  # float32 rows: the memberships in float32 (g32), else float64 (g)
    g = np.empty((0, 0) if single else (k, TILE))
    gt = np.zeros((k, TILE), dtype=cm.dtype)
    lz = np.empty(TILE)
    s = np.empty(TILE)
    fbuf = np.empty(TILE)
    g32 = np.empty((k, TILE) if single else (0, 0), dtype=np.float32)
    fbuf32 = np.empty(TILE, dtype=np.float32)
    weighted = w.shape[0] > 0
    total = 0.0
    for i0 in range(0, n, TILE):
        nt = min(TILE, n - i0)
        for r in range(nt):
            t = 0.0
            for f in range(d):
                v = x[i0 + r, f]
                xr[r, f] = v
                u = v - shift[f]
                xt[f, r] = u
                t += np.float64(u) * np.float64(u)
            xn[r] = t
        if nt < TILE:
            for r in range(nt, TILE):
                for f in range(d):
                    xt[f, r] = 0
                    xr[r, f] = 0
        prod = np.dot(cs, xt)  # (k, TILE)
        for r in range(nt):
            lz[r] = -np.inf
        for j in range(k):  # scale * distance (clipped at 0) and each column's maximum
            cj = cn[j]
            for r in range(nt):
                v = xn[r] - 2.0 * np.float64(prod[j, r]) + cj
                e = scale * max(v, 0.0)
                acc[j, r] = e
                lz[r] = max(lz[r], e)
        for r in range(nt):
            s[r] = 0.0
        for j in range(k):  # the exponentials (the compiled SIMD exp) and their column sums
            if single:  # float32 rows: the memberships go into float32 products, so a float32 exp (8 lanes)
                for r in range(nt):
                    g32[j, r] = np.float32(acc[j, r] - lz[r])
                _exp_nonpos32(g32[j], nt, fbuf32)
                for r in range(nt):
                    s[r] += g32[j, r]
            else:
                for r in range(nt):
                    g[j, r] = acc[j, r] - lz[r]
                _exp_nonpos(g[j], nt, fbuf)
                for r in range(nt):
                    s[r] += g[j, r]
        for r in range(nt):
            wr = w[i0 + r] if weighted else 1.0
            total += wr * (lz[r] + math.log(s[r]))
            s[r] = wr / s[r]  # the weight over the normalizer
        for j in range(k):
            t = 0.0
            if single:
                for r in range(nt):
                    v = np.float64(g32[j, r]) * s[r]
                    gt[j, r] = v
                    t += v
            else:
                for r in range(nt):
                    v = g[j, r] * s[r]
                    gt[j, r] = v
                    t += v
            R[j] += t
            for r in range(nt, TILE):
                gt[j, r] = 0
        part = np.dot(gt, xr)  # (k, d)
        for j in range(k):
            for f in range(d):
                S[j, f] += np.float64(part[j, f])
    out_logz[0] = total
