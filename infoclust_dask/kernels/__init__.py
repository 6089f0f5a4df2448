"""Block kernels (layer 1): functions on ONE row block, one module per
method, each pass declared once next to its kernel as a
:class:`~infoclust_dask.kernels._common.Pass`. The hot formulas are
compiled loops (``_loops``: numba, argument checks in ``_compiled``) that
the method modules call with no other path (Lloyd's step and the moments
also have a numpy form, ``_numpy_forms``, for passes over tiny data:
:func:`~infoclust_dask.kernels._compiled.numpy_form`); the rest is numpy.

=================  ==========================================================
``_compiled``      argument checks and shapes of the compiled loops
``_loops``         the compiled loops (memberships, E-steps, moments) and
                   their shared tile helpers (distances, softmax, exp)
``_lloyd_loops``   Lloyd's assignment (exact differences; products for
                   many centres)
``_numpy_forms``   Lloyd's step and the moments in numpy, for passes over
                   tiny data (numba not loaded)
``_common``        the Pass blueprint, combines, sub-blocks, squared
                   distances, the one stable softmax, row hashes and the
                   train/validation subset rule
``stats``          moments, Gram, cross-Gram, label sums, projections, folds
``kmeans``         Lloyd, soft K-means, k-means++ / k-means|| seeding
``dc``             discriminative clustering (counts, gradient, hard counts,
                   regularizers, on-line algorithm)
``mixture``        isotropic Gaussian mixtures (MoG, MDA2)
``ac``             associative clustering
``knn``            k nearest neighbours, block against block
``smic``           SMIC's kernel values, out-of-sample sums and LSMI
``cmbc``           CMBC's pattern counts and annealed E-step sums
=================  ==========================================================

Nothing here imports dask; :mod:`infoclust_dask.engine` runs the passes.
"""

# the kernels' face to the layers above (the engine runs passes; the estimators ask which path ran); the
# underscore modules are this package's own
from typing import Any

from ._cache import can_cache
from ._common import Pass, run_chunk, run_fold_step, sq_distances
from ._compiled import light_process, lloyd_choice, lloyd_paths, numpy_form, numpy_form_fits

__all__ = ["Pass", "run_chunk", "run_fold_step", "sq_distances", "light_process", "lloyd_choice", "lloyd_paths",
           "numpy_form", "numpy_form_fits", "can_cache", "nn_descent"]


def nn_descent(x: Any, n_neighbors: int, **settings: Any) -> Any:
    """SMIC's NN-descent graph of the rows ``x``
    (:func:`infoclust_dask.kernels._nn_descent.nn_descent`, imported on
    first use: numba compiles or loads it then)."""
    from ._nn_descent import nn_descent as graph

    return graph(x, n_neighbors, **settings)
