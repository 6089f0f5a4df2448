"""Soft K-means (MacKay algorithm 20.7) and deterministic annealing over beta.

Responsibilities (20.7) ``r_k(x) ∝ exp(-beta d(m_k, x))`` with
``d = ||x - m||^2 / 2`` (20.2), update (20.8)-(20.9). Each iteration is one
map-reduce pass (:data:`infoclust_dask.kernels.kmeans.SOFT_KMEANS`).

Deterministic annealing runs the fixed-point iteration at each beta of an
increasing schedule, starting from the previous beta's centres plus a tiny
perturbation. For data of largest variance sigma_1^2 all centres sit at the
data mean while ``beta < 1/sigma_1^2`` and split in a pitchfork bifurcation
beyond it (MacKay §20.5, eq. 20.16-20.17, 20.22); ``centers_path_`` records the
centres at every beta so the splits can be seen and located
(:meth:`SoftKMeans.critical_betas`).
"""

from __future__ import annotations

import warnings
from typing import Any, Self

import numpy as np
from sklearn.base import ClusterMixin, TransformerMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from .. import engine
from .._inputs import check_sample_weight, prepare_input
from .._support.hints import DataLike, Labels, NumbersLike, RandomStateLike, SchedulerLike, Sequence
from .._support.progress import Steps, log
from .._support.validation import (
    ArrayLike,
    Interval,
    Options,
    check_n_clusters,
    check_random_state,
    param_error,
    validate_params,
)
from ..kernels.kmeans import RESPONSIBILITIES, SOFT_KMEANS, SOFT_SCATTER
from ..kernels.stats import WEIGHTED_SUM
from ..solvers.optimize import next_temperature, squarem
from ._base import (
    SHARED_CONSTRAINTS,
    ClusterColumnsOut,
    InfoclustEstimator,
    installs_runner,
    journaled,
    shared_parameters,
    stream_batch,
    voronoi_labels,
)
from ._conventions import WEIGHTS
from ._init import init_kmeanspp, init_random
from ._xarray import data_method

__all__ = ["SoftKMeans", "n_distinct", "center_groups", "critical_stiffness"]


def n_distinct(centers, tol):
    """Number of groups of centres closer than ``tol`` (single linkage)."""
    return len(center_groups(centers, tol))


#: the betas before the last of an annealing path stop at this many times ``tol``: they only carry the path
#: (the last step's shift then stays below ~3 % of the perturbation added before each beta)
INTERMEDIATE_TOL_FACTOR = 1e3
#: on an adaptive path, the betas at or past a predicted split not yet seen stop at this many times ``tol``,
#: so that the split grows enough there to be seen (critical_betas) where it happens
CROSSING_TOL_FACTOR = 1e2


def _soft_iterate(X, w, centers, beta, *, max_iter, tol, accelerate=True, on_pass=None):
    """Fixed-point iteration (20.7)-(20.9) at one beta, accelerated by
    SQUAREM (:func:`infoclust_dask.solvers.optimize.squarem`; the free energy, which
    every EM step lowers, never rises along it).

    Returns ``(centers, free_energy, n_iter, converged)``; the free energy is
    ``-(1/beta) sum_n w_n log sum_k exp(-beta d_nk)``. One pass per iteration
    (``on_pass(count)`` after each, e.g. a progress bar's tick).
    """
    passes = [0]

    def step(c):
        st = engine.map_reduce(SOFT_KMEANS, X, w, params={"centers": c, "beta": beta})
        passes[0] += 1
        if on_pass is not None:
            on_pass(passes[0])
        R = st["R"]
        new = c.copy()
        ok = R > 0
        new[ok] = st["S"][ok] / R[ok, None]
        return new, -float(st["log_z"]) / beta

    return squarem(step, centers, max_iter=max_iter, tol=tol, accelerate=accelerate)


def center_groups(centers, tol):
    """Groups of centres closer than ``tol`` (single linkage), as lists of
    indices (ascending, ordered by their first member)."""
    c = np.asarray(centers, dtype=np.float64)
    k = c.shape[0]
    parent = list(range(k))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    close = np.sqrt(((c[:, None, :] - c[None, :, :]) ** 2).sum(axis=-1)) <= tol
    for i, j in zip(*np.nonzero(np.triu(close, 1)), strict=True):
        parent[find(int(i))] = find(int(j))
    groups: dict = {}
    for i in range(k):
        groups.setdefault(find(i), []).append(i)
    return list(groups.values())


def critical_stiffness(R, Q, centers, groups):
    """Predicted critical stiffness of each group of coinciding centres that
    can split (two or more centres): ``1 / lambda_max`` of the group's
    posterior covariance ``C_g = sum_{k in g} (Q_k + R_k (m_k - mu_g)(m_k -
    mu_g)^T) / R_g`` (Rose 1998, eq. 21, ``T_c = 2 lambda_max`` with ``d =
    ||x - m||^2``; in MacKay's parametrization ``d = ||x - m||^2 / 2`` of
    eq. 20.2 this is ``beta_c = 1 / lambda_max``, eq. 20.17 for one
    Gaussian). ``R``, ``Q``: the sums of
    :func:`infoclust_dask.kernels.kmeans.soft_scatter_stats`. A group whose
    rows all coincide never splits (``inf``)."""
    out = []
    for g in groups:
        if len(g) < 2:
            continue
        Rg = float(R[g].sum())
        if not Rg > 0:
            continue
        mu = (R[g, None] * centers[g]).sum(axis=0) / Rg
        C = Q[g].sum(axis=0)
        for k in g:
            dm = centers[k] - mu
            C = C + R[k] * np.outer(dm, dm)
        lam = float(np.linalg.eigvalsh(C / Rg)[-1])
        out.append(1.0 / lam if lam > 0 else np.inf)
    return out


@shared_parameters
class SoftKMeans(ClusterColumnsOut, ClusterMixin, TransformerMixin, InfoclustEstimator):
    """Soft K-means with stiffness beta, optionally annealed.

    Parameters
    ----------
    n_clusters : int, default=8
        Number of clusters (one default across the package and the CLI's ``-k``, as scikit-learn's KMeans and SpectralClustering).
    beta : float, default=1.0
        Stiffness (an inverse squared length, sigma = beta^-1/2). Used when
        ``beta_schedule`` is None.
    beta_schedule : "auto", array-like of increasing floats, or None, default=None
        Deterministic annealing: the fixed point is followed from the first
        to the last beta; centres start at the (weighted) data mean, which is
        the fixed point for small beta. The final model is the last beta's.
        ``"auto"`` places the betas from the data, up to ``beta``: it starts
        at half the first critical stiffness ``1 / lambda_max`` of the data's
        covariance (all centres merged) and, after each beta, predicts the
        critical stiffness of every group of coinciding centres from its
        posterior covariance (:func:`critical_stiffness`, one extra pass),
        then steps sparsely (x4) where no split is predicted, stops 5 %
        below the next one and crosses it in a 5 % step. ``None``: one fit
        at ``beta``.
    init : {"k-means++", "random"} or array, default="k-means++"
        Start of a single-beta fit (ignored when annealing, which starts at
        the mean).
    acceleration : {"squarem", "none"}, default="squarem"
        The fixed-point iteration at each beta, accelerated by SQUAREM
        (Varadhan & Roland 2008; the free energy never rises along it) or
        plain.
    max_iter : int, default=3000
        Iterations (passes) per beta, at most; a beta stops earlier when
        converged (``tol``). Next to a bifurcation the fixed point is
        approached slowly: annealing 40 betas from 0.01 to 10 over digits,
        wine, breast cancer, segment, texture and magic needed at most 2577
        iterations at one beta (texture, standardized), 1595 on digits,
        under 600 on the others (``docs/BENCHMARKS.md``).
    tol : float, default=1e-10
        Convergence when the total squared centre shift is at most ``tol``
        times the mean feature variance. Small, because close to a
        bifurcation the iteration moves slowly (critical slowing down).
        When annealing, the betas before the last stop at 1000 times
        ``tol`` (100 times where a predicted split is being crossed): they
        only carry the path to the last beta.
    perturbation : float, default=1e-2
        When annealing, centres are displaced by
        ``perturbation * sqrt(mean feature variance) * N(0, 1)`` before each
        beta, so that merged centres can split.
    random_state : int, numpy Generator or None, default=None
        Seeds the k-means++ (or random) start and the perturbations between
        betas.
    {shared_parameters}
    verbose : int, default=0
        1: a progress bar over the betas (on a terminal) and one log line per
        beta; 2: also every EM iteration (see :mod:`infoclust_dask._support.progress`).

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_clusters, n_features)
    labels_ : ndarray or dask array of shape (n_samples,)
        Nearest centre (the beta -> inf limit of the responsibilities).
    betas_ : ndarray of shape (n_betas,)
    centers_path_ : ndarray of shape (n_betas, n_clusters, n_features)
        Centres at the fixed point of each beta.
    free_energy_path_ : ndarray of shape (n_betas,)
    n_iter_path_ : ndarray of shape (n_betas,)
    n_iter_ : int
        Total iterations (= passes) over all betas.
    predicted_critical_path_ : ndarray of shape (n_betas,)
        With ``beta_schedule="auto"``: after each beta, the smallest
        predicted critical stiffness of a group of centres that can still
        split (``inf`` when none can).

    Notes
    -----
    Cost: one pass over the data per iteration, up to ``max_iter`` per beta.

    References
    ----------
    MacKay (2003), §20.2 eq. (20.7)-(20.9); §20.5 eq. (20.10)-(20.22).
    Rose (1998), "Deterministic annealing for clustering".

    Examples
    --------
    >>> import numpy as np
    >>> from infoclust_dask import SoftKMeans
    >>> x = np.random.default_rng(0).normal(size=(4000, 1))  # sigma_1^2 = 1
    >>> sk = SoftKMeans(2, beta_schedule=[0.5, 0.8, 1.5, 3.0], random_state=0).fit(x)
    >>> sk.n_distinct_path(0.05).tolist()  # merged below beta=1, split above
    [1, 1, 2, 2]
    """

    #: scikit-learn checks this estimator fails on purpose, with the reason (:func:`expected_failed_checks`)
    _expected_failed_checks = {"check_sample_weight_equivalence_on_dense_data": WEIGHTS}

    def __init__(self, n_clusters: int = 8, *, beta: float = 1.0, beta_schedule: NumbersLike | str | None = None,
                 init: str | NumbersLike = "k-means++", acceleration: str = "squarem", max_iter: int = 3000,
                 tol: float = 1e-10,
                 perturbation: float = 1e-2,
                 random_state: RandomStateLike = None, scheduler: SchedulerLike = None, sample_dim: str | None = None,
                 variables: Sequence[str] | None = None, verbose: int = 0):
        self.n_clusters = n_clusters
        self.beta = beta
        self.beta_schedule = beta_schedule
        self.init = init
        self.acceleration = acceleration
        self.max_iter = max_iter
        self.tol = tol
        self.perturbation = perturbation
        self.random_state = random_state
        self.scheduler = scheduler
        self.sample_dim = sample_dim
        self.variables = variables
        self.verbose = verbose

    _parameter_constraints = {  # the shared ones (random_state, scheduler, sample_dim, variables, verbose) first
        **SHARED_CONSTRAINTS,
        "n_clusters": [Interval(int, 1)],
        "beta": [Interval(float, 0, closed="neither")],
        "beta_schedule": [ArrayLike(), Options(None, "auto")],
        "acceleration": [Options("squarem", "none")],
        "init": [Options("k-means++", "random"), ArrayLike()],
        "max_iter": [Interval(int, 1)],
        "tol": [Interval(float, 0)],
        "perturbation": [Interval(float, 0)],
    }

    def _betas(self):
        if self.beta_schedule is None:
            return np.array([float(self.beta)]), False
        if isinstance(self.beta_schedule, str):  # "auto" (validate_params allows nothing else)
            return None, True
        b = np.asarray(self.beta_schedule, dtype=np.float64).ravel()
        if b.size == 0 or not np.all(np.isfinite(b)) or np.any(b <= 0) or np.any(np.diff(b) < 0):
            raise param_error(
                self, "beta_schedule", "a non-empty increasing sequence of positive floats", self.beta_schedule
            )
        return b, True

    def _warm_start_params(self, previous) -> dict:
        """``fit(init=previous)``: EM from the previous centres at the
        previous final beta (no annealing from the soft end again)."""
        return {"init": np.array(previous.cluster_centers_, dtype=np.float64), "beta": float(previous.beta_),
                "beta_schedule": None}

    @journaled
    def fit(self, X: DataLike, y: Any = None, sample_weight: DataLike | None = None) -> Self:
        """Fit at ``beta``, or anneal along ``beta_schedule``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), dask, xarray or store path
        y : ignored
        sample_weight : array-like of shape (n_samples,), optional

        Returns
        -------
        self
        """
        validate_params(self)
        X, info = prepare_input(self, X, reset=True, need_moments=True)
        check_n_clusters(self, self.n_clusters, info.n)
        betas, annealing = self._betas()
        w = check_sample_weight(sample_weight, X)
        rng = check_random_state(self.random_state)
        scale2 = float(np.mean(info.var)) or 1.0
        tol = self.tol * scale2
        centers = self._initial_centers(X, w, info, annealing, rng)

        accelerate = self.acceleration == "squarem"
        # centres closer than this are one group, as in critical_betas(): a group that began to split but is
        # not yet 5 % apart is still "due", and the path keeps its dense steps until the split is seen
        group_tol = 0.05 * np.sqrt(scale2)
        path, free, iters, used = [], [], [], []
        predicted: list[float] = []
        not_converged = []

        def predict(c, b):  # the smallest critical stiffness still to come (one pass)
            st = engine.map_reduce(SOFT_SCATTER, X, w, params={"centers": c, "beta": b})
            crit = critical_stiffness(st["R"], st["Q"], c, center_groups(c, group_tol))
            return crit

        auto = betas is None
        if auto:
            beta_end = float(self.beta)
            first = predict(centers, beta_end)
            beta = min(0.5 * min(first), beta_end) if first and np.isfinite(min(first)) else beta_end
            beta_start = beta
        else:
            beta_start, beta_end = float(betas[0]), float(betas[-1])
        # an automatic schedule's length is not known ahead: its position is the share of the log-beta range done
        span = np.log(beta_end / beta_start) if auto and beta_end > beta_start else 0.0
        with Steps(self, 100 if auto else len(betas), "SoftKMeans: annealing", unit="%" if auto else "beta") as bar:
            i = 0
            while True:
                if not auto:
                    beta = float(betas[i])
                if annealing:
                    centers = centers + self.perturbation * np.sqrt(scale2) * rng.standard_normal(centers.shape)
                if (beta >= beta_end) if auto else (i == len(betas) - 1):
                    beta_tol = tol
                elif auto and predicted and predicted[-1] <= beta:  # a predicted split to be seen growing here
                    beta_tol = tol * CROSSING_TOL_FACTOR
                else:
                    beta_tol = tol * INTERMEDIATE_TOL_FACTOR
                centers, f, it, ok = _soft_iterate(X, w, centers, beta, max_iter=self.max_iter, tol=beta_tol,
                                                   accelerate=accelerate,
                                                   on_pass=lambda n, b=beta: bar.tick(beta=f"{b:.3g}", passes=n))
                path.append(centers.copy())
                free.append(f)
                iters.append(it)
                used.append(beta)
                if not ok:
                    not_converged.append(float(beta))
                if auto:
                    bar.to(round(100 * np.log(beta / beta_start) / span, 1) if span else 100, beta=f"{beta:.3g}",
                           betas=i + 1)
                else:
                    bar.update(1, beta=f"{beta:.3g}")
                log(self, f"[SoftKMeans] beta {i + 1}{'' if auto else f'/{len(betas)}'} = {beta:.4g}: {it} "
                          f"iterations, free energy {f:.6g}")
                i += 1
                if auto:
                    if beta >= beta_end:
                        predicted.append(np.inf)
                        break
                    crit = predict(centers, beta)
                    predicted.append(min(crit) if crit else np.inf)
                    beta = next_temperature(beta, beta_end, crit)
                elif i == len(betas):
                    break
        self._set_path(path, free, iters, used, predicted if auto else None, not_converged, scale2)
        self.labels_ = voronoi_labels(X, self.cluster_centers_, lazy=info.lazy_input)
        return self

    @installs_runner
    def partial_fit(self, X: DataLike, y: Any = None, sample_weight: DataLike | None = None) -> Self:
        """Update the centres with one batch of rows: on-line EM at the fixed
        stiffness ``beta`` (no annealing).

        The first call seeds the centres from its batch (``init``); each
        call computes the batch's responsibilities (20.7) at ``beta`` and
        moves each centre to the responsibility-weighted running mean of
        every row seen, ``m_j += (S_j - R_j m_j) / r_j`` with the batch's
        ``R_j = sum r_nj`` and ``S_j = sum r_nj x_n`` and ``r_j``
        (``counts_``) their total so far - stepwise EM with step ``R_j / r_j``
        (MacKay 2003, ch. 20; Neal & Hinton 1998's incremental EM without
        removing old contributions). It converges towards the fixed point of
        soft K-means at ``beta`` that ``fit(beta_schedule=[beta])`` reaches
        from the same start; the annealed ``fit`` may end elsewhere.
        """
        X, info, Xb, wb, first = stream_batch(self, X, sample_weight)
        if first:
            check_n_clusters(self, self.n_clusters, len(Xb))
            rng = check_random_state(self.random_state)
            w = None if sample_weight is None else wb
            self.cluster_centers_ = np.array(self._initial_centers(X, w, info, False, rng), dtype=np.float64)
            self.counts_ = np.zeros(self.n_clusters)
            self.beta_ = float(self.beta)
            self.n_steps_ = 0
        centers = self.cluster_centers_
        r = np.asarray(engine.compute(engine.map_blocks(
            RESPONSIBILITIES, Xb, params={"centers": centers, "beta": self.beta_},
            trailing_shape=(self.n_clusters,)))) * wb[:, None]
        weight = r.sum(axis=0)
        self.counts_ = self.counts_ + weight
        moved = self.counts_ > 0
        centers = centers.copy()
        centers[moved] += (r.T @ Xb - weight[:, None] * centers)[moved] / self.counts_[moved, None]
        self.cluster_centers_ = centers
        self.n_steps_ += 1
        return self

    def _initial_centers(self, X: Any, w: Any, info: Any, annealing: bool, rng: Any) -> Any:
        """The starting centres: all at the (weighted) mean when annealing
        (the high-temperature solution, MacKay 2003 ch. 20), else ``init``."""
        k = self.n_clusters
        if annealing:
            if w is None:
                return np.tile(info.mean, (k, 1))
            sums = engine.map_reduce(WEIGHTED_SUM, X, w)
            return np.tile(sums["s"] / sums["w"], (k, 1))
        if isinstance(self.init, str):
            if self.init == "k-means++":
                return init_kmeanspp(X, w, k, rng)
            return init_random(X, w, k, rng)  # "random" (validate_params allows nothing else)
        centers = np.array(self.init, dtype=np.float64)
        if centers.shape != (k, info.d):
            raise ValueError(
                f"The shape of the initial centers {centers.shape} does not match "
                f"(n_clusters, n_features) = ({k}, {info.d})."
            )
        return centers

    def _set_path(self, path: list, free: list, iters: list, used: list, predicted: list | None,
                  not_converged: list, scale2: float) -> None:
        """The fitted attributes of the annealing path (a warning first for
        the betas where it stopped at ``max_iter``)."""
        auto = predicted is not None
        centers = path[-1]
        if not_converged:
            warnings.warn(
                f"SoftKMeans did not converge within max_iter={self.max_iter} at beta="
                f"{not_converged[:5]}{'...' if len(not_converged) > 5 else ''}; increase "
                "max_iter or tol.",
                ConvergenceWarning,
                stacklevel=4,
            )
        self.betas_ = np.array(used)
        if auto:
            self.predicted_critical_path_ = np.array(predicted)
        elif hasattr(self, "predicted_critical_path_"):
            del self.predicted_critical_path_
        self.centers_path_ = np.array(path)
        self.free_energy_path_ = np.array(free)
        self.n_iter_path_ = np.array(iters)
        self.n_iter_ = int(sum(iters))
        self.cluster_centers_ = centers
        self.beta_ = float(used[-1])
        self.data_scale_ = float(np.sqrt(scale2))

    def n_distinct_path(self, rel_tol: float = 0.05) -> Any:
        """Number of distinct centres at each beta; centres closer than
        ``rel_tol`` times the data scale (sqrt of the mean feature variance)
        count as one."""
        check_is_fitted(self)
        tol = rel_tol * self.data_scale_
        return np.array([n_distinct(c, tol) for c in self.centers_path_])

    def critical_betas(self, rel_tol: float = 0.05) -> list:
        """The betas at which the number of distinct centres first grows: the
        observed bifurcations (the first beta of the schedule past each one).

        Returns a list of ``(beta, n_distinct_after)``."""
        nd = self.n_distinct_path(rel_tol)
        return [(float(self.betas_[i]), int(nd[i])) for i in range(1, len(nd)) if nd[i] > nd[i - 1]]

    @data_method
    def predict(self, X: DataLike) -> Labels:
        """Nearest centre for each sample (lazy for lazy input)."""
        check_is_fitted(self)
        X, _ = prepare_input(self, X, reset=False)
        return voronoi_labels(X, self.cluster_centers_)

    @data_method
    def predict_proba(self, X: DataLike) -> Labels:
        """Responsibilities (20.7) at the final beta, shape (n_samples, n_clusters)."""
        check_is_fitted(self)
        X, _ = prepare_input(self, X, reset=False)
        return engine.map_blocks(
            RESPONSIBILITIES, X, params={"centers": self.cluster_centers_, "beta": self.beta_},
            trailing_shape=(self.n_clusters,),
        )

    transform = predict_proba

    @installs_runner
    def run_summary(self, data: Any) -> dict:
        """Facts of a fit on a store (``data``: its Dataset) for the run's
        ``summary.json``: the observed critical betas. (No
        ``held_out_score``: soft K-means is not cross-validated.)"""
        check_is_fitted(self)
        return {"critical_betas": self.critical_betas()}

    @data_method
    def fit_predict(self, X: DataLike, y: Any = None, sample_weight: DataLike | None = None) -> Labels:
        return self.fit(X, sample_weight=sample_weight).labels_

    @data_method
    def score(self, X: DataLike, y: Any = None, sample_weight: DataLike | None = None) -> float:
        """Minus the free energy of X at the final beta (higher is better)."""
        check_is_fitted(self)
        X, _ = prepare_input(self, X, reset=False)
        w = check_sample_weight(sample_weight, X)
        st = engine.map_reduce(
            SOFT_KMEANS, X, w, params={"centers": self.cluster_centers_, "beta": self.beta_},
        )
        return float(st["log_z"]) / self.beta_

