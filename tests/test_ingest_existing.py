"""A repeated or scheduled ingest (the `ingest-letter` deployment after the
README's own CLI ingest) keeps a store written from the same source with the
same options and refuses a different one with the difference named."""

import os
import time

import numpy as np
import pytest

from infoclust_dask.io.ingest import existing_store_differences, ingest


def test_same_source_and_options_is_no_difference(tmp_path):
    dest = tmp_path / "wine.zarr"
    assert existing_store_differences(dest, "wine", standardize=True, n_folds=3) is None  # nothing there
    ingest("wine", dest, standardize=True, n_folds=3, chunks=60)
    assert existing_store_differences(dest, "wine", standardize=True, n_folds=3) == []
    diff = existing_store_differences(dest, "iris", standardize=False, n_folds=5, fold_seed=2)
    assert len(diff) == 4, diff
    assert "source: the store holds 'bundled:wine', asked 'bundled:iris'" in diff
    assert "standardize: the store has True, asked False" in diff
    assert "n_folds: the store has 3, asked 5" in diff and "fold_seed: the store has 0, asked 2" in diff


def test_a_source_file_changed_after_the_store_is_a_difference(tmp_path):
    src = tmp_path / "a.npy"
    np.save(src, np.random.default_rng(0).normal(size=(50, 3)))
    os.utime(src, (time.time() - 60, time.time() - 60))
    ingest(src, tmp_path / "a.zarr")
    assert existing_store_differences(tmp_path / "a.zarr", src) == []
    os.utime(src, (time.time() + 5, time.time() + 5))
    (diff,) = existing_store_differences(tmp_path / "a.zarr", src)
    assert "was modified" in diff and "after the store was written" in diff


def test_the_ingest_flow_keeps_a_matching_store_and_refuses_another(tmp_path):
    from infoclust_pipelines.ingest import ingest_flow

    dest = tmp_path / "wine.zarr"
    ingest("wine", dest, standardize=True, n_folds=3, chunks=60)
    before = sorted(p.stat().st_mtime_ns for p in dest.rglob("*"))
    # .fn: the flow's own function, as the deployment calls it (no task runs on this path)
    out = ingest_flow.fn(source="wine", dest=str(dest), standardize=True, n_folds=3)
    assert out == {"path": str(dest), "source": "wine", "kept": True}
    assert sorted(p.stat().st_mtime_ns for p in dest.rglob("*")) == before
    with pytest.raises(FileExistsError, match=r"A different store already exists .* n_folds: the store has 3, "
                                              r"asked 10\. Pass overwrite=true"):
        ingest_flow.fn(source="wine", dest=str(dest), standardize=True, n_folds=10)
