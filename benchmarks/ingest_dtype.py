"""float32 kept end to end: a float32 ``.npy`` ingested as float32 (the
default) against float64 (``--dtype float64``, what ``ingest`` wrote before
issue 28): bytes on disk, and one K-means pass (Lloyd, from fixed centres)
over each store on 2 single-threaded worker processes, interleaved rounds.

    python benchmarks/ingest_dtype.py --rows 8000000 --features 16 --repeat 5

The ``.npy`` and the two stores go to benchmarks/_data (gitignored) and are
removed afterwards.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
from _bench import interleaved

DATA = Path(__file__).resolve().parent / "_data"


def disk_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=8_000_000)
    ap.add_argument("--features", type=int, default=16)
    ap.add_argument("--clusters", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args(argv)
    DATA.mkdir(exist_ok=True)
    src = DATA / f"dtype-{a.rows}x{a.features}.npy"
    rng = np.random.default_rng(0)
    x = np.lib.format.open_memmap(src, mode="w+", dtype=np.float32, shape=(a.rows, a.features))
    for s in range(0, a.rows, 1_000_000):  # written in pieces: the file may exceed what one copy should cost
        e = min(a.rows, s + 1_000_000)
        x[s:e] = rng.normal(size=(e - s, a.features)) + rng.integers(0, a.clusters, e - s)[:, None]
    x.flush()
    del x
    stores = {}
    try:
        for dtype in ("float32", "float64"):
            dest = DATA / f"dtype-{dtype}.zarr"
            shutil.rmtree(dest, ignore_errors=True)
            extra = [] if dtype == "float32" else ["--dtype", "float64"]
            subprocess.run([sys.executable, "-m", "infoclust_dask.cli", "ingest", str(src), str(dest), *extra],
                           check=True, capture_output=True)
            stores[dtype] = dest

        from distributed import Client, LocalCluster

        from infoclust_dask import KMeans, open_dataset

        centres = np.asarray(np.load(src, mmap_mode="r")[: a.clusters], dtype=np.float64)
        with LocalCluster(n_workers=2, threads_per_worker=1, host="127.0.0.1", dashboard_address=None) as cluster, \
                Client(cluster) as client:
            arrays = {k: open_dataset(p)["x"] for k, p in stores.items()}

            def one_pass(arr):
                return lambda: KMeans(a.clusters, init=centres, n_init=1, max_iter=1, scheduler=client).fit(arr)

            times = interleaved({k: (one_pass(v), None) for k, v in arrays.items()}, a.repeat)
        print(f"{a.rows} x {a.features} float32 .npy ({src.stat().st_size / 1e9:.2f} GB); "
              f"one K-means pass, best / median of {a.repeat}, 2 workers:")
        for k, p in stores.items():
            print(f"  {k:8s} store {disk_bytes(p) / 1e9:.2f} GB on disk, dtype {arrays[k].dtype}; "
                  f"pass {times[k][0]:.2f} / {times[k][1]:.2f} s")
        print(f"float64 / float32: disk {disk_bytes(stores['float64']) / disk_bytes(stores['float32']):.2f}, "
              f"pass {times['float64'][1] / times['float32'][1]:.2f} (medians)")
    finally:
        src.unlink(missing_ok=True)
        for p in stores.values():
            shutil.rmtree(p, ignore_errors=True)


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
