"""Associative clustering on a small paired store: the threads scheduler
against a real dask scheduler (a LocalCluster of 2 single-threaded worker
processes on 127.0.0.1), with two passes per objective evaluation and with
the fused pass (``ac_objective(fused=True)``, forced here: fits take the
two passes on every runner since issue 62). Prints the
fit time, the number of passes and the seconds per pass of each, and the
ratios, in one run.

Data: the demo's 4 000-pair store (``make_paired_dependency(4000,
n_latent=4, random_state=0)``, 4 + 4 features), written to
``benchmarks/_data/`` when missing.

    python benchmarks/ac_scheduler.py [--sigma auto|fixed] [--k 4]
"""

import argparse
import functools
import time
import warnings
from pathlib import Path


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sigma", choices=("auto", "fixed", "both"), default="both")
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--pairs", type=int, default=4000)
    a = p.parse_args()

    from distributed import Client, LocalCluster

    import infoclust_dask.cluster._ac as acmod
    from infoclust_dask import AssociativeClustering, engine, open_dataset, write_dataset
    from infoclust_dask.datasets import make_paired_dependency

    path = Path(__file__).parent / "_data" / f"paired-{a.pairs}.zarr"
    if not path.exists():
        X, Y, z, _, _ = make_paired_dependency(a.pairs, n_latent=4, random_state=0)
        write_dataset(path, X, y=Y, label=z)
    ds = open_dataset(path)
    passes = [0]
    real_map_reduce, real_objective = engine.map_reduce, acmod.ac_objective

    def counting(*args, **kw):
        passes[0] += 1
        return real_map_reduce(*args, **kw)

    engine.map_reduce = counting
    warnings.simplefilter("ignore")  # convergence notes of the width search
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, host="127.0.0.1", dashboard_address=None,
                           memory_limit="3GB")
    client = Client(cluster)
    try:
        fixed = AssociativeClustering((a.k, a.k), random_state=0, scheduler="threads").fit(ds["x"], ds["y"]).sigma_
        sigmas = {"fixed": tuple(fixed), "auto": ("auto", "auto")}
        for name in (("fixed", "auto") if a.sigma == "both" else (a.sigma,)):
            rows = {}
            for label, sched, fused in (("threads", "threads", False), ("distributed, two passes", client, False),
                                        ("distributed, fused", client, True)):
                acmod.ac_objective = functools.partial(real_objective, fused=fused)
                passes[0] = 0
                t0 = time.perf_counter()
                m = AssociativeClustering((a.k, a.k), sigma=sigmas[name], random_state=0,
                                          scheduler=sched).fit(ds["x"], ds["y"])
                dt = time.perf_counter() - t0
                rows[label] = dt
                print(f"sigma {name} {tuple(round(s, 3) for s in m.sigma_)}, {label}: fit {dt:.1f} s, "
                      f"{passes[0]} passes, {1000 * dt / passes[0]:.1f} ms a pass", flush=True)
            print(f"sigma {name}: distributed / threads {rows['distributed, two passes'] / rows['threads']:.2f} "
                  f"(two passes), {rows['distributed, fused'] / rows['threads']:.2f} (fused); fused / two passes "
                  f"{rows['distributed, fused'] / rows['distributed, two passes']:.2f}", flush=True)
    finally:
        acmod.ac_objective = real_objective
        client.close()
        cluster.close()


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
