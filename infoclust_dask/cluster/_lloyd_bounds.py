"""The per-row bounds Lloyd keeps between its steps when the rows stay in
this process's memory: Hamerly's (2010) two bounds for few centres,
Yinyang's grouped bounds (Ding, Zhao, Shen, Musuvathi & Mytkowicz 2015) for
many. Either gives the counts and sums of the plain step - the same centres
at every iteration, bit for bit - while measuring only the distances the
bounds cannot rule out. Also whether a fit keeps them (issue 63):
:func:`use_bounds` (where they may be kept at all), :func:`plain_steps`,
:func:`bounds_pay` and :func:`judge_whole_fit` (kept only while they pay,
measured where the fit runs), and the lines ``runner_["paths"]`` shows."""

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


#: up to this many centres Lloyd's bounds per row are Hamerly's (2010): one upper and one lower bound, 16 bytes a
#: row, plus its label (8 bytes); above, Yinyang's grouped bounds (Ding et al. 2015)
HAMERLY_MAX_K = 64
#: ``bounds="auto"`` sets Hamerly's bounds up after this many plain steps (the fastest is the measure of the
#: bounded ones; the first may include loading the compiled kernels: 0.35 s against 6 ms), when at least two more
#: steps are allowed (the set-up step costs more than a plain one: 1.4x at 5e5 x 16, k = 4). Yinyang's are set
#: up at the first step, whatever max_iter: its set-up is a plain products step that also writes the group
#: bounds (about 1.1x a plain step at 2e5 x 128, k = 1024), its time the measure of the bounded steps
BOUNDS_PLAIN_STEPS = 2
BOUNDS_MIN_ITER = BOUNDS_PLAIN_STEPS + 2
#: classes ``(bounds' kind, dtype, k, d, rows' bit length)`` whose bounds lost in this process by measurement:
#: later fits of the class keep plain steps without trying them again (the trial costs about one plain step)
BOUNDS_LOST: set[tuple] = set()


def lost(kind: tuple) -> bool:
    """Whether the bounds of this class of work lost earlier in this process (:data:`BOUNDS_LOST`)."""
    return kind in BOUNDS_LOST


def mark_lost(kind: tuple) -> None:
    """Keep this class of work on plain steps for the rest of the process."""
    BOUNDS_LOST.add(kind)


def judge_whole_fit(bounds, kind: tuple, spent: float, plain_would: float, paths, verbose, label) -> None:
    """The bounds' account of a whole fit: ``spent`` seconds in bounded steps, their set-up and the final pass,
    against ``plain_would`` (the fastest plain step times the steps and final pass plain Lloyd would have made).
    ``"auto"`` bounds that lost are not tried again for this class in this process (:data:`BOUNDS_LOST`)."""
    if bounds != "auto":
        say_bounds(paths, verbose, label, "bounds kept (asked for)")
        return
    verdict = "paid" if spent <= plain_would else "did not pay: not tried again for this class of work here"
    if spent > plain_would:
        mark_lost(kind)
    say_bounds(paths, verbose, label, f"bounds kept to the end: {spent:.3g} s with them where plain steps would have "
               f"taken about {plain_would:.3g} s ({verdict})")


def plain_steps(k: int) -> int:
    """Plain (timed) steps before ``bounds="auto"`` sets the bounds up: Hamerly's after
    :data:`BOUNDS_PLAIN_STEPS`, Yinyang's at once (their set-up is a plain step)."""
    return 0 if k > HAMERLY_MAX_K else BOUNDS_PLAIN_STEPS


def use_bounds(X, k: int, bounds: str | bool, max_iter: int) -> bool:
    """Whether Lloyd may keep per-row bounds: rows in this process's memory
    (the bounds are updated in place beside them), no journal recording the
    passes (a replayed pass would not update them), data above the numpy
    forms' size (the tiny passes' other arithmetic:
    :data:`~infoclust_dask.kernels._compiled.NUMPY_FORM_MAX_BYTES`), and,
    for ``"auto"``, at least :data:`BOUNDS_MIN_ITER` allowed steps (Hamerly's;
    Yinyang's: 1) and
    bounds that fit in a quarter of the memory available now. None of it
    changes the model: the bounded steps give the plain steps' bits."""
    from .. import journal
    from ..kernels import numpy_form_fits

    if bounds is False or engine.is_lazy(X) or journal.active() is not None:
        return False
    least = 1 if k > HAMERLY_MAX_K else BOUNDS_MIN_ITER
    if bounds is not True and not (not numpy_form_fits(X.nbytes) and max_iter >= least):
        return False
    if bounds is not True and RowBounds.planned(X.shape[0], k, HAMERLY_MAX_K, X.nbytes)[1] > _bounds_room():
        return False  # the bounds would not fit beside what this process holds: plain steps
    return engine.resolve_scheduler(None).in_this_process()


def _bounds_room() -> int:
    """Bytes the automatic bounds may take: a quarter of the memory available now."""
    import psutil

    return int(psutil.virtual_memory().available // 4)


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


#: :meth:`RowBounds.forecast` reads at most this many rows, evenly spaced (at 2e5 rows and 102 groups the whole
#: forecast took 0.1-0.27 s, a third of a Lloyd step at k = 1024)
FORECAST_ROWS = 16384


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

    def forecast(self, centers: np.ndarray) -> float:
        """The share of the plain step's distances the bounds would save at
        ``centers``, from the bounds alone (the upper bound after tightening
        estimated by the last exact distance): Hamerly's, the rows its test
        decides; Yinyang's, one less the distances of the groups whose bound
        does not exceed the row's upper bound, over n x k. Read from every
        m-th row (at most :data:`FORECAST_ROWS` rows: the same rows whatever
        the runner; a forecast only picks between paths of the same bits).
        A forecast of the next bounded step's work, not of its time."""
        n = len(self.labels)
        if n == 0 or self.labels[0] < 0:
            return 0.0
        rows = slice(None, None, -(-n // FORECAST_ROWS))
        labels, upper, lower = self.labels[rows], self.upper[rows], self.lower[rows]
        moved = np.sqrt(((centers - self.previous) ** 2).sum(axis=1))
        # the upper bound as tightening leaves it, estimated by the last exact distance (the new one is within the
        # own centre's move of it)
        if not self.grouped:
            z = np.maximum(lower - moved.max(), half_gaps(centers)[labels])
            return float(np.count_nonzero(upper < z)) / len(labels)
        group_moved = np.maximum.reduceat(moved[self.order], self.start[:-1])
        sizes = np.diff(self.start).astype(np.float64)
        measured = float((((lower - group_moved) <= upper[:, None]) @ sizes).sum())
        return 1.0 - measured / (len(labels) * float(sizes.sum()))

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
#: before the first bounded step after the set-up (and before a final pass no bounded step has vouched for) the
#: bounds are kept only if they would decide at least this share of the rows without a distance
#: (:meth:`RowBounds.forecast`): a share of work, not a time. Bounds that fail measure their distances one by one:
#: 2e5 x 128, k = 1024, overlapping blobs, one such Yinyang step cost 17 plain steps
BOUNDS_MIN_FORECAST = 0.5


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
    from ..kernels import lloyd_choice, lloyd_paths, numpy_form_fits

    paths = lloyd_paths(k)
    if len(paths) == 1 or numpy_form_fits(X.nbytes):  # no choice (tiny data: numpy's form)
        return
    dtype = np.dtype(X.dtype if X.dtype in (np.float32, np.float64) else np.float64)
    chosen = lloyd_choice(dtype.str, k, X.shape[1])
    if chosen is None or not engine.resolve_scheduler(None).in_this_process():
        _note_paths("Lloyd's step: the exact loops or the products, whichever was faster in each process running "
                    "it (the same bits)")
        return
    figures = ", ".join(f"{p} {ns:.3g} ns" for p, ns in chosen["ns_per_row"].items())
    ratios = ", ".join(f"{p} {r:.2f}x" for p, r in chosen["times_chosen"].items())
    _note_paths(f"Lloyd's step: the {chosen['path']} (measured in this process on the same rows, "
                f"{chosen['pairs']} pairs: {ratios} its time; per row: {figures}; the same bits)")
