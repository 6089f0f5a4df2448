"""CMBC's driver-side mathematics (Gondek, Vaithyanathan & Garg 2005) against
references written from the definitions: (A.5) by counting, (A.6) by
marginalizing, the bounds (3.12)-(3.13) summed over patterns directly, the
regularizer's gradient by finite differences, and the M-step cubic's root
against a brute-force maximization of the per-coordinate objective."""

import numpy as np
import pytest
from helpers import finite_difference

from infoclust_dask.objectives import cmbc as obj


@pytest.fixture
def patterns():
    rng = np.random.default_rng(0)
    n, m = 400, 5
    Y = (rng.uniform(size=(n, m)) < 0.4).astype(float)
    pat = rng.integers(0, 4, size=n)
    pat[Y[:, 0] == 1] = np.where(rng.uniform(size=int(Y[:, 0].sum())) < 0.7, 0, pat[Y[:, 0] == 1])
    count = np.bincount(pat, minlength=4).astype(float)
    S = np.stack([Y[pat == p].sum(axis=0) for p in range(4)])
    return obj.pattern_model(count, S, Y.sum(axis=0), n), Y, pat


def test_pattern_probabilities_are_a5_by_counting(patterns):
    pm, Y, pat = patterns
    for p in range(4):
        for j in range(5):
            for b, P in ((1, pm.P1), (0, pm.P0)):
                rows = Y[:, j] == b
                assert P[p, j] == pytest.approx(np.mean(pat[rows] == p), rel=1e-12)


def test_a6_is_the_marginal_over_features(patterns):
    pm, _, _ = patterns
    theta = np.random.default_rng(1).uniform(0.1, 0.9, size=(5, 3))
    ref = np.array([[np.mean([pm.P1[p, j] * theta[j, k] + pm.P0[p, j] * (1 - theta[j, k]) for j in range(5)])
                     for k in range(3)] for p in range(4)])
    np.testing.assert_allclose(pm.p_neg_given_cluster(theta), ref, rtol=1e-12)


def test_regularizer_is_the_bounds_summed_over_patterns(patterns):
    pm, _, _ = patterns
    theta = np.random.default_rng(2).uniform(0.1, 0.9, size=(5, 3))
    u = pm.p_neg_given_cluster(theta) / 3  # p(y-, c) with p(c) = 1/3
    d = pm.n_patterns
    h_low = obj.delta_d(d) - obj.beta_d(d) * np.sum(u**2)
    h_up = np.log(d) * (1 - 1 / (1 - 1 / d) * np.sum(u.sum(axis=1) ** 2))
    assert obj.regularizer(theta, pm) == pytest.approx(h_low - h_up, rel=1e-12)
    # the bound constants of (3.8)-(3.9)
    assert obj.delta_d(1) == pytest.approx(np.log(2) + np.log(2))
    assert obj.beta_d(1) == pytest.approx(2 * np.log(2))


def test_gradient_matches_finite_differences(patterns):
    pm, _, _ = patterns
    theta = np.random.default_rng(3).uniform(0.2, 0.8, size=(5, 2))
    fd = finite_difference(lambda t: obj.regularizer(t, pm), theta)
    np.testing.assert_allclose(obj.regularizer_gradient(theta, pm), fd, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("gamma", [0.0, 0.5, 0.99])
def test_cubic_root_maximizes_the_coordinate_objective(patterns, gamma):
    pm, _, _ = patterns
    rng = np.random.default_rng(4)
    theta = rng.uniform(0.2, 0.8, size=(5, 2))
    S1, R = 37.0, 150.0
    h, k = 2, 1

    def f(t):
        th = theta.copy()
        th[h, k] = t
        like = (1 - gamma) / pm.n * (S1 * np.log(t) + (R - S1) * np.log1p(-t))
        return like + gamma * obj.regularizer(th, pm)

    grid = np.linspace(1e-4, 1 - 1e-4, 200_001)
    best = grid[np.argmax([f(t) for t in grid[::50]]) * 50]
    fine = np.linspace(max(best - 1e-3, 1e-6), min(best + 1e-3, 1 - 1e-6), 20_001)
    ref = fine[np.argmax([f(t) for t in fine])]
    got = obj.solve_coordinate(S1, R, theta, h, k, pm, gamma)
    assert got == pytest.approx(ref, abs=2e-6)
    if gamma == 0.0:
        assert got == pytest.approx(S1 / R, rel=1e-9)  # plain EM
    c3, c2, c1, c0 = obj.cubic_coefficients(S1, R, theta, h, k, pm, gamma)
    assert abs(c3 * got**3 + c2 * got**2 + c1 * got + c0) < 1e-9  # the root is a root


def _scalar_solves(S1, R, theta, pm, gamma):
    return np.array([[obj.solve_coordinate(S1[h, k], R[k], theta, h, k, pm, gamma) for k in range(theta.shape[1])]
                     for h in range(theta.shape[0])])


@pytest.mark.parametrize("gamma", [0.0, 0.3, 0.9, 0.995, 1.0])
def test_batched_coordinates_equal_the_scalar_solves(patterns, gamma):
    """The batch update's one call against the per-coordinate reference (itself
    checked against brute force above), with the degenerate cases every fit
    meets: a feature never on in a cluster (S1 = 0: the cubic loses its
    constant), always on (S1 = R), a feature the patterns say nothing about
    (its column of D zero: the cubic's leading coefficient 0), gamma = 0 (plain
    EM, S1 / R) and gamma = 1 (no likelihood)."""
    pm, _, _ = patterns
    rng = np.random.default_rng(7)
    K = 4
    theta = rng.uniform(0.05, 0.95, size=(pm.m, K))
    R = rng.uniform(50.0, 150.0, size=K)
    S1 = rng.uniform(0.0, 1.0, size=(pm.m, K)) * R
    S1[1, :] = 0.0
    S1[2, 1] = R[1]
    got = obj.solve_coordinates(S1, R, theta, pm, gamma)
    ref = _scalar_solves(S1, R, theta, pm, gamma)
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-12)
    if gamma == 0.0:
        np.testing.assert_allclose(got, np.clip(S1 / R, obj.EPS, 1 - obj.EPS), rtol=1e-9, atol=1e-12)
    # a feature whose column of D is zero (P1 = P0: it says nothing about the patterns)
    P1, P0 = pm.P1.copy(), pm.P0.copy()
    P1[:, 3] = P0[:, 3]
    flat = obj.PatternModel(P1, P0, pm.n)
    assert flat.A2[3, 3] == 0.0
    np.testing.assert_allclose(obj.solve_coordinates(S1, R, theta, flat, gamma),
                               _scalar_solves(S1, R, theta, flat, gamma), rtol=1e-9, atol=1e-12)


def test_batched_roots_are_numpys_roots():
    """The batched companion eigenvalues against :func:`numpy.roots`, one
    polynomial at a time, over every pattern of zero coefficients."""
    rng = np.random.default_rng(8)
    P = rng.normal(size=(400, 4))
    P[rng.uniform(size=P.shape) < 0.3] = 0.0
    P[::7] = [-1.0, 1.1, -0.31, 0.021]  # three roots in (0, 1): 0.1, 0.3, 0.7
    got = obj._real_roots_between(P, 1e-6, 1 - 1e-6)
    for row, g in zip(P, got):
        nz = np.flatnonzero(row)
        r = np.roots(row[nz[0]:]) if nz.size and nz[0] < 3 else np.array([])
        ref = sorted(float(x.real) for x in np.atleast_1d(r) if abs(x.imag) < 1e-9 and 1e-6 <= x.real <= 1 - 1e-6)
        np.testing.assert_allclose(sorted(g[~np.isnan(g)]), ref, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(np.sort(got[0]), [0.1, 0.3, 0.7], rtol=1e-12)
