"""Evaluation measures. ARI/NMI are scikit-learn's; this module adds the
contingency table of two labelings (hard counts) and the discriminative
clustering log posterior (Kaski et al. 2005, eq. 9)."""

from __future__ import annotations

import numpy as np

__all__ = ["contingency_table", "dc_log_posterior", "quantization_error"]


def contingency_table(labels, c, *, n_clusters=None, n_classes=None):
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


def dc_log_posterior(labels, c, *, n_clusters, n_classes=None, prior=1.0, normalized=False):
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


def quantization_error(X, centers, *, scheduler=None):
    """Mean squared distance of the rows of ``X`` to their nearest centre
    (the K-means cost per sample), as one map-reduce pass."""
    from . import engine
    from ._kernels import inertia_stats

    centers = np.asarray(centers, dtype=np.float64)
    st = engine.map_reduce(inertia_stats, X, None, params={"centers": centers}, scheduler=scheduler)
    n = engine.n_rows(engine.as_array(X))
    return float(st["inertia"]) / max(n, 1)
