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
- :func:`squarem`: a fixed-point iteration (EM) accelerated by squared
  extrapolation, Varadhan & Roland (2008), keeping its monotone objective
  (soft K-means and CMBC at each temperature);
- :func:`next_temperature`: the adaptive deterministic-annealing step,
  dense around predicted critical temperatures and sparse between;
- :func:`online_epochs`: epochs of a streaming on-line algorithm with a
  value recorded after each (DC's stochastic algorithm (5)-(6));
- :func:`repeated_held_out_search`: model selection over several hashed
  train/validation splits of the rows (:func:`hashed_split` makes the two
  row subsets), decided by the one-standard-error rule (DC's sigma and
  lambda, AC's width).

Every optimizer reports progress through an optional ``callback(info)``
with a dict ``info`` (step, value, seconds, ...), which the estimators turn
into their ``verbose`` lines.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from scipy.optimize import minimize

__all__ = [
    "OptimizeResult",
    "conjugate_gradients",
    "simulated_annealing",
    "geometric_schedule",
    "squarem",
    "next_temperature",
    "online_epochs",
    "hashed_split",
    "repeated_held_out_search",
    "one_standard_error_choice",
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


#: SQUAREM's step-length bound grows (and shrinks) by this factor (``mstep`` of Varadhan & Roland's SQUAREM
#: package, whose default is 4; 2 measured fewer passes on Letter's and the six datasets' annealing paths)
SQUAREM_MSTEP = 2.0
#: the bound's start (``step.max0`` of the package, whose default is 1): large, so that the first cycles of a
#: fixed point that begins on a saddle (a split of deterministic annealing) leave it in one extrapolation
SQUAREM_STEP0 = 16.0


def squarem(step: Callable[[np.ndarray], tuple[np.ndarray, float]], x0: np.ndarray, *, max_iter: int, tol: float,
            accelerate: bool = True, mstep: float = SQUAREM_MSTEP,
            step0: float = SQUAREM_STEP0) -> tuple[np.ndarray, float, int, bool]:
    """Fixed point of ``step`` by SQUAREM (Varadhan & Roland 2008, scheme
    SqS3 with the globalization of their §7), minimizing the objective the
    map decreases monotonically (an EM / MM map).

    ``step(x)`` returns ``(F(x), f(x))``: the map's image and the objective
    *at x* (e.g. one pass of soft K-means returns the new centres and the
    free energy of the current ones). A cycle maps ``x0 -> x1 -> x2``, takes
    ``r = x1 - x0``, ``v = x2 - x1 - r`` and the step length
    ``alpha = -|r| / |v|``, bounded to ``[-s, -1]``, evaluates ``F`` at the
    extrapolated ``x' = x0 - 2 alpha r + alpha^2 v`` and accepts
    ``F(x')`` when ``f(x') <= f(x1)``; otherwise it takes the plain
    iteration from ``x2`` (``alpha = -1``, always accepted). So the
    objectives of the accepted points never increase. The bound ``s``
    starts at ``step0`` and grows by ``mstep`` whenever a cycle's step was
    held at it and accepted; a rejected step below the bound shrinks it by
    ``mstep`` (not below 1), after the authors' SQUAREM package (whose
    ``step.max0`` is 1 and ``mstep`` 4; here :data:`SQUAREM_STEP0` = 16
    and :data:`SQUAREM_MSTEP` = 2, measured). Unbounded, SqS3's step on
    the plateau of a slow fixed point overshoots and is rejected again and
    again; bounded from 1, the first cycles at a beta just past a split
    of deterministic annealing cannot leave the saddle before the
    tolerance stops them (MacKay's pitchfork on a 2.3 % grid is then seen
    one step later). Letter's annealing path, four seeds: 8575-9802
    passes with the unbounded step halved back towards -1 after each
    rejection, 6116-6948 bounded from 1, 5926-6935 bounded from 16
    (``docs/BENCHMARKS.md``).

    Convergence: the squared change of a plain application of the map at
    an accepted point, ``|F(x) - x|^2 <= tol`` (the first step of a cycle),
    as for the plain iteration. Returns ``(x, f, n_steps, converged)``;
    ``n_steps`` counts the map's evaluations (one pass each).
    ``accelerate=False`` is the plain iteration (the reference)."""
    x = np.array(x0, dtype=np.float64)
    f = np.nan
    n = 0
    bound = max(1.0, float(step0))

    def shift(a, b):
        return float(np.sum((a - b) ** 2))

    while n < max_iter:
        x1, f = step(x)
        n += 1
        if shift(x1, x) <= tol:
            return x1, f, n, True
        if not accelerate or n >= max_iter:
            x = x1
            continue
        x2, f1 = step(x1)
        n += 1
        if shift(x2, x1) <= tol:
            x = x2  # converging: the next cycle's first step confirms it
            continue
        r = x1 - x
        v = x2 - x1 - r
        nv = float(np.sqrt(np.sum(v * v)))
        alpha = -float(np.sqrt(np.sum(r * r))) / nv if nv > 0 else -1.0
        alpha = max(min(alpha, -1.0), -bound)
        at_bound = alpha <= -bound
        if n >= max_iter:
            x, f = x2, f1
            break
        if alpha < -1.0:
            x3, fp = step(x - 2.0 * alpha * r + alpha * alpha * v)
            n += 1
            if np.isfinite(fp) and fp <= f1:
                if at_bound:
                    bound *= mstep
                x, f = x3, fp
                continue
            if not at_bound:  # (a rejected step at the bound keeps it)
                bound = max(1.0, bound / mstep)
            if n >= max_iter:
                x, f = x2, f1
                break
        elif at_bound:  # the bound (1) held the step to the plain one
            bound *= mstep
        x, f = step(x2)  # the plain iteration (alpha = -1)
        n += 1
    return x, f, n, False


def next_temperature(beta: float, beta_end: float, critical: Iterable[float], *, dense: float = 0.05,
                     sparse: float = 4.0) -> float:
    """The next stiffness of an adaptive deterministic-annealing path.

    ``critical`` are the predicted critical stiffnesses of the groups of
    centres that can still split (for soft K-means ``1 / lambda_max`` of a
    group's posterior covariance; Rose 1998, eq. 21; MacKay 2003, eq.
    20.17). The path steps sparsely (a factor ``sparse``) where nothing is
    predicted, stops just below the next predicted split (a factor ``1 -
    dense``), crosses it in one step of ``1 + dense`` and keeps stepping
    by ``1 + dense`` while a predicted split is due but not yet seen.
    Never beyond ``beta_end``."""
    crit = sorted(float(b) for b in critical if np.isfinite(b) and b > 0)
    due = [b for b in crit if b <= beta * (1.0 + dense)]
    ahead = [b for b in crit if b > beta * (1.0 + dense)]
    if due:
        nxt = beta * (1.0 + dense)
    elif ahead:
        below = ahead[0] * (1.0 - dense)
        nxt = ahead[0] * (1.0 + dense) if below <= beta * (1.0 + dense / 2) else min(below, beta * sparse)
    else:
        nxt = beta * sparse
    return float(min(max(nxt, beta * (1.0 + dense / 2)), beta_end))


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


def repeated_held_out_search(candidates: Sequence[Any], splits: Sequence[Any],
                             fit: Callable[[Any, Any], tuple[Any, bool]], score: Callable[[Any, Any], float], *,
                             smoother: Callable[[Any], Any], callback: Callable[[dict], Any] | None = None
                             ) -> tuple[Any, dict]:
    """Model selection over several hashed splits, decided by a stated rule
    rather than by the last bits of the arithmetic.

    For every candidate and split, ``fit(candidate, split)`` returns ``(model,
    moved)`` (``moved``: the optimizer took a step from its start) and
    ``score(model, split)`` a held-out score per validation row (higher is
    better). A candidate's score is the mean over the splits and its spread
    the standard error of that mean. The choice - the one-standard-error rule
    of Breiman et al. (1984, §3.4.3; Hastie, Tibshirani & Friedman 2009,
    §7.10) - keeps the candidates whose mean is within one standard error of
    the best mean (at least within 1e-9 of it, relative: exact ties and
    rounding), drops those whose optimizer moved on no split while another
    kept candidate moved, and takes the smoothest of the rest (the largest
    ``smoother(candidate)``). Returns ``(choice, {candidate: {"mean",
    "spread", "scores", "moved"}})``; ``callback`` receives ``{"candidate",
    "score", "split"}`` after each fit."""
    table: dict[Any, dict] = {}
    for cand in candidates:
        scores, moved = [], False
        for i, split in enumerate(splits):
            model, step = fit(cand, split)
            scores.append(float(score(model, split)))
            moved = moved or bool(step)
            if callback is not None:
                callback({"candidate": cand, "score": scores[-1], "split": i})
        arr = np.asarray(scores)
        spread = float(arr.std(ddof=1) / np.sqrt(len(arr))) if len(arr) > 1 else 0.0
        table[cand] = {"mean": float(arr.mean()), "spread": spread, "scores": scores, "moved": moved}
    return one_standard_error_choice(table, smoother), table


def one_standard_error_choice(table: dict[Any, dict], smoother: Callable[[Any], Any]) -> Any:
    """The rule of :func:`repeated_held_out_search` applied to its table."""
    best = max(table, key=lambda c: table[c]["mean"])
    top = table[best]["mean"]
    band = max(table[best]["spread"], 1e-9 * max(abs(top), 1.0))
    kept = [c for c in table if table[c]["mean"] >= top - band]
    moving = [c for c in kept if table[c]["moved"]]
    return max(moving or kept, key=smoother)
