"""SMIC's out-of-sample rule (§2.3) against refitting on all points.

For each toy set and seed: fit on all 200 points (t by LSMI), fit again on
the other points with that t, predict the ``--held`` held-out points, and
compare with the labels the full fit gave them (ARI between the two
labelings; 1 = the same partition). Printed: the agreement on the training
rows (does the fit on fewer points find the same partition?), on the
held-out rows, and on the held-out rows of the draws whose training
partition agrees (ARI >= 0.95) - the out-of-sample rule itself.

    python benchmarks/smic_out_of_sample.py --seeds 20 --held 50
    python benchmarks/smic_out_of_sample.py --seeds 20 --held 20
"""

import argparse

import numpy as np


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--held", type=int, default=50)
    a = p.parse_args()

    from sklearn.metrics import adjusted_rand_score as ari

    from infoclust_dask import SMIC
    from infoclust_dask.datasets import SMIC_TOYS, make_smic_toy

    print(f"{a.held} of 200 points held out, {a.seeds} draws; ARI between the held-out fit and the full fit")
    print("| set | normalization | training rows (mean) | held-out rows (mean, min) | held-out rows where the "
          "training partitions agree (mean, draws) |")
    print("|---|---|---|---|---|")
    for name in SMIC_TOYS:
        for norm in ("none", "symmetric"):
            scores, train_scores = [], []
            for seed in range(a.seeds):
                X, y = make_smic_toy(name, random_state=seed)
                c = len(np.unique(y))
                held = np.random.default_rng(seed).permutation(len(y))[:a.held]
                train = np.setdiff1d(np.arange(len(y)), held)
                full = SMIC(c, kernel_normalization=norm, random_state=seed, scheduler="sync").fit(X)
                part = SMIC(c, t=full.t_, kernel_normalization=norm, random_state=seed, scheduler="sync").fit(X[train])
                scores.append(ari(full.labels_[held], part.predict(X[held])))
                train_scores.append(ari(full.labels_[train], part.labels_))
            scores, train_scores = np.array(scores), np.array(train_scores)
            ok = train_scores >= 0.95
            cond = f"{scores[ok].mean():.3f} ({ok.sum()})" if ok.any() else "- (0)"
            print(f"| {name} | {norm} | {train_scores.mean():.3f} | {scores.mean():.3f}, {scores.min():.3f} | {cond} |",
                  flush=True)


if __name__ == "__main__":
    main()
