"""K-means per Lloyd iteration, float64 and float32, ours against
scikit-learn, in one run: 1e6 x 16 blobs (8 centres), k = 8 and k = 100,
the same fixed initial centres, 30 iterations (tol 0), best of 3; the time of a whole fit
divided by its iterations (ours includes its moments pass, amortized). The
next columns: ours fitted on the path of a store holding the same rows (the
placement reads it into this process once: the read and the validation are
amortized over the 30 iterations), against ours on the array. The last
columns take the read apart: fits of 30 and of 60 iterations, from the
store and from the array; ``(t60 - t30) / 30`` is what one more iteration
costs (its pass), ``t30 - 30 x that`` what the fit costs once (from a
store: the open, the checks and the read).

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
          "| store / array | one more iteration, store / array (ms) | ratio | once per fit, store / array (ms) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
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
                best = min(best, _fit_seconds(m, stores[dt] if name == "store" else X) / m.n_iter_)
            res[name] = best
        whole = {}  # best whole-fit seconds at 30 and 60 iterations, from the array and from the store
        for name in ("ours", "store"):
            for iters in (30, 60):
                whole[name, iters] = min(_fit_seconds(KMeans(k, init=init, max_iter=iters, tol=0),
                                                      stores[dt] if name == "store" else X) for _ in range(3))
        more = {n: (whole[n, 60] - whole[n, 30]) / 30 for n in ("ours", "store")}
        once = {n: whole[n, 30] - 30 * more[n] for n in ("ours", "store")}
        print(f"| {k} | {dt.__name__} | {res['sklearn'] * 1e3:.1f} | {res['ours'] * 1e3:.1f} | "
              f"{res['ours'] / res['sklearn']:.2f} | {res['store'] * 1e3:.1f} | {res['store'] / res['ours']:.2f} | "
              f"{more['store'] * 1e3:.1f} / {more['ours'] * 1e3:.1f} | {more['store'] / more['ours']:.2f} | "
              f"{once['store'] * 1e3:.0f} / {once['ours'] * 1e3:.0f} |", flush=True)


def _fit_seconds(model, data):
    t = time.perf_counter()
    model.fit(data)
    return time.perf_counter() - t


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
