"""The driver-side optimizers on functions whose optimum is known."""

import numpy as np
import pytest

from infoclust_dask.solvers import optimize


def test_conjugate_gradients_finds_the_maximum_of_a_quadratic():
    A = np.array([[3.0, 1.0], [1.0, 2.0]])
    b = np.array([1.0, -1.0])
    peak = np.linalg.solve(A, b)
    seen = []

    def fun(x):
        return -0.5 * x @ A @ x + b @ x, -(A @ x) + b

    res = optimize.conjugate_gradients(fun, np.zeros(2), max_iter=50, gtol=1e-10, callback=seen.append)
    np.testing.assert_allclose(res.x, peak, atol=1e-8)
    assert res.converged and res.history[-1] == pytest.approx(0.5 * b @ peak)
    assert [s["evaluation"] for s in seen] == list(range(1, len(res.history) + 1))
    shaped = optimize.conjugate_gradients(lambda m: fun(m.ravel()) if m.shape == (1, 2) else None,
                                          np.zeros((1, 2)), max_iter=50, gtol=1e-10)
    assert shaped.x.shape == (1, 2)
    capped = optimize.conjugate_gradients(fun, np.array([50.0, -50.0]), max_iter=1, gtol=1e-12)
    assert not capped.converged and capped.n_iter == 1


def test_simulated_annealing_keeps_the_best_state():
    rng = np.random.default_rng(0)
    reports = []
    res = optimize.simulated_annealing(lambda x: -float(np.sum((x - 3.0) ** 2)), np.zeros(2), steps=3000,
                                       width=0.3, temperature=1.0, rng=rng, callback=reports.append)
    np.testing.assert_allclose(res.x, [3.0, 3.0], atol=0.2)
    assert len(res.history) == 3001 and reports[-1]["step"] == 3000 and reports[-1]["temperature"] < 1e-3
    assert reports[-1]["best"] >= max(res.history) - 1e-12


def test_schedules_split_and_search():
    np.testing.assert_allclose(optimize.geometric_schedule(10.0, 1.0, 3), [10.0, np.sqrt(10.0), 1.0])
    np.testing.assert_array_equal(optimize.geometric_schedule(10.0, 1.0, 1), [1.0])
    train, valid = optimize.hashed_split(np.random.default_rng(1), 0.25)
    assert train[0] == valid[0] and train[1] == valid[1] == 0.75 and (train[2], valid[2]) == ("train", "valid")
    # the one-standard-error rule: the best mean (2) and those within its spread; the smoothest of them wins;
    # an exact tie with a candidate whose optimizer never moved goes to the one that moved
    order = []
    best, table = optimize.repeated_held_out_search(
        [3, 1, 2, 1.5], [0, 1], lambda c, s: (order.append((c, s)) or c * 10, c != 1.5),
        lambda m, s: -((m - 20) ** 2) - 40 * s, smoother=lambda c: c)
    assert order[:2] == [(3, 0), (3, 1)] and len(order) == 8
    assert table[3]["scores"] == [-100.0, -140.0] and table[2]["mean"] == -20.0 and best == 2
    assert table[2]["spread"] == 20.0  # std (ddof 1) / sqrt(2) of [0, -40]
    tie = optimize.one_standard_error_choice({1: {"mean": -1.0, "spread": 0.0, "moved": True},
                                              5: {"mean": -1.0, "spread": 0.0, "moved": False}}, lambda c: c)
    assert tie == 1
    state, hist = optimize.online_epochs(lambda s, e: s + e, 0, epochs=4, record=lambda s: s * 2)
    assert state == 6 and hist == [0, 2, 6, 12]


def test_conjugate_gradients_stops_when_the_objective_stops_changing():
    """f(x) = -sum(exp(-x)) rises for ever, its gradient shrinking: gtol=1e-6
    is reached only near x = 14 after many iterations; with ``tol`` CG stops
    once five iterations raised f by at most tol * max(1, |f|), and says so."""
    def fun(x):
        e = np.exp(-x)
        return -float(e.sum()), e

    x0 = np.zeros(3)
    slow = optimize.conjugate_gradients(fun, x0, max_iter=15, gtol=1e-12)
    assert not slow.converged and slow.n_iter == 15
    res = optimize.conjugate_gradients(fun, x0, max_iter=500, gtol=1e-12, tol=1e-3, window=5)
    assert res.converged and 5 < res.n_iter < 500
    # the stop rule, checked on the values of the iterations themselves
    per_iter = optimize.conjugate_gradients(fun, x0, max_iter=res.n_iter, gtol=1e-12)
    last = fun(per_iter.x)[0]
    before = fun(optimize.conjugate_gradients(fun, x0, max_iter=res.n_iter - 5, gtol=1e-12).x)[0]
    assert last - before <= 1e-3 * max(1.0, abs(last))
    np.testing.assert_allclose(res.x, per_iter.x, rtol=0, atol=0)
    earlier = optimize.conjugate_gradients(fun, x0, max_iter=res.n_iter - 1, gtol=1e-12)
    prev = fun(earlier.x)[0] - fun(optimize.conjugate_gradients(fun, x0, max_iter=res.n_iter - 6, gtol=1e-12).x)[0]
    assert prev > 1e-3 * max(1.0, abs(fun(earlier.x)[0]))  # not one iteration earlier
