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
