"""``infoclust ingest SRC DEST``: a file, a bundled dataset or a store into
a (preprocessed) store, or with ``--y FILE`` the paired store ``fit ac``
reads; the report is printed as JSON on stdout."""

from __future__ import annotations

import json
import time
from typing import Any

__all__ = ["ingest_command"]


def ingest_command(args: Any) -> int:
    """``infoclust ingest SRC DEST ...`` (or ``--y FILE``: a paired store); prints the report as JSON."""
    import dask

    from ..io.ingest import ingest
    from ..kernels import light_process

    if args.threads < 1:
        raise ValueError(f"--threads must be at least 1; got {args.threads}.")
    if args.y is not None:
        return _ingest_paired(args)
    t0 = time.perf_counter()  # one moments pass below: numpy's, without loading numba (~150 MB of this process)
    with dask.config.set(num_workers=args.threads), light_process():  # the local threads of checks, passes, writes
        path, report = ingest(
            args.src, args.dest, label_column=args.label_column, drop_nonfinite=args.drop_nonfinite,
            standardize=args.standardize, pca=args.pca, pca_method=args.pca_method, n_folds=args.folds,
            fold_seed=args.fold_seed, chunks=args.chunks, codec=args.codec, overwrite=args.overwrite, progress=True,
            binary=args.binary, labels=args.labels, encoding=args.encoding, dtype=args.dtype, append=args.append,
            columns=_column_list(args.columns), drop_columns=_column_list(args.drop_columns), impute=args.impute,
        )
    report["store"] = str(path)
    report["seconds"] = round(time.perf_counter() - t0, 2)
    print(json.dumps(report, indent=2))
    return 0


def _column_list(given):
    """``--columns a,b --columns 3`` -> ``["a", "b", "3"]`` (names or 0-based indices; None when not given)."""
    return None if not given else [c.strip() for g in given for c in g.split(",") if c.strip()]


def _ingest_paired(args):
    """``ingest X DEST --y Y``: the paired store that ``fit ac`` reads."""
    from ..io.ingest_pairs import ingest_paired

    unsupported = [flag for flag, on in (("--pca", args.pca), ("--binary", args.binary), ("--append", args.append),
                                         ("--folds", args.folds), ("--drop-nonfinite", args.drop_nonfinite),
                                         ("--columns", args.columns), ("--drop-columns", args.drop_columns),
                                         ("--impute", args.impute != "none")) if on]
    if unsupported:
        raise ValueError(f"--y (a paired store) does not take {', '.join(unsupported)}; it takes --standardize, "
                         "--label-column, --labels, --chunks, --dtype, --encoding and --overwrite.")
    path, report = ingest_paired(args.src, args.y, args.dest, label_column=args.label_column, labels=args.labels,
                                 standardize=args.standardize, chunks=args.chunks, dtype=args.dtype,
                                 overwrite=args.overwrite, encoding=args.encoding, progress=True)
    print(json.dumps({"store": str(path), **report}, indent=2))
    return 0
