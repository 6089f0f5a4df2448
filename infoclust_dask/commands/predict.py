"""``infoclust predict MODEL ROWS``: a saved model applied to a store, or to
rows in a ``.npy`` / ``.npz`` / ``.csv`` / ``.parquet`` file read as
``infoclust ingest`` reads them; the labels go into the store
(``--write-labels``), to a ``.npy`` file (``--out``) or, without either, into
the JSON printed on stdout."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["predict_command", "ROW_FILES"]

#: suffixes of files whose rows predict reads directly (anything else is taken as a store)
ROW_FILES = (".npy", ".npz", ".csv", ".txt", ".parquet", ".pq")


def _model_file(model: Any) -> Path:
    p = Path(model)
    return p / "model.json" if p.is_dir() else p


def _refuse_transformed_training_store(model: Any, rows: Any) -> None:
    """Rows from a file are taken as they are: a model fitted on a store
    that ingest standardized or projected (its run folder's summary names
    the store) would see them in other units. Refused, naming the fix."""
    summary = _model_file(model).parent / "summary.json"
    if not summary.is_file():
        return
    try:
        store = json.loads(summary.read_text()).get("store")
        from ..io.store import open_dataset

        prov = open_dataset(store).attrs.get("provenance", {}) if store else {}
        prov = json.loads(prov) if isinstance(prov, str) else prov
    except (OSError, ValueError):
        return  # the training store is gone or unreadable: nothing to compare with
    if isinstance(prov, dict) and (prov.get("standardized") or prov.get("pca") is not None):
        raise ValueError(f"The model was fitted on '{store}', which ingest {'standardized' if prov.get('standardized') else 'projected'}; "
                         f"the rows of '{rows}' are raw. Append them to that store (`infoclust_dask.append_dataset` "
                         "applies its transform) or ingest them with the same options, then predict on the store.")


def _rows(args: Any) -> tuple[Any, int, str | None]:
    """The rows to label: ``(array, count, store or None)``."""
    if Path(str(args.store)).suffix.lower() in ROW_FILES:
        from ..io.sources import read_source

        _refuse_transformed_training_store(args.model, args.store)
        X, _, _ = read_source(args.store)
        X = np.asarray(X)
        if X.ndim != 2 or not np.issubdtype(X.dtype, np.number):
            raise ValueError(f"'{args.store}' holds {X.dtype} values of shape {X.shape}; predict needs a 2-D "
                             "numeric table of rows (one row per sample, the model's features as columns).")
        return X, X.shape[0], None
    from ..io.store import open_dataset

    ds = open_dataset(args.store, trust=args.trust)
    return ds["x"], int(ds.sizes["sample"]), str(args.store)


def predict_command(args: Any, scheduler: Any) -> int:
    """Run ``infoclust predict`` (its arguments parsed in ``args``) on ``scheduler``."""
    from .. import engine
    from ..io.labels import add_labels, check_label_name
    from ..runs import load_model
    from ..storage.location import run_path
    from ..storage.paths import absolute_or_url

    from_file = Path(str(args.store)).suffix.lower() in ROW_FILES
    if args.write_labels is not None:
        check_label_name(args.write_labels)
        from ..storage.paths import is_url

        if from_file:
            raise ValueError(f"--write-labels adds a variable to a store; '{args.store}' is a file. Use --out "
                             "labels.npy, or leave both out to get the labels on stdout.")
        if is_url(args.store):  # before the prediction, not after it
            raise ValueError(f"--write-labels adds a variable to a store on a local or shared file system; "
                             f"'{args.store}' is a URL. Use --out labels.npy instead.")
    if args.out and run_path(args.out, "output file").exists() and not args.overwrite:
        raise FileExistsError(f"'{args.out}' exists; pass --overwrite to replace it.")
    model = load_model(args.model)
    # AssociativeClustering: the x-view clusters, from the x prototypes (predict_y needs the y view)
    predict = getattr(model, "predict_x", None) or getattr(model, "predict", None)
    if predict is None or not getattr(model, "predicts_from_saved_model", True):
        raise ValueError(f"This saved {type(model).__name__} cannot predict new rows: its predict needs the training "
                         "rows and state, which a model fitted on in-memory arrays does not keep. Fit it on a store "
                         "(`infoclust fit smic STORE`) to get a model that predicts.")
    X, n, store = _rows(args)
    model.set_params(scheduler=None)  # the runner installed here: named, else placed by the data's size
    with engine.installed(scheduler, data=X):
        t0 = time.perf_counter()
        labels = predict(X)  # lazy on a store: one block at a time
        if args.write_labels is not None and store is not None:
            from ..io.store import open_dataset

            add_labels(store, args.write_labels, labels, overwrite=args.overwrite,
                       attrs={"model": absolute_or_url(args.model)})
            labels = open_dataset(store, trust=args.trust)[args.write_labels].data
        values = np.asarray(engine.compute(labels))  # once, for the counts and the file
    if args.out:
        from ..runs import write_npy

        write_npy(args.out, values, overwrite=args.overwrite)
    out: dict[str, Any] = {"model": str(args.model), ("store" if store else "rows"): str(args.store), "n_samples": n,
                           "cluster_sizes": np.bincount(values.ravel()).tolist(),
                           "written": [w for w in (args.write_labels and f"{args.store}:{args.write_labels}",
                                                   args.out) if w],
                           "seconds": round(time.perf_counter() - t0, 3)}
    if args.write_labels is None and not args.out:
        out["labels"] = values.tolist()
    print(json.dumps(out, indent=2))
    return 0
