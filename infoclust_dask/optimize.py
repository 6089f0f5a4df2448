"""Optimizers on the driver: they see a function of a small parameter vector
(prototypes) whose value and gradient the estimators assemble from reduced
statistics, never the data.

- :func:`conjugate_gradients`: scipy's Polak-Ribiere CG maximizing a smooth
  objective, with a progress callback after every evaluation (the driver
  of DC, Kaski, Sinkkonen & Klami 2005, §3.1, and AC);
- :func:`simulated_annealing`: random-walk Metropolis with a temperature
  falling linearly to 0, keeping the best state (DC on the unsmoothed
  objective (9), §3.1);
- :func:`geometric_schedule`: deterministic-annealing schedules (widths of
  AC's continuation, stiffness beta of soft K-means, MacKay 2003, §20.4);
- :func:`online_epochs`: epochs of a streaming on-line algorithm with a
  value recorded after each (DC's stochastic algorithm (5)-(6));
- :func:`held_out_search`: model selection on a hashed train/validation
  split of the rows (DC's sigma and lambda, AC's width), with
  :func:`hashed_split` making the two row subsets.

Every optimizer reports progress through an optional ``callback(info)``
with a dict ``info`` (step, value, seconds, ...), which the estimators turn
into their ``verbose`` lines.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from scipy.optimize import minimize

__all__ = [
    "OptimizeResult",
    "conjugate_gradients",
    "simulated_annealing",
    "geometric_schedule",
    "online_epochs",
    "hashed_split",
    "held_out_search",
]


@dataclass
class OptimizeResult:
    """What an optimizer returns: the final (or best) parameters, the value
    of every evaluation or step, the iterations and whether it converged."""

    x: np.ndarray
    history: list = field(default_factory=list)
    n_iter: int = 0
    converged: bool = True


def conjugate_gradients(fun: Callable[[np.ndarray], tuple[float, np.ndarray]], x0: np.ndarray, *, max_iter: int,
                        gtol: float = 1e-6, tol: float | None = None, window: int = 5,
                        callback: Callable[[dict], Any] | None = None) -> OptimizeResult:
    """Maximize ``fun`` by conjugate gradients.

    ``fun(x) -> (value, gradient)`` with ``x`` of the shape of ``x0``; the
    search runs on the flattened vector (scipy's ``minimize(method="CG")`` on
    the negated objective). It stops when the gradient norm falls below
    ``gtol``, or - with ``tol`` - when the objective rose by at most
    ``tol * max(1, |value|)`` over the last ``window`` iterations (the
    objective has stopped changing; smooth objectives of real data often
    creep on for thousands of iterations at a gradient far above ``gtol``),
    or after ``max_iter`` iterations. ``callback`` receives ``{"evaluation",
    "value", "grad_norm", "seconds"}`` after every evaluation. ``history``
    holds the value of every evaluation; ``converged`` is False only when
    ``max_iter`` was reached (or scipy's line search failed).
    """
    x0 = np.asarray(x0, dtype=np.float64)
    shape = x0.shape
    history: list[float] = []

    def negated(flat):
        t0 = time.perf_counter()
        value, grad = fun(flat.reshape(shape))
        history.append(float(value))
        if callback is not None:
            callback({"evaluation": len(history), "value": float(value),
                      "grad_norm": float(np.linalg.norm(grad)), "seconds": time.perf_counter() - t0})
        return -value, -np.asarray(grad, dtype=np.float64).ravel()

    per_iteration: list[float] = []
    stalled = False

    def check(intermediate_result):
        nonlocal stalled
        per_iteration.append(-float(intermediate_result.fun))
        if tol is not None and len(per_iteration) > window:
            now, before = per_iteration[-1], per_iteration[-1 - window]
            if now - before <= tol * max(1.0, abs(now)):
                stalled = True
                raise StopIteration

    res = minimize(negated, x0.ravel(), jac=True, method="CG", callback=check,
                   options={"maxiter": int(max_iter), "gtol": gtol})
    return OptimizeResult(res.x.reshape(shape), history, len(per_iteration) if stalled else int(res.nit),
                          bool(res.success) or stalled)


def simulated_annealing(score: Callable[[np.ndarray], float], x0: np.ndarray, *, steps: int, width: float,
                        temperature: float, rng: np.random.Generator, callback: Callable[[dict], Any] | None = None,
                        report_every: int | None = None) -> OptimizeResult:
    """Maximize ``score`` (no gradient) by simulated annealing.

    Every step proposes ``x + width * N(0, I)``; it is accepted when the score
    rises, else with probability ``exp(delta / T)``, the temperature ``T``
    falling linearly from ``temperature`` to 0 over ``steps``. Returns the best
    state seen; ``history`` holds the current score after every step (its
    first entry is the start's). ``callback`` receives ``{"step", "steps",
    "temperature", "value", "best"}`` every ``report_every`` steps (default
    ``steps // 20``).
    """
    cur = np.array(x0, dtype=np.float64)
    cur_val = float(score(cur))
    best, best_val = cur, cur_val
    history = [cur_val]
    every = max(1, steps // 20) if report_every is None else int(report_every)
    for s in range(steps):
        temp = temperature * (1.0 - s / steps)
        cand = cur + width * rng.standard_normal(cur.shape)
        val = float(score(cand))
        if val >= cur_val or (temp > 0 and rng.uniform() < np.exp((val - cur_val) / temp)):
            cur, cur_val = cand, val
            if val > best_val:
                best, best_val = cand, val
        history.append(cur_val)
        if callback is not None and (s + 1) % every == 0:
            callback({"step": s + 1, "steps": steps, "temperature": temp, "value": cur_val, "best": best_val})
    return OptimizeResult(best, history, int(steps), True)


def geometric_schedule(start: float, stop: float, steps: int) -> np.ndarray:
    """``steps`` values from ``start`` to ``stop``, evenly spaced in log (a
    deterministic-annealing schedule); one step gives ``[stop]``."""
    if steps <= 1:
        return np.array([float(stop)])
    return np.geomspace(float(start), float(stop), int(steps))


def online_epochs(run_epoch: Callable[[Any, int], Any], state: Any, *, epochs: int, record: Callable[[Any], float],
                  callback: Callable[[dict], Any] | None = None) -> tuple[Any, list[float]]:
    """``epochs`` passes of a streaming on-line algorithm: ``state =
    run_epoch(state, epoch)`` then ``record(state)`` (e.g. the objective on
    the data). Returns ``(state, history)``; ``callback`` receives
    ``{"epoch", "epochs", "value"}`` after each epoch."""
    history = []
    for e in range(int(epochs)):
        state = run_epoch(state, e)
        history.append(float(record(state)))
        if callback is not None:
            callback({"epoch": e + 1, "epochs": int(epochs), "value": history[-1]})
    return state, history


def hashed_split(rng: np.random.Generator, validation_fraction: float) -> tuple[tuple, tuple]:
    """The two row subsets ``(train, valid)`` of a hashed split: a row is in
    ``train`` when its counter-based uniform number (seeded from ``rng``) is
    below ``1 - validation_fraction``. Passes that honour the subset
    (:class:`infoclust_dask.kernels.Pass`, ``subset=True``) read them."""
    seed = int(rng.integers(2**63))
    frac = 1.0 - float(validation_fraction)
    return (seed, frac, "train"), (seed, frac, "valid")


def held_out_search(candidates: Iterable[Any], fit: Callable[[Any], Any], score: Callable[[Any], float], *,
                    callback: Callable[[dict], Any] | None = None) -> tuple[Any, dict]:
    """Model selection on held-out rows: for every candidate, ``model =
    fit(candidate)`` on the training rows and ``score(model)`` on the
    validation rows (higher is better). Returns ``(best candidate, {candidate:
    score})``; the first of equal scores wins. ``callback`` receives
    ``{"candidate", "score"}`` after each."""
    scores: dict[Any, float] = {}
    for cand in candidates:
        scores[cand] = float(score(fit(cand)))
        if callback is not None:
            callback({"candidate": cand, "score": scores[cand]})
    best = max(scores, key=lambda c: scores[c])
    return best, scores
