"""
Discriminative clustering of wine, informative of the cultivar
==============================================================

Discriminative clustering (Kaski, Sinkkonen & Klami 2005) finds Voronoi
regions of the 13 standardized wine measurements whose class distributions
are as pure as the smoothed posterior (10) can make them; K-means on the
same rows, ignoring the classes, for comparison. The log posterior (9) is
higher (better) for DC.
"""

import matplotlib.pyplot as plt
from sklearn.datasets import load_wine
from sklearn.preprocessing import StandardScaler

import infoclust_dask as ic
from infoclust_dask.metrics import contingency_table, dc_log_posterior

X, c = load_wine(return_X_y=True)
X = StandardScaler().fit_transform(X)
dc = ic.DiscriminativeClustering(4, sigma=1.0, random_state=0).fit(X, c)
km = ic.KMeans(4, random_state=0).fit(X)
print("DC contingency (clusters x cultivars):\n", dc.contingency_)
print("K-means contingency:\n", contingency_table(km.labels_, c))
print("log posterior (9): DC", round(dc_log_posterior(dc.labels_, c, n_clusters=4), 2),
      " K-means", round(dc_log_posterior(km.labels_, c, n_clusters=4), 2))

fig, axes = plt.subplots(1, 2, figsize=(8, 3))
for ax, table, name in ((axes[0], dc.contingency_, "DC"), (axes[1], contingency_table(km.labels_, c), "K-means")):
    ax.imshow(table, cmap="Blues")
    ax.set(title=name, xlabel="cultivar", ylabel="cluster")
fig.tight_layout()
