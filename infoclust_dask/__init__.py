"""infoclust_dask: information-theoretic clustering for data larger than memory.

Every pass over the data is a map-reduce over dask chunks
(:mod:`infoclust_dask.engine`); the estimators in :mod:`infoclust_dask.cluster`
follow scikit-learn's conventions.

The public names below are imported on first use (PEP 562 module
``__getattr__``, as scikit-learn and scipy do), so that ``import
infoclust_dask``, ``infoclust --version`` and the command's helper processes
do not load dask, scikit-learn or the compiled kernels until they are needed.
"""

from __future__ import annotations

import importlib

from ._support import moved as _moved

__version__ = "0.1.0"

#: public name -> the submodule that defines it
_LAZY = {
    "AssociativeClustering": ".cluster",
    "CMBC": ".cluster",
    "DiscriminativeClustering": ".cluster",
    "IsotropicGaussianMixture": ".cluster",
    "KMeans": ".cluster",
    "MDA2": ".cluster",
    "SMIC": ".cluster",
    "SoftKMeans": ".cluster",
    "expected_failed_checks": ".cluster",
    "map_reduce": ".engine",
    "open_dataset": ".io.store",
    "write_dataset": ".io.store",
    "append_dataset": ".io.append",
    "save_model": ".runs",
    "load_model": ".runs",
}

#: subpackages and modules reachable as attributes (``infoclust_dask.cluster``) without importing them first
_SUBMODULES = frozenset({
    "cli", "cluster", "crossval", "datasets", "engine", "io", "journal", "kernels", "metrics", "objectives",
    "plotting", "preprocess", "registry", "reliability", "runs", "solvers", "storage", "update",
})
# Modules that moved into the ``io``, ``storage`` and ``solvers`` packages (fourth shape step) stay importable
# and reachable as attributes by their old names for one release, with a DeprecationWarning naming the new one
# (``infoclust_dask.store`` is ``infoclust_dask.io.store``): an import hook, no file at the old path.
_moved.install()

__all__ = sorted(_LAZY) + ["__version__"]


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    if f"{__name__}.{name}" in _moved.MOVED:
        return importlib.import_module(f"{__name__}.{name}")
    try:
        module = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
