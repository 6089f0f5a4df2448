"""A fit on a LocalCluster (2 worker processes, 127.0.0.1) whose data fit
one worker: as one task on a worker (the default) against one scheduler
round trip per pass (the behaviour before, forced here by a loop budget of
0 bytes), on the same data in one run; the fitted centres must agree.

    python benchmarks/whole_fit.py [--repeat 3]
"""

import argparse
import time

import numpy as np


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()

    from sklearn.datasets import load_digits, load_iris

    from infoclust_dask import DiscriminativeClustering, KMeans, SoftKMeans, engine
    from infoclust_dask.engine.runners import Distributed

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


if __name__ == "__main__":
    main()
