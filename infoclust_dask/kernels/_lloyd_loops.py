"""Lloyd's assignment as compiled row loops (numba), on the transposed
tiles of :mod:`infoclust_dask.kernels._loops`: the nearest centre of each
row by the exact differences (:func:`_lloyd_rows`), or, for many centres,
by BLAS products of a tile with the centres with near ties settled by the
exact differences (:func:`_lloyd_rows_gemm`; the same labels). Both sum
the counts, sums and inertia of a Lloyd step in float64 (Lloyd 1982;
MacKay 2003, algorithm 20.2)."""

from __future__ import annotations

import numpy as np

from ._loops import TILE, _jit, _strict


@_strict
def _lloyd_rows(x, w, cm, counts, sums, labels, dmin, inertia, with_sums):
    """Nearest centre of each row (ties: the lowest index), the squared
    distance to it, and the (weighted) float64 counts, sums and inertia
    (``inertia[0]``). Empty ``labels`` / ``dmin``: the rows' labels and
    distances are not written (a Lloyd step needs only the sums)."""
    n, d = x.shape
    k = cm.shape[0]
    d4 = d - d % 4
    xt = np.empty((d, TILE), dtype=x.dtype)
    acc = np.empty(TILE, dtype=cm.dtype)
    acc2 = np.empty(TILE, dtype=cm.dtype)
    bd = np.empty(TILE, dtype=cm.dtype)
    bj = np.empty(TILE, dtype=np.int64)
    weighted = w.shape[0] > 0
    store = labels.shape[0] > 0
    for i0 in range(0, n, TILE):
        nt = min(TILE, n - i0)
        for r in range(nt):
            for f in range(d):
                xt[f, r] = x[i0 + r, f]
        for j in range(0, k, 2):  # two centres per sweep (one load of the tile's features for both)
            two = j + 1 < k
            for r in range(nt):
                acc[r] = 0
                acc2[r] = 0
            for f in range(0, d4, 4):  # four features per sweep, in _sq_dist's order (the same bits)
                a0, a1, a2, a3 = cm[j, f], cm[j, f + 1], cm[j, f + 2], cm[j, f + 3]
                jb = j + 1 if two else j
                b0, b1, b2, b3 = cm[jb, f], cm[jb, f + 1], cm[jb, f + 2], cm[jb, f + 3]
                for r in range(nt):
                    x0, x1, x2, x3 = xt[f, r], xt[f + 1, r], xt[f + 2, r], xt[f + 3, r]
                    p0, p1, p2, p3 = x0 - a0, x1 - a1, x2 - a2, x3 - a3
                    q0, q1, q2, q3 = x0 - b0, x1 - b1, x2 - b2, x3 - b3
                    acc[r] += (p0 * p0 + p1 * p1) + (p2 * p2 + p3 * p3)
                    acc2[r] += (q0 * q0 + q1 * q1) + (q2 * q2 + q3 * q3)
            for f in range(d4, d):
                cf = cm[j, f]
                cg = cm[j + 1 if two else j, f]
                for r in range(nt):
                    diff = xt[f, r] - cf
                    acc[r] += diff * diff
                    diff2 = xt[f, r] - cg
                    acc2[r] += diff2 * diff2
            if j == 0:
                for r in range(nt):
                    bd[r] = acc[r]
                    bj[r] = 0
            else:
                for r in range(nt):
                    if acc[r] < bd[r]:  # strict: ties keep the lowest index
                        bd[r] = acc[r]
                        bj[r] = j
            if two:
                for r in range(nt):
                    if acc2[r] < bd[r]:
                        bd[r] = acc2[r]
                        bj[r] = j + 1
        for r in range(nt):
            i = i0 + r
            best = bj[r]
            if store:
                labels[i] = best
                dmin[i] = bd[r]
            wi = w[i] if weighted else 1.0
            counts[best] += wi
            inertia[0] += wi * np.float64(bd[r])
            if with_sums:
                for f in range(d):
                    sums[best, f] += wi * np.float64(x[i, f])

@_strict
def _sq_dist(x, i, cm, j):
    """``|x_i - m_j|^2`` by the exact differences in the centres' type, with
    IEEE arithmetic as written (no reassociation, no FMA) and in exactly the
    order of :func:`_lloyd_rows`' tile loop (four features a sweep:
    ``t += (p0 p0 + p1 p1) + (p2 p2 + p3 p3)``, then the rest one by one):
    THE squared distance of Lloyd's step. Every path - the exact loops, the
    products' near ties and chosen centres, Hamerly's and Yinyang's bounds,
    their final inertia - computes it so, and so gives the same labels,
    centres and inertia, bit for bit."""
    d = x.shape[1]
    d4 = d - d % 4
    t = cm[j, 0] - cm[j, 0]  # a zero of the centres' type
    for f in range(0, d4, 4):
        p0, p1 = x[i, f] - cm[j, f], x[i, f + 1] - cm[j, f + 1]
        p2, p3 = x[i, f + 2] - cm[j, f + 2], x[i, f + 3] - cm[j, f + 3]
        t += (p0 * p0 + p1 * p1) + (p2 * p2 + p3 * p3)
    for f in range(d4, d):
        diff = x[i, f] - cm[j, f]
        t += diff * diff
    return t


@_jit
def _shifted_centres(cm, shift):
    """``(cs, half_norms, largest norm)``: the centres less ``shift`` (their
    type), half their squared norms and the largest squared norm (float64)."""
    k, d = cm.shape
    cs = np.empty((k, d), dtype=cm.dtype)
    hn = np.empty(k)
    cmax = 0.0
    for j in range(k):
        t = 0.0
        for f in range(d):
            cs[j, f] = cm[j, f] - shift[f]
            t += np.float64(cs[j, f]) * np.float64(cs[j, f])
        hn[j] = 0.5 * t
        cmax = max(cmax, t)
    return cs, hn, cmax


@_jit
def _shifted_tile(x, i0, nt, shift, xt, xn):
    """The tile's rows less ``shift``, transposed into ``xt`` (zeros past
    ``nt``), and their squared norms in ``xn`` (float64)."""
    d = x.shape[1]
    for r in range(nt):
        t = 0.0
        for f in range(d):
            v = x[i0 + r, f] - shift[f]
            xt[f, r] = v
            t += np.float64(v) * np.float64(v)
        xn[r] = t
    for f in range(d):
        for r in range(nt, xt.shape[1]):
            xt[f, r] = 0


@_strict
def _lloyd_rows_gemm(x, w, cm, shift, eps, counts, sums, labels, dmin, inertia, with_sums):
    """:func:`_gemm_rows` without group bounds (a plain Lloyd step)."""
    _gemm_rows(x, w, cm, shift, eps, counts, sums, labels, dmin, inertia, with_sums, np.empty(0, dtype=np.int64),
               np.empty((0, 0)))


@_strict
def _gemm_rows(x, w, cm, shift, eps, counts, sums, labels, dmin, inertia, with_sums, group_of, lower):
    """:func:`_lloyd_rows` for many centres: the tile's products with the
    centres by one matrix product (BLAS, through ``np.dot``), both shifted
    by ``shift`` (the centres' mean), and each row's nearest centre by
    ``|m_j - s|^2 / 2 - (x - s).(m_j - s)`` - the expansion of the squared
    distance scikit-learn uses. A row whose runner-up is within the
    expansion's rounding bound of its best (``eps`` = unit round-off of the
    centres' type) is decided again by the exact differences (:func:`_sq_dist`)
    among the centres within that bound, so the labels are those of
    :func:`_lloyd_rows` (ties: the lowest index); the distance to the chosen
    centre is always :func:`_sq_dist`'s: the same bits as the loops.

    With ``group_of`` (centre -> group, k) and ``lower`` (n, groups) also
    Yinyang's first group bounds from the same products (Ding et al. 2015,
    §3): per row and group, a lower bound on the distance to the group's
    centres other than the row's own (the expansion less twice its rounding
    bound), so that setting the bounds up costs no second product."""
    n, d = x.shape
    k = cm.shape[0]
    cs, hn64, cmax = _shifted_centres(cm, shift)
    hn = hn64.astype(cm.dtype)
    bound = 4.0 * (d + 4) * eps  # x (|x - s|^2 + max_j |m_j - s|^2): the expansion's rounding, generously
    xt = np.zeros((d, TILE), dtype=cm.dtype)
    xn = np.empty(TILE)
    bd = np.empty(TILE, dtype=cm.dtype)
    sb = np.empty(TILE, dtype=cm.dtype)
    bj = np.empty(TILE, dtype=np.int64)
    g = np.empty((k, TILE), dtype=cm.dtype)  # one buffer for every tile's products (no allocation per tile)
    n_groups = lower.shape[1]
    low = np.empty((n_groups, TILE))
    weighted = w.shape[0] > 0
    store = labels.shape[0] > 0
    for i0 in range(0, n, TILE):
        nt = min(TILE, n - i0)
        _shifted_tile(x, i0, nt, shift, xt, xn)
        np.dot(cs, xt, g)  # (k, TILE)
        h = hn[0]
        for r in range(TILE):
            bd[r] = h - g[0, r]
            sb[r] = np.inf
            bj[r] = 0
        for j in range(1, k):
            h = hn[j]
            for r in range(TILE):
                v = h - g[j, r]
                if v < bd[r]:
                    sb[r] = bd[r]
                    bd[r] = v
                    bj[r] = j
                elif v < sb[r]:
                    sb[r] = v
        for r in range(nt):
            i = i0 + r
            best = bj[r]
            slack = bound * (xn[r] + cmax)
            if np.float64(sb[r]) - np.float64(bd[r]) <= slack:  # too close to call: exactly, among the near ones
                # a centre whose expansion exceeds the least by more than the slack is certainly farther (and
                # not tied): only the others are measured, in index order (ties: the lowest index)
                near = np.float64(bd[r]) + slack
                t_best = np.inf
                for j in range(k):
                    if np.float64(hn[j] - g[j, r]) <= near:
                        t = _sq_dist(x, i, cm, j)
                        if t < t_best:
                            t_best = t
                            best = j
            t = _sq_dist(x, i, cm, best)
            if store:
                labels[i] = best
                dmin[i] = t
            wi = w[i] if weighted else 1.0
            counts[best] += wi
            inertia[0] += wi * np.float64(t)
            if with_sums:
                for f in range(d):
                    sums[best, f] += wi * np.float64(x[i, f])
            bj[r] = best
        if n_groups > 0:  # the group bounds from the same products: a lower bound per group, less the rounding
            low[:, :] = np.inf
            for j in range(k):
                hj = hn64[j]
                gg = group_of[j]
                for r in range(nt):
                    v = hj - np.float64(g[j, r])
                    if v < low[gg, r] and bj[r] != j:
                        low[gg, r] = v
            for r in range(nt):
                slack2 = 2.0 * bound * (xn[r] + cmax)
                for gg in range(n_groups):
                    sq = 2.0 * low[gg, r] + xn[r] - slack2  # |x - m|^2 = 2 (|m - s|^2 / 2 - (x - s).(m - s)) + |x - s|^2
                    lower[i0 + r, gg] = np.sqrt(sq) if sq > 0.0 else 0.0
