"""
Associative clustering of two paired views
==========================================

Two views of the same samples with a planted dependency. Associative
clustering (Sinkkonen, Kaski, Nikkilä & Lahti) partitions each view so
that the contingency table of the two partitions is as dependent as the
Bayes factor (3) can make it; the most surprising cross clusters are what
the views share.
"""

import matplotlib.pyplot as plt

import infoclust_dask as ic
from infoclust_dask.datasets import make_paired_dependency

X, Y, *_ = make_paired_dependency(3000, random_state=0)
ac = ic.AssociativeClustering((3, 3), sigma=(0.3, 0.3), n_init=1, random_state=0).fit(X, Y)
print("contingency table:\n", ac.contingency_)
print("mutual information of the partitions:", round(ac.mutual_information(X, Y), 3))
print("most surprising cross clusters:", ac.most_surprising(2))

fig, ax = plt.subplots(figsize=(4, 3.5))
ax.imshow(ac.contingency_, cmap="Blues")
ax.set(xlabel="y cluster", ylabel="x cluster", title="AC cross clusters")
fig.tight_layout()
