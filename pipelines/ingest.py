"""The ingest / preprocess flow: a CSV, .npy, .npz, parquet file, a bundled
dataset name or an existing store -> a validated dataset store.

All the work is :func:`infoclust_dask.io.ingest.ingest` (validation with row and
column in every message, per-feature moments as a map-reduce pass,
optional standardization, PCA by dask's TSQR SVD, a stored fold vector, chunk
size and codec chosen for the data, atomic write); the flow records the
report in a run folder and as a Prefect artifact.

    python -m infoclust_pipelines.ingest letter storage/datasets/letter.zarr --standardize --folds 10
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from . import _env  # noqa: F401  (Prefect offline defaults before importing prefect)

# isort: split
from prefect import get_run_logger, task  # noqa: E402

from ._checked import Location, checked_flow  # noqa: E402

__all__ = ["ingest_flow", "main"]


@task(name="ingest-validate-write")
def ingest_task(source: str, dest: str, label_column, drop_nonfinite: bool, standardize: bool, pca: int | None,
                n_folds: int | None, fold_seed: int, chunks: int | None, codec: str, overwrite: bool,
                scheduler: str | None) -> dict:
    from infoclust_dask.io.ingest import ingest

    path, report = ingest(source, dest, label_column=label_column, drop_nonfinite=drop_nonfinite,
                          standardize=standardize, pca=pca, n_folds=n_folds, fold_seed=fold_seed, chunks=chunks,
                          codec=codec, overwrite=overwrite, scheduler=scheduler or "threads")
    return {"path": str(path), **report}


@task(name="ingest-report")
def report_task(report: dict, storage: str) -> str:
    from prefect.artifacts import create_markdown_artifact

    from infoclust_dask.io.store import open_dataset
    from infoclust_dask.runs import new_run_dir

    ds = open_dataset(report["path"])
    run = new_run_dir("ingest", root=storage)
    (run / "ingest-report.json").write_text(json.dumps(report, indent=1, default=str))
    rejected = report.get("rejected") or []
    lines = [f"# Ingest of `{report['source']}`", "",
             f"- store `{report['path']}`: {ds.sizes['sample']} samples x {ds.sizes['feature']} features, "
             f"variables {sorted(ds.data_vars)}",
             f"- chunks of {report['chunk_rows']} rows, codec {report['codec']} "
             f"(LZ4 would shrink the data {report['compression_ratio_lz4']}x)",
             f"- standardized: {report['standardized']}; PCA: {report['pca']}; folds: {report['n_folds']}"]
    lines += [f"- rejected: {r['rows']} rows ({r['reason']}; first rows {r['first_rows']}, columns {r['columns']})"
              for r in rejected] or ["- rejected: nothing"]
    md = "\n".join(lines) + "\n"
    (run / "report.md").write_text(md)
    create_markdown_artifact(markdown=md, key="ingest-report", description="what was read, rejected and written")
    get_run_logger().info("ingest report in %s", run)
    return str(run)


@checked_flow(name="infoclust-ingest", log_prints=True)
def ingest_flow(source: Location, dest: Location, label_column: str | None = None, drop_nonfinite: bool = False,
                standardize: bool = False, pca: int | None = None, n_folds: int | None = None, fold_seed: int = 0,
                chunks: int | None = None, codec: str = "auto", overwrite: bool = False,
                scheduler: Location | None = None, storage: Location | None = None) -> dict:
    """Validate ``source`` and write the store ``dest``; returns the report.

    A store already at ``dest`` that was written from the same source with
    the same options (standardize, pca, folds) is kept and reported as such
    (a scheduled or repeated ingest is a no-op); a different one is refused
    unless ``overwrite``."""
    from infoclust_dask.io.ingest import existing_store_differences
    from infoclust_dask.runs import storage_root

    if not overwrite:
        diff = existing_store_differences(dest, source, standardize=standardize, pca=pca, n_folds=n_folds,
                                          fold_seed=fold_seed)
        if diff == []:
            from prefect.artifacts import create_markdown_artifact

            said = f"store: {dest} already holds {source} with these options; kept (overwrite=true rewrites it)"
            print(said)
            create_markdown_artifact(markdown=f"# Ingest of `{source}`\n\n{said}\n", key="ingest-report",
                                     description="the store was already there, written with these options")
            return {"path": str(dest), "source": str(source), "kept": True}
        if diff:
            raise FileExistsError(
                f"A different store already exists at {dest}: " + "; ".join(diff)
                + ". Pass overwrite=true (--overwrite) to replace it, or choose another dest.")
    report = ingest_task(source, dest, label_column, drop_nonfinite, standardize, pca, n_folds, fold_seed, chunks,
                         codec, overwrite, scheduler)
    report["run_dir"] = report_task(report, str(storage or storage_root()))
    print(f"store: {report['path']} ({report['rows_written'] if 'rows_written' in report else report['rows']} rows)")
    return report


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m infoclust_pipelines.ingest", description=ingest_flow.__doc__)
    p.add_argument("source")
    p.add_argument("dest")
    p.add_argument("--label-column", default=None)
    p.add_argument("--drop-nonfinite", action="store_true")
    p.add_argument("--standardize", action="store_true")
    p.add_argument("--pca", type=int, default=None)
    p.add_argument("--folds", type=int, default=None)
    p.add_argument("--chunk-rows", type=int, default=None)
    p.add_argument("--codec", default="auto", choices=["auto", "lz4", "zstd", "none"])
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--scheduler", default=None)
    a = p.parse_args(argv)
    ingest_flow(source=a.source, dest=str(Path(a.dest)), label_column=a.label_column, drop_nonfinite=a.drop_nonfinite,
                standardize=a.standardize, pca=a.pca, n_folds=a.folds, chunks=a.chunk_rows, codec=a.codec,
                overwrite=a.overwrite, scheduler=a.scheduler)


if __name__ == "__main__":
    main()
