"""CMBC: clustering with model-level constraints.

Gondek, Vaithyanathan & Garg (2005), "Clustering with model-level
constraints" (SIAM SDM). Users have binary data (documents x terms, users x
items) and already know one or more clusterings they do not want again - or
features that carry structure they do not want (negative features ``y-``).
CMBC fits a Bernoulli mixture to the positive features ``y+`` (A.1)-(A.2)
while keeping the clusters uninformative of ``y-``: it maximizes (3.14), the
log-likelihood plus ``gamma`` times quadratic bounds on ``H(C | Y-)``
((3.12)-(3.13)), by EM with deterministic annealing (Figures 1 and 2).

Where the work happens:

- one counting pass over (negative pattern, positive feature) pairs
  (:data:`~infoclust_dask.kernels.cmbc.CMBC_PATTERNS`) gives the pattern
  probabilities of (A.5) and, on the driver, the constants A0, A1, A2 of
  Appendix B (:mod:`infoclust_dask.objectives.cmbc`);
- every EM iteration is ONE map-reduce pass: the annealed E-step (4.15) and
  the sums of the M-step (:data:`~infoclust_dask.kernels.cmbc.CMBC_ESTEP`);
- the M-step solves one cubic per parameter on the driver, which holds only
  ``theta`` (features x clusters) and the pattern constants.
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
from .._support.progress import Steps, say
from .._support.validation import ArrayLike, Interval, Options, check_n_clusters, check_random_state, validate_params
from ..kernels.cmbc import CMBC_ESTEP, CMBC_POSTERIOR
from ..kernels.stats import GRAM
from ..objectives import cmbc as obj
from ._base import SHARED_CONSTRAINTS, InfoclustEstimator, installs_runner, journaled, shared_parameters
from ._cmbc_patterns import MIN_ROWS_PER_PATTERN, known_columns, pattern_model
from ._conventions import BINARY, CMBC_DATA_CHECKS
from ._xarray import data_method

__all__ = ["CMBC", "MIN_ROWS_PER_PATTERN", "HELD_OUT_GAMMA"]

#: gamma of the held-out score that compares CMBC fits across a gamma grid (``held_out_score``)
HELD_OUT_GAMMA = 0.995


#: gamma of ``gamma="default"`` by the kind of prior knowledge (see :class:`CMBC`, docs/RESULTS.md)
DEFAULT_GAMMA = {"known": 0.995, "negative": 0.9}
#: a clustering that keeps more than this NMI (I(C;L)/H(L)) of a known clustering it was asked to avoid is reported
CLOSE_TO_KNOWN = 0.5


def _is_sparse(a):
    return hasattr(a, "tocsr") and hasattr(a, "nnz")


def _no_positional_negatives(y):
    """``y`` is ignored (scikit-learn's clusterers); a 2-D ``y`` is refused: it
    would be negative features passed where they no longer go."""
    if y is not None and np.ndim(y) == 2:
        raise TypeError("CMBC: y is ignored, as for every clusterer; negative features are a keyword: "
                        "CMBC(...).fit(X, Y_minus=Y_minus) (or known=labels for known clusterings).")


@shared_parameters
class CMBC(ClusterMixin, InfoclustEstimator):
    """Clustering with model-level constraints (CMBC) of binary data.

    Parameters
    ----------
    n_clusters : int, default=8
        Number of clusters (one default across the package and the CLI's ``-k``, as scikit-learn's KMeans and SpectralClustering).
    gamma : float in [0, 1) or "default", default="default"
        Weight of the constraint: the objective is ``(1 - gamma)/n * l(Y+) +
        gamma * (H~l(C, Y-) - H~u(Y-))`` ((3.14) with the likelihood taken
        per sample, see :mod:`infoclust_dask.objectives.cmbc`). ``0`` is the
        annealed EM baseline. ``"default"`` follows a rule measured on the
        paper's synthetic experiments (docs/RESULTS.md): 0.995 with known
        clusterings - the constraint must outweigh the likelihood of the
        strongest known structure, and from 0.995 up the result no longer
        changes (the NMI-vs-gamma curve of session 3 is flat from there) -
        and 0.9 with negative features, whose many distinct patterns (up to
        2^(negative features)) make the bounds' weights larger (at 0.99 the
        clusters of sessions 2 and 3 lose the target). These are the paper's
        choices too (0.95-0.97 and 0.9 on its scale).
    variant : {"bu", "pm"}, default="bu"
        ``"bu"``: batch update (Figure 2), every parameter's cubic solved from
        the same previous parameters; at large gamma all coordinates
        over-correct the shared constraint term and the updates oscillate,
        so when an update reverses the previous one (negative inner product)
        the step is halved (down to 1/64) for the rest of that temperature. ``"pm"``: partial maximization (Figure
        1), the parameters maximized one after another, each with the latest
        values of the others; here one E-step pass serves a whole sweep over
        the parameters (the figure's E-step per parameter would cost
        features x clusters passes over the data per sweep).
    anneal_rate : float in (0, 1), default=0.5
        ``T <- anneal_rate * T`` between temperatures (the paper's alpha).
    t0 : float or "auto", default="auto"
        First temperature; "auto" is twice the largest eigenvalue of the
        features' correlation matrix (one Gram pass), above the first split
        of the annealing.
    max_iter : int, default=100
        EM iterations per temperature at most.
    min_iter : int, default=3
        EM iterations per temperature at least (near a split the parameters
        of the clusters are almost equal and barely move at first).
    tol : float, default=1e-5
        A temperature ends when no parameter moved more than this.
    perturbation : float, default=1e-3
        Standard deviation of the noise added to the parameters at every new
        temperature, so that clusters that are still equal can split.
    n_init : int, default=1
        Annealing runs from random parameters; the highest objective is kept.
    init : array of shape (n_features, n_clusters), optional
        The parameters ``theta`` to start from instead of random ones (one
        run). ``fit(X, ..., init=previous)`` - a fitted CMBC, its run folder
        or model file - starts from the previous fit's ``theta_`` at
        temperature 1, where the previous annealing ended (a warm start:
        new rows refine the clustering instead of annealing it again).
    random_state : int, numpy Generator or None, default=None
        Seeds the random start of each run and the perturbation added at
        every temperature.
    {shared_parameters}
    verbose : int, default=0
        1: one line per annealing run; 2: also one per temperature
        (iterations, objective, mean largest membership).

    Attributes
    ----------
    theta_ : ndarray of shape (n_features, n_clusters)
        ``p(y+_j = 1 | c_k)``.
    labels_ : ndarray or dask array of shape (n_samples,)
    objective_history_ : list of float
        The objective at every EM iteration of the kept run.
    temperatures_ : list of float
        The temperatures of the kept run.
    gamma_ : float
    n_patterns_ : int
        Distinct negative patterns ``|Y-|``.
    n_iter_ : int
        EM iterations (passes) of the kept run.

    Notes
    -----
    One counting pass, one Gram pass for ``t0="auto"``, then one pass per EM
    iteration. Known clusterings are one-hot encoded: their label
    combinations are the negative patterns.

    References
    ----------
    Gondek, Vaithyanathan & Garg (2005), eq. (3.12)-(3.14), (4.15)-(4.18),
    (A.5)-(A.6), Appendix B, Figures 1-2, §6.1.
    """

    _parameter_constraints = {  # the shared ones (random_state, scheduler, sample_dim, variables, verbose) first
        **SHARED_CONSTRAINTS,
        "n_clusters": [Interval(int, 1)],
        "gamma": [Interval(float, 0, 1, closed="left"), Options("default")],
        "variant": [Options("bu", "pm")],
        "anneal_rate": [Interval(float, 0, 1, closed="neither")],
        "t0": [Interval(float, 0, closed="neither"), Options("auto")],
        "max_iter": [Interval(int, 1)],
        "min_iter": [Interval(int, 1)],
        "tol": [Interval(float, 0)],
        "perturbation": [Interval(float, 0)],
        "n_init": [Interval(int, 1)],
        "init": [Options(None), ArrayLike()],
    }

    #: fit(..., known=...) holds per-sample labels (see cluster._xarray)
    _label_keywords = ("known",)

    #: scikit-learn checks this estimator fails on purpose, with the reason (:func:`expected_failed_checks`)
    _expected_failed_checks = dict.fromkeys(CMBC_DATA_CHECKS, BINARY)

    def __init__(self, n_clusters: int = 8, *, gamma: float | str = "default", variant: str = "bu",
                 anneal_rate: float = 0.5, t0: float | str = "auto", max_iter: int = 100, min_iter: int = 3,
                 tol: float = 1e-5, perturbation: float = 1e-3, n_init: int = 1, init: Any = None,
                 random_state: RandomStateLike = None, scheduler: SchedulerLike = None, sample_dim: str | None = None,
                 variables: Sequence[str] | None = None, verbose: int = 0):
        self.n_clusters = n_clusters
        self.gamma = gamma
        self.variant = variant
        self.anneal_rate = anneal_rate
        self.t0 = t0
        self.max_iter = max_iter
        self.min_iter = min_iter
        self.tol = tol
        self.perturbation = perturbation
        self.n_init = n_init
        self.init = init
        self.random_state = random_state
        self.scheduler = scheduler
        self.sample_dim = sample_dim
        self.variables = variables
        self.verbose = verbose

    # ------------------------------------------------------------------
    def _check_X(self, X, reset):
        if _is_sparse(X):
            if not engine.resolve_scheduler().in_this_process():
                raise ValueError("scipy.sparse input runs on a local scheduler ('sync' or 'threads'); for a "
                                 "cluster, pass a dask array or a store.")
            X = X.tocsr()
            if reset:
                self.n_features_in_ = X.shape[1]
            elif X.shape[1] != self.n_features_in_:
                raise ValueError(f"X has {X.shape[1]} features, but CMBC is expecting {self.n_features_in_} "
                                 "features as input.")
            if X.shape[0] == 0:
                raise ValueError(f"Found array with 0 sample(s) (shape={X.shape}) while a minimum of 1 is required.")
            return X
        X, _ = prepare_input(self, X, reset=reset)
        return engine.prepare(X) if reset else X

    def _t0(self, X):
        if self.t0 != "auto":
            return float(self.t0)
        st = engine.map_reduce(GRAM, X)
        n = float(st["n"])
        mean = st["s1"] / n
        cov = st["xtx"] / n - np.outer(mean, mean)
        if not np.any(np.diag(cov) > 1e-12):
            raise ValueError("X: every feature is constant (all rows are equal), so CMBC has nothing to cluster "
                             "(the first temperature, from the features' correlations, would be 0).")
        sd = np.sqrt(np.maximum(np.diag(cov), 1e-12))
        corr = cov / np.outer(sd, sd)
        return 2.0 * float(np.linalg.eigvalsh((corr + corr.T) / 2).max())

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # scipy.sparse rows are read as they are (local schedulers)
        tags.input_tags.positive_only = True  # binary rows: 0/1 only
        return tags

    # ------------------------------------------------------------------
    @journaled
    def fit(self, X: DataLike, y: Any = None, *, Y_minus: DataLike | None = None, known: Any = None) -> Self:
        """Cluster the binary rows of ``X`` (``y+``) away from the prior knowledge.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Binary features ``y+``: numpy (bool, uint8, ...), scipy.sparse,
            dask, xarray or a store path.
        y : None
            Ignored (scikit-learn's convention for clusterers). A 2-D array
            here is refused: the negative features are the keyword
            ``Y_minus=`` (they were the second positional argument in
            earlier versions).
        Y_minus : array-like of shape (n_samples, n_negative), optional
            Binary negative features ``y-`` (§6.1.2).
        known : array-like, optional
            Known clusterings (§6.1.1): one label vector of length
            n_samples, a list of them, or an (n_samples, n_known) array of
            label columns; any label values.

        Without ``Y_minus`` and ``known`` the fit is the annealed EM
        baseline (the constraint has nothing to act on).
        """
        validate_params(self)
        _no_positional_negatives(y)
        lazy_input = engine.is_lazy(X) or isinstance(X, str) or hasattr(X, "__fspath__")
        X = self._check_X(X, True)
        n, m = X.shape
        check_n_clusters(self, self.n_clusters, n)
        pm, P = pattern_model(X, Y_minus, known, n)
        if self.gamma == "default":
            gamma = DEFAULT_GAMMA["negative" if Y_minus is not None else "known"]
        else:
            gamma = float(self.gamma)
        t0 = self._t0(X)
        rng = check_random_state(self.random_state)
        best: tuple | None = None
        for run in range(self.n_init if self.init is None else 1):
            result = self._anneal(X, pm, gamma, t0, rng, m, n)
            if self.verbose:
                say(f"[CMBC] run {run + 1}/{self.n_init}: objective {result[1][-1]:.6g}")
            if best is None or result[1][-1] > best[1][-1]:
                best = result
        assert best is not None  # n_init >= 1
        theta, history, temps, n_iter = best
        self.theta_ = theta
        self.objective_history_ = history
        self.temperatures_ = temps
        self.n_iter_ = n_iter
        self.gamma_ = gamma
        self.n_patterns_ = P
        self.pattern_model_ = pm
        self.labels_ = engine.as_lazy(self._labels(X)) if lazy_input else self._labels(X)
        labels = np.asarray(engine.compute(self.labels_) if engine.is_lazy(self.labels_) else self.labels_)
        used = int(np.count_nonzero(np.bincount(labels, minlength=self.n_clusters)))
        if known is not None and gamma > 0:
            self._warn_if_close_to_known(labels, known, n)
        if used < self.n_clusters:
            warnings.warn(
                f"CMBC: only {used} of the {self.n_clusters} clusters hold rows (gamma={gamma:g}): the penalty on "
                "information about the known structure leaves nothing to split"
                + (" - gamma close to 1 makes every split cost more than it gains; lower gamma" if gamma > 0.9 else
                   "; try another gamma, n_init or seed") + ".", UserWarning, stacklevel=3)
        return self

    def _warn_if_close_to_known(self, labels, known, n):
        """Asked for a clustering other than the known one(s): say so when the
        result still carries much of a known clustering (the paper's NMI
        ``I(C;L)/H(L)``, :func:`~infoclust_dask.metrics.nmi_paper`, above
        :data:`CLOSE_TO_KNOWN`)."""
        from ..metrics import nmi_paper

        for j, col in enumerate(known_columns(known, n)):
            codes, _ = encode_labels(col, n, min_classes=1, name="known")
            codes = np.asarray(engine.compute(codes) if engine.is_lazy(codes) else codes)
            close = nmi_paper(labels, codes)
            if close > CLOSE_TO_KNOWN:
                warnings.warn(
                    f"CMBC: the clustering found still carries NMI {close:.2f} of known clustering {j} "
                    f"(I(C;L)/H(L); above {CLOSE_TO_KNOWN}): it is close to what you asked it to avoid. Raise "
                    "gamma (closer to 1), try more clusters, n_init or another seed - or the data may hold no "
                    "other strong structure.", UserWarning, stacklevel=4)

    def _warm_start_params(self, previous) -> dict:
        """``fit(init=previous)``: the previous ``theta_`` at temperature 1
        (where its annealing ended), at the previous gamma, one run."""
        return {"init": np.array(previous.theta_, dtype=np.float64), "t0": 1.0, "n_init": 1,
                "gamma": float(previous.gamma_)}

    def _start(self, rng, m, K):
        """The first ``theta``: ``init`` (checked) or random around 1/2."""
        if self.init is None:
            return np.clip(0.5 + 0.05 * rng.standard_normal((m, K)), obj.EPS, 1 - obj.EPS)
        theta = np.array(self.init, dtype=np.float64)
        if theta.shape != (m, K):
            raise ValueError(f"init must have shape (n_features, n_clusters) = ({m}, {K}); got {theta.shape}.")
        if not np.all(np.isfinite(theta)) or theta.min() < 0 or theta.max() > 1:
            raise ValueError("init holds Bernoulli parameters: every value must be in [0, 1].")
        return np.clip(theta, obj.EPS, 1 - obj.EPS)

    def _anneal(self, X, pm, gamma, t0, rng, m, n):
        K = self.n_clusters
        theta = self._start(rng, m, K)
        history, temps, n_iter, unsettled = [], [], 0, []
        T = t0
        bar = Steps(self, None, "CMBC: annealing", unit="T")
        while True:
            temps.append(T)
            bar.update(1, T=f"{T:.3g}")
            theta = np.clip(theta + self.perturbation * rng.standard_normal(theta.shape), obj.EPS, 1 - obj.EPS)
            converged, step, last = False, 1.0, None
            for it in range(self.max_iter):
                st = engine.map_reduce(CMBC_ESTEP, X, params={"log_theta": np.log(theta),
                                                              "log_1m_theta": np.log1p(-theta),
                                                              "temperature": T})
                n_iter += 1
                loglik = float(st["loglik"]) - n * np.log(K)
                history.append((1 - gamma) / n * loglik + (gamma * obj.regularizer(theta, pm) if pm else 0.0))
                delta = self._m_step(st["S1"], st["R"], theta, pm, gamma, n) - theta
                if self.variant == "bu" and last is not None and np.vdot(delta, last) < 0:
                    step = max(step / 2, 1 / 64)  # the batch update over-corrects: damp it
                delta *= step
                last = delta
                moved = float(np.abs(delta).max())
                theta = np.clip(theta + delta, obj.EPS, 1 - obj.EPS)
                if it + 1 >= self.min_iter and moved < self.tol:
                    converged = True
                    break
            hard = float(st["hard"]) / n
            if self.verbose > 1:
                say(f"[CMBC] T={T:.4g}: {it + 1} iterations, objective {history[-1]:.6g}, mean max q {hard:.4f}")
            if not converged:
                unsettled.append(T)
            if (T <= 1.0 and hard > 1 - 1e-3) or T < 1e-3:
                break
            T *= self.anneal_rate
        bar.close()
        if unsettled and unsettled[-1] == T:
            warnings.warn(
                f"CMBC: EM did not settle at the final temperature T={T:.3g} in max_iter={self.max_iter} "
                f"iterations (nor at {len(unsettled) - 1} earlier ones). The batch update can oscillate at large "
                "gamma; variant='pm' does not, or raise max_iter.", ConvergenceWarning, stacklevel=4)
        return theta, history, temps, n_iter

    def _m_step(self, S1, R, theta, pm, gamma, n):
        """Maximize every ``theta[j, k]`` given the E-step sums: the plain EM
        update when there is no constraint, else the cubic of each
        coordinate (batch: all from ``theta``; partial maximization: one
        after another, each seeing the latest values)."""
        if pm is None or gamma == 0.0:
            return np.clip(S1 / np.maximum(R, 1e-300)[None, :], obj.EPS, 1 - obj.EPS)
        if self.variant == "bu":  # every coordinate from the same theta: one batched solve
            return obj.solve_coordinates(S1, R, theta, pm, gamma)
        new = theta.copy()
        for k in range(theta.shape[1]):
            for h in range(theta.shape[0]):
                new[h, k] = obj.solve_coordinate(S1[h, k], R[k], new, h, k, pm, gamma)
        return new

    def _params(self):
        return {"log_theta": np.log(self.theta_), "log_1m_theta": np.log1p(-self.theta_)}

    def _proba(self, X):
        return engine.map_blocks(CMBC_POSTERIOR, X, params=self._params(), trailing_shape=(self.n_clusters,))

    def _labels(self, X):
        return self._proba(X).argmax(axis=1)

    @staticmethod
    def _binary_rows(X):
        """In-memory rows (numpy or scipy.sparse) must be 0/1, as at fit (lazy
        rows are checked by fit's counting pass only: a pass more here would
        double predict's cost)."""
        if engine.is_lazy(X):
            return X
        values = X.data if _is_sparse(X) else np.asarray(X)
        bad = np.setdiff1d(np.unique(values), [0, 1])
        if bad.size:
            raise ValueError(f"X must be binary (0/1) as at fit; found values {bad[:5].tolist()}.")
        return X

    @data_method
    def predict(self, X: DataLike) -> Labels:
        """Most probable cluster of each binary row (the Bernoulli mixture at T = 1)."""
        check_is_fitted(self, "theta_")
        return self._labels(self._binary_rows(self._check_X(X, False)))

    @data_method
    def predict_proba(self, X: DataLike) -> Labels:
        """``p(c_k | y+)`` of each row, equal cluster priors."""
        check_is_fitted(self, "theta_")
        return self._proba(self._binary_rows(self._check_X(X, False)))

    @data_method
    def score(self, X: DataLike, y: Any = None, *, Y_minus: DataLike | None = None, known: Any = None,
              gamma: float | None = None) -> float:
        """The objective (3.14) of the fitted parameters on the rows ``X``
        with their prior knowledge (held-out rows, e.g. a cross-validation
        fold): ``(1 - gamma)/n`` times their log-likelihood plus ``gamma``
        times the bounds, the pattern constants counted on these rows; higher
        is better. ``gamma`` defaults to the fit's ``gamma_``; give one
        reference value to compare fits made with different gammas. ``y``
        is ignored, as in :meth:`fit`."""
        _no_positional_negatives(y)
        loglik, pm, n = self._held_out_terms(X, Y_minus, known)
        return self._objective_at(loglik, pm, n, self.gamma_ if gamma is None else float(gamma))

    def _held_out_terms(self, X, Y_minus=None, known=None):
        """The log-likelihood of the rows ``X`` at ``T = 1`` (one pass) and the
        pattern model counted on them (one pass): ``(loglik, model, n)``;
        :meth:`_objective_at` turns them into (3.14) at any gamma."""
        check_is_fitted(self, "theta_")
        X = self._check_X(X, False)
        n = X.shape[0]
        pm, _ = pattern_model(X, Y_minus, known, n)
        st = engine.map_reduce(CMBC_ESTEP, X, params={**self._params(), "temperature": 1.0})
        return float(st["loglik"]) - n * np.log(self.n_clusters), pm, n

    def _objective_at(self, loglik, pm, n, gamma):
        if pm is None:
            return (1.0 - gamma) / n * loglik
        return obj.objective(loglik, self.theta_, pm, gamma)

    @installs_runner
    def held_out_score(self, X: DataLike, known: Any = None, *, gamma: float = HELD_OUT_GAMMA) -> dict:
        """Scores of the fitted parameters on held-out rows ``X`` with their
        known clustering(s) (e.g. a cross-validation fold): ``"score"``, the
        objective (3.14) at one reference ``gamma`` (default
        :data:`HELD_OUT_GAMMA`: fits made with different gammas stay
        comparable), the held-out log-likelihood per sample
        ``"loglik_per_sample"`` (gamma 0), the fit's ``"gamma"`` and, with
        ``known``, the NMI ``"nmi_known"`` of the held-out clusters to it
        (:func:`infoclust_dask.metrics.nmi_paper`, Gondek, Vaithyanathan &
        Garg 2005, §6). Two passes for the
        terms, used at both gammas."""
        from ..metrics import nmi_paper

        loglik, pm, n = self._held_out_terms(X, known=known)
        out = {"score": self._objective_at(loglik, pm, n, float(gamma)),
               "loglik_per_sample": self._objective_at(loglik, pm, n, 0.0), "gamma": self.gamma_}
        if known is not None:
            labels = np.asarray(engine.compute(self.predict(X)))
            ref = np.asarray(engine.compute(getattr(known, "data", known)))
            out["nmi_known"] = nmi_paper(labels, ref)
        return out

    @installs_runner
    def run_summary(self, data: Any) -> dict:
        """Facts of a fit on a store (``data``: its Dataset) for the run's
        ``summary.json``, with the new clusters against every integer label
        variable of the store (``nmi_vs_<name>``, ``contingency_vs_<name>``)."""
        from ..metrics import contingency_table, nmi_paper

        check_is_fitted(self, "theta_")
        labels = np.asarray(engine.compute(self.labels_))
        out = {"gamma": self.gamma_, "variant": self.variant, "n_patterns": self.n_patterns_,
               "temperatures": len(self.temperatures_), "cluster_sizes": np.bincount(labels).tolist()}
        for name in data.data_vars:
            if data[name].dims == ("sample",) and np.issubdtype(data[name].dtype, np.integer):
                lab = np.asarray(engine.compute(data[name].data))
                out[f"nmi_vs_{name}"] = nmi_paper(labels, lab)
                codes = np.unique(lab, return_inverse=True)[1]
                out[f"contingency_vs_{name}"] = contingency_table(labels, codes).tolist()
        return out

    @data_method
    def fit_predict(self, X: DataLike, y: Any = None, *, Y_minus: DataLike | None = None, known: Any = None
                    ) -> Labels:
        return self.fit(X, y, Y_minus=Y_minus, known=known).labels_

