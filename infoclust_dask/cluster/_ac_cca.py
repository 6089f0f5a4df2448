"""Associative clustering's ``init="cca"`` start (this package's choice:
Sinkkonen, Kaski, Nikkilä & Lahti 2005 optimize from a given start): the
prototypes placed where the two views depend linearly. One pass of
cross-products, CCA on the driver, K-means on each view's canonical
variates."""

from __future__ import annotations

import warnings

import numpy as np

from .. import engine
from ..kernels.stats import CROSS_GRAM, LABEL_SUMS, PROJECT
from ._kmeans import EmptyClusterWarning, KMeans

__all__ = ["cca_start", "FewRegionsWarning"]


class FewRegionsWarning(UserWarning):
    """A view of AC has fewer distinct groups of rows than its regions."""


def cca_start(X, Y, k, l_, rng, min_corr=0.05):
    """Prototypes where the views depend on each other *linearly*: K-means on
    each view's top canonical variates (CCA from one pass of cross-products,
    solved on the driver), scaled by their canonical correlations, and the
    prototypes set to the means of the resulting clusters in the original
    space (one more pass per view). Directions with correlation below
    ``min_corr`` times the largest are dropped."""
    st = engine.map_reduce(CROSS_GRAM, X, Y)
    n = float(st["n"])
    mx, my = st["sx"] / n, st["sy"] / n
    cxx = st["xtx"] / n - np.outer(mx, mx)
    cyy = st["yty"] / n - np.outer(my, my)
    cxy = st["xty"] / n - np.outer(mx, my)

    def inv_sqrt(c):
        vals, vecs = np.linalg.eigh((c + c.T) / 2)
        vals = np.maximum(vals, 1e-9 * max(vals.max(), 1e-300))
        return (vecs / np.sqrt(vals)) @ vecs.T

    wx, wy = inv_sqrt(cxx), inv_sqrt(cyy)
    u, s, vt = np.linalg.svd(wx @ cxy @ wy)
    r = max(1, min(int(np.sum(s >= min_corr * s[0])), max(k, l_) - 1, len(s)))
    out = []
    for V, mean, W, m in ((X, mx, wx @ u[:, :r] * s[:r], k), (Y, my, wy @ vt[:r].T * s[:r], l_)):
        Z = engine.map_blocks(PROJECT, V, params={"mean": mean, "W": W}, trailing_shape=(r,))
        with warnings.catch_warnings(record=True) as caught:  # said below in AC's words
            warnings.simplefilter("always", EmptyClusterWarning)
            km = KMeans(m, random_state=int(rng.integers(2**31))).fit(Z)
        lab = km.labels_ if engine.is_lazy(Z) else km.predict(Z)
        st2 = engine.map_reduce(LABEL_SUMS, V, lab, params={"k": m})
        centers = st2["s"] / np.maximum(st2["n"], 1.0)[:, None]
        empty = st2["n"] == 0
        centers[empty] = mean  # an empty cluster restarts at the mean
        if empty.any() or any(issubclass(w.category, EmptyClusterWarning) for w in caught):
            view, letter = ("x", "K") if V is X else ("y", "L")
            used = int(np.sum(~empty)) if empty.any() else "fewer"
            warnings.warn(FewRegionsWarning(
                f"AssociativeClustering: the {view} view's canonical variates hold {used} distinct groups of rows, "
                f"fewer than its {letter}={m} regions (e.g. a view of class labels); the extra prototypes start at "
                f"the view's mean and may stay empty. Use fewer regions for that view, e.g. n_clusters=(K, L)."),
                stacklevel=4)
        out.append(centers)
    return out[0], out[1]
