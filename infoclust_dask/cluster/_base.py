"""Pieces shared by the prototype-based estimators (Voronoi regions)."""

from __future__ import annotations

import numpy as np

from .. import engine
from ..kernels.kmeans import ASSIGN

__all__ = ["voronoi_labels"]


def voronoi_labels(X, centers, *, scheduler=None, lazy=True):
    """Nearest-prototype label of every row: a lazy dask array when ``lazy``
    (the caller's input was lazy), else computed into a numpy array."""
    labels = engine.map_blocks(ASSIGN, X, params={"centers": centers})
    return labels if lazy else np.asarray(engine.compute(labels, scheduler=scheduler))
