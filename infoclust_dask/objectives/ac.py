"""Associative clustering objectives (Sinkkonen, Kaski, Nikkilä & Lahti
2005, "Associative clustering (AC): technical details").

Everything here works on the small (K, L) contingency tables and (K, d)
gradient sums reduced by the engine; nothing touches the data.

Conventions (checked against finite differences in the tests):

- memberships are normalized Gaussians ``g_i(x) ∝ exp(-|x - m_i|^2 / 2 sigma^2)``
  (the ``2`` in the denominator; the report's §III gradient is half the
  true one for its own ``exp(-|x - m|^2 / sigma^2)``);
- the margins are paired with the priors as in eq. (3): the x-margin
  ``n_i.`` with ``n^(x)`` and ``lambda^(x)``, the y-margin ``n_.j`` with
  ``n^(y)`` and ``lambda^(y)``;
- in the report's intermediate gradient, ``(delta_i'i - g_i')`` reads
  ``(delta_i'i - g_i)`` and ``Psi(t_k.)`` reads ``Psi(t_i'.)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.special import digamma, gammaln

__all__ = ["check_prior", "log_bayes_factor", "digamma_terms", "gradient", "mutual_information",
           "log_bf_constant"]


def check_prior(prior: Any) -> tuple[float, ...]:
    """``(n_d, n_x, n_y)``, all > 0 (a scalar is used for all three)."""
    p = np.broadcast_to(np.asarray(prior, dtype=np.float64), (3,)) if np.ndim(prior) == 0 else np.asarray(
        prior, dtype=np.float64)
    if p.shape != (3,) or not np.all(p > 0):
        raise ValueError(f"prior must be three positive numbers (n_d, n_x, n_y) or one; got {prior!r}.")
    return tuple(float(v) for v in p)


def log_bayes_factor(counts: np.ndarray, prior: Sequence[float] = (1.0, 1.0, 1.0), lam: Sequence[float] = (1.0, 1.0)
                    ) -> float:
    """log BF' of §III (eq. (3) when ``lam = (1, 1)``), without constants:
    ``sum_ij lgamma(n_ij + n_d) - lam_x sum_i lgamma(n_i. + n_x)
    - lam_y sum_j lgamma(n_.j + n_y)``. Works for hard and smoothed tables."""
    n = np.asarray(counts, dtype=np.float64)
    nd, nx, ny = check_prior(prior)
    lx, ly = lam
    return float(gammaln(n + nd).sum() - lx * gammaln(n.sum(axis=1) + nx).sum()
                 - ly * gammaln(n.sum(axis=0) + ny).sum())


def digamma_terms(counts: np.ndarray, prior: Sequence[float] = (1.0, 1.0, 1.0)
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``Psi(n_ij + n_d)`` (K, L), ``Psi(n_i. + n_x)`` (K,), ``Psi(n_.j + n_y)`` (L,)."""
    n = np.asarray(counts, dtype=np.float64)
    nd, nx, ny = check_prior(prior)
    return digamma(n + nd), digamma(n.sum(axis=1) + nx), digamma(n.sum(axis=0) + ny)


def gradient(WX: np.ndarray, W: np.ndarray, centers: np.ndarray, sigma: float) -> np.ndarray:
    """``d log BF'' / d m_i = (sum_r W_i(r) x_r - (sum_r W_i(r)) m_i) / sigma^2``
    from the reduced sums of :data:`infoclust_dask.kernels.ac.AC_GRAD`."""
    return (np.asarray(WX) - np.asarray(W)[:, None] * np.asarray(centers)) / sigma**2


def mutual_information(counts: np.ndarray) -> float:
    """Plug-in mutual information (nats) of a contingency table:
    ``sum_ij p_ij log(p_ij / (p_i p_j))`` with ``p = n / N``."""
    n = np.asarray(counts, dtype=np.float64)
    N = n.sum()
    if N <= 0:
        return 0.0
    p = n / N
    pi, pj = p.sum(axis=1, keepdims=True), p.sum(axis=0, keepdims=True)
    nz = p > 0
    return float(np.sum(p[nz] * np.log(p[nz] / (pi @ pj)[nz])))


def log_bf_constant(n_rows: int, n_cols: int, N: int, prior: Sequence[float] = (1.0, 1.0, 1.0)) -> float:
    """The constants (2) dropped from (3) for a K x L table of N pairs:
    adding them to :func:`log_bayes_factor` gives ``log P(n|M_D) - log P(n|M_I)``
    exactly. ``log P(n|M_D)`` = (2) over the KL cells with ``t0 = n_d``, and
    ``log P(n|M_I)`` = the hypergeometric term times (2) for each margin
    (the factorials of the counts and ``N!`` cancel between the two)."""
    nd, nx, ny = check_prior(prior)
    K, L = n_rows, n_cols
    dep = gammaln(K * L * nd) - K * L * gammaln(nd) - gammaln(N + K * L * nd)
    ind = (gammaln(K * nx) - K * gammaln(nx) - gammaln(N + K * nx)
           + gammaln(L * ny) - L * gammaln(ny) - gammaln(N + L * ny))
    return float(dep - ind)
