"""The model file: a fitted estimator as JSON (schema ``infoclust-model``,
never pickle) - what :func:`save_model` writes and :func:`read_model`
checks and rebuilds. The estimator classes are not imported here: the
caller says how a class name in a file becomes a class
(:func:`infoclust_dask.runs.load_model` looks it up among the package's
estimators; a warm start, ``fit(init=path)``, accepts only the class being
fitted), so that the estimators can read model files without importing the
run-folder layer that imports them."""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ._support.hints import PathLike
from .storage.location import run_path, write_whole

__all__ = ["save_model", "read_model", "write_json", "allow_model_class", "MODEL_CLASSES", "MAX_MODEL_PROTOTYPES",
           "MAX_MODEL_VALUE"]

_FITTED = (
    "cluster_centers_", "inertia_", "n_iter_", "cluster_sizes_", "n_features_in_", "betas_", "centers_path_",
    "free_energy_path_", "n_iter_path_", "beta_", "data_scale_", "sigma_", "n_classes_", "reg_strength_",
    "contingency_", "cluster_centers_x_", "cluster_centers_y_", "n_features_y_in_",
    "t_", "t_excluded_", "knn_", "knn_recall_", "lsmi_", "eigenvalues_", "class_prior_", "timings_", "classes_",
    "theta_", "gamma_", "n_patterns_", "temperatures_", "objective_history_", "feature_names_in_",
    "means_", "variances_", "weights_", "class_probabilities_", "loglik_history_",
    "training_store_", "training_digest_", "state_file_", "state_sha256_", "n_samples_fit_", "n_components_",
)
#: SMIC's per-row training state, saved beside the model file (``<model>.state.npz``): predict needs it
_SMIC_STATE = ("eigenvectors_", "degree_", "local_scales_", "eigen_rotation_")


def _jsonable(v):
    if isinstance(v, np.ndarray):
        return {"__ndarray__": v.tolist(), "dtype": str(v.dtype)}
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    return repr(v)


def _from_json(v):
    if isinstance(v, dict) and "__ndarray__" in v:
        return np.asarray(v["__ndarray__"], dtype=v["dtype"])
    if isinstance(v, dict):
        keys = list(v)
        if keys and all(isinstance(k, str) and k.lstrip("-").isdigit() for k in keys):
            keys = [int(k) for k in keys]  # _jsonable wrote int keys (SMIC's lsmi_ per t) as strings
        return {k: _from_json(x) for k, x in zip(keys, v.values(), strict=True)}
    return v


def write_json(path: PathLike, obj: Any, *, overwrite: bool = False) -> Path:
    """Atomically write ``obj`` as JSON (numpy arrays and scalars allowed)."""
    return write_whole(path, (json.dumps(_jsonable(obj), indent=2) + "\n").encode("utf-8"), overwrite=overwrite)


#: what a model file may name: the estimators, and nothing else
MODEL_CLASSES = ("KMeans", "SoftKMeans", "DiscriminativeClustering", "AssociativeClustering", "CMBC", "SMIC",
                 "MDA2", "IsotropicGaussianMixture")
#: estimator classes registered from outside the package (:func:`infoclust_dask.registry.register`): name -> class
_REGISTERED_CLASSES: dict = {}
MODEL_SCHEMA = "infoclust-model"
MODEL_SCHEMA_VERSION = 1
_DTYPES = ("float64", "float32", "int64", "int32", "int16", "int8", "uint8", "bool", "<U")


def allow_model_class(cls: type, allowed: bool = True) -> None:
    """Let :func:`save_model` / :func:`load_model` handle the estimator class
    ``cls`` of a method registered from outside the package (its name must
    not shadow one of :data:`MODEL_CLASSES`); ``allowed=False`` takes it back."""
    name = cls.__name__
    if name in MODEL_CLASSES:
        raise ValueError(f"A registered estimator may not be named like a built-in one ({name}).")
    if allowed:
        _REGISTERED_CLASSES[name] = cls
    else:
        _REGISTERED_CLASSES.pop(name, None)


def save_model(est: Any, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Save a fitted estimator's parameters and small fitted state as JSON
    (schema ``infoclust-model`` version 1; never pickle)."""
    from . import __version__

    name = type(est).__name__
    if name not in MODEL_CLASSES and _REGISTERED_CLASSES.get(name) is not type(est):
        raise TypeError(f"save_model saves the estimators {MODEL_CLASSES} and registered methods' estimators "
                        f"{sorted(_REGISTERED_CLASSES)}; got {name}.")
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    try:
        check_is_fitted(est)
    except NotFittedError:
        raise NotFittedError(f"save_model saves fitted estimators; this {name} is not fitted (a file of it would "
                             "hold no model, and loading it would fail). Call fit first.") from None
    params = {k: v for k, v in est.get_params().items() if k != "scheduler"}
    fitted = {k: getattr(est, k) for k in _FITTED if hasattr(est, k)}
    if name == "SMIC" and hasattr(est, "eigenvectors_") and getattr(est, "training_store_", None):
        fitted.update(_save_smic_state(est, path, overwrite))
    elif name == "SMIC" and hasattr(est, "eigenvectors_"):
        import warnings

        warnings.warn("save_model: this SMIC was fitted on arrays, not on a store: the saved model keeps t, LSMI "
                      "and the eigenvalues but cannot predict new rows (SMIC's out-of-sample rule needs the "
                      "training rows, which a model file only names when they are a store). Fit on a store "
                      "(infoclust_dask.write_dataset) to save a model that predicts.", UserWarning, stacklevel=2)
    if "feature_names_in_" in fitted:  # object array of str (scikit-learn's type) -> a str array in the file
        fitted["feature_names_in_"] = np.asarray(fitted["feature_names_in_"], dtype=str)
    doc = {
        "schema": MODEL_SCHEMA,
        "schema_version": MODEL_SCHEMA_VERSION,
        "class": type(est).__name__,
        "library": f"infoclust_dask {__version__}",
        "params": params,
        "fitted": fitted,
    }
    return write_json(path, doc, overwrite=overwrite)


def _save_smic_state(est: Any, path: Any, overwrite: bool) -> dict:
    """SMIC's per-row state (n x c eigenvectors, degrees, local scales) as
    ``<model>.state.npz`` beside the model file, and what the model file
    records about it and about the training store (its digest, so that a
    changed store is refused at predict)."""
    import hashlib
    import io

    from .storage.manifest import store_digest

    target = run_path(path, "model file (written)")
    state = target.with_name(target.name.removesuffix(".json") + ".state.npz")
    buf = io.BytesIO()
    arrays: dict[str, Any] = {k: np.asarray(getattr(est, k)) for k in _SMIC_STATE}
    np.savez(buf, **arrays)
    data = buf.getvalue()
    write_whole(state, data, overwrite=overwrite)
    return {"state_file_": state.name, "state_sha256_": hashlib.sha256(data).hexdigest(),
            "training_digest_": store_digest(est.training_store_)}


def _load_smic_state(est: Any, where: Any) -> None:
    """Read back :func:`_save_smic_state`'s file, checking its hash."""
    import hashlib
    import io

    name = str(est.state_file_)
    if "/" in name or "\\" in name or name.startswith("."):
        raise ValueError(f"'{where}': state_file_ {name!r} must name a file beside the model file.")
    state = where.with_name(name)
    try:
        data = state.read_bytes()
    except FileNotFoundError:
        raise ValueError(f"'{where}': SMIC's training state '{state}' is missing (it is written beside "
                         "model.json); copy it with the model file, or refit.") from None
    if hashlib.sha256(data).hexdigest() != est.state_sha256_:
        raise ValueError(f"'{state}' is not the state saved with '{where}' (its SHA-256 differs); refit SMIC.")
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        arrays = {k: z[k] for k in _SMIC_STATE}
    n, c = int(est.n_samples_fit_), int(est.n_clusters)
    want = {"eigenvectors_": (n, c), "degree_": (n,), "local_scales_": (n,), "eigen_rotation_": (c, c)}
    for k, shape in want.items():
        if arrays[k].shape != shape or arrays[k].dtype.kind != "f" or not np.all(np.isfinite(arrays[k])):
            raise ValueError(f"'{state}': {k} has shape {arrays[k].shape} ({arrays[k].dtype}), the model gives "
                             f"{shape} of finite floats; refit SMIC.")
    for k, v in arrays.items():
        setattr(est, k, v)


def _checked_arrays(v, where):
    """Refuse arrays of types other than numbers, booleans and strings, and
    arrays whose values their declared dtype cannot hold exactly (a float
    centre declared int8 would be truncated or wrapped)."""
    if isinstance(v, dict) and "__ndarray__" in v:
        dt = str(v.get("dtype", ""))
        if not any(dt == d or (d == "<U" and dt.startswith("<U")) for d in _DTYPES):
            raise ValueError(f"{where}: an array of dtype {dt!r}; model files hold numbers and strings only.")
        if not dt.startswith("<U"):  # numbers: every value a number, the array rectangular
            try:
                kind = np.asarray(v["__ndarray__"]).dtype.kind
            except (TypeError, ValueError):  # numpy: "inhomogeneous shape"
                raise ValueError(f"{where}: its rows have different lengths (a ragged array): the model file "
                                 "was edited or damaged.") from None
            if kind not in "biuf" and np.size(v["__ndarray__"]):
                raise ValueError(f"{where}: it holds values that are not numbers (the file declares dtype {dt!r}, "
                                 "e.g. a number written as a string \"5\"): the model file was edited.")
        if dt[:1] in ("i", "u", "b") and dt != "bool" or dt == "bool":
            try:
                raw = np.asarray(v["__ndarray__"])
                held = np.asarray(v["__ndarray__"], dtype=dt)
                exact = raw.shape == held.shape and raw.dtype.kind in "biuf" and bool(np.all(raw == held))
            except (TypeError, ValueError, OverflowError):
                exact = False
            if not exact:
                raise ValueError(f"{where}: its values are not {dt} values (the file declares dtype {dt!r}; "
                                 "reading them as such would truncate or wrap them): the model file was edited.")
    elif isinstance(v, dict):
        for k, x in v.items():
            _checked_arrays(x, f"{where}.{k}")
    elif isinstance(v, list):
        for x in v:
            _checked_arrays(x, where)


def read_model(path: str | os.PathLike, lookup: Callable[[str], type]) -> Any:
    """Rebuild an estimator saved by :func:`save_model`.

    Only the estimator classes of this library (:data:`MODEL_CLASSES`) and
    those of methods registered in this process
    (:func:`infoclust_dask.registry.register`) are rebuilt, from their parameters and fitted arrays; nothing else named in
    the file is imported or called, and the document is checked against the
    schema first (a clear ``ValueError`` names what is wrong).

    K-means, soft K-means, DC (with its ``classes_``), AC and CMBC come back
    ready to ``predict`` (DC also to ``score``). A SMIC fitted on a store
    comes back ready to ``predict`` too: its model file names the store
    (with a digest of its manifests: a store changed since the fit is
    refused) and its per-row state (eigenvectors, degrees, local scales) is
    read from ``<model>.state.npz`` beside it (hash checked); the training
    rows are read from the store at ``predict``. A SMIC fitted on arrays
    comes back as a record of its fit (``t_``, ``lsmi_`` keyed by int ``t``,
    ``eigenvalues_``, ``timings_``, ...) - refit ``SMIC(t=model.t_)`` to
    predict.
    """
    where: Any = run_path(path, "model file")
    if where.is_dir():  # a run folder of `infoclust fit`: its model.json
        if not (where / "model.json").is_file():
            raise ValueError(f"'{path}' is a folder without a model.json: give the model file written by "
                             "save_model, or a run folder of `infoclust fit` that finished (it holds model.json).")
        where = where / "model.json"
    path = where
    try:
        doc = json.loads(where.read_text())
    except ValueError as exc:
        raise ValueError(f"'{path}' is not a model file (not JSON: {exc}).") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("class"), str) or \
            not isinstance(doc.get("params"), dict) or not isinstance(doc.get("fitted"), dict):
        raise ValueError(f"'{path}' is not a model file: it needs 'class' (a name), 'params' and 'fitted' "
                         "(objects), as written by save_model.")
    if doc.get("schema", MODEL_SCHEMA) != MODEL_SCHEMA or int(doc.get("schema_version", 1)) > MODEL_SCHEMA_VERSION:
        raise ValueError(f"'{path}' has schema {doc.get('schema')!r} version {doc.get('schema_version')}; this "
                         f"library reads {MODEL_SCHEMA!r} up to version {MODEL_SCHEMA_VERSION}. Upgrade infoclust_dask.")
    name = doc["class"].rpartition(".")[2]  # files of earlier versions give the module path too
    if doc["class"] in _REGISTERED_CLASSES:  # a method registered in this process (its code is imported already)
        cls = _REGISTERED_CLASSES[doc["class"]]
    elif name not in MODEL_CLASSES or (doc["class"] != name and not doc["class"].startswith("infoclust_dask.cluster.")):
        raise ValueError(f"'{path}' names class {doc['class']!r}, which is not an infoclust_dask estimator "
                         f"({', '.join(MODEL_CLASSES)}) nor a registered method's; it was not loaded.")
    else:
        cls = lookup(name)
    allowed = {p for p in inspect.signature(cls.__init__).parameters if p != "self"}
    unknown = sorted(set(doc["params"]) - allowed)
    if unknown:
        raise ValueError(f"'{path}': {name} has no parameters {unknown}; the file does not match this version.")
    unknown = sorted(set(doc["fitted"]) - set(_FITTED))
    if unknown:
        raise ValueError(f"'{path}': unknown fitted attributes {unknown}; the file does not match this version.")
    _checked_arrays(doc["params"], "params")
    _checked_arrays(doc["fitted"], "fitted")
    est = cls(**_from_json(doc["params"]))
    for k, v in _from_json(doc["fitted"]).items():
        setattr(est, k, v.astype(object) if k == "feature_names_in_" else v)
    _check_fitted_shapes(est, path)
    if doc["class"] == "SMIC" and getattr(est, "state_file_", None):
        _load_smic_state(est, where)
    return est


#: the fitted attributes a model of each class needs (besides n_features_in_)
_REQUIRED = {"KMeans": ("cluster_centers_",), "SoftKMeans": ("cluster_centers_", "beta_"),
             "DiscriminativeClustering": ("cluster_centers_", "classes_"),
             "AssociativeClustering": ("cluster_centers_x_", "cluster_centers_y_", "n_features_y_in_"),
             "CMBC": ("theta_",), "SMIC": ("t_",),
             "IsotropicGaussianMixture": ("means_", "variances_", "weights_"),
             "MDA2": ("means_", "variances_", "weights_", "classes_")}
#: a model file with more prototypes than this is refused (predict costs rows x prototypes x features)
MAX_MODEL_PROTOTYPES = 100_000
#: a fitted coordinate this large (or larger) is refused: its square overflows float64 distances
MAX_MODEL_VALUE = 1e150
#: fitted numbers that must be finite when present
_FINITE_SCALARS = ("inertia_", "beta_", "data_scale_", "sigma_", "reg_strength_", "knn_recall_")


def _check_fitted_shapes(est, path):
    """The fitted arrays of a loaded model against its parameters and
    ``n_features_in_``: a damaged or tampered file (centres wider than the
    data, more prototypes than ``n_clusters``, NaN) is refused here, before
    any kernel reads it."""
    def bad(what):
        return ValueError(f"'{path}': {what}; the model file is damaged or was edited. Refit the model.")

    from ._support.validation import validate_params

    try:
        validate_params(est)
    except ValueError as exc:
        raise bad(str(exc).rstrip(".")) from None
    missing = [a for a in ("n_features_in_", *_REQUIRED.get(type(est).__name__, ())) if not hasattr(est, a)]
    if missing:
        raise bad(f"it lacks the fitted {', '.join(missing)}")

    d = getattr(est, "n_features_in_", None)
    if d is not None and (not isinstance(d, (int, np.integer)) or isinstance(d, bool) or not 1 <= int(d) <= 10**7):
        raise bad(f"n_features_in_ is {d!r}")
    k = est.get_params().get("n_clusters")
    ks = tuple(k) if isinstance(k, (tuple, list)) else (k, k)
    expect = {"cluster_centers_": (ks[0], d), "means_": (ks[0], d), "cluster_centers_x_": (ks[0], d),
              "cluster_centers_y_": (ks[1], getattr(est, "n_features_y_in_", None)), "theta_": (d, ks[0]),
              "cluster_sizes_": (ks[0],), "variances_": (ks[0],), "weights_": (ks[0],)}
    for name, shape in expect.items():
        if not hasattr(est, name):
            continue
        a = getattr(est, name)
        if not isinstance(a, np.ndarray) or a.dtype.kind not in "fiu":
            raise bad(f"{name} is not an array of numbers")
        want = tuple(int(s) if s is not None else None for s in shape)
        if a.ndim != len(want) or any(w is not None and s != w for s, w in zip(a.shape, want, strict=True)):
            raise bad(f"{name} has shape {a.shape}, the parameters and n_features_in_ give {want}")
        if a.shape[0] > MAX_MODEL_PROTOTYPES:
            raise bad(f"{name} holds {a.shape[0]} prototypes, more than {MAX_MODEL_PROTOTYPES}")
        if not np.all(np.isfinite(a)):
            raise bad(f"{name} holds NaN or infinite values")
        if a.dtype.kind != "f":
            raise bad(f"{name} has dtype {a.dtype}; the format stores it as float64")
        if a.size and float(np.abs(a).max()) >= MAX_MODEL_VALUE:
            raise bad(f"{name} holds {float(np.abs(a).max()):.3g}: values of that size overflow squared distances "
                      f"(at most {MAX_MODEL_VALUE:.0e})")
    for name in _FINITE_SCALARS:
        v = getattr(est, name, None)
        if v is None:
            continue
        try:
            arr = np.asarray(v, dtype=np.float64)  # a number, or one per view (AC's sigma_)
            ok = arr.ndim <= 1 and not isinstance(v, (bool, str)) and bool(np.all(np.isfinite(arr)))
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise bad(f"{name} is {v!r}, not a finite number")
