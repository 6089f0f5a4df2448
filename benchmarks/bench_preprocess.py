"""Preprocessing a >= 2 GB store, block by block, against a plain read of it.

On a LocalCluster of 2 single-threaded worker processes, in one run, on one
store: a plain read (sum), the moments pass (per-feature mean/std), dask's
TSQR SVD of the centred data (``preprocess.tall_svd``, ``--pca-method tsqr``),
the Gram pass (``--pca-method gram``, the default), and the whole
store-to-store ``ingest --standardize --pca K`` (moments + Gram + the
projected write). Ratios are times over the plain read. Peak RSS of the
workers shows that no process holds the data.

    python benchmarks/bench_preprocess.py [--rows 4000000] [--features 64] [--pca 8]
"""

import argparse
import shutil
import time
import uuid
from pathlib import Path

import numpy as np


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=4_000_000)
    p.add_argument("--features", type=int, default=64)
    p.add_argument("--pca", type=int, default=8)
    p.add_argument("--keep", action="store_true", help="keep the source store for another run")
    a = p.parse_args()

    import dask.array as da

    from infoclust_dask import engine, open_dataset, write_dataset
    from infoclust_dask.datasets import make_blobs
    from infoclust_dask.io.ingest import ingest
    from infoclust_dask.preprocess import feature_moments, principal_axes, tall_svd

    data = Path(__file__).parent / "_data"
    src = data / f"pre-{a.rows}x{a.features}.zarr"
    if not src.exists():
        X, _, _ = make_blobs(a.rows, a.features, centers=8, random_state=0, chunks=131_072)
        write_dataset(src, X, codec="none", check_finite=False)
    ds = open_dataset(src)
    nbytes = ds["x"].size * ds["x"].dtype.itemsize
    print(f"store: {ds['x'].shape} {ds['x'].dtype}, {nbytes / 1e9:.2f} GB, {len(ds['x'].chunks[0])} chunks")
    client = engine.local_client(n_workers=2, threads_per_worker=1)

    def fresh():
        return da.from_zarr(str(src / "x"), name=f"x-{uuid.uuid4().hex}")

    def rss():
        return max(client.run(lambda: __import__("psutil").Process().memory_info().rss).values()) / 2**30

    times = {}
    t = time.perf_counter()
    engine.compute(fresh().sum(dtype=np.float64), scheduler=client)
    times["plain read (sum)"] = time.perf_counter() - t
    t = time.perf_counter()
    mean, std, n, _ = feature_moments(fresh(), scheduler=client)
    times["moments pass"] = time.perf_counter() - t
    t = time.perf_counter()
    tall_svd(fresh(), center=mean, scheduler=client)
    times["TSQR SVD (centred, dask)"] = time.perf_counter() - t
    t = time.perf_counter()
    principal_axes(fresh(), a.pca, scheduler=client)
    times["Gram pass (X^T X) + eigh"] = time.perf_counter() - t
    dest = data / f"pre-{a.rows}x{a.features}-std-pca{a.pca}.zarr"
    shutil.rmtree(dest, ignore_errors=True)
    t = time.perf_counter()
    _, report = ingest(src, dest, standardize=True, pca=a.pca, scheduler=client)
    times[f"ingest store -> store (standardize, PCA {a.pca}, write)"] = time.perf_counter() - t
    peak = rss()
    base = times["plain read (sum)"]
    print("\n| step | seconds | / plain read |\n|---|---|---|")
    for k, v in times.items():
        print(f"| {k} | {v:.1f} | {v / base:.2f} |")
    print(f"\nworker peak RSS now {peak:.2f} GiB (data {nbytes / 2**30:.2f} GiB); "
          f"explained variance of {a.pca} components {report['explained_variance_ratio']:.3f}; "
          f"codec chosen {report['codec']} (LZ4 ratio {report['compression_ratio_lz4']})")
    shutil.rmtree(dest, ignore_errors=True)
    if not a.keep:
        shutil.rmtree(src, ignore_errors=True)


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
