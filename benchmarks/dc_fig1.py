"""Reproduce Fig. 1 of Kaski, Sinkkonen & Klami (2005): VQ-regularized DC (15)
on a 2-D isotropic Gaussian whose class probability changes only vertically.

10 000 samples, two classes (p(c1 | x) = 1 / (1 + exp(-2 x_2))), K prototypes
from the same K-means start, lambda_VQ = 0 (plain DC), 0.02 and 10 (K-means
like). Writes docs/figures/dc_fig1.png (grey: density of x; blue: borders of the
Voronoi regions; red: prototypes) and prints the prototype spreads.

    python benchmarks/dc_fig1.py
"""

import warnings
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning


def main(k=5, sigma=0.5, lams=(0.0, 0.02, 10.0), out=Path(__file__).resolve().parents[1] / "docs" / "figures" / "dc_fig1.png"):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from infoclust_dask import DiscriminativeClustering, KMeans

    rng = np.random.default_rng(0)
    X = rng.normal(size=(10_000, 2))
    c = (rng.uniform(size=len(X)) < 1 / (1 + np.exp(-2 * X[:, 1]))).astype(np.int64)
    m0 = KMeans(k, random_state=0).fit(X).cluster_centers_
    fig, axes = plt.subplots(1, len(lams), figsize=(4 * len(lams), 4), dpi=110, sharey=True)
    g = np.linspace(-3.5, 3.5, 200)
    dens = np.exp(-0.5 * (g[:, None] ** 2 + g[None, :] ** 2))
    print("| lambda_VQ | horizontal spread (std of m_x) | vertical spread (std of m_y) |")
    print("|---|---|---|")
    for ax, lam in zip(axes, lams):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            dc = DiscriminativeClustering(k, sigma=sigma, init=m0, max_iter=29,
                                          regularization="vq" if lam > 0 else None, reg_strength=lam).fit(X, c)
        m = dc.cluster_centers_
        print(f"| {lam} | {m[:, 0].std():.3f} | {m[:, 1].std():.3f} |")
        ax.contourf(g, g, dens, levels=12, cmap="Greys")
        gx, gy = np.meshgrid(g, g)
        regions = dc.predict(np.column_stack([gx.ravel(), gy.ravel()])).reshape(gx.shape)
        ax.contour(g, g, regions, levels=np.arange(k) + 0.5, colors="tab:blue", linewidths=1.2)
        ax.scatter(np.clip(m[:, 0], -3.4, 3.4), np.clip(m[:, 1], -3.4, 3.4), s=90, facecolors="none",
                   edgecolors="red", linewidths=2)
        ax.set_title(f"lambda_VQ = {lam}" + (" (plain DC)" if lam == 0 else ""))
        if np.abs(m).max() > 3.4:
            ax.text(0, -3.3, "prototypes outside the view are drawn at its edge", ha="center", fontsize=8)
        ax.set_xlim(-3.5, 3.5)
        ax.set_ylim(-3.5, 3.5)
        ax.set_aspect("equal")
    axes[0].set_ylabel("x2 (p(c1 | x) increases upwards)")
    fig.suptitle(f"VQ-regularized discriminative clustering (15), K={k}, sigma={sigma}")
    fig.tight_layout()
    fig.savefig(out)
    print(f"\nwrote {out}")


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
