"""What a clustering method written outside the package needs, in one
public place (the pieces the package's own methods use):

- a kernels module: :class:`Pass` blueprints of numpy functions on one row
  block (:func:`sq_distances` is the shared squared-distance table);
- an objectives module: plain numpy on the small statistics;
- an estimator module: a subclass of :class:`InfoclustEstimator` whose
  ``fit`` is decorated with :func:`journaled`, its data methods
  (``predict``, ``score``, ...) with :func:`data_method` (xarray in/out,
  the estimator's runner) and ``run_summary`` / ``held_out_score`` with
  :func:`installs_runner`, whose ``__init__`` assigns each parameter by
  name, whose docstring may take the shared parameters' text
  (``scheduler``, ``sample_dim``, ``variables``) through
  :func:`shared_parameters` and a ``{shared_parameters}`` line, whose
  parameters are declared with :class:`Interval` / :class:`Options` and checked by
  :func:`validate_params`, whose input is opened by :func:`prepare_input`
  and whose passes run through :mod:`infoclust_dask.engine`; optional
  ``run_summary(data)`` and ``held_out_score(X, aux)`` methods;
- one registry entry: ``register(Method(name, EstimatorClass, help))``;
  ``infoclust fit <name>``, cross-validation and the demo's method table
  then offer it (in the process that registered it).

``tests/toymethod/`` is a complete example, run through all three by
``tests/test_registry.py``.
"""

from ._inputs import encode_labels, prepare_input
from ._support.validation import ArrayLike, Interval, Options, check_n_clusters, check_random_state, validate_params
from .cluster._base import SHARED_CONSTRAINTS, InfoclustEstimator, installs_runner, journaled, shared_parameters
from .cluster._xarray import data_method
from .kernels import Pass, sq_distances
from .registry import Method, Option, register, unregister

__all__ = ["Pass", "sq_distances", "InfoclustEstimator", "SHARED_CONSTRAINTS", "journaled", "shared_parameters", "data_method", "installs_runner", "prepare_input", "encode_labels", "Interval",
           "Options", "ArrayLike", "validate_params", "check_n_clusters", "check_random_state", "Method", "Option",
           "register", "unregister"]
