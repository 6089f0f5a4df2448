"""Seeding for the K-means family, as map-reduce passes.

``k-means++`` (Arthur & Vassilvitskii 2007), exact D^2 sampling: per centre,
one pass returns each block's total weight ``sum_n w_n D(x_n)^2``; the driver
draws one uniform number on the global cumulative weight, picks the block
that holds it and the row inside that block with a second computation that
touches that block only. The draw is therefore the same for any chunking (up
to round-off). Cost: k passes over the data.

``k-means||`` (Bahmani et al. 2012), for many clusters on big data: a few
rounds that each keep every row with probability ``min(1, l w D^2 / phi)``
(uniform numbers hashed from the row index, again chunking-independent),
then the candidates, weighted by the number of rows closest to them, are
reduced to k centres by k-means++ and Lloyd on the driver. Cost:
``2 * rounds + 2`` passes.
"""

from __future__ import annotations

import numpy as np

from .. import engine
from .._kernels import (
    closest_count_stats,
    combine_concat,
    d2_pick_in_block,
    d2_weight_stats,
    kmeans_parallel_sample,
)

__all__ = ["init_random", "init_kmeanspp", "init_kmeans_parallel"]


def _block_weights(kernel_start, X, w, centers, sched):
    st = engine.map_reduce(
        kernel_start, X, w, params={"centers": centers}, combine=combine_concat, scheduler=sched
    )
    return st["weight"], st["start"], st["stop"]


def _d2_weight_with_bounds(x, w=None, *, start, centers):
    out = d2_weight_stats(x, w, centers=centers)
    out["start"] = np.array([start])
    out["stop"] = np.array([start + x.shape[0]])
    return out


def _draw_one(X, w, centers, rng, sched):
    weights, starts, stops = _block_weights(_d2_weight_with_bounds, X, w, centers, sched)
    total = float(weights.sum())
    if not total > 0:
        return None  # every row already coincides with a centre
    u = rng.uniform() * total
    cum = np.cumsum(weights)
    b = int(min(np.searchsorted(cum, u, side="right"), len(cum) - 1))
    while weights[b] <= 0:  # never land in a block of zero weight
        b -= 1
    u_b = u - (cum[b - 1] if b > 0 else 0.0)
    sl = slice(int(starts[b]), int(stops[b]))
    wb = None if w is None else w[sl]
    row = engine.map_reduce(
        d2_pick_in_block, X[sl], wb, params={"centers": centers, "u": u_b},
        combine=combine_concat, scheduler=sched, block_rows=sl.stop - sl.start,
    )["row"]
    return np.asarray(row, dtype=np.float64)[:1]


def init_kmeanspp(X, w, n_clusters, rng, sched):
    """k-means++ centres (n_clusters, d) by exact D^2 sampling (k passes)."""
    centers = np.empty((0, X.shape[1]))
    while centers.shape[0] < n_clusters:
        row = _draw_one(X, w, centers, rng, sched)
        if row is None:  # fewer distinct points than clusters: duplicate
            row = centers[rng.integers(centers.shape[0])][None, :]
        centers = np.vstack([centers, row])
    return centers


def init_random(X, w, n_clusters, rng, sched):
    """``n_clusters`` distinct rows drawn uniformly (rows of weight 0 allowed)."""
    idx = np.sort(rng.choice(X.shape[0], size=n_clusters, replace=False))
    rows = X[idx]
    if engine.is_lazy(rows):
        rows = engine.compute(rows, scheduler=sched)
    return np.asarray(rows, dtype=np.float64)


def init_kmeans_parallel(X, w, n_clusters, rng, sched, *, oversampling_factor=2.0, rounds=5, lloyd=None):
    """k-means|| centres: oversample, weight, reduce on the driver.

    ``lloyd(C, weights, init)`` refines the reduced centres on the candidate
    set (passed in by the estimator to avoid an import cycle).
    """
    ell = oversampling_factor * n_clusters
    centers = _draw_one(X, w, np.empty((0, X.shape[1])), rng, sched)
    for _ in range(rounds):
        phi = float(
            engine.map_reduce(closest_count_stats, X, w, params={"centers": centers}, scheduler=sched)["phi"]
        )
        if not phi > 0:
            break
        seed = int(rng.integers(2**63))
        new = engine.map_reduce(
            kmeans_parallel_sample, X, w,
            params={"centers": centers, "ell": ell, "phi": phi, "seed": seed},
            combine=combine_concat, scheduler=sched,
        )["rows"]
        if new.shape[0]:
            centers = np.unique(np.vstack([centers, new]), axis=0)
    if centers.shape[0] < n_clusters:  # too few candidates: top up by D^2 draws
        while centers.shape[0] < n_clusters:
            row = _draw_one(X, w, centers, rng, sched)
            if row is None:
                row = centers[rng.integers(centers.shape[0])][None, :]
            centers = np.vstack([centers, row])
        return centers
    counts = engine.map_reduce(closest_count_stats, X, w, params={"centers": centers}, scheduler=sched)["counts"]
    keep = counts > 0
    cand, cw = centers[keep], counts[keep]
    if cand.shape[0] <= n_clusters:
        extra = centers[~keep][: n_clusters - cand.shape[0]]
        return np.vstack([cand, extra])
    init = init_kmeanspp(cand, cw, n_clusters, rng, "sync")
    return lloyd(cand, cw, init) if lloyd is not None else init
