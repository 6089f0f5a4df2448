"""Estimators, one algorithm per module, scikit-learn conventions; and the
functions of their modules that other layers (reliability, the flows,
benchmarks) use."""

from ._ac import AssociativeClustering, ac_objective, cross_cluster_table
from ._cmbc import CMBC
from ._conventions import expected_failed_checks
from ._dc import DiscriminativeClustering, dc_objective
from ._kmeans import KMeans
from ._mixture import MDA2, IsotropicGaussianMixture
from ._smic import DRIVER_KERNEL_MAX_ROWS, SMIC, choose_t, knn_recall, local_scaling_affinity
from ._soft_kmeans import SoftKMeans

__all__ = ["AssociativeClustering", "CMBC", "DiscriminativeClustering", "IsotropicGaussianMixture", "KMeans", "MDA2",
           "SMIC", "SoftKMeans", "local_scaling_affinity", "ac_objective", "dc_objective", "cross_cluster_table",
           "choose_t", "knn_recall", "DRIVER_KERNEL_MAX_ROWS", "expected_failed_checks"]
