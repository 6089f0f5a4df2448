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
