"""Discriminative clustering objectives (Kaski, Sinkkonen & Klami 2005,
"Discriminative clustering", Neurocomputing 69).

Everything here works on the small (K, C) count tables and (K, d) gradient
sums reduced by the engine; nothing touches the data.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import digamma, gammaln

__all__ = ["prior_vector", "log_posterior", "log_posterior_constant", "digamma_terms", "gradient",
           "mog_term", "vq_term"]


def prior_vector(prior: Any, n_classes: int) -> np.ndarray:
    """Dirichlet parameters ``n_i^0`` as a vector of length C (a scalar is
    repeated, the paper's choice ``n_i^0 = n^0``)."""
    p = np.asarray(prior, dtype=np.float64)
    if p.ndim == 0:
        p = np.full(n_classes, float(p))
    if p.shape != (n_classes,) or not np.all(p > 0):
        raise ValueError(f"prior must be > 0, a scalar or a vector of length n_classes={n_classes}; got {prior!r}.")
    return p


def log_posterior(counts: np.ndarray, prior: Any, eq: float = 0.0) -> float:
    """Log posterior (9) / smoothed (10) without constants:
    ``sum_ij lgamma(n_i^0 + n_ji) - (1 + eq) sum_j lgamma(N^0 + N_j)``;
    ``eq > 0`` is the equalized objective C_EQ (12)."""
    counts = np.asarray(counts, dtype=np.float64)
    n0 = prior_vector(prior, counts.shape[1])
    return float(gammaln(counts + n0).sum() - (1.0 + eq) * gammaln(counts.sum(axis=1) + n0.sum()).sum())


def log_posterior_constant(n_clusters: int, prior: Any, n_classes: int) -> float:
    """The Dirichlet-multinomial normalizing constants dropped in (9):
    ``sum_j [lgamma(N^0) - sum_i lgamma(n_i^0)]``; adding them makes (9) a
    true log marginal likelihood of the classes given the partition (8)."""
    n0 = prior_vector(prior, n_classes)
    return float(n_clusters * (gammaln(n0.sum()) - gammaln(n0).sum()))


def digamma_terms(counts: np.ndarray, prior: Any, eq: float = 0.0) -> np.ndarray:
    """``L_ji = psi(n_ji + n_i^0) - (1 + eq) psi(N_j + N^0)`` of the gradient
    (11) (of (12) when ``eq > 0``)."""
    counts = np.asarray(counts, dtype=np.float64)
    n0 = prior_vector(prior, counts.shape[1])
    return digamma(counts + n0) - (1.0 + eq) * digamma(counts.sum(axis=1) + n0.sum())[:, None]


def mog_term(log_z_sum: float, R: np.ndarray, S: np.ndarray, centers: np.ndarray, lam: float, n_samples: int,
             n_clusters: int) -> tuple[float, np.ndarray]:
    """The MoG regularizer of (14), ``-E_MoG = sum_x log sum_j rho_j
    exp(-lam |x - m_j|^2)`` with equal weights ``rho_j = 1/K``, and its
    gradient ``2 lam (S_j - R_j m_j)``, from the soft K-means sums at
    stiffness ``beta = 2 lam`` (:data:`infoclust_dask.kernels.kmeans.SOFT_KMEANS`)."""
    value = float(log_z_sum) - n_samples * np.log(n_clusters)
    return value, 2.0 * lam * (np.asarray(S) - np.asarray(R)[:, None] * centers)


def vq_term(inertia: float, counts: np.ndarray, sums: np.ndarray, centers: np.ndarray, lam: float
            ) -> tuple[float, np.ndarray]:
    """The K-means regularizer of (15), ``-E_VQ = -lam sum_j sum_{x in V_j}
    |x - m_j|^2``, and its gradient ``2 lam (sum_{x in V_j} x - N_j m_j)``
    (Voronoi regions held fixed, as in Lloyd's algorithm)."""
    return -lam * float(inertia), 2.0 * lam * (np.asarray(sums) - np.asarray(counts)[:, None] * centers)


def gradient(WX: np.ndarray, W: np.ndarray, centers: np.ndarray, sigma: float) -> np.ndarray:
    """Gradient (11) of (10) w.r.t. the prototypes, from the reduced sums
    ``WX = sum_x W(x) x^T`` and ``W = sum_x W(x)`` (see
    :data:`infoclust_dask.kernels.dc.DC_GRAD`)."""
    return (np.asarray(WX) - np.asarray(W)[:, None] * np.asarray(centers)) / sigma**2
