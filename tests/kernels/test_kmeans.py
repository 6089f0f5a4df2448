"""K-means, soft K-means and seeding kernels (and the generic geometry and
moments they rely on) against plain-numpy loop references."""

import numpy as np
import pytest

from infoclust_dask.kernels._common import row_hash_uniform, sq_distances
from infoclust_dask.kernels.kmeans import (
    assign_labels,
    closest_count_stats,
    combine_lloyd,
    d2_pick_in_block,
    inertia_stats,
    kpp_trial_stats,
    lloyd_stats,
    lloyd_step_stats,
    soft_kmeans_stats,
    soft_responsibilities,
)
from infoclust_dask.kernels.stats import gram_stats, moments_stats, sum_sq_stats


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(301, 5)), rng.normal(size=(4, 5)), rng.uniform(0, 2, size=301)


def test_sq_distances_matches_loops(data):
    x, c, _ = data
    ref = np.array([[np.sum((xi - cj) ** 2) for cj in c] for xi in x])
    np.testing.assert_allclose(sq_distances(x, c), ref, rtol=1e-10, atol=1e-12)
    assert (sq_distances(x, x[:3])[:3].diagonal() >= 0).all()


@pytest.mark.parametrize("weighted", [False, True])
def test_lloyd_stats_matches_loops(data, weighted):
    x, c, w = data
    w = w if weighted else None
    st = lloyd_stats(x, w, centers=c, n_far=3)
    counts, sums, inertia, dmins = np.zeros(4), np.zeros((4, 5)), 0.0, []
    for i, xi in enumerate(x):
        d = [np.sum((xi - cj) ** 2) for cj in c]
        j = int(np.argmin(d))
        wi = 1.0 if w is None else w[i]
        counts[j] += wi
        sums[j] += wi * xi
        inertia += wi * d[j]
        dmins.append(d[j])
    np.testing.assert_allclose(st["counts"], counts, rtol=1e-12)
    np.testing.assert_allclose(st["sums"], sums, rtol=1e-10)
    np.testing.assert_allclose(st["inertia"], inertia, rtol=1e-10)
    if w is None:
        np.testing.assert_allclose(np.sort(st["far_d"]), np.sort(dmins)[-3:], rtol=1e-10)


def test_combine_lloyd_keeps_global_farthest(data):
    x, c, _ = data
    parts = [lloyd_stats(x[s], centers=c, n_far=4) for s in (slice(0, 100), slice(100, 150), slice(150, 301))]
    whole = lloyd_stats(x, centers=c, n_far=4)
    merged = combine_lloyd(parts)
    np.testing.assert_allclose(merged["far_d"], whole["far_d"][np.argsort(-whole["far_d"])], rtol=1e-12)
    np.testing.assert_allclose(merged["sums"], whole["sums"], rtol=1e-12)


def test_soft_kmeans_stats_matches_eq_20_7(data):
    x, c, w = data
    beta = 0.7
    st = soft_kmeans_stats(x, w, centers=c, beta=beta)
    R, S, lz = np.zeros(4), np.zeros((4, 5)), 0.0
    for i, xi in enumerate(x):
        e = np.array([np.exp(-beta * 0.5 * np.sum((xi - cj) ** 2)) for cj in c])
        r = e / e.sum()
        R += w[i] * r
        S += w[i] * r[:, None] * xi
        lz += w[i] * np.log(e.sum())
    np.testing.assert_allclose(st["R"], R, rtol=1e-10)
    np.testing.assert_allclose(st["S"], S, rtol=1e-10)
    np.testing.assert_allclose(st["log_z"], lz, rtol=1e-10)


def test_soft_responsibilities_stable_at_huge_beta(data):
    x, c, _ = data
    r, _ = soft_responsibilities(x, c, 1e6)
    assert np.all(np.isfinite(r))
    np.testing.assert_array_equal(r.argmax(axis=1), assign_labels(x, centers=c))
    np.testing.assert_allclose(r.sum(axis=1), 1.0)


def test_moments_stats_counts_nonfinite():
    x = np.array([[1.0, np.nan], [np.inf, 2.0], [3.0, 4.0]])
    st = moments_stats(x)
    assert int(st["n_bad"]) == 2 and int(st["n"]) == 3
    np.testing.assert_allclose(st["s1"], [4.0, 6.0])


def test_row_hash_uniform_is_chunking_independent_and_uniform():
    whole = row_hash_uniform(123, 0, 100_000)
    pieces = np.concatenate([row_hash_uniform(123, s, n) for s, n in [(0, 7), (7, 50_000), (50_007, 49_993)]])
    np.testing.assert_array_equal(whole, pieces)
    assert whole.min() >= 0 and whole.max() < 1
    assert abs(whole.mean() - 0.5) < 0.005
    hist = np.histogram(whole, bins=10, range=(0, 1))[0]
    assert hist.min() > 9500 and hist.max() < 10500
    assert not np.array_equal(whole[:100], row_hash_uniform(124, 0, 100))


def test_d2_pick_in_block_inverse_cdf(data):
    x, c, _ = data
    d2 = ((x[:, None, :] - c[None]) ** 2).sum(-1).min(1)
    cum = np.cumsum(d2)
    for u in [0.0, cum[10] - 1e-9, cum[10] + 1e-9, cum[-1] * 0.999]:
        i = int(np.searchsorted(cum, u, side="right"))
        np.testing.assert_array_equal(d2_pick_in_block(x, centers=c, u=u)["row"][0], x[i])


def test_gram_and_closest_counts(data):
    x, c, w = data
    st = gram_stats(x)
    np.testing.assert_allclose(st["xtx"], x.T @ x, rtol=1e-12)
    cc = closest_count_stats(x, w, centers=c)
    lab = assign_labels(x, centers=c)
    np.testing.assert_allclose(cc["counts"], [w[lab == j].sum() for j in range(4)], rtol=1e-12)


@pytest.mark.parametrize("case", ["plain", "weighted", "zero-weights", "empty-and-singletons", "many-clusters"])
def test_lloyd_step_stats_equals_reference(case):
    """The compiled fast path (scikit-learn's Lloyd routine with its per-block
    empty-cluster relocation undone) against the numpy reference."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(500, 3))
    c = rng.normal(size=(6, 3))
    w = None
    if case == "weighted":
        w = rng.uniform(0.1, 3, 500)
    elif case == "zero-weights":
        w = rng.uniform(0.1, 3, 500)
        w[::7] = 0.0
    elif case == "empty-and-singletons":
        c = np.vstack([c, [[50.0, 50.0, 50.0]], [[-40.0, 0.0, 0.0]], x[3] * 30])  # 2 empty clusters
        x[0] = [-39.0, 0.0, 0.0]  # a natural singleton
        x[1] = x[3] * 30 + 0.1     # another
    elif case == "many-clusters":
        c = rng.normal(size=(400, 3))  # most clusters empty in a 500-row block
    st = lloyd_step_stats(x, w, centers=c)
    ref = lloyd_stats(x, w, centers=c)
    np.testing.assert_allclose(st["counts"], ref["counts"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(st["sums"], ref["sums"], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(inertia_stats(x, w, centers=c)["inertia"], ref["inertia"], rtol=1e-10)
    xx = (x * x).sum(1)
    np.testing.assert_allclose(sum_sq_stats(x, w)["sxx"], xx.sum() if w is None else w @ xx, rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_moments_stats_matches_numpy(dtype):
    rng = np.random.default_rng(9)
    x = rng.normal(3, 2, size=(400, 5)).astype(dtype)
    w = rng.uniform(0, 2, 400)
    for ww in (None, w):
        st = moments_stats(x, ww)
        wt = np.ones(400) if ww is None else ww
        x64 = x.astype(np.float64)
        np.testing.assert_allclose(st["s1"], wt @ x64, rtol=1e-12)
        np.testing.assert_allclose(st["s2"], wt @ (x64 * x64), rtol=1e-12)
        assert int(st["n_bad"]) == 0
    x[3, 1] = np.nan
    x[7, 2] = -np.inf
    st = moments_stats(x)
    assert int(st["n_bad"]) == 2
    assert np.all(np.isfinite(st["s1"]))


def test_lloyd_step_stats_duplicate_centres_and_float32():
    rng = np.random.default_rng(6)
    x = rng.normal(size=(20_000, 4)).astype(np.float32)  # several sub-blocks
    c = rng.normal(size=(5, 4))
    c[3] = c[1]  # a duplicate: its cluster is empty everywhere
    st = lloyd_step_stats(x, centers=c)
    ref = lloyd_stats(x.astype(np.float64), centers=c)
    np.testing.assert_allclose(st["counts"], ref["counts"], rtol=1e-12)
    np.testing.assert_allclose(st["sums"], ref["sums"], rtol=1e-10, atol=1e-9)
    assert st["counts"][3] == 0


def test_moments_shift_keeps_variance_accurate_far_from_origin():
    rng = np.random.default_rng(10)
    x = 1e8 + rng.normal(size=(1000, 3))
    st = moments_stats(x, shift=x[0])
    n = int(st["n"])
    var = st["s2"] / n - (st["s1"] / n) ** 2
    np.testing.assert_allclose(var, x.var(axis=0), rtol=1e-9)
    assert x[0, 0] > 1e7  # the input is not modified


def test_kpp_trial_stats_matches_brute_force(data):
    x, c, w = data
    cand = x[[5, 50, 100]] + 0.01
    st = kpp_trial_stats(x, w, start=7, centers=c[:2], candidates=cand)
    d_c = np.array([[np.sum((xi - cj) ** 2) for cj in c[:2]] for xi in x]).min(1)
    ref = [w @ np.minimum(d_c, ((x - t) ** 2).sum(1)) for t in cand]
    np.testing.assert_allclose(st["weight"][0], ref, rtol=1e-10)
    assert st["start"][0] == 7 and st["stop"][0] == 7 + len(x)
    empty = np.empty((0, 5))
    np.testing.assert_allclose(kpp_trial_stats(x, w, start=0, centers=empty, candidates=empty)["weight"][0], [w.sum()])


@pytest.mark.parametrize("layout", ["float32", "fortran", "strided"])
@pytest.mark.parametrize("weighted", [False, True])
def test_lloyd_step_stats_phantom_path(layout, weighted):
    """Input that is not float64 C-contiguous goes through the buffer with
    phantom rows; some clusters are empty, most pieces are partial."""
    rng = np.random.default_rng(8)
    base = rng.normal(size=(20_000, 8))
    x = {"float32": base.astype(np.float32), "fortran": np.asfortranarray(base), "strided": base[:, ::2]}[layout]
    c = np.vstack([np.asarray(x[:5], dtype=np.float64), np.full((1, x.shape[1]), 40.0), np.full((1, x.shape[1]), -40.0)])  # 2 empty
    w = rng.uniform(0.2, 2.0, len(x)) if weighted else None
    st = lloyd_step_stats(x, w, centers=c)
    ref = lloyd_stats(np.asarray(x, dtype=np.float64), w, centers=c)
    np.testing.assert_allclose(st["counts"], ref["counts"], rtol=1e-10)
    np.testing.assert_allclose(st["sums"], ref["sums"], rtol=1e-10, atol=1e-8)
    assert st["counts"][5] == 0 and st["counts"][6] == 0
