"""Compiled block kernels (numba): one fused loop per row instead of the
numpy kernels' (rows x K) temporaries.

Each loop reads a row once, computes its exact squared distances to the K
centres (differences, not the ``|x|^2 - 2 x.m + |m|^2`` expansion; one SIMD
reduction over the features per centre - Lloyd's assignment instead runs
on transposed tiles of :data:`LLOYD_TILE` rows, one SIMD loop across the
rows per centre and feature: LLVM may reassociate those sums,
"fastmath" without the no-NaN/no-inf assumptions), turns them into what the
pass needs (nearest centre, stable softmax memberships computed for a tile of
:data:`TILE` rows so that their exponentials run as one SIMD loop,
mixture posteriors) and adds the row's share to float64 sums. float32 rows
are read as they are (no float64 copy of the block). Functions run without
the GIL (``nogil``) on one thread each: a dask worker runs as many of them
at once as it has threads, and nothing inside starts threads of its own
(no ``parallel=True``, no BLAS), so two single-threaded workers on two
cores use two cores. Compiled code is cached on disk (numba's
``cache=True``: ``$NUMBA_CACHE_DIR`` when set, else ``__pycache__`` beside
this file, or numba's user cache directory when that is read-only), so a new
process loads it instead of compiling (see ``docs/BENCHMARKS.md`` for the
first-call cost). When none of those folders is writable (a read-only
install run by a user without a writable home, as in some containers) the
kernels are compiled in each process without a cache (:func:`can_cache`)
instead of failing with numba's "no locator available".

The numpy kernels of :mod:`infoclust_dask.kernels` stay as the references
the tests compare these with (to 1e-10). ``INFOCLUST_KERNELS=numpy`` in the
environment makes every pass use the numpy kernels; without numba installed
they are used too.

The formulas are those of the numpy kernels they replace: MacKay (2003,
ch. 20) eq. 20.3-20.9 for (soft) K-means, Kaski, Sinkkonen & Klami (2005)
eq. (4), (10), (11) for DC, Sinkkonen, Kaski, Nikkilä & Lahti (AC technical
report, §III) for AC, the isotropic mixture E-step, and the annealed E-step
(4.15) of CMBC with its M-step sums (Gondek, Vaithyanathan & Garg 2005) on
dense binary rows.
"""

from __future__ import annotations

import math
import os

import numpy as np

__all__ = ["available", "as_rows", "lloyd", "soft_kmeans", "dc_counts", "dc_grad", "ac_counts", "ac_grad",
           "mixture_em", "cmbc_estep"]

from ._cache import can_cache  # noqa: E402 - where numba may keep the compiled code

#: numba's on-disk cache is used when some folder can hold it (:func:`can_cache`)
CACHE = can_cache()

try:  # numba is a dependency; the numpy kernels remain when it cannot be imported
    import numba

    #: LLVM may reassociate sums (so the reductions over features become SIMD
    #: code), contract multiply-adds into FMAs, take reciprocals and ignore the
    #: sign of zero; it may NOT assume finite values ("nnan"/"ninf" stay off:
    #: exp(-inf) = 0 and infinite distances keep their meaning).
    FASTMATH = frozenset({"reassoc", "contract", "arcp", "nsz"})
    _jit = numba.njit(cache=CACHE, nogil=True, error_model="numpy", fastmath=set(FASTMATH))
except ImportError:  # pragma: no cover - exercised by INFOCLUST_KERNELS=numpy instead
    numba = None  # type: ignore[assignment]


def available() -> bool:
    """Whether the passes use these kernels (numba importable and not
    switched off by ``INFOCLUST_KERNELS=numpy``)."""
    return numba is not None and os.environ.get("INFOCLUST_KERNELS", "").lower() != "numpy"


def as_rows(x):
    """A block as the kernels take it: float32 or float64, C-contiguous,
    2-D (other dtypes become float64; no copy when already right)."""
    x = np.asarray(x)
    if x.dtype not in (np.float32, np.float64):
        x = x.astype(np.float64)
    if x.ndim == 1:
        x = x[:, None]
    return np.ascontiguousarray(x)


def _labels(c):
    """Class labels as int64 (one compiled specialization for every label dtype)."""
    return np.ascontiguousarray(np.asarray(c).astype(np.int64, copy=False))


def _centres(centers, x=None, what="centers"):
    """Centres as C-contiguous float64 (K, d): a centre's features are
    adjacent, so the innermost loop (over features) is one SIMD reduction.
    With the rows ``x``: ``d`` must be their width (the compiled loops do
    not check bounds: centres wider than the rows would read past each row)."""
    c = np.ascontiguousarray(centers, dtype=np.float64)
    if c.ndim != 2 or (x is not None and c.shape[1] != x.shape[1]):
        raise ValueError(f"{what} of shape {c.shape} do not fit rows of {x.shape[1] if x is not None else '?'} "
                         "features (a damaged or foreign model?).")
    return c


def _checked_labels(c, n, n_classes=None, what="labels"):
    """Labels as int64, one per row, in ``0 .. n_classes - 1`` (the compiled
    loops index count tables with them, unchecked)."""
    lab = _labels(c)
    if lab.shape != (n,):
        raise ValueError(f"{what} of shape {lab.shape} for {n} rows.")
    if n_classes is not None and lab.size and (lab.min() < 0 or lab.max() >= n_classes):
        raise ValueError(f"{what} outside 0..{n_classes - 1} (got {lab.min()}..{lab.max()}).")
    return lab


def _shaped(a, shape, what):
    out = np.ascontiguousarray(a, dtype=np.float64)
    if out.shape != tuple(shape):
        raise ValueError(f"{what} of shape {out.shape}; the kernel needs {tuple(shape)}.")
    return out


#: rows per tile: memberships are computed for a tile of rows at once so that
#: the exponentials (TILE x K of them) run as one SIMD loop
TILE = 64
#: rows per tile of Lloyd's assignment (transposed: each centre's distances are one SIMD loop over them)
LLOYD_TILE = 128

# exp by Cody-Waite range reduction: x = n ln2 + r, |r| <= ln2 / 2, exp(r) by
# its Taylor polynomial to degree 13 (truncation < 4e-18), 2^n assembled from
# its exponent bits (n + 1023 sits in the low mantissa bits of 2^52 + n + 1023,
# shifted into place as an integer). Accurate to 1 ulp against numpy (tests).
_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_BIAS = 4503599627371519.0  # 2**52 + 1023
_EXP_MIN = -708.0  # below it exp(x) < 3.3e-308: taken as 0 (denormal results are not formed)

if numba is not None:
    # Compiled eagerly (explicit signature), without fastmath, before any
    # caller: numba compiles a callee with the flags of the first caller that
    # needs it (numba issue #7168), and the fastmath kernels below would
    # otherwise be that caller (LLVM could then fold the range reduction).
    # floor() keeps the rounding step exact even under reassociation.
    _jit_exact = numba.njit("void(float64[::1], int64, float64[::1])", cache=CACHE, nogil=True,
                            error_model="numpy")

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
            nf = math.floor(a * _LOG2E + 0.5)
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

    @_jit
    def _dist_row(x, i, cm, acc, r):
        """``acc[r, j] = ||x_i - m_j||^2`` (differences), one SIMD reduction
        over the features per centre, in the precision of the centres
        ``cm``: float64 centres (every kernel but Lloyd's) promote float32
        rows to float64; float32 centres with float32 rows (Lloyd's hard
        assignment) compute in float32, as scikit-learn does for float32
        data, twice as many features per SIMD instruction."""
        k, d = cm.shape
        for j in range(k):
            s = cm[j, 0] - cm[j, 0]  # a zero of the centres' type
            for f in range(d):
                diff = x[i, f] - cm[j, f]
                s += diff * diff
            acc[r, j] = s

    @_jit
    def _softmax_tile(z, nt, scale, out, logz, fbuf, with_logz):
        """``out[r] = softmax(scale * z[r])`` for the first ``nt`` rows of the
        tile (stable: the row maximum is subtracted); with ``with_logz``,
        ``logz[r] = log sum_j exp(scale * z[r, j])``. ``out`` may be ``z``."""
        k = z.shape[1]
        for r in range(nt):
            m = scale * z[r, 0]
            for j in range(1, k):
                e = scale * z[r, j]
                if e > m:
                    m = e
            for j in range(k):
                out[r, j] = scale * z[r, j] - m
            logz[r] = m
        _exp_nonpos(out.reshape(out.size), nt * k, fbuf)
        for r in range(nt):
            s = 0.0
            for j in range(k):
                s += out[r, j]
            inv = 1.0 / s
            for j in range(k):
                out[r, j] *= inv
            if with_logz:
                logz[r] += math.log(s)

    @_jit
    def _tile_buffers(k):
        """Scratch of one tile: scores, memberships (TILE x k), log normalizers, exp scratch."""
        return np.empty((TILE, k)), np.empty((TILE, k)), np.empty(TILE), np.empty(TILE * k)

    @_jit
    def _memberships_tile(x, i0, nt, cm, scale, acc, out, logz, fbuf, with_logz):
        """Softmax memberships ``softmax(scale ||x_i - m_j||^2)`` of rows
        ``i0 .. i0 + nt - 1`` into ``out[:nt]`` (their log normalizers into
        ``logz`` with ``with_logz``)."""
        for r in range(nt):
            _dist_row(x, i0 + r, cm, acc, r)
        _softmax_tile(acc, nt, scale, out, logz, fbuf, with_logz)

    @_jit
    def _lloyd_rows(x, w, cm, counts, sums, labels, dmin, with_sums):
        """Nearest centre of each row, a tile of :data:`LLOYD_TILE` rows at a
        time: the tile is transposed (features x rows) so that each centre's
        squared differences accumulate over the features as one SIMD loop
        across the tile's rows (no reduction across SIMD lanes, no
        (rows x K) table); the running minimum is kept per row. In the
        precision of ``cm`` (float32 rows with float32 centres compute in
        float32; the counts and sums are float64)."""
        n, d = x.shape
        k = cm.shape[0]
        xt = np.empty((d, LLOYD_TILE), dtype=cm.dtype)
        acc = np.empty(LLOYD_TILE, dtype=cm.dtype)
        bd = np.empty(LLOYD_TILE, dtype=cm.dtype)
        bj = np.empty(LLOYD_TILE, dtype=np.int64)
        weighted = w.shape[0] > 0
        for i0 in range(0, n, LLOYD_TILE):
            nt = min(LLOYD_TILE, n - i0)
            for r in range(nt):
                for f in range(d):
                    xt[f, r] = x[i0 + r, f]
            for j in range(k):
                for r in range(nt):
                    acc[r] = 0
                for f in range(d):
                    cf = cm[j, f]
                    for r in range(nt):
                        diff = xt[f, r] - cf
                        acc[r] += diff * diff
                if j == 0:
                    for r in range(nt):
                        bd[r] = acc[r]
                        bj[r] = 0
                else:
                    for r in range(nt):
                        if acc[r] < bd[r]:  # strict: ties keep the lowest index
                            bd[r] = acc[r]
                            bj[r] = j
            for r in range(nt):
                i = i0 + r
                best = bj[r]
                labels[i] = best
                dmin[i] = bd[r]
                wi = w[i] if weighted else 1.0
                counts[best] += wi
                if with_sums:
                    for f in range(d):
                        sums[best, f] += wi * np.float64(x[i, f])

    @_jit
    def _soft_rows(x, w, cm, scale, R, S, out_logz):
        n, d = x.shape
        k = cm.shape[0]
        acc, g, lz, fbuf = _tile_buffers(k)
        weighted = w.shape[0] > 0
        total = 0.0
        for i0 in range(0, n, TILE):
            nt = min(TILE, n - i0)
            _memberships_tile(x, i0, nt, cm, scale, acc, g, lz, fbuf, True)
            for r in range(nt):
                i = i0 + r
                wi = w[i] if weighted else 1.0
                total += wi * lz[r]
                for j in range(k):
                    rj = wi * g[r, j]
                    R[j] += rj
                    for f in range(d):
                        S[j, f] += rj * np.float64(x[i, f])
        out_logz[0] = total

    @_jit
    def _dc_count_rows(x, c, cm, scale, counts):
        n = x.shape[0]
        k = cm.shape[0]
        acc, y, lz, fbuf = _tile_buffers(k)
        for i0 in range(0, n, TILE):
            nt = min(TILE, n - i0)
            _memberships_tile(x, i0, nt, cm, scale, acc, y, lz, fbuf, False)
            for r in range(nt):
                ci = c[i0 + r]
                for j in range(k):
                    counts[j, ci] += y[r, j]

    @_jit
    def _add_centred(g, r, a, x, i, WX, Ws):
        """One row's share of a gradient of DC (11) / AC: ``w_j = g_rj (a_j -
        sum_l g_rl a_l)``, ``Ws += w``, ``WX += w x_i``."""
        k = g.shape[1]
        d = x.shape[1]
        mean = 0.0
        for j in range(k):
            mean += g[r, j] * a[j]
        for j in range(k):
            wj = g[r, j] * (a[j] - mean)
            Ws[j] += wj
            for f in range(d):
                WX[j, f] += wj * np.float64(x[i, f])

    @_jit
    def _dc_grad_rows(x, c, cm, scale, L, WX, Ws):
        n = x.shape[0]
        k = cm.shape[0]
        acc, y, lz, fbuf = _tile_buffers(k)
        a = np.empty(k)
        for i0 in range(0, n, TILE):
            nt = min(TILE, n - i0)
            _memberships_tile(x, i0, nt, cm, scale, acc, y, lz, fbuf, False)
            for r in range(nt):
                ci = c[i0 + r]
                for j in range(k):
                    a[j] = L[j, ci]
                _add_centred(y, r, a, x, i0 + r, WX, Ws)

    @_jit
    def _ac_count_rows(x, y, cmx, cmy, sx, sy, counts):
        n = x.shape[0]
        k, l_ = cmx.shape[0], cmy.shape[0]
        ax, gx, lz, fbuf = _tile_buffers(k)
        ay, gy, _, fbuf_y = _tile_buffers(l_)
        for i0 in range(0, n, TILE):
            nt = min(TILE, n - i0)
            _memberships_tile(x, i0, nt, cmx, sx, ax, gx, lz, fbuf, False)
            _memberships_tile(y, i0, nt, cmy, sy, ay, gy, lz, fbuf_y, False)
            for r in range(nt):
                for i in range(k):
                    gi = gx[r, i]
                    for j in range(l_):
                        counts[i, j] += gi * gy[r, j]

    @_jit
    def _ac_grad_rows(x, y, cmx, cmy, sx, sy, psi, cx, cy, WX, Wx, WY, Wy):
        n = x.shape[0]
        k, l_ = cmx.shape[0], cmy.shape[0]
        ax, gx, lz, fbuf = _tile_buffers(k)
        ay, gy, _, fbuf_y = _tile_buffers(l_)
        a, b = np.empty(k), np.empty(l_)
        for i0 in range(0, n, TILE):
            nt = min(TILE, n - i0)
            _memberships_tile(x, i0, nt, cmx, sx, ax, gx, lz, fbuf, False)
            _memberships_tile(y, i0, nt, cmy, sy, ay, gy, lz, fbuf_y, False)
            for r in range(nt):
                for i in range(k):
                    s = 0.0
                    for j in range(l_):
                        s += psi[i, j] * gy[r, j]
                    a[i] = s - cx[i]
                for j in range(l_):
                    b[j] = -cy[j]
                for i in range(k):
                    gi = gx[r, i]
                    for j in range(l_):
                        b[j] += gi * psi[i, j]
                _add_centred(gx, r, a, x, i0 + r, WX, Wx)
                _add_centred(gy, r, b, y, i0 + r, WY, Wy)

    @_jit
    def _mixture_rows(x, c, cm, const, inv2v, log_psi, R, S, Q, N, out_ll):
        n, d = x.shape
        k = cm.shape[0]
        acc, g, lz, fbuf = _tile_buffers(k)
        with_c = c.shape[0] > 0
        with_psi = log_psi.shape[0] > 0
        ll = 0.0
        for i0 in range(0, n, TILE):
            nt = min(TILE, n - i0)
            for r in range(nt):
                i = i0 + r
                _dist_row(x, i, cm, acc, r)
                ci = c[i] if with_c else 0
                for j in range(k):
                    acc[r, j] = const[j] - acc[r, j] * inv2v[j]
                    if with_psi:
                        acc[r, j] += log_psi[j, ci]
            _softmax_tile(acc, nt, 1.0, g, lz, fbuf, True)
            for r in range(nt):
                i = i0 + r
                ll += lz[r]
                sq = 0.0
                for f in range(d):
                    xf = np.float64(x[i, f])
                    sq += xf * xf
                ci = c[i] if with_c else 0
                for j in range(k):
                    rj = g[r, j]
                    R[j] += rj
                    Q[j] += rj * sq
                    if with_c:
                        N[j, ci] += rj
                    for f in range(d):
                        S[j, f] += rj * np.float64(x[i, f])
        out_ll[0] = ll

    @_jit
    def _cmbc_rows(y, W, b, inv_t, S1, R, out):
        n, m = y.shape
        k = W.shape[1]
        ll = np.empty((TILE, k))
        p = np.empty((TILE, k))
        q = np.empty((TILE, k))
        lz, lz2, fbuf = np.empty(TILE), np.empty(TILE), np.empty(TILE * k)
        loglik = 0.0
        hard = 0.0
        for i0 in range(0, n, TILE):
            nt = min(TILE, n - i0)
            for r in range(nt):
                i = i0 + r
                for c in range(k):
                    ll[r, c] = b[c]
                for j in range(m):
                    v = np.float64(y[i, j])
                    if v != 0.0:
                        for c in range(k):
                            ll[r, c] += v * W[j, c]
            _softmax_tile(ll, nt, 1.0, p, lz, fbuf, True)
            _softmax_tile(ll, nt, inv_t, q, lz2, fbuf, False)
            for r in range(nt):
                i = i0 + r
                loglik += lz[r]
                top = q[r, 0]
                for c in range(k):
                    R[c] += q[r, c]
                    if q[r, c] > top:
                        top = q[r, c]
                hard += top
                for j in range(m):
                    v = np.float64(y[i, j])
                    if v != 0.0:
                        for c in range(k):
                            S1[j, c] += v * q[r, c]
        out[0] = loglik
        out[1] = hard


_EMPTY = np.zeros(0)
_EMPTY_INT = np.zeros(0, dtype=np.int64)
_EMPTY_2D = np.zeros((0, 0))


def _weights(w, n):
    return _EMPTY if w is None else _shaped(np.asarray(w).reshape(-1), (n,), "sample weights")


def lloyd(x, w=None, *, centers, with_sums=True):
    """Nearest centre of every row (ties: the lowest index), the exact
    squared distance to it, and the (weighted) counts and sums per centre of
    the Lloyd update (MacKay 2003, eq. 20.3-20.6). Returns
    ``(labels int64, dmin, counts, sums)``. float32 rows are compared with
    the centres in float32 (the distances carry float32's ~1e-7 relative
    error); the sums are float64."""
    x = as_rows(x)
    n = x.shape[0]
    c = _centres(centers, x)
    k, d = c.shape
    labels, dmin = np.empty(n, dtype=np.int64), np.empty(n)
    counts, sums = np.zeros(k), np.zeros((k, d) if with_sums else (0, 0))
    # float32 rows: distances in float32 (the assignment), counts and sums in float64
    _lloyd_rows(x, _weights(w, n), c.astype(x.dtype, copy=False), counts, sums, labels, dmin, with_sums)
    return labels, dmin, counts, sums


def soft_kmeans(x, w=None, *, centers, beta):
    """``R``, ``S`` and ``sum w log Z`` of one soft K-means step (MacKay 2003,
    eq. 20.7-20.9, ``d = ||x - m||^2 / 2``)."""
    x = as_rows(x)
    c = _centres(centers, x)
    k, d = c.shape
    R, S, lz = np.zeros(k), np.zeros((k, d)), np.zeros(1)
    _soft_rows(x, _weights(w, x.shape[0]), c, -0.5 * float(beta), R, S, lz)
    return {"R": R, "S": S, "log_z": np.array(lz[0])}


def dc_counts(x, c, *, centers, sigma, n_classes):
    """Smoothed counts (10) of DC, Kaski et al. (2005): ``n[j, i] = sum over
    rows of class i of y_j(x)`` with the memberships (4)."""
    x = as_rows(x)
    m = _centres(centers, x)
    counts = np.zeros((m.shape[0], int(n_classes)))
    _dc_count_rows(x, _checked_labels(c, x.shape[0], int(n_classes)), m, -0.5 / float(sigma) ** 2, counts)
    return {"counts": counts}


def dc_grad(x, c, *, centers, sigma, L):
    """Gradient sums (11) of DC: ``WX = W^T X`` and ``W = sum_x W(x)`` with
    ``W_j(x) = y_j(x) [L_{j,c(x)} - sum_l y_l(x) L_{l,c(x)}]``."""
    x = as_rows(x)
    m = _centres(centers, x)
    k, d = m.shape
    L = np.ascontiguousarray(L, dtype=np.float64)
    if L.ndim != 2 or L.shape[0] != k:
        raise ValueError(f"L of shape {L.shape} for {k} prototypes.")
    WX, Ws = np.zeros((k, d)), np.zeros(k)
    _dc_grad_rows(x, _checked_labels(c, x.shape[0], L.shape[1]), m, -0.5 / float(sigma) ** 2, L, WX, Ws)
    return {"WX": WX, "W": Ws}


def _paired(x, y):
    x, y = as_rows(x), as_rows(y)
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"{x.shape[0]} x rows but {y.shape[0]} y rows: the views must be paired.")
    return x, y


def ac_counts(x, y, *, mx, my, sx, sy):
    """Smoothed cross counts ``n_ij = sum_r g_i(x_r) g_j(y_r)`` of AC."""
    x, y = _paired(x, y)
    mx, my = _centres(mx, x, "x prototypes"), _centres(my, y, "y prototypes")
    counts = np.zeros((mx.shape[0], my.shape[0]))
    _ac_count_rows(x, y, mx, my, -0.5 / float(sx) ** 2, -0.5 / float(sy) ** 2, counts)
    return {"counts": counts}


def ac_grad(x, y, *, mx, my, sx, sy, psi, psi_x, psi_y, lam_x, lam_y):
    """Gradient sums of log BF'' of AC (see :func:`infoclust_dask.kernels.ac.ac_grad_stats`)."""
    x, y = _paired(x, y)
    mx, my = _centres(mx, x, "x prototypes"), _centres(my, y, "y prototypes")
    (k, dx), (l_, dy) = mx.shape, my.shape
    out = {"WX": np.zeros((k, dx)), "Wx": np.zeros(k), "WY": np.zeros((l_, dy)), "Wy": np.zeros(l_)}
    _ac_grad_rows(x, y, mx, my, -0.5 / float(sx) ** 2, -0.5 / float(sy) ** 2, _shaped(psi, (k, l_), "psi"),
                  float(lam_x) * _shaped(psi_x, (k,), "psi_x"), float(lam_y) * _shaped(psi_y, (l_,), "psi_y"),
                  out["WX"], out["Wx"], out["WY"], out["Wy"])
    return out


def mixture_em(x, c=None, *, means, variances, log_weights, log_psi=None, n_classes=0):
    """E-step responsibilities of an isotropic Gaussian mixture (optionally
    times ``psi_{j, c}``) and the M-step sums ``R``, ``S``, ``Q``, the log
    likelihood and, with classes, ``N`` (see
    :func:`infoclust_dask.kernels.mixture.mixture_em_stats`)."""
    x = as_rows(x)
    mu = _centres(means, x, "means")
    k, d = mu.shape
    v = _shaped(variances, (k,), "variances")
    const = _shaped(log_weights, (k,), "log weights") - 0.5 * d * np.log(2 * np.pi * v)
    R, S, Q, ll = np.zeros(k), np.zeros((k, d)), np.zeros(k), np.zeros(1)
    with_c = c is not None
    N = np.zeros((k, int(n_classes))) if with_c else _EMPTY_2D
    lp = _shaped(log_psi, (k, int(n_classes)), "log_psi") if (with_c and log_psi is not None) else _EMPTY_2D
    labels = _checked_labels(c, x.shape[0], int(n_classes)) if with_c else _EMPTY_INT
    _mixture_rows(x, labels, mu, const, 1.0 / (2.0 * v), lp, R, S, Q, N, ll)
    out = {"R": R, "S": S, "Q": Q, "loglik": np.array(ll[0])}
    if with_c:
        out["N"] = N
    return out


def cmbc_estep(y, *, log_theta, log_1m_theta, temperature):
    """The annealed E-step (4.15) of CMBC on dense rows ``y`` (bool, any
    integer or float type, read as they are) and its M-step sums (see
    :func:`infoclust_dask.kernels.cmbc.estep_stats`): per row the
    log-likelihoods (A.2) over the nonzero features only."""
    y = np.asarray(y)
    if y.dtype == np.bool_:
        y = y.view(np.uint8)
    y = np.ascontiguousarray(y)
    lt = np.asarray(log_theta, dtype=np.float64)
    l1 = np.asarray(log_1m_theta, dtype=np.float64)
    m, k = lt.shape
    if y.ndim != 2 or y.shape[1] != m or l1.shape != (m, k):
        raise ValueError(f"rows of shape {y.shape} and parameters of shapes {lt.shape}, {l1.shape} do not fit "
                         "(a damaged or foreign model?).")
    S1, R, out = np.zeros((m, k)), np.zeros(k), np.zeros(2)
    _cmbc_rows(y, np.ascontiguousarray(lt - l1), l1.sum(axis=0), 1.0 / float(temperature), S1, R, out)
    return {"S1": S1, "R": R, "loglik": np.array(out[0]), "hard": np.array(out[1])}
