"""xarray in, xarray out: which dim holds the samples, and outputs indexed
by the caller's sample coordinate.

Every estimator takes two constructor parameters (so that they survive
``clone`` and pipelines):

``sample_dim`` : str, optional
    The dim of a DataArray (or of a Dataset's variables) that holds the
    samples, whatever its position; the other dims are the features (more
    than one are flattened, C order). With ``None``: a dim named ``sample``
    (the store layout) is the sample dim; unnamed dims (``dim_0``,
    ``dim_1``, as from numpy) follow the numpy rule (rows are samples); any
    other named dims are an error that lists them - never a silent guess.
``variables`` : list of str, optional
    For a Dataset: the data variables stacked as features (each with the
    sample dim; 1-D variables are one feature each). A label argument
    (``y`` of DC/MDA2, ``known`` of CMBC) may then name a variable of the
    same Dataset.

Outputs for xarray input are DataArrays over the sample dim with its
coordinate (``labels_``, ``predict``, ``predict_proba``, ``transform``,
``fit_predict``); their data stay numpy for numpy-backed and dask for
dask-backed input. numpy in gives numpy out, dask in gives dask out.
"""

from __future__ import annotations

import functools
import re

import numpy as np

#: methods whose first argument is the data and whose result has one entry per sample
PER_SAMPLE = ("predict", "predict_proba", "transform", "fit_predict", "fit_transform", "predict_x", "predict_y",
              "score_samples")
#: methods whose first argument is the data and whose result is not per sample
OTHERS = ("fit", "score", "bic", "aic")
#: the name of the second dim of 2-D outputs
SECOND_DIM = {"predict_proba": "cluster", "transform": "cluster", "fit_transform": "cluster"}
_UNNAMED = re.compile(r"dim_\d+$")


def is_xarray(obj) -> bool:
    return type(obj).__module__.startswith("xarray.") and type(obj).__name__ in ("DataArray", "Dataset")


def sample_dim_of(da, sample_dim=None, what="X"):
    """The dim of ``da`` that holds the samples (see the module docstring)."""
    dims = tuple(str(d) for d in da.dims)
    if sample_dim is not None:
        if sample_dim not in dims:
            raise ValueError(f"sample_dim={sample_dim!r} is not a dim of {what}; its dims are {dims}.")
        return sample_dim
    if "sample" in dims:
        return "sample"
    if all(_UNNAMED.match(d) for d in dims):
        return dims[0]
    raise ValueError(
        f"{what} has dims {dims}: which one holds the samples? Pass sample_dim= to the estimator, e.g. "
        f"{type_hint(dims)} (the others become features).")


def type_hint(dims):
    return f"sample_dim={dims[-1]!r}" if len(dims) > 1 else f"sample_dim={dims[0]!r}"


def as_samples(X, sample_dim=None, variables=None, what="X"):
    """``(2-D DataArray with dims (sample_dim, 'feature'), sample dim,
    coordinate or None)`` for xarray ``X``; ``(X, None, None)`` otherwise."""
    import xarray as xr

    if not is_xarray(X):
        return X, None, None
    if isinstance(X, xr.Dataset):
        return _stack_dataset(X, sample_dim, variables, what)
    sd = sample_dim_of(X, sample_dim, what)
    other = [d for d in X.dims if d != sd]
    names = X.attrs.get("feature_names")
    A = X.transpose(sd, *other)
    if len(other) == 0:
        raise ValueError(f"{what} has the one dim {sd!r}: a 1-D DataArray is one feature; use "
                         f"{what}.expand_dims('feature', axis=-1).")
    if len(other) > 1 and sample_dim is None and _UNNAMED.match(str(sd)):
        raise ValueError(f"{what} is a {X.ndim}-D DataArray with unnamed dims {tuple(X.dims)} of shape {X.shape}: "
                         "as for numpy input, only 2-D data are samples x features. Reshape it to 2-D, or name "
                         f"the dim that holds the samples (sample_dim={str(X.dims[0])!r}) to flatten the others "
                         "into features.")
    if len(other) > 1:
        n = A.sizes[sd]
        data = A.data.reshape(n, -1)
        names = None
    else:
        data = A.data
        if names is None and other[0] in A.indexes:  # the feature dim's coordinate (in memory, an index)
            names = [str(v) for v in A.indexes[other[0]]]
    out = xr.DataArray(data, dims=(sd, "feature"), attrs={"feature_names": names} if names is not None else {})
    return out, sd, _coord(X, sd)


def _coord(X, sd):
    c = X.coords.get(sd)
    return None if c is None else c.variable


def _stack_dataset(ds, sample_dim, variables, what):
    import xarray as xr

    if not variables:
        raise ValueError(f"{what} is a Dataset with data variables {sorted(map(str, ds.data_vars))}: say which "
                         "are features with the estimator's variables=[...].")
    missing = [v for v in variables if v not in ds.data_vars]
    if missing:
        raise KeyError(f"variables={list(variables)}: {missing} not in the Dataset; it holds "
                       f"{sorted(map(str, ds.data_vars))}.")
    first = ds[variables[0]]
    sd = sample_dim_of(first, sample_dim, f"{what}[{variables[0]!r}]")
    parts, names = [], []
    for v in variables:
        a = ds[v]
        if sd not in a.dims:
            raise ValueError(f"Variable {v!r} has dims {tuple(a.dims)}, without the sample dim {sd!r}.")
        a = a.transpose(sd, ...)
        data = a.data.reshape(a.sizes[sd], -1)
        parts.append(data)
        names += [str(v)] if data.shape[1] == 1 else [f"{v}[{j}]" for j in range(data.shape[1])]
    from .. import engine

    if any(engine.is_lazy(p) for p in parts):
        import dask.array as dask_array

        data = dask_array.concatenate([dask_array.asarray(p) for p in parts], axis=1)
    else:
        data = np.concatenate([np.asarray(p) for p in parts], axis=1)
    out = xr.DataArray(data, dims=(sd, "feature"), attrs={"feature_names": names})
    return out, sd, _coord(ds, sd)


def label_from(ds_or_x, y, sample_dim, what="y"):
    """A label argument that names a variable of the Dataset passed as X."""
    import xarray as xr

    if isinstance(y, str) and isinstance(ds_or_x, xr.Dataset):
        if y not in ds_or_x.data_vars:
            raise KeyError(f"{what}={y!r} is not a variable of the Dataset; it holds "
                           f"{sorted(map(str, ds_or_x.data_vars))}.")
        return ds_or_x[y]
    if isinstance(y, (list, tuple)) and isinstance(ds_or_x, xr.Dataset) and y and all(isinstance(v, str) for v in y):
        return [label_from(ds_or_x, v, sample_dim, what) for v in y]
    return aligned(ds_or_x, y, sample_dim, what)


def aligned(x, y, sample_dim, what="y"):
    """``y`` (a DataArray beside the DataArray or Dataset ``x``) in the order
    of ``x``'s sample coordinate: xarray objects pair by coordinate, not by
    position. The same labels in another order are reordered; missing or
    extra samples are refused (they cannot be paired)."""
    import xarray as xr

    if not (isinstance(y, xr.DataArray) and isinstance(x, (xr.DataArray, xr.Dataset))):
        return y
    sd = sample_dim if sample_dim in getattr(y, "dims", ()) else None
    if sd is None or sd not in x.coords or sd not in y.coords:
        return y
    xs, ys = x.indexes[sd], y.indexes[sd]
    if xs.equals(ys):
        return y
    if len(xs) == len(ys) and xs.isin(ys).all() and ys.is_unique:
        return y.sel({sd: xs})
    raise ValueError(f"{what} and X are DataArrays over different '{sd}' coordinates ({len(ys)} and {len(xs)} "
                     f"samples, {int((~xs.isin(ys)).sum())} of X's without a {what}): they are paired by "
                     f"coordinate, so select the same samples in both (e.g. {what}.sel({sd}=X.{sd})).")


def wrap(out, sd, coord, method):
    """A per-sample result as a DataArray over the sample dim ``sd``."""
    import xarray as xr

    if sd is None or out is None or is_xarray(out) or np.ndim(out) == 0:
        return out
    dims = (sd,) if np.ndim(out) == 1 else (sd, SECOND_DIM.get(method, "component"))
    coords = {sd: coord} if coord is not None and coord.shape[0] == out.shape[0] else {}
    return xr.DataArray(out, dims=dims, coords=coords, name=method if method != "fit_predict" else "labels")


def _second_view(method, args, kwargs, est, sd, X0):
    """AC's ``fit(X, y)`` / ``score(X, y)`` take a second data view: the same conversion."""
    if not args:
        return args
    y = label_from(X0, args[0], sd, "y")
    if is_xarray(y) and method in ("fit", "score") and getattr(est, "_y_is_second_view", False):
        y = as_samples(y, sd if sd in y.dims else est.sample_dim, None, "y")[0]
    return (y,) + tuple(args[1:])


def prepare_call(est, method_name, X, args, kwargs):
    """Convert xarray arguments of ``est.method_name(X, *args, **kwargs)``;
    returns ``(X, args, kwargs, finish)`` where ``finish(result)`` turns the
    per-sample result (and ``labels_`` after a fit) into DataArrays. A no-op
    for other input. (A function the wrappers call, so that each wrapper adds
    one frame to the stack levels of warnings, not two.)"""
    if not is_xarray(X):
        return X, args, kwargs, _same
    X0 = X
    X, sd, coord = as_samples(X, getattr(est, "sample_dim", None), getattr(est, "variables", None))
    args = _second_view(method_name, args, kwargs, est, sd, X0)
    for name in getattr(est, "_label_keywords", ()):
        if name in kwargs:
            kwargs = {**kwargs, name: label_from(X0, kwargs[name], sd, name)}

    def finish(out):
        if method_name in ("fit", "fit_predict", "fit_transform") and hasattr(est, "labels_"):
            est.labels_ = wrap(est.labels_, sd, coord, "labels_")
        if method_name in PER_SAMPLE:
            return wrap(out, sd, coord, method_name)
        return out

    return X, args, kwargs, finish


def _same(out):
    return out


def runner_for_call(est, X):
    """``engine.installed`` for one call of ``est`` on ``X``: the
    estimator's ``scheduler=`` if it names one, else the runner the data's
    size chooses (:func:`infoclust_dask.engine.place`); a store path is
    opened lazily to learn its size."""
    from .. import engine
    from .._inputs import is_path, open_input

    if X is not None and is_path(X):
        try:
            X = open_input(X)
        except Exception:  # noqa: BLE001 - the call itself reports what is wrong with X
            X = None
    return engine.installed(getattr(est, "scheduler", None), data=X)


def xarray_io(method_name, func):
    """Wrap an estimator method: the estimator's ``scheduler=`` installed
    for every pass of the call (:func:`infoclust_dask.engine.installed`),
    xarray input -> (samples, features) DataArray, per-sample output ->
    DataArray over the caller's sample dim."""
    @functools.wraps(func)
    def wrapper(self, X, *args, **kwargs):
        with runner_for_call(self, X):
            X, args, kwargs, finish = prepare_call(self, method_name, X, args, kwargs)
            return finish(func(self, X, *args, **kwargs))

    setattr(wrapper, "__wrapped_xarray__", True)  # noqa: B010 - a marker attribute on a function
    return wrapper


def data_method(func):
    """Written on an estimator's data method (``predict``, ``transform``,
    ``score``, ``fit_predict``, ...; ``fit`` gets it from
    :func:`~infoclust_dask.cluster._base.journaled`): the estimator's runner
    installed for the call's passes, xarray in and out (:func:`xarray_io`)."""
    if func.__name__ not in PER_SAMPLE + OTHERS:
        raise TypeError(f"data_method is for the methods {PER_SAMPLE + OTHERS}; got {func.__name__!r}.")
    return xarray_io(func.__name__, func)


class XarrayIO:
    """Mixin: the declarations of a subclass's special inputs, which its data
    methods (decorated with :func:`data_method`) read.

    A subclass declares its special inputs instead of being recognised by
    name: ``_y_is_second_view = True`` when ``fit(X, y)`` / ``score(X, y)``
    take a second data view (samples x features, converted like ``X``),
    ``_label_keywords`` the keyword arguments that hold per-sample labels
    (a variable name of the Dataset or an array over the sample dim)."""

    #: ``y`` of fit/score is a second (samples, features) view, not labels
    _y_is_second_view = False
    #: keyword arguments of fit that hold per-sample labels
    _label_keywords: tuple = ()

