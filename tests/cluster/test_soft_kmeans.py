"""Soft K-means (MacKay 20.7-20.9) and the pitchfork bifurcation of §20.5."""

import dask.array as da
import numpy as np
import pytest

from infoclust_dask import KMeans, SoftKMeans


def soft_step_reference(X, m, beta):
    """One step of algorithm 20.7 written directly from the formulas."""
    d = 0.5 * ((X[:, None, :] - m[None]) ** 2).sum(-1)
    r = np.exp(-beta * d)
    r /= r.sum(axis=1, keepdims=True)
    return (r.T @ X) / r.sum(axis=0)[:, None]


def test_one_step_equals_formula(blobs):
    X, _, _ = blobs
    m0 = X[:3].copy()
    from sklearn.exceptions import ConvergenceWarning

    with pytest.warns(ConvergenceWarning):
        sk = SoftKMeans(3, beta=0.4, init=m0, max_iter=1).fit(X)
    np.testing.assert_allclose(sk.cluster_centers_, soft_step_reference(X, m0, 0.4), rtol=1e-10)
    Xd = da.from_array(X, chunks=(171, 3))
    with pytest.warns(ConvergenceWarning):
        sk2 = SoftKMeans(3, beta=0.4, init=m0, max_iter=1).fit(Xd)
    np.testing.assert_allclose(sk2.cluster_centers_, sk.cluster_centers_, rtol=1e-10)


def test_fixed_point_is_self_consistent(blobs):
    X, _, _ = blobs
    sk = SoftKMeans(4, beta=0.5, random_state=0).fit(X)
    np.testing.assert_allclose(soft_step_reference(X, sk.cluster_centers_, 0.5), sk.cluster_centers_, atol=1e-6)
    r = sk.predict_proba(X)
    np.testing.assert_allclose(r.sum(axis=1), 1.0)


def test_large_beta_approaches_kmeans(blobs):
    X, _, _ = blobs
    km = KMeans(4, random_state=0).fit(X)
    sk = SoftKMeans(4, beta=200.0, init=km.cluster_centers_).fit(X)
    np.testing.assert_allclose(sk.cluster_centers_, km.cluster_centers_, atol=1e-6)


@pytest.fixture(scope="module")
def one_d():
    sigma = 2.0
    x = np.random.default_rng(11).normal(0.0, sigma, size=(20_000, 1))
    return x, float(x.var())  # the sample variance sigma_1^2


def test_pitchfork_bifurcation_at_one_over_variance(one_d):
    """MacKay (20.17): the two means stay merged while beta < 1/sigma_1^2."""
    x, var = one_d
    beta_c = 1.0 / var
    betas = beta_c * np.geomspace(0.5, 2.0, 61)  # steps of 2.3 %
    sk = SoftKMeans(2, beta_schedule=betas, random_state=0).fit(x)
    crit = sk.critical_betas(rel_tol=0.05)
    assert len(crit) == 1 and crit[0][1] == 2
    observed = crit[0][0]
    assert abs(observed / beta_c - 1) < 0.05, (observed, beta_c)
    # below the bifurcation the centres sit at the mean; beyond it they are split
    below = betas < 0.95 * beta_c
    spread = np.abs(sk.centers_path_[:, 0, 0] - sk.centers_path_[:, 1, 0])
    assert spread[below].max() < 0.01 * np.sqrt(var)
    assert spread[betas > 1.05 * beta_c].min() > 0.2 * np.sqrt(var)


@pytest.mark.parametrize("ratio", [1.05, 1.5])
def test_split_amplitude(one_d, ratio):
    """Beyond the bifurcation the symmetric fixed point +-m solves (20.13),
    m = E[x tanh(beta m x)] (for centred data), solved here by root finding on
    the same sample; near the bifurcation it is close to MacKay's cheap
    theory (20.22), m = beta^-1/2 (sigma^2 beta - 1)^1/2 / (sigma^2 beta)."""
    from scipy.optimize import brentq

    x, var = one_d
    beta = ratio / var
    sk = SoftKMeans(2, beta_schedule=[0.5 / var, beta], random_state=1, max_iter=20_000, tol=1e-14).fit(x)
    xc = x[:, 0] - x.mean()
    m = np.abs(sk.cluster_centers_[:, 0] - x.mean())
    exact = brentq(lambda mm: np.mean(xc * np.tanh(beta * mm * xc)) - mm, 1e-6, 10 * np.sqrt(var))
    np.testing.assert_allclose(m, exact, rtol=2e-3)
    if ratio < 1.1:
        theory = beta**-0.5 * np.sqrt(var * beta - 1) / (var * beta)
        assert abs(m.mean() / theory - 1) < 0.05, (m, theory)


def test_annealing_records_path_and_free_energy(blobs):
    X, _, _ = blobs
    sk = SoftKMeans(4, beta_schedule=np.geomspace(0.01, 10, 12), random_state=0).fit(X)
    assert sk.centers_path_.shape == (12, 4, 3)
    assert sk.n_distinct_path()[0] == 1 and sk.n_distinct_path()[-1] == 4
    assert np.all(np.diff(sk.n_distinct_path()) >= 0)
    assert sk.n_iter_ == sk.n_iter_path_.sum()


@pytest.mark.parametrize(
    "params, match",
    [
        ({"beta": 0.0}, r"The 'beta' parameter of SoftKMeans must be a float in the range \(0, inf\). Got 0.0"),
        ({"beta_schedule": [1.0, 0.5]}, r"The 'beta_schedule' parameter of SoftKMeans must be a non-empty increasing"),
        ({"beta_schedule": []}, r"'beta_schedule' parameter of SoftKMeans must be a non-empty"),
        ({"n_clusters": 50}, r"n_samples=20 should be >= n_clusters=50"),
    ],
)
def test_bad_params(params, match):
    X = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(ValueError, match=match):
        SoftKMeans(**{"n_clusters": 2, **params}).fit(X)


def test_sklearn_estimator_checks():
    import warnings

    from sklearn.utils.estimator_checks import check_estimator

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Skipping check check_array_api_input")
        check_estimator(
            SoftKMeans(n_clusters=2, random_state=0, scheduler="sync"),
            expected_failed_checks={
                # the check shuffles the repeated rows, so k-means++ seeding draws other
                # points; tested with a fixed init in test_weight_k_equals_k_repeats
                "check_sample_weight_equivalence_on_dense_data": "seeding draws differ after shuffling",
            },
        )


def test_weight_k_equals_k_repeats(blobs):
    X, _, _ = blobs
    X = X[:300]
    w = np.random.default_rng(4).integers(1, 4, size=300)
    a = SoftKMeans(3, beta=0.8, init=X[:3]).fit(X, sample_weight=w)
    b = SoftKMeans(3, beta=0.8, init=X[:3]).fit(np.repeat(X, w, axis=0))
    np.testing.assert_allclose(a.cluster_centers_, b.cluster_centers_, rtol=1e-8)


# ---------------------------------------------------------------------------
# the adaptive path: predicted critical stiffness, SQUAREM, the schedule
# ---------------------------------------------------------------------------
def test_predicted_critical_stiffness_is_one_over_the_largest_variance():
    """At merged centres, critical_stiffness is 1 / lambda_max of the data's
    covariance (MacKay 20.17 in d dimensions), against numpy's eigvalsh; a
    group whose rows all coincide never splits."""
    from infoclust_dask.cluster._soft_kmeans import center_groups, critical_stiffness
    from infoclust_dask.kernels.kmeans import soft_scatter_stats

    rng = np.random.default_rng(3)
    X = rng.normal(size=(5000, 3)) @ np.array([[2.0, 0.3, 0.0], [0.0, 1.0, 0.5], [0.0, 0.0, 0.4]])
    centers = np.tile(X.mean(0), (3, 1))
    st = soft_scatter_stats(X, None, centers=centers, beta=0.7)
    groups = center_groups(centers, 1e-9)
    assert groups == [[0, 1, 2]]
    (pred,) = critical_stiffness(st["R"], st["Q"], centers, groups)
    lam = np.linalg.eigvalsh(np.cov(X.T, bias=True))[-1]
    assert abs(pred * lam - 1) < 1e-10
    one = np.zeros((10, 2))  # identical rows: nothing to split
    st1 = soft_scatter_stats(one, None, centers=np.zeros((2, 2)), beta=1.0)
    assert critical_stiffness(st1["R"], st1["Q"], np.zeros((2, 2)), [[0, 1]]) == [np.inf]


def test_soft_scatter_pass_is_chunking_free(blobs):
    from infoclust_dask import engine
    from infoclust_dask.kernels.kmeans import SOFT_SCATTER, soft_scatter_stats

    X, _, _ = blobs
    c = X[:4].copy()
    ref = soft_scatter_stats(X, None, centers=c, beta=0.3)
    got = engine.map_reduce(SOFT_SCATTER, da.from_array(X, chunks=(97, 3)), None, params={"centers": c, "beta": 0.3})
    np.testing.assert_allclose(got["Q"], ref["Q"], rtol=1e-10)
    np.testing.assert_allclose(got["R"], ref["R"], rtol=1e-10)


def test_squarem_reaches_the_plain_fixed_point_in_fewer_passes_and_never_raises_the_free_energy(one_d):
    """Near the bifurcation (beta = 1.02 / variance) plain EM is slow:
    SQUAREM reaches the same fixed point in far fewer passes, and the free
    energy at the start of every cycle never rises."""
    from infoclust_dask.cluster import _soft_kmeans as skm

    x, var = one_d
    m0 = x.mean() + np.array([[-0.05], [0.05]]) * np.sqrt(var)
    kw = dict(beta=1.02 / var, init=m0, tol=1e-14, max_iter=50_000)
    plain = SoftKMeans(2, acceleration="none", **kw).fit(x)
    seen = []
    real = skm.squarem

    def spy(step, x0, **k):
        def recorded(c):
            out = step(c)
            seen.append(out[1])
            return out
        return real(recorded, x0, **k)

    skm.squarem = spy
    try:
        fast = SoftKMeans(2, **kw).fit(x)
    finally:
        skm.squarem = real
    np.testing.assert_allclose(np.sort(fast.cluster_centers_[:, 0]), np.sort(plain.cluster_centers_[:, 0]),
                               atol=1e-5 * np.sqrt(var))
    assert fast.n_iter_ * 4 < plain.n_iter_, (fast.n_iter_, plain.n_iter_)
    assert fast.free_energy_path_[-1] <= plain.free_energy_path_[-1] + 1e-9 * abs(plain.free_energy_path_[-1])
    # no evaluated point is better than where it ends (a rejected extrapolation may be worse, never kept)
    assert seen[-1] <= min(seen) + 1e-12 * abs(seen[-1])


def test_squarem_on_a_linear_map_converges_like_the_plain_iteration():
    """A contraction x -> A x + b (the EM map near a fixed point is linear):
    SQUAREM finds the same fixed point in far fewer evaluations."""
    from infoclust_dask.solvers.optimize import squarem

    A = np.diag([0.99, 0.5, 0.9])
    b = np.array([1.0, -2.0, 0.5])
    xstar = np.linalg.solve(np.eye(3) - A, b)

    def step(x):
        return A @ x + b, float(0.5 * (x - xstar) @ (x - xstar))

    x_plain, _, n_plain, ok_plain = squarem(step, np.zeros(3), max_iter=100_000, tol=1e-20, accelerate=False)
    x_fast, _, n_fast, ok_fast = squarem(step, np.zeros(3), max_iter=100_000, tol=1e-20)
    assert ok_plain and ok_fast
    np.testing.assert_allclose(x_fast, xstar, atol=1e-8)
    np.testing.assert_allclose(x_plain, xstar, atol=1e-8)
    assert n_fast * 5 < n_plain, (n_fast, n_plain)


def test_squarem_step_length_bound_grows_by_mstep_and_shrinks_on_a_rejection():
    """The points SQUAREM evaluates on x -> rho x (rho = 0.999: |r| / |v| =
    1000, so every step is held at a bound below it), rebuilt by hand:
    from a bound of 1, cycle 1 is two steps plus one plain step from
    ``x2``, cycle 2 extrapolates at alpha = -4, cycle 3 at -16; with an
    objective that rejects every extrapolation, the bound held at -4 stays
    there (the step at the bound rejected) and each cycle ends with the
    plain step; a rejection below the bound shrinks it."""
    from infoclust_dask.solvers.optimize import squarem

    rho = 0.999

    def run(objective, cycles, **bound):
        seen = []

        def step(x):
            seen.append(float(x[0]))
            return rho * x, objective(x)

        squarem(step, np.array([1.0]), max_iter=4 * cycles, tol=0.0, mstep=4.0, **bound)
        return seen

    def expected(alphas):
        x, out = 1.0, []
        for alpha, accepted in alphas:
            x1, x2 = rho * x, rho * rho * x
            out += [x, x1]  # x2 = F(x1) comes with the second evaluation
            r, v = x1 - x, x2 - 2 * x1 + x
            if alpha == -1.0:
                out.append(x2)
                x = rho * x2
                continue
            xp = x - 2 * alpha * r + alpha * alpha * v
            out.append(xp)
            if accepted:
                x = rho * xp
            else:
                out.append(x2)
                x = rho * x2
        return out

    got = run(lambda x: float(x[0] ** 2), 3, step0=1.0)
    np.testing.assert_allclose(got[:9], expected([(-1.0, True), (-4.0, True), (-16.0, True)]), rtol=1e-12)
    # every extrapolated point worse than the plain step's (the objective rises away from 1): rejected
    got = run(lambda x: abs(float(x[0]) - 1.0) if x[0] < 1.0 else 0.0, 3, step0=1.0)
    reject = expected([(-1.0, True), (-4.0, False), (-4.0, False)])
    np.testing.assert_allclose(got[:len(reject)], reject, rtol=1e-12)
    # a rejected step below the bound (-1000 under 2000) shrinks it by mstep: 500, held there after a rejection
    # at it
    got = run(lambda x: abs(float(x[0]) - 1.0) if x[0] < 1.0 else 0.0, 3, step0=2000.0)
    reject = expected([(-1000.0, False), (-500.0, False), (-500.0, False)])
    np.testing.assert_allclose(got[:len(reject)], reject, rtol=1e-9, atol=1e-12)  # -1000 lands at ~0
    # from the default start (SQUAREM_STEP0 = 16) the first cycle already extrapolates: -16 accepted, then -64
    got = run(lambda x: float(x[0] ** 2), 2)
    np.testing.assert_allclose(got[:6], expected([(-16.0, True), (-64.0, True)])[:6], rtol=1e-12)


@pytest.mark.parametrize(("beta", "crit", "expected"), [
    (0.1, [], 0.4),  # nothing predicted: a sparse step
    (0.1, [1.0], 0.4),  # far ahead: sparse, not past it
    (0.3, [1.0], 0.95),  # stop 5 % below the next split
    (0.95, [1.0], 1.05),  # just below: cross it in one 5 % step
    (1.0, [0.9], 1.05),  # due and not yet seen: keep stepping 5 %
    (5.0, [], 10.0),  # never beyond the end
])
def test_next_temperature(beta, crit, expected):
    from infoclust_dask.solvers.optimize import next_temperature

    assert next_temperature(beta, 10.0, crit) == pytest.approx(expected)


def test_auto_schedule_splits_where_predicted_on_the_pitchfork(one_d):
    """beta_schedule="auto" on MacKay's 1-D example: the first prediction is
    1/variance, the observed split lies within 5 % above it, far fewer
    betas and passes than a fixed 2.3 % grid, and the same final centres."""
    x, var = one_d
    auto = SoftKMeans(2, beta_schedule="auto", beta=3.0 / var, random_state=0).fit(x)
    assert abs(auto.predicted_critical_path_[0] * var - 1) < 1e-9
    (observed, n_after), = auto.critical_betas()
    assert n_after == 2 and 1.0 <= observed * var <= 1.05 + 1e-9, observed * var
    assert auto.betas_[0] == pytest.approx(0.5 / var)
    grid = SoftKMeans(2, beta_schedule=np.geomspace(0.5, 3.0, 80) / var, random_state=0).fit(x)
    assert len(auto.betas_) < 10 and auto.n_iter_ < grid.n_iter_ / 3
    np.testing.assert_allclose(np.sort(auto.cluster_centers_[:, 0]), np.sort(grid.cluster_centers_[:, 0]),
                               atol=1e-4 * np.sqrt(var))


def test_auto_schedule_on_iris_matches_the_fixed_path(monkeypatch):
    """The README's kind of data: the adaptive path ends in the 40-beta
    path's partition (plain EM, every beta to the final tolerance, as before
    the adaptive path) with under a third of its passes."""
    from sklearn.datasets import load_iris
    from sklearn.metrics import adjusted_rand_score

    from infoclust_dask.cluster import _soft_kmeans as skm

    X = load_iris().data
    monkeypatch.setattr(skm, "INTERMEDIATE_TOL_FACTOR", 1.0)
    ref = SoftKMeans(3, beta_schedule=np.geomspace(0.01, 10, 40), acceleration="none", random_state=0).fit(X)
    monkeypatch.undo()
    auto = SoftKMeans(3, beta_schedule="auto", beta=10.0, random_state=0).fit(X)
    assert adjusted_rand_score(ref.labels_, auto.labels_) == 1.0
    assert auto.n_iter_ < ref.n_iter_ / 3
    assert [n for _, n in auto.critical_betas()] == [n for _, n in ref.critical_betas()] == [2, 3]


@pytest.mark.parametrize("seed", range(4))
def test_center_groups_equal_single_linkage_by_brute_force(seed):
    """center_groups (one vectorized distance table) against single
    linkage grown pair by pair in plain Python: chains of near centres,
    duplicates, a distance exactly at the tolerance."""
    import math

    from infoclust_dask.cluster._soft_kmeans import center_groups

    rng = np.random.default_rng(seed)
    c = np.round(rng.normal(scale=2.0, size=(30, 3)), 1)
    c[5] = c[4]  # duplicate
    c[7] = c[6] + np.array([0.5, 0.0, 0.0])  # exactly at the tolerance
    c[8] = c[7] + np.array([0.4, 0.0, 0.0])  # a chain through 7
    tol = 0.5
    label = list(range(30))
    changed = True
    while changed:  # brute force: merge any two groups with a pair within tol until nothing changes
        changed = False
        for i in range(30):
            for j in range(30):
                if label[i] != label[j] and math.dist(c[i], c[j]) <= tol:
                    old, new = max(label[i], label[j]), min(label[i], label[j])
                    label = [new if v == old else v for v in label]
                    changed = True
    ref = sorted(sorted(i for i in range(30) if label[i] == g) for g in set(label))
    got = sorted(sorted(g) for g in center_groups(c, tol))
    assert got == ref
    assert any({6, 7, 8} <= set(g) for g in got) and any({4, 5} <= set(g) for g in got)


def test_partial_fit_converges_to_the_fixed_point_at_its_beta():
    """Issue 54: SoftKMeans.partial_fit (on-line EM at the fixed beta) over 20 blocks ends at the centres of
    soft K-means at that beta (fit with beta_schedule=[beta]) to 1e-2 on separated blobs; the counts are the
    rows seen; a weight-2 row counts as two rows."""
    import dask.array as da

    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(size=(2000, 2)) + c for c in ((0, 0), (6, 0), (0, 6))])
    X = X[rng.permutation(len(X))]
    C0 = np.array([[1.0, 1.0], [5.0, 1.0], [1.0, 5.0]])
    whole = SoftKMeans(3, beta=2.0, beta_schedule=[2.0], init=C0, scheduler="sync").fit(X)
    online = SoftKMeans(3, beta=2.0, init=C0, scheduler="sync")
    for block in da.from_array(X, chunks=300).blocks:
        online.partial_fit(block)
    assert online.n_steps_ == 20 and online.counts_.sum() == pytest.approx(len(X))

    def rows(c):
        return c[np.lexsort(np.round(c, 1).T[::-1])]

    np.testing.assert_allclose(rows(online.cluster_centers_), rows(whole.cluster_centers_), atol=1e-2)
    once = SoftKMeans(2, beta=1.0, init=np.array([[0.0], [4.0]]), scheduler="sync")
    once.partial_fit(np.array([[0.0], [4.0], [4.0]]))
    twice = SoftKMeans(2, beta=1.0, init=np.array([[0.0], [4.0]]), scheduler="sync")
    twice.partial_fit(np.array([[0.0], [4.0]]), sample_weight=np.array([1.0, 2.0]))
    np.testing.assert_allclose(once.cluster_centers_, twice.cluster_centers_, rtol=1e-12)
