"""infoclust_dask: information-theoretic clustering for data larger than memory.

Every pass over the data is a map-reduce over dask chunks
(:mod:`infoclust_dask.engine`); the estimators in :mod:`infoclust_dask.cluster`
follow scikit-learn's conventions.
"""

__version__ = "0.1.0"

from .cluster import CMBC, SMIC, AssociativeClustering, DiscriminativeClustering, KMeans, SoftKMeans  # noqa: E402
from .engine import map_reduce  # noqa: E402
from .store import open_dataset, write_dataset  # noqa: E402

__all__ = ["AssociativeClustering", "CMBC", "DiscriminativeClustering", "KMeans", "SMIC", "SoftKMeans", "map_reduce", "open_dataset", "write_dataset", "__version__"]
