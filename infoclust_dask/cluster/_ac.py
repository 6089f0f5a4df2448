"""Associative clustering (AC): two Voronoi partitionings, one per view of
paired data, whose contingency table shows as much dependency as possible.

Sinkkonen, Kaski, Nikkilä & Lahti (2005), "Associative clustering (AC):
technical details" (Helsinki University of Technology report). The prototypes
``m_i^(x)`` (K of them) and ``m_j^(y)`` (L) maximize the log Bayes factor
(3) of the table of cross counts ``n_ij`` against independent margins,
smoothed as log BF'' of §III (normalized Gaussian memberships of widths
``sigma_x``, ``sigma_y``; ``lambda^(x)``, ``lambda^(y)`` weigh the margins).

Each objective evaluation is two map-reduce passes over the paired blocks:
the smoothed cross counts (:data:`~infoclust_dask.kernels.ac.AC_COUNTS`),
then, with the digamma terms they give, the gradient sums for both
prototype sets (:data:`~infoclust_dask.kernels.ac.AC_GRAD`), wherever the
fit runs (the one-pass form, :data:`~infoclust_dask.kernels.ac.AC_FUSED`,
is :func:`ac_objective`'s ``fused=True``: the same value to round-off,
not the same bits, so a fit never switches to it by runner). The driver
runs scipy's conjugate gradients on all ``K dx + L dy`` coordinates.

Optimization is the hard part: at a fixed small width the smoothed
objective keeps rising as prototypes move outward and memberships harden, so
a single CG run freezes wherever the partition happens to be. The fit keeps
the best of ``n_init`` restarts by the training log Bayes factor (3) of the
hard table: the first starts where the views depend *linearly* (K-means on
the canonical variates of CCA, then CG at the final width), the others are
*annealed* from the data means (deterministic annealing: CG at a sequence of
widths from wide, smooth memberships down to the target, each stage
warm-started). Measured on a planted dependency in docs/RESULTS.md.
"""

from __future__ import annotations

import numbers
from typing import Any, Self

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .. import engine
from .._inputs import prepare_input
from .._support.hints import DataLike, Labels, NumbersLike, RandomStateLike, SchedulerLike, Sequence
from .._support.progress import Steps, say
from .._support.validation import (
    SIGMA_RANGE,
    ArrayLike,
    Interval,
    Options,
    PairOf,
    check_n_clusters,
    check_random_state,
    param_error,
    validate_params,
)
from ..kernels.ac import AC_COUNTS, AC_FUSED, AC_GRAD, AC_HARD_COUNTS, fused_gradient_sums
from ..objectives import ac as obj
from ..solvers import optimize
from ._ac_cca import cca_start
from ._base import SHARED_CONSTRAINTS, InfoclustEstimator, installs_runner, journaled, shared_parameters, voronoi_labels
from ._init import init_random
from ._kmeans import KMeans
from ._xarray import data_method

__all__ = ["AssociativeClustering", "ac_objective"]


def ac_objective(X: DataLike, Y: DataLike, mx: NumbersLike, my: NumbersLike, sigma: tuple[float, float], *,
                 prior: tuple[float, float, float] = (1.0, 1.0, 1.0), lam: tuple[float, float] = (1.0, 1.0),
                 scheduler: SchedulerLike = None, subset: Any = None, fused: bool = False) -> tuple:
    """Smoothed log BF'' of §III and its gradients at prototypes ``mx``, ``my``.

    Two passes over the paired data - the counts, then the gradient sums
    with the digamma terms they give - or, with ``fused``, one pass whose
    sums are linear in those terms (:func:`~infoclust_dask.kernels.ac.ac_fused_stats`;
    the same value and gradient to round-off, not the same bits). A fit
    always takes the two passes, wherever it runs: the evaluation must not
    depend on the runner (the same-answer contract, ``docs/conventions.md``;
    conjugate gradients amplify round-off into another model), and the
    fused pass's extra arithmetic made it 14x slower in this process
    (40 000 pairs). ``scheduler=None``: where the enclosing call runs,
    see :func:`infoclust_dask.engine.installed`. Returns
    ``(value, grad_x (K, dx), grad_y (L, dy), counts (K, L))``.
    """
    mx, my = np.asarray(mx, dtype=np.float64), np.asarray(my, dtype=np.float64)
    sx, sy = sigma
    lam_x, lam_y = float(lam[0]), float(lam[1])
    with engine.installed(scheduler):
        if fused:
            st = engine.map_reduce(AC_FUSED, X, Y, params={"mx": mx, "my": my, "sx": sx, "sy": sy, "subset": subset})
            counts = st["counts"]
            psi, psi_x, psi_y = obj.digamma_terms(counts, prior)
            st = fused_gradient_sums(st, psi, psi_x, psi_y, lam_x, lam_y)
        else:
            counts = engine.map_reduce(AC_COUNTS, X, Y, params={"mx": mx, "my": my, "sx": sx, "sy": sy,
                                                                "subset": subset})["counts"]
            psi, psi_x, psi_y = obj.digamma_terms(counts, prior)
            st = engine.map_reduce(
                AC_GRAD, X, Y,
                params={"mx": mx, "my": my, "sx": sx, "sy": sy, "psi": psi, "psi_x": psi_x, "psi_y": psi_y,
                        "lam_x": lam_x, "lam_y": lam_y, "subset": subset},
            )
    value = obj.log_bayes_factor(counts, prior, lam)
    return value, obj.gradient(st["WX"], st["Wx"], mx, sx), obj.gradient(st["WY"], st["Wy"], my, sy), counts


def hard_table(X, Y, mx, my, subset=None):
    """The hard contingency table of the two Voronoi partitions (one pass)."""
    return engine.map_reduce(AC_HARD_COUNTS, X, Y, params={"mx": mx, "my": my, "subset": subset})["counts"]


def _second_view(X, Y):
    """``Y``, or the store path ``X`` itself when it holds both views."""
    if Y is not None:
        return Y
    if not isinstance(X, str) and not hasattr(X, "__fspath__"):
        raise ValueError("Y is missing: pass the second view, or a store path holding both 'x' and 'y'.")
    return X


def _pair(value, name, est):
    if isinstance(value, (str, numbers.Number)) and not isinstance(value, bool):
        return (value, value)
    try:
        a, b = value
    except (TypeError, ValueError):
        raise param_error(est, name, "a pair (x, y) or one value for both views", value) from None
    return (a, b)


@shared_parameters
class AssociativeClustering(InfoclustEstimator):
    """Associative clustering of paired data (X, Y).

    Parameters
    ----------
    n_clusters : int or (int, int), default=8
        Numbers of Voronoi regions K (x view) and L (y view); an int is
        both (one default across the package and the CLI's ``-k``, as scikit-learn's KMeans and SpectralClustering).
    sigma : "auto" or float or pair, default=("auto", "auto")
        Final membership widths ``(sigma_x, sigma_y)``. ``"auto"`` chooses a
        common *relative* width ``r`` (``sigma_v = r * s_v`` with ``s_v`` the
        square root of the view's total variance) from ``sigma_grid`` by the
        hard log Bayes factor (3) per held-out row, averaged over
        ``n_splits`` hashed splits (``validation_fraction`` held out in
        each), by the one-standard-error rule: of the widths whose mean is
        within one standard error of the best, the largest at which the
        optimizer moved (as DC's width), then refits on all rows.
        ``sigma_scores_`` holds each width's mean, spread and scores.
    prior : float or (n_d, n_x, n_y), default=(1, 1, 1)
        Dirichlet parameters of (3): per cell, per x-margin row, per y-margin
        column.
    margin_weight : float or (lambda_x, lambda_y), default=(1, 1)
        Weights of the margin terms in log BF' (§III); values > 1 regularize.
    optimizer : {"cg"}, default="cg"
        Conjugate gradients (scipy) on the smoothed objective.
    init : {"cca", "centroid", "kmeans", "random"} or (array, array), default="cca"
        Starting prototypes of the first restart, optimized by CG at the final
        width: ``"cca"`` (K-means on each view's canonical variates, where
        the views depend linearly; a view with fewer distinct groups of rows
        than its regions gets a ``FewRegionsWarning``), K-means on each view,
        random data points, or given ``(mx (K, dx), my (L, dy))``; or
        ``"centroid"``: the data means plus a tiny random spread, optimized by
        deterministic annealing. Further restarts are annealed from new
        centroid starts (random data points with ``"random"``).
    n_init : int, default=2
        Restarts; the one with the highest training log Bayes factor (3) of
        the hard table is kept. Each annealed restart costs about
        ``anneal_steps`` times a CG run (2 passes per evaluation).
    anneal_steps : int, default=12
        Widths in the continuation of centroid starts, geometric from
        ``anneal_start`` times the final width down to the final width.
    anneal_start : float, default=10.0
        First width of the continuation as a multiple of the final one.
    max_iter : int, default=30
        CG iterations per width.
    sigma_grid : sequence of float, optional
        Relative widths tried by ``sigma="auto"`` (default 0.05 ... 0.4, 5 values).
    validation_fraction : float, default=0.2
    n_splits : int, default=3
        Hashed train/validation splits of the width search (the search
        costs ``n_splits`` fits per candidate width).
    random_state : int, numpy Generator or None, default=None
        Seeds the starts (K-means, CCA or random rows), the annealed
        restarts and the split of the width search.
    {shared_parameters}
    verbose : int, default=0
        1: one line per restart and per width of the search; 2: also every
        evaluation of the conjugate-gradient optimizer.

    Attributes
    ----------
    cluster_centers_x_ : ndarray (K, dx)
    cluster_centers_y_ : ndarray (L, dy)
    sigma_ : (float, float)
    sigma_scores_ : dict, only with sigma="auto"
        Per candidate relative width: ``{"mean", "spread", "scores",
        "moved"}`` - the held-out log BF (3) per validation row averaged over
        the splits, its standard error, each split's score, and whether the
        optimizer moved on some split.
    objective_history_ : list of float
        Smoothed log BF'' at every evaluation of the kept restart, all widths.
    restart_scores_ : list of float
        Training log BF (3) of the hard table of every restart.
    contingency_ : ndarray (K, L)
        Hard table of the training pairs.
    labels_x_, labels_y_ : arrays
        Training partitions (lazy for lazy input).
    n_iter_ : int
        CG iterations of the kept restart, all widths.
    """

    #: fit(X, y) / score(X, y): y is the second data view (see cluster._xarray)
    _y_is_second_view = True

    def __init__(self, n_clusters: int | tuple[int, int] = 8, *,
                 sigma: float | str | tuple[float | str, float | str] = ("auto", "auto"),
                 prior: float | tuple[float, float, float] = (1.0, 1.0, 1.0),
                 margin_weight: float | tuple[float, float] = (1.0, 1.0), optimizer: str = "cg",
                 init: str = "cca", n_init: int = 2, anneal_steps: int = 12, anneal_start: float = 10.0,
                 max_iter: int = 30, sigma_grid: Sequence[float] | None = None, validation_fraction: float = 0.2,
                 n_splits: int = 3,
                 random_state: RandomStateLike = None, scheduler: SchedulerLike = None, sample_dim: str | None = None,
                 variables: Sequence[str] | None = None, verbose: int = 0):
        self.n_clusters = n_clusters
        self.sigma = sigma
        self.prior = prior
        self.margin_weight = margin_weight
        self.optimizer = optimizer
        self.init = init
        self.n_init = n_init
        self.anneal_steps = anneal_steps
        self.anneal_start = anneal_start
        self.max_iter = max_iter
        self.sigma_grid = sigma_grid
        self.validation_fraction = validation_fraction
        self.n_splits = n_splits
        self.random_state = random_state
        self.scheduler = scheduler
        self.sample_dim = sample_dim
        self.variables = variables
        self.verbose = verbose

    # ------------------------------------------------------------------
    _parameter_constraints = {  # the shared ones (random_state, scheduler, sample_dim, variables, verbose) first
        **SHARED_CONSTRAINTS,
        "n_clusters": [PairOf(Interval(int, 1))],
        "sigma": [PairOf(SIGMA_RANGE, Options("auto"))],
        "prior": [Interval(float, 0, closed="neither"), ArrayLike()],
        "margin_weight": [PairOf(Interval(float, 0))],
        "optimizer": [Options("cg")],
        "init": [Options("cca", "centroid", "kmeans", "random"), ArrayLike()],
        "n_init": [Interval(int, 1)],
        "anneal_steps": [Interval(int, 1)],
        "anneal_start": [Interval(float, 1.0)],
        "max_iter": [Interval(int, 1)],
        "sigma_grid": [ArrayLike(), Options(None)],
        "validation_fraction": [Interval(float, 0, 0.9, closed="right")],
        "n_splits": [Interval(int, 1)],
    }

    def _check_params(self, n_samples):
        """The checks that involve the data or several parameters; returns
        ``(K, L, (sigma_x, sigma_y), prior, (lambda_x, lambda_y))``."""
        k, l_ = _pair(self.n_clusters, "n_clusters", self)
        check_n_clusters(self, k, n_samples)
        check_n_clusters(self, l_, n_samples)
        sig = _pair(self.sigma, "sigma", self)
        if (sig[0] == "auto") != (sig[1] == "auto"):
            raise param_error(self, "sigma", "both 'auto' or both floats", self.sigma)
        lam = _pair(self.margin_weight, "margin_weight", self)
        return int(k), int(l_), sig, obj.check_prior(self.prior), (float(lam[0]), float(lam[1]))

    def _initial(self, X, Y, k, l_, rng, ix, iy):
        dx, dy = ix.d, iy.d
        if not isinstance(self.init, str):
            mx, my = (np.array(a, dtype=np.float64) for a in self.init)
            if mx.shape != (k, dx) or my.shape != (l_, dy):
                raise ValueError(
                    f"The initial prototypes have shapes {mx.shape} and {my.shape}; expected ({k}, {dx}) and "
                    f"({l_}, {dy})."
                )
            return mx, my
        if self.init == "random":
            return init_random(X, None, k, rng), init_random(Y, None, l_, rng)
        if self.init == "centroid":
            return self._centroid_start(k, l_, rng)
        if self.init == "cca":
            return cca_start(X, Y, k, l_, rng)
        mx = KMeans(k, random_state=int(rng.integers(2**31)))._fit_prepared(X, ix, labels=False).cluster_centers_
        my = KMeans(l_, random_state=int(rng.integers(2**31)))._fit_prepared(Y, iy, labels=False).cluster_centers_
        return mx, my

    def _centroid_start(self, k, l_, rng):
        """Prototypes at the data means plus 1 % of each feature's spread in
        random directions: the start of deterministic annealing, where the
        wide memberships see one cluster and the prototypes split as the
        width falls."""
        (mx, sx), (my, sy) = self._moments
        return (mx + 0.01 * np.sqrt(sx) * rng.standard_normal((k, mx.size)),
                my + 0.01 * np.sqrt(sy) * rng.standard_normal((l_, my.size)))

    def _cg(self, X, Y, mx, my, sigma, prior, lam, subset, history):
        """CG on log BF'' at the widths ``sigma`` from ``(mx, my)``; appends the
        value of every evaluation to ``history``."""
        split = mx.size

        def fun(flat):
            a, b = flat[:split].reshape(mx.shape), flat[split:].reshape(my.shape)
            value, gx, gy, _ = ac_objective(X, Y, a, b, sigma, prior=prior, lam=lam, subset=subset)
            return value, np.concatenate([gx.ravel(), gy.ravel()])

        def progress(info):
            if self.verbose > 1:
                say(f"[AC sigma=({sigma[0]:.3g}, {sigma[1]:.3g})] evaluation {len(history) + info['evaluation']:4d}"
                      f"  log BF'' {info['value']:.6g}  ({info['seconds']:.2f}s)")

        res = optimize.conjugate_gradients(fun, np.concatenate([mx.ravel(), my.ravel()]), max_iter=self.max_iter,
                                           gtol=1e-8, callback=progress)
        history.extend(res.history)
        return res.x[:split].reshape(mx.shape), res.x[split:].reshape(my.shape), res.n_iter

    def _anneal(self, X, Y, mx, my, sigma, prior, lam, subset, anneal=True):
        """CG at widths ``anneal_start * sigma ... sigma`` (geometric), warm-started
        (only at the final width when ``anneal`` is false)."""
        factors = optimize.geometric_schedule(self.anneal_start, 1.0, self.anneal_steps if anneal else 1)
        history: list[float] = []
        n_iter = 0
        for f in factors:
            mx, my, it = self._cg(X, Y, mx, my, (f * sigma[0], f * sigma[1]), prior, lam, subset, history)
            n_iter += it
        return mx, my, history, n_iter

    def _fit_restarts(self, X, Y, m0, sigma, prior, lam, rng, k, l_, subset=None):
        """``n_init`` optimizations, the best by the training log BF (3) of
        the hard table. The first starts from ``init`` (deterministic
        annealing when ``init="centroid"``, plain CG at the final width
        otherwise); the others are annealed from new centroid starts (or
        start at random data points when ``init="random"``)."""
        best = None
        scores = []
        for run in range(self.n_init):
            if run == 0:
                start, anneal = m0, self.init == "centroid"
            elif self.init == "random":
                start, anneal = (init_random(X, None, k, rng), init_random(Y, None, l_, rng)), False
            else:
                start, anneal = self._centroid_start(k, l_, rng), True
            mx, my, history, n_iter = self._anneal(X, Y, start[0], start[1], sigma, prior, lam, subset,
                                                   anneal)
            score = obj.log_bayes_factor(hard_table(X, Y, mx, my, subset), prior)
            scores.append(score)
            if self.verbose:
                say(f"[AC] restart {run + 1}/{self.n_init} ({'annealed' if anneal else 'CG'}): training "
                      f"log BF (3) {score:.6g}")
            if best is None or score > best[0]:
                best = (score, mx, my, history, n_iter)
        return best, scores

    def _warm_start_params(self, previous) -> dict:
        """``fit(init=previous)``: conjugate gradients from the previous
        prototypes of both views at the previous widths, one run."""
        return {"init": (np.array(previous.cluster_centers_x_, dtype=np.float64),
                         np.array(previous.cluster_centers_y_, dtype=np.float64)),
                "n_init": 1, "sigma": tuple(float(s) for s in previous.sigma_)}

    @journaled
    def fit(self, X: DataLike, y: Any = None) -> Self:
        """Fit both prototype sets to paired rows of ``X`` and ``y``.

        ``X`` and ``y`` (the second view, ``(n_samples, n_features_y)`` or 1-D
        for a single feature) are numpy, dask or xarray arrays with the same
        number of rows; or ``X`` is the path of a store holding ``x`` and
        ``y`` (then ``y`` is None). As scikit-learn's ``CCA``, the second view
        is passed as ``y``.
        """
        validate_params(self)
        Y = _second_view(X, y)
        X, ix = prepare_input(self, X, reset=True, need_moments=True)
        Y, iy = prepare_input(self, Y, reset=True, need_moments=True, attr="n_features_y_in_", allow_1d=True,
                           variable="y", name="Y")
        if ix.n != iy.n:
            raise ValueError(f"X has {ix.n} rows but Y has {iy.n}; the views must be paired row by row.")
        k, l_, sig, prior, lam = self._check_params(ix.n)
        rng = check_random_state(self.random_state)
        self._moments = ((ix.mean, ix.var), (iy.mean, iy.var))
        m0 = self._initial(X, Y, k, l_, rng, ix, iy)
        scale = (float(np.sqrt(np.sum(ix.var))) or 1.0, float(np.sqrt(np.sum(iy.var))) or 1.0)
        if sig[0] == "auto":
            splits = [optimize.hashed_split(rng, self.validation_fraction) for _ in range(self.n_splits)]

            def fit_on_train(r, split):
                s = (r * scale[0], r * scale[1])
                fitted = self._fit_restarts(X, Y, m0, s, prior, lam, rng, k, l_, subset=split[0])[0]
                return fitted[1:3], fitted[4] > 0

            def valid_score(protos, split):  # per validation row: comparable across splits of other sizes
                table = hard_table(X, Y, protos[0], protos[1], split[1])
                return obj.log_bayes_factor(table, prior) / max(float(table.sum()), 1.0)

            grid = self._grid()
            with Steps(self, len(grid) * len(splits), "AC: width search", unit="fit") as bar:

                def progress(info):
                    bar.update(1, width=f"{info['candidate']:.3g}")
                    if self.verbose:
                        say(f"[AC] relative width {info['candidate']:.3g}, split {info['split'] + 1}: held-out "
                            f"log BF (3) per row {info['score']:.6g}")

                r, self.sigma_scores_ = optimize.repeated_held_out_search(grid, splits, fit_on_train, valid_score,
                                                                          smoother=lambda c: c, callback=progress)
            sigma = (r * scale[0], r * scale[1])
        else:
            sigma = (float(sig[0]), float(sig[1]))
        (score, mx, my, history, n_iter), restart_scores = self._fit_restarts(X, Y, m0, sigma, prior, lam,
                                                                             rng, k, l_)
        self.cluster_centers_x_, self.cluster_centers_y_ = mx, my
        self.sigma_ = sigma
        self.objective_history_ = history
        self.restart_scores_ = restart_scores
        self.n_iter_ = n_iter
        self.contingency_ = hard_table(X, Y, mx, my).astype(np.int64)
        self.labels_x_ = voronoi_labels(X, mx, lazy=ix.lazy_input)
        self.labels_y_ = voronoi_labels(Y, my, lazy=iy.lazy_input)
        return self

    def _grid(self):
        grid = np.geomspace(0.05, 0.4, 5) if self.sigma_grid is None else np.asarray(self.sigma_grid, dtype=float)
        if grid.ndim != 1 or grid.size == 0 or np.any(grid <= 0):
            raise param_error(self, "sigma_grid", "a non-empty sequence of positive floats", self.sigma_grid)
        return [float(g) for g in grid]

    # ------------------------------------------------------------------
    def _views(self, X, Y):
        check_is_fitted(self)
        Y = _second_view(X, Y)
        X, _ = prepare_input(self, X, reset=False)
        Y, _ = prepare_input(self, Y, reset=False, attr="n_features_y_in_", allow_1d=True, variable="y", name="Y")
        if X.shape[0] != Y.shape[0]:
            raise ValueError(f"X has {X.shape[0]} rows but Y has {Y.shape[0]}; the views must be paired row by row.")
        return X, Y

    @data_method
    def predict_x(self, X: DataLike) -> Labels:
        """x-view cluster of each sample: its nearest x prototype."""
        check_is_fitted(self)
        X, _ = prepare_input(self, X, reset=False)
        return voronoi_labels(X, self.cluster_centers_x_, lazy=engine.is_lazy(X))

    @data_method
    def predict(self, X: DataLike, y: DataLike | None = None) -> Any:
        """Each view's cluster (issue 54: scikit-learn's ``predict``): the
        x-view clusters of ``X`` (:meth:`predict_x`), and with the paired
        ``y`` the tuple ``(x-view clusters, y-view clusters)``."""
        labels_x = self.predict_x(X)
        return labels_x if y is None else (labels_x, self.predict_y(y))

    @data_method
    def predict_y(self, Y: DataLike) -> Labels:
        """y-view cluster of each sample: its nearest y prototype."""
        check_is_fitted(self)
        Y, _ = prepare_input(self, Y, reset=False, attr="n_features_y_in_", allow_1d=True, variable="y", name="Y")
        return voronoi_labels(Y, self.cluster_centers_y_, lazy=engine.is_lazy(Y))

    def contingency_table(self, X: DataLike, y: Any = None) -> np.ndarray:
        """Hard cross counts ``n_ij`` of the pairs (one pass)."""
        X, Y = self._views(X, y)
        return hard_table(X, Y, self.cluster_centers_x_, self.cluster_centers_y_).astype(np.int64)

    @installs_runner
    def held_out_score(self, X: DataLike, y: Any = None) -> dict:
        """Scores of the fitted prototypes on held-out pairs ``(X, y)`` (e.g.
        a cross-validation fold): ``"score"``, the log Bayes factor (3) of
        their hard contingency table (higher is better), its mutual
        information ``"mi"`` and the fit's widths."""
        table = self.contingency_table(X, y)
        return {"score": obj.log_bayes_factor(table, obj.check_prior(self.prior)),
                "mi": obj.mutual_information(table), "sigma_x": float(self.sigma_[0]),
                "sigma_y": float(self.sigma_[1])}

    @installs_runner
    def run_summary(self, data: Any) -> dict:
        """Facts of a fit on a store (``data``: its Dataset, with ``x`` and
        ``y``) for the run's ``summary.json``: the log Bayes factor (3), the
        mutual information and the most surprising cross clusters."""
        check_is_fitted(self)
        over, under = self.most_surprising(3)
        return {"sigma": list(self.sigma_), "log_bayes_factor_3": self.score(data["x"], data["y"]),
                "mutual_information": self.mutual_information(data["x"], data["y"]),
                "contingency": self.contingency_.tolist(), "most_over_represented": over,
                "most_under_represented": under}

    @data_method
    def score(self, X: DataLike, y: Any = None) -> float:
        """Log Bayes factor (3) of the hard table of the pairs (X, y), without constants."""
        return obj.log_bayes_factor(self.contingency_table(X, y), obj.check_prior(self.prior))

    def mutual_information(self, X: DataLike, y: Any = None) -> float:
        """Plug-in mutual information (nats) between the two partitions of the pairs (X, y)."""
        return obj.mutual_information(self.contingency_table(X, y))

    def cross_clusters(self, X: DataLike | None = None, y: Any = None) -> Any:
        """The cross clusters (cells of the table) with their surprise.

        For the training pairs (default) or the pairs (X, Y): per cell
        ``(i, j)`` the count, the count expected under independent margins
        ``n_i. n_.j / N``, ``log2`` of their ratio, the cell's share of the
        mutual information (nats), and hypergeometric tail probabilities of
        a count at least as high (``p_over``) or as low (``p_under``) given
        the margins. Returns a list of dicts, most over-represented first.

        The tail probabilities treat the partitions as fixed; for the
        training pairs they were fitted to make the table surprising, so read
        them as a ranking, and use held-out pairs or the bootstrap
        reliability (:mod:`infoclust_dask.reliability`) for evidence.
        """
        check_is_fitted(self)
        n = self.contingency_ if X is None else self.contingency_table(X, y)
        return cross_cluster_table(n)

    def most_surprising(self, k: int = 5, X: DataLike | None = None, y: Any = None) -> Any:
        """The ``k`` most over-represented and the ``k`` most under-represented
        cells, by hypergeometric tail probability: ``(over, under)``."""
        cells = self.cross_clusters(X, y)
        over = sorted([c for c in cells if c["count"] > c["expected"]], key=lambda c: c["p_over"])[:k]
        under = sorted([c for c in cells if c["count"] < c["expected"]], key=lambda c: c["p_under"])[:k]
        return over, under


def cross_cluster_table(counts: NumbersLike) -> list[dict]:
    """Per-cell surprise of a contingency table (see :meth:`AssociativeClustering.cross_clusters`)."""
    from scipy.stats import hypergeom  # (0.45 s to import: only when the surprise test runs)
    n = np.asarray(counts, dtype=np.int64)
    N = int(n.sum())
    rows, cols = n.sum(axis=1), n.sum(axis=0)
    out = []
    for i in range(n.shape[0]):
        for j in range(n.shape[1]):
            c, e = int(n[i, j]), rows[i] * cols[j] / max(N, 1)
            dist = hypergeom(N, int(rows[i]), int(cols[j]))
            out.append({
                "x_cluster": i, "y_cluster": j, "count": c, "expected": float(e),
                "log2_ratio": float(np.log2((c + 0.5) / (e + 0.5))),
                "mi_share": float(c / N * np.log(c * N / (rows[i] * cols[j]))) if c > 0 else 0.0,
                "p_over": float(dist.sf(c - 1)), "p_under": float(dist.cdf(c)),
            })
    return sorted(out, key=lambda r: r["p_over"])
