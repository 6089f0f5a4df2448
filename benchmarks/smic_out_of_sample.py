"""SMIC's out-of-sample rule (§2.3) against refitting on all points.

For each toy set and seed: fit on all 200 points (t by LSMI), fit again on
150 of them with that t, predict the 50 held out, and compare with the
labels the full fit gave them (ARI between the two labelings; 1 = the same
partition).

    python benchmarks/smic_out_of_sample.py --seeds 10
"""

import argparse

import numpy as np


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", type=int, default=10)
    a = p.parse_args()

    from sklearn.metrics import adjusted_rand_score as ari

    from infoclust_dask import SMIC
    from infoclust_dask.datasets import SMIC_TOYS, make_smic_toy

    print("| set | normalization | ARI(predict on held-out, full refit) mean | min |")
    print("|---|---|---|---|")
    for name in SMIC_TOYS:
        for norm in ("none", "symmetric"):
            scores = []
            for seed in range(a.seeds):
                X, y = make_smic_toy(name, random_state=seed)
                c = len(np.unique(y))
                held = np.random.default_rng(seed).permutation(len(y))[:50]
                train = np.setdiff1d(np.arange(len(y)), held)
                full = SMIC(c, kernel_normalization=norm, random_state=seed, scheduler="sync").fit(X)
                part = SMIC(c, t=full.t_, kernel_normalization=norm, random_state=seed, scheduler="sync").fit(X[train])
                scores.append(ari(full.labels_[held], part.predict(X[held])))
            print(f"| {name} | {norm} | {np.mean(scores):.3f} | {np.min(scores):.3f} |", flush=True)


if __name__ == "__main__":
    main()
