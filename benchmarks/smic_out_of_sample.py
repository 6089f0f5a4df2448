"""SMIC's out-of-sample rule (§2.3) against refitting on all points.

For each toy set, kernel normalization and seed: SMIC on all 200 points (t
by LSMI, the "full fit"); SMIC on the other points, then ``predict`` the
``--held`` held-out points, compared with the labels the full fit gave them
(ARI between the two labelings; 1 = the same partition). Two ways to fit
the other points:

- "t by LSMI": SMIC as a user runs it, t chosen by LSMI on the training rows;
- "t fixed": the full fit's t forced on the training rows.

Printed per protocol: the agreement on the training rows (does the fit on
fewer points find the same partition?), on the held-out rows (mean, min,
share of draws >= 0.95), and on the held-out rows of the draws whose
training partition agrees (ARI >= 0.95) - the out-of-sample rule itself.

    python benchmarks/smic_out_of_sample.py --seeds 20 --held 20
"""

import argparse
import time

import numpy as np


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--held", type=int, default=20)
    a = p.parse_args()

    from sklearn.metrics import adjusted_rand_score as ari

    from infoclust_dask import SMIC
    from infoclust_dask.datasets import SMIC_TOYS, make_smic_toy

    t_start = time.perf_counter()
    print(f"{a.held} of 200 points held out, {a.seeds} draws; ARI between the held-out fit and the full fit")
    print("| set | normalization | protocol | training rows (mean) | held-out rows (mean, min, draws >= 0.95) | "
          "held-out rows where the training partitions agree (mean, draws) |")
    print("|---|---|---|---|---|---|")
    for name in SMIC_TOYS:
        for norm in ("none", "symmetric"):
            res = {"t by LSMI": ([], []), "t fixed": ([], [])}
            for seed in range(a.seeds):
                X, y = make_smic_toy(name, random_state=seed)
                c = len(np.unique(y))
                held = np.random.default_rng(seed).permutation(len(y))[:a.held]
                train = np.setdiff1d(np.arange(len(y)), held)
                full = SMIC(c, kernel_normalization=norm, random_state=seed, scheduler="sync").fit(X)
                for proto, t in (("t by LSMI", "auto"), ("t fixed", full.t_)):
                    part = SMIC(c, t=t, kernel_normalization=norm, random_state=seed, scheduler="sync").fit(X[train])
                    res[proto][0].append(ari(full.labels_[held], part.predict(X[held])))
                    res[proto][1].append(ari(full.labels_[train], part.labels_))
            for proto, (scores, train_scores) in res.items():
                scores, train_scores = np.array(scores), np.array(train_scores)
                ok = train_scores >= 0.95
                cond = f"{scores[ok].mean():.3f} ({ok.sum()})" if ok.any() else "- (0)"
                print(f"| {name} | {norm} | {proto} | {train_scores.mean():.3f} | {scores.mean():.3f}, "
                      f"{scores.min():.3f}, {(scores >= 0.95).sum()}/{a.seeds} | {cond} |", flush=True)
    print(f"total {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
