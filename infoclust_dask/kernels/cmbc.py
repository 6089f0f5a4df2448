"""CMBC block kernels (Gondek, Vaithyanathan & Garg 2005): the counting pass
over (negative pattern, positive feature) pairs behind (A.5), the annealed
E-step (4.15)/(4.17) with the sums of the M-step, and the posterior of new
rows. Blocks of ``y+`` are binary: numpy (bool, uint8, any number type) or
``scipy.sparse`` CSR rows, which stay sparse."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _compiled
from ._common import Pass, softmax

__all__ = [
    "pattern_stats", "CMBC_PATTERNS",
    "estep_stats", "CMBC_ESTEP",
    "log_likelihoods",
    "posterior", "CMBC_POSTERIOR",
]


def _dense_or_sparse(y):
    if hasattr(y, "tocsr"):
        return y.tocsr().astype(np.float64)
    return np.asarray(y, dtype=np.float64)


def pattern_stats(y: Any, pattern: np.ndarray, *, n_patterns: int) -> dict[str, np.ndarray]:
    """Per negative pattern ``p``: the row count ``count[p]`` and ``S[p, j]``,
    the rows with pattern ``p`` and ``y+_j = 1``; per feature ``n1[j]``, the
    rows with ``y+_j = 1``; and ``nonbinary``, the entries that are neither 0
    nor 1 (validation)."""
    y = _dense_or_sparse(y)
    pat = np.asarray(pattern).astype(np.intp)
    rows = y.shape[0]
    onehot = np.zeros((rows, n_patterns))
    onehot[np.arange(rows), pat] = 1.0
    if hasattr(y, "tocsr"):
        vals = y.data
        S = np.asarray((y.T @ onehot).T)
        n1 = np.asarray(y.sum(axis=0)).ravel()
    else:
        vals = y
        S = onehot.T @ y
        n1 = y.sum(axis=0)
    nonbinary = int(np.count_nonzero((vals != 0) & (vals != 1)))
    return {"count": onehot.sum(axis=0), "S": S, "n1": n1, "nonbinary": np.array(nonbinary, dtype=np.int64)}


CMBC_PATTERNS = Pass("cmbc_pattern_stats", pattern_stats, inputs=("y", "pattern"))


def log_likelihoods(y: Any, log_theta: np.ndarray, log_1m_theta: np.ndarray) -> np.ndarray:
    """``log p(y+_i | c_k)`` of (A.2) for every row and cluster, (n, K): one
    product ``y (log theta - log(1 - theta)) + sum_j log(1 - theta_jk)``."""
    y = _dense_or_sparse(y)
    return np.asarray(y @ (log_theta - log_1m_theta)) + log_1m_theta.sum(axis=0)[None, :]


def estep_stats(y: Any, *, log_theta: np.ndarray, log_1m_theta: np.ndarray, temperature: float
               ) -> dict[str, np.ndarray]:
    """The E-step at temperature ``T``, ``q(c_k | y_i) ∝ p(c_k) p(y+_i |
    c_k)^(1/T)`` (4.15) with equal priors, and the sums the M-step needs:
    ``S1[j, k] = sum_i q_ik y_ij`` (m, K), ``R[k] = sum_i q_ik``; also the
    log-likelihood (3.1) at ``T = 1`` (``loglik``, without the constant prior
    term ``-n log K``), and ``sum_i max_k q_ik`` (how hard the assignment is).
    Dense blocks use the compiled loop
    (:func:`infoclust_dask.kernels._compiled.cmbc_estep`: no float64 copy of
    the binary rows), sparse (CSR) blocks scipy's sparse products, which
    visit only the nonzero entries (the two agree: tests)."""
    if not hasattr(y, "tocsr"):
        return _compiled.cmbc_estep(y, log_theta=log_theta, log_1m_theta=log_1m_theta, temperature=temperature)
    y = _dense_or_sparse(y)
    ll = log_likelihoods(y, log_theta, log_1m_theta)
    q = softmax(ll / temperature)
    _, log_z = softmax(ll.copy(), out=True, log_z=True)
    S1 = np.asarray(y.T @ q)
    return {"S1": S1, "R": q.sum(axis=0), "loglik": np.array(log_z.sum()), "hard": np.array(q.max(axis=1).sum())}


CMBC_ESTEP = Pass("cmbc_estep_stats", estep_stats, inputs=("y",))


def posterior(y: Any, *, log_theta: np.ndarray, log_1m_theta: np.ndarray) -> np.ndarray:
    """``p(c_k | y+_i)`` at ``T = 1`` with equal priors, (n, K)."""
    return softmax(log_likelihoods(y, log_theta, log_1m_theta), out=True)


CMBC_POSTERIOR = Pass("cmbc_posterior", posterior, kind="map")
