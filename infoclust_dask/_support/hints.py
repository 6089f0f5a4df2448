"""Type hints of the public signatures (documentation for readers and
type checkers; the data arguments take many kinds of objects, hence
``Any`` underneath)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Union

import numpy as np

__all__ = ["NumbersLike", "RandomStateLike", "SchedulerLike", "DataLike", "Labels", "Sequence", "PathLike", "Array"]

#: type hints of the estimators' signatures: array-like numbers, a seed, where passes run
NumbersLike = Union[Sequence[Any], np.ndarray]
RandomStateLike = Union[int, np.random.Generator, np.random.RandomState, None]
#: None, "sync", "threads", "local", a scheduler address, a distributed.Client or a dask cluster object
SchedulerLike = Any
#: the data an estimator reads: a numpy, dask or xarray array, an xarray Dataset, a zarr array or a store path
DataLike = Any
#: per-row results: numpy for numpy input, lazy (dask / xarray) for lazy input
Labels = Any
#: a local path (str or os.PathLike)
PathLike = Union[str, os.PathLike]
#: an in-memory result
Array = np.ndarray
