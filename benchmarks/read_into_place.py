"""A store read into this process once (the in-process placement), two
ways in one run: the chunks computed and joined by dask (``np.asarray(
runner.compute(x))``, what the placement did before) against each chunk
written into its place in one preallocated array (what it does now,
``InProcess.prepare``). 1e6 x 16 float64 (122 MiB) written by
``write_dataset``; interleaved rounds, best and median time, and the peak
of numpy's allocations (tracemalloc) in each way.

    python benchmarks/read_into_place.py [--rows 1000000]
"""

import argparse
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

from infoclust_dask import write_dataset
from infoclust_dask.engine.in_process import InProcess
from infoclust_dask.io.store import open_dataset


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    X = np.random.default_rng(0).normal(size=(args.rows, 16))
    path = str(Path(tempfile.mkdtemp(prefix="read-into-place-")) / "x.zarr")
    write_dataset(path, X)
    lazy = open_dataset(path)["x"].data
    runner = InProcess(threads=2)
    ways = {"computed and joined": lambda: np.asarray(runner.compute(lazy)),
            "written into place": lambda: runner.prepare(lazy, limit=1 << 40)}
    times: dict = {w: [] for w in ways}
    peaks: dict = {w: 0 for w in ways}
    for _ in range(args.rounds):
        for way, read in ways.items():
            tracemalloc.start()
            t0 = time.perf_counter()
            out = read()
            times[way].append(time.perf_counter() - t0)
            peaks[way] = max(peaks[way], tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
            assert np.array_equal(out, X)
            del out
    print(f"{X.nbytes / 2**20:.0f} MiB of float64 rows in {lazy.numblocks[0]} chunks")
    print("| way | best ms | median ms | peak of numpy's allocations MiB | peak / data |")
    print("|---|---|---|---|---|")
    for way in ways:
        print(f"| {way} | {min(times[way]) * 1e3:.0f} | {np.median(times[way]) * 1e3:.0f} | "
              f"{peaks[way] / 2**20:.0f} | {peaks[way] / X.nbytes:.2f} |")


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
