"""Issue 63: K-means' automatic choices (Lloyd's exact loops or products,
measured in this process; Hamerly's or Yinyang's bounds, kept while a
bounded step is no slower than a plain one) are never slower than the plain
path - the exact loops with no bounds - by more than 10 % on the machine
running this test, on separated and on overlapping clusters, float32 and
float64. A benchmark, so ``slow`` (``make test-slow``): whole ``fit`` calls
from the same centres, 10 iterations, best of 3 in one process - as a
cross-validation sweep or a bootstrap fits: the first fit of a class tries
the bounds (and may pay for the trial: up to 1.3x at separated k = 4, where
the fit ends one step after the bounds' set-up), a class whose bounds lost
keeps plain steps in that process.

The two sides' fits alternate (as shipped, plain, as shipped, ...) and each
side keeps its best of 5, so a slow spell of a shared 2-core machine falls on
both: measured one side after the other with best of 3, two runs of the same
path (both the plain loops) once differed by 1.11x in CI. A cell whose ratio
is above the bound is measured again, up to :data:`ROUNDS` rounds in all, and
passes if one round is within it: a slower path is slower in every round, a
busy spell of the machine (another process on one of the 2 cores) is not
(measured: 1.04 in one round, above 1.10 in one CI run, at k = 16 overlapping
float32, both sides on the same path). A round in which every fit as shipped
ran the plain loops (the bounds lost earlier in this process, Lloyd's exact
loops chosen or the only candidate, as ``runner_["paths"]`` says) ran the plain
side's code: there the only cost of the automatic choice is its check
(:func:`~infoclust_dask.cluster._lloyd_bounds.use_bounds`), which is timed
and must stay under 1 % of a plain fit, and the two fits' times are not
compared (one CI run saw 1.14x, 1.18x and 1.36x in three such rounds while
another process was busy: noise between two runs of one path, at k = 4 where
the loops are the only candidate)."""

import time
import warnings

import numpy as np
import pytest

pytestmark = pytest.mark.slow

#: an automatic choice may cost this much more than the plain path (the issue's bound)
SLOWER_AT_MOST = 1.10
#: rounds of measurement at most for a cell above the bound (each round: best of 5 a side, alternating)
ROUNDS = 3


def _blobs(n, d, k, spread, dtype):
    rng = np.random.default_rng(0)
    c = rng.normal(scale=spread, size=(k, d))
    X = (c[rng.integers(0, k, n)] + rng.normal(size=(n, d))).astype(dtype)
    return X, X[rng.choice(n, k, replace=False)].astype(np.float64)


def _fit_time(X, init):
    from infoclust_dask import KMeans

    t0 = time.perf_counter()
    model = KMeans(len(init), init=init, max_iter=10, tol=0.0).fit(X)
    return time.perf_counter() - t0, model


def _plain(monkeypatch):
    """The plain path: the exact loops, no bounds."""
    from infoclust_dask.cluster import _kmeans
    from infoclust_dask.kernels import _compiled

    monkeypatch.setattr(_compiled, "LLOYD_PATH", "loops")
    monkeypatch.setattr(_kmeans, "_use_bounds", lambda *a: False)


def _ran_plain_loops(model, k):
    """The fit as shipped ran the plain side's code: plain steps from the
    first (the bounds lost earlier in this process), Lloyd's exact loops."""
    from infoclust_dask.kernels import lloyd_paths

    notes = model.runner_.get("paths", "").split("; ")
    bounds = [n for n in notes if n.startswith("Lloyd: ")]  # the bounds' fate: one line, plain from the first step
    loops = len(lloyd_paths(k)) == 1 or any(n.startswith("Lloyd's step: the loops") for n in notes)
    return len(bounds) == 1 and bounds[0].startswith("Lloyd: plain steps (bounds did not pay") and loops


def _best_alternating(X, init, monkeypatch, repeat=5):
    """Best time of each side, the sides' fits alternating; and whether every
    fit as shipped ran the plain loops."""
    auto = plain = np.inf
    auto_model = plain_model = None
    same = True
    for _ in range(repeat):
        t, auto_model = _fit_time(X, init)
        auto = min(auto, t)
        same = same and _ran_plain_loops(auto_model, len(init))
        with monkeypatch.context() as m:
            _plain(m)
            t, plain_model = _fit_time(X, init)
        plain = min(plain, t)
    return auto, auto_model, plain, plain_model, same


def _check_seconds(X, k):
    """Best time of the automatic choice's check (whether bounds may be kept)."""
    from infoclust_dask.cluster import _kmeans

    best = np.inf
    for _ in range(20):
        t0 = time.perf_counter()
        _kmeans._use_bounds(X, k, "auto", 10)
        best = min(best, time.perf_counter() - t0)
    return best


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("spread", [10.0, 1.0], ids=["separated", "overlapping"])
@pytest.mark.parametrize("k", [4, 16, 64])
def test_automatic_paths_are_not_slower_than_the_plain_loops(k, spread, dtype, monkeypatch):
    from infoclust_dask.cluster import _lloyd_bounds

    monkeypatch.setattr(_lloyd_bounds, "BOUNDS_LOST", set())  # every cell's first fit tries the bounds afresh
    X, init = _blobs(300_000, 16, k, spread, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 10 iterations do not converge: that is the measurement
        rounds = []
        for _ in range(ROUNDS):
            auto, auto_model, plain, plain_model, same = _best_alternating(X, init, monkeypatch)
            np.testing.assert_array_equal(auto_model.cluster_centers_, plain_model.cluster_centers_)
            assert auto_model.inertia_ == plain_model.inertia_
            rounds.append(f"as shipped {auto:.4f} s, plain loops {plain:.4f} s ({auto / plain:.2f}x)")
            if same or auto <= SLOWER_AT_MOST * plain:
                break
    if same:  # one path on both sides: the automatic choice costs its check only
        check = _check_seconds(X, k)
        assert check < 0.01 * plain, f"the check took {check:.3g} s, a plain fit {plain:.3g} s"
    else:
        assert auto <= SLOWER_AT_MOST * plain, f"{'; '.join(rounds)}: {auto_model.runner_}"
