"""The compiled row loops (numba) behind :mod:`infoclust_dask.kernels._compiled`.

Every loop works on tiles of :data:`TILE` rows, transposed (features x
rows): a centre's exact squared distances to the tile's rows (differences,
not the ``|x|^2 - 2 x.m + |m|^2`` expansion; Lloyd's assignment with many
centres ranks them by the expansion and settles near ties exactly,
:mod:`infoclust_dask.kernels._lloyd_loops`) accumulate over the features as one SIMD loop
across the rows, with no reduction across SIMD lanes;
memberships are kept as (centres x rows) so that their maxima, exponentials
and normalizers are SIMD loops too, and a pass's sums over the tile's rows
(``sum_r g_jr x_rf``) are dot products across the rows. Distances are
computed in the precision of the centres the wrapper passes: the rows' own
(float32 rows with float32 centres: twice as many features per SIMD
instruction, as scikit-learn does for float32 data); softmax, exponentials
and every sum are float64 (but soft K-means' products for many centres and
float32 rows, :mod:`infoclust_dask.kernels._soft_products`, take float32
exponentials, :func:`infoclust_dask.kernels._exp._exp_nonpos32`). These loops are the only form of each formula
in the package but two (Lloyd's step and the moments also have a numpy
form for passes over tiny data, :mod:`infoclust_dask.kernels._numpy_forms`);
the tests hold the plain numpy formulas they are compared with
(``tests/reference_kernels.py``: 1e-10 for float64 rows, float32 rounding
of the distances for float32).

From :data:`PRODUCTS_MIN_K` centres and :data:`PRODUCTS_MIN_KD` centres x
features (float32 rows: :data:`PRODUCTS_MIN_KD32`) the distances and the
memberships' sums are matrix products instead (:func:`_distances_products`,
:func:`_weighted_sums_products`; float64, the expansion about the centres'
mean).

Functions run without the GIL (``nogil``), one thread each (no
``parallel=True``; BLAS in the products above and in Lloyd's and soft
K-means' products for many centres,
:func:`infoclust_dask.kernels._lloyd_loops._lloyd_rows_gemm`, held to one
thread while a pool runs kernels): a dask worker runs as many as it has
threads. Lloyd's assignment (exact differences, or products for many
centres) is :mod:`infoclust_dask.kernels._lloyd_loops`.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ._cache import can_cache
from ._exp import _exp_nonpos

#: numba's on-disk cache is used when some folder can hold it (:func:`can_cache`)
CACHE = can_cache()

#: LLVM may reassociate sums (so the reductions over features become SIMD
#: code), contract multiply-adds into FMAs, take reciprocals and ignore the
#: sign of zero; not "nnan"/"ninf" (NaN must propagate into the checks,
#: exp(-inf) = 0 and infinite distances keep their meaning).
FASTMATH = frozenset({"reassoc", "contract", "arcp", "nsz"})
_jit = numba.njit(cache=CACHE, nogil=True, error_model="numpy", fastmath=set(FASTMATH))
#: IEEE arithmetic as written (no reassociation, no FMA): the loops whose squared distances DECIDE Lloyd's labels
#: and make its inertia (:mod:`infoclust_dask.kernels._lloyd_loops`, the bounds' loops). Every Lloyd path - the
#: exact loops, the products for many centres, Hamerly's and Yinyang's bounds - then computes each deciding
#: distance by the same operations in the same order, so every path gives the same labels, centres and inertia
#: bit for bit, on every CPU (the fast paths only filter, with certified rounding bounds), and which path runs
#: can be chosen by measurement without changing the model (issue 63). Vectorized across a tile's rows, these
#: loops need neither flag.
_strict = numba.njit(cache=CACHE, nogil=True, error_model="numpy")

#: rows per tile (the memberships' SIMD loops run across a tile's rows)
TILE = 128
#: rows of more features than this are not transposed: their distances are
#: one SIMD reduction over the features per centre, their sums one SIMD
#: update of a centre's sums per row (measured: ``docs/BENCHMARKS.md``)
WIDE = 32

#: from this many centres, and centres x features (float64 rows; float32 rows: PRODUCTS_MIN_KD32), the
#: memberships' distances and sums of every kernel here are matrix products (BLAS, float64):
#: :func:`_distances_products`, :func:`_weighted_sums_products`. DC's gradient pass over 1e5 rows, one thread,
#: exact loops -> products: float64 d = 64, K = 16: 33 -> 22 ms; d = 128, K = 16: 62 -> 44; d = 8, K = 128: 68 ->
#: 53; d = 32, K = 32: 22 -> 24; d = 16, K = 32 (512): even. float32 (eight SIMD lanes in the exact loops):
#: K x d = 1024-2048 even or slower (d = 8, K = 128: 48 -> 57), d = 64, K = 64: 104 -> 59; d = 128, K = 32: 89 -> 62
PRODUCTS_MIN_K = 16
PRODUCTS_MIN_KD = 1024
PRODUCTS_MIN_KD32 = 4096


@_jit
def _by_products(x, k, d):
    """Whether a kernel's distances and sums go by matrix products (the thresholds above)."""
    return k >= PRODUCTS_MIN_K and k * d >= (PRODUCTS_MIN_KD32 if x.itemsize == 4 else PRODUCTS_MIN_KD)


@_jit
def _distances_products(x, i0, nt, xt, cm, acc):
    """:func:`_distances` by one matrix product (BLAS, float64 whatever the
    rows' type): ``|x - s|^2 - 2 (x - s).(m_j - s) + |m_j - s|^2`` with
    ``s`` the centres' mean (the expansion's rounding then scales with the
    spread about it, not with the distance from the origin), clipped at 0.
    Fills ``xt`` as :func:`_distances` does (rows up to :data:`WIDE`
    features), for kernels that read the transposed tile afterwards."""
    k, d = cm.shape
    shift = np.zeros(d)
    for j in range(k):
        for f in range(d):
            shift[f] += np.float64(cm[j, f])
    for f in range(d):
        shift[f] /= k
    cs = np.empty((k, d))
    cn = np.empty(k)
    for j in range(k):
        t = 0.0
        for f in range(d):
            v = np.float64(cm[j, f]) - shift[f]
            cs[j, f] = v
            t += v * v
        cn[j] = t
    tile = np.zeros((d, TILE))
    xn = np.empty(TILE)
    for r in range(nt):
        t = 0.0
        for f in range(d):
            v = np.float64(x[i0 + r, f]) - shift[f]
            tile[f, r] = v
            t += v * v
        xn[r] = t
    if d <= WIDE:
        for r in range(nt):
            for f in range(d):
                xt[f, r] = x[i0 + r, f]
    prod = np.dot(cs, tile)  # (k, TILE)
    for j in range(k):
        cj = cn[j]
        for r in range(nt):
            v = xn[r] - 2.0 * prod[j, r] + cj
            acc[j, r] = max(v, 0.0)


@_jit
def _weighted_sums_products(g, nt, x, i0, WX, Ws):
    """:func:`_weighted_sums` by one matrix product (BLAS, float64):
    ``WX += g[:, :nt] @ x[i0:i0+nt]``; ``g``'s columns past ``nt`` are
    zeroed (scratch of the last tile)."""
    k = g.shape[0]
    d = x.shape[1]
    for j in range(k):
        t = 0.0
        for r in range(nt):
            t += g[j, r]
        Ws[j] += t
        for r in range(nt, TILE):
            g[j, r] = 0.0
    rows = np.zeros((TILE, d))
    for r in range(nt):
        for f in range(d):
            rows[r, f] = x[i0 + r, f]
    part = np.dot(g, rows)  # (k, d)
    for j in range(k):
        for f in range(d):
            WX[j, f] += part[j, f]


@_jit
def _distances(x, i0, nt, xt, cm, acc):
    """``acc[j, r] = ||x_{i0+r} - m_j||^2`` (exact differences) for the
    tile's ``nt`` rows, in the precision of ``acc`` (that of the centres
    ``cm``). Up to :data:`WIDE` features the tile is first transposed
    into ``xt`` (features x rows) and the distances accumulate as SIMD
    loops across the rows, two centres and four features at a time (each
    row of ``xt`` read once per pair of centres, each distance written
    once per four features: 0.85 -> 0.48 ms per pass over Letter's
    20 000 x 16 rows with 26 centres, one thread); wider rows are read as
    they are, one SIMD reduction over the features per centre."""
    k, d = cm.shape
    if _by_products(x, k, d):
        _distances_products(x, i0, nt, xt, cm, acc)
        return
    if d > WIDE:
        for r in range(nt):
            i = i0 + r
            for j in range(k):
                t = cm[j, 0] - cm[j, 0]  # a zero of the centres' type
                for f in range(d):
                    diff = x[i, f] - cm[j, f]
                    t += diff * diff
                acc[j, r] = t
        return
    for r in range(nt):
        for f in range(d):
            xt[f, r] = x[i0 + r, f]
    d4 = d - d % 4
    k2 = k - k % 2
    for j in range(0, k2, 2):
        for r in range(nt):
            acc[j, r] = 0
            acc[j + 1, r] = 0
        for f in range(0, d4, 4):
            a0, a1, a2, a3 = cm[j, f], cm[j, f + 1], cm[j, f + 2], cm[j, f + 3]
            b0, b1, b2, b3 = cm[j + 1, f], cm[j + 1, f + 1], cm[j + 1, f + 2], cm[j + 1, f + 3]
            for r in range(nt):
                x0, x1, x2, x3 = xt[f, r], xt[f + 1, r], xt[f + 2, r], xt[f + 3, r]
                p0, p1, p2, p3 = x0 - a0, x1 - a1, x2 - a2, x3 - a3
                q0, q1, q2, q3 = x0 - b0, x1 - b1, x2 - b2, x3 - b3
                acc[j, r] += (p0 * p0 + p1 * p1) + (p2 * p2 + p3 * p3)
                acc[j + 1, r] += (q0 * q0 + q1 * q1) + (q2 * q2 + q3 * q3)
    for j in range(k):  # the features past the last four; an odd last centre's every feature
        if j >= k2:
            for r in range(nt):
                acc[j, r] = 0
        for f in range(d4 if j < k2 else 0, d):
            cf = cm[j, f]
            for r in range(nt):
                p0 = xt[f, r] - cf
                acc[j, r] += p0 * p0

@_jit
def _softmax_cols(z, nt, scale, out, lz, s, fbuf, with_logz):
    """``out[:, r] = softmax(scale * z[:, r])`` for the tile's first ``nt``
    columns (stable: the column maximum is subtracted; ``out`` may be
    ``z`` when both are float64); with ``with_logz`` ``lz[r] = log
    sum_j exp(scale * z[j, r])``. ``s``: scratch of a tile's length."""
    k = z.shape[0]
    for r in range(nt):
        lz[r] = scale * np.float64(z[0, r])
    for j in range(1, k):
        for r in range(nt):
            e = scale * np.float64(z[j, r])
            if e > lz[r]:
                lz[r] = e
    for j in range(k):
        for r in range(nt):
            out[j, r] = scale * np.float64(z[j, r]) - lz[r]
        _exp_nonpos(out[j], nt, fbuf)
    for r in range(nt):
        s[r] = 0.0
    for j in range(k):
        for r in range(nt):
            s[r] += out[j, r]
    if with_logz:
        for r in range(nt):
            lz[r] += math.log(s[r])
    for r in range(nt):
        s[r] = 1.0 / s[r]
    for j in range(k):
        for r in range(nt):
            out[j, r] *= s[r]

@_jit
def _buffers(d, k, xdtype, cdtype):
    """Scratch of one tile: transposed rows (none for rows wider than
    :data:`WIDE`), distances, memberships, log normalizers, a row
    scratch and the exponentials' scratch."""
    return (np.empty((d if d <= WIDE else 0, TILE), dtype=xdtype), np.empty((k, TILE), dtype=cdtype),
            np.empty((k, TILE)), np.empty(TILE), np.empty(TILE), np.empty(TILE))

@_jit
def _weighted_sums(g, nt, x, i0, xt, WX, Ws):
    """``Ws[j] += sum_r g[j, r]``, ``WX[j, f] += sum_r g[j, r] x_{i0+r, f}``:
    dot products across the transposed tile's rows, two centres by four
    features at a time (eight SIMD accumulators; each row of ``g`` and
    ``xt`` read once per block: 0.74 -> 0.40 ms per pass over Letter with
    26 centres, one thread), or for rows wider than :data:`WIDE` one SIMD
    update of each centre's sums per row."""
    k = g.shape[0]
    d = x.shape[1]
    if _by_products(x, k, d):
        _weighted_sums_products(g, nt, x, i0, WX, Ws)
        return
    for j in range(k):
        t = 0.0
        for r in range(nt):
            t += g[j, r]
        Ws[j] += t
    if d > WIDE:
        for r in range(nt):
            i = i0 + r
            for j in range(k):
                gj = g[j, r]
                for f in range(d):
                    WX[j, f] += gj * np.float64(x[i, f])
        return
    k2 = k - k % 2
    d4 = d - d % 4
    for j in range(0, k2, 2):
        for f in range(0, d4, 4):
            t00 = t01 = t02 = t03 = t10 = t11 = t12 = t13 = 0.0
            for r in range(nt):
                g0, g1 = g[j, r], g[j + 1, r]
                x0, x1, x2, x3 = xt[f, r], xt[f + 1, r], xt[f + 2, r], xt[f + 3, r]
                t00 += g0 * x0
                t01 += g0 * x1
                t02 += g0 * x2
                t03 += g0 * x3
                t10 += g1 * x0
                t11 += g1 * x1
                t12 += g1 * x2
                t13 += g1 * x3
            WX[j, f] += t00
            WX[j, f + 1] += t01
            WX[j, f + 2] += t02
            WX[j, f + 3] += t03
            WX[j + 1, f] += t10
            WX[j + 1, f + 1] += t11
            WX[j + 1, f + 2] += t12
            WX[j + 1, f + 3] += t13
    for j in range(k):
        for f in range(d4 if j < k2 else 0, d):
            t = 0.0
            for r in range(nt):
                t += g[j, r] * xt[f, r]
            WX[j, f] += t

@_jit
def _centred(g, a, nt, s):
    """One gradient's row weights of DC (11) / AC: ``g[j, r] <- g_jr
    (a_jr - sum_l g_lr a_lr)``."""
    k = g.shape[0]
    for r in range(nt):
        s[r] = 0.0
    for j in range(k):
        for r in range(nt):
            s[r] += g[j, r] * a[j, r]
    for j in range(k):
        for r in range(nt):
            g[j, r] *= a[j, r] - s[r]

@_jit
def _weight_cols(g, w, i0, nt):
    """``g[j, r] *= w[i0 + r]``: a tile's memberships weighted by their rows' sample weights."""
    for j in range(g.shape[0]):
        for r in range(nt):
            g[j, r] *= w[i0 + r]

@_jit
def _soft_rows(x, w, cm, scale, R, S, out_logz):
    n, d = x.shape
    k = cm.shape[0]
    xt, acc, g, lz, s, fbuf = _buffers(d, k, x.dtype, cm.dtype)
    weighted = w.shape[0] > 0
    total = 0.0
    for i0 in range(0, n, TILE):
        nt = min(TILE, n - i0)
        _distances(x, i0, nt, xt, cm, acc)
        _softmax_cols(acc, nt, scale, g, lz, s, fbuf, True)
        if weighted:
            for r in range(nt):
                total += w[i0 + r] * lz[r]
            _weight_cols(g, w, i0, nt)
        else:
            for r in range(nt):
                total += lz[r]
        _weighted_sums(g, nt, x, i0, xt, S, R)
    out_logz[0] = total

@_jit
def _scatter_rows(x, w, cm, cm64, scale, R, Q):
    """``R[j] += sum_r w_r g_jr`` and ``Q[j] += sum_r w_r g_jr (x_r -
    m_j)(x_r - m_j)^T`` with the soft K-means memberships ``g`` (distances
    in the precision of ``cm``, as :func:`_soft_rows`; differences and
    sums in float64 against the float64 centres ``cm64``): one
    ``d x nt`` tile of differences per centre, its upper triangle of
    products as dot products across the tile's rows, mirrored at the end."""
    n, d = x.shape
    k = cm.shape[0]
    xt, acc, g, lz, s, fbuf = _buffers(d, k, x.dtype, cm.dtype)
    diff = np.empty((d, TILE))
    weighted = w.shape[0] > 0
    for i0 in range(0, n, TILE):
        nt = min(TILE, n - i0)
        _distances(x, i0, nt, xt, cm, acc)
        _softmax_cols(acc, nt, scale, g, lz, s, fbuf, False)
        if weighted:
            _weight_cols(g, w, i0, nt)
        for j in range(k):
            t = 0.0
            for r in range(nt):
                t += g[j, r]
            R[j] += t
            for f in range(d):  # the tile as _distances transposed it (rows up to WIDE features)
                mf = cm64[j, f]
                if d <= WIDE:
                    for r in range(nt):
                        diff[f, r] = np.float64(xt[f, r]) - mf
                else:
                    for r in range(nt):
                        diff[f, r] = np.float64(x[i0 + r, f]) - mf
            for f1 in range(d):
                for r in range(nt):
                    s[r] = g[j, r] * diff[f1, r]
                for f2 in range(f1, d):
                    t = 0.0
                    for r in range(nt):
                        t += s[r] * diff[f2, r]
                    Q[j, f1, f2] += t
    for j in range(k):
        for f1 in range(d):
            for f2 in range(f1):
                Q[j, f1, f2] = Q[j, f2, f1]

@_jit
def _dc_count_rows(x, c, cm, scale, counts):
    n, d = x.shape
    k = cm.shape[0]
    xt, acc, g, lz, s, fbuf = _buffers(d, k, x.dtype, cm.dtype)
    for i0 in range(0, n, TILE):
        nt = min(TILE, n - i0)
        _distances(x, i0, nt, xt, cm, acc)
        _softmax_cols(acc, nt, scale, g, lz, s, fbuf, False)
        for r in range(nt):
            ci = c[i0 + r]
            for j in range(k):
                counts[j, ci] += g[j, r]

@_jit
def _dc_grad_rows(x, c, cm, scale, L, WX, Ws):
    n, d = x.shape
    k = cm.shape[0]
    xt, acc, g, lz, s, fbuf = _buffers(d, k, x.dtype, cm.dtype)
    a = np.empty((k, TILE))
    for i0 in range(0, n, TILE):
        nt = min(TILE, n - i0)
        _distances(x, i0, nt, xt, cm, acc)
        _softmax_cols(acc, nt, scale, g, lz, s, fbuf, False)
        for r in range(nt):
            ci = c[i0 + r]
            for j in range(k):
                a[j, r] = L[j, ci]
        _centred(g, a, nt, s)
        _weighted_sums(g, nt, x, i0, xt, WX, Ws)

@_jit
def _ac_count_rows(x, y, cmx, cmy, sx, sy, counts):
    n, dx = x.shape
    dy = y.shape[1]
    k, l_ = cmx.shape[0], cmy.shape[0]
    xt, ax, gx, lz, s, fbuf = _buffers(dx, k, x.dtype, cmx.dtype)
    yt, ay, gy, _, _, fbuf_y = _buffers(dy, l_, y.dtype, cmy.dtype)
    for i0 in range(0, n, TILE):
        nt = min(TILE, n - i0)
        _distances(x, i0, nt, xt, cmx, ax)
        _distances(y, i0, nt, yt, cmy, ay)
        _softmax_cols(ax, nt, sx, gx, lz, s, fbuf, False)
        _softmax_cols(ay, nt, sy, gy, lz, s, fbuf_y, False)
        for i in range(k):
            for j in range(l_):
                t = 0.0
                for r in range(nt):
                    t += gx[i, r] * gy[j, r]
                counts[i, j] += t

@_jit
def _ac_grad_rows(x, y, cmx, cmy, sx, sy, psi, cx, cy, WX, Wx, WY, Wy):
    n, dx = x.shape
    dy = y.shape[1]
    k, l_ = cmx.shape[0], cmy.shape[0]
    xt, ax, gx, lz, s, fbuf = _buffers(dx, k, x.dtype, cmx.dtype)
    yt, ay, gy, _, _, fbuf_y = _buffers(dy, l_, y.dtype, cmy.dtype)
    a, b = np.empty((k, TILE)), np.empty((l_, TILE))
    for i0 in range(0, n, TILE):
        nt = min(TILE, n - i0)
        _distances(x, i0, nt, xt, cmx, ax)
        _distances(y, i0, nt, yt, cmy, ay)
        _softmax_cols(ax, nt, sx, gx, lz, s, fbuf, False)
        _softmax_cols(ay, nt, sy, gy, lz, s, fbuf_y, False)
        for i in range(k):  # a_ir = sum_j psi_ij g_j(y_r) - cx_i
            for r in range(nt):
                a[i, r] = -cx[i]
            for j in range(l_):
                p = psi[i, j]
                for r in range(nt):
                    a[i, r] += p * gy[j, r]
        for j in range(l_):  # b_jr = sum_i g_i(x_r) psi_ij - cy_j
            for r in range(nt):
                b[j, r] = -cy[j]
            for i in range(k):
                p = psi[i, j]
                for r in range(nt):
                    b[j, r] += gx[i, r] * p
        _centred(gx, a, nt, s)
        _centred(gy, b, nt, s)
        _weighted_sums(gx, nt, x, i0, xt, WX, Wx)
        _weighted_sums(gy, nt, y, i0, yt, WY, Wy)

@_jit
def _mixture_rows(x, c, cm, const, inv2v, log_psi, R, S, Q, N, out_ll):
    n, d = x.shape
    k = cm.shape[0]
    xt, acc, g, lz, s, fbuf = _buffers(d, k, x.dtype, cm.dtype)
    sq = np.empty(TILE)
    with_c = c.shape[0] > 0
    with_psi = log_psi.shape[0] > 0
    ll = 0.0
    for i0 in range(0, n, TILE):
        nt = min(TILE, n - i0)
        _distances(x, i0, nt, xt, cm, acc)
        for j in range(k):
            for r in range(nt):
                g[j, r] = const[j] - np.float64(acc[j, r]) * inv2v[j]
        if with_psi:
            for r in range(nt):
                ci = c[i0 + r]
                for j in range(k):
                    g[j, r] += log_psi[j, ci]
        _softmax_cols(g, nt, 1.0, g, lz, s, fbuf, True)
        for r in range(nt):
            ll += lz[r]
            sq[r] = 0.0
        for r in range(nt):
            i = i0 + r
            for f in range(d):
                xf = np.float64(x[i, f])
                sq[r] += xf * xf
        for j in range(k):
            t = 0.0
            for r in range(nt):
                t += g[j, r] * sq[r]
            Q[j] += t
        if with_c:
            for r in range(nt):
                ci = c[i0 + r]
                for j in range(k):
                    N[j, ci] += g[j, r]
        _weighted_sums(g, nt, x, i0, xt, S, R)
    out_ll[0] = ll

@_jit
def _cmbc_rows(y, W, b, inv_t, S1, R, out):
    n, m = y.shape
    k = W.shape[1]
    ll, p, q = np.empty((k, TILE)), np.empty((k, TILE)), np.empty((k, TILE))
    lz, lz2, s, fbuf = np.empty(TILE), np.empty(TILE), np.empty(TILE), np.empty(TILE)
    loglik = 0.0
    hard = 0.0
    for i0 in range(0, n, TILE):
        nt = min(TILE, n - i0)
        for c in range(k):
            for r in range(nt):
                ll[c, r] = b[c]
        for r in range(nt):  # binary rows: only the nonzero features add to the log-likelihoods (A.2)
            i = i0 + r
            for j in range(m):
                v = np.float64(y[i, j])
                if v != 0.0:
                    for c in range(k):
                        ll[c, r] += v * W[j, c]
        _softmax_cols(ll, nt, 1.0, p, lz, s, fbuf, True)
        _softmax_cols(ll, nt, inv_t, q, lz2, s, fbuf, False)
        for r in range(nt):
            loglik += lz[r]
            top = q[0, r]
            for c in range(1, k):
                if q[c, r] > top:
                    top = q[c, r]
            hard += top
        for c in range(k):
            t = 0.0
            for r in range(nt):
                t += q[c, r]
            R[c] += t
        for r in range(nt):
            i = i0 + r
            for j in range(m):
                v = np.float64(y[i, j])
                if v != 0.0:
                    for c in range(k):
                        S1[j, c] += v * q[c, r]
    out[0] = loglik
    out[1] = hard


@numba.njit(cache=CACHE, nogil=True, error_model="numpy")  # no fastmath: it can fold the finiteness test away
def _moments_rows(x, w, shift, s1, s2, out, skip_bad):
    """Weighted sums of ``x - shift`` and of its squares per feature, in
    float64 (``w``, ``shift``: empty for none). ``skip_bad``: non-finite
    entries are left out of the sums and counted (the second, rare run of
    a block whose sums came out non-finite). ``out = [sum of w, bad]``.
    The loop over the features needs no reassociation to be SIMD code (each
    feature has its own sums), so it is compiled without fastmath, whose
    flags let LLVM drop the finiteness test (seen with a shift)."""
    n, d = x.shape
    has_w = w.shape[0] > 0
    has_shift = shift.shape[0] > 0
    wsum = 0.0
    bad = 0
    for i in range(n):
        wi = w[i] if has_w else 1.0
        wsum += wi
        for j in range(d):
            v = np.float64(x[i, j])
            if has_shift:
                v -= shift[j]
            if skip_bad and not math.isfinite(v):
                bad += 1
                continue
            s1[j] += wi * v
            s2[j] += wi * v * v
    out[0] = wsum
    out[1] = bad

