"""Isotropic Gaussian mixtures by EM, as map-reduce passes: the baselines of
discriminative clustering (Kaski, Sinkkonen & Klami 2005, §6.5 and §7.2).

``IsotropicGaussianMixture`` ("MoG") models p(x); ``MDA2`` models the joint
p(c, x) = sum_j pi_j N(x; mu_j, s_j^2 I) psi_j(c) (a mixture whose components
each carry a multinomial over the classes). Both partition new samples by
x alone: the most probable component given x. One pass per EM iteration.
"""

from __future__ import annotations

import warnings
from typing import Any, Self

import numpy as np
from sklearn.base import ClusterMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from .. import engine
from .._inputs import encode_labels, prepare_input
from .._support.hints import DataLike, Labels, RandomStateLike, SchedulerLike, Sequence
from .._support.progress import log
from .._support.validation import (
    SIGMA_RANGE,
    Interval,
    Options,
    check_n_clusters,
    check_random_state,
    require_y,
    validate_params,
)
from ..kernels.mixture import MIXTURE_ASSIGN, MIXTURE_EM, MIXTURE_LOG_DENSITY, MIXTURE_POSTERIORS
from ._base import SHARED_CONSTRAINTS, InfoclustEstimator, installs_runner, journaled, shared_parameters, stream_batch
from ._conventions import COMPONENT_PROBA, supervised_by_classes
from ._kmeans import KMeans
from ._xarray import data_method

__all__ = ["IsotropicGaussianMixture", "MDA2"]


@shared_parameters
class _IsotropicMixture(InfoclustEstimator):
    """Mixture of isotropic Gaussians fitted by EM ("MoG").

    Parameters
    ----------
    n_clusters : int, default=8
        Number of components (8 for every estimator of the package and the
        CLI's ``-k``, as scikit-learn's KMeans and SpectralClustering).
    n_components : int or None, default=None
        GaussianMixture's name for the same number: when given it is the
        number used, whatever ``n_clusters`` says.
    sigma : float or None, default=None
        None learns one variance per component; a float fixes a common
        spread (the paper's setting, where it is chosen on validation data).
    max_iter : int, default=100
        EM iterations (the paper used 100).
    tol : float, default=1e-7
        Stop when the log likelihood improves by less than ``tol * |loglik|``.
    min_variance : float, default=1e-6
        Floor of a learned variance, relative to the mean feature variance.
    random_state : int, numpy Generator or None, default=None
        Seeds the K-means start of the means.
    {shared_parameters}
    verbose : int, default=0
        1: a log line when EM stops; 2: also the log likelihood of every
        iteration (see :mod:`infoclust_dask._support.progress`).

    Attributes
    ----------
    means_ : ndarray (n_clusters, n_features)
    variances_ : ndarray (n_clusters,)
    weights_ : ndarray (n_clusters,)
    cluster_centers_ : ndarray, alias of ``means_``
    loglik_history_ : list of float
    n_iter_ : int
    """

    _joint = False

    def __init__(self, n_clusters: int = 8, *, n_components: int | None = None, sigma: float | None = None,
                 max_iter: int = 100, tol: float = 1e-7,
                 min_variance: float = 1e-6,
                 random_state: RandomStateLike = None, scheduler: SchedulerLike = None, sample_dim: str | None = None,
                 variables: Sequence[str] | None = None, verbose: int = 0):
        self.n_clusters = n_clusters
        self.n_components = n_components
        self.sigma = sigma
        self.max_iter = max_iter
        self.tol = tol
        self.min_variance = min_variance
        self.random_state = random_state
        self.scheduler = scheduler
        self.sample_dim = sample_dim
        self.variables = variables
        self.verbose = verbose

    _parameter_constraints = {  # the shared ones (random_state, scheduler, sample_dim, variables, verbose) first
        **SHARED_CONSTRAINTS,
        "n_clusters": [Interval(int, 1)],
        "n_components": [Interval(int, 1), Options(None)],
        "sigma": [SIGMA_RANGE, Options(None)],
        "max_iter": [Interval(int, 1)],
        "tol": [Interval(float, 0)],
        "min_variance": [Interval(float, 0)],
    }

    @property
    def _k(self) -> int:
        """The number of components: ``n_components`` (GaussianMixture's name) when given, else ``n_clusters``."""
        return self.n_clusters if self.n_components is None else self.n_components

    def _check(self, n):
        check_n_clusters(self, self._k, n, name="n_components" if self.n_components is not None else "n_clusters")

    def _start(self, X, info, n_classes, rng, prepared=True) -> dict:
        """The first parameters: K-means means, one variance from K-means' inertia (or ``sigma``), equal
        weights and class probabilities. ``prepared``: ``X`` is the input ``info`` describes, so K-means
        runs on it as it is (no second check or moments pass); ``partial_fit``'s first batch passes its
        float64 rows, which K-means checks itself."""
        k, d = self._k, info.d
        seed = int(rng.integers(2**31))
        km = KMeans(k, random_state=seed)._fit_prepared(X, info, labels=False) if prepared else \
            KMeans(k, random_state=seed).fit(X)
        self._scale = float(np.mean(info.var)) or 1.0
        if self.sigma is None:
            variances = np.full(k, max(km.inertia_ / (info.n * d), self.min_variance * self._scale))
        else:
            variances = np.full(k, float(self.sigma) ** 2)
        return {"means": km.cluster_centers_, "variances": variances, "log_weights": np.full(k, -np.log(k)),
                "log_psi": np.full((k, n_classes), -np.log(n_classes)) if n_classes else None,
                "n_classes": n_classes}

    def _m_step(self, st: dict, params: dict) -> dict:
        """The M-step from the responsibilities' sums ``R`` (per component), ``S`` (of x), ``Q`` (of
        ||x||^2) and ``N`` (per component and class)."""
        d = params["means"].shape[1]
        R = np.maximum(st["R"], 1e-12)
        means = st["S"] / R[:, None]
        variances = params["variances"]
        if self.sigma is None:
            var = (st["Q"] - 2 * np.einsum("kd,kd->k", means, st["S"]) + R * np.einsum("kd,kd->k", means, means))
            variances = np.maximum(var / (d * R), self.min_variance * self._scale)
        log_psi = params["log_psi"]
        if log_psi is not None:
            log_psi = np.log((st["N"] + 1e-3) / (R[:, None] + 1e-3 * params["n_classes"]))
        return {"means": means, "variances": variances, "log_weights": np.log(R / R.sum()), "log_psi": log_psi,
                "n_classes": params["n_classes"]}

    def _keep(self, params: dict) -> None:
        self.means_, self.variances_, self.weights_ = params["means"], params["variances"], np.exp(params["log_weights"])
        self.cluster_centers_ = params["means"]
        if params["log_psi"] is not None:
            self.class_probabilities_ = np.exp(params["log_psi"])

    def _em(self, X, c, n_classes, info):
        params = self._start(X, info, n_classes, check_random_state(self.random_state))
        history = []
        it = 0
        for it in range(1, self.max_iter + 1):
            st = engine.map_reduce(MIXTURE_EM, X, c, params=params)
            history.append(float(st["loglik"]))
            params = self._m_step(st, params)
            log(self, f"[{type(self).__name__}] EM iteration {it}: log-likelihood {history[-1]:.8g}", level=2)
            if len(history) > 1 and abs(history[-1] - history[-2]) <= self.tol * abs(history[-1]):
                break
        else:
            warnings.warn(f"{type(self).__name__}: EM stopped at max_iter={self.max_iter}.",
                          ConvergenceWarning, stacklevel=4)
        self._keep(params)
        self.loglik_history_ = history
        self.n_iter_ = it
        log(self, f"[{type(self).__name__}] EM: {it} iterations, log-likelihood {history[-1]:.8g}")

    def _online_step(self, X, C, n_classes, info, first) -> Self:
        """One batch of ``partial_fit``: stepwise EM on running sufficient statistics. The batch's
        responsibilities at the current parameters add its sums to the totals of every batch seen
        (``counts_`` = the R_j so far), and the M-step runs on the totals - Neal & Hinton (1998)'s
        incremental EM without removing old contributions; the first batch also seeds the parameters
        (K-means on it, as ``fit``)."""
        if first:
            self._check(len(X))
            self._params = self._start(X, info, n_classes, check_random_state(self.random_state), prepared=False)
            self._totals = None
            self.loglik_history_, self.n_steps_ = [], 0
        st = engine.map_reduce(MIXTURE_EM, X, C, params=self._params)
        self._totals = st if self._totals is None else {key: self._totals[key] + st[key] for key in st}
        self._params = self._m_step(self._totals, self._params)
        self._keep(self._params)
        self.counts_ = np.asarray(self._totals["R"], dtype=np.float64)
        self.loglik_history_.append(float(st["loglik"]) / len(X))
        self.n_steps_ += 1
        self.n_iter_ = self.n_steps_
        return self

    @installs_runner
    def partial_fit(self, X: DataLike, y: Any = None) -> Self:
        """Update the mixture with one batch of rows (``y`` ignored): stepwise
        EM on running sufficient statistics (see ``_online_step``). Over
        batches drawn in random order it approaches an EM fixed point of the
        rows seen; over blocks sorted by cluster it is biased towards the
        first blocks' components (tests/cluster/test_mixture.py measures both
        against ``fit``). ``loglik_history_`` holds each batch's mean log
        likelihood before its update."""
        X, info, rows, _, first = stream_batch(self, X, None)
        return self._online_step(rows, None, 0, info, first)

    @journaled
    def fit(self, X: DataLike, y: Any = None) -> Self:
        """Fit by EM from K-means means. ``y`` is ignored."""
        validate_params(self)
        X, info = prepare_input(self, X, reset=True, need_moments=True)
        self._check(info.n)
        self._em(X, None, 0, info)
        self.labels_ = engine.as_lazy(self._assign(X)) if info.lazy_input else self._assign(X)
        return self

    @installs_runner
    def run_summary(self, data: Any) -> dict:
        """Facts of a fit on a store for the run's ``summary.json``: the log
        likelihood, EM iterations, the components' sizes and variances."""
        check_is_fitted(self)
        labels = np.asarray(engine.compute(self.labels_))
        return {"loglik": float(self.loglik_history_[-1]), "n_iter": int(self.n_iter_),
                "cluster_sizes": np.bincount(labels, minlength=self._k).tolist(),
                "variances": np.asarray(self.variances_).tolist()}

    @data_method
    def predict(self, X: DataLike) -> Labels:
        """Most probable component given x alone."""
        check_is_fitted(self)
        X, _ = prepare_input(self, X, reset=False)
        return self._assign(X)

    def _model(self) -> dict:
        return {"means": self.means_, "variances": self.variances_, "log_weights": np.log(self.weights_)}

    @data_method
    def predict_proba(self, X: DataLike) -> Labels:
        """Posterior probability of each component given x alone, shape (n_samples, n_clusters)
        (GaussianMixture's ``predict_proba``)."""
        check_is_fitted(self)
        X, _ = prepare_input(self, X, reset=False)
        return engine.map_blocks(MIXTURE_POSTERIORS, X, params=self._model(), trailing_shape=(self._k,))

    @data_method
    def score_samples(self, X: DataLike) -> Labels:
        """Log density of the mixture (of x alone) at each sample (GaussianMixture's ``score_samples``)."""
        check_is_fitted(self)
        X, _ = prepare_input(self, X, reset=False)
        return engine.map_blocks(MIXTURE_LOG_DENSITY, X, params=self._model())

    @data_method
    def score(self, X: DataLike, y: Any = None) -> float:
        """Mean log density per sample (GaussianMixture's ``score``); ``y`` is ignored."""
        return float(np.mean(np.asarray(engine.compute(self.score_samples(X)))))

    def _n_parameters(self) -> int:
        """Free parameters: the means, one variance per component (none with a fixed ``sigma``), the
        weights (minus one), and for MDA2 the class probabilities of each component (minus one each)."""
        k, d = self.means_.shape
        extra = k * (self.class_probabilities_.shape[1] - 1) if hasattr(self, "class_probabilities_") else 0
        return k * d + (k if self.sigma is None else 0) + (k - 1) + extra

    @data_method
    def bic(self, X: DataLike) -> float:
        """Bayesian information criterion of the mixture of x on ``X`` (lower is better):
        ``-2 log L + p log n`` (GaussianMixture's ``bic``)."""
        total = np.asarray(engine.compute(self.score_samples(X)))
        return float(-2 * total.sum() + self._n_parameters() * np.log(total.shape[0]))

    @data_method
    def aic(self, X: DataLike) -> float:
        """Akaike information criterion of the mixture of x on ``X`` (lower is better): ``-2 log L + 2 p``."""
        total = np.asarray(engine.compute(self.score_samples(X)))
        return float(-2 * total.sum() + 2 * self._n_parameters())

    def _assign(self, X):
        return engine.map_blocks(
            MIXTURE_ASSIGN, X,
            params={"means": self.means_, "variances": self.variances_, "log_weights": np.log(self.weights_)},
        )


class IsotropicGaussianMixture(ClusterMixin, _IsotropicMixture):
    __doc__ = _IsotropicMixture.__doc__


class MDA2(_IsotropicMixture):
    """Joint mixture of x and the class ("MDA2"): each component is an
    isotropic Gaussian in x with its own multinomial over classes, fitted by
    EM on (x, c); new samples are partitioned by x alone.

    Parameters are those of :class:`IsotropicGaussianMixture`; ``fit(X, y)``
    with any class labels ``y`` (encoded as ``0 .. C-1`` in the order of
    ``classes_``).

    Attributes
    ----------
    classes_ : ndarray (n_classes,)
    class_probabilities_ : ndarray (n_clusters, n_classes)
        ``psi_j(i)``, with a 1e-3 pseudo-count so no class has probability 0.

    Supervised by the class labels, MDA2 is not a scikit-learn clusterer
    (``fit(X)`` alone cannot run): it is tagged as requiring ``y``.
    """

    _expected_failed_checks = {"check_classifiers_train": COMPONENT_PROBA}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return supervised_by_classes(tags)

    @journaled
    def fit(self, X: DataLike, y: Any) -> Self:
        """Fit by EM on primary data ``X`` and class labels ``y``."""
        validate_params(self)
        require_y(self, y)
        X, info = prepare_input(self, X, reset=True, need_moments=True)
        self._check(info.n)
        C, self.classes_ = encode_labels(y, info.n)  # one class: nothing to discriminate (as DC)
        self.n_classes_ = len(self.classes_)
        self._em(X, C, self.n_classes_, info)
        self.labels_ = engine.as_lazy(self._assign(X)) if info.lazy_input else self._assign(X)
        return self

    @installs_runner
    def partial_fit(self, X: DataLike, y: Any = None, classes: Any = None) -> Self:
        """Update the joint mixture with one batch of rows and their class
        labels: stepwise EM as :meth:`IsotropicGaussianMixture.partial_fit`,
        the class counts per component among the running sums. ``classes``
        (every class the stream holds, scikit-learn's convention) is needed
        on the first call when the first batch does not hold every class;
        later batches may hold only some."""
        require_y(self, y)
        X, info, rows, _, first = stream_batch(self, X, None)
        if first:
            C, self.classes_ = encode_labels(y, len(rows), classes=classes)
            self.n_classes_ = len(self.classes_)
        else:
            C, _ = encode_labels(y, len(rows), classes=self.classes_, min_classes=1)
        return self._online_step(rows, np.asarray(engine.compute(C)), self.n_classes_, info, first)

    @data_method
    def fit_predict(self, X: DataLike, y: Any) -> Labels:
        """Fit on ``(X, y)`` and return the components of the training rows (x alone)."""
        return self.fit(X, y).labels_
