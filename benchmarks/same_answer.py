"""The same model wherever a fit runs (issue 62), and what it costs: every
estimator fitted on the same overlapping data by several runners and input
forms; prints, per estimator and runner, the fit time and the largest
difference of any fitted number from the one-thread numpy fit (0.0: the
same bits), and whether the labels are the same.

    python benchmarks/same_answer.py [--n 40000] [--cluster] [--repeat 1] [--only KMeans,DC]
    python benchmarks/same_answer.py --streamed-store [--folder benchmarks/_data]

``--streamed-store`` instead times K-means and DC streamed from a 1e6 x 16
float64 store at every pass (``$INFOCLUST_IN_PROCESS_BYTES=0``, 2
threads): the store as this package chunks it (whole logical blocks) and
the same rows in 100 000-row chunks (another tool's: rechunked at every
pass), best of 2.

``--cluster`` adds a LocalCluster of 2 worker processes (numpy input: the
whole fit on a worker, and pass by pass; dask input in odd chunks held by
the workers, and streamed). Run it at two commits to measure the cost of the
fixed order (docs/BENCHMARKS.md).
"""

import argparse
import contextlib
import os
import platform
import time
from pathlib import Path

import numpy as np


def data(n, seed=0):
    """Overlapping blobs: 8 features, 6 centres 1.5 apart (unit noise),
    class labels that follow the blobs with 20 % noise, a second view
    (AC) and binary rows (CMBC)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=1.5, size=(6, 8))
    z = rng.integers(0, 6, n)
    X = centres[z] + rng.normal(size=(n, 8))
    y = np.where(rng.random(n) < 0.8, z % 3, rng.integers(0, 3, n))
    Y = np.c_[X[:, :3] @ rng.normal(size=(3, 4)), np.zeros((n, 1))] + rng.normal(size=(n, 5))
    B = (X[:, :6] + rng.normal(size=(n, 6)) > 0.5).astype(np.float64)
    Bminus = (X[:, 6:] > 0.0).astype(np.float64)
    return X, y, Y, B, Bminus


def cases(n):
    from infoclust_dask import (
        CMBC,
        MDA2,
        SMIC,
        AssociativeClustering,
        DiscriminativeClustering,
        IsotropicGaussianMixture,
        KMeans,
        SoftKMeans,
    )

    X, y, Y, B, Bminus = data(n)
    m = min(n, 4000)  # the kernel methods on fewer rows
    return [
        ("KMeans", lambda s: KMeans(6, random_state=0, scheduler=s), (X,), {}),
        ("SoftKMeans", lambda s: SoftKMeans(6, beta=2.0, random_state=0, scheduler=s), (X,), {}),
        ("DC", lambda s: DiscriminativeClustering(6, sigma=1.0, random_state=0, scheduler=s), (X, y), {}),
        ("AC", lambda s: AssociativeClustering((4, 4), sigma=(1.0, 1.0), random_state=0, max_iter=15,
                                               scheduler=s), (X, Y), {}),
        ("CMBC", lambda s: CMBC(4, random_state=0, scheduler=s), (B,), {"Y_minus": Bminus}),
        ("MoG", lambda s: IsotropicGaussianMixture(6, random_state=0, scheduler=s), (X,), {}),
        ("MDA2", lambda s: MDA2(6, random_state=0, scheduler=s), (X, y), {}),
        ("SMIC", lambda s: SMIC(6, t=5, random_state=0, scheduler=s), (X[:m],), {}),
    ]


def fitted(est):
    """Every fitted number of ``est`` as {name: float64 array}."""
    out = {}
    for name, value in vars(est).items():
        if not name.endswith("_") or name.startswith("_") or name in ("runner_", "n_features_in_"):
            continue
        if hasattr(value, "compute"):  # lazy labels of lazy input: on the fit's scheduler (it holds their rows)
            value = value.compute(scheduler=est.scheduler if not isinstance(est.scheduler, str) else None)
        try:
            a = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            continue
        out[name] = a
    return out


def gap(a, b):
    worst = 0.0
    for name, x in a.items():
        yv = b.get(name)
        if yv is None or yv.shape != x.shape:
            return float("inf"), name
        both = np.isfinite(x) & np.isfinite(yv)
        if not np.array_equal(np.isfinite(x), np.isfinite(yv)):
            return float("inf"), name
        d = float(np.max(np.abs(x[both] - yv[both]) / np.maximum(1.0, np.abs(x[both])))) if both.any() else 0.0
        if d > worst:
            worst = d
    return worst, ""


def lazy(args, chunks):
    import dask.array as da

    return tuple(da.from_array(a, chunks=(chunks,) + a.shape[1:]) for a in args)


@contextlib.contextmanager
def placed(how):
    """Force a placement: ``stream`` (no lazy input read into memory or
    held by workers), ``passes`` (no whole fit on a worker)."""
    from infoclust_dask.engine.choose import Distributed

    saved_env = {k: os.environ.get(k) for k in ("INFOCLUST_IN_PROCESS_BYTES", "INFOCLUST_PERSIST_BYTES")}
    saved_budget = Distributed.loop_budget
    if "stream" in how:
        os.environ["INFOCLUST_IN_PROCESS_BYTES"] = os.environ["INFOCLUST_PERSIST_BYTES"] = "0"
    if "passes" in how:
        Distributed.loop_budget = lambda self: 0
    try:
        yield
    finally:
        Distributed.loop_budget = saved_budget
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def streamed_store(folder, n=1_000_000, d=16):
    from infoclust_dask import DiscriminativeClustering, KMeans, open_dataset, write_dataset

    os.environ["INFOCLUST_IN_PROCESS_BYTES"] = "0"  # stream at every pass
    stores = {"whole blocks": folder / "same-answer-blocks.zarr", "100 000-row chunks": folder / "same-answer-odd.zarr"}
    if not all(p.exists() for p in stores.values()):
        rng = np.random.default_rng(0)
        c = rng.normal(scale=2.0, size=(8, d))
        z = rng.integers(0, 8, n)
        X = c[z] + rng.normal(size=(n, d))
        write_dataset(stores["whole blocks"], X, label=z % 3, overwrite=True)
        write_dataset(stores["100 000-row chunks"], X, label=z % 3, chunks=100_000, overwrite=True)
    fits = {"KMeans (k=8, 20 iterations)": (lambda: KMeans(8, random_state=0, max_iter=20, scheduler="threads"), False),
            "DC (k=8, 10 CG iterations)": (lambda: DiscriminativeClustering(8, sigma=1.0, max_iter=10, random_state=0,
                                                                             scheduler="threads"), True)}
    print(f"# {platform.processor() or platform.machine()}, {n} x {d} float64, streamed, 2 threads, best of 2")
    print("| store chunks | fit | s |")
    print("|---|---|---|")
    for label, path in stores.items():
        ds = open_dataset(path)
        for name, (make, with_y) in fits.items():
            best = float("inf")
            for _ in range(2):
                t0 = time.perf_counter()
                make().fit(ds["x"], ds["label"]) if with_y else make().fit(ds["x"])
                best = min(best, time.perf_counter() - t0)
            print(f"| {label} ({ds['x'].data.chunks[0][0]} rows) | {name} | {best:.2f} |", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=40000)
    p.add_argument("--cluster", action="store_true")
    p.add_argument("--only", default="")
    p.add_argument("--repeat", type=int, default=1, help="best of this many fits per cell")
    p.add_argument("--streamed-store", action="store_true")
    p.add_argument("--folder", default=str(Path(__file__).parent / "_data"))
    a = p.parse_args()
    if a.streamed_store:
        return streamed_store(Path(a.folder))
    # (name, scheduler, dask input in 7919-row chunks, how: "" | "stream" (read from the graph at every pass)
    #  | "passes" (a cluster: pass by pass, the workers hold the data) | "passes+stream")
    runners = [("sync", "sync", False, ""), ("threads", "threads", False, ""),
               ("sync, dask read in", "sync", True, ""), ("sync, dask streamed", "sync", True, "stream"),
               ("threads, dask streamed", "threads", True, "stream")]
    if a.cluster:
        from infoclust_dask import engine

        client = engine.local_client(n_workers=2)
        runners += [("LocalCluster, numpy whole on a worker", client, False, ""),
                    ("LocalCluster, numpy pass by pass", client, False, "passes"),
                    ("LocalCluster, dask held", client, True, "passes"),
                    ("LocalCluster, dask streamed", client, True, "passes+stream")]
    print(f"# {platform.processor() or platform.machine()}, n={a.n}")
    print("| estimator | runner | fit s | largest gap | same labels |")
    print("|---|---|---|---|---|")
    for name, make, args, kw in cases(a.n):
        if a.only and name not in a.only.split(","):
            continue
        ref = None
        for rname, sched, is_lazy, how in runners:
            given = lazy(args, 7919) if is_lazy else args
            given_kw = dict(zip(kw, lazy(tuple(kw.values()), 7919), strict=True)) if is_lazy else kw
            dt = float("inf")
            for _ in range(a.repeat):
                with placed(how):
                    t0 = time.perf_counter()
                    est = make(sched).fit(*given, **given_kw)
                    dt = min(dt, time.perf_counter() - t0)
            f = fitted(est)
            if ref is None:
                ref = f
                print(f"| {name} | {rname} | {dt:.2f} | (reference) | |", flush=True)
                continue
            g, odd = gap(ref, f)
            same = np.array_equal(ref.get("labels_"), f.get("labels_"))
            print(f"| {name} | {rname} | {dt:.2f} | {g:.3g}{' ' + odd if odd else ''} | {same} |", flush=True)


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
