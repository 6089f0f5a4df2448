"""``infoclust compile``: compile the numba kernels now, into numba's on-disk
cache, instead of in the first fits that need them.

numba compiles a kernel the first time a process calls it with a given
type of rows, and keeps the machine code on disk
(:mod:`infoclust_dask.kernels._cache`: ``$NUMBA_CACHE_DIR``, else
``__pycache__`` beside the kernels, else numba's user folder); later
processes load it. On this project's 2-core machine a first
DiscriminativeClustering fit of Satimage took 29-36 s, of which about 24 s
were compiling, and 16 s once compiled. Running this once after an install
(``make install`` does; a worker image's build step can) moves that cost
out of the first fits. It fits each estimator on a few thousand generated
rows in this process, float64 and float32, few and many clusters (the
paths that take matrix products), which compiles what those fits call; it
never touches a store or a scheduler.
"""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Callable

import numpy as np

__all__ = ["compile_kernels"]

#: rows of the generated data: enough that each estimator takes its compiled passes
ROWS = 4000


def _kernel_blocks(X: np.ndarray, itype: type) -> None:
    """SMIC's kernel row blocks of ``X`` (exact lists, row numbers ``itype``)
    in two blocks, ranked."""
    from infoclust_dask.kernels.knn import brute_candidates
    from infoclust_dask.kernels.smic import kernel_row_block, kernel_transpose_pieces

    n, t = X.shape[0], 5
    idx: np.ndarray = brute_candidates(X, X, t + 1)[:, 1:].astype(itype)
    d2 = ((X[:, None, :] - X[idx]) ** 2).sum(axis=2)
    sigma, bounds, rank = np.sqrt(d2[:, -1]), np.array([0, n // 2, n]), np.arange(n)[::-1].copy()
    pieces = [kernel_transpose_pieces(d2[a:b], idx[a:b], start=a, t=t, sigma=sigma, bounds=bounds)
              for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    for s, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        kernel_row_block(d2[a:b], idx[a:b], [p[s] for p in pieces], start=a, t=t, sigma=sigma, n=n, rank=rank)


def _fits(X: np.ndarray, y: np.ndarray) -> list[tuple[str, Callable[[], object]]]:
    """The fits whose passes compile the kernels, on rows ``X`` and labels ``y``."""
    import infoclust_dask as ic
    from infoclust_dask.kernels import nn_descent

    def here(cls, *args, **params):  # in this process, even where $DASK_SCHEDULER_ADDRESS names a cluster
        return cls(*args, random_state=0, scheduler="threads", **params)

    Y = np.ascontiguousarray(X[:, ::-1])
    binary = (X > 0).astype(X.dtype)
    return [
        ("KMeans", lambda: here(ic.KMeans, 3).fit(X)),
        ("KMeans, 20 clusters", lambda: here(ic.KMeans, 20).fit(X)),
        ("SoftKMeans", lambda: here(ic.SoftKMeans, 3).fit(X)),
        ("SoftKMeans, 20 clusters", lambda: here(ic.SoftKMeans, 20).fit(X)),
        ("DiscriminativeClustering", lambda: here(ic.DiscriminativeClustering, 3, sigma=1.0).fit(X, y)),
        ("DiscriminativeClustering, 20 clusters",
         lambda: here(ic.DiscriminativeClustering, 20, sigma=1.0).fit(X, y)),
        ("AssociativeClustering", lambda: here(ic.AssociativeClustering, (3, 3), sigma=(1.0, 1.0)).fit(X, Y)),
        ("CMBC", lambda: here(ic.CMBC, 2).fit(binary, known=y)),
        ("SMIC", lambda: here(ic.SMIC, 3, t=5).fit(X[:1000])),
        # the kernel as row blocks (kernels/_kernel_loops.py), as on a cluster above DRIVER_KERNEL_MAX_ROWS rows
        ("SMIC, kernel row blocks", lambda: here(ic.SMIC, 3, t=5, eigen_solver="operator").fit(X[:1000])),
        ("SMIC's kernel row blocks, int32 lists (the cells' search)", lambda: _kernel_blocks(X[:1000], np.int32)),
        # SMIC's cells above 32 768 rows: its NN-descent graph (float32 whatever the rows)
        ("SMIC's NN-descent graph", lambda: nn_descent(X, 26, seed=0)),
    ]


def compile_kernels(verbose: bool = True) -> dict:
    """Fit every estimator once on generated rows of each dtype and width so
    that numba compiles (and caches, where it can) the kernels their passes
    call. Returns what was done: seconds per fit and in all, and whether
    numba could keep the code (``cached``: without a writable cache folder
    each process compiles again, and this command helps nothing)."""
    from ..kernels import can_cache

    rng = np.random.default_rng(0)
    done, start = [], time.perf_counter()
    for dtype in (np.float64, np.float32):
        for d in (8, 40):  # narrow rows are transposed into tiles, wide ones read as they are
            X = rng.normal(size=(ROWS, d)).astype(dtype)
            y = rng.integers(0, 3, ROWS)
            for name, fit in _fits(X, y):
                t = time.perf_counter()
                with warnings.catch_warnings():  # random rows: convergence and degeneracy notes are expected
                    warnings.simplefilter("ignore")
                    fit()
                done.append({"fit": name, "dtype": np.dtype(dtype).name, "features": d,
                             "seconds": round(time.perf_counter() - t, 2)})
                if verbose:
                    print(f"compiled: {name}, {np.dtype(dtype).name}, {d} features "
                          f"({done[-1]['seconds']:.1f} s)", file=sys.stderr, flush=True)
    return {"cached": can_cache(), "seconds": round(time.perf_counter() - start, 1), "fits": done}
