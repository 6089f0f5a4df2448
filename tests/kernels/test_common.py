"""The shared pieces: the one softmax, the row-subset rule, the Pass
blueprint's dispatch (subset applied once, ``start`` only when declared)."""

import numpy as np
import pytest

from infoclust_dask.kernels._common import (
    Pass,
    combine_concat,
    combine_sum,
    in_sub_blocks,
    run_chunk,
    softmax,
    subset_rows,
)


def test_softmax_matches_the_formula_and_never_overflows():
    e = np.random.default_rng(0).normal(size=(50, 6)) * 3
    ref = np.exp(e) / np.exp(e).sum(axis=1, keepdims=True)
    r, log_z = softmax(e.copy(), log_z=True)
    np.testing.assert_allclose(r, ref, rtol=1e-12)
    np.testing.assert_allclose(log_z, np.log(np.exp(e).sum(axis=1)), rtol=1e-12)
    big = softmax(np.array([[1e4, 1e4 - 1.0, -1e4]]))
    np.testing.assert_allclose(big, [[1 / (1 + np.exp(-1)), np.exp(-1) / (1 + np.exp(-1)), 0.0]], rtol=1e-12)
    v = softmax(np.array([0.0, np.log(3.0)]))  # 1-D
    np.testing.assert_allclose(v, [0.25, 0.75])


def test_subset_rule_splits_rows_by_their_hash():
    train = subset_rows(10_000, 123, (7, 0.8, "train"))
    valid = subset_rows(10_000, 123, (7, 0.8, "valid"))
    assert not np.any(train & valid) and np.all(train | valid)
    assert 0.78 < train.mean() < 0.82
    # a row's side does not depend on the block it is in
    np.testing.assert_array_equal(subset_rows(100, 150, (7, 0.8, "train")), train[27:127])
    assert subset_rows(10, 0, None) is None



@pytest.mark.parametrize("cache_rows", [1 << 16, 0])
def test_a_pass_takes_the_same_rows_with_and_without_the_kept_row_numbers(monkeypatch, cache_rows):
    """Blocks of at most SUBSET_CACHE_ROWS rows take their subset by row
    numbers kept between passes, larger ones by the hashed mask: the same
    rows, in order, for every block and side (here both ways on the same
    blocks); the kept numbers are read-only."""
    from infoclust_dask.kernels import _common

    monkeypatch.setattr(_common, "SUBSET_CACHE_ROWS", cache_rows)
    rng = np.random.default_rng(1)
    x, c = rng.normal(size=(3000, 5)), rng.integers(0, 4, 3000)
    seen = []
    bp = Pass("probe", lambda xb, cb: seen.append((xb, cb)) or xb.sum(), inputs=("x", "c"), subset=True)
    for start, stop in ((0, 1000), (1000, 3000)):
        for side in ("train", "valid"):
            for _ in range(2):  # the second pass over a block: the kept numbers, when kept
                run_chunk(bp, start, [x[start:stop], c[start:stop]], {"subset": (9, 0.7, side)})
                keep = subset_rows(stop - start, start, (9, 0.7, side))
                np.testing.assert_array_equal(seen[-1][0], x[start:stop][keep])
                np.testing.assert_array_equal(seen[-1][1], c[start:stop][keep])
    rows = _common._subset_indices(1000, 0, 9, 0.7, "train")
    assert not rows.flags.writeable


def _kernel(x, *, start=None, k=1):
    return {"rows": np.array([x.shape[0]]), "start": np.array([-1 if start is None else start]), "k": k}


def test_run_chunk_applies_the_declared_contract():
    x = np.arange(20.0).reshape(10, 2)
    plain = run_chunk(Pass("p", _kernel, combine=combine_concat), 40, [x], {"k": 2})
    assert plain["start"][0] == -1 and plain["rows"][0] == 10 and plain["k"] == 2
    with_start = run_chunk(Pass("p", _kernel, start=True), 40, [x], {})
    assert with_start["start"][0] == 40
    sub = run_chunk(Pass("p", _kernel, subset=True), 40, [x], {"subset": (1, 0.5, "train")})
    assert sub["rows"][0] == subset_rows(10, 40, (1, 0.5, "train")).sum()
    with pytest.raises(ValueError, match="kind must be"):
        Pass("bad", _kernel, kind="scan")


def test_sub_blocks_add_up_to_the_whole(monkeypatch):
    import infoclust_dask.kernels._common as common

    x = np.random.default_rng(1).normal(size=(100, 3))

    def rows(a, *, start):
        return {"s": a.sum(axis=0), "first": np.array(float(start))}

    whole = in_sub_blocks(rows, (x,), 7)
    monkeypatch.setattr(common, "SUB_ROWS", 16)
    parts = in_sub_blocks(rows, (x,), 7)
    np.testing.assert_allclose(parts["s"], whole["s"], rtol=1e-12)
    assert parts["first"] == sum(7 + i for i in range(0, 100, 16))  # each sub-block got its own start
    assert combine_sum([{"a": 1}, {"a": 2}])["a"] == 3
