"""SMIC at 1e6 rows with the defaults: no scheduler named, so the data
decide where it runs (issue 37: within 90 s from numpy input and from a
store). Issue 24's far blobs (8 centres drawn from N(0, 9^2) in 16
dimensions, unit noise), t = 10, approximate neighbours (the default above
50 000 rows).

    python benchmarks/smic_defaults.py [--n 1000000]
"""

import argparse
import time
from pathlib import Path

import numpy as np


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--t", type=int, default=10)
    a = p.parse_args()
    from sklearn.metrics import adjusted_rand_score as ari
    from smic_scale import far_blobs

    from infoclust_dask import SMIC, open_dataset, write_dataset

    path = Path(__file__).parent / "_data" / f"smic-scale-{a.n}x16-far8.zarr"
    if not path.exists():
        X, lab = far_blobs(a.n, 16, 8)
        write_dataset(path, X, label=lab, check_finite=False)
    ds = open_dataset(path)
    labels = np.asarray(ds["label"].values)
    for name, data in (("numpy", np.asarray(ds["x"].values)), ("store", ds["x"])):
        t0 = time.perf_counter()
        m = SMIC(8, t=a.t, random_state=0).fit(data)
        total = time.perf_counter() - t0
        print(f"{name}: {total:.1f} s, ARI {ari(labels, m.labels_):.4f}, ran {m.runner_['runner']} "
              f"({m.runner_['reason']}); " + ", ".join(f"{k} {v:.1f} s" for k, v in m.timings_.items()), flush=True)


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
