"""Discriminative clustering block kernels (Kaski, Sinkkonen & Klami 2005):
memberships (4), smoothed counts of (10), gradient sums of (11), hard counts
of (9), the regularizer sums of (14)-(15) and the on-line algorithm (5)-(6).
Each pass is declared once below its kernel; the train/validation row
subset is applied by the pass, not by the kernels.
"""

from __future__ import annotations

import numpy as np

from . import _compiled
from ._common import Pass, softmax, sq_distances
from .kmeans import assign_labels, lloyd_stats, soft_kmeans_stats

__all__ = [
    "dc_memberships",
    "dc_count_stats", "DC_COUNTS",
    "dc_grad_stats", "DC_GRAD",
    "hard_count_stats", "DC_HARD_COUNTS",
    "dc_reg_stats", "DC_REG",
    "online_dc_block", "DC_ONLINE",
]


def dc_memberships(x: np.ndarray, centers: np.ndarray, sigma: float) -> np.ndarray:
    """Normalized Gaussian memberships (4): ``y_j(x) ∝ exp(-||x - m_j||^2 / 2 sigma^2)``,
    by a stable softmax."""
    return softmax(sq_distances(x, centers) * (-0.5 / sigma**2), out=True)


def dc_count_stats(x: np.ndarray, c: np.ndarray, *, centers: np.ndarray, sigma: float, n_classes: int
                  ) -> dict[str, np.ndarray]:
    """Smoothed counts of (10): ``n[j, i] = sum_{x: c(x) = i} y_j(x)``, (K, C),
    with the memberships (4), in one compiled loop
    (:func:`infoclust_dask.kernels._compiled.dc_counts`: no (rows x K)
    temporaries)."""
    return _compiled.dc_counts(x, c, centers=centers, sigma=sigma, n_classes=n_classes)


def dc_grad_stats(x: np.ndarray, c: np.ndarray, *, centers: np.ndarray, sigma: float, L: np.ndarray
                 ) -> dict[str, np.ndarray]:
    """Partial sums of the gradient (11) for a block.

    With ``W_j(x) = y_j(x) [L_{j,c(x)} - sum_l y_l(x) L_{l,c(x)}]`` (equal to
    ``sum_l y_l y_j (L_{j,c} - L_{l,c})`` as the memberships sum to one),
    ``sigma^2 dlogp/dm_j = sum_x W_j(x) x - (sum_x W_j(x)) m_j``; the block
    returns ``WX = W^T X`` (K, d) and ``W = sum_x W(x)`` (K,), in one
    compiled loop (:func:`infoclust_dask.kernels._compiled.dc_grad`)."""
    return _compiled.dc_grad(x, c, centers=centers, sigma=sigma, L=L)


def hard_count_stats(x: np.ndarray, c: np.ndarray, *, centers: np.ndarray, n_classes: int) -> dict[str, np.ndarray]:
    """Unsmoothed counts ``n[j, i]`` of the Voronoi partition (9): samples of
    class i whose nearest prototype is j."""
    k = centers.shape[0]
    if np.asarray(x).shape[0] == 0:
        return {"counts": np.zeros((k, n_classes))}
    lab = assign_labels(x, centers=centers)
    cc = np.asarray(c).astype(np.intp)
    return {"counts": np.bincount(lab * n_classes + cc, minlength=k * n_classes)
            .reshape(k, n_classes).astype(np.float64)}


def dc_reg_stats(x: np.ndarray, *, centers: np.ndarray, kind: str, lam: float) -> dict[str, np.ndarray]:
    """Sums for the regularizers of DC on (a hashed subset of) a block:
    ``kind="mog"`` the soft K-means sums at ``beta = 2 lam`` (14), ``kind="vq"``
    the hard Lloyd sums and inertia (15)."""
    if kind == "mog":
        return soft_kmeans_stats(x, centers=centers, beta=2.0 * lam)
    return lloyd_stats(x, centers=centers)


def online_dc_block(state: dict, x: np.ndarray, c: np.ndarray, *, start: int, sigma: float, alpha0: float,
                    total_steps: int, seed: int, half_life: float = 0.0) -> dict:
    """The stochastic on-line DC algorithm (5)-(6) over the rows of one block,
    in a random order (seeded by ``seed`` and the block's first row).

    ``state`` holds the prototypes ``m`` (K, d), the softmax parameters
    ``gamma`` (K, C) of the class distributions psi_j, and the step count
    ``t``. For each sample two clusters j, l are drawn from the memberships
    (4); m_j moves by ``-alpha (x - m_j) log(psi_li / psi_ji)`` (5) and
    ``gamma_j`` by ``-2 alpha (psi_j - e_c)`` (6) (the paper's coefficient for
    (6) is twice that of (5)); then j and l are swapped and both are adapted
    again. ``alpha`` decreases linearly from ``alpha0`` to 0 over
    ``total_steps``; with ``half_life > 0`` (a stream of unknown length,
    ``partial_fit``) it is ``alpha0 * h / (h + t)`` instead (Robbins-Monro:
    the steps sum to infinity, their squares do not). Returns the new state."""
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
        alpha = alpha0 * (half_life / (half_life + t) if half_life > 0 else max(0.0, 1.0 - t / total_steps))
        y = softmax(-inv2s2 * ((xi - m) ** 2).sum(axis=1))
        j, l = rng.choice(k, size=2, p=y)
        for a, b in ((j, l), (l, j)):
            psi_a, log_z_a = softmax(g[a], log_z=True)
            if a != b:
                # log(psi_bc / psi_ac) = (g_bc - log Z_b) - (g_ac - log Z_a)
                log_z_b = softmax(g[b], log_z=True)[1]
                m[a] -= alpha * (xi - m[a]) * ((g[b, ci] - log_z_b) - (g[a, ci] - log_z_a))
            psi_a[ci] -= 1.0
            g[a] -= 2.0 * alpha * psi_a
        t += 1
    return {"m": m, "gamma": g, "t": t}


DC_COUNTS = Pass("dc_count_stats", dc_count_stats, inputs=("x", "c"), subset=True)
DC_GRAD = Pass("dc_grad_stats", dc_grad_stats, inputs=("x", "c"), subset=True)
DC_HARD_COUNTS = Pass("dc_hard_count_stats", hard_count_stats, inputs=("x", "c"), subset=True)
DC_REG = Pass("dc_reg_stats", dc_reg_stats, inputs=("x",), subset=True)
DC_ONLINE = Pass("online_dc_block", online_dc_block, kind="fold", inputs=("x", "c"), subset=True, start=True)
