"""Which of a kernel's equivalent compiled paths runs, chosen by measurement
in the process that runs it (issue 63).

A path chosen by a constant measured on one CPU loses on another (Lloyd's
products for many centres were 2.3x slower than the exact loops at k = 16
on an AVX2 machine with half this one's sgemm rate). Here the first calls
of a kernel family on one class of work - ``(family, dtype, k, d)`` - run
each candidate path in turn and are timed; once every candidate has
:data:`TIMED` timed calls (after one untimed call each: the first call of a
compiled function may load or compile it), the path with the least median
time per row runs every later call of that class in this process (a timed
call of another thread that ends after the choice re-decides it with its
time), and the choice is kept with its figures (:func:`report`).

The median, not the best: a fit pays a path's typical call. Compared by
their best of two calls, Lloyd's products (k = 16, 3e5 x 16 float32,
overlapping) once measured 49.7 ns a row against the loops' 50 ns and were
kept, and the fit as shipped took 1.27-1.36x the loops' (a CI run); their
calls here ranged over 52-607 ns a row (the second call of a path can still
be warming up: 291 and 607 ns), the loops' over 40-66 ns.

Only paths that give the same numbers bit for bit may be chosen so (Lloyd's
exact loops and its products, whose near ties and chosen distances are the
exact loops' arithmetic: :mod:`infoclust_dask.kernels._lloyd_loops`): the
choice changes the time, never the model - the same-answer contract of
``docs/conventions.md``. Kernels whose paths round differently (soft
K-means', DC's, AC's and the mixtures' products) keep rules of the data and
parameters only.

Thread-safe: the in-process passes call kernels from several threads.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["TIMED", "choose", "report", "forget"]

#: timed calls of every candidate before the choice (each after one untimed call): their median is robust to
#: one call slowed or sped up by another process on a shared core
TIMED = 3

_LOCK = threading.Lock()
#: class -> {"calls": {path: n}, "times": {path: [seconds per row]}, "chosen": path or None}
_CLASSES: dict[tuple, dict[str, Any]] = {}


def choose(key: tuple, candidates: Sequence[str], rows: int, run: Callable[[str], Any]) -> Any:
    """Run ``run(path)`` for one call of the class ``key`` on ``rows`` rows
    and return its result: with the chosen path once the class is decided,
    else with the candidate that has had the fewest calls (timed after its
    first). One candidate: no measurement."""
    if len(candidates) == 1:
        return run(candidates[0])
    with _LOCK:
        entry = _CLASSES.setdefault(key, {"calls": {c: 0 for c in candidates},
                                          "times": {c: [] for c in candidates}, "chosen": None})
        path, timed = entry["chosen"], False
        if path is None:  # still measuring: the candidate with the fewest calls
            path = min(candidates, key=lambda c: entry["calls"][c])
            entry["calls"][path] += 1
            timed = entry["calls"][path] > 1  # its first call may load or compile the path: not timed
    if not timed:
        return run(path)
    t0 = time.perf_counter()
    out = run(path)
    seconds = (time.perf_counter() - t0) / max(rows, 1)
    with _LOCK:
        _record(entry, candidates, path, seconds)
    return out


def _record(entry: dict[str, Any], candidates: Sequence[str], path: str, seconds: float) -> None:
    """Add one timed call of ``path`` to a class and decide (or re-decide) its
    path: once every candidate has :data:`TIMED` times, the least median
    time per row.
    A time that arrives after the choice (a call of another thread still
    running when the choice was made) re-decides it: the CI run where the
    products were kept at 67.3 ns a row while a late call of the loops took
    55.1 ns (k = 16, 3e5 x 16 float64, overlapping) was 1.2x slower than it
    had to be."""
    times = entry["times"]
    times[path].append(seconds)
    if all(len(times[c]) >= TIMED for c in candidates):
        entry["chosen"] = min(candidates, key=lambda c: _median(times[c]))


def _median(seconds: Sequence[float]) -> float:
    return float(statistics.median(seconds))


def report(family: str | None = None) -> dict[tuple, dict[str, Any]]:
    """The classes decided in this process (``family`` only, if given):
    ``{key: {"path": chosen, "ns_per_row": {path: median of its timed calls}}}``."""
    with _LOCK:
        return {key: {"path": e["chosen"],
                      "ns_per_row": {c: round(_median(t) * 1e9, 2) for c, t in e["times"].items() if t}}
                for key, e in _CLASSES.items() if e["chosen"] is not None and (family is None or key[0] == family)}


def forget() -> None:
    """Drop every choice (tests; a process whose CPU share changed may call it)."""
    with _LOCK:
        _CLASSES.clear()
