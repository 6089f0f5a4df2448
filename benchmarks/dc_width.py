"""DC's default width against fixed widths, and against rounding (issue 54).

For each bundled real dataset, K-fold cross-validation (standardized with
the training part's moments): DiscriminativeClustering with its default
``sigma="auto"`` on the training part, and with each fixed width of the
default grid; the held-out cost (-(9), Kaski et al. 2005, summed over the
test fold) of each. Also the width the default chooses when X is
multiplied by (1 + 1e-12). Prints, per dataset, the default's mean cost,
the best fixed width's, their ratio, and on how many folds the
perturbation changed the choice.

    python benchmarks/dc_width.py                      # wine, iris, digits, satimage; ~10 min
    python benchmarks/dc_width.py --datasets wine iris --n-splits 1   # the single split of earlier versions
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import StratifiedKFold


def run(name: str, folds: int, n_splits: int, k: int | None, seed: int) -> dict:
    from infoclust_dask import DiscriminativeClustering
    from infoclust_dask.datasets import load_bundled
    from infoclust_dask.metrics import dc_log_posterior

    X, c, _ = load_bundled(name)
    X = np.asarray(X, dtype=np.float64)
    n_classes = int(c.max()) + 1
    k = k or n_classes
    default, perturbed_same, fixed = [], 0, None
    splits = {"n_splits": n_splits} if "n_splits" in DiscriminativeClustering().get_params() else {}  # older code
    t0 = time.perf_counter()
    for f, (tr, te) in enumerate(StratifiedKFold(folds, shuffle=True, random_state=seed).split(X, c)):
        mu, sd = X[tr].mean(0), X[tr].std(0)
        sd[sd == 0] = 1.0
        Xtr, Xte = (X[tr] - mu) / sd, (X[te] - mu) / sd

        def cost(model):
            return -dc_log_posterior(np.asarray(model.predict(Xte)), c[te], n_clusters=k, n_classes=n_classes)

        common = dict(random_state=seed + f, scheduler="sync", classes=np.arange(n_classes))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            auto = DiscriminativeClustering(k, **splits, **common).fit(Xtr, c[tr])
            again = DiscriminativeClustering(k, **splits, **common).fit(Xtr * (1 + 1e-12), c[tr])
            grid = sorted(auto.sigma_scores_)  # the default grid, from the training part's spread
            costs = [cost(DiscriminativeClustering(k, sigma=s, **common).fit(Xtr, c[tr])) for s in grid]
        default.append(cost(auto))
        perturbed_same += bool(np.isclose(again.sigma_, auto.sigma_, rtol=1e-9))
        fixed = costs if fixed is None else [a + b for a, b in zip(fixed, costs, strict=True)]
        print(f"  {name} fold {f + 1}/{folds}: default sigma {auto.sigma_:.4g} (x(1+1e-12): {again.sigma_:.4g}), "
              f"cost {default[-1]:.2f}; fixed widths {', '.join(f'{s:.3g}:{v:.1f}' for s, v in zip(grid, costs, strict=True))}",
              flush=True)
    fixed_mean = [v / folds for v in fixed]
    best = int(np.argmin(fixed_mean))
    return {"dataset": name, "k": k, "default": float(np.mean(default)), "best_fixed": fixed_mean[best],
            "best_fixed_sigma_index": best, "ratio": float(np.mean(default)) / fixed_mean[best],
            "same_choice": perturbed_same, "folds": folds, "seconds": time.perf_counter() - t0}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", nargs="+", default=["wine", "iris", "digits", "satimage"])
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--n-splits", type=int, default=3)
    p.add_argument("-k", type=int, default=None, help="clusters (default: the number of classes)")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    rows = [run(name, a.folds, a.n_splits, a.k, a.seed) for name in a.datasets]
    print(f"\nDC default width (n_splits={a.n_splits}) vs the best fixed width of its grid, {a.folds}-fold CV, "
          "held-out cost -(9) per fold (lower is better)")
    print("| dataset | k | default | best fixed (grid index) | default / best | same choice at X(1+1e-12) | s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['dataset']} | {r['k']} | {r['default']:.2f} | {r['best_fixed']:.2f} ({r['best_fixed_sigma_index']}) "
              f"| {r['ratio']:.3f} | {r['same_choice']}/{r['folds']} | {r['seconds']:.0f} |")


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
