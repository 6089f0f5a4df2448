"""``infoclust compile`` fills numba's cache so that a later process's fits
load the kernels instead of compiling them (checked with numba's own
per-function cache counters), and says whether it could keep them."""

import json
import os
import subprocess
import sys

import pytest

LATER_FIT = """
import json, numpy as np, infoclust_dask as ic
from infoclust_dask.kernels import _loops
rng = np.random.default_rng(1)
X = rng.normal(size=(3000, 12)); y = rng.integers(0, 4, 3000)
ic.DiscriminativeClustering(4, sigma=1.0, random_state=0).fit(X, y)
ic.SoftKMeans(4, random_state=0).fit(X.astype(np.float32))
from numba.core.registry import CPUDispatcher
from infoclust_dask.kernels import _exp, _lloyd_loops
jitted = {m.__name__.rsplit(".", 1)[1] + "." + f: d for m in (_loops, _exp, _lloyd_loops)
          for f, d in vars(m).items() if isinstance(d, CPUDispatcher)}
print(json.dumps({f: [len(d.stats.cache_hits), len(d.stats.cache_misses)] for f, d in jitted.items()}))
"""


@pytest.mark.slow
def test_compile_fills_the_cache_that_a_later_process_loads(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    # in this process even where the environment names a scheduler (nothing listens on port 1)
    r = subprocess.run([sys.executable, "-m", "infoclust_dask.cli", "compile", "--verbose"],
                       env={**env, "DASK_SCHEDULER_ADDRESS": "tcp://127.0.0.1:1"}, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads(r.stdout)
    assert report["cached"] is True
    fits = {(f["fit"], f["dtype"], f["features"]) for f in report["fits"]}
    for name in ("KMeans", "SoftKMeans", "DiscriminativeClustering", "AssociativeClustering", "CMBC", "SMIC"):
        for dtype in ("float64", "float32"):
            assert (name, dtype, 8) in fits and (name, dtype, 40) in fits
    assert "compiled: DiscriminativeClustering, float32, 8 features" in r.stderr
    assert list((tmp_path / "numba").rglob("*_dc_grad_rows*.nbi"))

    later = subprocess.run([sys.executable, "-c", LATER_FIT], env=env, capture_output=True, text=True,
                           timeout=600, cwd=tmp_path)
    assert later.returncode == 0, later.stderr[-3000:]
    counts = json.loads(later.stdout.strip().splitlines()[-1])
    # a kernel called by another is loaded inside its caller's code: only the functions the passes call are counted
    hit = {f for f, (h, m) in counts.items() if h}
    assert "_loops._dc_grad_rows" in hit and len(hit) >= 3, counts
    assert {f: m for f, (h, m) in counts.items() if m} == {}, counts
