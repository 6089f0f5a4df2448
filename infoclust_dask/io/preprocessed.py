"""A preprocessed store: the data through :func:`infoclust_dask.preprocess.fit_transform`
(standardization, PCA), written with the chunk size and codec chosen for it,
the preprocessing's parameters in the attributes and optional hashed folds
(:func:`write_preprocessed`, which ingest with ``--standardize``/``--pca``
calls), or a store preprocessed into another, block by block
(:func:`preprocess_store`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .. import engine
from .._support.hints import PathLike, SchedulerLike, Sequence
from ..preprocess import fit_transform
from .folds import fold_vector
from .store import check_destination, choose_chunk_rows, choose_codec, open_dataset, write_dataset

__all__ = ["write_preprocessed", "preprocess_store"]


@engine.entry_point
def write_preprocessed(dest: PathLike, x: Any, info: dict, *, standardize: bool, pca: int | None,
                       n_folds: int | None = None, fold_seed: int = 0, chunks: int | None = None, codec: str = "auto",
                       label: Any = None, y: Any = None, class_names: Sequence[str] | None = None,
                       provenance: dict | None = None, overwrite: bool = False, progress: bool = False,
                       scheduler: SchedulerLike = None, dtype: Any = None, labels: dict | None = None,
                       extra_labels: dict | None = None, label_class_names: Any = None,
                       feature_names: Sequence[str] | None = None) -> tuple[Path, dict]:
    """Write ``x`` (from :func:`fit_transform`, with its ``info``) as a store:
    chunk size and codec chosen for the data, ``feature_mean``/``feature_std``
    (and PCA's ``components``) in the attributes, an optional hashed ``fold``
    vector. ``labels`` maps label variables to ``(codes, class names or
    None)`` (from :func:`infoclust_dask.io.ingest.read_source`; ``"label"``
    first); ``label``/``class_names``/``extra_labels`` are the arrays
    themselves. Returns ``(path, report)``, the report saying what was chosen."""
    n, d = x.shape
    itemsize = np.dtype(dtype).itemsize if dtype is not None else 8
    rows = min(int(chunks) if chunks is not None else choose_chunk_rows(n, d, itemsize), n)
    extra_labels = dict(extra_labels or {})
    label_class_names = dict(label_class_names or {})
    for name, (codes, names) in (labels or {}).items():
        if name == "label":
            label, class_names = codes, names
        else:
            extra_labels[name] = codes
            if names is not None:
                label_class_names[name] = names
    codec, ratio = _codec_for(x, codec)
    prov = {**(provenance or {}), "standardized": bool(standardize), "pca": pca}
    attrs = {"feature_mean": info["feature_mean"].tolist(), "feature_std": info["feature_std"].tolist()}
    report = {"chunk_rows": rows, "codec": codec, "compression_ratio_lz4": round(ratio, 3),
              "standardized": bool(standardize), "pca": pca, "n_folds": n_folds}
    if pca is not None:
        attrs.update(components=info["components"].tolist(),
                     explained_variance_ratio=info["explained_variance_ratio"].tolist())
        report["explained_variance_ratio"] = float(np.sum(info["explained_variance_ratio"]))
    fold = None
    if n_folds:
        fold = fold_vector(n, n_folds, seed=fold_seed, chunks=rows)
        attrs.update(n_folds=int(n_folds), fold_seed=int(fold_seed))
    path = write_dataset(dest, x, label=label, y=y, fold=fold, chunks=rows, codec=codec, overwrite=overwrite,
                         class_names=class_names, provenance=prov, attrs=attrs, progress=progress, dtype=dtype, extra_labels=extra_labels or None,
                         label_class_names=label_class_names or None, feature_names=feature_names)
    return path, report


def preprocess_store(src: PathLike, dest: PathLike, *, standardize: bool = False, pca: int | None = None,
                     pca_method: str = "gram", n_folds: int | None = None, fold_seed: int = 0,
                     chunks: int | None = None, codec: str = "auto", overwrite: bool = False,
                     scheduler: SchedulerLike = None, progress: bool = False) -> tuple[Path, dict]:
    """Write a preprocessed copy of the store ``src`` at ``dest``, block by block.

    Keeps ``label`` / ``y`` and the provenance chain; stores ``feature_mean``,
    ``feature_std`` (of ``src``'s x) and, with PCA, ``components`` and
    ``explained_variance_ratio`` in the attributes; with ``n_folds`` adds a
    ``fold`` vector (hashed, seeded). Returns ``(path, report)``.
    """
    src, dest = Path(src), Path(dest)
    if src.resolve() == dest.resolve():
        raise ValueError(f"Source and destination are the same store ('{src}'); choose another destination.")
    check_destination(dest, overwrite)
    ds = open_dataset(src)
    with engine.installed(scheduler, data=ds["x"]):  # placed once, by the store's size
        x, info = fit_transform(ds["x"], standardize=standardize, pca=pca, pca_method=pca_method)
        path, report = write_preprocessed(
            dest, x, info, standardize=standardize, pca=pca, n_folds=n_folds, fold_seed=fold_seed, chunks=chunks,
            codec=codec, label=ds["label"].data if "label" in ds else None, y=ds["y"].data if "y" in ds else None,
            class_names=ds.attrs.get("class_names"), overwrite=overwrite, progress=progress,
            extra_labels={k: ds[k].data for k in ds.attrs.get("label_columns", []) if k in ds},
            feature_names=ds["x"].attrs.get("feature_names") if pca is None else None,
            label_class_names=ds.attrs.get("label_class_names"),
            provenance={**ds.attrs.get("provenance", {}), "derived_from": str(src.resolve())})
    return path, {"source": str(src), "rows": int(x.shape[0]), "features": int(x.shape[1]), **report}


def _codec_for(x, codec):
    """Resolve ``codec="auto"`` from the first rows of ``x``."""
    sample = engine.compute(x[: min(x.shape[0], 4096)])
    auto, ratio = choose_codec(sample)
    return (auto if codec == "auto" else codec), ratio
