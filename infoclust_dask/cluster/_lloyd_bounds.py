"""The per-row bounds Lloyd keeps between its steps when the rows stay in
this process's memory: Hamerly's (2010) two bounds for few centres,
Yinyang's grouped bounds (Ding, Zhao, Shen, Musuvathi & Mytkowicz 2015) for
many. Either gives the counts and sums of the plain step - the same centres
at every iteration - while measuring only the distances the bounds cannot
rule out."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import engine
from .._support.progress import say
from ..kernels.kmeans import HAMERLY_STEP, LABELLED_INERTIA, YINYANG_STEP

#: Yinyang's groups: about one per this many centres (Ding et al. 2015, §3.2: k / 10)
CENTRES_PER_GROUP = 10
#: Yinyang's lower bounds (8 bytes a row and group) take at most as many bytes as the rows themselves, at least
#: YINYANG_MIN_BYTES and at most YINYANG_MAX_BYTES: fewer, larger groups above that
YINYANG_MIN_BYTES = 2**28
YINYANG_MAX_BYTES = 2 * 2**30


def half_gaps(centers: np.ndarray) -> np.ndarray:
    """Half the distance from each centre to its nearest other centre (Hamerly's ``s``)."""
    c = np.asarray(centers, dtype=np.float64)
    if len(c) < 2:
        return np.full(len(c), np.inf)
    g = np.sqrt(np.maximum(((c[:, None, :] - c[None, :, :]) ** 2).sum(-1), 0.0))
    np.fill_diagonal(g, np.inf)
    return 0.5 * g.min(axis=1)


def centre_groups(centers: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """The centres split into ``n_groups`` groups of nearby centres by five
    Lloyd steps on the centres themselves (Ding et al. 2015, §3.2) from
    farthest-first seeds (the first centre, then each time the centre
    farthest from the seeds so far: deterministic), as ``(order, start)``:
    group g's centres are ``order[start[g]:start[g + 1]]`` (every group
    non-empty)."""
    c = np.asarray(centers, dtype=np.float64)
    k = len(c)
    n_groups = max(1, min(int(n_groups), k))
    seeds = [0]
    near = ((c - c[0]) ** 2).sum(axis=1)
    for _ in range(1, n_groups):
        seeds.append(int(np.argmax(near)))
        near = np.minimum(near, ((c - c[seeds[-1]]) ** 2).sum(axis=1))
    means = c[seeds].copy()
    group = np.zeros(k, dtype=np.int64)
    for _ in range(5):  # |m|^2 - 2 c.m ranks the means as |c - m|^2 does (one product, not a k x groups x d array)
        group = np.argmin((means**2).sum(axis=1)[None, :] - 2.0 * (c @ means.T), axis=1)
        for g in range(n_groups):
            if np.any(group == g):
                means[g] = c[group == g].mean(axis=0)
    used = np.unique(group)  # a group left empty is dropped
    group = np.searchsorted(used, group)
    order = np.argsort(group, kind="stable").astype(np.int64)
    start = np.searchsorted(group[order], np.arange(len(used) + 1)).astype(np.int64)
    return order, start


class RowBounds:
    """Bounds of ``n`` rows against ``k`` centres, kept in place between
    Lloyd steps: Hamerly's for ``k <= hamerly_max_k`` (24 bytes a row), else
    Yinyang's (16 bytes a row and 8 per group of about
    :data:`CENTRES_PER_GROUP` centres; all groups at most ``data_bytes``,
    clipped to :data:`YINYANG_MIN_BYTES` - :data:`YINYANG_MAX_BYTES`)."""

    @staticmethod
    def planned(n: int, k: int, hamerly_max_k: int, data_bytes: int = 0) -> tuple[int, int]:
        """``(groups, bytes)`` the bounds of ``n`` rows against ``k`` centres
        will take (groups 0: Hamerly's)."""
        if k <= hamerly_max_k:
            return 0, 24 * n
        room = min(max(int(data_bytes), YINYANG_MIN_BYTES), YINYANG_MAX_BYTES)
        n_groups = max(1, min(k // CENTRES_PER_GROUP, room // (8 * max(n, 1))))
        return n_groups, 16 * n + 8 * n * n_groups

    def __init__(self, n: int, centers: np.ndarray, hamerly_max_k: int, data_bytes: int = 0):
        k = len(centers)
        self.previous = np.array(centers, dtype=np.float64)
        self.labels, self.upper = np.full(n, -1, dtype=np.int64), np.zeros(n)
        self.grouped = k > hamerly_max_k
        self.lower: np.ndarray
        if self.grouped:
            n_groups = self.planned(n, k, hamerly_max_k, data_bytes)[0]
            self.order, self.start = centre_groups(self.previous, n_groups)
            self.lower = np.zeros((n, len(self.start) - 1))
        else:
            self.lower = np.zeros(n)

    def step(self, X: Any, w: Any, centers: np.ndarray) -> dict:
        """One bounded Lloyd step at ``centers``: the plain step's counts and
        sums, with ``skipped`` (rows decided by the bounds alone) and, for
        Yinyang, ``measured`` (distances computed)."""
        moved = np.sqrt(((centers - self.previous) ** 2).sum(axis=1))
        state = (self.labels, self.upper, self.lower)
        if self.grouped:
            group_moved = np.maximum.reduceat(moved[self.order], self.start[:-1])
            st = engine.map_reduce(YINYANG_STEP, X, w, *state, params={
                "centers": centers, "moved": moved, "order": self.order, "start": self.start,
                "group_moved": group_moved})
        else:
            st = engine.map_reduce(HAMERLY_STEP, X, w, *state, params={
                "centers": centers, "moved": moved, "half_gap": half_gaps(centers)})
        self.previous = np.array(centers, dtype=np.float64)
        return st

    def final(self, X: Any, w: Any, centers: np.ndarray, settled: bool = False
              ) -> tuple[float, np.ndarray, np.ndarray]:
        """The inertia, counts and labels at the final ``centers`` by one
        more bounded step (none when ``settled``: the last step was at
        these centres, its labels are final) and the rows' distances to
        their centres (n x d work, not n x k): the numbers of a plain pass,
        bit for bit (every path measures a distance by
        :func:`~infoclust_dask.kernels._lloyd_loops._sq_dist`)."""
        if not settled:
            self.step(X, w, centers)
        st = engine.map_reduce(LABELLED_INERTIA, X, w, self.labels, params={"centers": centers})
        return float(st["inertia"]), np.asarray(st["counts"], dtype=np.float64), self.labels.copy()


#: a bounded step (from the second) that took longer than the fastest plain step of this fit, and not less than
#: this share of the bounded step before it (the bounds were not catching up), ends the bounds: measured where the
#: fit runs, not by constants of one machine (issue 63: on an AVX2 machine Hamerly's bounds at k = 4 on overlapping
#: blobs made K-means 1.25x scikit-learn, 0.56-0.61x without them)
BOUNDS_FALLING = 0.75


def bounds_pay(plain: float, step: float, previous: float) -> bool:
    """Whether a bounded step that took ``step`` seconds, after one of
    ``previous`` seconds, keeps the bounds, against the fit's fastest plain
    step (``plain`` seconds): it was no slower, or it fell below
    :data:`BOUNDS_FALLING` of the previous one (the bounds are settling)."""
    return step <= plain or step < BOUNDS_FALLING * previous


def say_bounds(paths, verbose, label, line):
    """One line on the bounds' fate: into ``paths``, the progress lines and ``runner_["paths"]``."""
    if paths is not None:
        paths.append(line)
    if verbose:
        say(f"[KMeans{label}] {line}")
    _note_paths(f"Lloyd: {line}")


def _note_paths(line: str) -> None:
    """Tell the fit's runner (``runner_["paths"]``) which path Lloyd took and why."""
    runner = engine.current_runner()
    if runner is not None:
        runner.note_path(line)


def note_step_path(X, k: int) -> None:
    """``runner_["paths"]``: the step's kernel path for these rows (chosen by measurement in the process that runs
    it, :mod:`infoclust_dask.kernels._choice`)."""
    from ..kernels import _choice, _compiled

    paths = _compiled.lloyd_paths(k)
    if len(paths) == 1:
        _note_paths(f"Lloyd's step: the {paths[0]} ({'forced' if _compiled.LLOYD_PATH else f'{k} centres'})")
        return
    dtype = np.dtype(X.dtype if X.dtype in (np.float32, np.float64) else np.float64)
    chosen = _choice.report("lloyd").get(("lloyd", dtype.str, k, X.shape[1]))
    if chosen is None or not engine.resolve_scheduler(None).in_this_process():
        _note_paths("Lloyd's step: the exact loops or the products, whichever was faster in each process running "
                    "it (the same bits)")
        return
    figures = ", ".join(f"{p} {ns:.3g} ns" for p, ns in chosen["ns_per_row"].items())
    _note_paths(f"Lloyd's step: the {chosen['path']} (measured in this process, per row: {figures}; the same bits)")
