"""Parameter validation shared by the estimators: each estimator declares
``_parameter_constraints`` (``{name: [constraint, ...]}``) with the
constraints below, and :func:`validate_params` checks them at ``fit`` with
scikit-learn's message; one system, also for the checks that depend on the
data (:func:`check_n_clusters`). Inputs are opened and checked by
:mod:`infoclust_dask._inputs`.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = ["Interval", "Options", "ArrayLike", "PairOf", "Anything", "RANDOM_STATE", "SIGMA_RANGE", "SAMPLE_DIM",
           "VARIABLES", "validate_params", "param_error", "check_n_clusters", "check_random_state"]


class Interval:
    """Numbers of ``kind`` (int or float) in a range; ``closed`` says which
    ends belong to it: "both", "left", "right" or "neither"."""

    def __init__(self, kind, low=None, high=None, closed="both"):
        self.kind, self.low, self.high, self.closed = kind, low, high, closed

    def accepts(self, v):
        if isinstance(v, bool):
            return False
        if not isinstance(v, numbers.Integral if self.kind is int else numbers.Real):
            return False
        if not math.isfinite(float(v)):  # NaN compares False with every bound; no parameter is infinite
            return False
        if self.low is not None and (v < self.low or (v == self.low and self.closed in ("right", "neither"))):
            return False
        if self.high is not None and (v > self.high or (v == self.high and self.closed in ("left", "neither"))):
            return False
        return True

    def __str__(self):
        lo = "-inf" if self.low is None else self.low
        hi = "inf" if self.high is None else self.high
        left = "[" if self.closed in ("both", "left") and self.low is not None else "("
        right = "]" if self.closed in ("both", "right") and self.high is not None else ")"
        return f"{'an int' if self.kind is int else 'a float'} in the range {left}{lo}, {hi}{right}"


class Options:
    """One of a few values (strings, or None)."""

    def __init__(self, *values):
        self.values = values

    def accepts(self, v):
        return any(v is o if o is None else (isinstance(v, str) and v == o) for o in self.values)

    def __str__(self):
        names = [repr(o) for o in self.values if o is not None]
        out = [f"a str among {{{', '.join(names)}}}"] if names else []
        return " or ".join(out + (["None"] if None in self.values else []))


class ArrayLike:
    """Array-like numbers (a list, tuple or array; not a string)."""

    def accepts(self, v):
        return not isinstance(v, (str, bytes)) and hasattr(v, "__len__")

    def __str__(self):
        return "an array-like"


class PairOf:
    """One value for both views, or a pair ``(x, y)`` of values, each
    accepted by one of ``constraints``."""

    def __init__(self, *constraints):
        self.constraints = constraints

    def _one(self, v):
        return any(c.accepts(v) for c in self.constraints)

    def accepts(self, v):
        if self._one(v):
            return True
        return isinstance(v, (tuple, list)) and len(v) == 2 and all(self._one(u) for u in v)

    def __str__(self):
        one = " or ".join(str(c) for c in self.constraints)
        return f"{one}, or a pair of them"


class RandomStateLike:
    """None, an int seed in [0, 2**32 - 1], or a numpy RandomState / Generator."""

    def accepts(self, v):
        if v is None or isinstance(v, (np.random.RandomState, np.random.Generator)):
            return True
        return isinstance(v, numbers.Integral) and not isinstance(v, bool) and 0 <= int(v) <= 2**32 - 1

    def __str__(self):
        return "None, an int seed in [0, 4294967295] or a numpy RandomState/Generator"


#: ``random_state`` of every estimator
RANDOM_STATE = [RandomStateLike()]
#: a kernel width: 1/(2 sigma^2) must stay a finite, non-zero float64
SIGMA_RANGE = Interval(float, 1e-100, 1e100, closed="both")


def plain_name(v) -> bool:
    """A dim or variable name: a non-empty string of at most 256
    characters without path separators, control characters or a leading
    dot (a model file naming ``../../etc/passwd`` is refused)."""
    return (isinstance(v, str) and 0 < len(v) <= 256 and not v.startswith(".") and "/" not in v and "\\" not in v
            and v.isprintable())


class _NoneOrName:
    def accepts(self, v):
        return v is None or plain_name(v)

    def __str__(self):
        return "None or the name of a dim (no '/', '\\', leading '.' or control characters)"


class _NoneOrNames:
    def accepts(self, v):
        return v is None or (isinstance(v, (list, tuple)) and len(v) > 0 and all(plain_name(s) for s in v))

    def __str__(self):
        return "None or a non-empty list of variable names (no '/', '\\', leading '.' or control characters)"


#: ``sample_dim`` of every estimator (xarray input: the dim that holds the samples)
SAMPLE_DIM = [_NoneOrName()]
#: ``variables`` of every estimator (Dataset input: the variables stacked as features)
VARIABLES = [_NoneOrNames()]


class Anything:
    """No constraint here (validated where it is used, e.g. schedulers)."""

    def accepts(self, v):
        return True

    def __str__(self):
        return "anything"


def validate_params(est):
    """Check every parameter of ``est`` against its class's declared
    ``_parameter_constraints`` (``{name: [constraint, ...]}``), with
    scikit-learn's message: "The 'sigma' parameter of
    DiscriminativeClustering must be a float in the range (0, inf) or a str
    among {'auto'}. Got -1 instead." Every constructor parameter must be
    declared (a missing declaration is a programming error)."""
    constraints = type(est)._parameter_constraints
    params = est.get_params(deep=False)
    undeclared = set(params) - set(constraints)
    if undeclared:
        raise RuntimeError(f"{type(est).__name__} declares no constraint for {sorted(undeclared)}.")
    for name, allowed in constraints.items():
        value = params[name]
        if not any(c.accepts(value) for c in allowed):
            raise param_error(est, name, " or ".join(str(c) for c in allowed), value)


def param_error(est, name, expected, value):
    return ValueError(
        f"The '{name}' parameter of {type(est).__name__} must be {expected}. Got {value!r} instead."
    )


def require_y(est, y, what="class labels"):
    """The supervised estimators' ``fit(X, y)`` needs ``y``: ``None`` is a
    ValueError in scikit-learn's words (its ``check_requires_y_none``)."""
    if y is None:
        raise ValueError(f"{type(est).__name__} requires y to be passed, but the target y is None: give the "
                         f"{what} of the rows as fit(X, y).")


def check_n_clusters(est, n_clusters, n_samples, name="n_clusters"):
    """``n_clusters`` (a declared constraint, checked again for callers
    that pass it apart from the estimator's parameters) against the number
    of samples."""
    if not N_CLUSTERS.accepts(n_clusters):
        raise param_error(est, name, str(N_CLUSTERS), n_clusters)
    if n_samples < n_clusters:
        raise ValueError(
            f"n_samples={n_samples} should be >= {name}={n_clusters}. Use fewer clusters "
            "or more data."
        )


#: a number of clusters
N_CLUSTERS = Interval(int, 1)


def check_random_state(random_state) -> np.random.Generator:
    """``int``, ``Generator``, legacy ``RandomState`` or ``None`` -> Generator."""
    if random_state is None or isinstance(random_state, (numbers.Integral, np.random.SeedSequence)):
        return np.random.default_rng(random_state if random_state is None or isinstance(random_state, np.random.SeedSequence)
                                     else int(random_state))
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**31 - 1))
    raise ValueError(
        f"random_state must be an int, a numpy Generator/RandomState or None; got {random_state!r}."
    )
