"""SMIC against scikit-learn's spectral clustering on the same rows, in one
run (issue 24): n = 1e5 Gaussian blobs (8 centres, d = 16) of two kinds -
``far`` (centres drawn with standard deviation 9, 9 sigma apart: one
connected component of the neighbour graph per cluster) and ``touching``
(scikit-learn's ``make_blobs`` with cluster_std 2.5 in a box of +-10: one
connected graph). For each: ``SMIC(8, t=10)`` on 2 worker processes
(approximate neighbour search), ``SMIC(8)`` with t chosen by LSMI in 1..10,
and ``SpectralClustering(8, affinity="nearest_neighbors",
n_neighbors=10, assign_labels="cluster_qr")`` in a child process (its
default threads; stopped after ``--sklearn-timeout`` seconds), with seconds
and ARI against the truth.

    python benchmarks/smic_vs_spectral.py [--n 100000] [--sklearn-timeout 900]
"""

import argparse
import time
import warnings

import numpy as np


def far(n, d, c, seed):
    rng = np.random.default_rng(seed)
    C = rng.normal(0, 9, size=(c, d))
    z = rng.integers(0, c, n)
    return C[z] + rng.normal(size=(n, d)), z


def touching(n, d, c, seed):
    from sklearn.datasets import make_blobs

    return make_blobs(n_samples=n, n_features=d, centers=c, cluster_std=2.5, center_box=(-10, 10),
                      random_state=seed)


def _spectral(X, c, out):
    import warnings

    from sklearn.cluster import SpectralClustering

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        labels = SpectralClustering(c, affinity="nearest_neighbors", n_neighbors=10, assign_labels="cluster_qr",
                                    random_state=0).fit_predict(X)
        out.put((time.perf_counter() - t0, labels, str(caught[0].message) if caught else ""))


def spectral_with_timeout(X, c, timeout):
    """scikit-learn's SpectralClustering in a child process: (seconds, labels or None, warning text)."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_spectral, args=(X, c, q))
    t0 = time.perf_counter()
    p.start()
    try:
        return q.get(timeout=timeout)
    except Exception:  # noqa: BLE001 - queue.Empty: the child ran out of time
        return time.perf_counter() - t0, None, f"stopped after {timeout:.0f} s"
    finally:
        p.kill()
        p.join()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--d", type=int, default=16)
    p.add_argument("--clusters", type=int, default=8)
    p.add_argument("--sklearn-timeout", type=float, default=900)
    a = p.parse_args()

    from distributed import Client, LocalCluster
    from sklearn.metrics import adjusted_rand_score as ari

    from infoclust_dask import SMIC

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="3GB", host="127.0.0.1",
                           dashboard_address=None)
    client = Client(cluster)
    rows = []
    try:
        for kind, make in (("far", far), ("touching", touching)):
            X, z = make(a.n, a.d, a.clusters, 7)
            for label, kw in (("SMIC t=10", {"t": 10}), ("SMIC t by LSMI (1..10)", {})):
                t0 = time.perf_counter()
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    m = SMIC(a.clusters, random_state=0, scheduler=client, **kw).fit(X)
                dt = time.perf_counter() - t0
                rows.append((kind, label, dt, ari(z, m.labels_),
                             f"t={m.t_}, {m.n_components_} components, recall {m.knn_recall_:.3f}"
                             + (f", warned: {caught[0].message}"[:90] if caught else "")))
                print(rows[-1], flush=True)
            dt, labels, note = spectral_with_timeout(X, a.clusters, a.sklearn_timeout)
            rows.append((kind, "sklearn SpectralClustering (kNN 10, cluster_qr)", dt,
                         float("nan") if labels is None else ari(z, labels), note[:90]))
            print(rows[-1], flush=True)
    finally:
        client.close()
        cluster.close()
    print(f"\n| data (n = {a.n}, d = {a.d}, {a.clusters} centres) | method | seconds | ARI | notes |")
    print("|---|---|---|---|---|")
    for kind, label, dt, score, note in rows:
        print(f"| {kind} | {label} | {dt:.1f} | {'-' if score != score else f'{score:.3f}'} | {note} |")


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
