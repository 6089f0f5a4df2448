"""Seconds per DC objective evaluation (10)+(11) (two map-reduce passes).

1. On a zarr store (default 4e6 x 128 float32 = 2 GB, 10 classes) against a
   plain read of the same store, on a LocalCluster of 2 worker processes:
   streamed, and held by the workers (read once, as a fit holds a store up
   to a quarter of their memory).
2. On data persisted in memory (1e6 x 16, 26 classes, threads) against plain
   numpy computing the same formulas (``tests/reference_kernels.py``) over
   the whole array in one call (one thread).

Results are added to
``docs/figures/kernels.json`` (``plot_kernels.py`` draws them).

    python benchmarks/bench_dc_pass.py [--rows 4000000] [--features 128] [--k 10]
"""

import argparse
import shutil
import time
import uuid
from pathlib import Path

import numpy as np
from _bench import best, interleaved, record, reference_kernels


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=4_000_000)
    p.add_argument("--features", type=int, default=128)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--skip-store", action="store_true")
    p.add_argument("--keep", action="store_true", help="keep the store for the next run")
    a = p.parse_args()

    import dask.array as da

    from infoclust_dask import engine, write_dataset
    from infoclust_dask.cluster import dc_objective
    from infoclust_dask.datasets import make_blobs
    from infoclust_dask.objectives import dc as obj

    # ---- 2. persisted vs numpy -------------------------------------------------
    X, lab, _ = make_blobs(1_000_000, 16, centers=26, random_state=0, lazy=False)
    c = lab % 26
    m = X[:a.k].copy()
    sigma = 3.0

    ref = reference_kernels()

    def numpy_eval():  # the reference: the numpy formulas, whole array, one call
        counts = ref.dc_count_stats(X, c, centers=m, sigma=sigma, n_classes=26)["counts"]
        st = ref.dc_grad_stats(X, c, centers=m, sigma=sigma, L=obj.digamma_terms(counts, 1.0))
        return obj.gradient(st["WX"], st["W"], m, sigma)

    def ours():
        return dc_objective(Xd, cd, m, sigma, prior=1.0, n_classes=26, scheduler="threads")

    Xd = da.from_array(X, chunks=(62_500, 16)).persist(scheduler="threads")
    cd = da.from_array(c, chunks=62_500).persist(scheduler="threads")
    t_np, _ = best(numpy_eval, a.repeat)
    t_ours, _ = best(ours, a.repeat)
    g_ref = numpy_eval()
    g = ours()[1]
    print(f"persisted 1e6 x 16, K={a.k}, C=26: plain numpy (the same formulas, one call, 1 thread) {t_np:.3f} s; "
          f"ours (16 chunks, threads, compiled kernels) {t_ours:.3f} s -> numpy/ours = {t_np / t_ours:.2f}; "
          f"max |grad diff| {np.abs(g - g_ref).max():.1e}")
    record("dc_memory", {"numpy_whole_s": round(t_np, 4), "compiled_s": round(t_ours, 4),
                         "speedup": round(t_np / t_ours, 2)})
    if a.skip_store:
        return

    # ---- 1. zarr store vs plain read --------------------------------------------
    path = Path(__file__).parent / "_data" / f"dc-{a.rows}x{a.features}.zarr"
    if not path.exists():
        Xl, labl, _ = make_blobs(a.rows, a.features, centers=10, random_state=0, dtype=np.float32, chunks=131_072)
        t0 = time.perf_counter()
        write_dataset(path, Xl, label=labl, check_finite=False)
        print(f"wrote {path} in {time.perf_counter() - t0:.1f} s")
    client = engine.local_client(n_workers=2)
    xs = da.from_zarr(str(path / "x"))
    m2 = np.asarray(xs[: a.k].compute(), dtype=np.float64)

    def fresh(var):
        return da.from_zarr(str(path / var), name=f"{var}-{uuid.uuid4().hex}")

    def evaluate():
        return dc_objective(fresh("x"), fresh("label"), m2, 20.0, prior=1.0, n_classes=10, scheduler=client)

    engine.compute(fresh("x").sum(dtype=np.float64), scheduler=client)  # untimed: page cache alike for all
    evaluate()  # untimed: the workers load the compiled kernels once
    r = interleaved({"read": (lambda: engine.compute(fresh("x").sum(dtype=np.float64), scheduler=client), None),
                     "compiled": (evaluate, None)}, a.repeat)
    (t_read, med_read), (t_eval, med_eval) = r["read"], r["compiled"]
    gb = a.rows * a.features * 4 / 1e9
    print(f"store {a.rows} x {a.features} float32 ({gb:.2f} GB), 2 worker processes: plain read {t_read:.2f} s "
          f"(median {med_read:.2f}); one DC evaluation (2 passes): compiled kernels {t_eval:.2f} s (median "
          f"{med_eval:.2f}) = {t_eval / t_read:.2f} reads (2 reads are the floor)")
    # the same store held by the workers, as a fit holds a store up to a quarter of their memory
    from distributed import futures_of

    from infoclust_dask.engine import execute

    x, lab = fresh("x"), fresh("label")
    budget = engine.Distributed(client).persist_budget()
    held = None
    if x.nbytes + lab.nbytes <= budget:
        held = engine.prepare(x, scheduler=client), engine.prepare(lab, scheduler=client)
        execute.wait_futures(client, futures_of(list(held)))  # persist returns at once

        def evaluate_held():
            return dc_objective(held[0], held[1], m2, 20.0, prior=1.0, n_classes=10, scheduler=client)

        evaluate_held()
        t_held, med_held = interleaved({"held": (evaluate_held, None)}, a.repeat)["held"]
        print(f"the same store held by the workers (as a fit holds it): one DC evaluation {t_held:.2f} s (median "
              f"{med_held:.2f}) = {t_held / t_read:.2f} reads")
    else:
        print(f"the store ({(x.nbytes + lab.nbytes) / 2**30:.2f} GiB) is above the workers' holding budget "
              f"({budget / 2**30:.2f} GiB): a fit streams it")
    record("dc_store", {"rows": a.rows, "gb": round(gb, 2), "read_s": round(t_read, 3), "compiled_s": round(t_eval, 3),
                        "compiled_reads": round(t_eval / t_read, 2),
                        **({} if held is None else {"held_s": round(t_held, 3), "held_reads": round(t_held / t_read, 2)})})
    engine.close_local_client()
    if not a.keep:
        shutil.rmtree(path)


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
