"""K-means per Lloyd iteration, float64 and float32, ours against
scikit-learn, in one run: 1e6 x 16 blobs (8 centres), k = 8 and k = 100,
the same fixed initial centres, 30 iterations (tol 0), best of 3; the time of a whole fit
divided by its iterations (ours includes its moments pass, amortized). The
last columns: ours fitted on the path of a store holding the same rows (the
placement reads it into this process once: the read and the validation are
amortized over the 30 iterations), against ours on the array.

    python benchmarks/kmeans_float32.py
"""

import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.cluster import KMeans as SK
from sklearn.exceptions import ConvergenceWarning

from infoclust_dask import KMeans, write_dataset


def main():
    warnings.simplefilter("ignore", ConvergenceWarning)
    rng = np.random.default_rng(0)
    C = rng.normal(0, 3, size=(8, 16))
    X64 = C[rng.integers(0, 8, 1_000_000)] + rng.normal(size=(1_000_000, 16))
    tmp = Path(tempfile.mkdtemp(prefix="kmeans-f32-"))
    stores = {}
    for dt in (np.float64, np.float32):
        stores[dt] = str(tmp / f"x-{np.dtype(dt).name}.zarr")
        write_dataset(stores[dt], X64.astype(dt))
    print("| k | dtype | scikit-learn ms / iteration | ours ms / iteration | ratio | ours from a store ms / iteration "
          "| store / array |")
    print("|---|---|---|---|---|---|---|")
    for k, dt in ((8, np.float64), (8, np.float32), (100, np.float64), (100, np.float32)):
        init = X64[:k].copy()
        X = X64.astype(dt)
        res = {}
        for name, make in (("sklearn", lambda: SK(k, init=init.astype(dt), n_init=1, max_iter=30, tol=0,
                                                   algorithm="lloyd")),
                           ("ours", lambda: KMeans(k, init=init, max_iter=30, tol=0)),
                           ("store", lambda: KMeans(k, init=init, max_iter=30, tol=0))):
            best = np.inf
            for _ in range(3):
                m = make()
                t = time.perf_counter()
                m.fit(stores[dt] if name == "store" else X)
                best = min(best, (time.perf_counter() - t) / m.n_iter_)
            res[name] = best
        print(f"| {k} | {dt.__name__} | {res['sklearn'] * 1e3:.1f} | {res['ours'] * 1e3:.1f} | "
              f"{res['ours'] / res['sklearn']:.2f} | {res['store'] * 1e3:.1f} | {res['store'] / res['ours']:.2f} |",
              flush=True)


if __name__ == "__main__":
    main()
