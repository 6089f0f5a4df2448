"""Discriminative clustering (DC), marginalized MAP form, by conjugate gradients.

Kaski, Sinkkonen & Klami (2005), "Discriminative clustering",
Neurocomputing 69, 18-41. Voronoi prototypes
``m_j`` of the primary data x are chosen so that the partition is
informative of the discrete auxiliary labels c: they maximize the smoothed
marginalized log posterior (10), with normalized Gaussian memberships (4) and
a Dirichlet prior ``n_i^0`` per class, whose gradient is (11). New samples are
clustered from x alone (nearest prototype).

Each objective evaluation is two map-reduce passes: the smoothed counts
``n_ji`` (:data:`~infoclust_dask.kernels.dc.DC_COUNTS`), then, with the
digamma terms ``L_ji`` they give, the gradient sums
(:data:`~infoclust_dask.kernels.dc.DC_GRAD`). The driver runs scipy's
conjugate gradients on the (K x d) prototypes.
"""

from __future__ import annotations

import warnings
from typing import Any, Self

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from .. import engine, metrics
from .._inputs import check_not_constant, encode_labels, prepare_input
from .._support.hints import DataLike, Labels, NumbersLike, RandomStateLike, SchedulerLike, Sequence
from .._support.progress import say, verbosity
from .._support.validation import (
    SIGMA_RANGE,
    ArrayLike,
    Interval,
    Options,
    check_n_clusters,
    check_random_state,
    param_error,
    require_y,
    validate_params,
)
from ..kernels.dc import DC_COUNTS, DC_GRAD, DC_REG
from ..objectives import dc as obj
from ..solvers import optimize
from ._base import (
    SHARED_CONSTRAINTS,
    InfoclustEstimator,
    installs_runner,
    journaled,
    shared_parameters,
    stream_batch,
    voronoi_labels,
)
from ._conventions import supervised_by_classes
from ._dc_online import online_fit, online_update
from ._dc_search import hard_counts, width_search
from ._init import init_random
from ._kmeans import KMeans
from ._xarray import data_method

__all__ = ["DiscriminativeClustering", "dc_objective"]

_OPTIMIZERS = ("cg", "sa", "online")
#: CG stops when (10) rose by at most ``tol`` (relative) over this many iterations
TOL_WINDOW = 5
_REGULARIZATIONS = (None, "eq", "mog", "vq")


def dc_objective(X: DataLike, c: DataLike, centers: NumbersLike, sigma: float, *, prior: float | NumbersLike,
                 n_classes: int, regularization: str | None = None, lam: float = 0.0, scheduler: SchedulerLike = None,
                 subset: Any = None) -> tuple:
    """Smoothed log posterior (10) and its gradient (11) at ``centers``, or a
    regularized form: ``"eq"`` (12), ``"mog"`` (14), ``"vq"`` (15) with
    strength ``lam``.

    Two passes over the data (three with "mog" or "vq"); ``scheduler=None``
    runs them where the enclosing call runs (:func:`infoclust_dask.engine.installed`).
    Returns ``(value, gradient (K, d), counts (K, C))``.
    """
    centers = np.asarray(centers, dtype=np.float64)
    eq = lam if regularization == "eq" else 0.0
    with engine.installed(scheduler):
        counts = engine.map_reduce(
            DC_COUNTS, X, c,
            params={"centers": centers, "sigma": sigma, "n_classes": n_classes, "subset": subset},
        )["counts"]
        L = obj.digamma_terms(counts, prior, eq)
        st = engine.map_reduce(DC_GRAD, X, c, params={"centers": centers, "sigma": sigma, "L": L, "subset": subset})
        value = obj.log_posterior(counts, prior, eq)
        grad = obj.gradient(st["WX"], st["W"], centers, sigma)
        if regularization in ("mog", "vq") and lam > 0:
            rs = engine.map_reduce(DC_REG, X, params={"centers": centers, "kind": regularization,
                                                      "lam": lam, "subset": subset})
            if regularization == "mog":
                v, g = obj.mog_term(rs["log_z"], rs["R"], rs["S"], centers, lam, counts.sum(), centers.shape[0])
            else:
                v, g = obj.vq_term(rs["inertia"], rs["counts"], rs["sums"], centers, lam)
            value, grad = value + v, grad + g
    return value, grad, counts


@shared_parameters
class DiscriminativeClustering(InfoclustEstimator):
    """Discriminative clustering: Voronoi regions of x informative of labels c.

    Parameters
    ----------
    n_clusters : int, default=8
        Number of prototypes (one default across the package and the CLI's ``-k``, as scikit-learn's KMeans and SpectralClustering).
    sigma : float or "auto", default="auto"
        Width of the Gaussian memberships (4) used to smooth the objective
        during optimization (CG, on-line); for SA, the width of the jumps. "auto" fits on the hashed training
        part (``1 - validation_fraction`` of the rows) of each of ``n_splits``
        splits for every value of ``sigma_grid``, scores the *unsmoothed*
        held-out log posterior (9) per validation row (paper §3.1), and
        chooses by the one-standard-error rule: of the widths whose mean
        score is within one standard error (over the splits) of the best,
        the largest at which the optimizer moved from its start (a width
        at which CG takes no step leaves K-means' prototypes). Then it
        refits on all rows. Exact ties, which the piecewise-constant score
        (9) makes common, thus go to the smoother model, not to the first.
        CG's fits are chaotic (a last-bit change of X gives other held-out
        scores), so the search runs on X centred, divided by its overall
        spread and rounded to 2**-20 of it: the same choice in other units,
        after an offset or a rounding of the data (in-memory X: one more
        copy of it while the search runs).
    prior : float or array of shape (n_classes,), default=1.0
        Dirichlet parameters ``n_i^0`` (the paper uses 1).
    optimizer : {"cg", "sa", "online"}, default="cg"
        ``"cg"``: conjugate gradients (scipy) on the smoothed MAP objective
        (10), two passes per evaluation, the paper's preferred method.
        ``"sa"``: simulated annealing on the unsmoothed objective (9) (§3.1):
        Gaussian displacements of width sigma, temperature falling linearly
        from ``sa_temperature`` to 0; one pass per step, ``max_iter`` steps.
        ``"online"``: the older stochastic algorithm (5)-(6) streamed over
        the blocks, ``max_iter`` epochs, learning rate falling linearly from
        ``learning_rate`` to 0, j and l swapped for a second update.
    regularization : {None, "eq", "mog", "vq"}, default=None
        ``"eq"``: equalized cluster sizes (12), ``(1 + lambda)`` on the
        second term; ``"mog"``: adds the log likelihood of an equal-weight
        isotropic Gaussian mixture on the same prototypes,
        ``sum_x log sum_j exp(-lambda |x - m_j|^2) / K`` (14); ``"vq"``:
        subtracts ``lambda`` times the K-means cost (15).
    reg_strength : float or "auto", default=0.0
        lambda. "auto" picks it (jointly with sigma when that is "auto") on
        held-out rows by the unsmoothed posterior (9), from ``reg_grid``.
    init : {"kmeans", "random"} or array of shape (n_clusters, n_features), default="kmeans"
        K-means prototypes (the paper's finding (iii)), random data points,
        or given prototypes.
    classes : array-like or None, default=None
        All class labels; default the distinct labels of ``y``. Give them
        when the training rows may miss a class that held-out rows have
        (cross-validation folds of class-sorted data).
    n_init : int, default=1
        Optimizations of the final fit: the first from ``init``, the others
        from random data points; the one with the highest training objective
        is kept (sigma and lambda are chosen from ``init`` only).
    max_iter : int or None, default=None
        CG iterations (default 1000, a cap: ``tol`` ends them first; the paper capped them at 29), SA steps
        (default 2000 x n_clusters; the paper ran 100 000 x n_clusters) or
        on-line epochs (default 20).
    tol : float or None, default=1e-4
        CG stops when the smoothed objective (10) rose by at most ``tol``
        (relative) over the last 5 iterations. On real data (10) creeps up for
        thousands of iterations with its gradient far above any fixed
        threshold: on Letter (20 000 rows, k = 2-10, sigma 0.25-2) 1e-4 stops
        after 48-198 iterations, 1e-5 after 77-527 and 1e-6 after 89-2000+
        (``docs/BENCHMARKS.md``). None: only the gradient norm (1e-6) or
        ``max_iter`` stops it.
    learning_rate : float, default=0.05
        alpha(0) of the on-line algorithm (the paper's value).
    sa_temperature : float, default=1.0
        Initial temperature of SA, in units of the log posterior (9).
    sigma_grid : array-like of floats, optional
        Candidates for ``sigma="auto"``; default 9 values log-spaced in
        [0.02, 1] times ``sqrt(sum of feature variances)``.
    reg_grid : array-like of floats, optional
        Candidates for ``reg_strength="auto"``; default 0 and 5 values in
        [0.01, 1] for "eq", 0 and 7 values in [1e-3, 1] / (sum of feature
        variances) for "mog" and "vq".
    validation_fraction : float, default=0.2
    n_splits : int, default=3
        Hashed train/validation splits of the width (and strength) search;
        1 restores the single split of earlier versions (with the same rule).
    random_state : int, numpy Generator or None, default=None
        Seeds the start (K-means or random rows), the split of the width
        and strength searches, and the random steps of ``"sa"`` and
        ``"online"``.
    {shared_parameters}
    verbose : int, default=0
        1: one line per candidate of a width search and per optimization
        (its evaluations and final objective); 2: also one line per
        optimizer evaluation (``"cg"``), annealing step (``"sa"``) or epoch
        (``"online"``).

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_clusters, n_features)
    sigma_ : float
    reg_strength_ : float
        The lambda used (chosen when ``reg_strength="auto"``).
    classes_ : ndarray of shape (n_classes,)
        The class labels, in the order of the columns of ``contingency_``.
    n_classes_ : int
    objective_history_ : list of float
        Smoothed objective (10) at every evaluation of the final fit.
    sigma_scores_ : dict, only with sigma="auto"
        Per candidate sigma (at its best lambda): ``{"mean", "spread",
        "scores", "moved"}`` - the held-out log posterior (9) per validation
        row averaged over the splits, its standard error, the score of each
        split, and whether the optimizer moved on some split.
    validation_scores_ : dict, only with a search
        The same per ``(sigma, lambda)``.
    contingency_ : ndarray of shape (n_clusters, n_classes)
        Hard counts of the training data in the final partition.
    labels_ : ndarray or dask array of shape (n_samples,)
    n_iter_ : int
    n_features_in_ : int

    Notes
    -----
    Cost: 2 passes per objective evaluation (counts, then gradient); CG
    needs a few evaluations per iteration. ``sigma="auto"`` multiplies this
    by ``n_splits`` times the grid size, plus one.

    References
    ----------
    Kaski, Sinkkonen, Klami (2005), eq. (4), (9), (10), (11), §3.1, §7.2.
    """

    def __init__(self, n_clusters: int = 8, *, sigma: float | str = "auto", prior: float | NumbersLike = 1.0,
                 optimizer: str = "cg", regularization: str | None = None, reg_strength: float | str = 0.0,
                 init: str | NumbersLike = "kmeans", n_init: int = 1, max_iter: int | None = None,
                 tol: float | None = 1e-4, learning_rate: float = 0.05, sa_temperature: float = 1.0, sigma_grid: Sequence[float] | None = None,
                 reg_grid: Sequence[float] | None = None, validation_fraction: float = 0.2, n_splits: int = 3,
                 classes: NumbersLike | None = None,
                 random_state: RandomStateLike = None, scheduler: SchedulerLike = None, sample_dim: str | None = None,
                 variables: Sequence[str] | None = None, verbose: int = 0):
        self.n_clusters = n_clusters
        self.sigma = sigma
        self.prior = prior
        self.optimizer = optimizer
        self.regularization = regularization
        self.reg_strength = reg_strength
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.learning_rate = learning_rate
        self.sa_temperature = sa_temperature
        self.sigma_grid = sigma_grid
        self.reg_grid = reg_grid
        self.validation_fraction = validation_fraction
        self.n_splits = n_splits
        self.classes = classes
        self.random_state = random_state
        self.scheduler = scheduler
        self.sample_dim = sample_dim
        self.variables = variables
        self.verbose = verbose

    # ------------------------------------------------------------------
    _parameter_constraints = {  # the shared ones (random_state, scheduler, sample_dim, variables, verbose) first
        **SHARED_CONSTRAINTS,
        "n_clusters": [Interval(int, 1)],
        "sigma": [SIGMA_RANGE, Options("auto")],
        "prior": [Interval(float, 0, closed="neither"), ArrayLike()],
        "optimizer": [Options(*_OPTIMIZERS)],
        "regularization": [Options(*_REGULARIZATIONS)],
        "reg_strength": [Interval(float, 0), Options("auto")],
        "init": [Options("kmeans", "random"), ArrayLike()],
        "n_init": [Interval(int, 1)],
        "max_iter": [Interval(int, 1), Options(None)],
        "tol": [Interval(float, 0), Options(None)],
        "learning_rate": [Interval(float, 0, closed="neither")],
        "sa_temperature": [Interval(float, 0)],
        "sigma_grid": [ArrayLike(), Options(None)],
        "reg_grid": [ArrayLike(), Options(None)],
        "validation_fraction": [Interval(float, 0, 0.9, closed="right")],
        "n_splits": [Interval(int, 1)],
        "classes": [ArrayLike(), Options(None)],
    }

    def _check_params(self, n_samples):
        """The checks that involve the data or several parameters."""
        check_n_clusters(self, self.n_clusters, n_samples)
        if self.regularization is None and self.reg_strength not in (0, 0.0):
            raise param_error(self, "reg_strength", "0 when regularization is None", self.reg_strength)
        if self.optimizer != "cg" and self.regularization is not None:
            raise ValueError(
                f"regularization={self.regularization!r} is implemented for optimizer='cg' only (the paper "
                f"regularizes the smoothed objective); got optimizer={self.optimizer!r}."
            )

    def _initial(self, X, rng, info):
        k, d = self.n_clusters, info.d
        if not isinstance(self.init, str):
            init = np.array(self.init, dtype=np.float64)
            if init.shape != (k, d):
                raise ValueError(
                    f"The shape of the initial prototypes {init.shape} does not match (n_clusters, "
                    f"n_features) = ({k}, {d})."
                )
            return init
        if self.init == "random":
            return init_random(X, None, k, rng)
        km = KMeans(k, random_state=int(rng.integers(2**31)))._fit_prepared(X, info, labels=False)
        return km.cluster_centers_

    def _search(self, X, c, m0, sigmas, lams, n_classes, rng, info):
        """The held-out choice of sigma and lambda (:func:`._dc_search.width_search`, given this fit's
        optimizer); keeps its scores (``validation_scores_``, ``sigma_scores_``)."""
        def optimize_from(Xg, c, centers, sigma, lam, subset):
            centers, _, n_iter, _ = self._optimize(Xg, c, centers, sigma, n_classes, subset=subset, lam=lam, rng=rng)
            return centers, n_iter

        sigma, lam, table = width_search(
            optimize_from, X, c, m0, sigmas, lams, n_classes=n_classes, prior=self.prior,
            per_area=2 if self.regularization in ("mog", "vq") else 0,  # lambda's units: 1 / length^2, or none
            validation_fraction=self.validation_fraction, n_splits=self.n_splits, rng=rng, info=info,
            verbose=verbosity(self))
        self.validation_scores_ = table
        if self.sigma == "auto":
            self.sigma_scores_ = {s: max((v for (s2, _), v in table.items() if s2 == s), key=lambda v: v["mean"])
                                  for s in sigmas}
        if not any(v["moved"] for v in table.values()) and self.optimizer == "cg":
            warnings.warn(f"DiscriminativeClustering: at none of the candidate widths {[round(s, 4) for s in sigmas]} "
                          "did conjugate gradients move from the K-means prototypes on the training rows; the fit "
                          "is K-means'. Give larger widths in sigma_grid.", ConvergenceWarning, stacklevel=4)
        return sigma, lam

    def _steps(self):
        if self.max_iter is not None:
            return self.max_iter
        return {"cg": 1000, "sa": 2000 * self.n_clusters, "online": 20}[self.optimizer]

    def _optimize(self, X, c, centers, sigma, n_classes, subset=None, lam=0.0, rng=None):
        """One optimization from ``centers``: returns ``(centers, history,
        n_iter, converged)``."""
        if self.optimizer == "sa":
            return self._anneal(X, c, centers, sigma, n_classes, subset, rng)
        if self.optimizer == "online":
            return online_fit(self, X, c, centers, sigma, n_classes, subset, rng)

        def fun(m):
            value, grad, _ = dc_objective(X, c, m, sigma, prior=self.prior, n_classes=n_classes,
                                          regularization=self.regularization, lam=lam,
                                          subset=subset)
            return value, grad

        def progress(info):
            if self.verbose >= 2:
                say(f"[DC sigma={sigma:.4g}] evaluation {info['evaluation']:4d}  log posterior (10) "
                      f"{info['value']:.6g}  |grad| {info['grad_norm']:.3g}  ({info['seconds']:.2f}s)")

        res = optimize.conjugate_gradients(fun, centers, max_iter=self._steps(), gtol=1e-6, tol=self.tol,
                                           window=TOL_WINDOW, callback=progress)
        if self.verbose:
            say(f"[DC sigma={sigma:.4g}] conjugate gradients: {res.n_iter} iterations, {len(res.history)} "
                f"evaluations, log posterior (10) {max(res.history):.6g}"
                + ("" if res.converged else " (stopped at max_iter)"))
        return res.x, res.history, res.n_iter, res.converged

    def _anneal(self, X, c, centers, width, n_classes, subset, rng):
        """Simulated annealing on the unsmoothed posterior (9), paper §3.1:
        Gaussian displacements of all prototypes (std ``width``, i.e. sigma),
        accepted when (9) rises, else with probability ``exp(delta / T)``;
        ``T`` falls linearly from ``sa_temperature`` to 0. One pass per step."""

        def score(m):
            return obj.log_posterior(hard_counts(X, c, m, n_classes, subset), self.prior)

        def progress(info):
            if self.verbose >= 2:
                say(f"[DC-SA width={width:.4g}] step {info['step']}/{info['steps']}  T={info['temperature']:.3g}  "
                      f"(9)={info['value']:.6g}  best={info['best']:.6g}")

        res = optimize.simulated_annealing(score, centers, steps=self._steps(), width=width,
                                           temperature=self.sa_temperature, rng=rng, callback=progress)
        return res.x, res.history, res.n_iter, True

    def _grid(self, name, given, default):
        grid = np.asarray(default if given is None else given, dtype=np.float64).ravel()
        if grid.size == 0 or np.any(grid < 0) or (name == "sigma_grid" and np.any(grid == 0)):
            raise param_error(self, name, "a non-empty sequence of positive floats", given)
        return [float(g) for g in grid]

    def _default_reg_grid(self, info):
        """lambda candidates scaled to the data: EQ is dimensionless; for MoG
        and VQ, lam * (sum of feature variances) is the per-sample weight."""
        if self.regularization == "eq":
            return np.concatenate([[0.0], np.geomspace(0.01, 1.0, 5)])
        return np.concatenate([[0.0], np.geomspace(1e-3, 1.0, 7) / max(float(np.sum(info.var)), 1e-12)])

    def _warm_start_params(self, previous) -> dict:
        """``fit(init=previous)``: the optimizer from the previous prototypes
        at the previous width and regularization strength (no new held-out
        search), one run."""
        return {"init": np.array(previous.cluster_centers_, dtype=np.float64), "n_init": 1,
                "sigma": float(previous.sigma_), "reg_strength": float(getattr(previous, "reg_strength_", 0.0))}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return supervised_by_classes(tags)

    @journaled
    def fit(self, X: DataLike, y: DataLike) -> Self:
        """Fit prototypes to primary data ``X`` and auxiliary labels ``y``
        (required: DC is supervised by them, so it is tagged as needing
        ``y`` and is not a scikit-learn clusterer; ``fit_predict(X, y)``
        returns the training rows' clusters).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), dask, xarray or store path
        y : array-like of shape (n_samples,)
            The auxiliary classes ``c`` of the paper: any labels (ints,
            strings), numpy, dask or xarray; encoded as ``0 .. C-1`` in the
            order of ``classes_``.

        Returns
        -------
        self
        """
        validate_params(self)
        require_y(self, y)
        X, info = prepare_input(self, X, reset=True, need_moments=True)
        self._check_params(info.n)
        c, self.classes_ = encode_labels(y, info.n, classes=self.classes)
        check_not_constant(info, "X")  # before the initial prototypes and the widths scaled to the data's spread
        n_classes = len(self.classes_)
        obj.prior_vector(self.prior, n_classes)  # validates the prior
        rng = check_random_state(self.random_state)
        m0 = self._initial(X, rng, info)

        sigmas = [float(self.sigma)] if self.sigma != "auto" else self._grid(
            "sigma_grid", self.sigma_grid, np.sqrt(float(np.sum(info.var))) * np.geomspace(0.02, 1.0, 9))
        lams = [float(self.reg_strength)] if self.reg_strength != "auto" else self._grid(
            "reg_grid", self.reg_grid, self._default_reg_grid(info))
        if len(sigmas) > 1 or len(lams) > 1:
            sigma, lam = self._search(X, c, m0, sigmas, lams, n_classes, rng, info)
        else:
            sigma, lam = sigmas[0], lams[0]

        best: tuple | None = None
        for run in range(self.n_init):
            start = m0 if run == 0 else init_random(X, None, self.n_clusters, rng)
            result = self._optimize(X, c, start, sigma, n_classes, lam=lam, rng=rng)
            if best is None or max(result[1]) > max(best[1]):
                best = result
        assert best is not None  # n_init >= 1
        centers, history, n_iter, ok = best
        if not ok and n_iter >= self._steps():
            warnings.warn(
                f"DiscriminativeClustering: conjugate gradients stopped at max_iter={self._steps()}; "
                "increase max_iter for a tighter optimum.",
                ConvergenceWarning,
                stacklevel=3,
            )
        self.cluster_centers_ = centers
        self.sigma_ = sigma
        self.reg_strength_ = lam
        self.n_classes_ = n_classes
        self.objective_history_ = history
        self.n_iter_ = n_iter
        self.contingency_ = hard_counts(X, c, centers, n_classes).astype(np.int64)
        self.labels_ = voronoi_labels(X, centers, lazy=info.lazy_input)
        return self

    @data_method
    def predict(self, X: DataLike) -> Labels:
        """Cluster of each sample: its nearest prototype (x alone, no labels)."""
        check_is_fitted(self)
        X, _ = prepare_input(self, X, reset=False)
        return voronoi_labels(X, self.cluster_centers_)

    @installs_runner
    def held_out_score(self, X: DataLike, y: DataLike) -> dict:
        """Scores of the fitted prototypes on held-out rows ``X`` with their
        labels ``y`` (e.g. a cross-validation fold): ``"score"``, the
        unsmoothed log posterior (9) (higher is better), its negative
        ``"cost"`` (Kaski et al. 2005, Table 1), the K-means cost
        ``"vq_cost"`` of the same rows and the fit's ``"sigma"``."""
        lp = float(self.score(X, y))
        q = metrics.quantization_error(X, self.cluster_centers_)
        return {"score": lp, "cost": -lp, "vq_cost": q, "sigma": float(self.sigma_)}

    @installs_runner
    def run_summary(self, data: Any) -> dict:
        """Facts of a fit on a store (``data``: its Dataset, with ``x`` and
        ``label``) for the run's ``summary.json``."""
        check_is_fitted(self)
        out = {"sigma": self.sigma_, "log_posterior_9": self.score(data["x"], data["label"]),
               "contingency": self.contingency_.tolist(), "n_evaluations": len(self.objective_history_)}
        if self.n_iter_ == 0 and self.optimizer == "cg":
            out["note"] = (f"conjugate gradients took no step: at sigma={self.sigma_:.4g} the smoothed posterior (5) "
                           "is flat around the K-means start (gradient below tolerance), so the prototypes are "
                           "K-means'; the held-out choice of sigma found no width that did better. Try a larger "
                           "sigma.")
        return out

    @data_method
    def fit_predict(self, X: DataLike, y: DataLike) -> Labels:
        return self.fit(X, y).labels_

    @installs_runner
    def partial_fit(self, X: DataLike, y: DataLike, classes: Any = None) -> Self:
        """Update the prototypes with one batch of rows and their labels.

        The stream runs the stochastic on-line rule (5)-(6) of Kaski,
        Sinkkonen & Klami (2005), whatever ``optimizer`` says (CG's prototypes
        may lie far outside the data, where the rule's steps, proportional
        to ``x - m_j``, are too large). The first call fits its batch as
        ``fit(optimizer="online")`` does (the width, K-means' prototypes,
        ``max_iter`` epochs over the batch; ``classes``, or the
        constructor's, must list every class of the stream when the first
        batch lacks some). Every later call runs the rule once over the
        batch's rows at ``sigma_``, the prototypes and the class
        distributions carried between calls, with steps
        ``learning_rate * n0 / (n0 + t)`` (``n0`` the first batch's rows,
        ``t`` the rows streamed since). ``labels_`` and ``contingency_``
        describe the first batch only, so an update removes them;
        ``n_steps_`` counts the calls. Over batches in random order the
        held-out posterior (9) ends near ``fit(optimizer="online")``'s on all
        rows (tests/cluster/test_dc.py measures it).
        """
        if not hasattr(self, "n_steps_"):
            given = (self.classes, self.optimizer)
            self.classes, self.optimizer = given[0] if classes is None else classes, "online"
            try:  # the stream's classes and rule for this fit only: the parameters stay as constructed
                self.fit(X, y)
            finally:
                self.classes, self.optimizer = given
            self.n_steps_, self._stream = 1, None
            return self
        require_y(self, y)
        X, _, rows, _, _ = stream_batch(self, X, None, first=False)  # n_features_in_ as the first batch's
        C, _ = encode_labels(y, len(rows), classes=self.classes_, min_classes=1)
        self._stream = online_update(self, rows, np.asarray(engine.compute(C)), self._stream)
        self.cluster_centers_ = self._stream["m"]
        for stale in ("labels_", "contingency_"):
            self.__dict__.pop(stale, None)
        self.n_steps_ += 1
        return self

    @data_method
    def score(self, X: DataLike, y: DataLike) -> float:
        """Unsmoothed log posterior (9) of the partition of ``X`` given its
        labels ``y`` (no constants; Table 1 reports its negative). A class of
        an in-memory ``y`` that is not among ``classes_`` (a cross-validation
        part that training did not see, e.g. unstratified folds of sorted
        data) is scored as one more class with the same scalar prior; lazy
        labels must be among ``classes_``."""
        check_is_fitted(self)
        X, _ = prepare_input(self, X, reset=False)
        classes = self.classes_
        if isinstance(y, (np.ndarray, list, tuple)):
            unseen = np.setdiff1d(np.unique(np.asarray(y)), classes)
            if unseen.size and np.ndim(self.prior) > 0:
                raise ValueError(f"y holds classes {unseen[:5].tolist()} not seen in fit, and prior is per class "
                                 f"(shape {np.shape(self.prior)}); give classes= with every class at fit, or a "
                                 "scalar prior.")
            classes = np.concatenate([classes, unseen]) if unseen.size else classes
        C, _ = encode_labels(y, X.shape[0], classes=classes, min_classes=1)
        return obj.log_posterior(hard_counts(X, C, self.cluster_centers_, len(classes)), self.prior)
