"""Lloyd's step with Hamerly's bounds (Hamerly 2010, "Making k-means even
faster", algorithm 2), compiled (numba): each row keeps its centre ``a``, an
upper bound ``u`` on its distance to it and a lower bound ``l`` on its
distance to every other centre. When the centres move by ``p_j``, ``u``
grows by ``p_a`` and ``l`` shrinks by the largest shift; a row whose
``u < max(l, s_a)`` (``s_a`` half the distance from centre ``a`` to its
nearest other centre) cannot have changed centre and is skipped; otherwise
``u`` is tightened to the exact distance and, if still not decisive, every
distance is computed exactly. The labels, counts and sums are those of
plain Lloyd's step at every iteration (exact differences, ties to the lowest
index): a skip needs the bounds to decide with a margin above their
rounding, and a measured distance is :func:`~._lloyd_loops._sq_dist`'s (IEEE
arithmetic in its order), so the labels are those of every other path."""

from __future__ import annotations

import numpy as np

from ._lloyd_loops import _sq_dist
from ._loops import TILE, _strict

#: undecided rows of a tile from which they are measured together (transposed); fewer go one by one
GATHERED = 32


@_strict
def _hamerly_rows(x, w, cm, moved, half_gap, margin, labels, upper, lower, counts, sums, skipped):
    """One Lloyd step over the rows of a block with Hamerly's bounds, in
    place: ``labels`` (``-1``: no bound yet, every distance is computed),
    ``upper``/``lower`` (float64 distances, not squared) are the rows'
    state from the previous step, ``moved[j]`` the distance centre j moved
    since then and ``half_gap[j]`` half the distance from centre j to its
    nearest other centre. Adds the (weighted) counts and float64 sums of the
    new assignment and ``skipped[0]`` += the rows decided by their bounds
    alone. ``margin``: relative slack of the comparisons (a few units of the
    distances' rounding). The rows of a tile that the bounds cannot decide
    are gathered and measured against every centre together (transposed,
    the tile's rows in the SIMD lanes, as :func:`_lloyd_rows`) when there
    are at least :data:`GATHERED` of them, else one by one."""
    n, d = x.shape
    k = cm.shape[0]
    d4 = d - d % 4
    most = 0.0
    for j in range(k):
        most = max(most, moved[j])
    weighted = w.shape[0] > 0
    lo_f = 1.0 - margin
    hi_f = 1.0 + margin
    idx = np.empty(TILE, dtype=np.int64)
    xt = np.empty((d, TILE), dtype=x.dtype)
    acc = np.empty(TILE, dtype=cm.dtype)
    b1 = np.empty(TILE)
    b2 = np.empty(TILE)
    bj = np.empty(TILE, dtype=np.int64)
    for i0 in range(0, n, TILE):
        nt = min(TILE, n - i0)
        m = 0
        for r in range(nt):
            i = i0 + r
            a = labels[i]
            if a < 0:
                idx[m] = i
                m += 1
                continue
            u = upper[i] + moved[a]
            low = lower[i] - most
            z = max(low, half_gap[a])
            lower[i] = low
            if u * hi_f < z * lo_f:
                upper[i] = u
                skipped[0] += 1
                continue
            t = 0.0
            for f in range(d):
                diff = np.float64(x[i, f] - cm[a, f])
                t += diff * diff
            u = np.sqrt(t)
            upper[i] = u
            if not u * hi_f < z * lo_f:
                idx[m] = i
                m += 1
        if m < GATHERED:  # a few rows: each against every centre, the features in the SIMD lanes
            for q in range(m):
                i = idx[q]
                best = 0
                r1 = np.inf
                r2 = np.inf
                for j in range(k):
                    tv = np.float64(_sq_dist(x, i, cm, j))
                    if tv < r1:
                        r2 = r1
                        r1 = tv
                        best = j
                    elif tv < r2:
                        r2 = tv
                labels[i] = best
                upper[i] = np.sqrt(r1)
                lower[i] = np.sqrt(r2)
            m = 0
        for q in range(m):  # every distance of the undecided rows, exactly (ties: the lowest index)
            for f in range(d):
                xt[f, q] = x[idx[q], f]
            b1[q] = np.inf
            b2[q] = np.inf
            bj[q] = 0
        for j in range(k if m > 0 else 0):
            for q in range(m):
                acc[q] = 0
            for f in range(0, d4, 4):  # the order of _sq_dist (and of _lloyd_rows): the same distances
                a0, a1, a2, a3 = cm[j, f], cm[j, f + 1], cm[j, f + 2], cm[j, f + 3]
                for q in range(m):
                    p0, p1, p2, p3 = xt[f, q] - a0, xt[f + 1, q] - a1, xt[f + 2, q] - a2, xt[f + 3, q] - a3
                    acc[q] += (p0 * p0 + p1 * p1) + (p2 * p2 + p3 * p3)
            for f in range(d4, d):
                cf = cm[j, f]
                for q in range(m):
                    diff = xt[f, q] - cf
                    acc[q] += diff * diff
            for q in range(m):
                tv = np.float64(acc[q])
                if tv < b1[q]:
                    b2[q] = b1[q]
                    b1[q] = tv
                    bj[q] = j
                elif tv < b2[q]:
                    b2[q] = tv
        for q in range(m):
            i = idx[q]
            labels[i] = bj[q]
            upper[i] = np.sqrt(b1[q])
            lower[i] = np.sqrt(b2[q])
        for i in range(i0, i0 + nt):  # the tile's rows are still in cache
            a = labels[i]
            wi = w[i] if weighted else 1.0
            counts[a] += wi
            for f in range(d):
                sums[a, f] += wi * np.float64(x[i, f])
