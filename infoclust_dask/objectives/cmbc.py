"""CMBC objectives on the driver (Gondek, Vaithyanathan & Garg 2005,
"Clustering with model-level constraints", SIAM SDM).

The model is a Bernoulli mixture over the binary features ``y+`` with equal
cluster priors ``p(c_k) = 1/K`` and parameters ``theta[j, k] = p(y+_j = 1 |
c_k)`` (A.1)-(A.2). The prior knowledge enters through the distinct patterns
``y-`` of the negative features (or of the known clusterings, one-hot): one
counting pass over the data gives, per pattern ``p`` and feature ``j``,
``P1[p, j] = p(y-_p | y+_j = 1)`` and ``P0[p, j] = p(y-_p | y+_j = 0)`` (A.5),
and then (A.6)

    p(y-_p | c_k) = (1/m) sum_j (P1 - P0)[p, j] theta[j, k] + P0[p, j]
                  = (1/m) (D theta + b)[p, k].

The regularizer of (3.14) is ``H~l(C, Y-) - H~u(Y-)`` with Topsøe's lower
bound (3.7)/(3.12) and the upper bound (3.10)/(3.13), both quadratic in the
index of coincidence, so quadratic in ``theta``; everything it needs of the
patterns is in the constants of Appendix B,

    A2 = D^T D (m x m),  A1 = D^T b (m,),  A0 = b^T b,

with ``sum_p u_pk^2 = (theta_k^T A2 theta_k + 2 A1.theta_k + A0) / m^2``.

Two departures from the printed paper, both checked numerically by the tests:

- the likelihood is scaled per sample: ``(1 - gamma)/n * l(Y+) + gamma *
  (bounds)``. Read literally, (3.14) adds an O(n) log-likelihood to O(1)
  bounds, and the constraint has no effect beyond tiny data;
- the M-step cubic is derived here, not copied from Lemma B.1, whose printed
  coefficients have errors (an alpha where beta belongs, a stray ln|Y-| on the
  beta terms, the cross terms without gamma). With the other parameters
  fixed the regularizer is exactly quadratic in ``theta[h, k]``: its
  derivative is ``a theta + c`` and the stationarity condition of the
  per-coordinate objective, multiplied by ``theta (1 - theta)``, is the cubic
  of :func:`cubic_coefficients`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "delta_d",
    "beta_d",
    "PatternModel",
    "pattern_model",
    "regularizer",
    "regularizer_gradient",
    "objective",
    "cubic_coefficients",
    "solve_coordinate",
    "solve_coordinates",
    "EPS",
]

#: parameters stay in [EPS, 1 - EPS] (log 0 would make the E-step undefined)
EPS = 1e-6


def delta_d(d: Any) -> Any:
    """(3.8): ``ln(d + 1) + d ln(1 + 1/d)``."""
    d = float(d)
    return np.log(d + 1.0) + d * np.log1p(1.0 / d)


def beta_d(d: Any) -> Any:
    """(3.9): ``(d + 1) d ln(1 + 1/d)``."""
    d = float(d)
    return (d + 1.0) * d * np.log1p(1.0 / d)


class PatternModel:
    """What the M-step needs of the negative patterns, from one counting pass.

    Attributes: ``n`` samples, ``m`` positive features, ``n_patterns`` (|Y-|),
    ``P1``, ``P0`` (n_patterns, m) of (A.5), ``D = P1 - P0``, ``b = P0.sum(1)``,
    ``A2``, ``A1``, ``A0`` of Appendix B, and the bound constants ``beta``
    (3.9), ``delta`` (3.8), ``log_d = ln |Y-|`` and ``Q = 1 / (1 - 1/|Y-|)``
    of (3.13).
    """

    def __init__(self, P1: np.ndarray, P0: np.ndarray, n: int) -> None:
        self.P1, self.P0 = np.asarray(P1, dtype=np.float64), np.asarray(P0, dtype=np.float64)
        self.n = int(n)
        self.n_patterns, self.m = self.P1.shape
        self.D = self.P1 - self.P0
        self.b = self.P0.sum(axis=1)
        self.A2 = self.D.T @ self.D
        self.A1 = self.D.T @ self.b
        self.A0 = float(self.b @ self.b)
        d = self.n_patterns
        self.beta, self.delta = beta_d(d), delta_d(d)
        self.log_d = float(np.log(d))
        self.Q = 1.0 / (1.0 - 1.0 / d)

    def p_neg_given_cluster(self, theta: np.ndarray) -> np.ndarray:
        """(A.6): ``p(y-_p | c_k)`` for every pattern and cluster, (n_patterns, K)."""
        return (self.D @ theta + self.b[:, None]) / self.m


def pattern_model(count: np.ndarray, S: np.ndarray, n1: np.ndarray, n: int) -> PatternModel:
    """The :class:`PatternModel` from the counting pass: ``count[p]`` rows
    with pattern ``p``, ``S[p, j]`` of them with ``y+_j = 1``, ``n1[j]`` rows
    with ``y+_j = 1`` among ``n``. (A.5) divides by ``n1[j]`` and ``n -
    n1[j]``; a feature that is always 1 (or always 0) leaves one of them
    undefined, and the pattern's overall frequency ``count / n`` is used there
    (the feature then says nothing about ``y-``)."""
    count = np.asarray(count, dtype=np.float64)
    S = np.asarray(S, dtype=np.float64)
    n1 = np.asarray(n1, dtype=np.float64)
    n0 = n - n1
    freq = count / n
    with np.errstate(divide="ignore", invalid="ignore"):
        P1 = np.where(n1[None, :] > 0, S / np.where(n1 > 0, n1, 1.0)[None, :], freq[:, None])
        P0 = np.where(n0[None, :] > 0, (count[:, None] - S) / np.where(n0 > 0, n0, 1.0)[None, :], freq[:, None])
    return PatternModel(P1, P0, n)


def _sums(theta, pm):
    """``sum_p sum_k u_pk^2`` and ``sum_p (sum_k u_pk)^2`` from A0, A1, A2."""
    K = theta.shape[1]
    m2 = pm.m * pm.m
    own = (np.einsum("jk,jl,lk->", theta, pm.A2, theta) + 2.0 * pm.A1 @ theta.sum(axis=1) + K * pm.A0) / m2
    t = theta.sum(axis=1)
    joint = (t @ pm.A2 @ t + 2.0 * K * pm.A1 @ t + K * K * pm.A0) / m2
    return own, joint


def regularizer(theta: np.ndarray, pm: PatternModel) -> float:
    """``H~l(C, Y-) - H~u(Y-)`` of (3.12)-(3.13) with equal priors ``1/K``:
    ``delta - beta sum_p sum_k (u_pk / K)^2 - ln|Y-| (1 - Q sum_p (sum_k
    u_pk / K)^2)``."""
    K = theta.shape[1]
    own, joint = _sums(theta, pm)
    h_low = pm.delta - pm.beta * own / K**2
    h_up = pm.log_d * (1.0 - pm.Q * joint / K**2)
    return float(h_low - h_up)


def regularizer_gradient(theta: np.ndarray, pm: PatternModel) -> np.ndarray:
    """d regularizer / d theta, (m, K): ``(2 / (K^2 m^2)) [-beta (A2 theta_k
    + A1) + ln|Y-| Q (A2 sum_r theta_r + K A1)]``."""
    K = theta.shape[1]
    m2 = pm.m * pm.m
    own = pm.A2 @ theta + pm.A1[:, None]
    joint = (pm.A2 @ theta.sum(axis=1) + K * pm.A1)[:, None]
    return (2.0 / (K * K * m2)) * (-pm.beta * own + pm.log_d * pm.Q * joint)


def objective(loglik: float, theta: np.ndarray, pm: PatternModel, gamma: float) -> float:
    """(3.14) with the per-sample likelihood scaling: ``(1 - gamma)/n *
    loglik + gamma * regularizer``."""
    return (1.0 - gamma) / pm.n * float(loglik) + gamma * regularizer(theta, pm)


def cubic_coefficients(S1: float, R: float, theta: np.ndarray, h: int, k: int, pm: PatternModel, gamma: float) -> tuple:
    """The M-step cubic of coordinate ``theta[h, k]`` (the others fixed):
    ``c3 t^3 + c2 t^2 + c1 t + c0 = 0``.

    The per-coordinate objective is ``(1 - gamma)/n [S1 ln t + (R - S1)
    ln(1 - t)] + gamma * regularizer``, with ``S1 = sum_i q_ik y_ih`` and
    ``R = sum_i q_ik`` from the E-step; the regularizer's derivative is
    linear in ``t``, ``a t + c``, so its stationarity condition times ``t (1 -
    t)`` is ``(1 - gamma)/n (S1 - R t) + (a t + c)(t - t^2) = 0``.
    Returns ``(c3, c2, c1, c0)``.
    """
    K = theta.shape[1]
    w = 2.0 * gamma / (K * K * pm.m * pm.m)
    a = w * pm.A2[h, h] * (pm.log_d * pm.Q - pm.beta)
    t0 = theta.copy()
    t0[h, k] = 0.0
    own = pm.A2[h] @ t0[:, k] + pm.A1[h]
    joint = pm.A2[h] @ t0.sum(axis=1) + K * pm.A1[h]
    c = w * (-pm.beta * own + pm.log_d * pm.Q * joint)
    s = (1.0 - gamma) / pm.n
    return -a, a - c, c - s * R, s * S1


def solve_coordinate(S1: float, R: float, theta: np.ndarray, h: int, k: int, pm: PatternModel, gamma: float) -> float:
    """The maximizer of the per-coordinate objective of :func:`cubic_coefficients`
    in ``[EPS, 1 - EPS]``: the real roots of the cubic in that interval (the
    objective goes to -inf at both ends when ``0 < S1 < R``, so the maximum is
    one of them) compared by the objective's value, and the interval's ends
    when the data leave the maximum there."""
    coeffs = cubic_coefficients(S1, R, theta, h, k, pm, gamma)
    lead = np.flatnonzero(np.abs(coeffs) > 0)
    roots = np.roots(coeffs[lead[0]:]) if lead.size and lead[0] < 3 else np.array([])
    cand = [float(r.real) for r in np.atleast_1d(roots) if abs(r.imag) < 1e-9 and EPS <= r.real <= 1 - EPS]
    cand += [EPS, 1.0 - EPS]
    a = -coeffs[0]
    c = a - coeffs[1]
    s = (1.0 - gamma) / pm.n

    def value(t):  # the per-coordinate objective up to a constant: likelihood part + a t^2 / 2 + c t
        return s * (S1 * np.log(t) + (R - S1) * np.log1p(-t)) + 0.5 * a * t * t + c * t

    return max(cand, key=value)


def _real_roots_between(P: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """The real roots in ``[lo, hi]`` of every polynomial of ``P`` (N, 4),
    coefficients highest first, as :func:`numpy.roots` finds them (leading
    and trailing zeros stripped, the eigenvalues of the same companion
    matrix, imaginary parts below 1e-9 taken as real), by batched
    eigenvalue calls, one per degree pattern. Returns (N, 3), NaN where a
    root is missing, complex or outside the interval (roots at 0 left out:
    ``lo > 0``)."""
    N = P.shape[0]
    out = np.full((N, 3), np.nan)
    nonzero = P != 0
    some = nonzero.any(axis=1)
    lead = np.argmax(nonzero, axis=1)
    trail = P.shape[1] - 1 - np.argmax(nonzero[:, ::-1], axis=1)
    for first in range(P.shape[1] - 1):
        for last in range(first + 1, P.shape[1]):
            rows = np.flatnonzero(some & (lead == first) & (trail == last))
            if not rows.size:
                continue
            p = P[rows, first:last + 1]
            deg = last - first
            comp = np.zeros((rows.size, deg, deg))
            comp[:, 0, :] = -p[:, 1:] / p[:, :1]
            comp[:, np.arange(1, deg), np.arange(deg - 1)] = 1.0
            r = np.linalg.eigvals(comp)
            ok = (np.abs(r.imag) < 1e-9) & (r.real >= lo) & (r.real <= hi)
            out[rows[:, None], np.arange(deg)[None, :]] = np.where(ok, r.real, np.nan)
    return out


def solve_coordinates(S1: np.ndarray, R: np.ndarray, theta: np.ndarray, pm: PatternModel, gamma: float) -> np.ndarray:
    """:func:`solve_coordinate` for every ``theta[h, k]`` at once, each with
    the others fixed at ``theta`` (the batch update, "bu"): the cubics'
    coefficients of :func:`cubic_coefficients` as arrays (the regularizer's
    derivative ``a t + c`` of Appendix B with ``theta[h, k]`` left out of
    ``A2 theta``), their real roots in ``[EPS, 1 - EPS]`` and the interval's
    ends compared by the per-coordinate objective, the first of equal values
    kept. ``S1`` is (m, K), ``R`` (K,); returns (m, K)."""
    S1 = np.asarray(S1, dtype=np.float64)
    R = np.asarray(R, dtype=np.float64)
    m, K = theta.shape
    w = 2.0 * gamma / (K * K * pm.m * pm.m)
    diag = np.diag(pm.A2)[:, None]
    a = np.broadcast_to(w * diag * (pm.log_d * pm.Q - pm.beta), theta.shape)
    own = pm.A2 @ theta - diag * theta + pm.A1[:, None]
    joint = (pm.A2 @ theta.sum(axis=1))[:, None] - diag * theta + K * pm.A1[:, None]
    c = w * (-pm.beta * own + pm.log_d * pm.Q * joint)
    s = (1.0 - gamma) / pm.n
    coeffs = np.stack([-a, a - c, c - s * R[None, :], s * S1], axis=-1).reshape(m * K, 4)
    cand = np.concatenate([_real_roots_between(coeffs, EPS, 1.0 - EPS),
                           np.broadcast_to([EPS, 1.0 - EPS], (m * K, 2))], axis=1)
    a, c = a.reshape(-1, 1), c.reshape(-1, 1)
    S1, RR = S1.reshape(-1, 1), np.broadcast_to(R[None, :], theta.shape).reshape(-1, 1)
    t = np.where(np.isnan(cand), 0.5, cand)
    value = s * (S1 * np.log(t) + (RR - S1) * np.log1p(-t)) + 0.5 * a * t * t + c * t
    value[np.isnan(cand)] = -np.inf
    return np.take_along_axis(cand, np.argmax(value, axis=1)[:, None], axis=1).reshape(m, K)
