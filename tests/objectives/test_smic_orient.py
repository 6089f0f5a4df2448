"""The sign rule of SMIC (Sugiyama et al. 2011, §2.3) against a reference
written column by column on copies, for every memory layout and column
count: a unary ufunc written in place into a strided column view gave wrong
values on AVX-512 machines for exactly 8 float64 columns of a C-ordered
array (the layout of the operator path's eigenvectors)."""

import numpy as np
import pytest

from infoclust_dask.objectives.smic import ROUNDOFF, orient


def _reference(V):
    cols = []
    for y in range(V.shape[1]):
        col = np.array(V[:, y], dtype=np.float64, copy=True)
        col = np.where(np.abs(col) < ROUNDOFF * np.abs(col).max(), 0.0, col)
        cols.append(-col if col.sum() < 0 else col)
    return np.column_stack(cols)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("c", list(range(1, 17)) + [24, 32])
def test_orient_equals_the_column_by_column_reference(c, order):
    rng = np.random.default_rng(c)
    V = np.asarray(rng.standard_normal((1000, c)) - 0.3, order=order)
    V[::7] *= 1e-13  # round-off entries
    ref = _reference(V)
    np.testing.assert_array_equal(orient(V), ref)
    W = V.copy(order=order)
    assert orient(W, copy=False) is not None
    np.testing.assert_array_equal(W, ref)
