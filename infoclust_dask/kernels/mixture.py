"""Isotropic Gaussian mixture block kernels: the E-step and M-step sums of
EM for MoG, and for MDA2 (a joint mixture of x and the class), the baselines
of Kaski, Sinkkonen & Klami (2005), Table 1.
"""

from __future__ import annotations

import numpy as np

from . import _compiled
from ._common import Pass, sq_distances

__all__ = ["mixture_log_joint", "mixture_em_stats", "MIXTURE_EM", "mixture_assign", "MIXTURE_ASSIGN",
           "mixture_posteriors", "MIXTURE_POSTERIORS", "mixture_log_density", "MIXTURE_LOG_DENSITY"]


def mixture_log_joint(x: np.ndarray, *, means: np.ndarray, variances: np.ndarray, log_weights: np.ndarray
                     ) -> np.ndarray:
    """``log pi_j + log N(x; mu_j, s_j^2 I)`` for every row and component (n, K)."""
    d = x.shape[1]
    return (log_weights[None, :] - 0.5 * d * np.log(2 * np.pi * variances)[None, :]
            - sq_distances(x, means) / (2 * variances)[None, :])


def mixture_em_stats(x: np.ndarray, c: np.ndarray | None = None, *, means: np.ndarray, variances: np.ndarray,
                     log_weights: np.ndarray, log_psi: np.ndarray | None = None, n_classes: int = 0
                    ) -> dict[str, np.ndarray]:
    """E-step of an isotropic mixture for a block and the sums of its M-step.

    Without ``c`` (MoG) responsibilities are ``r_nj ∝ pi_j N(x_n; mu_j, s_j^2)``;
    with ``c`` and ``log_psi`` (MDA2, a joint mixture of x and the class) they
    are ``∝ pi_j N(x_n; mu_j, s_j^2) psi_{j, c_n}``. Returns ``R = sum r``,
    ``S = sum r x``, ``Q = sum r |x|^2``, the log likelihood and, with ``c``,
    ``N[j, i] = sum_{c_n = i} r_nj``, in one compiled loop
    (:func:`infoclust_dask.kernels._compiled.mixture_em`)."""
    return _compiled.mixture_em(x, c, means=means, variances=variances, log_weights=log_weights,
                                log_psi=log_psi, n_classes=n_classes)


def mixture_assign(x: np.ndarray, *, means: np.ndarray, variances: np.ndarray, log_weights: np.ndarray) -> np.ndarray:
    """Most probable component of each row given x alone (int64)."""
    x = np.asarray(x, dtype=np.float64)
    return np.argmax(mixture_log_joint(x, means=means, variances=variances, log_weights=log_weights),
                     axis=1).astype(np.int64)


def mixture_posteriors(x: np.ndarray, *, means: np.ndarray, variances: np.ndarray, log_weights: np.ndarray
                       ) -> np.ndarray:
    """Posterior probability of each component given x alone, ``p(j | x)`` (n, K), rows summing to 1."""
    lj = mixture_log_joint(np.asarray(x, dtype=np.float64), means=means, variances=variances, log_weights=log_weights)
    lj -= lj.max(axis=1, keepdims=True)
    p = np.exp(lj)
    return p / p.sum(axis=1, keepdims=True)


def mixture_log_density(x: np.ndarray, *, means: np.ndarray, variances: np.ndarray, log_weights: np.ndarray
                        ) -> np.ndarray:
    """Log density of the mixture at each row, ``log sum_j pi_j N(x; mu_j, s_j^2 I)`` (n,)."""
    lj = mixture_log_joint(np.asarray(x, dtype=np.float64), means=means, variances=variances, log_weights=log_weights)
    top = lj.max(axis=1)
    return top + np.log(np.exp(lj - top[:, None]).sum(axis=1))


MIXTURE_EM = Pass("mixture_em_stats", mixture_em_stats, inputs=("x", "c"), subset=True)
MIXTURE_ASSIGN = Pass("mixture_assign", mixture_assign, kind="map", dtype=np.int64)
MIXTURE_POSTERIORS = Pass("mixture_posteriors", mixture_posteriors, kind="map")
MIXTURE_LOG_DENSITY = Pass("mixture_log_density", mixture_log_density, kind="map")
