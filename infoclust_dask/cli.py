"""The ``infoclust`` command.

::

    infoclust ingest SRC DEST [--label-column C] [--standardize] [--overwrite]
    infoclust info STORE
    infoclust fit kmeans STORE -k 8 [--init k-means++] [--scheduler ADDRESS]
    infoclust fit softkmeans STORE -k 2 --beta-min 0.01 --beta-max 10 --n-betas 40
    infoclust fit dc STORE -k 5 [--sigma auto]      (the store needs a 'label')
    infoclust demo

``--scheduler`` takes ``local`` (a LocalCluster, the default for ``fit``),
``threads``, ``sync`` or an address ``tcp://host:8786``; without it
``DASK_SCHEDULER_ADDRESS`` is used when set.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

__all__ = ["main"]


def _scheduler(args):
    from pipelines._env import default_scheduler

    return default_scheduler(args.scheduler)


def _cmd_ingest(args):
    from .ingest import ingest

    t0 = time.perf_counter()
    path, report = ingest(
        args.src, args.dest, label_column=args.label_column, drop_nonfinite=args.drop_nonfinite,
        standardize=args.standardize, pca=args.pca, pca_method=args.pca_method, n_folds=args.folds, fold_seed=args.fold_seed,
        chunks=args.chunks, codec=args.codec, overwrite=args.overwrite, progress=True,
    )
    report["store"] = str(path)
    report["seconds"] = round(time.perf_counter() - t0, 2)
    print(json.dumps(report, indent=2))
    return 0


def _cmd_info(args):
    from .store import open_dataset

    ds = open_dataset(args.store)
    out = {
        "store": str(args.store),
        "variables": {k: {"dims": list(v.dims), "shape": list(v.shape), "dtype": str(v.dtype),
                          "chunks": [list(c) if len(c) < 8 else f"{len(c)} chunks of {c[0]}" for c in v.chunks]}
                      for k, v in ds.data_vars.items()},
        "attrs": dict(ds.attrs),
    }
    print(json.dumps(out, indent=2, default=str))
    return 0


def _cmd_fit(args):
    import numpy as np

    from . import engine
    from .cluster import (
        SMIC,
        AssociativeClustering,
        DiscriminativeClustering,
        KMeans,
        SoftKMeans,
    )
    from .runs import new_run_dir, save_model, write_json, write_npy
    from .store import open_dataset

    ds = open_dataset(args.store)
    sched = engine.resolve_scheduler(_scheduler(args))
    print(f"infoclust: fitting {args.method} on {args.store} {tuple(ds['x'].shape)} with scheduler {sched}",
          flush=True)
    t0 = time.perf_counter()
    if args.method == "dc":
        if "label" not in ds:
            raise ValueError(f"'{args.store}' has no 'label' variable; DC needs classes (ingest with --label-column).")
        sigma = "auto" if args.sigma == "auto" else float(args.sigma)
        est = DiscriminativeClustering(args.k, sigma=sigma, max_iter=None if args.max_iter == 300 else args.max_iter,
                                       random_state=args.seed, scheduler=sched, verbose=1)
        est.fit(ds["x"], ds["label"])
    elif args.method == "ac":
        if "y" not in ds:
            raise ValueError(f"'{args.store}' has no 'y' variable; associative clustering needs a second, paired view.")
        sigma = "auto" if args.sigma == "auto" else float(args.sigma)
        est = AssociativeClustering((args.k, args.l or args.k), sigma=sigma, random_state=args.seed, scheduler=sched,
                                    verbose=1)
        est.fit(ds["x"], ds["y"])
    elif args.method == "smic":
        t = "auto" if args.t == "auto" else int(args.t)
        est = SMIC(args.k, t=t, kernel_normalization=args.kernel_normalization, random_state=args.seed,
                   scheduler=sched, verbose=1)
        est.fit(ds["x"])
    elif args.method == "kmeans":
        est = KMeans(args.k, init=args.init, n_init=args.n_init if args.n_init != "auto" else "auto",
                     max_iter=args.max_iter, tol=args.tol, random_state=args.seed,
                     scheduler=sched, verbose=1)
    else:
        betas = np.geomspace(args.beta_min, args.beta_max, args.n_betas)
        est = SoftKMeans(args.k, beta_schedule=betas, max_iter=args.max_iter,
                         random_state=args.seed, scheduler=sched)
    if args.method not in ("dc", "ac", "smic"):
        est.fit(ds["x"])
    seconds = time.perf_counter() - t0
    run = new_run_dir(args.method, root=args.storage)
    save_model(est, run / "model.json")
    summary = {
        "method": args.method, "store": str(Path(args.store).resolve()),
        "n_samples": int(ds["x"].shape[0]), "n_features": int(ds["x"].shape[1]),
        "n_clusters": args.k, "scheduler": str(sched), "seconds": round(seconds, 3),
    }
    if hasattr(est, "n_iter_"):
        summary["n_iter"] = int(est.n_iter_)
    if args.method == "kmeans":
        summary["inertia"] = float(est.inertia_)
        counts = np.bincount(engine.compute(est.labels_, scheduler=sched, progress=False), minlength=args.k)
        summary["cluster_sizes"] = counts.tolist()
    elif args.method == "dc":
        summary["sigma"] = est.sigma_
        summary["log_posterior_9"] = est.score(ds["x"], ds["label"])
        summary["contingency"] = est.contingency_.tolist()
    elif args.method == "ac":
        summary["sigma"] = list(est.sigma_)
        summary["log_bayes_factor_3"] = est.score(ds["x"], ds["y"])
        summary["mutual_information"] = est.mutual_information(ds["x"], ds["y"])
        summary["contingency"] = est.contingency_.tolist()
        over, under = est.most_surprising(3)
        summary["most_over_represented"] = over
        summary["most_under_represented"] = under
    elif args.method == "smic":
        summary.update(t=est.t_, kernel_normalization=args.kernel_normalization, lsmi=est.lsmi_,
                       eigenvalues=est.eigenvalues_.tolist(), timings=est.timings_,
                       cluster_sizes=np.bincount(est.labels_, minlength=args.k).tolist())
        if "label" in ds:
            from sklearn.metrics import adjusted_rand_score

            summary["ari_vs_label"] = float(adjusted_rand_score(np.asarray(ds["label"].values), est.labels_))
        write_npy(run / "labels.npy", est.labels_)
    else:
        summary["critical_betas"] = est.critical_betas()
    write_json(run / "summary.json", summary)
    print(json.dumps(summary, indent=2))
    print(f"run folder: {run}")
    return 0


def _cmd_demo(args):
    from pipelines.demo import demo_flow

    demo_flow(dataset=args.dataset, n_clusters=args.k, scheduler=_scheduler(args), storage=args.storage)
    return 0


def _cmd_crossval(args):
    from pipelines.crossval import run_from_args

    out = run_from_args(args)
    print(json.dumps({k: out[k] for k in ("run_dir", "best", "best_score", "cells", "reused", "seconds")},
                     indent=2, default=str))
    return 0


def add_crossval_arguments(p):
    """The options of ``infoclust crossval`` / ``python -m pipelines.crossval``."""
    p.add_argument("store", help="dataset store (zarr folder)")
    from .crossval import METHODS

    p.add_argument("--method", default="dc", choices=sorted(METHODS))
    p.add_argument("--grid", action="append", default=[], metavar="NAME=V1,V2,...",
                   help="a parameter and its values; repeat for a grid (e.g. --grid sigma=0.5,1,2 "
                        "--grid n_clusters=2,5,10)")
    p.add_argument("--folds", type=int, default=10, help="number of folds (default 10)")
    p.add_argument("--fold-kind", choices=["ranges", "stored"], default="ranges",
                   help="folds as index ranges, or the store's fold vector (ingest --folds K)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--scheduler", default=None,
                   help="'local' (LocalCluster, the default), 'threads', or tcp://HOST:8786; "
                        "default $DASK_SCHEDULER_ADDRESS, else 'local'")
    p.add_argument("--concurrency", type=int, default=2, help="cells fitted at the same time (default 2)")
    p.add_argument("--storage", default=None, help="storage root (default $INFOCLUST_STORAGE or ./storage)")
    return p


def build_parser():
    p = argparse.ArgumentParser(
        prog="infoclust",
        description="Information-theoretic clustering of data larger than memory (dask + zarr).",
    )
    sub = p.add_subparsers(dest="command", required=True)

    pi = sub.add_parser("ingest", help="turn a .npy/.npz/.csv/.parquet file, a bundled dataset or a store "
                                       "into a (preprocessed) zarr store")
    pi.add_argument("src", help="file path, an existing store (preprocessed block by block), or a bundled "
                                "name: letter, satimage, digits, wine, iris")
    pi.add_argument("dest", help="store path to create, e.g. storage/datasets/letter.zarr")
    pi.add_argument("--label-column", default=None, help="CSV column (index or header name) holding classes")
    pi.add_argument("--drop-nonfinite", action="store_true", help="drop rows with NaN/inf instead of failing")
    pi.add_argument("--standardize", action="store_true", help="scale every feature to mean 0, std 1")
    pi.add_argument("--pca", type=int, default=None, metavar="K",
                    help="project onto the top K principal components")
    pi.add_argument("--pca-method", choices=["gram", "tsqr"], default="gram",
                    help="gram: one X^T X pass (default, fast); tsqr: dask's out-of-core TSQR SVD (ill-conditioned data)")
    pi.add_argument("--folds", type=int, default=None, metavar="K",
                    help="store a fold vector for K-fold cross-validation (crossval --fold-kind stored)")
    pi.add_argument("--fold-seed", type=int, default=0)
    pi.add_argument("--chunks", type=int, default=None,
                    help="rows per chunk (default: ~64 MB chunks, at least 8 chunks if they stay >= 8 MB)")
    pi.add_argument("--codec", choices=["auto", "lz4", "zstd", "none"], default="auto",
                    help="auto (default): LZ4 if it shrinks a sample of rows by >= 15%%, else none")
    pi.add_argument("--overwrite", action="store_true", help="replace an existing store at DEST")
    pi.set_defaults(func=_cmd_ingest)

    pn = sub.add_parser("info", help="describe a store")
    pn.add_argument("store")
    pn.set_defaults(func=_cmd_info)

    pf = sub.add_parser("fit", help="fit a model on a store and write a run folder")
    pf.add_argument("method", choices=["kmeans", "softkmeans", "dc", "ac", "smic"])
    pf.add_argument("store")
    pf.add_argument("-k", type=int, default=8, help="number of clusters (ac: of the x view)")
    pf.add_argument("-l", type=int, default=None, help="ac: clusters of the y view (default k)")
    pf.add_argument("--init", default="k-means++", choices=["k-means++", "k-means||", "random"])
    pf.add_argument("--n-init", default="auto")
    pf.add_argument("--max-iter", type=int, default=300)
    pf.add_argument("--tol", type=float, default=1e-4)
    pf.add_argument("--beta-min", type=float, default=0.01)
    pf.add_argument("--beta-max", type=float, default=10.0)
    pf.add_argument("--n-betas", type=int, default=40)
    pf.add_argument("--sigma", default="auto", help="dc, ac: membership width, or 'auto' (held-out choice)")
    pf.add_argument("--t", default="auto", help="smic: kernel parameter t of (7), or 'auto' (max LSMI over 1..10)")
    pf.add_argument("--kernel-normalization", default="none", choices=["none", "symmetric"],
                    help="smic: kernel (7) as is, or D^-1/2 K D^-1/2")
    pf.add_argument("--seed", type=int, default=0)
    pf.add_argument("--scheduler", default=None, help="local (default), threads, sync or tcp://HOST:PORT")
    pf.add_argument("--storage", default=None, help="storage root for run folders (default ./storage)")
    pf.set_defaults(func=_cmd_fit)

    pc = sub.add_parser("crossval", help="cross-validation sweep (Prefect flow; resumes finished cells)")
    add_crossval_arguments(pc)
    pc.set_defaults(func=_cmd_crossval)

    pd = sub.add_parser("demo", help="run the demo Prefect flow (ingest, fit, report, plot)")
    pd.add_argument("--dataset", default="satimage")
    pd.add_argument("-k", type=int, default=6)
    pd.add_argument("--scheduler", default=None)
    pd.add_argument("--storage", default=None)
    pd.set_defaults(func=_cmd_demo)
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    if getattr(args, "n_init", None) not in (None, "auto"):
        args.n_init = int(args.n_init)
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError, FileExistsError, KeyError, ConnectionError, ImportError) as exc:
        print(f"infoclust: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
