"""The rule that picks a kernel's path by measurement
(:mod:`infoclust_dask.kernels._choice`), run on simulated timings: what it
costs and how often it ends on the slower path, for two paths whose true
time ratio is ``r`` (the second path's time over the first's), on a quiet
machine and on a shared one.

Each simulated call of a path takes its true time times a log-normal jitter
(sigma 0.1); on a shared machine, with probability ``--busy``, 3.5x that (a
call of either path took its usual time or 3-4x it on this Xeon with another
process busy on one core: ``docs/testing.md``). The rule's clock is replaced
by the simulated one; nothing else is. Printed per ratio: the median and
worst over ``--seeds`` processes of the work in calls 40-200 (10-call fits
from the fifth on) over the faster path's, and how many processes ended on
the path more than 6 % slower. Run it against another checkout to compare
rules: ``PYTHONPATH=<checkout> python benchmarks/choice_rule.py``.

    python benchmarks/choice_rule.py [--seeds 40] [--busy 0.3]
"""

import argparse
import math
import random

from infoclust_dask.kernels import _choice


def simulate(ratio, busy, seed, calls=200, jitter=0.1, slow=3.5):
    """One process: ``calls`` calls of one class; returns (path at the end,
    timed pairs, work in calls 40+ over the faster path's)."""
    rng = random.Random(seed)
    clock = [0.0]
    true = {"a": 1.0, "b": ratio}
    work = []

    def run(path):
        clock[0] += true[path] * (slow if rng.random() < busy else 1.0) * math.exp(rng.gauss(0.0, jitter))
        work[-1] += true[path]
        return path

    _choice.forget()
    real = _choice.time.perf_counter
    _choice.time.perf_counter = lambda: clock[0]
    try:
        for _ in range(calls):
            work.append(0.0)
            _choice.choose(("sim",), ("a", "b"), 1, run)
    finally:
        _choice.time.perf_counter = real
    got = _choice.report()[("sim",)]
    _choice.forget()
    return got["path"], got["pairs"], sum(work[40:]) / ((calls - 40) * min(true.values()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=40)
    ap.add_argument("--busy", type=float, default=0.3, help="chance a call is slowed 3.5x on the shared machine")
    args = ap.parse_args()
    print("ratio  machine  work/faster (median, worst)  pairs (median)  ended on a path >6% slower")
    for ratio in (0.9, 1.0, 1.05, 1.1, 1.2, 1.5):
        for name, busy in (("quiet", 0.0), ("shared", args.busy)):
            runs = [simulate(ratio, busy, s) for s in range(args.seeds)]
            work = sorted(r[2] for r in runs)
            pairs = sorted(r[1] for r in runs)[len(runs) // 2]
            slower = "b" if ratio > 1 else "a"
            wrong = sum(r[0] == slower for r in runs) if abs(ratio - 1) > 0.06 else 0
            print(f"{ratio:5.2f}  {name:7s}  {work[len(work) // 2]:.3f}, {work[-1]:.3f}"
                  f"{'':16s}{pairs:4d}{'':12s}{wrong}/{len(runs)}")


if __name__ == "__main__":
    main()
