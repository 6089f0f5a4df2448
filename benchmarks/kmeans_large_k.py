"""Lloyd iterations at several (n, d, k) against scikit-learn (Lloyd and
Elkan) and faiss, same float32 data and the same initial centres, in
picoseconds per point x centre x dimension per iteration (issue 55), with
the machine's float32 fused-multiply-add limit beside it (2 flops per
point x centre x dimension). Also the final inertia of each. faiss's
``Kmeans.train`` ends at the new centres without the rows' labels there;
ours and scikit-learn's fits give labels and inertia at the final centres
(one more pass), so faiss is also timed with the ``index.search`` that
gives them ("faiss + labels").

    python benchmarks/kmeans_large_k.py                         # 2e5 x 128, k = 1024 and 1e6 x 16, k = 16
    python benchmarks/kmeans_large_k.py --shapes 200000,128,1024 --iters 5 40
    python benchmarks/kmeans_large_k.py --shapes 200000,128,1024 --iters 1 5 40 --spread 4 0.25   # both regimes
    python benchmarks/kmeans_large_k.py --soft --shapes                # one soft K-means EM step only
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np


def _data(n: int, d: int, k: int, seed: int = 0, spread: float = 4.0) -> tuple[np.ndarray, np.ndarray]:
    """Rows around min(k, 64) blob centres drawn with scale ``spread`` (4: the blobs apart; 0.25: overlapping,
    their centres closer than the unit noise), and k of the rows as initial centres."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=spread, size=(min(k, 64), d))
    X = (centres[rng.integers(0, len(centres), n)] + rng.normal(size=(n, d))).astype(np.float32)
    C0 = X[rng.choice(n, k, replace=False)].copy()
    return X, C0


def _inertia(X: np.ndarray, C: np.ndarray) -> float:
    from infoclust_dask import KMeans

    km = KMeans(len(C), init=C, n_init=1, max_iter=1, scheduler="sync")
    km.cluster_centers_, km.n_features_in_ = np.asarray(C, dtype=np.float64), X.shape[1]
    return -km.score(X)


def ours(X, C0, iters):
    from infoclust_dask import KMeans

    t = time.perf_counter()
    km = KMeans(len(C0), init=C0, n_init=1, max_iter=iters, tol=0.0).fit(X)  # the default runner: 2 threads here
    return time.perf_counter() - t, km.cluster_centers_, km.n_iter_


def sklearn(X, C0, iters, algorithm="lloyd"):
    from sklearn.cluster import KMeans

    t = time.perf_counter()
    km = KMeans(len(C0), init=C0, n_init=1, max_iter=iters, tol=0.0, algorithm=algorithm).fit(X)
    return time.perf_counter() - t, km.cluster_centers_, km.n_iter_


def faiss_(X, C0, iters):
    import faiss

    t = time.perf_counter()
    km = faiss.Kmeans(X.shape[1], len(C0), niter=iters, seed=0, max_points_per_centroid=10**9)
    km.train(X, init_centroids=C0)
    seconds = time.perf_counter() - t
    t = time.perf_counter()
    km.index.search(X, 1)  # the rows' labels at the final centres (ours and scikit-learn's fits give them)
    return seconds, km.centroids, iters, time.perf_counter() - t


def soft_iteration(n: int = 200_000, d: int = 128, k: int = 256, beta: float = 0.01, repeats: int = 3) -> None:
    """One soft K-means EM step (our pass, distances and sums by BLAS products) against one of our Lloyd steps
    and one EM iteration of scikit-learn's GaussianMixture(covariance_type="spherical"), same float32 rows and
    centres; best of ``repeats``."""
    import warnings

    from sklearn.mixture import GaussianMixture

    from infoclust_dask import engine
    from infoclust_dask.kernels.kmeans import LLOYD_STEP, SOFT_KMEANS

    X, C0 = _data(n, d, k)
    C = C0.astype(np.float64)
    engine.map_reduce(SOFT_KMEANS, X[:5000], None, params={"centers": C, "beta": beta})  # warm
    engine.map_reduce(LLOYD_STEP, X[:5000], None, params={"centers": C})
    soft, lloyd_ = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        engine.map_reduce(SOFT_KMEANS, X, None, params={"centers": C, "beta": beta})
        soft.append(time.perf_counter() - t)
        t = time.perf_counter()
        engine.map_reduce(LLOYD_STEP, X, None, params={"centers": C})
        lloyd_.append(time.perf_counter() - t)
    gm = GaussianMixture(k, covariance_type="spherical", max_iter=1, n_init=1, means_init=C0,
                         init_params="random_from_data", random_state=0)
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gm.fit(X)
    g = time.perf_counter() - t
    print(f"| one EM / Lloyd step, {n} x {d}, K = {k} | soft K-means EM {min(soft):.3f} s | our Lloyd step "
          f"{min(lloyd_):.3f} s | soft / Lloyd {min(soft) / min(lloyd_):.2f} | GaussianMixture(spherical), one "
          f"iteration {g:.2f} s ({g / min(soft):.0f}x ours) |")


def membership_passes(n: int = 200_000, shapes: tuple = ((64, 64), (128, 32), (16, 128)), repeats: int = 3) -> None:
    """One pass of DC's gradient (11) and of the isotropic mixture's EM sums at several K x d (float64 rows, our
    default runner), against the same arithmetic in plain numpy over the whole array (the tests' reference
    kernels, one BLAS call for each product) and, for the mixture, one iteration of scikit-learn's
    GaussianMixture(covariance_type="spherical"); best of ``repeats``."""
    import warnings

    from _bench import reference_kernels
    from sklearn.mixture import GaussianMixture

    from infoclust_dask import engine
    from infoclust_dask.kernels.dc import DC_GRAD
    from infoclust_dask.kernels.mixture import MIXTURE_EM

    ref = reference_kernels()
    rng = np.random.default_rng(0)
    print("| pass, n x d, K | ours s | numpy (same formulas) s | ours / numpy | GaussianMixture(spherical) one "
          "iteration s (its fit's start included) | ours / GaussianMixture |")
    print("|---|---|---|---|---|---|")
    for d, k in shapes:
        X = rng.normal(size=(n, d)) * 2
        c = rng.integers(0, 5, n)
        M = X[rng.choice(n, k, replace=False)]
        L = rng.normal(size=(k, 5))
        mix = {"means": M, "variances": np.full(k, 4.0), "log_weights": np.full(k, -np.log(k))}
        passes = {"DC gradient": (lambda: engine.map_reduce(DC_GRAD, X, c, params={"centers": M, "sigma": 3.0,
                                                                                      "L": L}),
                                  lambda: ref.dc_grad_stats(X, c, centers=M, sigma=3.0, L=L)),
                  "mixture EM": (lambda: engine.map_reduce(MIXTURE_EM, X, None, params=mix),
                                 lambda: ref.mixture_em_stats(X, **mix))}
        for name, (ours_, numpy_) in passes.items():
            ours_()  # warm: compilation
            t_ours = min(_seconds(ours_) for _ in range(repeats))
            t_np = min(_seconds(numpy_) for _ in range(repeats))
            gm_cell = "-"
            if name == "mixture EM":
                gm = GaussianMixture(k, covariance_type="spherical", max_iter=1, n_init=1, means_init=M,
                                     init_params="random_from_data", random_state=0)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    t_gm = _seconds(lambda: gm.fit(X))
                gm_cell = f"{t_gm:.3f} | {t_ours / t_gm:.3f}"
            else:
                gm_cell = "- | -"
            print(f"| {name}, {n} x {d}, {k} | {t_ours:.3f} | {t_np:.3f} | {t_ours / t_np:.2f} | {gm_cell} |",
                  flush=True)


def _seconds(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", nargs="*", default=["200000,128,1024", "1000000,16,16"])
    p.add_argument("--iters", type=int, nargs="+", default=[5])
    p.add_argument("--spread", type=float, nargs="+", default=[4.0],
                   help="blob centres' scale, one table row set per value (4: separated, 0.25: overlapping)")
    p.add_argument("--peak-gflops", type=float, default=None,
                   help="the machine's float32 FMA limit in Gflop/s (default: measured by one large sgemm)")
    p.add_argument("--soft", action="store_true", help="also one soft K-means EM step against a Lloyd step and "
                   "GaussianMixture(spherical) at 2e5 x 128, K = 256")
    p.add_argument("--memberships", action="store_true", help="also DC's gradient pass and the mixture's EM pass at "
                   "several K x d against plain numpy and GaussianMixture(spherical)")
    a = p.parse_args()
    if a.memberships:
        membership_passes()
    if a.soft:
        soft_iteration()
    if a.peak_gflops is None:
        m = np.random.default_rng(0).normal(size=(2048, 2048)).astype(np.float32)
        m @ m
        t = time.perf_counter()
        for _ in range(5):
            m @ m
        a.peak_gflops = 5 * 2 * 2048**3 / (time.perf_counter() - t) / 1e9
    limit = 2 / a.peak_gflops * 1e3  # ps per point x centre x dimension at the sgemm rate
    print(f"{os.cpu_count()} cores; sgemm {a.peak_gflops:.0f} Gflop/s = {limit:.1f} ps per point x centre x dimension")
    print("| n x d, k | spread | iterations | ours ps | scikit-learn Lloyd ps | scikit-learn Elkan ps | faiss ps | "
          "faiss + labels ps | ours / faiss | ours / (faiss + labels) | ours / sklearn | inertia ours / faiss |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for shape, spread in ((s, v) for s in a.shapes for v in a.spread):
        n, d, k = (int(v) for v in shape.split(","))
        X, C0 = _data(n, d, k, spread=spread)
        for iters in a.iters:
            res = {}
            for name, fn in (("ours", ours), ("sk", sklearn), ("elkan", lambda X, C, i: sklearn(X, C, i, "elkan")),
                             ("faiss", faiss_)):
                if name == "elkan" and k * n > 2e8:  # n x k bounds: skip where they would not fit comfortably
                    res[name] = None
                    continue
                fn(X[: min(n, 20000)], C0, 1)  # warm: compilation, thread pools
                seconds, centres, done, *search = fn(X, C0, iters)
                ps = 1e12 / max(done, 1) / (n * k * d)
                res[name] = (seconds * ps, _inertia(X, centres), (seconds + sum(search)) * ps)
            o, s, e, f = res["ours"], res["sk"], res["elkan"], res["faiss"]
            print(f"| {n} x {d}, {k} | {spread:g} | {iters} | {o[0]:.1f} | {s[0]:.1f} | {e[0] if e else float('nan'):.1f} | "
                  f"{f[0]:.1f} | {f[2]:.1f} | {o[0] / f[0]:.2f} | {o[0] / f[2]:.2f} | {o[0] / s[0]:.2f} | "
                  f"{o[1] / f[1]:.5f} |", flush=True)


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
