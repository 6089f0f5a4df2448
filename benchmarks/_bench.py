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


#: the SIMD flags of /proc/cpuinfo that decide which kernels the BLAS and numba's LLVM pick
SIMD_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "amx_tile")


def machine(n=1024, repeat=5):
    """Where a benchmark runs: the CPU model and its SIMD flags, the cores,
    the BLAS (library, version, kernel architecture, threads) and its
    measured sgemm / dgemm rates (an n x n product, best of ``repeat``),
    the versions of numpy and numba. Constants tuned on one CPU pick other
    paths on another (issue 63): a table means little without this."""
    import os
    import platform

    from threadpoolctl import threadpool_info

    model, flags = platform.processor() or platform.machine(), set()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name") and ":" in line:
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and ":" in line:
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    blas = [f"{i.get('internal_api')} {i.get('version')} ({i.get('architecture')}, {i.get('num_threads')} threads)"
            for i in threadpool_info() if i.get("user_api") == "blas"]
    rates = {}
    for dtype in (np.float32, np.float64):
        a = np.random.default_rng(0).random((n, n)).astype(dtype)
        best, _ = globals()["best"](lambda a=a: a @ a, repeat)
        rates[np.dtype(dtype).name] = 2.0 * n**3 / best / 1e9
    try:
        import numba

        numba_version = numba.__version__
    except ImportError:
        numba_version = "absent"
    return {"cpu": model, "simd": [f for f in SIMD_FLAGS if f in flags], "cores": os.cpu_count(), "blas": blas,
            "sgemm_gflops": round(rates["float32"], 1), "dgemm_gflops": round(rates["float64"], 1),
            "numpy": np.__version__, "numba": numba_version}


def print_machine(file=None):
    """One comment line (``# machine: ...``) before a benchmark's table."""
    import sys

    m = machine()
    print(f"# machine: {m['cpu']}, {m['cores']} cores; SIMD {' '.join(m['simd']) or 'none listed'}; BLAS "
          f"{'; '.join(m['blas']) or 'none found'}; sgemm {m['sgemm_gflops']} / dgemm {m['dgemm_gflops']} Gflop/s "
          f"(1024 x 1024, best of 5); numpy {m['numpy']}, numba {m['numba']}", file=file or sys.stdout, flush=True)
