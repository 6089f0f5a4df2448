"""Discriminative clustering's held-out choice of the width sigma (and of
the regularization strength lambda): the unsmoothed posterior (9) of Kaski,
Sinkkonen & Klami (2005, §3.1) on held-out rows, over several hashed splits,
decided by the one-standard-error rule, on data put on a fixed grid so that
the choice does not follow the last bits of the arithmetic."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import engine
from .._support.progress import Steps, say
from ..kernels.dc import DC_HARD_COUNTS
from ..kernels.stats import ON_GRID, on_grid
from ..objectives import dc as obj
from ..solvers import optimize


def hard_counts(X: Any, c: Any, centers: np.ndarray, n_classes: int, subset: Any = None) -> np.ndarray:
    """The contingency table of Voronoi regions x classes (eq. (9)'s counts) in one pass."""
    return engine.map_reduce(
        DC_HARD_COUNTS, X, c, params={"centers": centers, "n_classes": n_classes, "subset": subset})["counts"]


def width_search(optimize_from: Callable[..., tuple[np.ndarray, int]], X: Any, c: Any, m0: np.ndarray,
                 sigmas: list, lams: list, *, n_classes: int, prior: Any, per_area: int, validation_fraction: float,
                 n_splits: int, rng: np.random.Generator, info: Any, verbose: int = 0
                 ) -> tuple[float, float, dict]:
    """The width (and strength) chosen on held-out rows by the unsmoothed posterior (9) (paper §3.1),
    per validation row, over ``n_splits`` hashed splits, by the one-standard-error rule preferring the
    larger width (then the smaller lambda) and a width at which the optimizer moved
    (:func:`infoclust_dask.solvers.optimize.repeated_held_out_search`).

    ``optimize_from(X, c, centers, sigma, lam, subset) -> (centers, iterations)`` is the fit's optimizer
    (the objective (10) by conjugate gradients, or the other optimizers) on the rows ``subset`` selects;
    ``per_area`` is lambda's power of length (2 for the MoG and VQ regularizers, 0 otherwise). Returns
    ``(sigma, lam, table)``: the choice and, per candidate ``(sigma, lam)``, the held-out scores
    (``mean``, ``spread``, ``moved``) - the caller keeps them; nothing here reads or writes the estimator.

    The fits are chaotic: a difference in the last bit of the data grows to a different held-out score
    within about 100 CG evaluations (``benchmarks/dc_width.py``). So the search runs on the data
    standardized by its mean and overall spread and rounded to a fixed grid
    (:func:`infoclust_dask.kernels.stats.on_grid`), the candidates in the same units: data that differ
    by a change of units, an offset or a rounding below about 1e-6 of the spread give the same choice."""
    scale = float(np.sqrt(np.sum(info.var)))
    mean = np.asarray(info.mean, dtype=np.float64)
    Xg = engine.map_blocks(ON_GRID, X, params={"mean": mean, "scale": scale}, trailing_shape=(info.d,))
    m0g = on_grid(m0, mean=mean, scale=scale)

    def unit(value, power):
        return float(np.float32(value * scale ** power))  # float32: the ratio's last bits do not matter

    splits = [optimize.hashed_split(rng, validation_fraction) for _ in range(n_splits)]

    def fit_on_train(cand, split):
        centers, n_iter = optimize_from(Xg, c, m0g, cand[0], cand[1], split[0])
        return centers, n_iter > 0 and not np.array_equal(centers, m0g)

    def valid_score(m, split):
        counts = hard_counts(Xg, c, m, n_classes, split[1])
        return obj.log_posterior(counts, prior) / max(float(np.sum(counts)), 1.0)

    cands = [(unit(s, -1), unit(lam, per_area), i, j) for i, s in enumerate(sigmas) for j, lam in enumerate(lams)]
    with Steps(verbose, len(cands) * len(splits), "DC: width search", unit="fit") as bar:

        seen: list = []

        def progress(step):
            s, lam = sigmas[step["candidate"][2]], lams[step["candidate"][3]]
            bar.update(1, sigma=f"{s:.3g}", score=f"{step['score']:.5g}")
            seen.append(step["score"])
            if verbose and step["split"] == len(splits) - 1:  # one line per candidate
                say(f"[DC] sigma {s:.4g} lambda={lam:.4g}: held-out log posterior (9) per row "
                    f"{np.mean(seen[-len(splits):]):.6g} (mean of {len(splits)} splits)")

        choice, on_grid_table = optimize.repeated_held_out_search(
            cands, splits, fit_on_train, valid_score, smoother=lambda cand: (cand[0], -cand[1]),
            callback=progress)
    table = {(sigmas[i], lams[j]): v for (_, _, i, j), v in on_grid_table.items()}
    return sigmas[choice[2]], lams[choice[3]], table
