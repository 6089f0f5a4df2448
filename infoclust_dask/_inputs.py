"""Inputs become arrays: store paths, zarr arrays, xarray objects and dask
or numpy arrays are opened and checked here (:func:`open_input`,
:func:`prepare_input`), sample weights and auxiliary labels too
(:func:`check_sample_weight`, :func:`encode_labels`) - the one module
where paths become arrays, so that the engine never imports the store.

Numpy input goes through scikit-learn's ``validate_data`` (so its standard
messages and ``n_features_in_`` bookkeeping apply); dask / xarray / store
input is checked lazily plus one counting pass that also yields the moments.
Parameters are validated apart, by :mod:`infoclust_dask._support.validation`.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
from sklearn.exceptions import DataConversionWarning

from . import engine
from .kernels.stats import MOMENTS

__all__ = ["DataInfo", "Opened", "is_path", "read_input", "open_input", "check_not_constant", "lazy_zarr", "prepare_input", "check_sample_weight",
           "encode_labels"]


class DataInfo:
    """Small facts about validated data: ``n``, ``d``, per-feature mean/var,
    and whether the caller gave lazy (dask/xarray/store) input."""

    def __init__(self, n, d, mean, var, lazy_input=False):
        self.n, self.d, self.mean, self.var = int(n), int(d), mean, var
        self.lazy_input = lazy_input


def is_path(data) -> bool:
    return isinstance(data, str) or hasattr(data, "__fspath__")


class Opened:
    """What :func:`read_input` found: the numpy or dask ``array``, the
    ``feature_names`` its source records (a store's or a DataArray's
    ``feature_names`` attribute), and ``kind``: ``"store"`` (written by this
    library), ``"zarr"`` (another zarr array or group), ``"xarray"``,
    ``"lazy"`` or ``"numpy"``."""

    __slots__ = ("array", "feature_names", "kind")

    def __init__(self, array, feature_names, kind):
        self.array, self.feature_names, self.kind = array, feature_names, kind


def read_input(data, variable: str = "x") -> Opened | None:
    """Decide once what ``data`` is and open it: a store path or URL is
    resolved once (ours: the lazily read ``variable`` with its attributes;
    another zarr store: its array), a
    ``zarr.Array`` is read lazily, numpy, dask or xarray input goes through
    :func:`infoclust_dask.engine.as_array`. The one place where paths become
    arrays, so that the engine never imports the store."""
    if data is None:
        return None
    if _is_zarr_array(data):
        return Opened(lazy_zarr(data), None, "zarr")
    if is_path(data):
        from .io.store import is_store_of_ours, open_dataset
        from .storage.location import resolve

        loc = resolve(data, "store")
        if loc.local is not None and not is_store_of_ours(loc) and (loc.local / "zarr.json").exists():
            return Opened(engine.as_array(_open_foreign(loc.local, variable)), None, "zarr")
        ds = open_dataset(loc)
        if variable not in ds:
            raise KeyError(
                f"The store {str(data)!r} has no variable {variable!r}; it holds {sorted(ds.data_vars)}."
            )
        return Opened(engine.as_array(ds[variable]), ds[variable].attrs.get("feature_names"), "store")
    if type(data).__module__.startswith("xarray."):
        return Opened(engine.as_array(data), (getattr(data, "attrs", None) or {}).get("feature_names"), "xarray")
    array = engine.as_array(data)
    return Opened(array, None, "lazy" if engine.is_lazy(array) else "numpy")


def open_input(data, variable: str = "x"):
    """The numpy or dask array behind ``data`` (:func:`read_input`)."""
    opened = read_input(data, variable)
    return None if opened is None else opened.array


def _is_zarr_array(data) -> bool:
    return type(data).__module__.startswith("zarr") and hasattr(data, "chunks") and hasattr(data, "shape")


def lazy_zarr(data):
    """A ``zarr.Array`` as a dask array over its chunks (read lazily, never
    loaded whole); anything else as it is."""
    if _is_zarr_array(data):
        import dask.array as da

        return da.from_zarr(data)
    return data


def _open_foreign(path: Path, variable: str):
    """A zarr store this library did not write: a plain zarr array (its
    ``zarr.json`` says ``node_type: array``), or a group written by
    ``xarray.to_zarr`` / zarr, whose ``variable`` (or only 2-D array, for
    ``x``) is read lazily."""
    import dask.array as da
    import zarr

    try:
        node = zarr.open(str(path), mode="r")
    except Exception as exc:  # zarr raises many types for damaged metadata
        raise ValueError(f"Could not open the zarr store at '{path}': {exc}") from None
    if isinstance(node, zarr.Array):
        return da.from_zarr(node)
    arrays = dict(node.arrays())
    if variable in arrays:
        return da.from_zarr(arrays[variable])
    two_d = [name for name, a in arrays.items() if a.ndim == 2]
    if variable == "x" and len(two_d) == 1:
        return da.from_zarr(arrays[two_d[0]])
    raise KeyError(f"The zarr store {str(path)!r} has no array {variable!r}"
                   + (f" and {len(two_d)} two-dimensional arrays {sorted(two_d)}" if variable == "x" else "")
                   + f"; it holds {sorted(arrays)}. Open it with xarray and pass the array you mean.")


def prepare_input(est, X, *, reset: bool, need_moments: bool = False, attr: str = "n_features_in_",
                  variable: str = "x", name: str = "X", allow_1d: bool = False):
    """``X`` (numpy, dask, xarray, a zarr array or a store path) as the
    array the passes read, checked, with its feature count (and names)
    recorded on ``est``; returns ``(array, DataInfo or None)``. Lazy data
    that many passes will read is placed on the workers
    (:func:`infoclust_dask.engine.prepare`, on the installed scheduler).

    numpy-like input is converted by scikit-learn's ``validate_data``
    (float64/float32, 2-D, finite, >= 1 sample); lazy input must be 2-D, numeric,
    row-chunked with known chunks and finite (checked in one pass, which also
    gives the per-feature moments). ``attr`` names the estimator attribute
    that records the number of features (a second view, e.g. associative
    clustering's ``y``, uses its own); ``variable`` is the store variable read
    for a path; ``allow_1d`` reads a 1-D array as one feature (a second view
    that is a single measurement).
    """
    from sklearn.utils.validation import check_array, validate_data

    if X is None:
        raise ValueError(f"{name} is None; pass the data: a numpy or dask array, an xarray object, a zarr array or "
                         "a store path.")
    dtype = getattr(X, "dtype", None)
    if dtype is not None and (np.dtype(dtype).kind in "MmV" or np.dtype(dtype).names):
        raise ValueError(f"{name} has dtype {np.dtype(dtype)}; clustering needs numbers. Convert those columns "
                         f"first (e.g. timestamps: {name}.astype('int64'); a structured array: one float column "
                         "per field) or leave them out.")
    X = lazy_zarr(X)
    if is_path(X) or engine.is_lazy(X):
        opened = read_input(X, variable=variable)
        assert opened is not None  # X is a path or a lazy array here
        if reset and attr == "n_features_in_":
            _set_feature_names(est, opened.feature_names)
        A = opened.array
        if A.ndim == 1 and allow_1d:
            A = A[:, None]
        if A.ndim != 2:
            fix = " Reshape your data with X.reshape(-1, 1) for a single feature." if A.ndim == 1 else ""
            raise ValueError(f"Expected 2D array, got {A.ndim}D array of shape {A.shape} instead.{fix}")
        if A.dtype == np.bool_:  # as for numpy input: booleans are 0/1 numbers
            A = A.astype(np.float64)
        if not (np.issubdtype(A.dtype, np.floating) or np.issubdtype(A.dtype, np.integer)):
            raise ValueError(f"{name} must be numeric; got dtype {A.dtype}. Convert it with "
                             f"{name}.astype('float64').")
        if A.shape[0] == 0:
            raise ValueError(f"Found array with 0 sample(s) (shape={A.shape}) while a minimum of 1 is required.")
        if A.shape[1] == 0:
            raise ValueError(f"Found array with 0 feature(s) (shape={A.shape}) while a minimum of 1 is required.")
        _check_width(est, A, reset, attr, name)
        if not need_moments:
            return A, None
        A = engine.prepare(A)  # many passes follow
        first = np.asarray(engine.rows_at(A, [0])[0], dtype=np.float64)
        shift = first if np.all(np.isfinite(first)) else None
        st = engine.map_reduce(MOMENTS, A, params={"shift": shift})
        if int(st["n_bad"]):
            raise ValueError(
                f"Input {name} contains {int(st['n_bad'])} NaN or infinite values. Drop or impute "
                "them first (e.g. `infoclust ingest --drop-nonfinite`). A store written by infoclust "
                "holds none, so there they mean damaged bytes: check it with `infoclust verify STORE`."
            )
        return A, _check_magnitude(_info(st, A.shape, shift), A.dtype, name)
    if allow_1d and np.ndim(X) == 1:
        X = np.asarray(X).reshape(-1, 1)
    kind = getattr(getattr(X, "dtype", None), "kind", None)
    if kind is None and isinstance(X, (list, tuple)):
        kind = np.asarray(X).dtype.kind
    if kind in ("U", "S"):  # numbers written as text are not read as numbers silently
        raise ValueError(f"{name} holds text (dtype {np.asarray(X).dtype if not hasattr(X, 'dtype') else X.dtype}); "
                         f"clustering needs numbers. Convert it first, e.g. {name}.astype(float), or ingest the "
                         "file with `infoclust ingest` (which parses CSV numbers).")
    if attr == "n_features_in_" and type(X).__module__.startswith("xarray."):
        # scikit-learn knows feature names of DataFrames only: a DataArray's come from its attrs/coords
        A = check_array(np.asarray(X.data), dtype=[np.float64, np.float32], ensure_min_samples=1, input_name=name)
        _check_width(est, A, reset, attr, name)
        if reset:
            _set_feature_names(est, X.attrs.get("feature_names"))
        else:
            _check_feature_names(est, X.attrs.get("feature_names"), name)
    elif attr == "n_features_in_":
        A = validate_data(est, X, reset=reset, dtype=[np.float64, np.float32], ensure_min_samples=1)
    else:
        A = check_array(X, dtype=[np.float64, np.float32], ensure_min_samples=1, input_name=name)
        _check_width(est, A, reset, attr, name)
    if not need_moments:
        return A, None
    shift = A[0].astype(np.float64)
    info = _info(engine.map_reduce(MOMENTS, A, params={"shift": shift}, scheduler="threads"), A.shape, shift)
    info.lazy_input = False
    return engine.prepare(A), _check_magnitude(info, A.dtype, name)


#: per dtype: the largest feature scale (|mean| + standard deviation) whose squared distances stay finite
MAX_SCALE = {np.dtype(np.float64): 1e150, np.dtype(np.float32): 1e18}
#: per dtype: the smallest largest-feature scale whose squared distances stay normal numbers (not underflowing
#: to zero, which put every row in one cluster with a zero cost)
MIN_SCALE = {np.dtype(np.float64): 1e-150, np.dtype(np.float32): 1e-17}


def _check_magnitude(info, dtype, name):
    """Refuse data whose squared distances overflow (``X * 1e300`` gave
    K-means an infinite inertia and soft K-means NaN centres) or underflow
    (``X * 1e-300`` put every row in one cluster at cost 0)."""
    limit = MAX_SCALE.get(np.dtype(dtype), 1e150)
    scale = np.abs(info.mean) + np.sqrt(info.var)
    if not np.all(np.isfinite(info.var)) or not np.all(np.isfinite(info.mean)) or np.any(scale > limit):
        j = int(np.argmax(np.where(np.isfinite(scale), scale, np.inf)))
        raise ValueError(f"{name} has values too large for squared distances in {np.dtype(dtype)} (feature {j}: "
                         f"mean {info.mean[j]:.3g}, variance {info.var[j]:.3g}; the limit is about {limit:.0e}). "
                         "Rescale the data first (e.g. `infoclust ingest --standardize`).")
    low = MIN_SCALE.get(np.dtype(dtype), 1e-150)
    largest = float(np.max(scale)) if scale.size else 0.0
    if 0.0 < largest < low:
        raise ValueError(f"{name} has values too small for squared distances in {np.dtype(dtype)}: its largest "
                         f"feature scale (|mean| + standard deviation) is {largest:.3g}, below about {low:.0e}, so "
                         "the squared distances underflow to zero and every row looks alike. Rescale the data "
                         "first (e.g. multiply it by a power of ten, or `infoclust ingest --standardize`).")
    return info


def check_not_constant(info, name: str) -> None:
    """Refuse data whose rows are all equal (every feature constant): there
    is nothing to cluster, and data-scaled defaults (DC's widths, SMIC's
    local scales) would be zero."""
    if info is not None and info.n > 1 and not np.any(np.asarray(info.var) > 0):
        raise ValueError(f"{name}: every feature is constant (all {info.n} rows are equal), so there is nothing to "
                         "cluster. Check the data (a column of ones? the wrong variable?).")


def _set_feature_names(est, names):
    """``feature_names_in_`` from a store's (or a DataArray's) ``feature_names``
    attribute, written at ingest from a CSV header or DataFrame columns."""
    if names is not None:
        est.feature_names_in_ = np.asarray([str(n) for n in names], dtype=object)
    elif hasattr(est, "feature_names_in_"):
        del est.feature_names_in_


def _check_feature_names(est, names, name):
    fitted = getattr(est, "feature_names_in_", None)
    if fitted is None or names is None:
        return
    names = [str(n) for n in names]
    if names != list(fitted):
        raise ValueError(f"The feature names of {name} ({names}) differ from those seen in fit "
                         f"({list(fitted)}): pass the same features in the same order.")


def _check_width(est, A, reset, attr, name):
    if reset:
        setattr(est, attr, int(A.shape[1]))
    elif A.shape[1] != getattr(est, attr):
        raise ValueError(
            f"{name} has {A.shape[1]} features, but {type(est).__name__} is expecting "
            f"{getattr(est, attr)} features as input."
        )


def _info(st, shape, shift=None):
    n = int(st["n"])
    with np.errstate(over="ignore", invalid="ignore"):  # data too large for squares: _check_magnitude says so
        mean_shifted = st["s1"] / n
        var = np.maximum(st["s2"] / n - mean_shifted**2, 0.0)
        mean = mean_shifted if shift is None else mean_shifted + shift
    return DataInfo(n, shape[1], mean, var, lazy_input=True)


def check_sample_weight(sample_weight, X):
    """``None`` or a non-negative 1-D weight vector aligned with ``X``."""
    if sample_weight is None:
        return None
    if engine.is_lazy(sample_weight) or engine.is_lazy(X):
        w = open_input(sample_weight)
    else:
        w = np.asarray(sample_weight, dtype=np.float64)
        if w.ndim == 0:
            return np.full(X.shape[0], float(w))
        if np.any(~np.isfinite(w)) or np.any(w < 0):
            raise ValueError("sample_weight must be finite and >= 0.")
        if w.ndim == 1 and w.size and not w.sum() > 0:
            raise ValueError(
                "sample_weight is zero for every sample; at least one weight must be positive."
            )
    if w.ndim != 1 or w.shape[0] != X.shape[0]:
        raise ValueError(
            f"sample_weight.shape == {w.shape}, expected ({X.shape[0]},) to match X."
        )
    return engine.prepare(w) if engine.is_lazy(w) else w  # many passes follow, as for X


def encode_labels(y, n_samples, *, classes=None, min_classes=2, name="y"):
    """Validate and encode auxiliary labels ``y`` (numpy, dask, xarray or the
    ``label`` of a store path): 1-D, one per sample, any sortable values
    (ints, strings, ...; not NaN). Returns ``(codes, classes_)``: ``codes`` in
    ``0 .. len(classes_)-1`` (numpy or lazy, placed by
    :func:`infoclust_dask.engine.prepare`), ``classes_`` the sorted distinct
    labels, or ``classes`` when given (then every label must be one of them;
    classes absent from ``y`` keep their code, e.g. in a cross-validation
    fold). Integer labels that already are ``0 .. C-1`` are used as they are."""
    from .kernels.stats import ENCODE_LABELS, LABEL_VALUES

    if y is None:
        raise ValueError(f"{name} is None: this estimator learns from auxiliary labels; pass one label per "
                         f"sample as {name} (e.g. fit(X, y)).")
    Y = open_input(y, variable="label")
    if Y.ndim == 2 and Y.shape[1] == 1:
        warnings.warn(f"A column-vector y was passed when a 1d array was expected: {name} of shape {Y.shape} is "
                      "read as its one column; pass y.ravel() to silence this.", DataConversionWarning, stacklevel=3)
        Y = Y[:, 0]
    if Y.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one label per sample); got shape {Y.shape}.")
    if Y.shape[0] != n_samples:
        raise ValueError(f"{name} has {Y.shape[0]} labels but X has {n_samples} samples; they must match.")
    try:
        values = engine.map_reduce(LABEL_VALUES, Y)["values"] if engine.is_lazy(Y) else np.unique(Y)
    except TypeError as exc:
        raise ValueError(f"{name} holds labels of mixed types that cannot be sorted ({exc}); use one type.") from None
    if values.dtype.kind == "f" and np.isnan(values).any():
        raise ValueError(f"{name} contains NaN labels; drop those samples or give them a class.")
    if values.dtype.kind == "f" and values.size > 20 and np.any(values != np.round(values)):
        raise ValueError(f"{name} holds continuous values, {values.size} distinct non-integer numbers ({values[:3].tolist()} ...): it "
                         "looks like a measurement, not class labels. Pass classes (ints or strings), or bin the "
                         "values first (e.g. numpy.digitize).")
    if values.dtype.kind not in "biufUSO":
        raise ValueError(f"{name} must hold class labels (ints or strings); got dtype {values.dtype}.")
    if classes is None:
        classes_ = values
    else:
        classes_ = np.unique(np.asarray(classes))
        unknown = np.setdiff1d(values, classes_)
        if unknown.size:
            raise ValueError(f"{name} holds labels {unknown[:5].tolist()} that are not among classes="
                             f"{classes_[:10].tolist()}; add them to classes or leave classes=None.")
    if classes_.size < min_classes:
        raise ValueError(f"{name} must hold at least {min_classes} classes; got {classes_.size} "
                         f"class{'' if classes_.size == 1 else 'es'} ({classes_[:5].tolist()}).")
    identity = classes_.dtype.kind in "iu" and np.array_equal(classes_, np.arange(classes_.size))
    if identity and Y.dtype.kind in "iu":
        codes = Y
    elif engine.is_lazy(Y):
        codes = engine.map_blocks(ENCODE_LABELS, Y, params={"classes": classes_})
    else:
        codes = np.searchsorted(classes_, Y).astype(np.int32)
    return engine.prepare(codes), classes_
