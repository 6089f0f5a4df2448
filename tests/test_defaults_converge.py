"""The defaults converge on real data (issue 28): DC's conjugate gradients
and the CLI's annealed soft K-means used to stop at their caps (and warn) on
every real dataset tried. Here they run on data shipped with scikit-learn,
standardized, and must end by their convergence rules, without a warning."""

import warnings

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.exceptions import ConvergenceWarning

from infoclust_dask import DiscriminativeClustering, SoftKMeans
from infoclust_dask.registry import METHODS


def _standardized(X):
    X = np.asarray(X, dtype=np.float64)
    sd = X.std(0)
    return (X - X.mean(0)) / np.where(sd > 0, sd, 1.0)


def test_dc_defaults_converge_on_breast_cancer():
    X, c = load_breast_cancer(return_X_y=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = DiscriminativeClustering(2, random_state=0, scheduler="threads").fit(_standardized(X), c)
    assert not [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert 0 < m.n_iter_ < m._steps()  # ended by tol, below the cap


def test_the_clis_soft_kmeans_annealing_converges_on_digits():
    X, _ = load_digits(return_X_y=True)
    method = METHODS["softkmeans"]
    values = {"k": 10, **{o.dest: o.default for o in method.options}}
    params = method.params_from_options(values)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = SoftKMeans(**params, random_state=0, scheduler="threads").fit(_standardized(X))
    assert not [w for w in caught if issubclass(w.category, ConvergenceWarning)], [str(w.message) for w in caught]
    # the adaptive path (betas placed from the data): every split of the fixed 40-beta path, fewer betas
    assert 10 <= len(m.centers_path_) < 40 and m.betas_[-1] == 10.0
    assert m.n_distinct_path()[-1] == 10
