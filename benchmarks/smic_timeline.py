"""Where a SMIC fit's time goes on the workers (issue 65): the fit of
``SMIC(10, t=10)`` on the ``--n``-row store of ``smic_scale.py`` (written
there first if missing) on a LocalCluster of 2 single-threaded workers,
with distributed's task stream recorded. Prints per worker, phase by phase,
the seconds from the fit's start, the tasks and the seconds they computed,
then two sums that the stage times (``timings_``) cannot give:

- the CPU-seconds of the neighbour search's cell builds (``knn_cells-build``)
  and the longest one: the search's work, apart from the driver's plan and
  the scheduling around it;
- per worker, its builds and the seconds it stood idle between the first
  build's start and the last one's end (the builds' placement);
- the seconds the workers computed during the eigensolver's products
  (``smic-kernel-apply``) against that phase's length: the rest is the
  driver's (sending the vector, gathering, Gram-Schmidt).

``--min-cells`` / ``--cell-sample-rows`` set the partition's
``MIN_CELLS`` / ``CELL_SAMPLE_ROWS`` for the run (comparisons of the plan),
``--repeats`` runs the fit again on the same cluster.

    python benchmarks/smic_timeline.py --n 2000000
    python benchmarks/smic_timeline.py --n 2000000 --min-cells 16 --cell-sample-rows 10000
    python benchmarks/smic_timeline.py --n 10000000 --worker-memory 8GB --short 1.0
"""

import argparse
import time
from pathlib import Path


def phases(records, t0):
    """Per worker: runs of consecutive tasks of one name, ``(start, end, name, count, busy)``."""
    from dask.utils import key_split

    by_worker: dict = {}
    for r in records:
        for s in r["startstops"]:
            by_worker.setdefault(r["worker"], []).append((s["start"] - t0, s["stop"] - t0,
                                                          f"{s['action']}:{key_split(r['key'])}"))
    out = {}
    for w, items in by_worker.items():
        runs: list = []
        for s, e, name in sorted(items):
            if runs and runs[-1][2] == name and s - runs[-1][1] < 0.5:
                a, _, _, k, busy = runs[-1]
                runs[-1] = (a, e, name, k + 1, busy + e - s)
            else:
                runs.append((s, e, name, 1, e - s))
        out[w] = runs
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=2_000_000)
    p.add_argument("--min-cells", type=int, default=None)
    p.add_argument("--cell-sample-rows", type=int, default=None)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--worker-memory", default="3GB", help="each worker's memory limit (1e7 rows: 8GB)")
    p.add_argument("--short", type=float, default=0.2, help="leave out runs of tasks shorter than this (seconds)")
    a = p.parse_args()

    import numpy as np
    from dask.utils import key_split
    from distributed import Client, LocalCluster, get_task_stream
    from sklearn.metrics import adjusted_rand_score

    import infoclust_dask.cluster._knn_graph as knn_graph
    from infoclust_dask import SMIC, open_dataset, write_dataset
    from infoclust_dask.datasets import make_blobs

    if a.min_cells is not None:
        knn_graph.MIN_CELLS = a.min_cells
    if a.cell_sample_rows is not None:
        knn_graph.CELL_SAMPLE_ROWS = a.cell_sample_rows
    path = Path(__file__).parent / "_data" / f"smic-scale-{a.n}x16.zarr"
    if not path.exists():  # the store of smic_scale.py
        X, lab, _ = make_blobs(a.n, 16, centers=10, random_state=0, chunks=65_536)
        write_dataset(path, X, label=lab, check_finite=False)
    ds = open_dataset(path)
    labels = np.asarray(ds["label"].values)
    with LocalCluster(n_workers=2, threads_per_worker=1, memory_limit=a.worker_memory) as cluster, Client(cluster) as client:
        for _ in range(a.repeats):
            t0 = time.time()
            with get_task_stream(client) as stream:
                m = SMIC(10, t=10, random_state=0, scheduler=client).fit(ds["x"])
            total = time.time() - t0
            print(f"\nn={a.n}, MIN_CELLS {knn_graph.MIN_CELLS}, CELL_SAMPLE_ROWS {knn_graph.CELL_SAMPLE_ROWS}: "
                  f"total {total:.1f} s; " + ", ".join(f"{k} {v:.1f}" for k, v in m.timings_.items())
                  + f"; recall {m.knn_recall_:.4f}, ARI {adjusted_rand_score(labels, m.labels_):.4f}")
            builds = [s["stop"] - s["start"] for r in stream.data if key_split(r["key"]) == "knn_cells-build"
                      for s in r["startstops"] if s["action"] == "compute"]
            if builds:
                print(f"cell builds: {len(builds)}, {sum(builds):.1f} CPU-s, the longest {max(builds):.1f} s")
                spans = {}  # per worker: its builds' seconds, and the search's span (first start to last end)
                for r in stream.data:
                    if key_split(r["key"]) == "knn_cells-build":
                        for s in r["startstops"]:
                            if s["action"] == "compute":
                                spans.setdefault(r["worker"], []).append((s["start"], s["stop"]))
                first = min(a for v in spans.values() for a, _ in v)
                last = max(b for v in spans.values() for _, b in v)
                for w, v in sorted(spans.items()):
                    busy = sum(b - a for a, b in v)
                    print(f"  builds on {w}: {len(v)}, busy {busy:.1f} s, idle {last - first - busy:.1f} s "
                          f"of the builds' {last - first:.1f} s")
            for w, runs in phases(stream.data, t0).items():
                print(f"worker {w}")
                for s, e, name, k, busy in runs:
                    if busy >= a.short or name.endswith("smic-kernel-apply"):
                        print(f"  {s:7.1f} {e:7.1f} s  {name} x{k}, computing {busy:.1f} s")
                apply = [r for r in runs if r[2] == "compute:smic-kernel-apply"]
                if apply:
                    span = apply[-1][1] - apply[0][0]
                    print(f"  eigensolver products: computing {sum(r[4] for r in apply):.1f} s of {span:.1f} s")


if __name__ == "__main__":
    main()
