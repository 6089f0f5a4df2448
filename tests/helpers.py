"""Helpers shared by several test modules (not fixtures)."""

import numpy as np
from dask.callbacks import Callback


class CountLocalComputes(Callback):
    """Counts the graphs run by dask's local (threads / sync) schedulers in
    this process while active (``with CountLocalComputes() as c: ...; c.n``)."""

    def __init__(self):
        super().__init__()
        self.n = 0

    def _start(self, dsk):
        self.n += 1


def finite_difference(f, m, h=1e-6):
    """Central differences of the scalar f at every entry of m."""
    fd = np.zeros_like(m)
    for idx in np.ndindex(*m.shape):
        mp, mm = m.copy(), m.copy()
        mp[idx] += h
        mm[idx] -= h
        fd[idx] = (f(mp) - f(mm)) / (2 * h)
    return fd
