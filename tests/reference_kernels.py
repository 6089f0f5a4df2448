"""The block kernels' formulas in plain numpy: the references the compiled
kernels of the package (``infoclust_dask/kernels/_loops.py``) are tested
against (``tests/kernels/test_compiled.py``) and benchmarked against
(``benchmarks/``).

Each function takes the arguments of the package kernel of the same name
and returns the same partial sums. They are written for reading, not
speed: whole (rows x centres) matrices in float64 (rows taken in pieces of
~1 MB so that a benchmark's 1e6 rows fit), the softmax by max-subtraction,
the distances by the ``|x|^2 - 2 x.m + |m|^2`` expansion where only an
argmin needs them and by explicit differences where their value is
returned. Formulas: MacKay (2003, ch. 20) eq. 20.3-20.9 for (soft)
K-means; Kaski, Sinkkonen & Klami (2005) eq. (4), (10), (11) for DC;
Sinkkonen, Kaski, Nikkilä & Lahti (AC technical report, §III) for AC; the
isotropic mixture's EM; Gondek, Vaithyanathan & Garg (2005) eq. (4.15) and
(A.2) for CMBC's E-step.

Nothing here imports ``infoclust_dask``.
"""

from __future__ import annotations

import numpy as np

#: bytes of float64 rows per piece
PIECE_BYTES = 1 << 20


def pieces(x, *companions):
    """``(x_piece, *companion_pieces)`` as float64 (companions: weights,
    labels, a second view, or None), ~1 MB of rows each."""
    x = np.asarray(x)
    rows = max(256, PIECE_BYTES // (8 * max(1, x.shape[1] if x.ndim > 1 else 1)))
    for i in range(0, x.shape[0], rows):
        out = [np.asarray(x[i:i + rows], dtype=np.float64)]
        out += [None if c is None else np.asarray(c)[i:i + rows] for c in companions]
        yield tuple(out)


def sq_distances(x, centers):
    """``||x_n - m_k||^2`` by the expansion, clipped at 0 (n, K)."""
    x = np.asarray(x, dtype=np.float64)
    c = np.asarray(centers, dtype=np.float64)
    d = (x * x).sum(1)[:, None] - 2.0 * x @ c.T + (c * c).sum(1)[None, :]
    return np.maximum(d, 0.0)


def softmax(e):
    """``(exp(e - max) / sum, log sum exp(e))`` along the last axis."""
    emax = e.max(axis=-1, keepdims=True)
    r = np.exp(e - emax)
    z = r.sum(axis=-1, keepdims=True)
    return r / z, (np.log(z) + emax)[..., 0]


def _weights(w, n):
    return np.ones(n) if w is None else np.asarray(w, dtype=np.float64)


def _onehot(labels, n_classes):
    lab = np.asarray(labels).astype(np.intp)
    out = np.zeros((lab.shape[0], n_classes))
    out[np.arange(lab.shape[0]), lab] = 1.0
    return out


def nearest(x, centers):
    """Nearest centre (ties: the lowest index) and the exact squared distance
    to it (recomputed by differences)."""
    c = np.asarray(centers, dtype=np.float64)
    labs, dists = [np.zeros(0, np.int64)], [np.zeros(0)]
    for (xs,) in pieces(x):
        if xs.shape[0] == 0:
            continue
        lab = np.argmin(sq_distances(xs, c), axis=1)
        diff = xs - c[lab]
        labs.append(lab.astype(np.int64))
        dists.append((diff * diff).sum(1))
    return np.concatenate(labs), np.concatenate(dists)


def assign_labels(x, *, centers):
    return nearest(x, centers)[0]


def _far(x, dmin, w, n_far):
    score = dmin if w is None else dmin * (np.asarray(w) > 0)
    k = min(n_far, dmin.shape[0])
    idx = np.argsort(-score, kind="stable")[:k]
    return dmin[idx], np.asarray(x, dtype=np.float64)[idx]


def lloyd_stats(x, w=None, *, centers, n_far=0):
    """The Lloyd update's sums (MacKay 2003, eq. 20.3-20.6): ``counts[k] =
    sum w_n [label_n = k]``, ``sums[k] = sum w_n [label_n = k] x_n``, the
    exact inertia; with ``n_far`` the farthest rows (a set: the kernel's
    order may differ, compare sorted)."""
    c = np.asarray(centers, dtype=np.float64)
    x = np.asarray(x)
    lab, dmin = nearest(x, c)
    wt = _weights(w, x.shape[0])
    onehot = _onehot(lab, c.shape[0]) * wt[:, None]
    out = {"counts": onehot.sum(0), "sums": onehot.T @ np.asarray(x, dtype=np.float64),
           "inertia": np.array(wt @ dmin)}
    if n_far:
        out["far_d"], out["far_x"] = _far(x, dmin, w, n_far)
    return out


def lloyd_step_stats(x, w=None, *, centers):
    return lloyd_stats(x, w, centers=centers)


def inertia_stats(x, w=None, *, centers):
    st = lloyd_stats(x, w, centers=centers)
    return {"inertia": st["inertia"], "counts": st["counts"]}


def closest_count_stats(x, w=None, *, centers):
    lab, dmin = nearest(x, centers)
    wt = _weights(w, lab.shape[0])
    return {"counts": np.bincount(lab, weights=wt, minlength=np.asarray(centers).shape[0]), "phi": np.array(wt @ dmin)}


def soft_kmeans_stats(x, w=None, *, centers, beta):
    """``R`` (20.9), ``S`` (numerator of 20.8) and ``sum w log Z`` with
    responsibilities (20.7) at ``d = ||x - m||^2 / 2``."""
    c = np.asarray(centers, dtype=np.float64)
    k, d = c.shape
    R, S, lz = np.zeros(k), np.zeros((k, d)), 0.0
    for xs, ws in pieces(x, w):
        r, log_z = softmax(-0.5 * beta * sq_distances(xs, c))
        wt = _weights(ws, xs.shape[0])
        R += wt @ r
        S += (r * wt[:, None]).T @ xs
        lz += float(wt @ log_z)
    return {"R": R, "S": S, "log_z": np.array(lz)}


def soft_scatter_stats(x, w=None, *, centers, beta):
    """``R`` and ``Q[k] = sum_n w_n r_k(x_n) (x_n - m_k)(x_n - m_k)^T`` with
    responsibilities (20.7), one centre at a time."""
    c = np.asarray(centers, dtype=np.float64)
    k, d = c.shape
    R, Q = np.zeros(k), np.zeros((k, d, d))
    for xs, ws in pieces(x, w):
        xs = np.asarray(xs, dtype=np.float64)
        r, _ = softmax(-0.5 * beta * sq_distances(xs, c))
        r = r * _weights(ws, xs.shape[0])[:, None]
        R += r.sum(axis=0)
        for j in range(k):
            diff = xs - c[j]
            Q[j] += (diff * r[:, j:j + 1]).T @ diff
    return {"R": R, "Q": Q}


def dc_memberships(x, centers, sigma):
    """Normalized Gaussian memberships (4) of DC."""
    return softmax(-0.5 / sigma**2 * sq_distances(x, centers))[0]


def dc_count_stats(x, c, *, centers, sigma, n_classes):
    """Smoothed counts (10): ``n[j, i] = sum_{x: c(x) = i} y_j(x)``."""
    counts = np.zeros((np.asarray(centers).shape[0], n_classes))
    for xs, cs in pieces(x, c):
        counts += dc_memberships(xs, centers, sigma).T @ _onehot(cs, n_classes)
    return {"counts": counts}


def dc_grad_stats(x, c, *, centers, sigma, L):
    """Sums of the gradient (11): ``WX = W^T X``, ``W = sum_x W(x)`` with
    ``W_j(x) = y_j(x) [L_{j,c(x)} - sum_l y_l(x) L_{l,c(x)}]``."""
    m = np.asarray(centers, dtype=np.float64)
    WX, W = np.zeros(m.shape), np.zeros(m.shape[0])
    for xs, cs in pieces(x, c):
        y = dc_memberships(xs, m, sigma)
        Lc = np.asarray(L)[:, np.asarray(cs).astype(np.intp)].T
        Wx = y * (Lc - (y * Lc).sum(1)[:, None])
        WX += Wx.T @ xs
        W += Wx.sum(0)
    return {"WX": WX, "W": W}


def ac_count_stats(x, y, *, mx, my, sx, sy):
    """Smoothed cross counts ``n_ij = sum_r g_i(x_r) g_j(y_r)`` of AC."""
    n = np.zeros((np.asarray(mx).shape[0], np.asarray(my).shape[0]))
    for xs, ys in pieces(x, y):
        n += dc_memberships(xs, mx, sx).T @ dc_memberships(np.asarray(ys, dtype=np.float64), my, sy)
    return {"counts": n}


def ac_grad_stats(x, y, *, mx, my, sx, sy, psi, psi_x, psi_y, lam_x, lam_y):
    """Gradient sums of log BF'' of AC: ``W_i(r) = g_i(x_r) [A_i(r) - sum_i'
    g_i'(x_r) A_i'(r)]`` with ``A_i(r) = sum_j psi_ij g_j(y_r) - lam_x
    psi_x_i``, symmetrically for y."""
    out = {"WX": np.zeros(np.shape(mx)), "Wx": np.zeros(np.shape(mx)[0]), "WY": np.zeros(np.shape(my)),
           "Wy": np.zeros(np.shape(my)[0])}
    for xs, ys in pieces(x, y):
        ys = np.asarray(ys, dtype=np.float64)
        gx, gy = dc_memberships(xs, mx, sx), dc_memberships(ys, my, sy)
        a = gy @ psi.T - lam_x * psi_x[None, :]
        b = gx @ psi - lam_y * psi_y[None, :]
        wx = gx * (a - (gx * a).sum(1)[:, None])
        wy = gy * (b - (gy * b).sum(1)[:, None])
        out["WX"] += wx.T @ xs
        out["Wx"] += wx.sum(0)
        out["WY"] += wy.T @ ys
        out["Wy"] += wy.sum(0)
    return out


def mixture_em_stats(x, c=None, *, means, variances, log_weights, log_psi=None, n_classes=0):
    """E-step of an isotropic mixture (times ``psi_{j, c}`` with classes and
    ``log_psi``) and the M-step sums ``R``, ``S``, ``Q``, the log likelihood,
    ``N`` with classes."""
    mu = np.asarray(means, dtype=np.float64)
    k, d = mu.shape
    v = np.asarray(variances, dtype=np.float64)
    R, S, Q, ll = np.zeros(k), np.zeros((k, d)), np.zeros(k), 0.0
    N = np.zeros((k, n_classes))
    for xs, cs in pieces(x, c):
        lj = log_weights[None, :] - 0.5 * d * np.log(2 * np.pi * v)[None, :] - sq_distances(xs, mu) / (2 * v)[None, :]
        if cs is not None and log_psi is not None:
            lj = lj + log_psi[:, np.asarray(cs).astype(np.intp)].T
        r, log_z = softmax(lj)
        ll += float(log_z.sum())
        R += r.sum(0)
        S += r.T @ xs
        Q += r.T @ (xs * xs).sum(1)
        if cs is not None:
            N += r.T @ _onehot(cs, n_classes)
    out = {"R": R, "S": S, "Q": Q, "loglik": np.array(ll)}
    if c is not None:
        out["N"] = N
    return out


def cmbc_estep_stats(y, *, log_theta, log_1m_theta, temperature):
    """CMBC's annealed E-step (4.15) with equal priors on dense binary rows:
    ``S1 = y^T q``, ``R = sum q``, the log likelihood (A.2) at ``T = 1`` and
    ``sum max q``."""
    y = np.asarray(y, dtype=np.float64)
    ll = y @ (log_theta - log_1m_theta) + log_1m_theta.sum(0)[None, :]
    q, _ = softmax(ll / temperature)
    _, log_z = softmax(ll)
    return {"S1": y.T @ q, "R": q.sum(0), "loglik": np.array(log_z.sum()), "hard": np.array(q.max(1).sum())}


def moments_stats(x, w=None, *, shift=None):
    """Count, weighted sums and sums of squares of ``x - shift`` per
    feature, with non-finite entries left out and counted."""
    x = np.asarray(x, dtype=np.float64)
    one_d = x.ndim == 1
    x = x.reshape(x.shape[0], -1)
    xs = x - (0.0 if shift is None else np.asarray(shift, dtype=np.float64).reshape(-1))
    wt = _weights(w, x.shape[0])
    with np.errstate(invalid="ignore", over="ignore"):
        bad = ~np.isfinite(xs)
        xs = np.where(bad, 0.0, xs)
        s1, s2 = wt @ xs, wt @ (xs * xs)
    if one_d:
        s1, s2 = s1[0], s2[0]
    return {"n": np.array(x.shape[0], dtype=np.int64), "n_bad": np.array(int(bad.sum()), dtype=np.int64),
            "w": np.array(wt.sum()), "s1": np.asarray(s1), "s2": np.asarray(s2)}


def smic_directed(d2, idx, *, start, t, sigma):
    """The directed entries of SMIC's kernel (7) (Sugiyama et al. 2014) of
    the rows ``start ..`` of one block: ``(local rows, global columns,
    exp(-d2 / (2 sigma_i sigma_j)))``, padded entries (-1) left out, a zero
    scale giving 1 for a zero distance and 0 else."""
    d2 = np.asarray(d2, dtype=np.float64)[:, :t]
    cols = np.asarray(idx)[:, :t].ravel()
    rows = np.repeat(np.arange(d2.shape[0], dtype=np.int64), t)
    ok = cols >= 0
    rows, cols, d2 = rows[ok], cols[ok].astype(np.int64), d2.ravel()[ok]
    sigma = np.asarray(sigma, dtype=np.float64)
    denom = 2.0 * sigma[start + rows] * sigma[cols]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(d2 <= 0.0, 0.0, d2 / denom)
    return rows, cols, np.exp(-ratio)


def smic_kernel_pieces(d2, idx, *, start, t, sigma, bounds):
    """One block's directed entries transposed and split by the block of
    their column (stable): ``(row local to block b, global column, value)``."""
    rows, cols, vals = smic_directed(d2, idx, start=start, t=t, sigma=sigma)
    bounds = np.asarray(bounds, dtype=np.int64)
    itype = np.int32 if bounds[-1] < 2**31 else np.int64
    dest = np.searchsorted(bounds, cols, side="right") - 1
    order = np.argsort(dest, kind="stable")
    cuts = np.searchsorted(dest[order], np.arange(len(bounds)))
    out = []
    for b in range(len(bounds) - 1):
        sel = order[cuts[b]:cuts[b + 1]]
        out.append(((cols[sel] - bounds[b]).astype(itype), (rows[sel] + start).astype(itype), vals[sel]))
    return out


def smic_kernel_block(d2, idx, incoming, *, start, t, sigma, n, rank=None):
    """One block's rows of ``max(A, A^T, I)`` by scipy (coordinates to CSR,
    ``maximum`` twice, exact zeros removed), columns sorted; with ``rank``
    also ``(local, csr)``: the rows in the order of their rank with each
    column ``c`` renamed ``rank[c]``, each row's entries in stored order."""
    import scipy.sparse as sp

    m = np.asarray(d2).shape[0]
    rows, cols, vals = smic_directed(d2, idx, start=start, t=t, sigma=sigma)
    A = sp.csr_matrix((vals, (rows, cols)), shape=(m, n))
    if incoming:
        tr = sp.csr_matrix((np.concatenate([p[2] for p in incoming]),
                            (np.concatenate([p[0] for p in incoming]).astype(np.int64),
                             np.concatenate([p[1] for p in incoming]).astype(np.int64))), shape=(m, n))
        A = A.maximum(tr)
    eye = sp.csr_matrix((np.ones(m), (np.arange(m), start + np.arange(m))), shape=(m, n))
    K = A.maximum(eye).tocsr()
    K.eliminate_zeros()
    K.sort_indices()
    if rank is None:
        return K
    local = np.argsort(rank[start:start + m], kind="stable")
    R = K[local]
    R.indices = rank[R.indices].astype(R.indices.dtype)
    return local, R
