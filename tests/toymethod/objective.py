"""The toy method's driver-side maths: small arrays only."""

import numpy as np


def new_centers(stats, old):
    """The means of the rows nearest each centre (a centre without rows stays)."""
    counts = stats["counts"]
    out = np.array(old, dtype=np.float64, copy=True)
    ok = counts > 0
    out[ok] = stats["sums"][ok] / counts[ok, None]
    return out


def mean_distortion(stats):
    """The mean squared distance of the rows to their nearest centre."""
    return stats["d2"] / max(stats["n"], 1.0)
