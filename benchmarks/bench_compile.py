"""First-call cost of the compiled kernels: a new process calls every
compiled kernel once (float64 and float32 rows), with an empty numba cache
(compiling) and then again in a second new process (loading the cache that
the first one wrote). The cache is a temporary ``NUMBA_CACHE_DIR`` here;
installed, it is ``__pycache__`` beside ``kernels/_compiled.py`` (or numba's
user cache directory when that is read-only).

    python benchmarks/bench_compile.py
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _bench import record

CHILD = r"""
import time, json
t0 = time.perf_counter()
import numpy as np
from infoclust_dask.kernels import _compiled as c
t_import = time.perf_counter() - t0
x64 = np.random.default_rng(0).normal(size=(1000, 5)); m = x64[:3].copy()
lab = np.arange(1000) % 4
t1 = time.perf_counter()
for x in (x64, x64.astype(np.float32)):
    c.lloyd(x, centers=m); c.lloyd(x, np.ones(1000), centers=m)
    c.soft_kmeans(x, centers=m, beta=1.0)
    c.dc_counts(x, lab, centers=m, sigma=1.0, n_classes=4)
    c.dc_grad(x, lab, centers=m, sigma=1.0, L=np.zeros((3, 4)))
    c.ac_counts(x, x, mx=m, my=m, sx=1.0, sy=1.0)
    c.ac_grad(x, x, mx=m, my=m, sx=1.0, sy=1.0, psi=np.zeros((3, 3)), psi_x=np.zeros(3), psi_y=np.zeros(3),
              lam_x=1.0, lam_y=1.0)
    c.mixture_em(x, means=m, variances=np.ones(3), log_weights=np.zeros(3))
    c.mixture_em(x, lab, means=m, variances=np.ones(3), log_weights=np.zeros(3), log_psi=np.zeros((3, 4)), n_classes=4)
t_first = time.perf_counter() - t1
t2 = time.perf_counter()
c.lloyd(x64, centers=m); c.dc_counts(x64, lab, centers=m, sigma=1.0, n_classes=4)
t_again = time.perf_counter() - t2
print(json.dumps({"import_s": t_import, "first_calls_s": t_first, "second_calls_s": t_again}))
"""


def run(cache):
    env = dict(os.environ, NUMBA_CACHE_DIR=cache)
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    with tempfile.TemporaryDirectory() as cache:
        cold = run(cache)
        warm = run(cache)
        files = len(list(Path(cache).rglob("*")))
    print(f"new process, empty cache: import {cold['import_s']:.2f} s, first call of every kernel (18 "
          f"specializations) {cold['first_calls_s']:.2f} s (compiling)")
    print(f"new process, cache written by the first: import {warm['import_s']:.2f} s, first calls "
          f"{warm['first_calls_s']:.2f} s (loaded from {files} cache files); later calls {warm['second_calls_s'] * 1e3:.1f} ms")
    record("compile", {"cold_first_calls_s": round(cold["first_calls_s"], 2),
                       "cached_first_calls_s": round(warm["first_calls_s"], 3)})


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
