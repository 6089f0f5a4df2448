"""A toy method added from outside the package: one kernel module, one
objective module, one estimator module and this one registry entry."""

from infoclust_dask.extend import Method

from .estimator import OneStepMeans

METHOD = Method("onestep", OneStepMeans, "one Lloyd step from the first k rows (a toy from tests/)")
