"""SMIC's choice of t leaves out candidates whose neighbour graph has more
connected components than clusters (their extra components get no
eigenvector), unless every candidate has them; measured against scikit-
learn's SpectralClustering on iris, where the paper's plain argmax of LSMI
picked a 7-component graph (ARI 0.457)."""

import warnings

import numpy as np
import pytest
from scipy.sparse.csgraph import connected_components
from sklearn.datasets import load_iris
from sklearn.metrics import adjusted_rand_score
from sklearn.neighbors import kneighbors_graph
from sklearn.preprocessing import StandardScaler

from infoclust_dask import SMIC


def _components(X, t):
    """Components of the symmetrized t-nearest-neighbour graph (scikit-learn and scipy: the reference)."""
    g = kneighbors_graph(X, t, include_self=False)
    return connected_components(g + g.T, directed=False)[0]


def test_iris_skips_graphs_with_more_components_than_clusters():
    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "rows in components no eigenvector covers" warning any more
        sm = SMIC(3, random_state=0, scheduler="sync").fit(X)
    excluded = [t for t in range(1, 11) if _components(X, t) > 3]
    assert sm.t_excluded_ == excluded and 2 in excluded
    assert sm.t_ not in excluded and sm.n_components_ <= 3
    # among the candidates left, the largest LSMI (the paper's rule)
    assert sm.lsmi_[sm.t_] == max(v for t, v in sm.lsmi_.items() if t not in excluded)
    assert adjusted_rand_score(y, sm.labels_) > 0.6  # SpectralClustering (kNN affinity): 0.646; before: 0.457


def test_when_every_candidate_has_too_many_components_all_compete():
    rng = np.random.default_rng(0)
    centres = np.array([[0, 0], [40, 0], [0, 40], [40, 40]])
    X = np.concatenate([c + rng.normal(size=(30, 2)) for c in centres])  # 4 far groups: >= 4 components for t <= 5
    with pytest.warns(UserWarning, match="connected components, more than n_clusters=2"):
        sm = SMIC(2, t_candidates=(2, 3, 5), random_state=0, scheduler="sync").fit(X)
    assert sm.t_excluded_ == [] and sm.lsmi_[sm.t_] == max(sm.lsmi_.values())


def test_the_training_rows_fitted_posteriors():
    """fitted_proba: the in-sample estimates of §2.3 that labels_ is the
    argmax of (computed here from the eigenvectors, independently);
    predict_proba treats every row as new (scikit-learn's invariance to
    the rows that come with it), and on the training rows it agrees with
    the fitted labels where the rows have evidence."""
    X, _ = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    sm = SMIC(3, random_state=0, scheduler="sync").fit(X)
    V = np.maximum(sm.eigenvectors_, 0.0)
    ref = sm.class_prior_ * V / V.sum(axis=0)
    ref = ref / ref.sum(axis=1, keepdims=True)
    p = sm.fitted_proba()
    np.testing.assert_allclose(p, ref, rtol=1e-12)
    np.testing.assert_array_equal(np.argmax(p, axis=1), sm.labels_)
    new = sm.predict_proba(X)
    assert new.shape == (150, 3) and np.mean(np.argmax(new, axis=1) == sm.labels_) > 0.9


def test_the_choice_of_t_is_the_same_in_other_units():
    """Issue 54 asked every held-out choice to be decided by the data, not by rounding. SMIC's is not
    chaotic (neighbour lists, an eigensolver, a rotation): under a perturbation, a change of units and
    an offset the LSMI of every candidate t agrees to 1e-12 and the same t and labels come out. (DC's
    width search, whose CG fits are chaotic, needed the data put on a grid for this.)"""
    from sklearn.datasets import load_wine

    X, _ = load_wine(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    fits = [SMIC(3, random_state=0).fit(data) for data in (X, X * (1 + 1e-12), X * 1000.0 + 5.0)]
    for m in fits[1:]:
        assert m.t_ == fits[0].t_ and np.array_equal(m.labels_, fits[0].labels_)
        assert all(abs(m.lsmi_[t] - fits[0].lsmi_[t]) < 1e-12 for t in m.lsmi_)


def _sampled_lsmi_reference(X, labels, max_rows, random_state):
    """LSMI of ``labels`` on the rows SMIC documents for its sample, computed here with metrics.lsmi_many
    (the fit's seed drawn as the estimator draws it; the rows by numpy's choice without replacement)."""
    from infoclust_dask import metrics

    seed = int(np.random.default_rng(random_state).integers(2**31 - 1))
    rows = np.sort(np.random.default_rng([seed, 1]).choice(len(X), size=max_rows, replace=False))
    return metrics.lsmi_many(X[rows], labels[rows][:, None], n_classes=3, random_state=seed,
                             mean=X.mean(axis=0), std=X.std(axis=0))[0].value, rows


def test_lsmi_is_estimated_on_a_seeded_sample_above_lsmi_max_rows(scheduler):
    """Above ``lsmi_max_rows`` the fit's LSMI is the LSMI of its labels (features standardized by all rows' moments) on the
    documented seeded sample (not of all rows: it differs), the same value on every scheduler and for lazy rows;
    at or below it, LSMI of all rows. Three blobs of 200, 400 and 600 rows: unequal, so a sample changes the value."""
    import dask.array as da

    rng = np.random.default_rng(3)
    X = np.concatenate([c + rng.normal(size=(m, 3)) for c, m in zip(([0, 0, 0], [9, 0, 0], [0, 9, 0]), (200, 400, 600))])
    sm = SMIC(3, t=5, lsmi_max_rows=300, random_state=7, scheduler=scheduler).fit(da.from_array(X, chunks=(256, 3)))
    ref, rows = _sampled_lsmi_reference(X, np.asarray(sm.labels_), 300, 7)
    assert sm.lsmi_rows_ == 300 and rows.size == 300 and np.unique(rows).size == 300
    np.testing.assert_allclose(sm.lsmi_[5], ref, rtol=1e-10)
    whole = SMIC(3, t=5, lsmi_max_rows=None, random_state=7, scheduler="sync").fit(X)
    same = SMIC(3, t=5, lsmi_max_rows=1200, random_state=7, scheduler="sync").fit(X)
    assert whole.lsmi_rows_ == same.lsmi_rows_ == 1200 and whole.lsmi_ == same.lsmi_
    np.testing.assert_array_equal(whole.labels_, sm.labels_)
    assert abs(whole.lsmi_[5] - sm.lsmi_[5]) > 1e-6  # the sample is not all rows
    numpy_fit = SMIC(3, t=5, lsmi_max_rows=300, random_state=7, scheduler="sync").fit(X)
    np.testing.assert_allclose(numpy_fit.lsmi_[5], sm.lsmi_[5], rtol=1e-12)


def test_lsmi_max_rows_auto_samples_only_a_single_candidate(monkeypatch):
    """``"auto"``: the sample (LSMI_MAX_ROWS rows, lowered here) when one t is fitted, whose LSMI only reports;
    all rows when LSMI chooses among candidates (a sample can swap close ones on overlapping clusters)."""
    from infoclust_dask.cluster import _smic_select

    monkeypatch.setattr(_smic_select, "LSMI_MAX_ROWS", 300)
    rng = np.random.default_rng(4)
    X = np.concatenate([c + rng.normal(size=(400, 2)) for c in ([0, 0], [8, 0], [0, 8])])
    one = SMIC(3, t=5, random_state=1, scheduler="sync").fit(X)
    ref, _ = _sampled_lsmi_reference(X, np.asarray(one.labels_), 300, 1)
    assert one.lsmi_max_rows == "auto" and one.lsmi_rows_ == 300
    np.testing.assert_allclose(one.lsmi_[5], ref, rtol=1e-10)
    several = SMIC(3, t_candidates=(4, 5), random_state=1, scheduler="sync").fit(X)
    assert several.lsmi_rows_ == 1200
    assert several.lsmi_[5] == SMIC(3, t=5, lsmi_max_rows=None, random_state=1, scheduler="sync").fit(X).lsmi_[5]


def test_lsmi_max_rows_is_checked():
    with pytest.raises(ValueError, match="lsmi_max_rows"):
        SMIC(3, lsmi_max_rows=1).fit(np.random.default_rng(0).normal(size=(50, 2)))


def test_the_lsmi_sample_is_split_over_the_workers_with_the_same_value(monkeypatch, local_cluster_client):
    """The seeded LSMI sample of lazy rows goes back to the workers in
    ``LSMI_SAMPLE_CHUNKS`` chunks of whole logical blocks, so its pass has
    tasks for every worker; the value is the same bits as in one chunk."""
    import dask.array as da

    from infoclust_dask.cluster import _smic_select

    rng = np.random.default_rng(8)
    X = np.concatenate([c + rng.normal(size=(m, 4)) for c, m in zip(([0] * 4, [9, 0, 0, 0], [0, 9, 0, 0]),
                                                                     (12000, 14000, 16000), strict=True)])
    seen = []
    real = _smic_select.metrics.lsmi_many

    def spy(A, *args, **kwargs):
        seen.append(len(A.chunks[0]))
        return real(A, *args, **kwargs)

    monkeypatch.setattr(_smic_select.metrics, "lsmi_many", spy)
    monkeypatch.setattr(SMIC, "_whole_fit_max_bytes", 0)  # pass by pass, as a large fit: the sample is persisted
    values = {}
    for chunks in (1, 4):
        monkeypatch.setattr(_smic_select, "LSMI_SAMPLE_CHUNKS", chunks)
        fit = SMIC(3, t=5, lsmi_max_rows=32768, random_state=2,
                   scheduler=local_cluster_client).fit(da.from_array(X, chunks=(8192, 4)))
        values[chunks] = fit.lsmi_[5]
    assert seen == [1, 4]
    assert values[1] == values[4]
