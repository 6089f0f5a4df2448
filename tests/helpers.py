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


def worker_info(client):
    """The workers of ``client``'s scheduler now, by address, asked of the
    scheduler itself: ``client.scheduler_info()["workers"]`` returns a cache
    that the client's periodic poll (which asks for no workers) may empty in
    between (engine/execute.py ``_worker_info``; the flaky test of issue 61)."""
    return client.sync(client.scheduler.identity, n_workers=-1)["workers"]


def finite_difference(f, m, h=1e-6):
    """Central differences of the scalar f at every entry of m."""
    fd = np.zeros_like(m)
    for idx in np.ndindex(*m.shape):
        mp, mm = m.copy(), m.copy()
        mp[idx] += h
        mm[idx] -= h
        fd[idx] = (f(mp) - f(mm)) / (2 * h)
    return fd


def graph_kernel(n, links, reach, seed):
    """A kNN-like sparse symmetric kernel for eigensolver tests: every row
    links to ``links`` rows at most ``reach`` ahead (cyclically) with
    weights in [0.1, 1), symmetrized by the elementwise maximum, unit
    diagonal - connected, with clustered top eigenvalues."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    rows = np.repeat(np.arange(n), links)
    cols = (rows + rng.integers(1, reach, size=rows.size)) % n
    K = sp.coo_matrix((rng.uniform(0.1, 1, size=rows.size), (rows, cols)), shape=(n, n)).tocsr()
    return (K.maximum(K.T) + sp.identity(n)).tocsr()


def local_services():
    """``deploy/local/services.py`` as a module (it is a script, not part of the package)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "deploy" / "local" / "services.py"
    spec = importlib.util.spec_from_file_location("local_services", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
