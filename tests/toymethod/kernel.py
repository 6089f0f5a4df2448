"""The toy method's kernels: one row block at a time, numpy only (no dask),
as the package's kernels are."""

import numpy as np

from infoclust_dask.extend import Pass, sq_distances


def step_stats(x, *, centers):
    """Per-centre sums and counts of the rows nearest to each centre, and
    their squared distances: exact to add across blocks."""
    x = np.asarray(x, dtype=np.float64)
    d2 = sq_distances(x, centers)
    near = np.argmin(d2, axis=1)
    k = centers.shape[0]
    sums = np.zeros((k, x.shape[1]))
    np.add.at(sums, near, x)
    return {"sums": sums, "counts": np.bincount(near, minlength=k).astype(np.float64),
            "d2": float(d2[np.arange(x.shape[0]), near].sum()), "n": float(x.shape[0])}


def nearest(x, *, centers):
    return np.argmin(sq_distances(np.asarray(x, dtype=np.float64), centers), axis=1)


#: one reduce pass: the statistics of one Lloyd step
STEP_STATS = Pass("toy_step_stats", step_stats)
#: one map pass: the nearest centre of every row
NEAREST = Pass("toy_nearest", nearest, kind="map", dtype=np.int64)
