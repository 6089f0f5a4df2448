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
    "hashed_fold_ids",
    "range_fold_ids",
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
    "nearest",
    "kpp_trial_stats",
    "min_sq_dist",
    "distances",
    "responsibilities",
    "weighted_sum_stats",
    "gram_stats",
    "dc_memberships",
    "dc_count_stats",
    "dc_grad_stats",
    "hard_count_stats",
    "mixture_log_joint",
    "mixture_em_stats",
    "mixture_assign",
    "dc_reg_stats",
    "online_dc_block",
    "ac_count_stats",
    "ac_grad_stats",
    "ac_hard_count_stats",
    "cross_gram_stats",
    "project_rows",
    "label_sum_stats",
    "knn_block",
    "knn_top",
    "knn_merge",
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


#: float64 bytes per sub-block: kernels walk a block in cache-sized pieces
#: (converting float32 input piece by piece), measured ~2x faster than whole
#: 64 MB blocks.
SUBBLOCK_BYTES = 2**20


def _subblocks(x, w=None):
    """Yield ``(x_sub, w_sub)`` float64, C-contiguous pieces of ~1 MB."""
    x = np.asarray(x)
    rows = max(256, SUBBLOCK_BYTES // (8 * max(1, x.shape[1] if x.ndim > 1 else 1)))
    for i in range(0, x.shape[0], rows):
        xs = np.ascontiguousarray(x[i : i + rows], dtype=np.float64)
        ws = None if w is None else np.ascontiguousarray(w[i : i + rows], dtype=np.float64)
        yield xs, ws


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


def hashed_fold_ids(x, *, start=0, seed, n_folds):
    """Fold number (0 .. n_folds-1) of each row of a block: the row's hashed
    uniform number times ``n_folds``, so folds are random, about equal in size
    and independent of the chunking."""
    u = row_hash_uniform(seed, start, np.asarray(x).shape[0])
    return np.minimum((u * n_folds).astype(np.int16), n_folds - 1)


def range_fold_ids(x, *, start=0, n_total, n_folds):
    """Fold number of each row when fold f is the index range
    ``[f n / k, (f + 1) n / k)`` (contiguous folds; no shuffling)."""
    rows = np.arange(start, start + np.asarray(x).shape[0], dtype=np.int64)
    return ((rows * n_folds) // n_total).astype(np.int16)


# --------------------------------------------------------------------------
# validation / preprocessing statistics
# --------------------------------------------------------------------------
def moments_stats(x, w=None, *, shift=None):
    """Count, weighted sums, sums of squares and the number of non-finite
    entries of a block: the basis of mean/variance and of input validation.

    With ``shift`` (e.g. one row of the data) the sums are of ``x - shift``,
    which keeps the variance accurate for data far from the origin.
    Non-finite entries are excluded from the sums; they are counted exactly
    only when the sums show there are some (NaN/inf propagate into them)."""
    x = np.asarray(x)
    d = x.shape[1] if x.ndim > 1 else ()
    s1, s2, wsum, n_bad = np.zeros(d), np.zeros(d), 0.0, 0
    for xs, ws in _subblocks(x, w):
        with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: counted below
            if shift is not None:
                xs = xs - shift
            if ws is None:
                t1, t2, tw = xs.sum(axis=0), np.einsum("ij,ij->j", xs, xs), float(xs.shape[0])
            else:
                t1, t2, tw = ws @ xs, np.einsum("i,ij,ij->j", ws, xs, xs), float(ws.sum())
        if not (np.all(np.isfinite(t1)) and np.all(np.isfinite(t2))):
            bad = ~np.isfinite(xs)
            if bad.any():
                n_bad += int(np.count_nonzero(bad))
                xs = np.where(bad, 0.0, xs)
                t1 = xs.sum(axis=0) if ws is None else ws @ xs
                t2 = np.einsum("ij,ij->j", xs, xs) if ws is None else np.einsum("i,ij,ij->j", ws, xs, xs)
        s1 += t1
        s2 += t2
        wsum += tw
    return {
        "n": np.array(x.shape[0], dtype=np.int64),
        "n_bad": np.array(n_bad, dtype=np.int64),
        "w": np.array(wsum),
        "s1": s1,
        "s2": s2,
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

    Uses scikit-learn's compiled ``lloyd_iter_chunked_dense`` (GEMM + fused
    argmin/accumulate, GIL released) on cache-sized pieces of the block. That
    routine moves far points into clusters left empty in a piece, changing
    the sums but not the labels. float64 C-contiguous input is passed as is
    and a piece where that happened is re-summed from its labels; other input
    is converted piece by piece into a buffer that also carries k "phantom"
    rows equal to the centres (weight 1), so that no cluster is empty, and
    their contribution is subtracted afterwards. Either way the result is the
    plain per-block sum of :func:`lloyd_stats` (tested to 1e-10).
    """
    c = np.ascontiguousarray(centers, dtype=np.float64)
    k, d = c.shape
    if _sk_lloyd_iter is None:
        st = lloyd_stats(x, w, centers=c)
        return {"counts": st["counts"], "sums": st["sums"]}
    x = np.asarray(x)
    counts, sums = np.zeros(k), np.zeros(c.shape)
    own = np.arange(k)
    rows = max(256, SUBBLOCK_BYTES // (8 * max(1, d)))
    direct = x.dtype == np.float64 and x.flags.c_contiguous
    if not direct:
        buf = np.empty((rows + k, d))
        wbuf = np.ones(rows + k)
    wfull = None if w is None else np.ascontiguousarray(w, dtype=np.float64)
    for i in range(0, x.shape[0], rows):
        n = min(rows, x.shape[0] - i)
        if direct:
            xb, m = x[i : i + n], n
            wb = np.ones(n) if wfull is None else wfull[i : i + n]
        else:
            xb, wb, m = buf[: n + k], wbuf[: n + k], n + k
            xb[:n] = x[i : i + n]
            xb[n:] = c
            wb[:n] = 1.0 if wfull is None else wfull[i : i + n]
            wb[n:] = 1.0
        if m <= k:  # too few rows for the routine's relocation step
            st = lloyd_stats(xb[:n], wb[:n], centers=c)
            counts += st["counts"]
            sums += st["sums"]
            continue
        cn = np.empty_like(c)
        wic = np.empty(k)
        lab = np.empty(m, dtype=np.int32)
        _sk_lloyd_iter(xb, wb, c, cn, wic, lab, np.empty(k), n_threads, True)
        if direct:
            natural = np.bincount(lab, weights=wb, minlength=k)
            if np.all(natural > 0):
                counts += wic
                sums += cn * wic[:, None]
                continue
        elif np.array_equal(lab[n:], own):
            counts += wic - 1.0
            sums += cn * wic[:, None] - c
            continue
        # a cluster was empty in this piece (relocated by the routine): sum by labels
        onehot = (lab[:n][None, :] == own[:, None]) * wb[None, :n]
        counts += onehot.sum(axis=1)
        sums += onehot @ xb[:n]
    return {"counts": counts, "sums": sums}


def inertia_stats(x, w=None, *, centers, n_threads=1):
    """``inertia = sum_n w_n min_k ||x_n - m_k||^2`` of a block (exact: the
    distance to the assigned centre is recomputed, not expanded)."""
    c = np.ascontiguousarray(centers, dtype=np.float64)
    total = 0.0
    for xs, ws in _subblocks(x, w):
        n = xs.shape[0]
        if _sk_inertia is None:
            total += float(lloyd_stats(xs, ws, centers=c)["inertia"])
            continue
        wk = np.ones(n) if ws is None else ws
        lab = np.empty(n, dtype=np.int32)
        _sk_lloyd_iter(xs, wk, c, None, None, lab, np.empty(c.shape[0]), n_threads, False)
        total += float(_sk_inertia(xs, wk, c, lab, n_threads))
    return {"inertia": np.array(total)}


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
    """Nearest-centre labels (20.3) of a block, int64 (ties: lowest index)."""
    if _sk_lloyd_iter is None:
        return np.argmin(sq_distances(x, centers), axis=1).astype(np.int64)
    c = np.ascontiguousarray(centers, dtype=np.float64)
    n = np.asarray(x).shape[0]
    lab = np.empty(n, dtype=np.int32)
    start = 0
    for xs, _ in _subblocks(x):
        m = xs.shape[0]
        _sk_lloyd_iter(xs, np.ones(m), c, None, None, lab[start : start + m], np.empty(c.shape[0]), 1, False)
        start += m
    return lab.astype(np.int64)


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
def nearest(x, centers):
    """Index of the nearest centre and the squared distance to it, per row.

    Labels from scikit-learn's compiled Lloyd E-step when available (GEMM +
    fused argmin), else numpy; the distance is then recomputed exactly as
    ``||x - m_label||^2`` (no cancellation, so a row equal to a centre has
    distance 0). Works through the block in cache-sized pieces."""
    c = np.ascontiguousarray(centers, dtype=np.float64)
    n = np.asarray(x).shape[0]
    lab = np.empty(n, dtype=np.int32)
    d2 = np.empty(n)
    start = 0
    for xs, _ in _subblocks(x):
        m = xs.shape[0]
        sl = slice(start, start + m)
        if _sk_lloyd_iter is not None:
            _sk_lloyd_iter(xs, np.ones(m), c, None, None, lab[sl], np.empty(c.shape[0]), 1, False)
        else:
            lab[sl] = assign_labels(xs, centers=c)
        diff = np.take(c, lab[sl], axis=0)
        np.subtract(xs, diff, out=diff)
        d2[sl] = np.einsum("ij,ij->i", diff, diff)
        start += m
    return lab, d2


def _d2_weights(x, w, centers):
    if centers.shape[0] == 0:
        d2 = np.ones(x.shape[0])
    else:
        d2 = nearest(x, centers)[1]
    if w is not None:
        d2 = d2 * np.asarray(w, dtype=np.float64)
    return d2


def d2_weight_stats(x, w=None, *, centers):
    """Total D^2 weight of the block (one entry per block; combine by concat).

    With no centres yet every row weighs ``w_n`` (uniform first draw)."""
    return {"weight": np.array([_d2_weights(np.asarray(x, np.float64), w, centers).sum()])}


def d2_pick_in_block(x, w=None, *, centers, u):
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


def kpp_trial_stats(x, w=None, *, start, centers, candidates):
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
    for xs, ws in _subblocks(x, w):
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
    lab, dmin = nearest(x, centers)
    wt = np.ones(lab.shape[0]) if w is None else np.asarray(w, dtype=np.float64)
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


# --------------------------------------------------------------------------
# discriminative clustering (Kaski, Sinkkonen & Klami 2005)
# --------------------------------------------------------------------------
def dc_memberships(x, centers, sigma):
    """Normalized Gaussian memberships (4): ``y_j(x) ∝ exp(-||x - m_j||^2 / 2 sigma^2)``,
    by a stable softmax."""
    e = sq_distances(x, centers) * (-0.5 / sigma**2)
    e -= e.max(axis=1, keepdims=True)
    np.exp(e, out=e)
    e /= e.sum(axis=1, keepdims=True)
    return e


def _subset_rows(n, start, subset):
    """Rows of a block in a hashed train/validation split: ``subset`` is
    ``(seed, fraction, side)``; a row is in "train" when its hashed uniform
    number is below ``fraction``, else in "valid". None keeps every row."""
    if subset is None:
        return None
    seed, frac, side = subset
    u = row_hash_uniform(seed, start, n)
    return u < frac if side == "train" else u >= frac


def dc_count_stats(x, c, *, start=0, centers, sigma, n_classes, subset=None):
    """Smoothed counts of (10): ``n[j, i] = sum_{x: c(x) = i} y_j(x)``, (K, C)."""
    keep = _subset_rows(np.asarray(x).shape[0], start, subset)
    if keep is not None:
        x, c = np.asarray(x)[keep], np.asarray(c)[keep]
    counts = np.zeros((centers.shape[0], n_classes))
    for xs, cs in _subblocks(x, c):
        y = dc_memberships(xs, centers, sigma)
        onehot = np.zeros((xs.shape[0], n_classes))
        onehot[np.arange(xs.shape[0]), cs.astype(np.intp)] = 1.0
        counts += y.T @ onehot
    return {"counts": counts}


def dc_grad_stats(x, c, *, start=0, centers, sigma, L, subset=None):
    """Partial sums of the gradient (11) for a block.

    With ``W_j(x) = y_j(x) [L_{j,c(x)} - sum_l y_l(x) L_{l,c(x)}]`` (equal to
    ``sum_l y_l y_j (L_{j,c} - L_{l,c})`` as the memberships sum to one),
    ``sigma^2 dlogp/dm_j = sum_x W_j(x) x - (sum_x W_j(x)) m_j``; the block
    returns ``WX = W^T X`` (K, d) and ``W = sum_x W(x)`` (K,)."""
    keep = _subset_rows(np.asarray(x).shape[0], start, subset)
    if keep is not None:
        x, c = np.asarray(x)[keep], np.asarray(c)[keep]
    wx = np.zeros(centers.shape)
    ws = np.zeros(centers.shape[0])
    for xs, cs in _subblocks(x, c):
        y = dc_memberships(xs, centers, sigma)
        Lc = L[:, cs.astype(np.intp)].T  # (n, K): L_{l, c(x)}
        W = y * (Lc - np.einsum("nk,nk->n", y, Lc)[:, None])
        wx += W.T @ xs
        ws += W.sum(axis=0)
    return {"WX": wx, "W": ws}


def hard_count_stats(x, c, *, start=0, centers, n_classes, subset=None):
    """Unsmoothed counts ``n[j, i]`` of the Voronoi partition (9): samples of
    class i whose nearest prototype is j."""
    keep = _subset_rows(np.asarray(x).shape[0], start, subset)
    if keep is not None:
        x, c = np.asarray(x)[keep], np.asarray(c)[keep]
    k = centers.shape[0]
    if np.asarray(x).shape[0] == 0:
        return {"counts": np.zeros((k, n_classes))}
    lab = assign_labels(x, centers=centers)
    cc = np.asarray(c).astype(np.intp)
    return {"counts": np.bincount(lab * n_classes + cc, minlength=k * n_classes)
            .reshape(k, n_classes).astype(np.float64)}


# --------------------------------------------------------------------------
# isotropic Gaussian mixtures by EM (MoG; MDA2 joint with the classes)
# --------------------------------------------------------------------------
def mixture_log_joint(x, *, means, variances, log_weights):
    """``log pi_j + log N(x; mu_j, s_j^2 I)`` for every row and component (n, K)."""
    d = x.shape[1]
    return (log_weights[None, :] - 0.5 * d * np.log(2 * np.pi * variances)[None, :]
            - sq_distances(x, means) / (2 * variances)[None, :])


def mixture_em_stats(x, c=None, *, start=0, means, variances, log_weights, log_psi=None, n_classes=0,
                     subset=None):
    """E-step of an isotropic mixture for a block and the sums of its M-step.

    Without ``c`` (MoG) responsibilities are ``r_nj ∝ pi_j N(x_n; mu_j, s_j^2)``;
    with ``c`` and ``log_psi`` (MDA2, a joint mixture of x and the class) they
    are ``∝ pi_j N(x_n; mu_j, s_j^2) psi_{j, c_n}``. Returns ``R = sum r``,
    ``S = sum r x``, ``Q = sum r |x|^2``, the log likelihood and, with ``c``,
    ``N[j, i] = sum_{c_n = i} r_nj``."""
    keep = _subset_rows(np.asarray(x).shape[0], start, subset)
    if keep is not None:
        x = np.asarray(x)[keep]
        c = None if c is None else np.asarray(c)[keep]
    k, d = means.shape
    R, S, Q, ll = np.zeros(k), np.zeros((k, d)), np.zeros(k), 0.0
    N = np.zeros((k, n_classes)) if c is not None else None
    for xs, cs in _subblocks(x, c):
        lj = mixture_log_joint(xs, means=means, variances=variances, log_weights=log_weights)
        if cs is not None and log_psi is not None:
            lj += log_psi[:, cs.astype(np.intp)].T
        mx = lj.max(axis=1, keepdims=True)
        r = np.exp(lj - mx)
        z = r.sum(axis=1, keepdims=True)
        r /= z
        ll += float((np.log(z) + mx).sum())
        R += r.sum(axis=0)
        S += r.T @ xs
        Q += r.T @ np.einsum("ij,ij->i", xs, xs)
        if N is not None:
            onehot = np.zeros((xs.shape[0], n_classes))
            onehot[np.arange(xs.shape[0]), cs.astype(np.intp)] = 1.0
            N += r.T @ onehot
    out = {"R": R, "S": S, "Q": Q, "loglik": np.array(ll)}
    if N is not None:
        out["N"] = N
    return out


def mixture_assign(x, *, means, variances, log_weights):
    """Most probable component of each row given x alone (int64)."""
    x = np.asarray(x, dtype=np.float64)
    return np.argmax(mixture_log_joint(x, means=means, variances=variances, log_weights=log_weights),
                     axis=1).astype(np.int64)


def dc_reg_stats(x, *, start=0, centers, kind, lam, subset=None):
    """Sums for the regularizers of DC on (a hashed subset of) a block:
    ``kind="mog"`` the soft K-means sums at ``beta = 2 lam`` (14), ``kind="vq"``
    the hard Lloyd sums and inertia (15)."""
    keep = _subset_rows(np.asarray(x).shape[0], start, subset)
    if keep is not None:
        x = np.asarray(x)[keep]
    if kind == "mog":
        return soft_kmeans_stats(x, centers=centers, beta=2.0 * lam)
    return lloyd_stats(x, centers=centers)


def online_dc_block(state, x, c, *, start, sigma, alpha0, total_steps, seed, subset=None):
    """The stochastic on-line DC algorithm (5)-(6) over the rows of one block,
    in a random order (seeded by ``seed`` and the block's first row).

    ``state`` holds the prototypes ``m`` (K, d), the softmax parameters
    ``gamma`` (K, C) of the class distributions psi_j, and the step count
    ``t``. For each sample two clusters j, l are drawn from the memberships
    (4); m_j moves by ``-alpha (x - m_j) log(psi_li / psi_ji)`` (5) and
    ``gamma_j`` by ``-2 alpha (psi_j - e_c)`` (6) (the paper's coefficient for
    (6) is twice that of (5)); then j and l are swapped and both are adapted
    again. ``alpha`` decreases linearly from ``alpha0`` to 0 over
    ``total_steps``. Returns the new state."""
    keep = _subset_rows(np.asarray(x).shape[0], start, subset)
    if keep is not None:
        x, c = np.asarray(x)[keep], np.asarray(c)[keep]
    m = np.array(state["m"], dtype=np.float64)
    g = np.array(state["gamma"], dtype=np.float64)
    t = int(state["t"])
    x = np.asarray(x, dtype=np.float64)
    c = np.asarray(c).astype(np.intp)
    k = m.shape[0]
    rng = np.random.default_rng([int(seed), int(start)])
    inv2s2 = 0.5 / sigma**2
    for idx in rng.permutation(x.shape[0]):
        xi, ci = x[idx], c[idx]
        alpha = alpha0 * max(0.0, 1.0 - t / total_steps)
        e = -inv2s2 * ((xi - m) ** 2).sum(axis=1)
        y = np.exp(e - e.max())
        y /= y.sum()
        j, l = rng.choice(k, size=2, p=y)
        for a, b in ((j, l), (l, j)):
            ga, gb = g[a] - g[a].max(), g[b] - g[b].max()
            log_psi_a = ga - np.log(np.exp(ga).sum())
            log_psi_b = gb - np.log(np.exp(gb).sum())
            if a != b:
                m[a] -= alpha * (xi - m[a]) * (log_psi_b[ci] - log_psi_a[ci])
            psi_a = np.exp(log_psi_a)
            psi_a[ci] -= 1.0
            g[a] -= 2.0 * alpha * psi_a
        t += 1
    return {"m": m, "gamma": g, "t": t}


# --------------------------------------------------------------------------
# Associative clustering (Sinkkonen, Kaski, Nikkilä & Lahti, §III)
# --------------------------------------------------------------------------
def ac_count_stats(x, y, *, start=0, mx, my, sx, sy, subset=None):
    """Smoothed cross counts ``n_ij = sum_r g_i(x_r) g_j(y_r)`` (K, L) of a
    block, with normalized Gaussian memberships of width ``sx`` / ``sy``
    (:func:`dc_memberships`); the margins are its row and column sums."""
    keep = _subset_rows(np.asarray(x).shape[0], start, subset)
    if keep is not None:
        x, y = np.asarray(x)[keep], np.asarray(y)[keep]
    n = np.zeros((mx.shape[0], my.shape[0]))
    for xs, ys in _subblocks(x, y):
        n += dc_memberships(xs, mx, sx).T @ dc_memberships(ys, my, sy)
    return {"counts": n}


def ac_grad_stats(x, y, *, start=0, mx, my, sx, sy, psi, psi_x, psi_y, lam_x, lam_y, subset=None):
    """Partial sums of the gradient of log BF'' for a block.

    With ``A_i(r) = sum_j psi_ij g_j(y_r) - lam_x psi_x_i`` (the report's
    ``L_i^(x)(y)``), ``W_i(r) = g_i(x_r) [A_i(r) - sum_i' g_i'(x_r) A_i'(r)]``
    and ``sx^2 dlogBF''/dm_i^(x) = sum_r W_i(r) x_r - (sum_r W_i(r)) m_i^(x)``;
    symmetrically for y. Returns ``WX`` (K, dx), ``Wx`` (K,), ``WY`` (L, dy),
    ``Wy`` (L,)."""
    keep = _subset_rows(np.asarray(x).shape[0], start, subset)
    if keep is not None:
        x, y = np.asarray(x)[keep], np.asarray(y)[keep]
    out = {"WX": np.zeros(mx.shape), "Wx": np.zeros(mx.shape[0]), "WY": np.zeros(my.shape),
           "Wy": np.zeros(my.shape[0])}
    for xs, ys in _subblocks(x, y):
        gx, gy = dc_memberships(xs, mx, sx), dc_memberships(ys, my, sy)
        a = gy @ psi.T - lam_x * psi_x[None, :]  # (n, K)
        b = gx @ psi - lam_y * psi_y[None, :]  # (n, L)
        wx = gx * (a - np.einsum("nk,nk->n", gx, a)[:, None])
        wy = gy * (b - np.einsum("nl,nl->n", gy, b)[:, None])
        out["WX"] += wx.T @ xs
        out["Wx"] += wx.sum(axis=0)
        out["WY"] += wy.T @ ys
        out["Wy"] += wy.sum(axis=0)
    return out


def ac_hard_count_stats(x, y, *, start=0, mx, my, subset=None):
    """Hard contingency table ``n_ij``: pairs whose x is nearest to
    prototype i and whose y is nearest to prototype j (K, L)."""
    keep = _subset_rows(np.asarray(x).shape[0], start, subset)
    if keep is not None:
        x, y = np.asarray(x)[keep], np.asarray(y)[keep]
    k, l_ = mx.shape[0], my.shape[0]
    if np.asarray(x).shape[0] == 0:
        return {"counts": np.zeros((k, l_))}
    lx, ly = assign_labels(x, centers=mx), assign_labels(y, centers=my)
    return {"counts": np.bincount(lx * l_ + ly, minlength=k * l_).reshape(k, l_).astype(np.float64)}


def cross_gram_stats(x, y):
    """Count, sums, ``X^T X``, ``Y^T Y`` and ``X^T Y`` of a paired block
    (canonical correlation analysis of two views)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    return {"n": np.array(x.shape[0], dtype=np.int64), "sx": x.sum(axis=0), "sy": y.sum(axis=0),
            "xtx": x.T @ x, "yty": y.T @ y, "xty": x.T @ y}


def project_rows(x, *, mean, W):
    """``(x - mean) @ W`` of a block (a linear projection)."""
    return (np.asarray(x, dtype=np.float64) - mean) @ W


def label_sum_stats(x, labels, *, k):
    """Per-label sums and counts of a block's rows (cluster means)."""
    lab = np.asarray(labels).astype(np.intp)
    x = np.asarray(x, dtype=np.float64)
    s = np.zeros((k, x.shape[1]))
    np.add.at(s, lab, x)
    return {"s": s, "n": np.bincount(lab, minlength=k).astype(np.float64)}


# --------------------------------------------------------------------------
# k nearest neighbours, block against block (SMIC's kernel (7))
# --------------------------------------------------------------------------
def knn_block(xq, xd, *, q_start=None, d_start=0, t):
    """The ``t`` nearest rows of the data block ``xd`` to each query row of
    ``xq`` (global row numbers ``d_start..`` for ``xd``). When the queries are
    rows of the same data set (``q_start`` given), a row is never its own
    neighbour. Returns ``(dist2 (nq, t), index (nq, t))`` sorted by
    distance, padded with ``inf`` / ``-1`` when ``xd`` has fewer than ``t``
    candidates.

    The candidates come from scikit-learn's ``NearestNeighbors``
    (``algorithm="auto"``: a k-d tree in low dimension, its chunked brute
    force above 15 features); the squared distances of the kept pairs are
    then recomputed from the differences, so duplicates are exactly 0.
    Each query asks for one neighbour more than needed and drops its own
    row if present, else its farthest candidate.
    """
    from sklearn.neighbors import NearestNeighbors

    xq, xd = np.asarray(xq, dtype=np.float64), np.asarray(xd, dtype=np.float64)
    nq, nd = xq.shape[0], xd.shape[0]
    self_query = q_start is not None
    k = min(t + (1 if self_query else 0), nd)
    if nq == 0 or k == 0:
        return knn_top(np.zeros((nq, 0)), np.zeros((nq, 0), dtype=np.int64), t)
    ind = NearestNeighbors(n_neighbors=k, algorithm="auto").fit(xd).kneighbors(xq, return_distance=False)
    if self_query:
        own = np.arange(nq) + (q_start - d_start)
        drop = ind == own[:, None]
        drop[~drop.any(axis=1), -1] = True
        ind = ind[~drop].reshape(nq, k - 1)
    diff = xq[:, None, :] - xd[ind]
    d2 = np.einsum("ijk,ijk->ij", diff, diff)
    return knn_top(d2, ind.astype(np.int64) + d_start, t)


def knn_top(d2, idx, t):
    """The ``t`` smallest entries per row of ``d2`` with their ``idx``
    (ties broken by the smaller index), sorted; padded with inf / -1."""
    n, m = d2.shape
    if m < t:
        d2 = np.hstack([d2, np.full((n, t - m), np.inf)])
        idx = np.hstack([idx, np.full((n, t - m), -1)])
        m = t
    order = np.lexsort((idx, d2), axis=1)[:, :t] if n else np.zeros((0, t), dtype=np.intp)
    return np.take_along_axis(d2, order, 1), np.take_along_axis(np.asarray(idx), order, 1)


def knn_merge(parts, *, t):
    """Merge partial ``(dist2, index)`` lists of the same query rows."""
    d2 = np.hstack([p[0] for p in parts])
    idx = np.hstack([p[1] for p in parts])
    return knn_top(d2, idx, t)


def knn_query_block(xd, *, start=0, xq, t):
    """``t`` nearest rows of one data block to the (new) query rows ``xq``;
    a map-reduce kernel over the data blocks (merge with :func:`knn_merge`)."""
    return knn_block(xq, xd, q_start=None, d_start=start, t=t)


# --------------------------------------------------------------------------
# SMIC's out-of-sample rule and LSMI (Sugiyama et al., §2.3-§2.4)
# --------------------------------------------------------------------------
def local_scaling_values(d2, sigma_a, sigma_b):
    """``exp(-d2 / (2 sigma_a sigma_b))`` of kernel (7), elementwise.

    Zero scales (a point with ``t`` exact duplicates) follow the limit:
    the value is 1 for a zero distance and 0 for a positive one, never NaN.
    """
    d2 = np.asarray(d2, dtype=np.float64)
    denom = 2.0 * np.asarray(sigma_a) * np.asarray(sigma_b)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(d2 <= 0.0, 0.0, d2 / denom)
    return np.exp(-ratio)


#: rows per sub-block of the SMIC/LSMI kernels: their temporaries are
#: (rows x bases) or (rows x training rows), so a store chunk of 500 000 rows
#: is processed in pieces and worker memory stays bounded
SUB_ROWS = 8192


def _in_sub_blocks(rows_kernel, arrays, start, **params):
    """``rows_kernel`` over sub-blocks of at most :data:`SUB_ROWS` rows of the
    row-aligned ``arrays``, partial sums added with :func:`combine_sum`."""
    n = np.asarray(arrays[0]).shape[0]
    return combine_sum([rows_kernel(*(a[i:i + SUB_ROWS] for a in arrays), start=start + i, **params)
                        for i in range(0, max(n, 1), SUB_ROWS)])


def smic_oos_stats(xd, phi, sigma, *, start=0, xq, sigma_q, nbr):
    """:func:`_smic_oos_rows` over sub-blocks of at most :data:`SUB_ROWS`
    training rows (the distance table is new rows x training rows)."""
    return _in_sub_blocks(_smic_oos_rows, (xd, phi, sigma), start, xq=xq, sigma_q=sigma_q, nbr=nbr)


def _smic_oos_rows(xd, phi, sigma, *, start=0, xq, sigma_q, nbr):
    """One training block's share of the out-of-sample sums of SMIC, §2.3.

    For new rows ``xq`` with local scales ``sigma_q`` and their ``t``
    nearest training rows ``nbr`` (global indices), kernel (7) links a new
    row and a training row ``i`` when ``i`` is among the new row's
    neighbours or the new row is closer to ``i`` than ``i``'s own ``t``-th
    neighbour (``sigma[i]``). Returns ``kphi = K(xq, xd) @ phi`` and the row
    sums ``ksum`` of ``K(xq, xd)``.
    """
    xd = np.asarray(xd, dtype=np.float64)
    xq = np.asarray(xq, dtype=np.float64)
    sigma = np.asarray(sigma, dtype=np.float64)
    nq, nd = xq.shape[0], xd.shape[0]
    local = np.asarray(nbr, dtype=np.int64) - start
    r, c = np.nonzero((local >= 0) & (local < nd))
    is_nbr = np.zeros((nq, nd), dtype=bool)
    is_nbr[r, local[r, c]] = True
    # candidates: the new rows' neighbours, and the training rows whose scale
    # the expanded distance (with a little slack) reaches - decided on exact
    # differences below
    rows, cols = np.nonzero(is_nbr | (sq_distances(xq, xd) <= sigma[None, :] ** 2 * (1.0 + 1e-9) + 1e-300))
    diff = xq[rows] - xd[cols]
    d2e = np.einsum("ij,ij->i", diff, diff)
    keep = is_nbr[rows, cols] | (d2e <= sigma[cols] ** 2)
    rows, cols, d2e = rows[keep], cols[keep], d2e[keep]
    vals = local_scaling_values(d2e, np.asarray(sigma_q, dtype=np.float64)[rows], sigma[cols])
    phi = np.asarray(phi, dtype=np.float64)
    kphi = np.zeros((nq, phi.shape[1]))
    np.add.at(kphi, rows, vals[:, None] * phi[cols])
    return {"kphi": kphi, "ksum": np.bincount(rows, weights=vals, minlength=nq).astype(np.float64)}


#: Gaussian basis values below this are set to 0 (their products would be
#: denormal numbers, which make BLAS and LAPACK 10-100x slower)
LSMI_TINY = 1e-100


def gaussian_basis(x, centers, width, *, x_sq=None, d2=None):
    """Gaussian kernel (11) of SMIC's LSMI, ``exp(-||x - c||^2 / (2 width^2))``,
    with values below :data:`LSMI_TINY` floored to 0 (``d2``: the squared
    distances, if already computed)."""
    if d2 is None:
        d2 = sq_distances(x, centers, x_sq)
    phi = np.exp(d2 * (-0.5 / (width * width)))
    phi[phi < LSMI_TINY] = 0.0
    return phi


def lsmi_stats(x, labels, *, start=0, centers, widths, n_classes, n_folds, seed, shift, scale):
    """:func:`_lsmi_stats_rows` over sub-blocks of at most :data:`SUB_ROWS` rows."""
    return _in_sub_blocks(_lsmi_stats_rows, (x, labels), start, centers=centers, widths=widths,
                          n_classes=n_classes, n_folds=n_folds, seed=seed, shift=shift, scale=scale)


def _lsmi_stats_rows(x, labels, *, start=0, centers, widths, n_classes, n_folds, seed, shift, scale):
    """Per-fold sums behind LSMI (Sugiyama et al., §2.4) for every width.

    Rows are standardized with ``shift``/``scale``, assigned to one of
    ``n_folds`` hashed folds, and expanded in the Gaussian bases at
    ``centers`` (already standardized). For fold ``m`` and width ``w``:
    ``G[m, w] = Phi_m^T Phi_m`` (the sum over samples inside H-hat; it does
    not depend on the labels), ``S[m, w] = onehot(y_m)^T Phi_m`` (h-hat for
    every class) and ``count[m]`` the label counts. ``labels`` of shape
    ``(n, L)`` give ``L`` labelings at once (``S (L, M, W, c, b)``,
    ``count (L, M, c)``): SMIC scores all its candidate clusterings in one
    pass.
    """
    z = (np.asarray(x, dtype=np.float64) - shift) / scale
    lab = np.asarray(labels).astype(np.intp)
    single = lab.ndim == 1
    lab = lab.reshape(lab.shape[0], -1)
    n_lab = lab.shape[1]
    folds = hashed_fold_ids(z, start=start, seed=seed, n_folds=n_folds)
    order = np.argsort(folds, kind="stable")  # each fold a contiguous run
    z, lab = z[order], lab[order]
    bounds = np.concatenate([[0], np.cumsum(np.bincount(folds, minlength=n_folds))])
    b = centers.shape[0]
    G = np.zeros((n_folds, len(widths), b, b))
    S = np.zeros((n_lab, n_folds, len(widths), n_classes, b))
    count = np.zeros((n_lab, n_folds, n_classes))
    d2 = sq_distances(z, centers)
    onehot = np.eye(n_classes)[lab].transpose(1, 0, 2)  # (L, rows, c)
    for w, width in enumerate(widths):
        phi = gaussian_basis(None, None, width, d2=d2)
        for m in range(n_folds):
            lo, hi = bounds[m], bounds[m + 1]
            if hi > lo:
                p = phi[lo:hi]
                G[m, w] = p.T @ p
                S[:, m, w] = np.matmul(onehot[:, lo:hi].transpose(0, 2, 1), p)
    for m in range(n_folds):
        count[:, m] = onehot[:, bounds[m]:bounds[m + 1]].sum(axis=1)
    if single:
        S, count = S[0], count[0]
    return {"G": G, "S": S, "count": count}
