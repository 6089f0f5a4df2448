"""Each row's t smallest entries (kernels.knn.knn_top, compiled) against
numpy's stable lexsort by (value, index): ties, infinities, NaN, padding,
int32 indices, narrow tables; and the candidates' exact distances
(kernels._knn_loops.pair_distances) against numpy's."""

import numpy as np
import pytest

from infoclust_dask.kernels.knn import knn_top


def _numpy_top(d2, idx, t):
    """The rule read with numpy: a stable lexsort by value then index (NaN last), padded with inf / -1."""
    n, m = d2.shape
    if m < t:
        d2 = np.hstack([d2, np.full((n, t - m), np.inf)])
        idx = np.hstack([idx, np.full((n, t - m), -1, dtype=idx.dtype)])
    order = np.lexsort((idx, d2), axis=1)[:, :t]
    return np.take_along_axis(d2, order, 1), np.take_along_axis(idx, order, 1)


def _table(n, m, seed, dtype=np.int64):
    rng = np.random.default_rng(seed)
    d2 = rng.integers(0, 6, (n, m)).astype(np.float64)  # few values: many ties
    idx = rng.integers(-1, 40, (n, m)).astype(dtype)
    d2[rng.random((n, m)) < 0.1] = np.inf
    d2[rng.random((n, m)) < 0.05] = np.nan
    d2[:, 0][idx[:, 0] < 0] = np.inf  # padding as the searches leave it
    d2[3] = 2.0  # a row of one value: the indices decide
    idx[4] = 7  # a row of one index: equal pairs keep their columns' order (values equal too below)
    d2[4] = 1.0
    return d2, idx


@pytest.mark.parametrize(("n", "m", "t"), [(200, 28, 10), (50, 10, 10), (60, 7, 10), (80, 12, 1), (0, 12, 4)])
@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_the_smallest_entries_are_numpys_lexsort(n, m, t, dtype):
    d2, idx = _table(max(n, 5), m, seed=n + m + t, dtype=dtype)
    d2, idx = d2[:n], idx[:n]
    got_d, got_i = knn_top(d2, idx, t)
    want_d, want_i = _numpy_top(d2, idx, t)
    assert got_d.shape == (n, t) and got_i.shape == (n, t) and got_i.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got_d, want_d)  # NaN where numpy's has NaN
    np.testing.assert_array_equal(got_i, want_i)


def test_real_distances_with_equal_values_order_by_index():
    rng = np.random.default_rng(3)
    d2 = np.round(rng.random((300, 28)), 2)
    idx = np.stack([rng.permutation(1000)[:28] for _ in range(300)])
    got = knn_top(d2, idx, 10)
    want = _numpy_top(d2, idx, 10)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_pair_distances_are_numpys_bits():
    """The re-ranking's float64 distances: numpy's differences squared and
    summed left to right, ``inf`` for empty entries, on rows far apart in
    memory (the loop asks for the next row's candidates ahead)."""
    from infoclust_dask.kernels._knn_loops import pair_distances

    rng = np.random.default_rng(5)
    xd = rng.standard_normal((5000, 16)) * 10.0 ** rng.integers(-3, 4, (5000, 1))
    ind = rng.integers(0, 5000, (700, 28))
    ind[::5, -3:] = -1
    xq = xd[rng.integers(0, 5000, 700)]
    got = pair_distances(xq, xd, ind)
    diff = xq[:, None, :] - xd[np.maximum(ind, 0)]
    want = np.zeros(ind.shape)
    for f in range(16):  # in order, as the loop sums
        want += diff[:, :, f] * diff[:, :, f]
    want[ind < 0] = np.inf
    np.testing.assert_array_equal(got, want)
