"""Estimators, one algorithm per module, scikit-learn conventions."""

from ._dc import DiscriminativeClustering
from ._kmeans import KMeans
from ._soft_kmeans import SoftKMeans

__all__ = ["DiscriminativeClustering", "KMeans", "SoftKMeans"]
