"""SMIC's kernel row blocks, compiled (kernels._kernel_loops), against the
scipy chain they replaced (``tests/reference_kernels.py``, which does not
import the package): the pieces
grouped by a stable sort of their column's block, and each block's rows
``csr_matrix`` from coordinates, ``maximum`` with the transposed pieces,
``maximum`` with the identity, ``eliminate_zeros``. Both must give the same
arrays bit for bit (the eigensolver's products sum each row's entries in
their stored order)."""

import numpy as np
import pytest
import scipy.sparse as sp
from reference_kernels import smic_kernel_block, smic_kernel_pieces

from infoclust_dask.kernels.smic import (
    RankedRows,
    kernel_row_block,
    kernel_transpose_pieces,
    sparse_matmat,
)


def _lists(n, t, width, seed, *, pad=0.0, dups=0.0, selfs=0.0, far=0.0, hub=None):
    """Random lists of ``n`` rows, ``width`` wide, sorted; ``pad``: share of
    entries -1; ``dups``: share of rows listing one column twice; ``selfs``:
    rows listing themselves; ``far``: entries so far their value is an exact
    zero; ``hub``: a row most rows list (hundreds of entries in its row)."""
    rng = np.random.default_rng(seed)
    d2 = np.sort(rng.uniform(0.05, 3.0, (n, width)), axis=1)
    idx = rng.integers(0, n, (n, width))
    if hub is not None:
        idx[rng.random(n) < 0.5, 0] = hub
    r = np.flatnonzero(rng.random(n) < dups)
    idx[r, 1] = idx[r, 0]
    r = np.flatnonzero(rng.random(n) < selfs)
    idx[r, 2] = r
    d2[rng.random((n, width)) < far] = 1e6
    d2.sort(axis=1)
    idx[rng.random((n, width)) < pad] = -1
    sigma = np.sqrt(np.maximum(d2[:, t - 1], 0.01))
    sigma[rng.random(n) < 0.02] = 0.0  # rows with t duplicates: zero scale (values 1 or 0)
    return d2, idx, sigma


def _exchange(d2, idx, sigma, t, bounds, split, join, **kw):
    n = d2.shape[0]
    outs = [split(d2[a:b], idx[a:b], start=a, t=t, sigma=sigma, bounds=bounds)
            for a, b in zip(bounds[:-1], bounds[1:])]
    return [join(d2[a:b], idx[a:b], [o[s] for o in outs], start=a, t=t, sigma=sigma, n=n, **kw)
            for s, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]))], outs


CASES = {
    "plain": {},
    "padded": {"pad": 0.2},
    "duplicates, self entries, zeros": {"dups": 0.1, "selfs": 0.1, "far": 0.1},
    "a hub row (hundreds of entries)": {"hub": 17},
    "everything": {"pad": 0.1, "dups": 0.05, "selfs": 0.05, "far": 0.05, "hub": 3},
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("bounds", [[0, 2000], [0, 700, 701, 1500, 2000], [0, 333, 666, 999, 1332, 1665, 2000]])
def test_blocks_equal_the_scipy_chain(case, bounds):
    t = 6
    d2, idx, sigma = _lists(2000, t, 9, seed=len(case) + len(bounds), **CASES[case])
    bounds = np.asarray(bounds)
    got, pieces = _exchange(d2, idx, sigma, t, bounds, kernel_transpose_pieces, kernel_row_block)
    want, ref_pieces = _exchange(d2, idx, sigma, t, bounds, smic_kernel_pieces, smic_kernel_block)
    for out, ref in zip(pieces, ref_pieces):
        assert len(out) == len(ref)
        for p, q in zip(out, ref):
            for a, b in zip(p, q):
                assert a.dtype == b.dtype
                np.testing.assert_array_equal(a, b)
    for K, R in zip(got, want):
        assert K.shape == R.shape and K.has_sorted_indices
        np.testing.assert_array_equal(K.indptr, R.indptr)
        np.testing.assert_array_equal(K.indices, R.indices)
        np.testing.assert_array_equal(K.data, R.data)  # bit for bit: the products sum them in this order
        assert K.indices.dtype == K.indptr.dtype == np.int32
    whole = sp.vstack(got).tocsr()
    assert (whole != whole.T).nnz == 0  # max(A, A^T, I) is symmetric
    assert np.all(whole.diagonal() >= 1.0)  # 1, or a self entry listed twice summed (as scipy does)


def test_ranked_blocks_hold_the_same_rows():
    t = 5
    d2, idx, sigma = _lists(1500, t, 8, seed=3, pad=0.05, hub=7)
    bounds = np.array([0, 500, 1000, 1500])
    rank = np.random.default_rng(4).permutation(1500)
    got, _ = _exchange(d2, idx, sigma, t, bounds, kernel_transpose_pieces, kernel_row_block, rank=rank)
    ranked, _ = _exchange(d2, idx, sigma, t, bounds, smic_kernel_pieces, smic_kernel_block, rank=rank)
    plain, _ = _exchange(d2, idx, sigma, t, bounds, smic_kernel_pieces, smic_kernel_block)
    v = np.random.default_rng(5).normal(size=(1500, 2))
    for K, (local, ref), R in zip(got, ranked, plain, strict=True):
        assert isinstance(K, RankedRows)
        np.testing.assert_array_equal(K.local, local)
        for name in ("indptr", "indices", "data"):
            np.testing.assert_array_equal(getattr(K.csr, name), getattr(ref, name))
        np.testing.assert_array_equal(sparse_matmat(K, v[np.argsort(rank)]), R @ v)  # the same sums, bit for bit


def test_empty_blocks_and_rows_without_entries():
    t = 3
    d2 = np.full((4, 3), np.inf)
    idx = np.full((4, 3), -1)
    sigma = np.ones(4)
    bounds = np.array([0, 2, 2, 4])  # a block of no rows
    got, pieces = _exchange(d2, idx, sigma, t, bounds, kernel_transpose_pieces, kernel_row_block)
    assert all(p[0].size == 0 for out in pieces for p in out)
    whole = sp.vstack(got).tocsr()
    np.testing.assert_array_equal(whole.toarray(), np.eye(4))
