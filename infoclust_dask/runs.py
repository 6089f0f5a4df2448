"""Run folders and fitted models as JSON (never pickle).

``storage/runs/<run-id>/`` holds ``model.json`` (estimator class, parameters,
fitted arrays, library version), ``summary.json`` and whatever a caller adds
(reports, plots). The storage root is ``$INFOCLUST_STORAGE`` or ``./storage``,
a local path or an fsspec URL (``s3://bucket/prefix``): run folders, model
files and everything written here go to either the same way (a URL's files
are single PUTs; credentials come from each process's environment).
"""

from __future__ import annotations

import datetime as _dt
import os
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from ._models import MAX_MODEL_PROTOTYPES, MODEL_CLASSES, allow_model_class, read_model, save_model, write_json
from ._support.hints import PathLike, Sequence
from .storage.location import run_path, write_whole
from .storage.paths import is_url, local_path

__all__ = ["storage_root", "run_path", "join", "check_writable", "safe_name", "dataset_store_path", "new_run_dir",
           "save_model", "load_model", "write_json", "write_csv", "write_npy", "allow_model_class", "MAX_MODEL_PROTOTYPES",
           "MODEL_CLASSES"]

def storage_root() -> Any:
    """``$INFOCLUST_STORAGE`` or ``./storage``: a :class:`~pathlib.Path`, or
    a ``UPath`` when it is a URL."""
    return run_path(os.environ.get("INFOCLUST_STORAGE", "storage"), "storage root ($INFOCLUST_STORAGE)")


def join(root: Any, *parts: str) -> str:
    """``root/part/...`` as a string, for a local path or a URL alike (what
    the store functions and the flows' parameters take)."""
    if is_url(root):
        return "/".join([str(root).rstrip("/"), *parts])
    return str(run_path(root, "storage root").joinpath(*parts))  # absolute: it may travel to workers and flows


def check_writable(root: PathLike | None = None) -> Any:
    """Raise a clear ``OSError`` unless run folders can be created under
    ``root`` (default :func:`storage_root`): checked before a long fit, so
    that a read-only or full storage (or a bucket without write access)
    fails first, not after the work."""
    base: Any = run_path(root, "storage root") if root is not None else storage_root()
    probe = base / "runs" / f".write-test-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    try:
        if not is_url(probe):
            probe.parent.mkdir(parents=True, exist_ok=True)
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise OSError(exc.errno, f"the storage root '{base}' is not writable ({exc.strerror or exc}); choose "
                                 "another with --storage or $INFOCLUST_STORAGE") from None
    return base


def safe_name(name: str, what: str = "name") -> str:
    """``name`` as a single path component under the storage root: letters,
    digits, ``.``, ``_`` and ``-`` only, not starting with a dot, so that a
    name from a user (``../x``, ``/abs/path``) cannot escape ``storage/``."""
    import re

    text = str(name)
    if not text or text.startswith(".") or not re.fullmatch(r"[A-Za-z0-9._-]+", text):
        raise ValueError(f"{what} {text!r} cannot name a folder under the storage root: use letters, digits, "
                         "'.', '_' and '-' (no '/', no '..', not starting with '.').")
    return text


def dataset_store_path(storage: PathLike, source: str, suffix: str = "-demo") -> str:
    """``<storage>/datasets/<name><suffix>.zarr`` for a bundled name or a file
    path (its stem, never its folder): the store stays under the storage root
    (a local path or a URL)."""
    src = str(source)
    stem = Path(src).stem if ("/" in src or Path(src).suffix) else src
    return join(storage, "datasets", f"{safe_name(stem, 'dataset name')}{suffix}.zarr")


def new_run_dir(method: str, root: PathLike | None = None) -> Any:
    """Create and return ``<root>/runs/<UTC time>-<method>-<random>`` (a
    ``UPath`` under a URL root, where a folder exists once a file is written
    in it)."""
    base: Any = run_path(root, "storage root") if root is not None else storage_root()
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = base / "runs" / f"{stamp}-{safe_name(method, 'run name')}-{uuid.uuid4().hex[:6]}"
    if is_url(path):
        if path.exists():
            raise FileExistsError(f"'{path}' exists already.")
        return path
    path.mkdir(parents=True, exist_ok=False)
    return path


def write_csv(path: PathLike, rows: Sequence[Any], columns: Sequence[str]) -> Path:
    """Atomically write ``rows`` (dicts) as CSV with ``columns`` (others are
    ignored); floats with 6 significant digits."""
    import csv
    import io

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore")
    w.writeheader()
    for r in rows:
        w.writerow({c: (f"{r[c]:.6g}" if isinstance(r.get(c), float) else r.get(c)) for c in columns})
    return write_whole(path, buf.getvalue().encode("utf-8"), overwrite=True)


def write_npy(path: PathLike, array: Any, *, overwrite: bool = False) -> Path:
    """Atomically write ``array`` as ``.npy`` (a temporary file in the same
    folder, then a rename); refuses to replace an existing file unless
    ``overwrite``."""
    import io

    if is_url(path):
        buf = io.BytesIO()
        np.save(buf, np.asarray(array))
        return write_whole(path, buf.getvalue(), overwrite=overwrite)
    path = local_path(path, "file")
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} exists; pass overwrite=True to replace it.")
    from .storage.atomic import clean_stale_temporaries, file_error, temp_name

    clean_stale_temporaries(path)
    tmp = temp_name(path, "tmp")  # names this PID: a killed writer's leftover is recognised and removed
    try:
        with open(tmp, "wb") as f:
            np.save(f, np.asarray(array))
        os.replace(tmp, path)
    except OSError as exc:
        raise file_error(exc, path, int(np.asarray(array).nbytes)) from exc
    finally:
        tmp.unlink(missing_ok=True)
    return path


def load_model(path: str | os.PathLike) -> Any:
    """Rebuild a fitted estimator from a model file written by
    :func:`save_model` (see :func:`infoclust_dask._models.read_model` for
    what is checked): the class it names is looked up among the package's
    estimators (or the methods registered in this process)."""
    from . import cluster

    return read_model(path, lambda name: getattr(cluster, name))
