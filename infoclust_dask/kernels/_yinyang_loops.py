"""Lloyd's step with Yinyang's grouped bounds (Ding, Zhao, Shen, Musuvathi &
Mytkowicz 2015, "Yinyang K-means", §3), compiled (numba), for many centres:
the centres are split into groups; each row keeps its centre ``a``, an
upper bound ``u`` on its distance to it and, per group, a lower bound on
its distance to every centre of the group other than ``a``. When the
centres move by ``p_j``, ``u`` grows by ``p_a`` and each group's bound
shrinks by the largest shift in the group. A row whose ``u`` is below every
group's bound cannot have changed centre and is skipped (the global
filter); otherwise ``u`` is tightened to the exact distance and only the
groups whose bound is not above it are measured (the group filter). The
labels, counts and sums are those of plain Lloyd's step at every iteration
(exact differences, ties to the lowest index): a skip needs the bounds to
decide with a margin above their rounding."""

from __future__ import annotations

import numpy as np

from ._lloyd_loops import _sq_dist
from ._loops import _strict


@_strict  # IEEE as written: its sums add w x as the plain step does (an FMA would round them otherwise)
def _yinyang_rows(x, w, cm, moved, order, start, group_of, group_moved, margin, labels, upper, lower, counts, sums,
                  skipped, measured):
    """One Lloyd step over the rows of a block with Yinyang's bounds, in
    place: ``labels`` (``-1``: no bound yet, every distance is computed),
    ``upper`` (n,) and ``lower`` (n, groups) float64 distances (not
    squared) are the rows' state from the previous step; ``moved[j]`` the
    distance centre j moved since then, ``group_moved[g]`` the largest of
    its group's; group g's centres are ``order[start[g]:start[g + 1]]``,
    ``group_of[j]`` centre j's group. Adds the (weighted) counts and float64
    sums of the new assignment, ``skipped[0]`` += the rows decided by their
    bounds alone and ``measured[0]`` += the distances computed."""
    n, d = x.shape
    n_groups = start.shape[0] - 1
    weighted = w.shape[0] > 0
    lo_f = 1.0 - margin
    hi_f = 1.0 + margin
    g1 = np.empty(n_groups)
    g2 = np.empty(n_groups)
    gj = np.empty(n_groups, dtype=np.int64)
    seen = np.empty(n_groups, dtype=np.bool_)
    for i in range(n):
        a = labels[i]
        u = np.inf
        ta = np.inf
        bt = np.inf
        best = -1
        if a >= 0:
            u = upper[i] + moved[a]
            low = np.inf
            for g in range(n_groups):
                v = lower[i, g] - group_moved[g]
                lower[i, g] = v
                low = min(low, v)
            decided = u * hi_f < low * lo_f
            if decided:  # the global filter: no distance at all
                upper[i] = u
                skipped[0] += 1
            else:  # tightened to the exact distance
                ta = np.float64(_sq_dist(x, i, cm, a))
                measured[0] += 1
                u = np.sqrt(ta)
                upper[i] = u
                decided = u * hi_f < low * lo_f
            if decided:
                wi = w[i] if weighted else 1.0
                counts[a] += wi
                for f in range(d):
                    sums[a, f] += wi * np.float64(x[i, f])
                continue
            bt = ta
            best = a
        for g in range(n_groups):
            if a >= 0 and lower[i, g] * lo_f > u * hi_f:  # every centre of g is farther than a
                seen[g] = False
                continue
            seen[g] = True
            t1 = np.inf
            t2 = np.inf
            j1 = -1
            for p in range(start[g], start[g + 1]):
                j = order[p]
                if j == a:
                    tv = ta
                else:
                    tv = np.float64(_sq_dist(x, i, cm, j))
                    measured[0] += 1
                if tv < t1 or (tv == t1 and j < j1):
                    t2 = t1
                    t1 = tv
                    j1 = j
                elif tv < t2:
                    t2 = tv
                if tv < bt or (tv == bt and j < best):
                    bt = tv
                    best = j
            g1[g] = t1
            g2[g] = t2
            gj[g] = j1
        for g in range(n_groups):
            if seen[g]:
                lower[i, g] = np.sqrt(g2[g] if gj[g] == best else g1[g])
        if a >= 0 and best != a and not seen[group_of[a]]:  # the old centre is now one of its group's others
            ga = group_of[a]
            lower[i, ga] = min(lower[i, ga], u)
        labels[i] = best
        upper[i] = np.sqrt(bt)
        wi = w[i] if weighted else 1.0
        counts[best] += wi
        for f in range(d):
            sums[best, f] += wi * np.float64(x[i, f])


@_strict
def _labelled_inertia(x, w, cm, labels, inertia):
    """``inertia[0] += sum_i w_i |x_i - m_labels[i]|^2``, each squared
    distance by the exact differences in the centres' type exactly as
    :func:`infoclust_dask.kernels._lloyd_loops._lloyd_rows_gemm` computes
    its chosen centre's (the same numbers), summed in float64: the final
    inertia of a bounded run from its last step's labels."""
    n, d = x.shape
    weighted = w.shape[0] > 0
    total = 0.0
    for i in range(n):
        total += (w[i] if weighted else 1.0) * np.float64(_sq_dist(x, i, cm, labels[i]))
    inertia[0] += total
