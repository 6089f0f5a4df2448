"""The toy method's estimator: one Lloyd step from the first k rows."""

import numpy as np
from sklearn.base import ClusterMixin
from sklearn.utils.validation import check_is_fitted

from infoclust_dask import engine
from infoclust_dask.extend import (
    SHARED_CONSTRAINTS,
    InfoclustEstimator,
    Interval,
    check_n_clusters,
    data_method,
    installs_runner,
    journaled,
    prepare_input,
    shared_parameters,
    validate_params,
)

from . import objective
from .kernel import NEAREST, STEP_STATS


@shared_parameters
class OneStepMeans(ClusterMixin, InfoclustEstimator):
    """One Lloyd step from the first ``n_clusters`` rows (a toy).

    Parameters
    ----------
    n_clusters : int, default=2
    random_state : int, numpy Generator or None, default=None
        Unused (the start is the first rows).
    {shared_parameters}
    verbose : int, default=0
        Unused.
    """

    _parameter_constraints = {**SHARED_CONSTRAINTS, "n_clusters": [Interval(int, 1)]}

    def __init__(self, n_clusters=2, *, random_state=None, scheduler=None, sample_dim=None, variables=None,
                 verbose=0):
        self.n_clusters = n_clusters
        self.random_state = random_state
        self.scheduler = scheduler
        self.sample_dim = sample_dim
        self.variables = variables
        self.verbose = verbose

    @journaled
    def fit(self, X, y=None):
        validate_params(self)
        X, _ = prepare_input(self, X, reset=True)
        check_n_clusters(self, self.n_clusters, X.shape[0])
        start = np.asarray(engine.compute(X[: self.n_clusters]), dtype=np.float64)
        stats = engine.map_reduce(STEP_STATS, X, params={"centers": start})
        self.cluster_centers_ = objective.new_centers(stats, start)
        self.labels_ = np.asarray(engine.compute(engine.map_blocks(NEAREST, X, params={"centers": self.cluster_centers_})))
        return self

    @data_method
    def predict(self, X):
        check_is_fitted(self)
        X, _ = prepare_input(self, X, reset=False)
        return engine.map_blocks(NEAREST, X, params={"centers": self.cluster_centers_})

    @installs_runner
    def held_out_score(self, X, y=None):
        check_is_fitted(self)
        with engine.installed(self.scheduler):
            X, _ = prepare_input(self, X, reset=False)
            stats = engine.map_reduce(STEP_STATS, X, params={"centers": self.cluster_centers_})
        return {"score": -objective.mean_distortion(stats), "vq_cost": objective.mean_distortion(stats)}

    def run_summary(self, data):
        return {"cluster_sizes": np.bincount(self.labels_, minlength=self.n_clusters).tolist()}
