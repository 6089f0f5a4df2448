"""Cross-validation folds without copying the data.

Two kinds of folds, both as a per-row fold number:

- ``"ranges"``: fold f is the index range ``[f n / k, (f + 1) n / k)``
  (computed from row numbers; nothing stored). Right for data already in
  random order; wrong for data sorted by class or time.
- ``"stored"``: the store's ``fold`` vector, written at ingest
  (``infoclust ingest --folds K``) from a seeded hash of the row number, so
  each row's fold is random, fixed, and independent of chunking.

:func:`split` returns the training and held-out rows of a store as lazy,
row-selected views (:func:`infoclust_dask.engine.take_rows`): the data are
read only by the passes that use them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .. import engine
from .._support.hints import SchedulerLike, Sequence
from .._support.sizes import fold_chunk_rows
from ..kernels.stats import HASHED_FOLDS, RANGE_FOLDS

if TYPE_CHECKING:
    import xarray as xr

__all__ = ["fold_vector", "fold_ids", "split", "FOLD_KINDS"]

FOLD_KINDS = ("ranges", "stored")


def fold_vector(n_samples: int, n_folds: int, *, seed: int = 0, chunks: int | None = None) -> Any:
    """A lazy int16 fold number per row (hashed, seeded) for a new store."""
    import dask.array as da

    n_folds = _check_folds(n_folds, n_samples)
    rows = int(chunks or fold_chunk_rows(n_samples))
    base = da.zeros((n_samples, 1), chunks=(rows, 1), dtype=np.int8)
    return engine.map_blocks(HASHED_FOLDS, base, params={"seed": int(seed), "n_folds": n_folds})


def _check_folds(n_folds, n_samples):
    if isinstance(n_folds, bool) or not isinstance(n_folds, (int, np.integer)) or n_folds < 2:
        raise ValueError(f"n_folds must be an integer >= 2; got {n_folds!r}.")
    if n_folds > n_samples:
        raise ValueError(f"n_folds={n_folds} is more than the {n_samples} samples; use at most {n_samples}.")
    return int(n_folds)


def fold_ids(ds: xr.Dataset, n_folds: int | None, kind: str = "ranges") -> Any:
    """The fold number of every row of the dataset ``ds`` (lazy, int16)."""
    n = int(ds.sizes["sample"])
    if kind == "ranges":
        n_folds = _check_folds(n_folds, n)
        return engine.map_blocks(RANGE_FOLDS, ds["x"].data, params={"n_total": n, "n_folds": n_folds})
    if kind == "stored":
        if "fold" not in ds:
            raise ValueError(
                "The store has no 'fold' vector. Write one with `infoclust ingest SRC DEST --folds K` "
                "(or infoclust_dask.io.preprocessed.preprocess_store(..., n_folds=K)), or use fold kind 'ranges'."
            )
        stored = int(ds.attrs.get("n_folds", 0))
        if stored and n_folds is not None and int(n_folds) != stored:
            raise ValueError(f"The store's fold vector has {stored} folds, not {n_folds}; "
                             f"use n_folds={stored} or fold kind 'ranges'.")
        return ds["fold"].data
    raise ValueError(f"fold kind must be one of {FOLD_KINDS}; got {kind!r}.")


@engine.entry_point
def split(ds: xr.Dataset, fold: int, n_folds: int | None, kind: str = "ranges", *,
          variables: Sequence[str] = ("x", "label"), scheduler: SchedulerLike = None) -> tuple[dict, dict]:
    """Training and held-out rows of fold ``fold``.

    Returns two dicts ``{variable: array}`` (training, held-out) with lazy,
    row-selected views of the store's variables; variables the store lacks
    are left out.
    """
    ids = fold_ids(ds, n_folds, kind)
    n_folds = int(n_folds or ds.attrs.get("n_folds") or 0)
    if n_folds < 2:
        raise ValueError("The store does not record its number of folds (attribute 'n_folds'); pass n_folds.")
    if not 0 <= int(fold) < n_folds:
        raise ValueError(f"fold must be in 0 .. {n_folds - 1}; got {fold}.")
    train, test = {}, {}
    for name in variables:
        if name in ds:
            train[name] = engine.take_rows(ds[name], ids != fold)
            test[name] = engine.take_rows(ds[name], ids == fold)
    return train, test
