"""
Deterministic annealing: where soft K-means splits
==================================================

Soft K-means (MacKay 2003, eq. 20.7-20.9) followed from a soft stiffness
``beta`` to a stiff one. The centres stay together until ``beta`` reaches
about ``1 / variance`` of the cluster they describe (Rose 1998): here
three groups of variance 1, 1 and 0.25 along a line. The schedule is
placed from the predicted critical stiffnesses (``beta_schedule="auto"``).
"""

import matplotlib.pyplot as plt
import numpy as np

import infoclust_dask as ic

rng = np.random.default_rng(0)
x = np.concatenate([rng.normal(-6, 1, 2000), rng.normal(0, 1, 2000), rng.normal(5, 0.5, 2000)])[:, None]
sk = ic.SoftKMeans(3, beta_schedule="auto", beta=8.0, random_state=0).fit(x)
print("betas visited:", len(sk.betas_))
print("splits seen at (beta, distinct centres):", [(round(b, 3), n) for b, n in sk.critical_betas()])

path = np.array([c.ravel() for c in sk.centers_path_])
fig, ax = plt.subplots(figsize=(5, 4))
ax.semilogx(sk.betas_, path, ".-", ms=3)
ax.set(xlabel="stiffness beta", ylabel="centre", title="soft K-means annealing path")
fig.tight_layout()
