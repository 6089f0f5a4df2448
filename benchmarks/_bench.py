"""Helpers the kernel benchmarks share (``from _bench import ...``: the
scripts run as ``python benchmarks/<name>.py``, so this folder is on the path)."""

import json
import time
from pathlib import Path

import numpy as np

KERNELS_JSON = Path(__file__).parents[1] / "docs" / "figures" / "kernels.json"


def best(fn, repeat):
    """(best, median) seconds of ``repeat`` calls of ``fn``."""
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts), float(np.median(ts))


def interleaved(fns, repeat, setup=None):
    """Run the callables of ``fns`` (name -> (fn, context manager factory or
    None)) in rounds, one of each per round, ``repeat`` rounds, so that the
    machine's slow phases hit every contender alike. Returns name -> (best,
    median) seconds."""
    times = {name: [] for name in fns}
    for _ in range(repeat):
        for name, (fn, ctx) in fns.items():
            if ctx is None:
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
            else:
                with ctx():
                    t0 = time.perf_counter()
                    fn()
                    times[name].append(time.perf_counter() - t0)
    return {name: (min(ts), float(np.median(ts))) for name, ts in times.items()}


def record(key, value):
    """Store one benchmark's figures under ``key`` in docs/figures/kernels.json."""
    data = json.loads(KERNELS_JSON.read_text()) if KERNELS_JSON.exists() else {}
    data[key] = value
    KERNELS_JSON.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def reference_kernels():
    """The plain numpy formulas of the compiled kernels
    (``tests/reference_kernels.py``, the tests' references), as a module."""
    import sys

    tests = str(Path(__file__).parents[1] / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    import reference_kernels

    return reference_kernels
