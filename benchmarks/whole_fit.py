"""A fit on a LocalCluster (2 worker processes, 127.0.0.1) whose data fit
one worker: as one task on a worker (the default) against one scheduler
round trip per pass (the behaviour before, forced here by a loop budget of
0 bytes), on the same data in one run; the fitted centres must agree.

    python benchmarks/whole_fit.py [--repeat 3]
    python benchmarks/whole_fit.py --lazy-cell [--repeat 3]

``--lazy-cell``: a cross-validation cell (``crossval.run_cell``: DC on the
training rows of fold 0 of Letter's 10 stored folds, a lazy selection of
the store's rows) both ways - its lazy rows gathered and fitted whole on a
worker (the default since issue 61) against a round trip per pass.
"""

import argparse
import time

import numpy as np


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--lazy-cell", action="store_true")
    a = p.parse_args()
    if a.lazy_cell:
        return lazy_cell(a.repeat)

    from sklearn.datasets import load_digits, load_iris

    from infoclust_dask import DiscriminativeClustering, KMeans, SoftKMeans, engine
    from infoclust_dask.engine.choose import Distributed

    client = engine.local_client(n_workers=2)
    whole_budget = Distributed.loop_budget
    data = {"iris": load_iris(return_X_y=True), "digits": load_digits(return_X_y=True)}
    cases = [("KMeans", lambda k: KMeans(k, random_state=0, scheduler=client), False),
             ("SoftKMeans (auto)", lambda k: SoftKMeans(k, beta=10.0, beta_schedule="auto", random_state=0,
                                                        scheduler=client), False),
             ("DiscriminativeClustering", lambda k: DiscriminativeClustering(k, random_state=0, scheduler=client),
              True)]
    print("| data | estimator | whole fit on a worker (s) | one round trip per pass (s) | speed-up | max centre diff |")
    print("|---|---|---|---|---|---|")
    for dname, (X, y) in data.items():
        k = len(np.unique(y))
        for name, make, with_y in cases:
            times, centres = {}, {}
            for mode in ("whole", "per pass"):
                Distributed.loop_budget = whole_budget if mode == "whole" else (lambda self: 0)
                best = np.inf
                for _ in range(a.repeat if mode == "whole" or dname == "iris" else 1):
                    t0 = time.perf_counter()
                    est = make(k).fit(X, y) if with_y else make(k).fit(X)
                    best = min(best, time.perf_counter() - t0)
                assert ("whole_fit_on" in est.runner_) == (mode == "whole")
                times[mode], centres[mode] = best, est.cluster_centers_
            Distributed.loop_budget = whole_budget
            diff = float(np.abs(centres["whole"] - centres["per pass"]).max())
            print(f"| {dname} | {name} | {times['whole']:.2f} | {times['per pass']:.2f} | "
                  f"{times['per pass'] / times['whole']:.0f}x | {diff:.1e} |", flush=True)
    engine.close_local_client()


def lazy_cell(repeat):
    import tempfile
    from pathlib import Path

    from infoclust_dask import crossval, engine
    from infoclust_dask.engine.choose import Distributed
    from infoclust_dask.io.ingest import ingest

    client = engine.local_client(n_workers=2)
    whole_budget = Distributed.loop_budget
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "letter.zarr"
        ingest("letter", store, standardize=True, n_folds=10)
        crossval.run_cell(store, "dc", {"sigma": 1.0, "n_clusters": 2}, 0, 10, "stored", 0, client)  # warm-up
        print("| cell (DC on Letter, fold 0 of 10) | whole fit on a worker (s) | one round trip per pass (s) | "
              "speed-up | held-out cost, both ways |")
        print("|---|---|---|---|---|")
        for params in ({"sigma": 1.0, "n_clusters": 10}, {"sigma": 0.5, "n_clusters": 2}):
            times, cost = {}, {}
            for mode in ("whole", "per pass"):
                Distributed.loop_budget = whole_budget if mode == "whole" else (lambda self: 0)
                best = np.inf
                for _ in range(repeat if mode == "whole" else 1):
                    t0 = time.perf_counter()
                    r = crossval.run_cell(store, "dc", params, 0, 10, "stored", 0, client)
                    best = min(best, time.perf_counter() - t0)
                times[mode], cost[mode] = best, r["cost"]
            Distributed.loop_budget = whole_budget
            print(f"| {params} | {times['whole']:.2f} | {times['per pass']:.2f} | "
                  f"{times['per pass'] / times['whole']:.0f}x | {cost['whole']:.2f} / {cost['per pass']:.2f} |",
                  flush=True)
    engine.close_local_client()


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
