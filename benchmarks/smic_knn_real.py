"""ARI of SMIC (t by LSMI, kernel as (7)) with the exact and the approximate
(NN-descent cells; cells this small are searched exactly) neighbour graph on the real sets shipped in packages (all rows,
standardized, random_state 0).

    python benchmarks/smic_knn_real.py
"""

import time

import numpy as np
from sklearn.metrics import adjusted_rand_score as ari

from infoclust_dask import SMIC
from infoclust_dask.datasets import load_bundled


def main():
    for name in ("digits", "optdigits", "penbased"):
        X, y, _ = load_bundled(name)
        X = (X - X.mean(0)) / np.where(X.std(0) > 0, X.std(0), 1)
        c = len(np.unique(y))
        out = []
        for knn in ("exact", "approximate"):
            t0 = time.perf_counter()
            m = SMIC(c, random_state=0, scheduler="threads", knn=knn).fit(X)
            out.append((knn, ari(y, m.labels_), m.t_, m.knn_recall_, time.perf_counter() - t0))
        print(name, X.shape, " | ".join(f"{k}: ARI {a:.4f} t={t} recall {r:.4f} {s:.1f} s" for k, a, t, r, s in out),
              f"| diff {abs(out[0][1] - out[1][1]):.4f}", flush=True)


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
