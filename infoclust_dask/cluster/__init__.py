"""Estimators, one algorithm per module, scikit-learn conventions."""

from ._ac import AssociativeClustering
from ._cmbc import CMBC
from ._dc import DiscriminativeClustering
from ._kmeans import KMeans
from ._mixture import MDA2, IsotropicGaussianMixture
from ._smic import SMIC, local_scaling_affinity
from ._soft_kmeans import SoftKMeans

__all__ = ["AssociativeClustering", "CMBC", "DiscriminativeClustering", "IsotropicGaussianMixture", "KMeans", "MDA2", "SMIC", "SoftKMeans", "local_scaling_affinity"]
