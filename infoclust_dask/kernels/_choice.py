"""Which of a kernel's equivalent compiled paths runs, chosen by measurement
in the process that runs it (issue 63).

A path chosen by a constant measured on one CPU loses on another (Lloyd's
products for many centres were 2.3x slower than the exact loops at k = 16
on an AVX2 machine with half this one's sgemm rate). Here a class of work -
``(family, dtype, k, d)`` - is measured by *pairs*: one call runs every
candidate path on the same rows, one after the other on the same thread
(the order turns from pair to pair), and keeps the ratio of their times.
The first pair is not timed (the first call of a compiled function may load
or compile it); after :data:`TIMED` timed pairs the path whose time the
median ratio says is least runs every call of that class in this process.
Later calls go on pairing now and then - every :data:`EXPLORE_FIRST` calls
at first, the gap doubling (up to :data:`EXPLORE_MOST`) after a pair that
the chosen path wins or loses by at most :data:`MARGIN`, halving after one
it loses by more, back to the first gap when the choice changes - and each
pair re-decides by the median of the last :data:`WINDOW` ratios, a chosen
path giving way only to one faster by more than :data:`MARGIN`: a choice
made in a busy spell is corrected, a right one costs one extra run of the
other path in up to 256 calls, and two paths within a few per cent of each
other (a tie, which pairs decide at random) neither swap back and forth nor
keep pairing every few calls. Each pair runs the slower path once more:
simulated at a tie (``benchmarks/choice_rule.py``), this rule's predecessor
(a pair every 4 calls after any pair the other path won) did 1.075-1.104x
the faster path's work, this rule 1.026-1.039x (``docs/testing.md``).

Why pairs, and why the choice is never final: on a shared 2-core machine
(another process busy on one core) a call of either path takes its usual
time or 3-4x it, at random (this Xeon, k = 16, 3e5 x 16 float32: the loops
36-201 ns a row, the products 49-240). Two CI runs decided on three such
calls of each path, made at different moments: once by the best
(the products' lucky 49.7 ns against the loops' 50) and once by the median
(the loops at 179 ns, the products at 118); both times the fit as shipped
took 1.25-1.6x the loops' time in every later fit. The two paths of one
pair see the same moment of the machine, so a busy spell slows both or
only the one it falls on, either way at random: the median ratio stays
near the true one, and later pairs outvote early ones.

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

import itertools
import math
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["TIMED", "WINDOW", "EXPLORE_FIRST", "EXPLORE_MOST", "MARGIN", "choose", "report", "forget"]

#: timed pairs before the first choice (after one untimed pair)
TIMED = 3
#: the last pairs' ratios (and each path's times) that a choice weighs
WINDOW = 9
#: after the choice, a pair every this many calls of the class ...
EXPLORE_FIRST = 4
#: ... the gap doubling, while the choice stands, up to this
EXPLORE_MOST = 256
#: a chosen path is replaced only by one faster by more than this fraction (median ratio)
MARGIN = 0.05

_LOCK = threading.Lock()
_CLASSES: dict[tuple, dict[str, Any]] = {}


def _new_entry(candidates: Sequence[str]) -> dict[str, Any]:
    return {"started": 0, "warm": False, "chosen": None, "since": 0, "every": EXPLORE_FIRST, "pairs": 0,
            "ratios": {pair: deque(maxlen=WINDOW) for pair in itertools.combinations(candidates, 2)},
            "times": {c: deque(maxlen=WINDOW) for c in candidates}}


def choose(key: tuple, candidates: Sequence[str], rows: int, run: Callable[[str], Any]) -> Any:
    """Run ``run(path)`` for one call of the class ``key`` on ``rows`` rows
    and return its result: the chosen path's, or - in a pair - every
    candidate's run on these rows, the last one's result returned (they are
    the same bits: ``run`` must give the same result and outputs when
    called again). One candidate: no measurement."""
    if len(candidates) == 1:
        return run(candidates[0])
    with _LOCK:
        entry = _CLASSES.setdefault(key, _new_entry(candidates))
        if entry["chosen"] is None:
            turn = entry["started"]
            entry["started"] += 1
            mode = "warm" if turn == 0 else "pair" if entry["warm"] else "single"
        else:
            entry["since"] += 1
            turn, mode = entry["pairs"], "single"
            if entry["since"] >= entry["every"]:
                entry["since"], mode = 0, "pair"
        path = entry["chosen"] or candidates[0]
    if mode == "single":  # the chosen path; or, while another thread's first pair loads the paths, the first
        return run(path)
    order = list(candidates[turn % len(candidates):]) + list(candidates[:turn % len(candidates)])
    seconds, out = {}, None
    for p in order:
        t0 = time.perf_counter()
        out = run(p)
        seconds[p] = (time.perf_counter() - t0) / max(rows, 1)
    with _LOCK:
        if mode == "warm":
            entry["warm"] = True
        else:
            _record(entry, candidates, seconds)
    return out


def _record(entry: dict[str, Any], candidates: Sequence[str], seconds: dict[str, float]) -> None:
    """Add one timed pair (every candidate's seconds per row on the same
    rows) and decide or re-decide the class's path; set the gap to the next
    pair: the first gap when the choice is new or changed; else halved
    (not below the first) when another path beat the chosen one in this
    pair by more than MARGIN, doubled (up to EXPLORE_MOST) when none did."""
    for (a, b), ratios in entry["ratios"].items():
        ratios.append(math.log(seconds[b] / seconds[a]) if seconds[a] > 0 and seconds[b] > 0 else 0.0)
    for c in candidates:
        entry["times"][c].append(seconds[c])
    entry["pairs"] += 1
    before = entry["chosen"]
    if before is None and entry["pairs"] < TIMED:
        return
    entry["chosen"] = _decide(entry, candidates, before)
    chosen = entry["chosen"]
    if before is None or chosen != before:
        entry["every"] = EXPLORE_FIRST
    elif any(seconds[c] * (1 + MARGIN) < seconds[chosen] for c in candidates):
        entry["every"] = max(entry["every"] // 2, EXPLORE_FIRST)
    else:
        entry["every"] = min(2 * entry["every"], EXPLORE_MOST)


def _log_ratio(entry: dict[str, Any], a: str, b: str) -> float:
    """Median of log(time of b / time of a) over the kept pairs."""
    if (a, b) in entry["ratios"]:
        return float(statistics.median(entry["ratios"][(a, b)]))
    return -float(statistics.median(entry["ratios"][(b, a)]))


def _decide(entry: dict[str, Any], candidates: Sequence[str], incumbent: str | None) -> str:
    """The path the median ratios say is fastest. The first choice (no
    incumbent) is the faster by median ratio, a tie going to the first
    candidate; later, a candidate replaces the incumbent only if its median
    ratio to it is below ``1 / (1 + MARGIN)``: paths within :data:`MARGIN`
    of each other are a tie, which keeps the path already running."""
    best, bar = (candidates[0], 0.0) if incumbent is None else (incumbent, math.log1p(MARGIN))
    for c in candidates:
        if c != best and _log_ratio(entry, best, c) < -bar:
            best = c
    return best


def report(family: str | None = None) -> dict[tuple, dict[str, Any]]:
    """The classes decided in this process (``family`` only, if given):
    ``{key: {"path": chosen, "ns_per_row": {path: median of its kept timed
    runs}, "times_chosen": {other path: median ratio of its time to the
    chosen path's}, "pairs": timed pairs so far}}``."""
    with _LOCK:
        out = {}
        for key, e in _CLASSES.items():
            if e["chosen"] is None or (family is not None and key[0] != family):
                continue
            chosen = e["chosen"]
            out[key] = {"path": chosen,
                        "ns_per_row": {c: round(float(statistics.median(t)) * 1e9, 2)
                                       for c, t in e["times"].items() if t},
                        "times_chosen": {c: round(math.exp(_log_ratio(e, chosen, c)), 3)
                                         for c in e["times"] if c != chosen},
                        "pairs": e["pairs"]}
        return out


def forget() -> None:
    """Drop every choice (tests; a process whose CPU share changed may call it)."""
    with _LOCK:
        _CLASSES.clear()
