"""Pure numpy kernels that act on ONE row block (layer 1 of DESIGN.md).

Nothing here imports dask. Every ``*_stats`` kernel returns a dict of partial
sums that are exact to add across blocks (float64 / int64); the matching
``combine_*`` function (default: :func:`combine_sum`) merges a list of such
dicts, and must be associative so that a tree reduction gives the same result
as a linear one up to float64 round-off.

Kernels take the block arrays positionally, the small parameters as keywords
and, when they declare it, ``start``: the global index of the block's first
row (used to draw chunking-independent random numbers).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "combine_sum",
    "combine_concat",
    "sq_distances",
    "row_hash_uniform",
    "moments_stats",
    "lloyd_stats",
    "lloyd_step_stats",
    "inertia_stats",
    "sum_sq_stats",
    "combine_lloyd",
    "assign_labels",
    "soft_responsibilities",
    "soft_kmeans_stats",
    "d2_weight_stats",
    "d2_pick_in_block",
    "kmeans_parallel_sample",
    "closest_count_stats",
    "min_sq_dist",
    "distances",
    "responsibilities",
    "weighted_sum_stats",
    "gram_stats",
]


# --------------------------------------------------------------------------
# combine blueprints
# --------------------------------------------------------------------------
def combine_sum(parts):
    """Add dicts of partial sums key by key (the default combine)."""
    out = dict(parts[0])
    for p in parts[1:]:
        for key, value in p.items():
            out[key] = out[key] + value
    return out


def combine_concat(parts):
    """Concatenate along axis 0, key by key (for small per-block lists)."""
    return {key: np.concatenate([p[key] for p in parts], axis=0) for key in parts[0]}


# --------------------------------------------------------------------------
# geometry
# --------------------------------------------------------------------------
def sq_distances(x, centers, x_sq=None):
    """Squared Euclidean distances ``||x_n - m_k||^2`` of shape (n, k).

    One GEMM; the expansion ``|x|^2 - 2 x.m + |m|^2`` is clipped at 0 to
    remove negative round-off.
    """
    x = np.asarray(x, dtype=np.float64)
    centers = np.asarray(centers, dtype=np.float64)
    if x_sq is None:
        x_sq = np.einsum("ij,ij->i", x, x)
    d = x @ (-2.0 * centers.T)
    d += np.einsum("ij,ij->i", centers, centers)[None, :]
    d += x_sq[:, None]
    np.maximum(d, 0.0, out=d)
    return d


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def row_hash_uniform(seed, start, n):
    """Uniform [0, 1) numbers for global rows ``start .. start+n-1``.

    A counter-based generator (splitmix64 of ``seed`` and the row index), so a
    row gets the same number whatever the chunking or the worker.
    """
    idx = np.arange(start, start + n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = idx * _GOLDEN + np.uint64(seed % (1 << 64)) * _M2 + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


# --------------------------------------------------------------------------
# validation / preprocessing statistics
# --------------------------------------------------------------------------
def moments_stats(x, w=None):
    """Count, weighted sums, sums of squares and the number of non-finite
    entries of a block: the basis of mean/variance and of input validation."""
    x = np.asarray(x)
    n_bad = int(np.count_nonzero(~np.isfinite(x)))
    xf = np.where(np.isfinite(x), x, 0.0).astype(np.float64, copy=False)
    if w is None:
        w = np.ones(x.shape[0])
    w = np.asarray(w, dtype=np.float64)
    return {
        "n": np.array(x.shape[0], dtype=np.int64),
        "n_bad": np.array(n_bad, dtype=np.int64),
        "w": np.array(w.sum()),
        "s1": w @ xf,
        "s2": w @ (xf * xf),
    }


# --------------------------------------------------------------------------
# K-means (MacKay eq. 20.3-20.6)
# --------------------------------------------------------------------------
def _top_far(dmin, k_far):
    k_far = min(k_far, dmin.shape[0])
    if k_far == 0:
        return np.empty(0, dtype=np.intp)
    idx = np.argpartition(dmin, dmin.shape[0] - k_far)[dmin.shape[0] - k_far :]
    return idx


def lloyd_stats(x, w=None, *, centers, n_far=0):
    """One Lloyd step's partial sums for a block.

    Assignment (20.3) and the sums of the update (20.5)-(20.6):
    ``counts[k] = sum_n w_n r_k^(n)``, ``sums[k] = sum_n w_n r_k^(n) x_n``,
    ``inertia = sum_n w_n ||x_n - m_k(n)||^2``. With ``n_far > 0`` the block
    also reports its ``n_far`` points farthest from their centre (for
    re-seeding empty clusters), merged by :func:`combine_lloyd`.
    """
    x = np.asarray(x, dtype=np.float64)
    k = centers.shape[0]
    d = sq_distances(x, centers)
    lab = np.argmin(d, axis=1)
    dmin = np.take_along_axis(d, lab[:, None], axis=1)[:, 0]
    onehot = np.zeros((x.shape[0], k))
    if w is None:
        onehot[np.arange(x.shape[0]), lab] = 1.0
        inertia = dmin.sum()
    else:
        w = np.asarray(w, dtype=np.float64)
        onehot[np.arange(x.shape[0]), lab] = w
        inertia = w @ dmin
    out = {
        "counts": onehot.sum(axis=0),
        "sums": onehot.T @ x,
        "inertia": np.array(inertia),
    }
    if n_far:
        idx = _top_far(dmin if w is None else dmin * (w > 0), n_far)
        out["far_d"] = dmin[idx]
        out["far_x"] = x[idx]
    return out


try:  # scikit-learn's compiled Lloyd routines (private but long-stable; numpy fallback)
    from sklearn.cluster._k_means_common import _inertia_dense as _sk_inertia
    from sklearn.cluster._k_means_lloyd import lloyd_iter_chunked_dense as _sk_lloyd_iter
except ImportError:  # pragma: no cover
    _sk_lloyd_iter = _sk_inertia = None


def lloyd_step_stats(x, w=None, *, centers, n_threads=1):
    """The per-iteration Lloyd pass: ``counts`` and ``sums`` as
    :func:`lloyd_stats`, without the inertia.

    Uses scikit-learn's compiled ``lloyd_iter_chunked_dense`` on the block
    (GEMM + fused argmin/accumulate, GIL released). That routine moves the
    farthest points into clusters left empty *in this block* (changing the
    sums but not the labels); when that happened, the sums are recomputed
    from the labels, so the result is always the plain per-block sum that
    :func:`lloyd_stats` computes (tested to 1e-10 against it).
    """
    x = np.ascontiguousarray(x, dtype=np.float64)
    c = np.ascontiguousarray(centers, dtype=np.float64)
    n, k = x.shape[0], c.shape[0]
    if _sk_lloyd_iter is None or n <= k:  # (its relocation needs more rows than clusters)
        st = lloyd_stats(x, w, centers=c)
        return {"counts": st["counts"], "sums": st["sums"]}
    wk = np.ones(n) if w is None else np.ascontiguousarray(w, dtype=np.float64)
    cn = np.empty_like(c)
    wic = np.empty(k)
    lab = np.empty(n, dtype=np.int32)
    _sk_lloyd_iter(x, wk, c, cn, wic, lab, np.empty(k), n_threads, True)
    natural = np.bincount(lab, weights=None if w is None else wk, minlength=k)
    if np.any(natural == 0):  # relocation happened in this block: sum by the labels
        onehot = (lab[None, :] == np.arange(k)[:, None]) * wk[None, :]
        return {"counts": natural.astype(np.float64), "sums": onehot @ x}
    return {"counts": wic, "sums": cn * wic[:, None]}


def inertia_stats(x, w=None, *, centers, n_threads=1):
    """``inertia = sum_n w_n min_k ||x_n - m_k||^2`` of a block (exact: the
    distance to the assigned centre is recomputed, not expanded)."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    c = np.ascontiguousarray(centers, dtype=np.float64)
    n = x.shape[0]
    if _sk_inertia is None or n == 0:
        return {"inertia": lloyd_stats(x, w, centers=c)["inertia"]}
    wk = np.ones(n) if w is None else np.ascontiguousarray(w, dtype=np.float64)
    lab = np.empty(n, dtype=np.int32)
    _sk_lloyd_iter(x, wk, c, None, None, lab, np.empty(c.shape[0]), n_threads, False)
    return {"inertia": np.array(_sk_inertia(x, wk, c, lab, n_threads))}


def combine_lloyd(parts):
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


def assign_labels(x, *, centers):
    """Nearest-centre labels (20.3) of a block, int64."""
    return np.argmin(sq_distances(x, centers), axis=1).astype(np.int64)


def min_sq_dist(x, *, centers):
    """Squared distance of each row to its nearest centre."""
    return sq_distances(x, centers).min(axis=1)


# --------------------------------------------------------------------------
# soft K-means (MacKay eq. 20.7-20.9)
# --------------------------------------------------------------------------
def soft_responsibilities(x, centers, beta):
    """Responsibilities (20.7) with ``d = ||x - m||^2 / 2`` (20.2), computed
    by a stable soft-min (log-sum-exp). Returns ``(r, log_z)`` where
    ``log_z[n] = log sum_k exp(-beta d_nk)``."""
    e = -0.5 * beta * sq_distances(x, centers)
    emax = e.max(axis=1, keepdims=True)
    r = np.exp(e - emax)
    z = r.sum(axis=1, keepdims=True)
    r /= z
    return r, (np.log(z) + emax)[:, 0]


def soft_kmeans_stats(x, w=None, *, centers, beta):
    """Partial sums of one soft K-means step: ``R[k]`` (20.9), ``S[k] =
    sum_n w_n r_k^(n) x_n`` (numerator of 20.8) and ``sum_n w_n log Z_n``
    (minus beta times the free energy)."""
    x = np.asarray(x, dtype=np.float64)
    r, log_z = soft_responsibilities(x, centers, beta)
    if w is not None:
        w = np.asarray(w, dtype=np.float64)
        r *= w[:, None]
        log_z = log_z * w
    return {"R": r.sum(axis=0), "S": r.T @ x, "log_z": np.array(log_z.sum())}


# --------------------------------------------------------------------------
# seeding: k-means++ (exact D^2 sampling) and k-means|| (Bahmani et al.)
# --------------------------------------------------------------------------
def _d2_weights(x, w, centers):
    if centers.shape[0] == 0:
        d2 = np.ones(x.shape[0])
    else:
        d2 = min_sq_dist(x, centers=centers)
    if w is not None:
        d2 = d2 * np.asarray(w, dtype=np.float64)
    return d2


def d2_weight_stats(x, w=None, *, centers):
    """Total D^2 weight of the block (one entry per block; combine by concat).

    With no centres yet every row weighs ``w_n`` (uniform first draw)."""
    return {"weight": np.array([_d2_weights(np.asarray(x, np.float64), w, centers).sum()])}


def d2_pick_in_block(x, w=None, *, centers, u):
    """The row of the block where the cumulative D^2 weight first exceeds
    ``u`` (inverse-CDF draw inside one block)."""
    x = np.asarray(x, dtype=np.float64)
    cum = np.cumsum(_d2_weights(x, w, centers))
    i = int(np.searchsorted(cum, u, side="right"))
    i = min(i, x.shape[0] - 1)
    # skip zero-weight rows that searchsorted can land on through round-off
    while i > 0 and (cum[i] - (cum[i - 1] if i else 0.0)) <= 0.0:
        i -= 1
    return {"row": x[i : i + 1].copy()}


def kmeans_parallel_sample(x, w=None, *, start, centers, ell, phi, seed):
    """One oversampling round of k-means|| for a block: keep row n with
    probability ``min(1, ell * w_n d_n^2 / phi)``, the uniform numbers drawn by
    :func:`row_hash_uniform` so the result does not depend on chunking.
    Combine by :func:`combine_concat`."""
    x = np.asarray(x, dtype=np.float64)
    d2 = _d2_weights(x, w, centers)
    u = row_hash_uniform(seed, start, x.shape[0])
    keep = u < ell * d2 / phi
    return {"rows": x[keep], "index": np.arange(start, start + x.shape[0])[keep]}


def closest_count_stats(x, w=None, *, centers):
    """Weighted number of rows closest to each candidate centre (for the
    final weighted reduction of k-means|| candidates) and the cost phi."""
    x = np.asarray(x, dtype=np.float64)
    d = sq_distances(x, centers)
    lab = np.argmin(d, axis=1)
    dmin = np.take_along_axis(d, lab[:, None], axis=1)[:, 0]
    wt = np.ones(x.shape[0]) if w is None else np.asarray(w, dtype=np.float64)
    return {
        "counts": np.bincount(lab, weights=wt, minlength=centers.shape[0]),
        "phi": np.array(wt @ dmin),
    }


def distances(x, *, centers):
    """Euclidean distances to every centre (KMeans.transform)."""
    return np.sqrt(sq_distances(x, centers))


def responsibilities(x, *, centers, beta):
    """Responsibilities (20.7) only (SoftKMeans.predict_proba)."""
    return soft_responsibilities(x, centers, beta)[0]


def weighted_sum_stats(x, w):
    """``sum_n w_n x_n`` and ``sum_n w_n`` (a weighted mean)."""
    w = np.asarray(w, dtype=np.float64)
    return {"s": w @ np.asarray(x, dtype=np.float64), "w": np.array(w.sum())}


def gram_stats(x):
    """Count, sum and ``X^T X`` of a block (covariance / principal axes)."""
    x = np.asarray(x, dtype=np.float64)
    return {"n": np.array(x.shape[0], dtype=np.int64), "s1": x.sum(axis=0), "xtx": x.T @ x}


def sum_sq_stats(x, w=None):
    """``sxx = sum_n w_n ||x_n||^2`` of a block."""
    x = np.asarray(x, dtype=np.float64)
    xx = np.einsum("ij,ij->i", x, x)
    return {"sxx": np.array(xx.sum() if w is None else np.asarray(w, dtype=np.float64) @ xx)}
