"""
K-means on iris, against the species
====================================

K-means (Lloyd's iteration, MacKay 2003, eq. 20.3-20.6) on the four iris
measurements, seeded by k-means++; the clusters are compared with the
species by the adjusted Rand index. The fit runs in this process: 150 rows
are far below the in-process budget.
"""

import matplotlib.pyplot as plt
from sklearn.datasets import load_iris
from sklearn.metrics import adjusted_rand_score

import infoclust_dask as ic

X, species = load_iris(return_X_y=True)
km = ic.KMeans(3, random_state=0).fit(X)
print("ARI against the species:", round(adjusted_rand_score(species, km.labels_), 3))
print("inertia:", round(km.inertia_, 2), " iterations:", km.n_iter_)
print("ran:", km.runner_["runner"])

fig, ax = plt.subplots(figsize=(5, 4))
ax.scatter(X[:, 2], X[:, 3], c=km.labels_, s=12, cmap="viridis")
ax.scatter(km.cluster_centers_[:, 2], km.cluster_centers_[:, 3], c="red", marker="x", s=80)
ax.set(xlabel="petal length (cm)", ylabel="petal width (cm)", title="K-means, k = 3")
fig.tight_layout()
