"""Worker memory per method on the cluster as deployed: a dask scheduler and
two workers started by ``deploy/local/services.py`` (each in its own folder,
``--memory-limit``), the client in another folder fitting a float32 store at
a *relative* path.

For each method a fresh pair of workers is started; the script prints each
worker's RSS at start and after the fit (``client.run`` + psutil), the fit's
time and outcome (fitted, or the one line it ended with), and the heavy
packages the workers imported. The acceptance of issue 51: every worker's RSS
after the fit at most its RSS at start + 150 MB plus the data it holds
(the ``held`` column: the bytes of the store the fit kept on the workers,
shared between them).

    python benchmarks/worker_memory.py --memory-limit 500MB --mb 25
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
HEAVY = ("numba", "llvmlite", "sklearn", "pandas", "xarray", "scipy")


def _services():
    spec = importlib.util.spec_from_file_location("services", HERE.parent / "deploy" / "local" / "services.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _probe():
    import sys

    import psutil

    return psutil.Process().memory_info().rss, sorted(m for m in HEAVY if m in sys.modules)


def _workers(address):
    from distributed import Client

    with Client(address, set_as_default=False) as c:
        return c.run(_probe)


def _fit(name, address):
    from infoclust_dask import (
        SMIC,
        DiscriminativeClustering,
        IsotropicGaussianMixture,
        KMeans,
        SoftKMeans,
        open_dataset,
    )

    ds = open_dataset("data/s.zarr")
    if name == "kmeans":
        return KMeans(5, random_state=0, scheduler=address).fit("data/s.zarr")
    if name == "softkmeans":
        return SoftKMeans(5, random_state=0, scheduler=address).fit("data/s.zarr")
    if name == "dc":
        return DiscriminativeClustering(5, sigma=1.0, random_state=0, scheduler=address).fit(ds["x"], ds["label"])
    if name == "mog":
        return IsotropicGaussianMixture(5, random_state=0, scheduler=address).fit("data/s.zarr")
    if name == "smic":
        return SMIC(5, t=5, random_state=0, scheduler=address).fit("data/s.zarr")
    raise ValueError(name)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--memory-limit", default="500MB")
    p.add_argument("--mb", type=float, default=25.0, help="store size (float32 x, 16 columns)")
    p.add_argument("--methods", nargs="+", default=["kmeans", "softkmeans", "dc", "mog", "smic"])
    a = p.parse_args(argv)
    svc = _services()
    work = Path(tempfile.mkdtemp(prefix="worker-memory-"))
    os.chdir(work)
    from infoclust_dask import write_dataset

    n = int(a.mb * 2**20 / (16 * 4))
    rng = np.random.default_rng(0)
    label = rng.integers(0, 5, n)
    x = (rng.normal(scale=3.0, size=(5, 16))[label] + rng.normal(size=(n, 16))).astype(np.float32)
    write_dataset("data/s.zarr", x, label=label)
    print(f"store data/s.zarr: {n} x 16 float32 = {x.nbytes / 2**20:.1f} MiB; workers: 2 x {a.memory_limit}")
    rows = []
    for name in a.methods:
        state_dir = work / f"svc-{name}"
        st = svc.start(state_dir, n_workers=2, memory_limit=a.memory_limit, prefect=False, timeout=180,
                       ports={"scheduler": 0})
        try:
            address = st["scheduler_address"]
            before = _workers(address)
            t0 = time.perf_counter()
            try:
                est = _fit(name, address)
                outcome, held = "fitted", est.runner_.get("data", "")
            except Exception as exc:  # noqa: BLE001 - the outcome is what is measured
                outcome, held = f"{type(exc).__name__}: {str(exc)[:160]}", ""
            took = time.perf_counter() - t0
            after = _workers(address)
        finally:
            svc.stop(state_dir, grace=5.0)
        growth = [(after[w][0] - before[w][0]) / 2**20 for w in before if w in after]
        row = {"method": name, "seconds": round(took, 1), "outcome": outcome,
               "rss_start_mb": [round(before[w][0] / 2**20) for w in before],
               "rss_after_mb": [round(after[w][0] / 2**20) for w in after],
               "growth_mb": [round(g) for g in growth], "imported": sorted({m for w in after for m in after[w][1]}),
               "held": held}
        rows.append(row)
        print(json.dumps(row), flush=True)
    print("\n| method | outcome | s | RSS start (MB) | RSS after (MB) | growth (MB) | imported on the workers |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['method']} | {r['outcome'][:60]} | {r['seconds']} | {r['rss_start_mb']} | {r['rss_after_mb']} | "
              f"{r['growth_mb']} | {', '.join(r['imported'])} |")
    return 0


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    sys.exit(main())
