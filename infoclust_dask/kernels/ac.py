"""Associative clustering block kernels (Sinkkonen, Kaski, Nikkilä & Lahti,
"Associative clustering (AC): technical details", §III): smoothed cross
counts, the gradient sums of log BF'' for both prototype sets, and the hard
contingency table. Each pass is declared once below its kernel.
"""

from __future__ import annotations

import numpy as np

from . import _compiled
from ._common import Pass, subblocks
from .dc import dc_memberships
from .kmeans import assign_labels

__all__ = ["ac_count_stats", "AC_COUNTS", "ac_grad_stats", "AC_GRAD", "ac_fused_stats", "AC_FUSED",
           "ac_hard_count_stats", "AC_HARD_COUNTS"]


def ac_count_stats(x: np.ndarray, y: np.ndarray, *, mx: np.ndarray, my: np.ndarray, sx: float, sy: float
                  ) -> dict[str, np.ndarray]:
    """Smoothed cross counts ``n_ij = sum_r g_i(x_r) g_j(y_r)`` (K, L) of a
    block, with normalized Gaussian memberships of width ``sx`` / ``sy``
    (:func:`dc_memberships`); the margins are its row and column sums.
    One compiled loop (:func:`infoclust_dask.kernels._compiled.ac_counts`)."""
    return _compiled.ac_counts(x, y, mx=mx, my=my, sx=sx, sy=sy)


def ac_grad_stats(x: np.ndarray, y: np.ndarray, *, mx: np.ndarray, my: np.ndarray, sx: float, sy: float,
                  psi: np.ndarray, psi_x: np.ndarray, psi_y: np.ndarray, lam_x: float, lam_y: float
                 ) -> dict[str, np.ndarray]:
    """Partial sums of the gradient of log BF'' for a block.

    With ``A_i(r) = sum_j psi_ij g_j(y_r) - lam_x psi_x_i`` (the report's
    ``L_i^(x)(y)``), ``W_i(r) = g_i(x_r) [A_i(r) - sum_i' g_i'(x_r) A_i'(r)]``
    and ``sx^2 dlogBF''/dm_i^(x) = sum_r W_i(r) x_r - (sum_r W_i(r)) m_i^(x)``;
    symmetrically for y. Returns ``WX`` (K, dx), ``Wx`` (K,), ``WY`` (L, dy),
    ``Wy`` (L,), in one compiled loop
    (:func:`infoclust_dask.kernels._compiled.ac_grad`)."""
    return _compiled.ac_grad(x, y, mx=mx, my=my, sx=sx, sy=sy, psi=psi, psi_x=psi_x, psi_y=psi_y,
                             lam_x=lam_x, lam_y=lam_y)


#: numbers in the fused kernel's (rows x K^2 L) temporary: rows are taken in pieces this small
FUSED_BUDGET = 2**20


def ac_fused_stats(x: np.ndarray, y: np.ndarray, *, mx: np.ndarray, my: np.ndarray, sx: float, sy: float
                   ) -> dict[str, np.ndarray]:
    """The counts and, in the same pass, everything the gradient needs
    before the digamma terms are known.

    :func:`ac_grad_stats` is linear in ``psi``, ``psi_x`` and ``psi_y``: with
    ``P_ip(r) = g_i(x_r) (delta_ip - g_p(x_r))``,
    ``W_i(r) = sum_p P_ip(r) A_p(r)`` and ``A_p(r) = sum_j psi_pj g_j(y_r) -
    lam_x psi_x_p``, so ``sum_r W_i(r) [x_r, 1] = sum_pj psi_pj TX[i, p, j] -
    lam_x sum_p psi_x_p sum_j TX[i, p, j]`` (the y memberships sum to 1) with
    ``TX[i, p, j] = sum_r P_ip(r) g_j(y_r) [x_r, 1]`` - (K, K, L, dx + 1);
    symmetrically ``TY`` (L, L, K, dy + 1). One pass then serves a whole
    evaluation of log BF'' and its gradient (:func:`fused_gradient_sums`)
    instead of two: on a scheduler whose round trip dominates a small pass,
    half the passes. Its cost per row is ``K^2 L (dx + 1) + L^2 K (dy + 1)``
    against ``~K dx + L dy`` for the two passes, so it pays only on small
    data (the estimator decides)."""
    k, l_ = mx.shape[0], my.shape[0]
    out = {"counts": np.zeros((k, l_)), "TX": np.zeros((k, k, l_, mx.shape[1] + 1)),
           "TY": np.zeros((l_, l_, k, my.shape[1] + 1))}
    rows = max(64, FUSED_BUDGET // (k * l_ * max(k, l_)))  # the (rows x K^2 L) product stays near 8 MB
    for xs, ys in subblocks(x, y):
        for i in range(0, xs.shape[0], rows):
            _fused_rows(xs[i:i + rows], ys[i:i + rows], mx, my, sx, sy, out)
    return out


def _fused_rows(xs, ys, mx, my, sx, sy, out):
    gx, gy = dc_memberships(xs, mx, sx), dc_memberships(ys, my, sy)
    out["counts"] += gx.T @ gy
    for g, h, z, key in ((gx, gy, xs, "TX"), (gy, gx, ys, "TY")):
        n, a = g.shape
        P = -g[:, :, None] * g[:, None, :]  # (n, a, a)
        P[:, np.arange(a), np.arange(a)] += g
        PH = (P[:, :, :, None] * h[:, None, None, :]).reshape(n, -1)  # (n, a * a * b)
        z1 = np.concatenate([z, np.ones((n, 1))], axis=1)
        out[key] += (PH.T @ z1).reshape(out[key].shape)


def fused_gradient_sums(st: dict, psi: np.ndarray, psi_x: np.ndarray, psi_y: np.ndarray, lam_x: float,
                        lam_y: float) -> dict[str, np.ndarray]:
    """``WX, Wx, WY, Wy`` of :func:`ac_grad_stats` from the tensors of
    :func:`ac_fused_stats` and the digamma terms (small, on the driver)."""
    TX, TY = st["TX"], st["TY"]
    vx = np.einsum("ipjd,pj->id", TX, psi) - lam_x * np.einsum("ipd,p->id", TX.sum(axis=2), psi_x)
    vy = np.einsum("jqid,iq->jd", TY, psi) - lam_y * np.einsum("jqd,q->jd", TY.sum(axis=2), psi_y)
    return {"WX": vx[:, :-1], "Wx": vx[:, -1], "WY": vy[:, :-1], "Wy": vy[:, -1]}


def ac_hard_count_stats(x: np.ndarray, y: np.ndarray, *, mx: np.ndarray, my: np.ndarray) -> dict[str, np.ndarray]:
    """Hard contingency table ``n_ij``: pairs whose x is nearest to
    prototype i and whose y is nearest to prototype j (K, L)."""
    k, l_ = mx.shape[0], my.shape[0]
    if np.asarray(x).shape[0] == 0:
        return {"counts": np.zeros((k, l_))}
    lx, ly = assign_labels(x, centers=mx), assign_labels(y, centers=my)
    return {"counts": np.bincount(lx * l_ + ly, minlength=k * l_).reshape(k, l_).astype(np.float64)}


AC_COUNTS = Pass("ac_count_stats", ac_count_stats, inputs=("x", "y"), subset=True)
AC_GRAD = Pass("ac_grad_stats", ac_grad_stats, inputs=("x", "y"), subset=True)
AC_FUSED = Pass("ac_fused_stats", ac_fused_stats, inputs=("x", "y"), subset=True)
AC_HARD_COUNTS = Pass("ac_hard_count_stats", ac_hard_count_stats, inputs=("x", "y"), subset=True)
