"""The compiled exponential of the memberships (numba): ``exp`` of
non-positive values in place as loops LLVM turns into SIMD code, in float64
(:func:`_exp_nonpos`) and float32 (:func:`_exp_nonpos32`). Compiled eagerly
with FMA contraction only (see below); the kernels of
:mod:`infoclust_dask.kernels._loops` and
:mod:`infoclust_dask.kernels._soft_products` call them, and
:func:`_gaussian_rows` (LSMI's Gaussian basis values, tile by tile) and
:func:`_gaussian_sparse_sums` (its sums from the nonzero values only) for
:mod:`infoclust_dask.kernels.smic`."""

from __future__ import annotations

import math

import numba
import numpy as np

from ._cache import can_cache

CACHE = can_cache()

# exp by Cody-Waite range reduction: x = n ln2 + r, |r| <= ln2 / 2, exp(r) by
# its Taylor polynomial to degree 13 (truncation < 4e-18), 2^n assembled from
# its exponent bits (n + 1023 sits in the low mantissa bits of 2^52 + n + 1023,
# shifted into place as an integer). Accurate to 1 ulp against numpy (tests).
_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_BIAS = 4503599627371519.0  # 2**52 + 1023
_EXP_MIN = -708.0  # below it exp(x) < 3.3e-308: taken as 0 (denormal results are not formed)

# Compiled eagerly (explicit signature), with only FMA contraction of the
# fastmath flags, before any caller: numba compiles a callee with the flags
# of the first caller that needs it (numba issue #7168), and the fastmath
# kernels of _loops would otherwise be that caller (with reassociation LLVM
# could fold the range reduction). Contraction makes the polynomial and the
# reduction's products FMAs (exp 0.97 -> 0.61 ms per 5.2e5 values, one
# thread); the integer n is rounded once and read back from 2^n's exponent
# bits, so the two loops cannot round it apart.
# floor() keeps the rounding step exact even under reassociation.
_jit_exact = numba.njit("void(float64[::1], int64, float64[::1])", cache=CACHE, nogil=True,
                        error_model="numpy", fastmath={"contract"})


@_jit_exact
def _exp_nonpos(v, n, fbuf):
    """``v[:n] = exp(v[:n])`` in place for ``v <= 0`` (NaN stays NaN, values
    below -708 give 0), in three loops LLVM turns into SIMD code (math.exp
    is a scalar library call). ``fbuf``: scratch of at least ``n`` float64."""
    ibuf = fbuf.view(np.int64)
    for j in range(n):
        a = v[j] if v[j] > _EXP_MIN else _EXP_MIN
        fbuf[j] = math.floor(a * _LOG2E + 0.5) + _BIAS
    for j in range(n):
        ibuf[j] = ibuf[j] << 52  # 2^n as float64 bits (n >= -1021)
    for j in range(n):
        vj = v[j]
        a = vj if vj > _EXP_MIN else _EXP_MIN
        nf = np.float64((ibuf[j] >> 52) - 1023)  # the n of the first loop
        r = (a - nf * _LN2_HI) - nf * _LN2_LO
        p = 1.0 / 6227020800.0
        p = 1.0 / 479001600.0 + r * p
        p = 1.0 / 39916800.0 + r * p
        p = 1.0 / 3628800.0 + r * p
        p = 1.0 / 362880.0 + r * p
        p = 1.0 / 40320.0 + r * p
        p = 1.0 / 5040.0 + r * p
        p = 1.0 / 720.0 + r * p
        p = 1.0 / 120.0 + r * p
        p = 1.0 / 24.0 + r * p
        p = 1.0 / 6.0 + r * p
        p = 0.5 + r * p
        p = 1.0 + r * p
        p = 1.0 + r * p
        e = p * fbuf[j]
        v[j] = e if vj >= _EXP_MIN else (0.0 if vj < _EXP_MIN else vj)

# The same in float32 (for float32 rows' memberships, which the products round to float32 anyway): eight SIMD
# lanes instead of four, Cephes' expf split of ln 2, Taylor to degree 7 (truncation < 6e-9 relative), 2^n from
# the low mantissa bits of 2^23 + n + 127. Below -87, exp(x) < 1.7e-38 (float32's smallest normal): 0.
_LOG2E32 = np.float32(1.4426950408889634)
_LN2_HI32 = np.float32(0.693359375)
_LN2_LO32 = np.float32(-2.12194440e-4)
_BIAS32 = np.float32(8388735.0)  # 2**23 + 127
_EXP_MIN32 = np.float32(-87.0)
_HALF32 = np.float32(0.5)
_ZERO32 = np.float32(0.0)
_C32 = (np.float32(1.0 / 5040.0), np.float32(1.0 / 720.0), np.float32(1.0 / 120.0), np.float32(1.0 / 24.0),
        np.float32(1.0 / 6.0), np.float32(0.5), np.float32(1.0), np.float32(1.0))


@numba.njit("void(float32[::1], int64, float32[::1])", cache=CACHE, nogil=True, error_model="numpy",
            fastmath={"contract"})
def _exp_nonpos32(v, n, fbuf):
    """:func:`_exp_nonpos` for float32 values (``fbuf``: float32 scratch):
    ``v[:n] = exp(v[:n])`` in place for ``v <= 0``, within 2 ulp of float32
    (tests); NaN stays NaN, values below -87 give 0."""
    ibuf = fbuf.view(np.int32)
    c7, c6, c5, c4, c3, c2, c1, c0 = _C32
    for j in range(n):
        a = v[j] if v[j] > _EXP_MIN32 else _EXP_MIN32
        fbuf[j] = np.float32(math.floor(a * _LOG2E32 + _HALF32)) + _BIAS32
    for j in range(n):
        ibuf[j] = ibuf[j] << 23  # 2^n as float32 bits (n >= -126)
    for j in range(n):
        vj = v[j]
        a = vj if vj > _EXP_MIN32 else _EXP_MIN32
        nf = np.float32((ibuf[j] >> 23) - 127)
        r = (a - nf * _LN2_HI32) - nf * _LN2_LO32
        p = c6 + r * c7
        p = c5 + r * p
        p = c4 + r * p
        p = c3 + r * p
        p = c2 + r * p
        p = c1 + r * p
        p = c0 + r * p
        e = p * fbuf[j]
        v[j] = e if vj >= _EXP_MIN32 else (_ZERO32 if vj < _EXP_MIN32 else vj)


# Gaussian basis values of many rows at once (LSMI's kernel (11) for one width): in tiles of rows whose values fit
# the scratch, so that scaling, exp and the floor run on data in cache (numpy's float64 exp is a scalar library
# call on AVX2 machines, ~4.7 ns a value; this one ~1.2 ns).
@numba.njit("void(float64[:, ::1], int64[::1], float64, float64, float64, float64[:, ::1], float64[::1])",
            cache=CACHE, nogil=True, error_model="numpy", fastmath={"contract"})
def _gaussian_rows(d2, rows, a, lo, tiny, out, fbuf):
    """``out[i] = exp(max(-a d2[rows[i]], lo))``, values below ``tiny`` set
    to 0, for ``i < rows.size`` (``fbuf``: float64 scratch of at least one
    row, else ValueError; tiles of ``fbuf.size // d2.shape[1]`` rows)."""
    b = d2.shape[1]
    if fbuf.size < b:
        raise ValueError("_gaussian_rows: the scratch must hold at least one row")
    tile = max(fbuf.size // max(b, 1), 1)
    for i0 in range(0, rows.size, tile):
        i1 = min(i0 + tile, rows.size)
        for i in range(i0, i1):
            src = d2[rows[i]]
            o = out[i]
            for j in range(b):
                v = -a * src[j]
                o[j] = v if v > lo else lo
        flat = out[i0:i1].reshape((i1 - i0) * b)
        _exp_nonpos(flat, flat.size, fbuf)
        for j in range(flat.size):
            if flat[j] < tiny:
                flat[j] = 0.0


# LSMI's sums for one width where most basis values are 0 (small widths: a row reaches only the centres near it):
# a row's nonzero values only, their products added into the upper triangle of G (about nnz^2 / 2 products a
# row, against b^2 in the dense product and b exponentials). The values are the dense path's bit for bit (the same
# scaling, clip and exp); only the order of the sums differs.
@numba.njit("void(float64[:, ::1], int64[::1], float64, float64, float64, int64[:, ::1], float64[:, ::1], "
            "float64[:, :, ::1], float64[::1], float64[::1], int64[::1])",
            cache=CACHE, nogil=True, error_model="numpy", fastmath={"contract"})
def _gaussian_sparse_sums(d2, rows, a, lo, tiny, lab, G, S, vals, fbuf, cols):
    """For each ``i`` in ``rows``: the values ``exp(-a d2[i, j])`` above
    ``lo`` in the exponent and at least ``tiny`` (the rest are the dense
    path's zeros), ``G[j, k] += v_j v_k`` for ``j <= k`` (the caller
    mirrors the upper triangle) and ``S[l, lab[l, i], j] += v_j`` for every
    labelling ``l``. ``vals``, ``fbuf``: float64 scratch of ``b`` values,
    ``cols``: int64 scratch of ``b``."""
    b = d2.shape[1]
    n_lab = lab.shape[0]
    for ii in range(rows.size):
        i = rows[ii]
        src = d2[i]
        m = 0
        for j in range(b):
            v = -a * src[j]
            if v > lo:
                vals[m] = v
                cols[m] = j
                m += 1
        if m == 0:
            continue
        _exp_nonpos(vals, m, fbuf)
        kept = 0
        for p in range(m):  # drop the values the dense path floors to 0
            if vals[p] >= tiny:
                vals[kept] = vals[p]
                cols[kept] = cols[p]
                kept += 1
        for p in range(kept):
            vp = vals[p]
            row = G[cols[p]]
            for q in range(p, kept):
                row[cols[q]] += vp * vals[q]
            for q in range(n_lab):
                S[q, lab[q, i], cols[p]] += vp
