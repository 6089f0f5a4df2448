"""Discriminative clustering's stochastic on-line algorithm (Kaski,
Sinkkonen & Klami 2005, eq. (5)-(6)): ``optimizer="online"`` streams it over
the blocks of the data for a number of epochs; ``partial_fit`` runs it once
over each batch it is given."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import engine
from .._support.progress import say
from ..kernels.dc import DC_HARD_COUNTS, DC_ONLINE, online_dc_block
from ..objectives import dc as obj
from ..solvers import optimize

__all__ = ["online_fit", "online_update"]


def online_fit(est: Any, X: Any, c: Any, centers: np.ndarray, sigma: float, n_classes: int, subset: Any,
               rng: np.random.Generator) -> tuple:
    """The stochastic on-line algorithm (5)-(6), streamed block by block
    (:func:`infoclust_dask.engine.fold_blocks`), blocks in a new random
    order every epoch; ``max_iter`` epochs, the step decreasing linearly to 0
    over them. (9) is recorded per epoch. Returns ``(centers, history,
    epochs, True)``."""
    epochs = est._steps()
    n = int(engine.map_reduce(DC_HARD_COUNTS, X, c, params={"centers": centers[:1], "n_classes": n_classes,
                                                            "subset": subset})["counts"].sum())
    nb = engine.n_blocks(X)

    def run_epoch(state, _):
        return engine.fold_blocks(
            DC_ONLINE, X, c, state=state, order=rng.permutation(nb),
            params={"sigma": sigma, "alpha0": est.learning_rate, "total_steps": epochs * n,
                    "seed": int(rng.integers(2**63)), "subset": subset},
        )

    def progress(info):
        if est.verbose >= 2:
            say(f"[DC-online sigma={sigma:.4g}] epoch {info['epoch']}/{info['epochs']}  (9)={info['value']:.6g}")

    def record(state):
        counts = engine.map_reduce(DC_HARD_COUNTS, X, c, params={"centers": state["m"], "n_classes": n_classes,
                                                                 "subset": subset})["counts"]
        return obj.log_posterior(counts, est.prior)

    state = {"m": np.array(centers, dtype=np.float64), "gamma": np.zeros((centers.shape[0], n_classes)), "t": 0}
    state, history = optimize.online_epochs(run_epoch, state, epochs=epochs, callback=progress, record=record)
    return state["m"], history, epochs, True


def online_update(est: Any, rows: np.ndarray, codes: np.ndarray, state: dict | None) -> dict:
    """One ``partial_fit`` batch of rule (5)-(6) in this process. ``state``
    None (the first update after the fit of the first batch) starts from the
    fitted prototypes, the class distributions psi_j of the fit's hard counts
    (their logarithms as the softmax parameters gamma of (6)) and the first
    batch's size as the step's half-life."""
    if state is None:
        counts = np.asarray(est.contingency_, dtype=np.float64) + 1.0
        state = {"m": np.array(est.cluster_centers_, dtype=np.float64),
                 "gamma": np.log(counts / counts.sum(axis=1, keepdims=True)), "t": 0,
                 "half_life": float(max(est.contingency_.sum(), 1)), "seed": int(est.n_steps_)}
    out = online_dc_block(state, rows, codes, start=int(state["t"]) + 1, sigma=float(est.sigma_),
                          alpha0=float(est.learning_rate), total_steps=0, seed=state["seed"],
                          half_life=state["half_life"])
    return {**state, **out}
