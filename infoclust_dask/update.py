"""Keeping a model current while its store grows: the versions of a model
in a folder, which source files were already appended, and what changed
between two versions.

The nightly update (``pipelines/update.py``) is: append the new files
(:func:`infoclust_dask.io.append.append_dataset`), refit warm-started from
the latest version (``fit(..., init=previous)``), compare the two
(:func:`compare_models`) and keep the new model as the next version.
Every version stays loadable: ``ModelVersions(folder).load(1)``.

Layout of a model folder (local, like run folders)::

    versions/v0001/model.json      the fitted model (runs.save_model: JSON, never pickle)
    versions/v0001/version.json    when, from which store rows, its fit and comparison facts
    appended.json                  the source files already appended (name, size, mtime)
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from .storage.location import run_path
from .storage.paths import is_url

__all__ = ["ModelVersions", "compare_models", "fixed_sample"]


class ModelVersions:
    """The numbered versions of one model in ``folder`` (module notes)."""

    def __init__(self, folder: str | os.PathLike) -> None:
        self.folder = run_path(folder, "model folder")

    def versions(self) -> list[int]:
        """The version numbers present, oldest first."""
        root = self.folder / "versions"
        if not root.exists():
            return []
        out = []
        for p in root.iterdir():
            if p.name.startswith("v") and p.name[1:].isdigit() and (p / "model.json").is_file():
                out.append(int(p.name[1:]))
        return sorted(out)

    def path(self, version: int) -> Any:
        return self.folder / "versions" / f"v{int(version):04d}"

    def latest(self) -> int | None:
        v = self.versions()
        return v[-1] if v else None

    def load(self, version: int | None = None) -> Any:
        """The model of ``version`` (default: the latest)."""
        from .runs import load_model

        v = self.latest() if version is None else int(version)
        if v is None or v not in self.versions():
            raise FileNotFoundError(f"No model version {version if version is not None else ''} in "
                                    f"'{self.folder}' (versions: {self.versions() or 'none'}).")
        return load_model(self.path(v) / "model.json")

    def info(self, version: int | None = None) -> dict:
        v = self.latest() if version is None else int(version)
        if v is None:
            raise FileNotFoundError(f"No model version in '{self.folder}'.")
        return json.loads((self.path(v) / "version.json").read_text())

    def save(self, est: Any, info: dict) -> int:
        """Keep ``est`` as the next version, with ``info``; a folder half
        written by a killed process is never taken for a version (the model
        file is written last into a hidden folder renamed into place)."""
        import shutil
        import uuid

        from .runs import save_model, write_json

        v = (self.latest() or 0) + 1
        target = self.path(v)
        if is_url(target):  # no rename on an object store: model.json, written last, makes the version
            write_json(target / "version.json", {"version": v, "saved": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                                 **info}, overwrite=True)
            save_model(est, target / "model.json")
            return v
        tmp = target.parent / f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        tmp.mkdir(parents=True)
        try:
            write_json(tmp / "version.json", {"version": v, "saved": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **info})
            save_model(est, tmp / "model.json")
            os.rename(tmp, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return v

    # -- source files already appended -------------------------------
    def _appended_file(self) -> Path:
        return self.folder / "appended.json"

    def appended(self) -> list[dict]:
        p = self._appended_file()
        return json.loads(p.read_text()) if p.exists() else []

    def new_files(self, files: list[str]) -> list[str]:
        """Those of ``files`` not appended yet (same name, size and
        modification time), in the order given."""
        seen = {(a["path"], a["size"], a["mtime_ns"]) for a in self.appended()}
        out = []
        for f in files:
            st = Path(f).stat()
            if (str(Path(f).resolve()), st.st_size, st.st_mtime_ns) not in seen:
                out.append(f)
        return out

    def record_appended(self, files: list[str], rows: list[int]) -> None:
        from .runs import write_json

        rec = self.appended()
        for f, r in zip(files, rows, strict=True):
            st = Path(f).stat()
            rec.append({"path": str(Path(f).resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "rows": r})
        if not is_url(self.folder):
            self.folder.mkdir(parents=True, exist_ok=True)
        write_json(self._appended_file(), rec, overwrite=True)


def fixed_sample(n_rows: int, size: int, seed: int = 0) -> np.ndarray:
    """``size`` row numbers drawn once (seeded) from the first ``n_rows``
    rows: the same rows every night, whatever is appended after them."""
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(int(n_rows), size=min(int(size), int(n_rows)), replace=False))


def compare_models(previous: Any, current: Any, X_sample: Any, *, X: Any = None, aux: Any = None) -> dict:
    """What changed from ``previous`` to ``current`` (two fits of the same
    method with prototypes):

    - ``ari``: adjusted Rand index of their labels on the fixed sample
      ``X_sample`` (1.0: the same partition);
    - ``drift``: how far each previous prototype moved, after matching the
      prototypes one to one (minimum total squared distance,
      :func:`~infoclust_dask.reliability.match_prototypes`), in data units
      and relative to the smallest distance between two previous prototypes
      (``relative_drift``: 1.0 = as far as to a neighbouring cluster);
    - with ``X`` (the store's rows now, and ``aux`` when the method scores
      with it): ``objective_before`` / ``objective_after``, each model's
      ``held_out_score(X, aux)["score"]`` on the same rows (higher is better).
    """
    from sklearn.metrics import adjusted_rand_score

    from . import engine
    from .reliability import match_prototypes

    a = np.asarray(engine.compute(previous.predict(X_sample)))
    b = np.asarray(engine.compute(current.predict(X_sample)))
    P = np.asarray(previous.cluster_centers_, dtype=np.float64)
    C = np.asarray(current.cluster_centers_, dtype=np.float64)
    if P.shape != C.shape:
        raise ValueError(f"The two models have prototypes of shapes {P.shape} and {C.shape}; compare versions of "
                         "one model.")
    perm, _ = match_prototypes(P, C)
    drift = np.linalg.norm(C[perm] - P, axis=1)
    gaps = np.sqrt(((P[:, None, :] - P[None, :, :]) ** 2).sum(-1))
    np.fill_diagonal(gaps, np.inf)
    scale = float(gaps.min()) if len(P) > 1 else 1.0
    out = {"ari": float(adjusted_rand_score(a, b)), "sample_rows": int(a.size), "drift": drift.tolist(),
           "relative_drift": (drift / scale).tolist(), "max_relative_drift": float((drift / scale).max()),
           "matching": perm.tolist()}
    if X is not None:
        out["objective_before"] = float(previous.held_out_score(X, aux)["score"])
        out["objective_after"] = float(current.held_out_score(X, aux)["score"])
    return out
