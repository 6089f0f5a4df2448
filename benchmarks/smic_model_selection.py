"""SMIC's choice of t on scikit-learn's bundled real data (standardized; digits
as they are), default parameters, seed 0: the chosen t, its graph's connected
components and the ARI against the classes, beside scikit-learn's
SpectralClustering with its kNN affinity (the nearest comparable method).
Candidates whose graph has more components than clusters are left out of the
choice (``t_excluded_``) unless every candidate has them.

    python benchmarks/smic_model_selection.py
"""

import warnings

import numpy as np
from sklearn.cluster import SpectralClustering
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine
from sklearn.metrics import adjusted_rand_score
from sklearn.preprocessing import StandardScaler

import infoclust_dask as ic


def main():
    warnings.simplefilter("ignore")
    print("| set (n x d, c) | SMIC t | components | left out | SMIC ARI | SpectralClustering (kNN) ARI |")
    print("|---|---|---|---|---|---|")
    for name, loader in (("iris", load_iris), ("wine", load_wine), ("breast_cancer", load_breast_cancer),
                         ("digits", load_digits)):
        X, y = loader(return_X_y=True)
        X = X if name == "digits" else StandardScaler().fit_transform(X)
        k = len(np.unique(y))
        sm = ic.SMIC(k, random_state=0).fit(X)
        sc = SpectralClustering(k, affinity="nearest_neighbors", random_state=0).fit(X)
        print(f"| {name} ({X.shape[0]} x {X.shape[1]}, {k}) | {sm.t_} | {sm.n_components_} | {sm.t_excluded_} | "
              f"{adjusted_rand_score(y, sm.labels_):.3f} | {adjusted_rand_score(y, sc.labels_):.3f} |", flush=True)


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
