"""Evaluation measures. ARI/NMI are scikit-learn's definitions; this module
adds :func:`agreement` (both from one counted table, for tens of millions
of labels), the contingency table of two labelings (hard counts) and the discriminative
clustering log posterior (Kaski et al. 2005, eq. 9), and least-squares
mutual information (LSMI, Sugiyama et al. §2.4) as a map-reduce pass."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import engine
from ._support.hints import DataLike, NumbersLike, RandomStateLike, SchedulerLike

__all__ = ["agreement", "contingency_table", "dc_log_posterior", "kmeans_heldout_loglik", "lsmi", "lsmi_many", "nmi_paper",
           "quantization_error"]


def contingency_table(labels: NumbersLike, c: NumbersLike, *, n_clusters: int | None = None,
                      n_classes: int | None = None) -> np.ndarray:
    """Counts ``n[j, i]`` of samples in cluster ``j`` with class ``i``.

    Parameters
    ----------
    labels : array-like of int, shape (n_samples,)
        Cluster indices in ``[0, n_clusters)``.
    c : array-like of int, shape (n_samples,)
        Class indices in ``[0, n_classes)``.
    n_clusters, n_classes : int, optional
        Table size; default one more than the largest index seen.

    Returns
    -------
    ndarray of int64, shape (n_clusters, n_classes)
    """
    labels = np.asarray(labels)
    c = np.asarray(c)
    if labels.shape != c.shape or labels.ndim != 1:
        raise ValueError(f"labels and c must be 1-D of equal length; got shapes {labels.shape} and {c.shape}.")
    for name, a in (("labels", labels), ("c", c)):
        if a.size and (not np.issubdtype(a.dtype, np.integer) or a.min() < 0):
            raise ValueError(f"{name} must hold non-negative integers; got dtype {a.dtype}, min {a.min()}.")
    k = int(n_clusters if n_clusters is not None else (labels.max() + 1 if labels.size else 0))
    m = int(n_classes if n_classes is not None else (c.max() + 1 if c.size else 0))
    if labels.size and labels.max() >= k:
        raise ValueError(f"labels has value {labels.max()} >= n_clusters={k}.")
    if c.size and c.max() >= m:
        raise ValueError(f"c has value {c.max()} >= n_classes={m}.")
    return np.bincount(labels * m + c, minlength=k * m).reshape(k, m).astype(np.int64)


def agreement(truth: NumbersLike, pred: NumbersLike) -> dict:
    """``{"ari": ..., "nmi": ...}`` of two labelings: scikit-learn's
    ``adjusted_rand_score`` and ``normalized_mutual_info_score``
    (arithmetic normalization; Hubert & Arabie 1985, Vinh et al. 2010),
    computed from one contingency table counted by ``np.bincount`` instead
    of two sorts of the labels: 5e7 labels in ~1 s instead of ~17 s. Labels
    that are not small non-negative integers are first numbered by
    ``np.unique``. Same values as scikit-learn's (the tests: 1e-12), without
    importing ``sklearn.metrics`` (50 ms of a CLI run)."""
    codes = []
    for a in (np.asarray(truth).ravel(), np.asarray(pred).ravel()):
        small = a.size and np.issubdtype(a.dtype, np.integer) and a.min() >= 0 and a.max() < 2**20
        codes.append(a.astype(np.int64, copy=False) if small or not a.size else np.unique(a, return_inverse=True)[1])
    t, p = codes
    if t.shape != p.shape:
        raise ValueError(f"truth and pred must have the same length; got {t.shape[0]} and {p.shape[0]}.")
    n = int(t.size)
    if n == 0:
        return {"ari": 1.0, "nmi": 1.0}
    table = contingency_table(t, p)
    table = table[table.sum(1) > 0][:, table.sum(0) > 0]  # labels that occur (scikit-learn's table)
    rows, cols = table.sum(1), table.sum(0)
    # ARI from the pair confusion matrix, in Python integers (no overflow at 5e7 labels)
    big = table.astype(object)  # Python integers
    sq = int((big ** 2).sum())
    tp = sq - n
    fp = int((big @ cols.astype(object)).sum()) - sq
    fn = int((big.T @ rows.astype(object)).sum()) - sq
    tn = n * n - fp - fn - sq
    ari = 1.0 if fn == 0 and fp == 0 else 2.0 * (tp * tn - fn * fp) / ((tp + fn) * (fn + tn) + (tp + fp) * (fp + tn))
    if table.shape[0] == table.shape[1] == 1:
        return {"ari": float(ari), "nmi": 1.0}
    nz = table > 0  # mutual information of the table, as scikit-learn's mutual_info_score computes it
    nij = table[nz].astype(np.float64)
    outer = np.outer(rows, cols).astype(np.float64)[nz]
    mi = max(float((nij / n * (np.log(nij) + np.log(float(n)) - np.log(outer))).sum()), 0.0)

    def entropy(counts):
        q = counts[counts > 0] / n
        return float(-(q * np.log(q)).sum())

    nmi = 0.0 if mi == 0 else mi / max(0.5 * (entropy(rows) + entropy(cols)), np.finfo(np.float64).eps)
    return {"ari": float(ari), "nmi": float(nmi)}


def dc_log_posterior(labels: NumbersLike, c: NumbersLike, *, n_clusters: int, n_classes: int | None = None,
                     prior: float = 1.0, normalized: bool = False) -> float:
    """The DC evaluation measure (9) of a hard partition.

    ``sum_ij lgamma(n0_i + n_ji) - sum_j lgamma(N0 + N_j)`` where ``n_ji`` is
    the number of samples of class i in cluster j (no constants: this is what
    Table 1 of the paper reports, negated and summed over a held-out fold).
    With ``normalized=True`` the Dirichlet-multinomial constants
    ``sum_j [lgamma(N0) - sum_i lgamma(n0_i)]`` are added, making it the log
    marginal likelihood of the classes given the partition (8).

    Parameters
    ----------
    labels : array-like of int, shape (n_samples,)
    c : array-like of int, shape (n_samples,)
    n_clusters : int
    n_classes : int, optional
        Default: one more than the largest class index.
    prior : float or array of shape (n_classes,), default=1.0
        Dirichlet parameters ``n_i^0``.
    normalized : bool, default=False
    """
    from .objectives.dc import log_posterior, log_posterior_constant

    counts = contingency_table(labels, c, n_clusters=n_clusters, n_classes=n_classes)
    value = log_posterior(counts, prior)
    if normalized:
        value += log_posterior_constant(counts.shape[0], prior, counts.shape[1])
    return value


def nmi_paper(C: NumbersLike, L: NumbersLike) -> float:
    """NMI as Gondek, Vaithyanathan & Garg (2005, §6) define it: ``I(C; L) /
    H(L)``, the share of the true labelling ``L``'s entropy that the
    clustering ``C`` captures (0: none, 1: ``C`` determines ``L``); natural
    logs, plug-in probabilities from the contingency table.

    It differs from scikit-learn's ``normalized_mutual_info_score``, which
    divides by the arithmetic mean of ``H(C)`` and ``H(L)``: this one is not
    symmetric, and a clustering finer than ``L`` (``H(C) > H(L)``) still
    scores 1 here but less than 1 there. For two balanced 2-way partitions
    the two agree. A constant ``L`` (``H(L) = 0``) gives 0.
    """
    n = contingency_table(np.asarray(C), np.asarray(L)).astype(np.float64)
    N = n.sum()
    p = n / N
    pc, pl = p.sum(axis=1), p.sum(axis=0)
    nz = p > 0
    mi = float(np.sum(p[nz] * np.log(p[nz] / np.outer(pc, pl)[nz])))
    hl = float(-np.sum(pl[pl > 0] * np.log(pl[pl > 0])))
    return mi / hl if hl > 0 else 0.0


@engine.entry_point
def quantization_error(X: DataLike, centers: NumbersLike, *, scheduler: SchedulerLike = None) -> float:
    """Mean squared distance of the rows of ``X`` to their nearest centre
    (the K-means cost per sample), as one map-reduce pass."""
    from ._inputs import open_input
    from .kernels.kmeans import INERTIA

    X = open_input(X)
    centers = np.asarray(centers, dtype=np.float64)
    st = engine.map_reduce(INERTIA, X, None, params={"centers": centers})
    n = engine.n_rows(X)
    return float(st["inertia"]) / max(n, 1)


@engine.entry_point
def kmeans_heldout_loglik(X: DataLike, centers: NumbersLike, sizes: NumbersLike, inertia: float, *,
                          scheduler: SchedulerLike = None) -> float:
    """Mean log-likelihood per row of ``X`` (held-out rows) under the
    spherical Gaussian mixture that a K-means fit on the training rows
    defines: weights ``sizes / sum(sizes)``, means ``centers`` and one common
    variance ``inertia / (sum(sizes) d)`` (the maximum-likelihood variance of
    the hard partition). The criterion for choosing the number of clusters:
    unlike the held-out K-means cost, which keeps falling as clusters are
    added, it stops rising once a true cluster is split (the variance no
    longer drops enough to pay for the spread of the weights). One pass.
    """
    from ._inputs import open_input
    from .kernels.mixture import MIXTURE_EM

    X = open_input(X)
    centers = np.asarray(centers, dtype=np.float64)
    sizes = np.asarray(sizes, dtype=np.float64)
    k, d = centers.shape
    var = max(float(inertia) / (sizes.sum() * d), np.finfo(float).tiny)
    with np.errstate(divide="ignore"):
        log_w = np.log(sizes / sizes.sum())
    st = engine.map_reduce(MIXTURE_EM, X, None, params={"means": centers, "variances": np.full(k, var),
                                                       "log_weights": log_w})
    return float(st["loglik"]) / max(engine.n_rows(X), 1)


@engine.entry_point
def lsmi(X: DataLike, labels: DataLike, *, n_classes: int | None = None, n_bases: int = 200,
         widths: NumbersLike | None = None, deltas: NumbersLike | None = None, n_folds: int = 5,
         random_state: RandomStateLike = None, standardize: bool = True, mean: NumbersLike | None = None,
         std: NumbersLike | None = None, scheduler: SchedulerLike = None, return_details: bool = False) -> Any:
    """Least-squares mutual information between the rows of ``X`` and their
    discrete ``labels``: LSMI (14) of Sugiyama et al., §2.4.

    The density ratio (9) is fitted class by class with Gaussian bases (11)
    centred at ``n_bases`` rows drawn at random (each basis serves the class
    of its row, (10)); width and regularization are chosen by ``n_folds``-fold
    cross-validation of the hold-out error of §2.4 over ``widths`` x
    ``deltas`` (default the paper's grids
    :data:`~infoclust_dask.objectives.lsmi.WIDTHS` and
    :data:`~infoclust_dask.objectives.lsmi.DELTAS`, in units of the
    standardized features). All sums over samples (``H``, ``h`` for every
    fold and width) come from ONE map-reduce pass over the row blocks.

    Parameters
    ----------
    X : array-like, dask array, xarray or store path, shape (n, d)
    labels : array-like of int, shape (n,)
        Classes ``0 .. n_classes-1`` (e.g. cluster assignments).
    n_classes : int, optional
        Default ``labels.max() + 1``.
    n_bases : int, default=200
        At most this many Gaussian bases (all rows when ``n`` is smaller).
    widths, deltas : sequence of float, optional
    n_folds : int, default=5
        Folds are assigned by a hash of the row number (reproducible, about
        equal sizes, independent of the chunking).
    random_state : int, optional
        Seed of the basis draw and the folds.
    standardize : bool, default=True
        Scale every feature to zero mean and unit variance first (one more
        pass unless ``mean`` and ``std`` are given); constant features keep
        scale 1.
    scheduler : see :mod:`infoclust_dask.engine`.
    return_details : bool, default=False
        Return the :class:`~infoclust_dask.objectives.lsmi.LSMIResult`
        (value, chosen width and delta, CV table) instead of the float.

    Returns
    -------
    float or LSMIResult
        Near 0 for labels independent of ``X``; ``(c - 1) / 2`` for ``c``
        equiprobable classes that ``X`` determines (the SMI (1) of a
        deterministic labelling).
    """

    lab = np.asarray(engine.compute(labels))
    if lab.ndim != 1:
        raise ValueError(f"labels must be a vector (one entry per row of X); got shape {lab.shape}.")
    result = lsmi_many(X, lab[:, None], n_classes=n_classes, n_bases=n_bases, widths=widths, deltas=deltas,
                       n_folds=n_folds, random_state=random_state, standardize=standardize, mean=mean, std=std)[0]
    return result if return_details else result.value


@engine.entry_point
def lsmi_many(X: DataLike, labels: DataLike, *, n_classes: int | None = None, n_bases: int = 200,
              widths: NumbersLike | None = None, deltas: NumbersLike | None = None, n_folds: int = 5,
              random_state: RandomStateLike = None, standardize: bool = True, mean: NumbersLike | None = None,
              std: NumbersLike | None = None, scheduler: SchedulerLike = None, progress: bool = False) -> list:
    """:func:`lsmi` of several labelings of the same rows (``labels`` of shape
    ``(n, L)``) with ONE pass over ``X``: the bases, folds and the
    label-independent sums ``Phi^T Phi`` are shared, only the per-class sums
    differ. Returns a list of ``L``
    :class:`~infoclust_dask.objectives.lsmi.LSMIResult`. ``progress`` shows
    a bar of the pass's tasks on stderr."""
    from threadpoolctl import threadpool_limits

    from ._inputs import open_input
    from .kernels.smic import LSMI
    from .objectives.lsmi import DELTAS, WIDTHS, select

    A = open_input(X)
    if A.ndim != 2:
        raise ValueError(f"X must be 2-D (samples x features); got shape {A.shape}.")
    n = int(A.shape[0])
    lab = np.asarray(labels)
    if lab.ndim != 2 or lab.shape[0] != n:
        raise ValueError(f"labels must have one entry per row of X ({n}); got shape {lab.shape[:1]}.")
    if not np.issubdtype(lab.dtype, np.integer):
        if not np.all(np.isfinite(lab)) or np.any(lab != np.round(lab)):
            raise ValueError("labels must be integers 0 .. n_classes-1; got non-integer values.")
        lab = lab.astype(np.int64)
    c = int(lab.max()) + 1 if n_classes is None else int(n_classes)
    if lab.min() < 0 or lab.max() >= c:
        raise ValueError(f"labels must lie in 0 .. {c - 1}; got values from {lab.min()} to {lab.max()}.")
    if n_folds < 2 or n < n_folds:
        raise ValueError(f"n_folds must be between 2 and the number of rows ({n}); got {n_folds}.")
    widths = tuple(WIDTHS if widths is None else widths)
    deltas = tuple(DELTAS if deltas is None else deltas)
    if standardize:
        if mean is None or std is None:
            from .preprocess import feature_moments

            mean, std, _, n_bad = feature_moments(A)
            if n_bad:
                raise ValueError(f"X contains {n_bad} NaN or infinite values; drop or impute them first.")
        std = np.where(np.asarray(std) > 0, std, 1.0)
    else:
        mean, std = np.zeros(A.shape[1]), np.ones(A.shape[1])
    rng = np.random.default_rng(random_state)
    b = min(int(n_bases), n)
    pick = np.sort(rng.choice(n, size=b, replace=False))
    rows = engine.rows_at(A, pick)
    centers = (np.asarray(rows, dtype=np.float64) - mean) / std
    seed = int(rng.integers(2**31))
    if c <= np.iinfo(np.int16).max:
        lab = lab.astype(np.int16)  # keep the labels small
    # for dask rows the labels go to the workers block by block, in the rows' blocks (scattered on a cluster),
    # not inside the pass's graph: 19 MiB of labels in the graph of a 1e7-row fit made distributed warn
    # "Sending large graph" and travel with every task's description
    lab_in = engine.persist(lab, chunk_rows=int(A.chunks[0][0])) if engine.is_lazy(A) and n else lab
    stats = engine.map_reduce(
        LSMI, A, lab_in,
        params={"centers": centers, "widths": widths, "n_classes": c, "n_folds": int(n_folds), "seed": seed,
                "shift": np.asarray(mean, dtype=np.float64), "scale": np.asarray(std, dtype=np.float64)}, progress=progress,
    )
    # many small eigh / einsum calls: one BLAS thread is faster, and far
    # faster when other processes share the cores
    with threadpool_limits(1, user_api="blas"):
        return [select({"G": stats["G"], "S": stats["S"][k], "count": stats["count"][k]}, lab[pick, k], widths,
                       deltas) for k in range(lab.shape[1])]
