"""Bootstrap reliability of associative clustering's cross clusters.

The paper's Fig. 1 caption: the most surprising cross clusters are reported
with how reliably they recur when the data are resampled. Here a
*replicate* refits :class:`~infoclust_dask.AssociativeClustering` (same
parameters) on a bootstrap resample of the pairs, matches its clusters to a
reference fit (Hungarian assignment on squared prototype distances, per
view), tabulates the *original* pairs under the matched replicate
partitions, and marks the cells that are significantly over- or
under-represented (hypergeometric tail probability below ``alpha``). A
cell's reliability is the fraction of replicates in which it is surprising
in the same direction as in the reference.

Why the bootstrap: the tail probabilities of a table whose partitions were
*fitted* to make it surprising are not valid p-values (selection bias):
fitted to two independent views, AC still shows cells with p < 0.01 in its
own training table. Such cells do not recur across resamples (the tests
check this), while cells of a real dependency do.

Replicates refit the prototypes at the reference's *chosen* widths
(:func:`replicate_params`): the model selection of ``sigma="auto"`` (a
held-out search over the width grid, most of a default fit's time) is done
once, on the reference, and the bootstrap measures how reliably the
partitions at those widths recur.

Replicates are independent: :func:`bootstrap_replicate` is what a Prefect
task maps over seeds (``pipelines/bootstrap.py``); :func:`bootstrap_reliability`
runs them in a loop.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment

from . import engine
from ._inputs import open_input
from ._support.hints import DataLike, NumbersLike, SchedulerLike, Sequence

__all__ = ["match_prototypes", "bootstrap_replicate", "summarize_replicates", "bootstrap_reliability",
           "surprise_masks", "replicate_params"]


def match_prototypes(reference: NumbersLike, replicate: NumbersLike) -> tuple[np.ndarray, float]:
    """Permutation ``perm`` with ``replicate[perm[i]]`` matched to ``reference[i]``
    (minimum total squared distance), and that total."""
    ref, rep = np.asarray(reference, dtype=np.float64), np.asarray(replicate, dtype=np.float64)
    cost = ((ref[:, None, :] - rep[None, :, :]) ** 2).sum(-1)
    rows, cols = linear_sum_assignment(cost)
    perm = np.empty(len(ref), dtype=np.intp)
    perm[rows] = cols
    return perm, float(cost[rows, cols].sum())


def surprise_masks(table: NumbersLike, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Boolean (K, L) masks of cells with ``p_over < alpha`` / ``p_under < alpha``."""
    from .cluster import cross_cluster_table

    n = np.asarray(table)
    return _masks(cross_cluster_table(n), n.shape, alpha)


def _masks(cells, shape, alpha):
    over, under = np.zeros(shape, bool), np.zeros(shape, bool)
    for c in cells:
        i, j = c["x_cluster"], c["y_cluster"]
        over[i, j] = c["p_over"] < alpha
        under[i, j] = c["p_under"] < alpha
    return over, under


def _resample(a, idx):
    if engine.is_lazy(a):
        return a[idx]
    return np.asarray(a)[idx]


def bootstrap_replicate(X: DataLike, Y: DataLike, params: dict, reference: Any, seed: int, *, alpha: float = 0.01,
                        scheduler: SchedulerLike = None) -> dict:
    """One bootstrap replicate (see the module docstring).

    Parameters
    ----------
    X, Y : paired arrays (numpy, dask, xarray or store paths)
    params : dict
        Parameters of :class:`~infoclust_dask.AssociativeClustering` (the
        reference's ``get_params()`` without ``random_state``/``scheduler``).
    reference : (mx, my)
        Prototypes of the reference fit.
    seed : int
        Seeds the resample and the refit.

    Returns a JSON-ready dict: the matched table of the original pairs, the
    over/under masks, and the matching costs.
    """
    from .cluster import AssociativeClustering

    A, B = open_input(X, variable="x"), open_input(Y, variable="y")
    n = A.shape[0]
    rng = np.random.default_rng(seed)
    idx = np.sort(rng.integers(0, n, n))
    with engine.installed(scheduler, data=A):  # placed once, for the refit and the table of the original pairs
        ac = AssociativeClustering(**{**params, "random_state": int(seed)})
        ac.fit(_resample(A, idx), _resample(B, idx))  # the fit keeps small data in worker memory (engine.prepare)
        px, cx = match_prototypes(reference[0], ac.cluster_centers_x_)
        py, cy = match_prototypes(reference[1], ac.cluster_centers_y_)
        # the replicate's table with its prototypes in the reference's order (a permutation of rows and columns)
        table = ac.contingency_table(A, B)[np.ix_(px, py)]
    over, under = surprise_masks(table, alpha)
    return {"seed": int(seed), "table": table.astype(int).tolist(), "over": over.tolist(), "under": under.tolist(),
            "match_cost_x": cx, "match_cost_y": cy}


def summarize_replicates(reference_table: NumbersLike, replicates: Sequence[dict], *, alpha: float = 0.01
                         ) -> tuple[list[dict], np.ndarray]:
    """Reliability of every cell: the fraction of replicates in which it is
    surprising in the reference's direction. Returns a list of dicts (one per
    cell, most over-represented first) and the (K, L) reliability matrix."""
    from .cluster import cross_cluster_table

    ref = np.asarray(reference_table)
    ref_cells = cross_cluster_table(ref)
    ref_over, ref_under = _masks(ref_cells, ref.shape, alpha)
    over = np.mean([np.asarray(r["over"]) for r in replicates], axis=0)
    under = np.mean([np.asarray(r["under"]) for r in replicates], axis=0)
    reliability = np.where(ref_over, over, np.where(ref_under, under, np.maximum(over, under)))
    cells = []
    for c in ref_cells:
        i, j = c["x_cluster"], c["y_cluster"]
        direction = "over" if ref_over[i, j] else "under" if ref_under[i, j] else "-"
        cells.append({**c, "surprising": direction, "reliability": float(reliability[i, j]),
                      "recurs_over": float(over[i, j]), "recurs_under": float(under[i, j])})
    return cells, reliability


def replicate_params(reference: Any) -> dict:
    """The parameters of the replicates of a fitted reference
    :class:`~infoclust_dask.AssociativeClustering`: its ``get_params()``
    without ``random_state``/``scheduler``, with ``sigma`` fixed at the
    reference's ``sigma_`` (the widths ``sigma="auto"`` chose)."""
    params = {k: v for k, v in reference.get_params().items() if k not in ("random_state", "scheduler")}
    params["sigma"] = [float(v) for v in reference.sigma_]
    return params


def bootstrap_reliability(X: DataLike, Y: DataLike = None, *, n_boot: int = 20, alpha: float = 0.01,
                          random_state: int = 0, scheduler: SchedulerLike = None, **params: Any
                          ) -> tuple[Any, list[dict], np.ndarray]:
    """Fit a reference :class:`~infoclust_dask.AssociativeClustering` and
    ``n_boot`` replicates in a loop; returns ``(reference, cells, reliability)``."""
    from .cluster import AssociativeClustering

    if Y is None:
        Y = X
    with engine.installed(scheduler, data=open_input(X, variable="x")):  # placed once, for every fit
        ref = AssociativeClustering(**{**params, "random_state": random_state}).fit(X, Y)
        base = replicate_params(ref)
        seeds = np.random.default_rng(random_state).integers(0, 2**31, n_boot)
        reps = [bootstrap_replicate(X, Y, base, (ref.cluster_centers_x_, ref.cluster_centers_y_), int(s),
                                    alpha=alpha) for s in seeds]
    cells, rel = summarize_replicates(ref.contingency_, reps, alpha=alpha)
    return ref, cells, rel
