"""Cost of binding each chunk to its key (issue 38): a Lloyd pass and a
plain read over a store opened checked (:class:`infoclust_dask.storage.bound.BoundStore`,
the default) against the same store opened with ``trust=True`` (zarr reads
the chunks unchecked), interleaved in alternating order, best of
``--repeat``, in one run; and the time spent inside the checks themselves
(summed over the chunks of one read), which the wall-clock difference
(this machine varies by +-10 % between runs) cannot resolve.

    python benchmarks/bound_reads.py [--rows 10000000]
"""

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    from infoclust_dask import engine, open_dataset, write_dataset
    from infoclust_dask.datasets import make_blobs
    from infoclust_dask.kernels.kmeans import LLOYD_STEP

    tmp = Path(tempfile.mkdtemp(prefix="bound-"))
    try:
        X, _, _ = make_blobs(a.rows, 16, centers=8, random_state=0, dtype=np.float32, chunks=1 << 20)
        path = write_dataset(tmp / "s.zarr", X, check_finite=False)
        centers = np.asarray(open_dataset(path)["x"][:8].values, dtype=np.float64)
        runs = {"bound": lambda: open_dataset(path)["x"].data, "trusted": lambda: open_dataset(path, trust=True)["x"].data}
        best = {(k, job): np.inf for k in runs for job in ("read", "lloyd")}
        for i in range(a.repeat):
            for k, arr in (list(runs.items()) if i % 2 == 0 else list(runs.items())[::-1]):  # alternate the order
                x = arr()
                t = time.perf_counter()
                engine.compute(x.sum(dtype=np.float64), scheduler="threads")
                best[k, "read"] = min(best[k, "read"], time.perf_counter() - t)
                x = arr()
                t = time.perf_counter()
                engine.map_reduce(LLOYD_STEP, x, params={"centers": centers}, scheduler="threads")
                best[k, "lloyd"] = min(best[k, "lloyd"], time.perf_counter() - t)
        from infoclust_dask.storage import bound as _bound

        spent = [0.0, 0]
        check = _bound.BoundStore._check

        def timed(self, key, buf):
            t = time.perf_counter()
            check(self, key, buf)
            spent[0] += time.perf_counter() - t
            spent[1] += 1

        _bound.BoundStore._check = timed
        t = time.perf_counter()
        engine.compute(runs["bound"]().sum(dtype=np.float64), scheduler="threads")
        whole = time.perf_counter() - t
        _bound.BoundStore._check = check
        print(f"inside the checks: {spent[0] * 1e3:.3f} ms for {spent[1]} chunks = {100 * spent[0] / whole:.3f} % "
              f"of a {whole:.3f} s read")
        gb = a.rows * 16 * 4 / 1e9
        for job in ("read", "lloyd"):
            b, t = best["bound", job], best["trusted", job]
            print(f"{a.rows} x 16 float32 ({gb:.2f} GB), threads, {job}: bound {b:.3f} s, unchecked {t:.3f} s "
                  f"-> {100 * (b / t - 1):+.1f} %")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
