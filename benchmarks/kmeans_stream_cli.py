"""K-means on a store larger than the in-process budget, through the CLI with
its defaults (the data decide: a LocalCluster; k-means++ seeds on a one-pass
sample because the store streams).

Writes once (benchmarks/_data) a float32 store of ``--rows`` x 16 blobs
(``--centers`` centres), then for each k runs ``infoclust fit kmeans STORE
-k K`` and prints the whole process' wall time, the fit's seconds, the
Lloyd iterations' own time (the sum of the per-iteration times the fit
logs), the seeding, the passes' count and the inertia; with ``--compare-kpp``
also the same fit seeded by k-means++ on every row (``--init-full``: k + 1
passes) for the inertia ratio.

    python benchmarks/kmeans_stream_cli.py --rows 5e7 --k 8 100 --compare-kpp 8
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path


def run(cmd, env):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if p.returncode:
        raise RuntimeError(p.stderr[-3000:])
    lloyd = sum(float(s) for s in re.findall(r"\[KMeans\] iteration .*\((\d+\.\d+)s\)", p.stderr))
    return wall, json.loads(p.stdout), lloyd, p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=float, default=5e7)
    ap.add_argument("--centers", type=int, default=8)
    ap.add_argument("--k", type=int, nargs="+", default=[8, 100])
    ap.add_argument("--compare-kpp", type=int, nargs="*", default=[8])
    args = ap.parse_args()
    n = int(args.rows)
    from infoclust_dask import write_dataset
    from infoclust_dask.datasets import make_blobs

    path = Path(__file__).parent / "_data" / f"kmeans-stream-{n}x16-f32.zarr"
    if not path.exists():
        t0 = time.perf_counter()
        X, y, _ = make_blobs(n, 16, centers=args.centers, random_state=0, chunks=1 << 20, dtype="float32")
        write_dataset(path, X, label=y, check_finite=False, scheduler="local")
        print(f"wrote {path.name} in {time.perf_counter() - t0:.0f} s", flush=True)
    exe = str(Path(sys.executable).with_name("infoclust"))
    env = {**os.environ}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    storage = path.parent / "runs"
    print("| k | seeding | wall s | fit s | Lloyd iterations: n, s | fit / Lloyd | runner | inertia | ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    for k in args.k:
        wall, out, lloyd, _ = run([exe, "fit", "kmeans", str(path), "-k", str(k), "--storage", str(storage)], env)
        ratio = ""
        if k in args.compare_kpp:
            code = ("import sys, numpy as np; from infoclust_dask import KMeans, open_dataset; "
                    f"from infoclust_dask.cluster import _kmeans; _kmeans.engine.streams = lambda X: False; "
                    f"_kmeans.SAMPLED_SEEDING_BYTES = float('inf'); "
                    f"km = KMeans({k}, random_state=0).fit(open_dataset({str(path)!r})['x']); "
                    "print(km.inertia_, km.seeding_)")
            t0 = time.perf_counter()
            p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
            kpp_inertia, kpp_seed = float(p.stdout.split()[0]), " ".join(p.stdout.split()[1:])
            ratio = f"{out['inertia'] / kpp_inertia:.5f} (against {kpp_seed}: {time.perf_counter() - t0:.0f} s)"
        print(f"| {k} | {out.get('seeding')} | {wall:.1f} | {out['seconds']:.1f} | {out['n_iter']}, {lloyd:.1f} | "
              f"{out['seconds'] / max(lloyd, 1e-9):.2f} | {out['runner']['runner']} | {out['inertia']:.6g} | {ratio} |",
              flush=True)


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
