"""Seeding for the K-means family, as map-reduce passes.

``k-means++`` (Arthur & Vassilvitskii 2007) in scikit-learn's greedy form:
per centre, ``2 + log k`` candidates are drawn with probability proportional
to ``w_n D(x_n)^2`` and the one that lowers the potential most is kept. One
pass evaluates every candidate's potential per block (which also gives the
per-block weights of the next draw); a draw picks, from a uniform number on
the global cumulative weight, the block that holds it and the row inside it,
reading only that block again. The draws are therefore the same for any
chunking (up to round-off). Cost: k + 1 passes over the data.

``k-means||`` (Bahmani et al. 2012), for many clusters on big data: a few
rounds that each keep every row with probability ``min(1, l w D^2 / phi)``
(uniform numbers hashed from the row index, again chunking-independent),
then the candidates, weighted by the number of rows closest to them, are
reduced to k centres by k-means++ and Lloyd on the driver. Cost:
``2 * rounds + 2`` passes.

k-means++ on a sample (:func:`init_sampled_kmeanspp`), for data that
streams from its store at every pass: one pass draws a uniform sample of
``max(20 000, 100 k)`` rows (hashed per row index: the same sample for any
chunking), the best of 5 k-means++ seedings, each refined by Lloyd, on it in this
process. Cost: 1 pass over the data, whatever k.
"""

from __future__ import annotations

import numpy as np

from .. import engine
from ..kernels.kmeans import (
    CLOSEST_COUNTS,
    D2_PICK_BLOCKS,
    KMEANS_PARALLEL_SAMPLE,
    KPP_TRIALS,
    UNIFORM_SAMPLE,
    nearest,
)

__all__ = ["init_random", "init_kmeanspp", "init_kmeans_parallel", "init_sampled_kmeanspp", "seed_sample_rows"]


def _trials(X, w, centers, candidates):
    """One pass: per-block potentials (n_blocks, n_candidates) and block bounds."""
    st = engine.map_reduce(
        KPP_TRIALS, X, w, params={"centers": centers, "candidates": candidates},
    )
    return st["weight"], st["start"], st["stop"]


def _pick(X, w, centers, block_weights, starts, stops, n_draws, rng):
    """``n_draws`` rows drawn with probability proportional to their D^2
    weight (given per logical block), by inverse CDF on the global
    cumulative weight. Only the blocks that hold a draw are read again, in
    one pass (on a cluster, one round trip whatever the number of blocks).
    None if all weights are 0."""
    total = float(block_weights.sum())
    if not total > 0:
        return None
    u = np.sort(rng.uniform(size=n_draws)) * total
    cum = np.cumsum(block_weights)
    blocks = np.minimum(np.searchsorted(cum, u, side="right"), len(cum) - 1)
    for j, b in enumerate(blocks):
        while block_weights[b] <= 0:  # never land in a block of zero weight (round-off at the edges)
            b -= 1
        blocks[j] = b
    used = np.unique(blocks)
    draws = tuple(u[blocks == b] - (cum[b - 1] if b > 0 else 0.0) for b in used)
    rows = int(stops[0] - starts[0])  # the logical blocks' rows (the last block may be shorter: it comes last)
    slices = [slice(int(starts[b]), int(stops[b])) for b in used]

    def joined(a):
        if a is None:
            return None
        if len(slices) == 1:
            return a[slices[0]]
        if engine.is_lazy(a):
            import dask.array as da

            return da.concatenate([engine.as_array(a)[sl] for sl in slices])
        return np.concatenate([np.asarray(a)[sl] for sl in slices])

    got = engine.map_reduce(D2_PICK_BLOCKS, joined(X), joined(w), params={"centers": centers, "u": draws,
                                                                         "rows": rows}, block_rows=rows)["row"]
    return np.asarray(got, dtype=np.float64)


def init_kmeanspp(X, w, n_clusters, rng, n_local_trials=None):
    """Greedy k-means++ centres (n_clusters, d), as scikit-learn's: each new
    centre is the best of ``2 + log(k)`` D^2-sampled candidates (the one that
    lowers the potential most). One pass per centre plus reads of the blocks
    that hold the candidates."""
    d = X.shape[1]
    if n_local_trials is None:
        n_local_trials = 2 + int(np.log(n_clusters))
    empty = np.empty((0, d))
    bw, starts, stops = _trials(X, w, empty, empty)
    first = _pick(X, w, empty, bw[:, 0], starts, stops, 1, rng)
    centers = first[:1]
    bw, _, _ = _trials(X, w, empty, centers)
    bw = bw[:, 0]
    while centers.shape[0] < n_clusters:
        cand = _pick(X, w, centers, bw, starts, stops, n_local_trials, rng)
        if cand is None:  # fewer distinct points than clusters: duplicate one
            centers = np.vstack([centers, centers[rng.integers(centers.shape[0])][None, :]])
            continue
        pot, _, _ = _trials(X, w, centers, cand)
        best = int(np.argmin(pot.sum(axis=0)))
        centers = np.vstack([centers, cand[best : best + 1]])
        bw = pot[:, best]
    return centers


def _draw(X, w, centers, n_draws, rng):
    """``n_draws`` plain D^2 draws w.r.t. ``centers`` (uniform when empty):
    one pass for the block weights, then the picks."""
    # a centre as the only "candidate" leaves the potential equal to D_C^2
    bw, starts, stops = _trials(X, w, centers, centers[:1])
    return _pick(X, w, centers, bw[:, 0], starts, stops, n_draws, rng)


def init_random(X, w, n_clusters, rng):
    """``n_clusters`` distinct rows drawn uniformly (rows of weight 0 allowed)."""
    idx = np.sort(rng.choice(X.shape[0], size=n_clusters, replace=False))
    rows = X[idx]
    if engine.is_lazy(rows):
        rows = engine.compute(rows)
    return np.asarray(rows, dtype=np.float64)


def init_kmeans_parallel(X, w, n_clusters, rng, *, oversampling_factor=2.0, rounds=2, lloyd=None):
    """k-means|| centres: oversample, weight, reduce on the driver.

    ``lloyd(C, weights, init)`` refines the reduced centres on the candidate
    set (passed in by the estimator to avoid an import cycle).
    """
    ell = oversampling_factor * n_clusters
    centers = _draw(X, w, np.empty((0, X.shape[1])), 1, rng)
    for _ in range(rounds):
        phi = float(
            engine.map_reduce(CLOSEST_COUNTS, X, w, params={"centers": centers})["phi"]
        )
        if not phi > 0:
            break
        seed = int(rng.integers(2**63))
        new = engine.map_reduce(
            KMEANS_PARALLEL_SAMPLE, X, w,
            params={"centers": centers, "ell": ell, "phi": phi, "seed": seed},
        )["rows"]
        if new.shape[0]:
            centers = np.unique(np.vstack([centers, new]), axis=0)
    if centers.shape[0] < n_clusters:  # too few candidates: top up by D^2 draws
        while centers.shape[0] < n_clusters:
            row = _draw(X, w, centers, 1, rng)
            if row is None:
                row = centers[rng.integers(centers.shape[0])][None, :]
            centers = np.vstack([centers, row])
        return centers
    counts = engine.map_reduce(CLOSEST_COUNTS, X, w, params={"centers": centers})["counts"]
    keep = counts > 0
    cand, cw = centers[keep], counts[keep]
    if cand.shape[0] <= n_clusters:
        extra = centers[~keep][: n_clusters - cand.shape[0]]
        return np.vstack([cand, extra])
    with engine.installed("sync"):  # the candidates are small, in this process
        init = init_kmeanspp(cand, cw, n_clusters, rng)
    return lloyd(cand, cw, init) if lloyd is not None else init


def seed_sample_rows(n_clusters: int) -> int:
    """Rows of the uniform sample :func:`init_sampled_kmeanspp` seeds on."""
    return max(20_000, 100 * int(n_clusters))


def init_sampled_kmeanspp(X, w, n_clusters, rng, *, lloyd=None, sample_rows=None, n_trials=5):
    """k-means++ on a uniform sample drawn in one pass, refined by Lloyd on
    the (weighted) sample: centres as good as k-means++ on the whole data
    (the full Lloyd iterations follow) at the cost of one pass instead of
    ``k + 1``. Rows are kept with probability ``p = sample_rows / n`` and
    weigh ``w / p``. ``n_trials`` seedings (each refined by ``lloyd``) run
    on the sample and the one of lowest sample inertia is kept: a bad draw
    costs passes over the sample, never over the data. Falls back to :func:`init_kmeanspp` on the whole data
    when the sample holds fewer than ``n_clusters`` rows."""
    n = int(X.shape[0])
    m = seed_sample_rows(n_clusters) if sample_rows is None else int(sample_rows)
    p = min(1.0, m / max(n, 1))
    st = engine.map_reduce(UNIFORM_SAMPLE, X, w, params={"p": p, "seed": int(rng.integers(2**63))})
    S, sw = np.asarray(st["rows"], dtype=np.float64), np.asarray(st["weights"], dtype=np.float64) / p
    keep = sw > 0
    S, sw = S[keep], sw[keep]
    if S.shape[0] < n_clusters:
        return init_kmeanspp(X, w, n_clusters, rng)
    best, best_cost = None, np.inf
    with engine.installed("sync"):  # the sample is small, in this process
        for _ in range(n_trials):  # each trial costs passes over the sample only
            c = init_kmeanspp(S, sw, n_clusters, rng)
            if lloyd is not None:
                c = lloyd(S, sw, c)
            cost = float(sw @ nearest(S, c)[1])
            if cost < best_cost:
                best, best_cost = c, cost
    return best
