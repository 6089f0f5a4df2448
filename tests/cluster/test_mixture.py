"""MoG and MDA2 baselines: fixed points checked by independent EM steps."""

import dask.array as da
import numpy as np
import pytest
from sklearn.mixture import GaussianMixture

from infoclust_dask.cluster import MDA2, IsotropicGaussianMixture


@pytest.fixture
def mix():
    rng = np.random.default_rng(3)
    centers = np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 5.0]])
    lab = rng.integers(0, 3, 1200)
    X = centers[lab] + rng.normal(size=(1200, 2)) * np.array([0.6, 1.0, 1.4])[lab][:, None]
    c = np.where(rng.uniform(size=1200) < 0.8, lab % 2, 1 - lab % 2)
    return X, c, lab


def test_mog_is_a_fixed_point_of_sklearn_em(mix):
    X, _, _ = mix
    mog = IsotropicGaussianMixture(3, max_iter=500, tol=1e-12, random_state=0).fit(X)
    sk = GaussianMixture(3, covariance_type="spherical", reg_covar=0.0, max_iter=1, tol=0.0,
                         weights_init=mog.weights_, means_init=mog.means_,
                         precisions_init=1.0 / mog.variances_)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sk.fit(X)
    np.testing.assert_allclose(sk.means_, mog.means_, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(sk.covariances_, mog.variances_, rtol=1e-5)
    np.testing.assert_allclose(sk.weights_, mog.weights_, rtol=1e-6)
    assert np.all(np.diff(mog.loglik_history_) >= -1e-6)  # EM never decreases the likelihood


def _mda2_step(X, c, means, var, w, psi):
    d = X.shape[1]
    lj = (np.log(w) - 0.5 * d * np.log(2 * np.pi * var) - ((X[:, None] - means[None]) ** 2).sum(-1) / (2 * var)
          + np.log(psi[:, c].T))
    r = np.exp(lj - lj.max(1, keepdims=True))
    r /= r.sum(1, keepdims=True)
    R = r.sum(0)
    m = (r.T @ X) / R[:, None]
    v = np.array([(r[:, j] * ((X - m[j]) ** 2).sum(1)).sum() / (d * R[j]) for j in range(len(R))])
    N = np.stack([r[c == i].sum(0) for i in range(psi.shape[1])], axis=1)
    return m, v, R / R.sum(), (N + 1e-3) / (R[:, None] + 1e-3 * psi.shape[1])


def test_mda2_is_a_fixed_point_and_chunking_free(mix):
    X, c, _ = mix
    a = MDA2(3, max_iter=500, tol=1e-13, random_state=0).fit(X, c)
    m, v, w, psi = _mda2_step(X, c, a.means_, a.variances_, a.weights_, a.class_probabilities_)
    np.testing.assert_allclose(m, a.means_, atol=1e-5)
    np.testing.assert_allclose(v, a.variances_, rtol=1e-5)
    np.testing.assert_allclose(psi, a.class_probabilities_, atol=1e-5)
    b = MDA2(3, max_iter=500, tol=1e-13, random_state=0, scheduler="threads").fit(
        da.from_array(X, chunks=(250, 2)), da.from_array(c, chunks=250))
    np.testing.assert_allclose(b.means_, a.means_, rtol=1e-6, atol=1e-8)
    assert isinstance(b.labels_, da.Array)


def test_fixed_sigma_and_errors(mix):
    X, c, _ = mix
    mog = IsotropicGaussianMixture(3, sigma=0.8, random_state=0).fit(X)
    np.testing.assert_allclose(mog.variances_, 0.64)
    with pytest.raises(ValueError, match=r"The 'sigma' parameter of IsotropicGaussianMixture must be a float in the range \[1e-100, 1e\+100\] or None. Got -1.0 instead."):
        IsotropicGaussianMixture(3, sigma=-1.0).fit(X)
    with pytest.raises(ValueError, match=r"y contains NaN labels"):
        MDA2(3).fit(X, np.where(c == 0, np.nan, c))
    # labels are encoded: float or string classes give the 0..C-1 fit, classes_ keeps the values
    ref = MDA2(3, random_state=0).fit(X, c)
    got = MDA2(3, random_state=0).fit(X, np.array(["a", "b", "c", "d", "e"])[c])
    np.testing.assert_allclose(got.class_probabilities_, ref.class_probabilities_, rtol=1e-12)
    assert list(got.classes_) == ["a", "b", "c", "d", "e"][: ref.n_classes_]


def test_the_mixtures_have_gaussian_mixtures_methods_and_agree_with_its_formulas():
    """Issue 54: predict_proba, score_samples, score, bic and aic, as GaussianMixture(covariance_type=
    "spherical") computes them from the same parameters (its fitted attributes set to ours); lazy on dask
    input; MDA2 has them too (x alone), its class probabilities counted in bic."""
    import dask.array as da
    from sklearn.mixture import GaussianMixture

    from infoclust_dask.cluster import MDA2, IsotropicGaussianMixture

    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(size=(100, 2)) * s + c for s, c in ((0.5, (0, 0)), (1.0, (5, 0)), (0.3, (0, 5)))])
    m = IsotropicGaussianMixture(3, random_state=0, scheduler="sync").fit(X)
    g = GaussianMixture(3, covariance_type="spherical")
    g.means_, g.covariances_, g.weights_ = m.means_, m.variances_, m.weights_
    g.precisions_cholesky_ = 1 / np.sqrt(m.variances_)
    np.testing.assert_allclose(m.score_samples(X), g.score_samples(X), rtol=1e-10)
    np.testing.assert_allclose(m.predict_proba(X), g.predict_proba(X), atol=1e-12)
    assert m.score(X) == pytest.approx(g.score(X), rel=1e-10)
    assert m.bic(X) == pytest.approx(g.bic(X), rel=1e-10) and m.aic(X) == pytest.approx(g.aic(X), rel=1e-10)
    lazy = m.predict_proba(da.from_array(X, chunks=100))
    assert isinstance(lazy, da.Array)
    np.testing.assert_allclose(lazy.compute(), m.predict_proba(X), rtol=1e-12)
    y = np.repeat([0, 1, 2], 100)
    joint = MDA2(3, random_state=0, scheduler="sync").fit(X, y)
    np.testing.assert_allclose(joint.predict_proba(X).sum(axis=1), 1.0, rtol=1e-12)
    total = float(np.sum(joint.score_samples(X)))
    assert joint.bic(X) == pytest.approx(-2 * total + (3 * 2 + 3 + 2 + 3 * 2) * np.log(300), rel=1e-12)


def test_n_components_is_the_number_of_components(mix):
    """Issue 54: GaussianMixture's ``n_components`` is accepted: when given it
    is the number used (the same fit as ``n_clusters``), and the default is
    the package's one default of 8."""
    X, c, _ = mix
    assert IsotropicGaussianMixture().n_clusters == 8 and MDA2().n_clusters == 8
    by_name = IsotropicGaussianMixture(n_components=3, random_state=0, scheduler="sync").fit(X)
    by_ours = IsotropicGaussianMixture(3, random_state=0, scheduler="sync").fit(X)
    np.testing.assert_allclose(by_name.means_, by_ours.means_, atol=1e-12)
    assert by_name.predict_proba(X).shape == (len(X), 3)
    joint = MDA2(n_clusters=5, n_components=2, random_state=0, scheduler="sync").fit(X, c)
    assert joint.means_.shape == (2, 2) and joint.class_probabilities_.shape == (2, 2)
    with pytest.raises(ValueError, match="n_components"):
        IsotropicGaussianMixture(n_components=2000, scheduler="sync").fit(X)


def test_partial_fit_over_blocks_ends_near_fit(mix):
    """Issue 54: stepwise EM over 20 blocks of rows in random order (the loop
    dask_ml's Incremental runs: partial_fit per block of a dask array) ends
    with a mean log likelihood within 1 % of EM's ``fit`` on all rows, and
    the same components (means within 0.15); MDA2 likewise, its class
    probabilities within 0.05 of ``fit``'s. The running sums are exact: one
    batch holding every row after a first batch equals the M-step from the
    first batch's and the rest's sums computed at the same parameters."""
    X, c, _ = mix
    order = np.random.default_rng(0).permutation(len(X))
    X, c = X[order], c[order]
    full = IsotropicGaussianMixture(3, random_state=0, scheduler="sync").fit(X)
    online = IsotropicGaussianMixture(3, random_state=0, scheduler="sync")
    for block in da.from_array(X, chunks=len(X) // 20).blocks:
        online.partial_fit(block)
    assert online.n_steps_ == 20 and online.counts_.sum() == pytest.approx(len(X))
    assert online.score(X) == pytest.approx(full.score(X), rel=0.01)
    match = np.argmin(((online.means_[:, None] - full.means_[None]) ** 2).sum(-1), axis=1)
    assert sorted(match) == [0, 1, 2]
    np.testing.assert_allclose(online.means_, full.means_[match], atol=0.15)

    joint_full = MDA2(3, random_state=0, scheduler="sync").fit(X, c)
    joint = MDA2(3, random_state=0, scheduler="sync")
    for lo in range(0, len(X), len(X) // 20):
        joint.partial_fit(X[lo:lo + len(X) // 20], c[lo:lo + len(X) // 20], classes=[0, 1])
    match = np.argmin(((joint.means_[:, None] - joint_full.means_[None]) ** 2).sum(-1), axis=1)
    np.testing.assert_allclose(joint.class_probabilities_, joint_full.class_probabilities_[match], atol=0.05)
    with pytest.raises(ValueError, match="not among classes"):
        joint.partial_fit(X[:5], np.full(5, 7))

    # the running sums: a second batch's M-step uses the first batch's sums plus its own (independent EM step)
    two = IsotropicGaussianMixture(3, random_state=0, scheduler="sync")
    two.partial_fit(X[:600])
    before = dict(means=two.means_.copy(), variances=two.variances_.copy(), weights=two.weights_.copy())
    first_sums = two._totals
    two.partial_fit(X[600:])
    d2 = ((X[600:, None, :] - before["means"][None]) ** 2).sum(-1)
    logp = np.log(before["weights"]) - 0.5 * d2 / before["variances"] - X.shape[1] / 2 * np.log(
        2 * np.pi * before["variances"])
    r = np.exp(logp - logp.max(1, keepdims=True))
    r /= r.sum(1, keepdims=True)
    R = first_sums["R"] + r.sum(0)
    np.testing.assert_allclose(two.means_, (first_sums["S"] + r.T @ X[600:]) / R[:, None], rtol=1e-10)
    np.testing.assert_allclose(two.weights_, R / R.sum(), rtol=1e-10)
