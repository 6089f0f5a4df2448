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
