"""Run folders and fitted models as JSON (never pickle).

``storage/runs/<run-id>/`` holds ``model.json`` (estimator class, parameters,
fitted arrays, library version), ``summary.json`` and whatever a caller adds
(reports, plots). The storage root is ``$INFOCLUST_STORAGE`` or ``./storage``.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import uuid
from pathlib import Path

import numpy as np

from .store import atomic_write_text

__all__ = ["storage_root", "new_run_dir", "save_model", "load_model", "write_json", "write_csv", "write_npy"]

_FITTED = (
    "cluster_centers_", "inertia_", "n_iter_", "n_features_in_", "betas_", "centers_path_",
    "free_energy_path_", "n_iter_path_", "beta_", "data_scale_", "sigma_", "n_classes_", "reg_strength_",
    "contingency_", "cluster_centers_x_", "cluster_centers_y_", "n_features_y_in_",
    "t_", "lsmi_", "eigenvalues_", "class_prior_", "timings_", "classes_",
    "theta_", "gamma_", "n_patterns_", "temperatures_", "objective_history_",
)


def storage_root() -> Path:
    """``$INFOCLUST_STORAGE`` or ``./storage``."""
    return Path(os.environ.get("INFOCLUST_STORAGE", "storage"))


def new_run_dir(method: str, root=None) -> Path:
    """Create and return ``<root>/runs/<UTC time>-<method>-<random>``."""
    root = Path(root) if root is not None else storage_root()
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = root / "runs" / f"{stamp}-{method}-{uuid.uuid4().hex[:6]}"
    path.mkdir(parents=True, exist_ok=False)
    return path


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


def write_json(path, obj, *, overwrite=False) -> Path:
    """Atomically write ``obj`` as JSON (numpy arrays and scalars allowed)."""
    return atomic_write_text(path, json.dumps(_jsonable(obj), indent=2) + "\n", overwrite=overwrite)


def write_csv(path, rows, columns) -> Path:
    """Atomically write ``rows`` (dicts) as CSV with ``columns`` (others are
    ignored); floats with 6 significant digits."""
    import csv
    import io

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore")
    w.writeheader()
    for r in rows:
        w.writerow({c: (f"{r[c]:.6g}" if isinstance(r.get(c), float) else r.get(c)) for c in columns})
    return atomic_write_text(path, buf.getvalue(), overwrite=True)


def write_npy(path, array, *, overwrite=False) -> Path:
    """Atomically write ``array`` as ``.npy`` (a temporary file in the same
    folder, then a rename); refuses to replace an existing file unless
    ``overwrite``."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} exists; pass overwrite=True to replace it.")
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    with open(tmp, "wb") as f:
        np.save(f, np.asarray(array))
    os.replace(tmp, path)
    return path


def save_model(est, path, *, overwrite=False) -> Path:
    """Save a fitted estimator's parameters and small fitted state as JSON."""
    from . import __version__

    params = {k: v for k, v in est.get_params().items() if k != "scheduler"}
    fitted = {k: getattr(est, k) for k in _FITTED if hasattr(est, k)}
    doc = {
        "class": f"{type(est).__module__}.{type(est).__name__}",
        "library": f"infoclust_dask {__version__}",
        "params": params,
        "fitted": fitted,
    }
    return write_json(path, doc, overwrite=overwrite)


def load_model(path):
    """Rebuild an estimator saved by :func:`save_model`.

    K-means, soft K-means, DC (with its ``classes_``), AC and CMBC come back
    ready to ``predict`` (DC also to ``score``). SMIC
    comes back as a record of its fit (``t_``, ``lsmi_`` keyed by int ``t``,
    ``eigenvalues_``, ``timings_``, ...): its ``predict`` needs the training
    rows and eigenvectors, which are not saved - refit ``SMIC(t=model.t_)``.
    """
    import importlib

    doc = json.loads(Path(path).read_text())
    module, _, name = doc["class"].rpartition(".")
    if not module.startswith("infoclust_dask."):
        raise ValueError(f"'{path}' names class {doc['class']!r}, not an infoclust_dask estimator.")
    cls = getattr(importlib.import_module(module), name)
    est = cls(**_from_json(doc["params"]))
    for k, v in _from_json(doc["fitted"]).items():
        setattr(est, k, v)
    return est
