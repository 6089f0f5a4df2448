"""K-means and soft K-means block kernels (MacKay 2003, ch. 20, eq.
20.3-20.9), and the seeding passes (k-means++, Arthur & Vassilvitskii 2007;
k-means||, Bahmani et al. 2012). Each pass is declared once below its kernel.
"""

from __future__ import annotations

import numpy as np

from . import _compiled
from ._common import (
    Pass,
    combine_concat,
    combine_sum,
    row_hash_uniform,
    softmax,
    sq_distances,
    subblocks,
)

__all__ = [
    "lloyd_stats", "LLOYD_FAR",
    "lloyd_step_stats", "LLOYD_STEP",
    "inertia_stats", "INERTIA",
    "combine_lloyd",
    "assign_labels", "ASSIGN", "hamerly_step_stats", "HAMERLY_STEP",
    "yinyang_step_stats", "YINYANG_STEP", "labelled_inertia_stats", "LABELLED_INERTIA",
    "soft_responsibilities",
    "soft_kmeans_stats", "SOFT_KMEANS",
    "soft_scatter_stats", "SOFT_SCATTER",
    "responsibilities", "RESPONSIBILITIES",
    "distances", "DISTANCES",
    "nearest",
    "d2_pick_in_block", "d2_pick_in_blocks", "D2_PICK_BLOCKS",
    "kpp_trial_stats", "KPP_TRIALS",
    "kmeans_parallel_sample", "KMEANS_PARALLEL_SAMPLE",
    "closest_count_stats", "CLOSEST_COUNTS",
    "uniform_sample_rows", "UNIFORM_SAMPLE",
]


def _top_far(dmin, k_far):
    k_far = min(k_far, dmin.shape[0])
    if k_far == 0:
        return np.empty(0, dtype=np.intp)
    idx = np.argpartition(dmin, dmin.shape[0] - k_far)[dmin.shape[0] - k_far :]
    return idx


def _inertia(dmin, w):
    return np.array(dmin.sum() if w is None else np.asarray(w, dtype=np.float64) @ dmin)


def lloyd_stats(x: np.ndarray, w: np.ndarray | None = None, *, centers: np.ndarray, n_far: int = 0
               ) -> dict[str, np.ndarray]:
    """One Lloyd step's partial sums for a block (one compiled loop,
    :func:`infoclust_dask.kernels._compiled.lloyd`).

    Assignment (20.3) and the sums of the update (20.5)-(20.6):
    ``counts[k] = sum_n w_n r_k^(n)``, ``sums[k] = sum_n w_n r_k^(n) x_n``,
    ``inertia = sum_n w_n ||x_n - m_k(n)||^2`` (exact: differences, not the
    expansion). With ``n_far > 0`` the block also reports its ``n_far``
    points farthest from their centre (for re-seeding empty clusters),
    merged by :func:`combine_lloyd`.
    """
    x = _compiled.as_rows(x)
    if not n_far:  # the sums only: nothing written per row
        counts, sums, inertia = _compiled.lloyd_sums(x, w, centers=centers)
        return {"counts": counts, "sums": sums, "inertia": inertia}
    _, dmin, counts, sums = _compiled.lloyd(x, w, centers=centers)
    out = {"counts": counts, "sums": sums, "inertia": _inertia(dmin, w)}
    if n_far:
        idx = _top_far(dmin if w is None else dmin * (np.asarray(w) > 0), n_far)
        out["far_d"] = dmin[idx]
        out["far_x"] = x[idx].astype(np.float64)
    return out


def lloyd_step_stats(x: np.ndarray, w: np.ndarray | None = None, *, centers: np.ndarray) -> dict[str, np.ndarray]:
    """The per-iteration Lloyd pass: ``counts``, ``sums`` and the exact
    ``inertia`` at these centres, as :func:`lloyd_stats` (when the centres
    stop moving, the last pass is the final inertia's, no pass of its
    own)."""
    return lloyd_stats(x, w, centers=centers)


def hamerly_step_stats(x: np.ndarray, w: np.ndarray | None, labels: np.ndarray, upper: np.ndarray,
                       lower: np.ndarray, *, centers: np.ndarray, moved: np.ndarray, half_gap: np.ndarray
                       ) -> dict[str, np.ndarray]:
    """A Lloyd step (counts and sums, as :func:`lloyd_step_stats`) with
    Hamerly's (2010) bounds: ``labels``, ``upper`` and ``lower`` are the
    block's rows' state, kept between steps and updated in place (so the
    pass runs only where the rows and their state stay in memory: this
    process); ``moved`` how far each centre moved since the last step,
    ``half_gap`` half each centre's distance to its nearest other centre.
    ``skipped``: rows decided by their bounds alone (no distance
    computed)."""
    counts, sums, skipped = _compiled.hamerly(x, w, labels, upper, lower, centers=centers, moved=moved,
                                              half_gap=half_gap)
    return {"counts": counts, "sums": sums, "skipped": np.array(skipped)}


def yinyang_step_stats(x: np.ndarray, w: np.ndarray | None, labels: np.ndarray, upper: np.ndarray,
                       lower: np.ndarray, *, centers: np.ndarray, moved: np.ndarray, order: np.ndarray,
                       start: np.ndarray, group_moved: np.ndarray) -> dict[str, np.ndarray]:
    """A Lloyd step (counts and sums, as :func:`lloyd_step_stats`) with
    Yinyang's grouped bounds (Ding et al. 2015): ``labels``, ``upper`` and
    ``lower`` (one column per group of centres, ``order[start[g]:start[g +
    1]]``) are the block's rows' state, updated in place; ``moved`` how far
    each centre moved since the last step, ``group_moved`` the largest
    shift in each group. ``skipped``: rows decided by their bounds alone;
    ``measured``: distances computed."""
    counts, sums, skipped, measured = _compiled.yinyang(x, w, labels, upper, lower, centers=centers, moved=moved,
                                                        order=order, start=start, group_moved=group_moved)
    return {"counts": counts, "sums": sums, "skipped": np.array(skipped), "measured": np.array(measured)}


def labelled_inertia_stats(x: np.ndarray, w: np.ndarray | None, labels: np.ndarray, *, centers: np.ndarray
                           ) -> dict[str, np.ndarray]:
    """``inertia = sum_n w_n ||x_n - m_labels[n]||^2`` of a block whose rows'
    nearest centres ``labels`` are known (a bounded step or a labels pass
    found them), and the (weighted) rows per centre, ``counts``: the numbers
    of :func:`inertia_stats`, bit for bit (the same distances, summed in
    row order)."""
    labels = np.asarray(labels, dtype=np.int64)
    counts = np.bincount(labels, weights=None if w is None else np.asarray(w, dtype=np.float64),
                         minlength=np.shape(centers)[0]).astype(np.float64)
    return {"inertia": np.array(_compiled.labelled_inertia(x, w, labels, centers=centers)), "counts": counts}


def inertia_stats(x: np.ndarray, w: np.ndarray | None = None, *, centers: np.ndarray) -> dict[str, np.ndarray]:
    """``inertia = sum_n w_n min_k ||x_n - m_k||^2`` of a block (exact) and
    the (weighted) number of rows nearest to each centre, ``counts``."""
    counts, _, inertia = _compiled.lloyd_sums(x, w, centers=centers, with_sums=False)
    return {"inertia": inertia, "counts": counts}


def combine_lloyd(parts: list[dict]) -> dict[str, np.ndarray]:
    """Sum the Lloyd partial sums; keep the overall farthest points."""
    far = "far_d" in parts[0]
    out = combine_sum([{k: v for k, v in p.items() if not k.startswith("far_")} for p in parts])
    if far:
        n_far = max(p["far_d"].shape[0] for p in parts)
        fd = np.concatenate([p["far_d"] for p in parts])
        fx = np.concatenate([p["far_x"] for p in parts])
        idx = _top_far(fd, n_far)
        order = idx[np.argsort(-fd[idx], kind="stable")]
        out["far_d"] = fd[order]
        out["far_x"] = fx[order]
    return out


def assign_labels(x: np.ndarray, *, centers: np.ndarray) -> np.ndarray:
    """Nearest-centre labels (20.3) of a block, int64 (ties: lowest index)."""
    return _compiled.lloyd(x, centers=centers, with_sums=False)[0]


def soft_responsibilities(x: np.ndarray, centers: np.ndarray, beta: float) -> tuple[np.ndarray, np.ndarray]:
    """Responsibilities (20.7) with ``d = ||x - m||^2 / 2`` (20.2), computed
    by the stable softmax. Returns ``(r, log_z)`` where
    ``log_z[n] = log sum_k exp(-beta d_nk)``."""
    return softmax(sq_distances(x, centers) * (-0.5 * beta), out=True, log_z=True)


def soft_kmeans_stats(x: np.ndarray, w: np.ndarray | None = None, *, centers: np.ndarray, beta: float
                     ) -> dict[str, np.ndarray]:
    """Partial sums of one soft K-means step: ``R[k]`` (20.9), ``S[k] =
    sum_n w_n r_k^(n) x_n`` (numerator of 20.8) and ``sum_n w_n log Z_n``
    (minus beta times the free energy), in one compiled loop
    (:func:`infoclust_dask.kernels._compiled.soft_kmeans`)."""
    return _compiled.soft_kmeans(x, w, centers=centers, beta=beta)


def soft_scatter_stats(x: np.ndarray, w: np.ndarray | None = None, *, centers: np.ndarray, beta: float
                       ) -> dict[str, np.ndarray]:
    """Per centre, the responsibility-weighted scatter about the centre,
    ``Q[k] = sum_n w_n r_k^(n) (x_n - m_k)(x_n - m_k)^T``, with ``R[k]``:
    the posterior covariance ``Q[k] / R[k]`` whose largest eigenvalue sets
    the critical stiffness ``1 / lambda_max`` at which a centre (or a group
    of coinciding centres) splits (Rose 1998, section III; MacKay 2003,
    eq. 20.17 for one Gaussian). Once per stiffness of an adaptive
    annealing path, not per iteration; one compiled loop
    (:func:`infoclust_dask.kernels._compiled.soft_scatter`)."""
    return _compiled.soft_scatter(x, w, centers=centers, beta=beta)


def nearest(x: np.ndarray, centers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index of the nearest centre (ties: the lowest index) and the exact
    squared distance to it (``||x - m_label||^2``, no cancellation: a row
    equal to a centre has distance 0), per row, in one compiled loop."""
    lab, d2, _, _ = _compiled.lloyd(x, centers=centers, with_sums=False)
    return lab, d2


def _d2_weights(x, w, centers):
    if centers.shape[0] == 0:
        d2 = np.ones(x.shape[0])
    else:
        d2 = nearest(x, centers)[1]
    if w is not None:
        d2 = d2 * np.asarray(w, dtype=np.float64)
    return d2


def d2_pick_in_block(x: np.ndarray, w: np.ndarray | None = None, *, centers: np.ndarray, u: np.ndarray
                    ) -> dict[str, np.ndarray]:
    """The rows of the block where the cumulative D^2 weight first exceeds
    each of ``u`` (inverse-CDF draws inside one block); shape (len(u), d)."""
    x = np.asarray(x, dtype=np.float64)
    weights = _d2_weights(x, w, centers)
    cum = np.cumsum(weights)
    idx = np.minimum(np.searchsorted(cum, np.atleast_1d(u), side="right"), x.shape[0] - 1)
    for j, i in enumerate(idx):  # never return a zero-weight row (round-off at the edges)
        while i > 0 and weights[i] <= 0.0:
            i -= 1
        idx[j] = i
    return {"row": x[idx].copy()}


def d2_pick_in_blocks(x: np.ndarray, w: np.ndarray | None = None, *, start: int, rows: int, centers: np.ndarray,
                      u: tuple) -> dict[str, np.ndarray]:
    """:func:`d2_pick_in_block` for the ``i``-th block of a pass over
    several blocks in ``rows``-row blocks (``i = start // rows``): its draws
    are ``u[i]``. So the blocks that hold draws are read in one pass."""
    return d2_pick_in_block(x, w, centers=centers, u=u[int(start) // int(rows)])


def kpp_trial_stats(x: np.ndarray, w: np.ndarray | None = None, *, start: int, centers: np.ndarray,
                    candidates: np.ndarray) -> dict[str, np.ndarray]:
    """Greedy k-means++ for a block: per candidate t, the D^2 weight the block
    would have if t were added, ``sum_n w_n min(D_C(x_n)^2, ||x_n - t||^2)``.

    Returns one row of shape (1, n_candidates) per block (combine by concat)
    plus the block's row range, so the driver gets both the potential of
    every candidate and the per-block weights for the next draw."""
    x = np.asarray(x)
    n_c = max(1, candidates.shape[0])
    total = np.zeros(n_c)
    cand = np.ascontiguousarray(candidates, dtype=np.float64)
    cc = np.einsum("ij,ij->i", cand, cand)
    for xs, ws in subblocks(x, w):
        if candidates.shape[0] == 0:
            total[0] += xs.shape[0] if ws is None else ws.sum()
            continue
        # exact distances to the candidates (few): |x|^2 - 2 x.t + |t|^2, clipped
        pot = xs @ (-2.0 * cand.T)
        pot += cc
        pot += np.einsum("ij,ij->i", xs, xs)[:, None]
        np.maximum(pot, 0.0, out=pot)
        if centers.shape[0]:
            np.minimum(pot, nearest(xs, centers)[1][:, None], out=pot)
        total += pot.sum(axis=0) if ws is None else ws @ pot
    return {
        "weight": total[None, :],
        "start": np.array([start]),
        "stop": np.array([start + x.shape[0]]),
    }


def kmeans_parallel_sample(x: np.ndarray, w: np.ndarray | None = None, *, start: int, centers: np.ndarray, ell: float,
                           phi: float, seed: int) -> dict[str, np.ndarray]:
    """One oversampling round of k-means|| for a block: keep row n with
    probability ``min(1, ell * w_n d_n^2 / phi)``, the uniform numbers drawn by
    :func:`row_hash_uniform` so the result does not depend on chunking.
    Combine by :func:`combine_concat`."""
    x = np.asarray(x, dtype=np.float64)
    d2 = _d2_weights(x, w, centers)
    u = row_hash_uniform(seed, start, x.shape[0])
    keep = u < ell * d2 / phi
    return {"rows": x[keep], "index": np.arange(start, start + x.shape[0])[keep]}


def uniform_sample_rows(x: np.ndarray, w: np.ndarray | None = None, *, start: int, p: float, seed: int
                        ) -> dict[str, np.ndarray]:
    """A uniform sample of a block's rows: row n kept when its hashed uniform
    number (:func:`row_hash_uniform`, so the sample does not depend on the
    chunking) is below ``p``; returns the rows, their weights (``w`` or 1)
    and their global indices. Combine by :func:`combine_concat`."""
    x = np.asarray(x)
    keep = row_hash_uniform(seed, start, x.shape[0]) < p
    wt = np.ones(x.shape[0]) if w is None else np.asarray(w, dtype=np.float64)
    return {"rows": np.asarray(x[keep], dtype=np.float64), "weights": wt[keep],
            "index": np.arange(start, start + x.shape[0])[keep]}


def closest_count_stats(x: np.ndarray, w: np.ndarray | None = None, *, centers: np.ndarray) -> dict[str, np.ndarray]:
    """Weighted number of rows closest to each candidate centre (for the
    final weighted reduction of k-means|| candidates) and the cost phi."""
    lab, dmin = nearest(x, centers)
    wt = np.ones(lab.shape[0]) if w is None else np.asarray(w, dtype=np.float64)
    return {
        "counts": np.bincount(lab, weights=wt, minlength=centers.shape[0]),
        "phi": np.array(wt @ dmin),
    }


def distances(x: np.ndarray, *, centers: np.ndarray) -> np.ndarray:
    """Euclidean distances to every centre (KMeans.transform)."""
    return np.sqrt(sq_distances(x, centers))


def responsibilities(x: np.ndarray, *, centers: np.ndarray, beta: float) -> np.ndarray:
    """Responsibilities (20.7) only (SoftKMeans.predict_proba)."""
    return soft_responsibilities(x, centers, beta)[0]


# --------------------------------------------------------------------------
# the passes
# --------------------------------------------------------------------------
LLOYD_STEP = Pass("lloyd_step_stats", lloyd_step_stats, inputs=("x", "w"))
LLOYD_FAR = Pass("lloyd_far_stats", lloyd_stats, combine=combine_lloyd, inputs=("x", "w"))
INERTIA = Pass("inertia_stats", inertia_stats, inputs=("x", "w"))
HAMERLY_STEP = Pass("hamerly_step_stats", hamerly_step_stats, inputs=("x", "w", "labels", "upper", "lower"))
YINYANG_STEP = Pass("yinyang_step_stats", yinyang_step_stats, inputs=("x", "w", "labels", "upper", "lower"))
LABELLED_INERTIA = Pass("labelled_inertia_stats", labelled_inertia_stats, inputs=("x", "w", "labels"))
ASSIGN = Pass("assign_labels", assign_labels, kind="map", dtype=np.int64)
SOFT_KMEANS = Pass("soft_kmeans_stats", soft_kmeans_stats, inputs=("x", "w"))
SOFT_SCATTER = Pass("soft_scatter_stats", soft_scatter_stats, inputs=("x", "w"))
RESPONSIBILITIES = Pass("responsibilities", responsibilities, kind="map")
DISTANCES = Pass("distances", distances, kind="map")
D2_PICK_BLOCKS = Pass("d2_pick_in_blocks", d2_pick_in_blocks, combine=combine_concat, inputs=("x", "w"), start=True)
KPP_TRIALS = Pass("kpp_trial_stats", kpp_trial_stats, combine=combine_concat, inputs=("x", "w"), start=True)
KMEANS_PARALLEL_SAMPLE = Pass("kmeans_parallel_sample", kmeans_parallel_sample, combine=combine_concat,
                              inputs=("x", "w"), start=True)
UNIFORM_SAMPLE = Pass("uniform_sample_rows", uniform_sample_rows, combine=combine_concat, inputs=("x", "w"),
                      start=True)
CLOSEST_COUNTS = Pass("closest_count_stats", closest_count_stats, inputs=("x", "w"))
