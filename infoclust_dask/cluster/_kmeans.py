"""K-means (Lloyd) as map-reduce passes over row blocks.

MacKay, *Information Theory, Inference, and Learning Algorithms*, ch. 20
(Cambridge University Press, 2003): assignment step (20.3)-(20.4),
update step (20.5)-(20.6). Each iteration is ONE pass: every block reports
per-cluster weights, per-cluster sums and its share of the inertia
(:data:`infoclust_dask.kernels.kmeans.LLOYD_STEP`); the driver divides.
"""

from __future__ import annotations

import time
import warnings
from typing import Any, Self

import numpy as np
from sklearn.base import ClusterMixin, TransformerMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from .. import engine, metrics
from .._inputs import check_sample_weight, prepare_input
from .._support.hints import DataLike, Labels, NumbersLike, RandomStateLike, SchedulerLike, Sequence
from .._support.progress import say
from .._support.stack import user_stacklevel
from .._support.validation import ArrayLike, Interval, Options, check_n_clusters, check_random_state, validate_params
from ..kernels.kmeans import ASSIGN, DISTANCES, INERTIA, LABELLED_INERTIA, LLOYD_FAR, LLOYD_STEP
from ..kernels.stats import SUM_SQ
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
from ._init import init_kmeans_parallel, init_kmeanspp, init_random, init_sampled_kmeanspp, seed_sample_rows
from ._lloyd_bounds import (
    BOUNDS_MIN_FORECAST,
    HAMERLY_MAX_K,
    RowBounds,
    bounds_pay,
    judge_whole_fit,
    lost,
    mark_lost,
    note_step_path,
    plain_steps,
    say_bounds,
)
from ._lloyd_bounds import use_bounds as _use_bounds  # (tests and benchmarks replace it here)
from ._xarray import data_method

__all__ = ["KMeans", "EmptyClusterWarning", "lloyd"]


class EmptyClusterWarning(UserWarning):
    """A cluster lost all its points and was re-seeded."""


def lloyd(X, w, centers, *, max_iter, tol, verbose=0, label="", warn_empty=True, sxx=None, labels_out=None,
          bounds="auto", trace=None, paths=None):
    """Lloyd iterations from ``centers``; the computational core of KMeans.

    Stops when the centres no longer move (the partition is a fixed point)
    or their total squared shift is ``<= tol`` (absolute), as scikit-learn's
    ``algorithm="lloyd"`` does. Empty clusters are moved to the points
    farthest from their centres, with an :class:`EmptyClusterWarning`.

    Returns ``(centers, inertia, n_iter, counts)``; the inertia is the exact
    weighted sum of squared distances to the nearest final centre, ``counts``
    the (weighted) number of rows nearest to each final centre. One pass per
    iteration (:data:`~infoclust_dask.kernels.kmeans.LLOYD_STEP`), one more
    for the inertia, and one extra whenever a cluster empties. With
    ``labels_out`` (a dict; rows in memory) that last pass also gives the
    rows' labels, as ``labels_out["labels"]`` (no separate labels pass).

    ``bounds``: keep per-row bounds between the steps when the rows are in
    this process's memory - Hamerly's (2010) up to :data:`HAMERLY_MAX_K`
    centres, Yinyang's grouped bounds (Ding et al. 2015) above
    (:class:`~._lloyd_bounds.RowBounds`). ``"auto"`` (when
    :func:`~._lloyd_bounds.use_bounds` allows): Hamerly's are set up after
    :data:`~._lloyd_bounds.BOUNDS_PLAIN_STEPS` timed plain steps, Yinyang's
    by the first step's own products; they are dropped when they forecast
    saving less than :data:`~._lloyd_bounds.BOUNDS_MIN_FORECAST` of the
    next step's distances (:meth:`~._lloyd_bounds.RowBounds.forecast`), or
    when a bounded step takes longer than the fastest plain step without
    falling below :data:`~._lloyd_bounds.BOUNDS_FALLING` of the one before
    (:func:`~._lloyd_bounds.bounds_pay`); kept only where they pay, measured
    on this machine and these data, and judged over the whole fit
    (:func:`~._lloyd_bounds.judge_whole_fit`: a class of kind, dtype, k, d
    and the rows' order of magnitude whose bounds lost is not tried again in
    this process). ``True`` keeps them from the first step, ``False``
    never. A row whose bounds show its centre cannot have changed
    is not measured again. Every path - plain or bounded steps, the exact
    loops or the products (:mod:`infoclust_dask.kernels._choice`) - gives
    the same centres, labels and inertia, bit for bit, so the choices
    change the time only. ``trace`` (a list) receives each step's centres,
    the rows its bounds decided, (Yinyang) the distances it computed and
    its seconds; ``paths`` (a list) one line on the bounds' fate.
    """
    k = centers.shape[0]
    centers = np.array(centers, dtype=np.float64)
    if verbose and sxx is None:  # sum_n w_n |x_n|^2, for the progress estimate of the inertia
        sxx = float(engine.map_reduce(SUM_SQ, X, w)["sxx"])
    it = 0
    allowed = _use_bounds(X, k, bounds, max_iter)
    # the class of work the bounds are judged for: their kind, dtype, k, d and the rows' order of magnitude (a
    # verdict on 2e4 rows says nothing of 2e5: below, the bounds' fixed costs weigh more)
    kind = ("hamerly" if k <= HAMERLY_MAX_K else "yinyang", np.dtype(X.dtype).str, k, X.shape[1],
            int(X.shape[0]).bit_length())
    if allowed and bounds == "auto" and lost(kind):
        allowed = False
        say_bounds(paths, verbose, label, "plain steps (bounds did not pay for these k, d, dtype and about as many "
                                           "rows earlier in this process)")
    state = RowBounds(X.shape[0], centers, HAMERLY_MAX_K, X.nbytes) if allowed and bounds is True else None
    plain, previous, ended, bounded, n_bounded, settled = np.inf, np.inf, False, 0.0, 0, False
    for it in range(1, max_iter + 1):
        if allowed and state is None and not ended and it == plain_steps(k) + 1:  # plain steps timed: set up
            state = RowBounds(X.shape[0], centers, HAMERLY_MAX_K, X.nbytes)
        if state is not None and bounds == "auto" and n_bounded == 1 and state.forecast(centers) < BOUNDS_MIN_FORECAST:
            state, ended = None, True  # the set-up's bounds would decide too few rows at the moved centres
            mark_lost(kind)
            say_bounds(paths, verbose, label, f"iteration {it}: the bounds would decide too few rows; plain steps")
        t0 = time.perf_counter()
        if state is not None:
            st = state.step(X, w, centers)
        else:
            st = engine.map_reduce(LLOYD_STEP, X, w, params={"centers": centers})
        seconds = time.perf_counter() - t0
        if trace is not None:
            trace.append({"centers": centers.copy(), "skipped": int(st.get("skipped", 0)),
                          "measured": int(st.get("measured", -1)), "seconds": seconds})
        if state is None:
            plain = min(plain, seconds)
        else:
            bounded, n_bounded = bounded + seconds, n_bounded + 1
            if n_bounded == 1 and not np.isfinite(plain):  # Yinyang's set-up step: a plain step and its bounds
                plain = seconds
        if state is not None and bounds == "auto":
            if np.isfinite(previous) and not bounds_pay(plain, seconds, previous):
                state, ended = None, True  # the bounds do not pay here: plain steps from here (the same centres)
                mark_lost(kind)
                say_bounds(paths, verbose, label, f"iteration {it}: a bounded step took {seconds:.3g} s, a plain "
                            f"one {plain:.3g} s; plain steps from here")
            previous = seconds
        counts, sums = st["counts"], st["sums"]
        empty = np.flatnonzero(counts <= 0)
        new = np.empty_like(centers)
        nz = counts > 0
        new[nz] = sums[nz] / counts[nz, None]
        if empty.size:
            far = engine.map_reduce(
                LLOYD_FAR, X, w, params={"centers": centers, "n_far": k},
            )["far_x"]
            for j, c in enumerate(empty):
                new[c] = far[j % max(1, far.shape[0])]
            if warn_empty:
                warnings.warn(
                    f"{empty.size} empty cluster(s) {empty.tolist()} at iteration {it}; "
                    "re-seeded at the points farthest from their centres. Consider fewer "
                    "clusters or another init.",
                    EmptyClusterWarning,
                    stacklevel=user_stacklevel(),
                )
        shift = float(((new - centers) ** 2).sum())
        if verbose:
            # inertia at the old centres from the sums (progress only; the
            # returned inertia is computed exactly)
            approx = sxx - 2 * float(np.sum(centers * sums)) + float(counts @ np.sum(centers**2, axis=1))
            say(
                f"[KMeans{label}] iteration {it:4d}/{max_iter}  inertia~{approx:.6g}  "
                f"shift={shift:.3g}  ({time.perf_counter() - t0:.2f}s)"
            )
        centers = new
        settled = shift == 0.0 and not empty.size  # this pass was at the final centres
        if settled and "inertia" in st and labels_out is None:  # a plain pass: its inertia and counts are final
            note_step_path(X, k)
            return centers, float(st["inertia"]), it, np.asarray(counts, dtype=np.float64)
        if shift <= tol:
            break
    if n_bounded < it:  # plain steps ran: which kernel path they took
        note_step_path(X, k)
    if state is not None and bounds == "auto" and not settled and n_bounded == 1 and \
            state.forecast(centers) < BOUNDS_MIN_FORECAST:  # only the set-up ran, and its bounds would decide little
        state = None
        say_bounds(paths, verbose, label, "the set-up's bounds would decide too few rows: the final pass is plain")
    if state is not None:  # the bounds decide the final labels too; then only their distances
        t0 = time.perf_counter()
        inertia, counts, labels = state.final(X, w, centers, settled=settled)
        bounded += time.perf_counter() - t0
        judge_whole_fit(bounds, kind, bounded, plain * (n_bounded + (0 if settled else 1)), paths, verbose, label)
        if labels_out is not None:
            labels_out["labels"] = labels
        return centers, inertia, it, counts
    inertia, counts = _plain_final(X, w, centers, labels_out)
    return centers, inertia, it, counts


def _plain_final(X, w, centers, labels_out):
    """The inertia and counts at the final centres by a plain pass; with ``labels_out`` (rows in memory) the
    labels by a map pass, then their inertia and counts as a bounded run's (the same bits)."""
    if labels_out is not None:
        labels = np.asarray(engine.compute(engine.map_blocks(ASSIGN, X, params={"centers": centers})))
        st = engine.map_reduce(LABELLED_INERTIA, X, w, labels, params={"centers": centers})
        labels_out["labels"] = labels
    else:
        st = engine.map_reduce(INERTIA, X, w, params={"centers": centers})
    return float(st["inertia"]), np.asarray(st["counts"], dtype=np.float64)


#: from this many centres x features a fit on rows in memory takes its labels from the inertia's pass: at
#: 1e6 x 16, k = 16 (256) fusing was slower (115-130 vs 85-95 ps per point x centre x dimension: a pass costs
#: 25 ms there, less than writing and joining the rows' distances), at 2e5 x 128, k = 1024 it saves a 0.3 s pass
#: (benchmarks/kmeans_large_k.py)
FUSED_LABELS_MIN_KD = 1024

#: above this many bytes of data, ``init="k-means++"`` seeds on a uniform sample (one pass, whatever K)
SAMPLED_SEEDING_BYTES = 2**30
#: ... and where its ``k + 1`` passes would read more than this many bytes (8 GiB: ~3 s in memory here, ~15 s
#: from a compressed store). A rule of the data and the parameters only (issue 62): it used to ask whether the
#: runner streams the store, which depends on the workers' free memory - the same store then seeded, and ended,
#: in another order on workers of 500 MB than of 1 GB
SEEDING_READ_BYTES = 2**33

@shared_parameters
class KMeans(ClusterColumnsOut, ClusterMixin, TransformerMixin, InfoclustEstimator):
    """K-means clustering whose every pass is a map-reduce over row blocks.

    Parameters
    ----------
    n_clusters : int, default=8
        Number of clusters K (one default across the package and the CLI's ``-k``, as scikit-learn's KMeans and SpectralClustering).
    init : {"k-means++", "k-means||", "random"} or array of shape (n_clusters, n_features), default="k-means++"
        Seeding. ``"k-means++"``: greedy D^2 sampling (Arthur & Vassilvitskii
        2007), one pass per centre, on data up to
        :data:`SAMPLED_SEEDING_BYTES` (1 GiB) whose ``n_clusters + 1``
        passes read at most :data:`SEEDING_READ_BYTES` (8 GiB); otherwise
        k-means++ (then Lloyd) on a uniform sample of ``max(20 000, 100 *
        n_clusters)`` rows drawn in one pass, so the seeding costs one pass
        whatever K. The rule depends on the data's size and ``n_clusters``
        only - not on where the fit runs or whether its store streams - so
        every runner seeds alike.
        ``"k-means||"``: oversampling rounds, better for large K on big data.
        ``"random"``: distinct rows drawn uniformly. An array is used as is.
    n_init : int or "auto", default="auto"
        Number of seedings; the fit with the lowest inertia is kept. "auto"
        is 1 for k-means++, k-means|| and an array, 10 for "random".
    max_iter : int, default=300
        Maximum number of Lloyd iterations (passes) per run.
    tol : float, default=1e-4
        Convergence when the total squared centre shift is at most ``tol``
        times the mean per-feature variance of X (scikit-learn's rule).
    oversampling_factor : float, default=2.0
        k-means|| keeps about ``oversampling_factor * n_clusters`` rows per round.
    init_max_iter : int, default=2
        Rounds of k-means|| (each two passes). 2 is Spark MLlib's default;
        on 1e6 x 16 blobs (benchmarks/bench_kmeans.py data) 2 rounds reached
        the same final inertia as 5 in less than half the time.
    random_state : int, numpy Generator or None, default=None
    {shared_parameters}
    verbose : int, default=0
        Print one line per iteration when > 0.

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_clusters, n_features)
    labels_ : ndarray or dask array of shape (n_samples,)
        Lazy (dask) when X was lazy.
    seeding_ : str
        How the kept run was seeded and what it cost, e.g. ``"k-means++ on a
        20000-row uniform sample (1 pass)"``.
    inertia_ : float
        Weighted sum of squared distances of samples to their nearest centre.
    n_iter_ : int
        Lloyd iterations of the best run.
    cluster_sizes_ : ndarray of shape (n_clusters,)
        (Weighted) number of training rows nearest to each centre.
    n_features_in_ : int

    Notes
    -----
    Passes over the data: the validation pass, the seeding (k for k-means++),
    then one per iteration, plus one for the final inertia unless the
    partition reached a fixed point (for rows in memory and k x d >= 1024 a
    labels pass gives ``labels_`` and one of n x d work their inertia; with
    bounds kept to the end, a bounded step and that n x d pass; otherwise
    ``labels_`` take a pass of their own, lazy for lazy input). The driver
    holds only K x d arrays.

    Paths chosen where the fit runs (issue 63): each step's assignment is
    computed by the exact differences, or for 8 centres and more by BLAS
    products with near ties settled by the exact differences - whichever
    the process running it measured faster on its first calls for these
    k, d and dtype (:mod:`infoclust_dask.kernels._choice`). On rows held
    in this process's memory (more than 1 MiB) exact bounds per row may be
    kept: Hamerly's (2010) two bounds with at most 64 centres (24 bytes a
    row beside the data: 240 MB for 1e7 rows), set up at the third step
    after two timed plain ones (when at least 4 steps are allowed);
    Yinyang's (Ding et al. 2015) bound per group of about 10 centres above
    (8 bytes a row and group, at most as much memory as the rows, at least
    256 MB, at most 2 GiB), set up by the first step's own products. They
    are dropped when they forecast that they would save less than half of
    the next step's distances, or when a bounded step is slower than a
    plain one (unless falling fast); bounds that lost over a whole fit are
    not tried again in the process for that class of work, and bounds that
    would take more than a quarter of the memory available are not kept. A row whose
    bounds show that its centre cannot have changed is not measured again.
    Every path computes a deciding distance by the same IEEE operations in
    the same order, so the iterations' centres, the labels and the inertia
    are the same bits whichever paths ran (tested); ``runner_["paths"]``
    says which ran and why. Stores streamed from disk and fits on a
    cluster's workers keep plain passes.

    References
    ----------
    MacKay (2003), ch. 20, eq. (20.3)-(20.6). Hamerly (2010), "Making
    k-means even faster", SIAM SDM, algorithm 2. Ding, Zhao, Shen,
    Musuvathi & Mytkowicz (2015), "Yinyang K-means", ICML, section 3.

    Examples
    --------
    >>> import numpy as np
    >>> from infoclust_dask import KMeans
    >>> X = np.array([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0], [5.1, 5.0]])
    >>> km = KMeans(n_clusters=2, random_state=0).fit(X)
    >>> sorted(km.cluster_centers_[:, 0].round(2).tolist())
    [0.05, 5.05]
    """

    #: scikit-learn checks this estimator fails on purpose, with the reason (:func:`expected_failed_checks`)
    _expected_failed_checks = {"check_sample_weight_equivalence_on_dense_data": WEIGHTS}

    def __init__(self, n_clusters: int = 8, *, init: str | NumbersLike = "k-means++", n_init: int | str = "auto",
                 max_iter: int = 300, tol: float = 1e-4, oversampling_factor: float = 2.0, init_max_iter: int = 2,
                 random_state: RandomStateLike = None, scheduler: SchedulerLike = None, sample_dim: str | None = None,
                 variables: Sequence[str] | None = None, verbose: int = 0):
        self.n_clusters = n_clusters
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.oversampling_factor = oversampling_factor
        self.init_max_iter = init_max_iter
        self.random_state = random_state
        self.scheduler = scheduler
        self.sample_dim = sample_dim
        self.variables = variables
        self.verbose = verbose

    # ------------------------------------------------------------------
    _parameter_constraints = {  # the shared ones (random_state, scheduler, sample_dim, variables, verbose) first
        **SHARED_CONSTRAINTS,
        "n_clusters": [Interval(int, 1)],
        "init": [Options("k-means++", "k-means||", "random"), ArrayLike()],
        "n_init": [Options("auto"), Interval(int, 1)],
        "max_iter": [Interval(int, 1)],
        "tol": [Interval(float, 0)],
        "oversampling_factor": [Interval(float, 0, closed="neither")],
        "init_max_iter": [Interval(int, 1)],
    }

    def _check_params(self, n_samples, n_features):
        check_n_clusters(self, self.n_clusters, n_samples)
        if isinstance(self.init, str):
            n_init = self.n_init
            if n_init == "auto":
                n_init = 10 if self.init == "random" else 1
        else:
            init = np.asarray(self.init, dtype=np.float64)
            if init.shape != (self.n_clusters, n_features):
                raise ValueError(
                    f"The shape of the initial centers {init.shape} does not match "
                    f"(n_clusters, n_features) = ({self.n_clusters}, {n_features})."
                )
            if not np.all(np.isfinite(init)):
                raise ValueError("The initial centers contain NaN or infinite values.")
            n_init = 1
        return n_init

    def _seed(self, X, w, rng):
        k = self.n_clusters
        if not isinstance(self.init, str):
            self.seeding_ = "given centres"
            return np.array(self.init, dtype=np.float64)
        if self.init == "random":
            self.seeding_ = "random rows"
            return init_random(X, w, k, rng)
        def refine(C, cw, c0):
            with engine.installed("sync"):  # the candidates are small, in this process
                return lloyd(C, cw, c0, max_iter=100, tol=0.0, warn_empty=False)[0]

        if self.init == "k-means++":
            # k + 1 passes over gigabytes would cost more than the fit (the data's size and k decide, never the
            # runner: the same seeding wherever the fit runs)
            if X.nbytes > SAMPLED_SEEDING_BYTES or X.nbytes * (k + 1) > SEEDING_READ_BYTES:
                self.seeding_ = f"best of 5 k-means++ on a {seed_sample_rows(k)}-row uniform sample (1 pass)"
                return init_sampled_kmeanspp(X, w, k, rng, lloyd=refine)
            self.seeding_ = f"k-means++ ({k + 1} passes)"
            return init_kmeanspp(X, w, k, rng)
        self.seeding_ = f"k-means|| ({2 * self.init_max_iter + 2} passes)"

        return init_kmeans_parallel(
            X, w, k, rng, oversampling_factor=self.oversampling_factor,
            rounds=self.init_max_iter, lloyd=refine,
        )

    def _warm_start_params(self, previous) -> dict:
        """``fit(init=previous)``: Lloyd from the previous centres, one run."""
        return {"init": np.array(previous.cluster_centers_, dtype=np.float64), "n_init": 1}

    @journaled
    def fit(self, X: DataLike, y: Any = None, sample_weight: DataLike | None = None) -> Self:
        """Compute K-means clustering.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), dask array, xarray DataArray or store path
        y : ignored
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights; weight k acts like k repeats of a row.

        Returns
        -------
        self
        """
        validate_params(self)
        X, info = prepare_input(self, X, reset=True, need_moments=True)
        return self._fit_prepared(X, info, sample_weight)

    def _fit_prepared(self, X: Any, info: Any, sample_weight: DataLike | None = None, labels: bool = True) -> Self:
        """:meth:`fit` on input already prepared by the caller's fit (``X`` and its ``info`` from
        :func:`~infoclust_dask._inputs.prepare_input`): the estimators that start from K-means' centres
        (DC, AC, the mixtures) call this with their own prepared input, so that a fit prepares its input
        once (no second check and moments pass). ``labels=False``: no ``labels_`` (their pass is skipped)."""
        n_init = self._check_params(info.n, info.d)
        w = check_sample_weight(sample_weight, X)
        rng = check_random_state(self.random_state)
        tol = float(np.mean(info.var)) * self.tol
        best: tuple | None = None
        # rows in memory and many centres x features: the inertia's pass gives the labels too (one pass less);
        # below FUSED_LABELS_MIN_KD a pass costs less than the per-row distances it would write (measured)
        in_memory = not engine.is_lazy(X) and self.n_clusters * info.d >= FUSED_LABELS_MIN_KD
        for run in range(n_init):
            c0 = self._seed(X, w, rng)
            found: dict = {}
            centers, inertia, n_iter, counts = lloyd(
                X, w, c0, max_iter=self.max_iter, tol=tol, verbose=self.verbose,
                label=f" run {run + 1}/{n_init}" if n_init > 1 else "",
                # sum |x|^2 from the moments already computed (no pass of its own) when unweighted
                sxx=info.n * float(np.sum(info.var + info.mean**2)) if w is None else None,
                labels_out=found if in_memory else None,
            )
            if best is None or inertia < best[1]:
                best = (centers, inertia, n_iter, counts, found.get("labels"))
        assert best is not None  # n_init >= 1
        self.cluster_centers_, self.inertia_, self.n_iter_, self.cluster_sizes_, found_labels = best
        self._weighted = w is not None
        if self.n_iter_ >= self.max_iter and self.max_iter > 1:
            warnings.warn(
                f"KMeans stopped at max_iter={self.max_iter} before converging; increase "
                "max_iter or tol.",
                ConvergenceWarning,
                stacklevel=user_stacklevel(),
            )
        if not labels:
            return self
        if found_labels is None:
            self.labels_ = voronoi_labels(X, self.cluster_centers_, lazy=info.lazy_input)
        else:
            self.labels_ = engine.as_lazy(found_labels) if info.lazy_input else found_labels
        return self

    @installs_runner
    def partial_fit(self, X: DataLike, y: Any = None, sample_weight: DataLike | None = None) -> Self:
        """Update the centres with one batch of rows (on-line K-means).

        The first call seeds the centres from its batch (``init``, as
        ``fit``); each call then assigns the batch's rows to their nearest
        centre and moves each centre to the running mean of every row ever
        assigned to it: ``m_j += (S_j - N_j m_j) / n_j`` with the batch's
        sum ``S_j`` and weight ``N_j`` of the rows assigned to ``j`` and
        ``n_j`` (``counts_``) the total so far - the on-line rule of MacKay
        (2003, ch. 20) with learning rate ``1 / n_j`` (Sculley 2010's
        mini-batch K-means, one batch per call). Measured over 20 blocks
        of shuffled rows, one pass each: blobs within 0.1 % of ``fit``'s
        inertia, digits (k = 10) 0.7 % below it, Satimage (k = 6) 0.6 %
        above, Letter (k = 26) 7 % above (a second pass: 6 %) - the seeds
        come from the first block alone, so many clusters need a larger
        first block. This is the method ``dask_ml.wrappers.Incremental``
        and streaming loops call.

        Parameters
        ----------
        X : array-like of shape (n_batch, n_features), or a dask array (computed: one block)
        y : ignored
        sample_weight : array-like of shape (n_batch,), default=None
        """
        X, _, Xb, wb, first = stream_batch(self, X, sample_weight)
        if first:
            self._check_params(len(Xb), Xb.shape[1])
            rng = check_random_state(self.random_state)
            w = None if sample_weight is None else wb
            self.cluster_centers_ = np.array(self._seed(X, w, rng), dtype=np.float64)
            self.counts_ = np.zeros(self.n_clusters)
            self.inertia_ = 0.0
            self.n_steps_ = 0
        centers = self.cluster_centers_
        labels = np.asarray(engine.compute(voronoi_labels(Xb, centers)))
        self.inertia_ += float(np.sum(wb * np.sum((Xb - centers[labels]) ** 2, axis=1)))
        k = centers.shape[0]
        weight = np.bincount(labels, weights=wb, minlength=k)
        sums = np.stack([np.bincount(labels, weights=wb * Xb[:, j], minlength=k) for j in range(Xb.shape[1])], 1)
        self.counts_ = self.counts_ + weight
        moved = weight > 0
        centers = centers.copy()
        centers[moved] += (sums[moved] - weight[moved, None] * centers[moved]) / self.counts_[moved, None]
        self.cluster_centers_ = centers
        self.cluster_sizes_ = self.counts_.copy()
        self.n_steps_ += 1
        return self

    @data_method
    def predict(self, X: DataLike) -> Labels:
        """Index of the nearest centre (Voronoi region) for each sample.

        Returns a dask array for lazy input, a numpy array otherwise."""
        check_is_fitted(self)
        X, _ = prepare_input(self, X, reset=False)
        return voronoi_labels(X, self.cluster_centers_)

    @installs_runner
    def held_out_score(self, X: DataLike, y: Any = None) -> dict:
        """Scores of the fitted centres on held-out rows ``X`` (e.g. a
        cross-validation fold; ``y`` is ignored): ``"score"`` (higher is
        better) is the held-out log-likelihood per sample of the K-means
        mixture - isotropic Gaussians of the fit's within-cluster variance,
        weighted by the cluster sizes (MacKay 2003, ch. 20) - which peaks at
        the number of clusters the data have; ``"vq_cost"``, the mean
        squared distance to the nearest centre, always falls as k grows."""
        check_is_fitted(self)
        ll = metrics.kmeans_heldout_loglik(X, self.cluster_centers_, self.cluster_sizes_, self.inertia_)
        q = metrics.quantization_error(X, self.cluster_centers_)
        return {"score": ll, "loglik_per_sample": ll, "vq_cost": q, "train_inertia": float(self.inertia_)}

    @installs_runner
    def run_summary(self, data: Any) -> dict:
        """Facts of a fit on a store (``data``: its Dataset) for the run's
        ``summary.json``: the inertia and the cluster sizes."""
        check_is_fitted(self)
        if getattr(self, "_weighted", True):  # row counts: the labels' (one pass)
            labels = np.asarray(engine.compute(self.labels_))
            sizes = np.bincount(labels, minlength=self.cluster_centers_.shape[0]).tolist()
        else:  # unweighted: the final pass' counts are the row counts (no pass)
            sizes = [int(round(c)) for c in self.cluster_sizes_]
        return {"inertia": float(self.inertia_), "seeding": getattr(self, "seeding_", None), "cluster_sizes": sizes}

    @data_method
    def fit_predict(self, X: DataLike, y: Any = None, sample_weight: DataLike | None = None) -> Labels:
        """Fit and return ``labels_``."""
        return self.fit(X, sample_weight=sample_weight).labels_

    @data_method
    def transform(self, X: DataLike) -> Labels:
        """Euclidean distances to every centre, shape (n_samples, n_clusters)."""
        check_is_fitted(self)
        X, _ = prepare_input(self, X, reset=False)
        return engine.map_blocks(
            DISTANCES, X, params={"centers": self.cluster_centers_},
            trailing_shape=(self.n_clusters,),
        )

    @data_method
    def score(self, X: DataLike, y: Any = None, sample_weight: DataLike | None = None) -> float:
        """Opposite of the (weighted) inertia of X under the fitted centres."""
        check_is_fitted(self)
        X, _ = prepare_input(self, X, reset=False)
        w = check_sample_weight(sample_weight, X)
        st = engine.map_reduce(
            INERTIA, X, w, params={"centers": self.cluster_centers_}
        )
        return -float(st["inertia"])

