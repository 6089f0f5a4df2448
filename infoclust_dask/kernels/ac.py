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

__all__ = ["ac_count_stats", "AC_COUNTS", "ac_grad_stats", "AC_GRAD", "ac_hard_count_stats", "AC_HARD_COUNTS"]


def ac_count_stats(x: np.ndarray, y: np.ndarray, *, mx: np.ndarray, my: np.ndarray, sx: float, sy: float
                  ) -> dict[str, np.ndarray]:
    """Smoothed cross counts ``n_ij = sum_r g_i(x_r) g_j(y_r)`` (K, L) of a
    block, with normalized Gaussian memberships of width ``sx`` / ``sy``
    (:func:`dc_memberships`); the margins are its row and column sums.
    Compiled (:func:`infoclust_dask.kernels._compiled.ac_counts`) or numpy."""
    if _compiled.available():
        return _compiled.ac_counts(x, y, mx=mx, my=my, sx=sx, sy=sy)
    n = np.zeros((mx.shape[0], my.shape[0]))
    for xs, ys in subblocks(x, y):
        n += dc_memberships(xs, mx, sx).T @ dc_memberships(ys, my, sy)
    return {"counts": n}


def ac_grad_stats(x: np.ndarray, y: np.ndarray, *, mx: np.ndarray, my: np.ndarray, sx: float, sy: float,
                  psi: np.ndarray, psi_x: np.ndarray, psi_y: np.ndarray, lam_x: float, lam_y: float
                 ) -> dict[str, np.ndarray]:
    """Partial sums of the gradient of log BF'' for a block.

    With ``A_i(r) = sum_j psi_ij g_j(y_r) - lam_x psi_x_i`` (the report's
    ``L_i^(x)(y)``), ``W_i(r) = g_i(x_r) [A_i(r) - sum_i' g_i'(x_r) A_i'(r)]``
    and ``sx^2 dlogBF''/dm_i^(x) = sum_r W_i(r) x_r - (sum_r W_i(r)) m_i^(x)``;
    symmetrically for y. Returns ``WX`` (K, dx), ``Wx`` (K,), ``WY`` (L, dy),
    ``Wy`` (L,). Compiled (:func:`infoclust_dask.kernels._compiled.ac_grad`)
    or numpy."""
    if _compiled.available():
        return _compiled.ac_grad(x, y, mx=mx, my=my, sx=sx, sy=sy, psi=psi, psi_x=psi_x, psi_y=psi_y,
                                 lam_x=lam_x, lam_y=lam_y)
    out = {"WX": np.zeros(mx.shape), "Wx": np.zeros(mx.shape[0]), "WY": np.zeros(my.shape),
           "Wy": np.zeros(my.shape[0])}
    for xs, ys in subblocks(x, y):
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
AC_HARD_COUNTS = Pass("ac_hard_count_stats", ac_hard_count_stats, inputs=("x", "y"), subset=True)
