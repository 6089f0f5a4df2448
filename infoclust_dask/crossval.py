"""Cross-validation sweeps: a store, a method, a parameter grid and k folds.

Each (fold, parameters) *cell* fits the method on the training rows of the
fold and scores it on the held-out rows (:mod:`infoclust_dask.io.folds`: index
ranges or the store's fold vector; the data are never copied). A cell's
result is a small JSON file keyed by a hash of the store (its path and the
``store_id`` written with it), the method, the parameters, the fold
definition and the seed, so a sweep that is re-run - after a crash, or with
a larger grid - computes only the cells it has not finished.

Scores (higher is better, summed or averaged over the held-out rows):

- ``kmeans``: ``score`` = minus the held-out K-means cost per sample;
- ``dc``: ``score`` = the held-out log posterior (9) of Kaski et al. 2005
  without constants, summed over the fold (Table 1 reports its negative as
  the cost); ``vq_cost`` = the held-out K-means cost per sample of the DC
  prototypes, for the Fig. 2 trade-off of the VQ regularization (15);
- ``ac``: ``score`` = the log Bayes factor (3) of the held-out pairs' hard
  contingency table (Sinkkonen et al.), ``mi`` = its mutual information
  (nats). The store needs the second view ``y``.

The Prefect flow in ``pipelines/crossval.py`` orchestrates these functions;
they work without Prefect too.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from . import __version__, engine
from ._support.hints import PathLike, SchedulerLike, Sequence
from .storage.location import run_path
from .storage.paths import is_url

if TYPE_CHECKING:
    import argparse

__all__ = ["cv_methods", "add_arguments", "expand_grid", "store_fingerprint", "plan", "run_cell", "CellCache", "summarize",
           "parse_grid"]

def _fit(method, params, X, aux, seed, classes=None):
    """Fit the registry method's estimator with ``params`` on the training
    rows (on the runner the cell installed); ``aux`` (labels or the second
    view) is passed when the method has one. ``classes`` (all classes of the
    store, present in this fold or not) fills an estimator's ``classes``
    parameter unless the grid sets it."""
    est = method.estimator_class()(random_state=seed, **params)
    if classes is not None and "classes" in est.get_params() and "classes" not in params:
        est.set_params(classes=classes)
    return method.fit_arrays(est, X, aux)


def _check_method(method):
    """The registry entry of a method that can be cross-validated."""
    from .registry import get_method

    m = get_method(method)
    if not m.cross_validated:
        raise ValueError(f"Method {method!r} has no held-out score; cross-validate one of {sorted(cv_methods())}.")
    return m


def cv_methods() -> list[str]:
    """Names of the registered methods that have a held-out score."""
    from .registry import METHODS

    return [name for name, m in METHODS.items() if m.cross_validated]


def _cv_method(name):
    """An argparse type: ``name`` if it is a cross-validated method."""
    import argparse

    try:
        _check_method(name)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return name


def parse_grid(items: Iterable[str]) -> dict[str, list]:
    """``["sigma=0.5,1,2", "n_clusters=2,5"]`` -> ``{"sigma": [0.5, 1.0, 2.0], "n_clusters": [2, 5]}``.

    Values are read as int, then float, then kept as strings (``auto``,
    ``vq``); ``none`` becomes None."""
    grid = {}
    for item in items or []:
        if "=" not in item:
            raise ValueError(f"Grid entry {item!r} must look like name=v1,v2,... (e.g. sigma=0.5,1,2).")
        name, vals = item.split("=", 1)
        name = name.strip().replace("-", "_")
        if not name or not vals.strip():
            raise ValueError(f"Grid entry {item!r} must look like name=v1,v2,... (e.g. sigma=0.5,1,2).")
        grid[name] = [_parse_value(v.strip()) for v in vals.split(",") if v.strip()]
    return grid


def _parse_value(v):
    if v.lower() == "none":
        return None
    for t in (int, float):
        with contextlib.suppress(ValueError):
            return t(v)
    return v


def expand_grid(grid: dict[str, list]) -> list[dict]:
    """All parameter combinations of ``grid`` (a dict of lists), in a fixed order."""
    if not isinstance(grid, dict) or not grid:
        raise ValueError(f"grid must be a non-empty dict of parameter lists; got {grid!r}.")
    names = sorted(grid)
    values = []
    for name in names:
        v = grid[name]
        v = list(v) if isinstance(v, (list, tuple, np.ndarray, range)) else [v]
        if not v:
            raise ValueError(f"grid[{name!r}] is empty; give at least one value.")
        values.append([_plain(x) for x in v])
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*values)]


def _plain(v):
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    return v


def store_fingerprint(store: PathLike, ds: Any = None) -> str:
    """Identity of a store's contents: its resolved path and the ``store_id``
    written with it (a rewrite of the same path gets a new id). ``ds`` is the
    store already opened, if the caller has it."""
    from .io.store import open_dataset

    ds = open_dataset(store) if ds is None else ds
    prov = ds.attrs.get("provenance", {})
    ident = prov.get("store_id") or prov.get("created", "")
    where = str(store).rstrip("/") if is_url(store) else str(Path(store).resolve())
    return f"{where}#{ident}#{ds.sizes['sample']}x{ds.sizes['feature']}"


def _same_number(v: Any) -> Any:
    """Numbers as floats (``sigma=1`` from the command line and ``1.0`` from
    a deployment's YAML are one setting), inside lists and dicts too."""
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, (int, float, np.integer, np.floating)):
        return float(v)
    if isinstance(v, (list, tuple)):
        return [_same_number(x) for x in v]
    if isinstance(v, dict):
        return {k: _same_number(x) for k, x in v.items()}
    return v


def cell_key(fingerprint: str, method: str, params: dict, fold: int, n_folds: int, fold_kind: str, seed: int) -> str:
    """Hash of everything that determines a cell's result (numbers compared
    as values: ``1`` and ``1.0`` are one cell)."""
    blob = json.dumps({"store": fingerprint, "method": method, "params": _same_number(params), "fold": int(fold),
                       "n_folds": int(n_folds), "fold_kind": fold_kind, "seed": int(seed),
                       "library": __version__}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def plan(store: PathLike, method: str, grid: dict[str, list], n_folds: int, fold_kind: str = "ranges", seed: int = 0
         ) -> list[dict]:
    """The cells of a sweep: one dict per (parameters, fold) with its ``key``.

    Checks the method, the grid's parameter names (by building the estimator)
    and the folds before anything runs."""
    from .io.folds import fold_ids
    from .io.store import open_dataset

    m = _check_method(method)
    aux, required, cls = m.aux, m.required, m.estimator_class()
    combos = expand_grid(grid)
    for param in required:
        if param not in combos[0]:
            raise ValueError(f"The grid for {method!r} must include {param!r} (e.g. {param}=2,5,10).")
    valid = set(cls().get_params()) - {"random_state", "scheduler"}
    for param in combos[0]:
        if param not in valid:
            raise ValueError(f"{param!r} is not a parameter of {cls.__name__}; valid: {sorted(valid)}.")
    if isinstance(n_folds, bool) or not isinstance(n_folds, (int, np.integer)):
        raise ValueError(f"n_folds must be an integer >= 2; got {n_folds!r}.")
    ds = open_dataset(store)
    if aux is not None and aux not in ds:
        what = "class labels" if aux == "label" else "a second view"
        raise ValueError(f"Method {method!r} needs {what}, but the store '{store}' has no {aux!r}.")
    fold_ids(ds, n_folds, fold_kind)  # validates n_folds against the data and the fold kind
    fp = store_fingerprint(store, ds)
    # the key holds every parameter of the estimator, defaults included: a
    # release that changes a default (e.g. DC's max_iter) recomputes the cells
    defaults = {k: _plain(v) for k, v in cls().get_params().items() if k not in ("random_state", "scheduler")}
    return [{"key": cell_key(fp, method, {**defaults, **p}, f, n_folds, fold_kind, seed), "params": p, "fold": f}
            for p in combos for f in range(int(n_folds))]


def run_cell(store: PathLike, method: str, params: dict, fold: int, n_folds: int, fold_kind: str = "ranges",
             seed: int = 0, scheduler: SchedulerLike = None) -> dict:
    """Fit ``method`` with ``params`` on the training rows of ``fold`` and
    score it on the held-out rows. Returns a JSON-ready dict."""
    from .io.folds import split
    from .io.store import open_dataset

    m = _check_method(method)
    aux = m.aux
    ds = open_dataset(store)
    t0 = time.perf_counter()
    with engine.installed(scheduler, data=ds["x"]):  # placed once, by the store's size: split, fit and score
        train, test = split(ds, fold, n_folds, fold_kind, variables=("x", aux) if aux else ("x",))
        Xtr = train["x"]  # the fit keeps a small fold in worker memory (engine.prepare)
        atr = train.get(aux) if aux else None
        classes = None
        if aux == "label":  # every class of the store, whether this fold's training rows have it or not
            from .kernels.stats import LABEL_VALUES

            classes = engine.map_reduce(LABEL_VALUES, ds["label"].data)["values"]
        # warnings (e.g. ConvergenceWarning) go to the caller / the Prefect log;
        # warnings.catch_warnings is not thread-safe, and cells run in threads
        model = _fit(m, params, Xtr, atr, int(seed) + int(fold), classes)
        out = m.score(model, test["x"], test.get(aux) if aux else None)
    return {"method": method, "params": params, "fold": int(fold), "n_folds": int(n_folds),
            "fold_kind": fold_kind, "seed": int(seed), "store": str(store),
            "n_train": int(Xtr.shape[0]), "n_test": int(test["x"].shape[0]),
            **{k: _plain(v) for k, v in out.items()},
            "seconds": round(time.perf_counter() - t0, 3), "n_iter": int(getattr(model, "n_iter_", 0)),
            **_centers(model)}


def _centers(model):
    """The fitted parameters a cell records: prototypes, or CMBC's theta."""
    if hasattr(model, "cluster_centers_x_"):
        return {"cluster_centers_x": np.asarray(model.cluster_centers_x_).tolist(),
                "cluster_centers_y": np.asarray(model.cluster_centers_y_).tolist()}
    if hasattr(model, "theta_"):
        return {"theta": np.asarray(model.theta_).tolist()}
    return {"cluster_centers": np.asarray(model.cluster_centers_).tolist()}


class CellCache:
    """Finished cells as ``<root>/<key>.json``, written atomically (``root``
    a local folder or a URL)."""

    def __init__(self, root: PathLike) -> None:
        self.root = run_path(root, "cross-validation cache")

    def path(self, key: str) -> Any:
        return self.root / f"{key}.json"

    def load(self, key: str) -> dict | None:
        p = self.path(key)
        if not p.exists():
            return None
        try:
            return json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            return None  # a damaged result is recomputed

    def save(self, key: str, result: dict) -> Path:
        from .storage.location import write_whole

        return write_whole(self.path(key), json.dumps({"key": key, **result}, indent=1, default=str).encode(),
                           overwrite=True)


def setting_order(row: dict, params: Sequence[str]) -> list[tuple]:
    """Sort key of a parameter setting: numbers numerically, then the rest as text."""
    from .plotting import sort_key

    return sort_key(row[p] for p in params)


def summarize(results: Sequence[dict]) -> tuple[list[dict], dict]:
    """Mean and standard deviation of each result field over the folds, per
    parameter setting, and the best setting by mean ``score``.

    Returns ``(rows, best)``: ``rows`` one dict per setting (parameters,
    ``n_folds_done``, ``score_mean``, ``score_std``, ... for every numeric
    field), ``best`` the row with the highest mean score."""
    groups: dict[str, list[dict]] = {}
    for r in results:
        groups.setdefault(json.dumps(r["params"], sort_keys=True), []).append(r)
    rows = []
    for key, rs in groups.items():
        row = dict(json.loads(key))
        row["n_folds_done"] = len(rs)
        fields = [k for k, v in rs[0].items() if isinstance(v, (int, float)) and not isinstance(v, bool)
                  and k not in ("fold", "n_folds", "seed", "n_train", "n_test")]
        for f in fields:
            vals = np.array([r[f] for r in rs], dtype=float)
            row[f"{f}_mean"] = float(vals.mean())
            row[f"{f}_std"] = float(vals.std(ddof=1)) if len(vals) > 1 else 0.0
        rows.append(row)
    if not rows:
        raise ValueError("No results to summarize.")
    best = max(rows, key=lambda r: r["score_mean"])
    return rows, best


def write_results(run_dir: PathLike, results: Sequence[dict], rows: Sequence[dict], best: dict | None,
                  params: Sequence[str]) -> Path:
    """``cells.csv`` (one row per fold and setting), ``summary.csv`` (one row
    per setting, means and standard deviations over folds) and
    ``summary.json`` (both, plus the best setting) in ``run_dir``."""
    from .runs import write_csv
    from .storage.location import write_whole

    run = run_path(run_dir)
    flat = [{**r["params"], **{k: v for k, v in r.items() if k != "params"}} for r in results]
    flat.sort(key=lambda r: (setting_order(r, params), r["fold"]))
    metric = [k for k in flat[0] if k not in params and k not in ("params", "store", "method",
                                                                    "n_folds", "fold_kind", "seed",
                                                                    "cluster_centers", "cluster_centers_x",
                                                                    "cluster_centers_y")]
    write_csv(run / "cells.csv", flat, list(params) + [m for m in metric if m not in params])
    cols = list(params) + [k for k in rows[0] if k not in params]
    write_csv(run / "summary.csv", sorted(rows, key=lambda r: setting_order(r, params)), cols)
    write_whole(run / "summary.json", json.dumps({"best": best, "settings": rows, "cells": results},
                                                 indent=1, default=str).encode(), overwrite=True)
    return run / "summary.csv"


def table_markdown(rows: Sequence[dict], params: Sequence[str],
                   fields: Sequence[str] = ("score", "cost", "vq_cost", "loglik_per_sample", "nmi_known", "seconds")
                   ) -> str:
    """The summary as a Markdown table (means +- std over folds)."""
    present = [f for f in fields if f"{f}_mean" in rows[0]]
    head = "| " + " | ".join(list(params) + ["folds"] + present) + " |"
    lines = [head, "|" + "---|" * (len(params) + 1 + len(present))]
    for r in sorted(rows, key=lambda r: setting_order(r, params)):
        cells = [str(r[p]) for p in params] + [str(r["n_folds_done"])]
        cells += [f"{r[f + '_mean']:.4g} +- {r[f + '_std']:.2g}" for f in present]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of ``infoclust crossval`` and ``python -m infoclust_pipelines.crossval``
    (one definition, used by both)."""
    p.add_argument("store", help="dataset store (zarr folder)")
    # checked when parsed, not listed: the list needs the estimator classes, which --help must not import
    p.add_argument("--method", default="dc", type=_cv_method,
                   help="a registered method with a held-out score: kmeans, dc, ac, cmbc, or one registered "
                        "from outside the package (default dc)")
    p.add_argument("--grid", action="append", default=[], metavar="NAME=V1,V2,...",
                   help="a parameter and its values; repeat for a grid (e.g. --grid sigma=0.5,1,2 "
                        "--grid n_clusters=2,5,10)")
    p.add_argument("--folds", type=int, default=10, help="number of folds (default 10)")
    p.add_argument("--fold-kind", choices=["ranges", "stored"], default="ranges",
                   help="folds as index ranges, or the store's fold vector (ingest --folds K)")
    p.add_argument("--seed", type=int, default=0, help="seed of the folds and the fits (default 0)")
    p.add_argument("--scheduler", default=None,
                   help="'local' (a LocalCluster), 'threads', or tcp://HOST:8786; default "
                        "$DASK_SCHEDULER_ADDRESS, else chosen by the store's size (this process when it fits "
                        "the in-process budget)")
    p.add_argument("--concurrency", type=int, default=2, help="cells fitted at the same time (default 2)")
    p.add_argument("--storage", default=None, help="storage root (default $INFOCLUST_STORAGE or ./storage)")
    return p
