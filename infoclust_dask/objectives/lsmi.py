"""Least-squares mutual information (LSMI): the driver-side mathematics.

Sugiyama, Yamada, Kimura & Hachiya (2011, ICML),
§2.4: the density ratio ``r(x, y) = p(x, y) / (p(x) p(y))`` (9) is modelled
class by class with Gaussian bases (10)-(11) centred at samples of that
class; ``theta^(y) = (H^(y) + delta I)^-1 h^(y)`` solves (13) with

    H^(y)_{l l'} = n_y / n^2  sum_i L(x_i, x_l) L(x_i, x_l'),
    h^(y)_l      = 1 / n      sum_{i: y_i = y} L(x_i, x_l),

and LSMI (14) equals ``-1/2 sum_y theta_y^T H^(y) theta_y + sum_y theta_y^T
h^(y) - 1/2``. Everything needed is in the sums ``G = Phi^T Phi`` and
``S = onehot(y)^T Phi`` over the samples, per fold (computed in one pass by
:data:`infoclust_dask.kernels.smic.LSMI`); the width ``gamma`` and the
regularization ``delta`` are chosen by the M-fold hold-out error ``CV`` of
§2.4, then LSMI is evaluated on all samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["DELTAS", "WIDTHS", "LSMIResult", "class_thetas", "cv_table", "lsmi_from_thetas", "select"]

#: Gaussian widths of §4.3 (in units of the standardized data): 10^-2, 10^-1.5, ..., 10^2
WIDTHS = tuple(10.0 ** np.arange(-2.0, 2.01, 0.5))
#: regularization parameters of §4.3: 10^-3, 10^-2.5, ..., 10^1
DELTAS = tuple(10.0 ** np.arange(-3.0, 1.01, 0.5))


@dataclass
class LSMIResult:
    """LSMI (14) with the width and regularization CV chose, and the CV table
    (rows: widths, columns: deltas; lower is better)."""

    value: float
    width: float
    delta: float
    cv: np.ndarray
    widths: tuple
    deltas: tuple
    n_bases: int

    def __float__(self):
        return float(self.value)


#: entries of H below this fraction of its largest entry are set to 0. At
#: small widths they reach 1e-200, and LAPACK's eigensolver then may fail to
#: converge ("Eigenvalues did not converge"): at 1e-60 (the earlier floor)
#: numpy's eigh still failed on an 81 x 81 H with entries from 2e-60 to 1.4
#: (times its largest) on an AMD EPYC machine (OpenBLAS Haswell kernels;
#: SMIC on high & low densities, draw 10, symmetric kernel), while scipy's
#: drivers converged. They are meaningless next to the regularization: H's
#: entries are at most 1 (``n_y / n`` times an average of products of
#: Gaussians in [0, 1]) and delta >= 1e-3, so zeroing entries below 1e-20
#: changes theta = (H + delta I)^-1 h by at most b * 1e-20 / 1e-3 = 2e-15
#: relative for b = 200 bases
H_FLOOR = 1e-20


def _floor(H):
    top = np.abs(H).max(axis=(-2, -1), keepdims=True)
    return np.where(np.abs(H) < H_FLOOR * top, 0.0, H)


def class_thetas(G: np.ndarray, S: np.ndarray, count: np.ndarray, basis_labels: np.ndarray, deltas: Any) -> list:
    """``theta^(y)`` of (13) for every class and every ``delta``.

    Parameters
    ----------
    G : ndarray (b, b)       sum over the samples of ``Phi^T Phi``.
    S : ndarray (c, b)       per-class sums ``onehot(y)^T Phi``.
    count : ndarray (c,)     class counts ``n_y``.
    basis_labels : ndarray (b,)  class of each basis centre.
    deltas : sequence of float

    Returns
    -------
    list over classes of ``(I_y, theta (len(deltas), |I_y|))``; classes
    without bases or samples get an empty ``I_y`` (their ratio model is 0).
    """
    n = float(np.sum(count))
    out = []
    for y in range(S.shape[0]):
        Iy = np.flatnonzero(basis_labels == y)
        if Iy.size == 0 or count[y] == 0 or n == 0:
            out.append((Iy[:0], np.zeros((len(deltas), 0))))
            continue
        H = _floor((count[y] / n**2) * G[np.ix_(Iy, Iy)])
        h = S[y, Iy] / n
        evals, evecs = np.linalg.eigh(H)
        proj = evecs.T @ h
        theta = np.stack([evecs @ (proj / (evals + d)) for d in deltas])
        out.append((Iy, theta))
    return out


def lsmi_from_thetas(G: np.ndarray, S: np.ndarray, count: np.ndarray, thetas: Any, k: int = 0) -> Any:
    """LSMI (14) of the ratio model ``thetas`` (``k``-th delta) on the samples
    whose sums are ``G, S, count``."""
    n = float(np.sum(count))
    quad = lin = 0.0
    for y, (Iy, theta) in enumerate(thetas):
        if Iy.size == 0:
            continue
        th = theta[k]
        quad += count[y] / n**2 * th @ G[np.ix_(Iy, Iy)] @ th
        lin += th @ S[y, Iy] / n
    return -0.5 * quad + lin - 0.5


def _thetas_all_widths(G, S, count, Iy, y, deltas):
    """``theta^(y)`` for every width and delta at once: ``(W, D, |I_y|)``.
    ``G (W, b, b)``, ``S (W, c, b)``: training sums of every width."""
    n = float(np.sum(count))
    sub = np.ix_(np.arange(G.shape[0]), Iy, Iy)
    H = _floor((count[y] / n**2) * G[sub])
    h = S[:, y, Iy] / n
    evals, evecs = np.linalg.eigh(H)
    proj = np.einsum("wki,wk->wi", evecs, h)
    scaled = proj[:, None, :] / (evals[:, None, :] + np.asarray(deltas)[None, :, None])
    return np.einsum("wki,wdi->wdk", evecs, scaled)


def cv_table(stats: dict, basis_labels: np.ndarray, widths: Any, deltas: Any) -> np.ndarray:
    """Mean hold-out error ``CV`` (§2.4) for every (width, delta).

    For fold ``m`` the ratio model is fitted on the other folds' sums and
    scored on fold ``m`` by ``CV_m = 1/(2|Z|^2) sum_{x, y in Z} r(x, y)^2 -
    1/|Z| sum_{(x, y) in Z} r(x, y)`` (the pairs of the first sum run over
    every x and every y of the fold). Folds with no held-out samples are
    skipped. ``stats`` holds ``G (M, W, b, b)``, ``S (M, W, c, b)`` and
    ``count (M, c)``.
    """
    G, S, count = stats["G"], stats["S"], stats["count"]
    n_folds, n_classes = count.shape
    total_G, total_S, total_count = G.sum(axis=0), S.sum(axis=0), count.sum(axis=0)
    table = np.zeros((len(widths), len(deltas)))
    used = 0
    for m in range(n_folds):
        held = float(count[m].sum())
        if held == 0 or held == total_count.sum():
            continue
        used += 1
        tr_G, tr_S, tr_count = total_G - G[m], total_S - S[m], total_count - count[m]
        quad = np.zeros_like(table)
        lin = np.zeros_like(table)
        for y in range(n_classes):
            Iy = np.flatnonzero(basis_labels == y)
            if Iy.size == 0 or tr_count[y] == 0:
                continue
            theta = _thetas_all_widths(tr_G, tr_S, tr_count, Iy, y, deltas)
            Gm = G[m][np.ix_(np.arange(len(widths)), Iy, Iy)]
            quad += count[m, y] * np.einsum("wdk,wkl,wdl->wd", theta, Gm, theta)
            lin += np.einsum("wdk,wk->wd", theta, S[m][:, y, Iy])
        table += quad / (2.0 * held * held) - lin / held
    if used == 0:
        raise ValueError("LSMI cross-validation needs at least two non-empty folds; use more samples.")
    return table / used


def select(stats: dict, basis_labels: np.ndarray, widths: Any, deltas: Any) -> LSMIResult:
    """Choose (width, delta) by minimal CV, then LSMI (14) on all samples."""
    table = cv_table(stats, basis_labels, widths, deltas)
    w, k = np.unravel_index(int(np.argmin(table)), table.shape)
    G, S, count = stats["G"].sum(axis=0)[w], stats["S"].sum(axis=0)[w], stats["count"].sum(axis=0)
    thetas = class_thetas(G, S, count, basis_labels, [deltas[k]])
    value = lsmi_from_thetas(G, S, count, thetas, 0)
    return LSMIResult(float(value), float(widths[w]), float(deltas[k]), table, tuple(widths), tuple(deltas),
                      len(basis_labels))
