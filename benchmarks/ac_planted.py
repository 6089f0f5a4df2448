"""Associative clustering on paired data with a planted dependency in the
low-variance features (``datasets.make_paired_dependency``): held-out mutual
information between the two partitions, over several seeds.

Compared: K-means on each view separately; AC from K-means starts by plain
CG (one run: what a single CG run reaches); AC annealed from the data means
(one run); AC from the CCA start (one run); AC with the defaults (CCA start
+ 1 annealed restart, best training log BF); the partition by the true
latent class means (nearest mean in the signal features: the best Voronoi
partition one can hope for, given the noise) and the oracle I(z; z').

    python benchmarks/ac_planted.py [--seeds 5] [--n 4000] [--k 4]
"""

import argparse
import time
import warnings

import numpy as np


def table(lx, ly, k):
    t = np.zeros((k, k))
    np.add.at(t, (lx, ly), 1)
    return t


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--n", type=int, default=4000)
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--sigma", type=float, default=0.3)
    a = p.parse_args()

    from sklearn.exceptions import ConvergenceWarning

    from infoclust_dask import AssociativeClustering, KMeans
    from infoclust_dask.datasets import make_paired_dependency
    from infoclust_dask.objectives.ac import mutual_information as mi

    variants = {
        "AC, K-means start, one CG run": dict(init="kmeans", n_init=1),
        "AC, annealed from the means, one run": dict(init="centroid", n_init=1),
        "AC, CCA start, one CG run": dict(init="cca", n_init=1),
        "AC, defaults (CCA start + 1 annealed restart)": dict(),
    }
    res = {name: [] for name in ["K-means per view", *variants, "true latent means (nearest)", "oracle I(z; z')"]}
    secs = {name: [] for name in variants}
    k = a.k
    ang = 2 * np.pi * np.arange(k) / k
    means = np.c_[np.cos(ang), np.sin(ang)]
    for s in range(a.seeds):
        X, Y, _, _, oracle = make_paired_dependency(a.n, n_latent=k, random_state=1000 + s)
        Xt, Yt, _, _, _ = make_paired_dependency(a.n, n_latent=k, random_state=2000 + s)
        kx, ky = KMeans(k, random_state=s).fit(X), KMeans(k, random_state=s).fit(Y)
        res["K-means per view"].append(mi(table(kx.predict(Xt), ky.predict(Yt), k)))
        for name, kw in variants.items():
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                ac = AssociativeClustering((k, k), sigma=(a.sigma, a.sigma), random_state=s, scheduler="threads",
                                           **kw).fit(X, Y)
            secs[name].append(time.perf_counter() - t0)
            res[name].append(ac.mutual_information(Xt, Yt))
        near = lambda V: ((V[:, None, :2] - means[None]) ** 2).sum(-1).argmin(1)  # noqa: E731
        res["true latent means (nearest)"].append(mi(table(near(Xt), near(Yt), k)))
        res["oracle I(z; z')"].append(oracle)
        print(f"seed {s}: " + ", ".join(f"{n.split(',')[0] if n.startswith('K') else n}: {v[-1]:.3f}"
                                       for n, v in res.items()), flush=True)
    print(f"\n{a.seeds} seeds, {a.n} training and {a.n} held-out pairs, K = L = {k}, sigma = {a.sigma}\n")
    print("| partitions | held-out MI (nats), mean +- std | min | seconds per fit |")
    print("|---|---|---|---|")
    for name, v in res.items():
        t = f"{np.mean(secs[name]):.1f}" if name in secs else "-"
        print(f"| {name} | {np.mean(v):.3f} +- {np.std(v):.3f} | {np.min(v):.3f} | {t} |")


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
