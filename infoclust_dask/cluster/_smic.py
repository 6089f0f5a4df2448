"""SMI-based clustering (SMIC) with LSMI model selection.

Sugiyama, Yamada, Kimura & Hachiya (2011), *On Information-Maximization
Clustering: Tuning Parameter Selection and Analytic Solution* (ICML): the class posterior is the
kernel model (6); maximizing the SMI approximation (8) gives the ``c``
principal eigenvectors of the kernel matrix of the sparse local-scaling
kernel (7); clusters follow from the assignment rule of §2.3, new points
from its out-of-sample rule; the kernel parameter ``t`` is chosen by maximal
LSMI (14) (Fig. 1).

Where the work happens:

- the ``T = max(t_candidates)`` nearest neighbours of every row are found
  ONCE on the workers (:mod:`._knn_graph`: exact, or NN-descent per cell);
  every candidate ``t`` reuses the first ``t`` columns;
- the sparse kernel and its top eigenvectors (:mod:`._smic_solve`): on the
  driver up to :data:`DRIVER_KERNEL_MAX_ROWS` rows, above as row blocks on
  the workers seen by the driver's Krylov-Schur eigensolver only through
  map-reduce products; only every candidate's labels and eigenvalues are
  kept - the chosen ``t`` is solved again at the end;
- LSMI of every candidate clustering in ONE map-reduce pass
  (:func:`infoclust_dask.metrics.lsmi_many`), on a seeded sample of
  ``lsmi_max_rows`` rows when there are more (:mod:`._smic_select`);
- ``predict`` makes two passes over the training rows per block of new rows
  (their neighbours among the training rows, then the kernel sums).
"""

from __future__ import annotations

import numbers
import time
import warnings
from pathlib import Path
from typing import Any, Self

import numpy as np
from sklearn.base import ClusterMixin
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from .. import engine
from .._inputs import check_not_constant, prepare_input
from .._support.hints import DataLike, Labels, NumbersLike, RandomStateLike, SchedulerLike, Sequence
from .._support.progress import Steps, say
from .._support.validation import ArrayLike, Interval, Options, check_random_state, param_error, validate_params
from ..kernels.knn import KNN_QUERY
from ..kernels.smic import SMIC_OOS
from ..objectives.smic import (
    NORMALIZATIONS,
    check_prior,
)
from ._base import SHARED_CONSTRAINTS, InfoclustEstimator, installs_runner, journaled, shared_parameters
from ._knn_graph import (  # noqa: F401 - the constants are read by tests and benchmarks
    CELL_SAMPLE_ROWS,
    EXACT_KNN_MAX_ROWS,
    INDEX_MAX_ROWS,
    MIN_CELLS,
    MIN_RECALL,
    ROUTE_QUANTILE,
    KnnParams,
    _neighbour_lists,
    cell_plan,
    knn_recall,
    local_scaling_affinity,
)
from ._smic_select import candidate_lsmi, choose_t
from ._smic_solve import graph_components, locality_rank, solve
from ._xarray import data_method

__all__ = ["SMIC", "local_scaling_affinity"]

#: rows of new data handled per round of ``predict`` passes
PREDICT_ROWS = 4096


#: a warning when the graph has more components than clusters and more than this fraction of the rows has no
#: positive entry in any eigenvector (a few stray points in components of their own are common and harmless)
MAX_UNCOVERED_FRACTION = 0.01
#: up to this many rows the kernel is assembled and solved in this process; above, its row blocks stay on
#: the workers and the eigensolver's products are map-reduce passes
DRIVER_KERNEL_MAX_ROWS = 200_000

@shared_parameters
class SMIC(ClusterMixin, InfoclustEstimator):
    """Squared-loss mutual information clustering (SMIC) with LSMI model selection.

    Parameters
    ----------
    n_clusters : int, default=8
        Number of clusters ``c`` (one default across the package and the CLI's ``-k``, as scikit-learn's KMeans and SpectralClustering).
    t : int or "auto", default="auto"
        Kernel parameter of (7): neighbourhood size and rank of the
        neighbour that sets the local scale. ``"auto"`` tries every value in
        ``t_candidates`` and keeps the one with the largest LSMI (Fig. 1);
        values within a relative 1e-9 of the largest are a tie, won by the
        smallest ``t`` (:func:`choose_t`).
    t_candidates : iterable of int, default=(1, ..., 10)
        The paper's ``{1, ..., 10}``. Candidates without a ``t``-th
        neighbour (``t >= n_samples``) are left out on small data, and a
        candidate whose neighbour graph has more connected components than
        ``n_clusters`` competes only when every candidate does (its extra
        components get no eigenvector: their rows would be put in cluster 0
        without evidence); ``t_excluded_`` lists those left out.
    class_prior : array-like of shape (n_clusters,), optional
        User-specified class prior ``pi`` of §2.3 (sorted ascending, as the
        paper assumes: the cluster of the largest eigenvalue gets the
        smallest prior); default uniform (4).
    kernel_normalization : {"none", "symmetric"}, default="none"
        ``"none"`` is kernel (7) exactly; ``"symmetric"`` uses
        ``D^-1/2 K D^-1/2``. The paper's Fig. 4 ARI on circle & Gaussian is
        reached only with ``"symmetric"`` (with ``"none"`` it stays near
        0.4), while on real data (digits) ``"none"`` is clearly better; see
        ``docs/RESULTS.md``.
    lsmi_n_bases : int, default=200
        Gaussian bases of LSMI (the paper's 200).
    n_folds : int, default=5
        Folds of LSMI's cross-validation of its width and regularization.
    lsmi_max_rows : int, None or "auto", default="auto"
        Above this many rows LSMI is estimated on a seeded sample of this
        many (the same rows for every candidate); None: on all rows.
        ``"auto"``: 262 144 when there is one candidate ``t`` (its LSMI only
        reports: 2e6 rows 2 s instead of 16), all rows when LSMI chooses
        ``t`` (on overlapping clusters a sample swapped close candidates,
        ``docs/BENCHMARKS.md``).
    eigen_solver : {"auto", "dense", "operator"}, default="auto"
        Where the kernel lives while its top eigenvectors are found.
        ``"dense"``: assembled in this process (LAPACK ``eigh`` up to 1500
        rows, else the Krylov-Schur method of
        :func:`infoclust_dask.objectives.smic.operator_eigenvectors` on products with the
        assembled sparse matrix); ``"operator"``: made and kept on the
        workers as row blocks, the same Krylov-Schur method running on
        map-reduce products (this process holds only the Krylov basis);
        ``"auto"``: dense up to 200 000 rows, operator above. Both give the
        same eigenpairs and labels (tested on the same kernels).
    eigen_tol : float, default=1e-8
        The Krylov-Schur eigensolver's relative residual (ARPACK's rule,
        ``||K v - lambda v|| <= eigen_tol |lambda|``) in its single-vector
        and per-component runs; the block method (many components, nearly
        repeated eigenvalues) stops at ``min(eigen_tol, 1e-12)``: its vectors
        mix components at about the tolerance. 1e-8 ends a 2e6-row fit's
        eigensolver after 25 products instead of 37 at 1e-12, the same
        labels, eigenvalues within 1.3e-15, eigenvectors within 3e-10;
        near copies of one component may be numbered in another order.
    knn : {"auto", "exact", "approximate"}, default="auto"
        How the neighbour lists of (7) are found. ``"exact"``: every row
        block against every block, O(n^2 d) (an hour at n = 1e6 on 2
        workers, ``docs/BENCHMARKS.md``). ``"approximate"``: the rows split into the cells of a
        coarse partition (K-means centres from a seeded sample; at least 8
        cells, one per 1e6 rows; two cells whose boundary cuts through one
        cluster, so that each would index most of the other's rows, share
        one), the NN-descent graph (Dong, Charikar & Li 2011; compiled here)
        of each cell's rows and the rows of other cells near its boundary,
        answering its own rows - each row is searched once, so the time
        grows about linearly in n; its recall against exact search on 2000
        seeded rows is ``knn_recall_`` (a warning below 0.9). Each cell is
        searched in one task of ~1.5 kB a row (16 features), whose
        NN-descent rounds use the threads the other cells leave idle (the
        same graph for any number): where the clusters overlap in many
        dimensions every row's neighbours cross every boundary and the
        cells merge into one of nearly all rows (2e6 rows: ~2.9 GB in one
        task, on all the runner's threads up to the host's cores); a plan whose
        largest cell no worker can hold is refused before any search,
        naming the memory limit that would do. ``"auto"``: exact up to
        50 000 rows, approximate above.
    knn_params : dict, optional
        NN-descent settings: ``n_neighbors`` (the list each row keeps while
        the graph improves; default ``ceil(2.5 t) + 1``, and 2 more in a
        cell of 707 107 rows or more, 2 more at each doubling of that: 28
        for a cell of 1e6 rows at t = 10), ``max_candidates`` and
        ``n_iters`` (pynndescent's defaults); larger is slower and closer
        to exact (``docs/BENCHMARKS.md``: recall 0.994-0.996 on a 2e5-row
        cell of 16-dimensional Gaussian rows at 88 us a row, t = 10, one
        thread; on a 1e6-row cell 0.9906 with 26, 0.9934 with 28; 40 independent
        Gaussian features need longer lists). Cells of at most 32 768 rows
        are searched exactly.
    random_state : int, numpy Generator or None, default=None
        Seeds LSMI's basis draw and folds (the same for every candidate t),
        the eigensolver's start vector and the rows of the recall estimate.
    {shared_parameters}
    verbose : int, default=0
        1: print the time of the neighbour search and one line per
        candidate ``t`` (LSMI, eigenvalues, cluster sizes); 2: also the
        kernel and eigensolver time of every candidate as it finishes.

    Attributes
    ----------
    labels_ : ndarray of int, shape (n_samples,)
    t_ : int
        The kernel parameter used.
    t_excluded_ : list of int
        Candidates left out of the LSMI choice because their neighbour graph
        has more connected components than clusters (see ``t_candidates``).
    knn_ : str
        ``"exact"`` or ``"approximate"``: the neighbour search used.
    knn_recall_ : float
        1.0 for exact search; else the recall of the approximate lists
        against exact search on 2000 seeded rows.
    lsmi_ : dict {t: float}
        LSMI (14) of the clustering at every candidate ``t``.
    lsmi_rows_ : int
        The number of rows LSMI was computed on.
    lsmi_details_ : dict {t: LSMIResult}
        With the chosen Gaussian width, regularization and CV table.
    eigenvalues_ : ndarray, shape (n_clusters,)
        ``lambda_1 >= ... >= lambda_c`` of the (normalized) kernel.
    eigenvectors_ : ndarray, shape (n_samples, n_clusters)
        The oriented eigenvectors ``phi~_y`` (round-off zeroed), aligned
        inside (nearly) repeated eigenspaces (see Notes); for the
        ``"symmetric"`` kernel of a graph with ``n_clusters`` components,
        the components' ``D^1/2 1_q`` (normalized).
    eigen_rotation_ : ndarray, shape (n_clusters, n_clusters)
        ``eigenvectors_ = V @ eigen_rotation_`` for the eigensolver's
        orthonormal eigenvectors ``V`` (the alignment and the sign rule);
        ``predict`` extends ``V diag(1 / lambda) eigen_rotation_``.
    n_components_ : int
        Connected components of the neighbour graph at ``t_``. A warning
        when there are more than ``n_clusters`` and more than 1 % of the rows
        lie in components no eigenvector covers (their clusters are then
        arbitrary).
    local_scales_ : ndarray, shape (n_samples,)
        Local scales ``sigma_i`` of (7) (distance to the ``t``-th other sample).
    degree_ : ndarray, shape (n_samples,)
        Row sums of the un-normalized kernel.
    class_prior_ : ndarray, shape (n_clusters,)
    X_fit_ : array
        The training rows (kept by reference: numpy, or the lazy dask array
        of a store) for ``predict``.
    timings_ : dict
        Seconds spent finding neighbours (``"knn"``; ``"knn_recall"``:
        checking an approximate graph), finding the graph's connected
        components (``"components"``), ordering the rows for the kernel's
        products where the kernel is kept as row blocks (``"locality"``,
        that path only), building kernels (``"kernel"``), in
        the eigensolver (``"eigen"``), assigning (``"assign"``) and
        computing LSMI (``"lsmi"``), summed over the candidates (and the
        second solve of the chosen ``t``).
    n_features_in_ : int

    Notes
    -----
    Eigenvectors of (nearly) equal eigenvalues - relative gaps at most
    1e-6, e.g. one per connected component of a ``"symmetric"`` kernel -
    are not determined: any orthonormal basis of their span is a correct
    answer of an eigensolver, and the paper's rule, which reads the
    eigenvectors one by one, would depend on which one a given solver or
    BLAS returns. Inside such a group the basis is first aligned by the
    rotation of scikit-learn's ``cluster_qr`` (pivoted QR, then the polar
    factor; :func:`infoclust_dask.objectives.smic.align`), which gives the
    same vectors for every basis of the span; columns of simple
    eigenvalues are used as they are. The connected components of the
    neighbour graph are counted on the workers (``n_components_``). When
    there are at least ``n_clusters`` of them and the kernel is
    ``"symmetric"``, its top eigenvalue 1 is repeated once per component
    with the components' ``D^1/2 1_q`` as eigenvectors: the clusters are
    the components (with more components than clusters, the
    ``n_clusters`` largest; a warning says so) and no eigensolver runs. With kernel (7) as is, each
    component's top eigenvector is still found by the eigensolver (their
    eigenvalues differ), as the paper's rule asks.

    Conventions of the kernel and eigenvectors (a point is not its own
    neighbour, the "or" rule as an elementwise maximum, ``K_ii = 1``, zero
    local scales of duplicate points, round-off zeroing and ``sign(0) = +1``)
    are listed in :mod:`infoclust_dask.objectives.smic`.

    Examples
    --------
    >>> from infoclust_dask import SMIC
    >>> from infoclust_dask.datasets import make_smic_toy
    >>> X, y = make_smic_toy("double_spirals", random_state=0)
    >>> model = SMIC(2, random_state=0).fit(X)
    >>> model.t_ in model.lsmi_
    True
    """

    #: above this many bytes a fit runs pass by pass on a cluster, not whole on one worker (:mod:`._whole`): its few
    #: heavy passes gain more from the cluster's threads than the round trips cost (measured: docs/in-depth.md)
    _whole_fit_max_bytes = 1 << 20

    @property  # (the base class's plain True: every other estimator predicts from its saved prototypes)
    def predicts_from_saved_model(self) -> bool:  # type: ignore[override]
        """Whether this (saved and loaded) model can predict: it was fitted on
        a store, which the model file names (with the store's digest), and
        its training state (eigenvectors, degrees, local scales) was saved
        beside the model file (:func:`infoclust_dask.runs.save_model`)."""
        return hasattr(self, "eigenvectors_") or bool(getattr(self, "state_file_", None))

    def __init__(self, n_clusters: int = 8, *, t: int | str = "auto",
                 t_candidates: Sequence[int] = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10), class_prior: NumbersLike | None = None,
                 kernel_normalization: str = "none", lsmi_n_bases: int = 200, n_folds: int = 5,
                 lsmi_max_rows: int | str | None = "auto",
                 eigen_solver: str = "auto", eigen_tol: float = 1e-8, knn: str = "auto", knn_params: dict | None = None,
                 random_state: RandomStateLike = None, scheduler: SchedulerLike = None, sample_dim: str | None = None,
                 variables: Sequence[str] | None = None, verbose: int = 0):
        self.n_clusters = n_clusters
        self.t = t
        self.t_candidates = t_candidates
        self.class_prior = class_prior
        self.kernel_normalization = kernel_normalization
        self.lsmi_n_bases = lsmi_n_bases
        self.n_folds = n_folds
        self.lsmi_max_rows = lsmi_max_rows
        self.eigen_solver = eigen_solver
        self.eigen_tol = eigen_tol
        self.knn = knn
        self.knn_params = knn_params
        self.random_state = random_state
        self.scheduler = scheduler
        self.sample_dim = sample_dim
        self.variables = variables
        self.verbose = verbose

    # ------------------------------------------------------------------
    _parameter_constraints = {  # the shared ones (random_state, scheduler, sample_dim, variables, verbose) first
        **SHARED_CONSTRAINTS,
        "n_clusters": [Interval(int, 1)],
        "t": [Interval(int, 1), Options("auto")],
        "t_candidates": [ArrayLike()],
        "class_prior": [ArrayLike(), Options(None)],
        "kernel_normalization": [Options(*NORMALIZATIONS)],
        "lsmi_n_bases": [Interval(int, 1)],
        "n_folds": [Interval(int, 2)],
        "lsmi_max_rows": [Interval(int, 2), Options(None, "auto")],
        "eigen_solver": [Options("auto", "dense", "operator")],
        "eigen_tol": [Interval(float, 0, 1, closed="neither")],
        "knn": [Options("auto", "exact", "approximate")],
        "knn_params": [KnnParams()],
    }

    def _candidates(self, n):
        if self.t == "auto":
            ts = sorted({int(v) for v in self.t_candidates if isinstance(v, numbers.Integral) and int(v) >= 1})
            if not ts or len(ts) != len(set(self.t_candidates)):
                raise param_error(self, "t_candidates", "a non-empty iterable of ints >= 1", self.t_candidates)
            # small data: the candidates with a t-th neighbour (a fixed t must have one)
            ts = [t for t in ts if t < n] or ts[:1]
        else:
            ts = [int(self.t)]
        if ts[-1] >= n:
            raise ValueError(
                f"t={ts[-1]} needs at least t + 1 = {ts[-1] + 1} samples; X has {n}. Use smaller t "
                f"(t_candidates) or more data."
            )
        return ts

    def _knn_method(self, n):
        if self.knn == "exact" or (self.knn == "auto" and n <= EXACT_KNN_MAX_ROWS):
            return "exact"
        return "approximate"

    def _check_params(self, n):
        """The checks that involve the data; returns ``(t candidates, class prior)``."""
        if n < 2:
            raise ValueError(f"n_samples={n}: SMIC needs at least 2 samples (each one's nearest neighbour).")
        if self.n_clusters > n:
            raise ValueError(
                f"n_clusters={self.n_clusters} is larger than the number of samples n_samples={n}; "
                "use at most n_samples clusters."
            )
        if self.n_folds > n:
            raise ValueError(f"n_folds={self.n_folds} is larger than n_samples={n}; use n_folds <= n_samples.")
        return self._candidates(n), check_prior(self.class_prior, self.n_clusters)

    @journaled
    def fit(self, X: DataLike, y: Any = None) -> Self:
        """Cluster ``X`` (numpy, dask, xarray or store path), choosing ``t``
        by LSMI when ``t="auto"``. ``y`` is ignored."""
        validate_params(self)
        from .._inputs import is_path

        # the store a saved model reads again to predict (arrays given directly are not kept)
        self.training_store_ = _store_name(X) if is_path(X) else None
        A, info = prepare_input(self, X, reset=True, need_moments=True)
        ts, prior = self._check_params(info.n)
        check_not_constant(info, "X")
        seed = int(check_random_state(self.random_state).integers(2**31 - 1))
        timings = dict.fromkeys(("knn", "components", "kernel", "eigen", "assign", "lsmi"), 0.0)

        t0 = time.perf_counter()
        method = self._knn_method(info.n)
        if self.verbose:
            say(f"[SMIC] searching the {ts[-1]} nearest neighbours of {info.n:,} rows ({method})")
        on_workers = self.eigen_solver == "operator" or (self.eigen_solver == "auto"
                                                          and info.n > DRIVER_KERNEL_MAX_ROWS)
        plan = cell_plan(A, ts[-1], seed) if method == "approximate" else None
        d2, idx = _neighbour_lists(A, ts[-1], method, self.knn_params, progress=self.verbose >= 1,
                                   keep=on_workers, random_state=seed, plan=plan)
        timings["knn"] = time.perf_counter() - t0
        self.knn_ = method
        self.knn_recall_ = 1.0
        if method == "approximate":
            t1 = time.perf_counter()
            self.knn_recall_ = knn_recall(A, idx, random_state=seed, d2=d2, centers=plan and plan.centres)
            timings["knn_recall"] = time.perf_counter() - t1
            if self.knn_recall_ < MIN_RECALL:
                warnings.warn(
                    f"SMIC: the approximate neighbour graph has recall {self.knn_recall_:.3f} (against exact search "
                    f"on 2000 rows), below {MIN_RECALL}; raise knn_params n_neighbors (or max_candidates), or pass knn='exact'.",
                    UserWarning, stacklevel=3)
        if self.verbose:
            say(f"[SMIC] {ts[-1]} nearest neighbours of {info.n} rows ({method}): {timings['knn']:.1f} s"
                + (f", recall {self.knn_recall_:.4f}" if method == "approximate" else ""))

        # the rows' locality order for the kernel's products on the workers (the same results, faster)
        rank = None
        if on_workers:
            t1 = time.perf_counter()
            rank = locality_rank(A, seed)
            timings["locality"] = time.perf_counter() - t1
        fits = {}  # t -> (labels, eigenvalues); the eigenvectors of the chosen t are solved again below
        components = {}  # t -> (component labels, number of components) of the neighbour graph
        with Steps(self, len(ts), "SMIC: kernel + eigenvectors per t", unit="t") as bar:
            for t in ts:
                # with one candidate the neighbour lists are not needed once its kernel is made
                lists = [d2, idx] if len(ts) > 1 else [d2, idx, "release"]
                if len(ts) == 1:
                    del d2, idx
                t1 = time.perf_counter()
                components[t] = graph_components(lists[1], t)
                timings["components"] += time.perf_counter() - t1
                solution = solve(self, lists, t, prior, seed, timings, on_workers, components[t], rank)
                fits[t] = solution[:2]
                bar.update(1, t=t)

        # LSMI of every candidate clustering in ONE pass (shared bases, folds, Phi^T Phi)
        t0 = time.perf_counter()
        results, self.lsmi_rows_ = candidate_lsmi(A, np.stack([fits[t][0] for t in ts], axis=1), est=self, seed=seed,
                                                  mean=info.mean, std=np.sqrt(info.var))
        timings["lsmi"] = time.perf_counter() - t0
        self.lsmi_ = {t: r.value for t, r in zip(ts, results, strict=True)}
        self.lsmi_details_ = dict(zip(ts, results, strict=True))
        if self.verbose:
            for t, r in zip(ts, results, strict=True):
                sizes = np.bincount(fits[t][0], minlength=self.n_clusters)
                say(f"[SMIC] t={t}: {components[t][1]} connected component(s), LSMI={r.value:.4f} "
                    f"(width {r.width:g}, delta {r.delta:g}), eigenvalues "
                      f"{np.array2string(fits[t][1], precision=4)}, cluster sizes {sizes.tolist()}")
        # a t whose neighbour graph has more components than clusters leaves whole components without an
        # eigenvector (their rows go to cluster 0 without evidence): such t compete only when no other can
        covered = {t: v for t, v in self.lsmi_.items() if components[t][1] <= self.n_clusters}
        self.t_excluded_ = sorted(set(self.lsmi_) - set(covered)) if covered else []
        best = choose_t(covered or self.lsmi_)
        if best != ts[-1]:  # keeping every candidate's n x c eigenvectors would cost len(ts) times the memory
            solution = solve(self, [d2, idx, "release"], best, prior, seed, timings, on_workers,
                             components[best], rank)
        (self.labels_, self.eigenvalues_, self.eigenvectors_, self.eigen_rotation_, self.local_scales_,
         self.degree_) = solution
        self.t_ = best
        self.n_components_ = components[best][1]
        uncovered = int(np.count_nonzero(self.eigenvectors_.max(axis=1) <= 0.0))
        if self.n_components_ > self.n_clusters and uncovered > MAX_UNCOVERED_FRACTION * info.n:
            warnings.warn(
                f"SMIC: the neighbour graph at t={best} has {self.n_components_} connected components, more than "
                f"n_clusters={self.n_clusters}, and {uncovered} rows lie in components that none of the "
                f"{self.n_clusters} top eigenvectors covers: the assignment rule puts them in cluster 0 without "
                "evidence. Raise t (or t_candidates) or n_clusters.", UserWarning, stacklevel=3)
        self.class_prior_ = prior
        self.X_fit_ = A
        self.n_samples_fit_ = info.n
        self.timings_ = timings
        return self

    @installs_runner
    def run_summary(self, data: Any) -> dict:
        """Facts of a fit on a store (``data``: its Dataset) for the run's
        ``summary.json``: ``t``, LSMI per candidate, the eigenvalues, the
        stage times, the cluster sizes and, when the store has a ``label``,
        the ARI against it. (No ``held_out_score``: SMIC is not
        cross-validated; its ``t`` is chosen by LSMI.)"""
        check_is_fitted(self, "t_")
        out = {"t": self.t_, "kernel_normalization": self.kernel_normalization, "lsmi": self.lsmi_,
               "eigenvalues": self.eigenvalues_.tolist(), "timings": self.timings_,
               "cluster_sizes": np.bincount(self.labels_, minlength=self.n_clusters).tolist()}
        return out  # the agreement with the store's label: the registry adds it, as for every method

    @data_method
    def fit_predict(self, X: DataLike, y: Any = None) -> Labels:
        """Fit and return ``labels_`` (the in-sample assignment rule)."""
        return self.fit(X).labels_

    # ------------------------------------------------------------------
    def _posterior(self, X):
        """Unnormalized out-of-sample class-posterior estimates of §2.3 for
        the rows of ``X``: ``pi_y max(0, sum_i K(x', x_i) phi~_yi) /
        (lambda_y max(0, phi~_y)^T 1)`` (with ``K`` normalized like the fit's
        kernel); inside an aligned group of (nearly) repeated eigenvalues
        the extension ``K(x', .) V diag(1/lambda)`` of the eigensolver's
        vectors is rotated like them (``eigen_rotation_``). Two passes over the training rows for all new rows
        (:func:`infoclust_dask.engine.cross_pairs`: their neighbours, then the
        kernel sums), in blocks of ``PREDICT_ROWS`` new rows."""
        if hasattr(self, "t_") and not hasattr(self, "eigenvectors_"):
            raise NotFittedError(
                "This SMIC was loaded from model.json, which records the fit (t_, lsmi_, eigenvalues_) but not the "
                "training rows and eigenvectors that predict needs (it was fitted on arrays, not on a store, or "
                "saved by an older version); refit SMIC(n_clusters, t=model.t_) on the training data to predict.")
        check_is_fitted(self, "eigenvectors_")
        if not hasattr(self, "X_fit_"):  # loaded from a model file: the training rows are read from their store
            self.X_fit_ = self._training_rows()
        A, _ = prepare_input(self, X, reset=False)
        t = self.t_
        # Nystrom extension of the eigenvectors V = phi~ R^T: K(x', .) V diag(1/lambda) R = K(x', .) phi~ G
        R = self.eigen_rotation_
        phi = self.eigenvectors_ @ (R.T @ (R / self.eigenvalues_[:, None]))
        if self.kernel_normalization == "symmetric":
            phi /= np.sqrt(self.degree_)[:, None]
        denom = np.maximum(self.eigenvectors_, 0.0).sum(axis=0)
        c = self.n_clusters
        # two passes over the training rows for any number of new rows: their neighbours, then the sums
        d2q, nbr = engine.cross_pairs(KNN_QUERY, A, self.X_fit_, params={"t": t},
                                      query_rows=PREDICT_ROWS,
                                      outputs=((0, np.float64, (t,)), (1, np.int64, (t,))))
        kphi, ksum = engine.cross_pairs(SMIC_OOS, A, self.X_fit_, phi, self.local_scales_,
                                        query_inputs={"sigma_q": np.sqrt(d2q[:, t - 1]), "nbr": nbr},
                                        query_rows=PREDICT_ROWS,
                                        outputs=(("kphi", np.float64, (c,)), ("ksum", np.float64, ())))
        raw = self.class_prior_ * np.maximum(kphi, 0.0) / denom
        if self.kernel_normalization == "symmetric":
            raw = raw / np.sqrt(1.0 + ksum)[:, None]
        return raw

    def _training_rows(self):
        """The training rows of a loaded model: ``x`` of the store it names,
        refused when the store changed since the fit (its digest: group
        metadata and every array's manifest)."""
        from ..io.store import open_dataset
        from ..storage.manifest import store_digest

        store = getattr(self, "training_store_", None)
        if not store:
            raise NotFittedError("This SMIC names no training store; refit it to predict.")
        try:
            digest = store_digest(store)
        except FileNotFoundError:
            raise NotFittedError(f"The training store '{store}' of this SMIC is gone; predict reads its rows (the "
                                 "out-of-sample rule sums the kernel over them). Refit on the data you have.") from None
        if digest != getattr(self, "training_digest_", None):
            raise NotFittedError(f"The training store '{store}' changed since this SMIC was fitted (appended, "
                                 "rewritten or edited: its manifests differ), so its eigenvectors no longer match "
                                 "its rows. Refit SMIC on the store as it is now.")
        X = open_dataset(store)["x"].data
        if X.shape != (self.n_samples_fit_, self.n_features_in_):
            raise NotFittedError(f"The training store '{store}' holds {X.shape}, the fit had "
                                 f"({self.n_samples_fit_}, {self.n_features_in_}); refit SMIC.")
        return X

    @data_method
    def predict(self, X: DataLike) -> Labels:
        """Clusters of new rows by the out-of-sample rule of §2.3.

        A new row's kernel values against the training rows follow (7): its
        ``t`` nearest training rows, and the training rows it is closer to
        than their own ``t``-th neighbour. Rows linked to no training row
        with positive weight get the cluster of the largest prior (ties:
        the first). Cost: two passes over the training data for any number
        of new rows (in one graph each). For the training rows themselves use
        ``labels_`` (the in-sample rule); ``predict`` treats its input as new
        points. Lazy input gives lazy labels."""
        labels = np.argmax(self._proba(X), axis=1)
        return engine.as_lazy(labels) if engine.is_lazy(X) else labels

    @data_method
    def predict_proba(self, X: DataLike) -> Labels:
        """The clipped out-of-sample class-posterior estimates of §2.3 for the
        rows of ``X`` (treated as new points: the estimate of a row does not
        depend on which other rows come with it), normalized to sum to 1 per
        row; rows with no positive estimate get the class prior. The
        training rows' own fitted estimates are :meth:`fitted_proba`."""
        return self._proba(X)

    def fitted_proba(self) -> np.ndarray:
        """The training rows' fitted (in-sample) class-posterior estimates of
        §2.3, ``pi_y max(0, phi~_y)_i / max(0, phi~_y)^T 1`` normalized per
        row - the ones ``labels_`` is the argmax of; rows in no eigenvector's
        support get the class prior (with a warning that counts them)."""
        check_is_fitted(self, "eigenvectors_")
        V = np.maximum(self.eigenvectors_, 0.0)
        raw = self.class_prior_ * V / np.maximum(V.sum(axis=0), np.finfo(float).tiny)
        return self._normalized(raw, "training rows", stacklevel=3)

    def _proba(self, X):
        return self._normalized(self._posterior(X), "new rows", stacklevel=5)

    def _normalized(self, raw, what, stacklevel):
        tot = raw.sum(axis=1, keepdims=True)
        none = int(np.count_nonzero(tot <= 0))
        if none:
            warnings.warn(
                f"SMIC: {none} of {raw.shape[0]} {what} have no positive posterior estimate (§2.3: their kernel "
                "values against the training rows give no positive evidence for any cluster - rows far from the "
                "training data, or between clusters): predict_proba returns the class prior for them and predict "
                "the cluster of the largest prior.", UserWarning, stacklevel=stacklevel)
        prior = np.broadcast_to(self.class_prior_, raw.shape)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(tot > 0, raw / np.where(tot > 0, tot, 1.0), prior)


def _store_name(path) -> str:
    """A store path made absolute (a URL as given), as a saved model names it."""
    from ..storage.paths import is_url

    return str(path).rstrip("/") if is_url(path) else str(Path(path).resolve())
