"""SMIC's connected-components pass at scale (issue 65): the neighbour
lists held on a LocalCluster of 2 single-threaded workers, as the fit holds
them, the pass as the fit runs it (``cluster._smic_solve.graph_components``)
against the old blocking (one union-find forest per 4 MiB logical block)
and a fan-in of 8.

The lists: ``--n`` rows in 10 blobs whose rows are shuffled through the
row numbers (as in ``smic_scale.py``'s stores); each row's 10 neighbours
are the rows within 5 places of it along a hidden chain of its blob (a
stand-in for a kNN graph: near rows in the data, far apart in the store).
Every way must find the same 10 components; prints each one's time and
the ratio to the fit's.

    python benchmarks/smic_components.py --n 10000000
"""

import argparse
import time

import numpy as np


def chain_lists(n, blobs=10, seed=0):
    """int32 lists (n, 10): each row's neighbours 5 either side along its blob's chain."""
    rng = np.random.default_rng(seed)
    m = n // blobs
    perm = rng.permutation(blobs * m)
    pos_rows = perm.reshape(blobs, m)
    row_blob = np.empty(blobs * m, np.int64)
    row_pos = np.empty(blobs * m, np.int64)
    row_blob[perm] = np.repeat(np.arange(blobs), m)
    row_pos[perm] = np.tile(np.arange(m), blobs)
    off = np.array([-5, -4, -3, -2, -1, 1, 2, 3, 4, 5])
    idx = np.empty((blobs * m, 10), np.int32)
    for s in range(0, blobs * m, 1 << 20):
        p = np.clip(row_pos[s:s + (1 << 20), None] + off[None, :], 0, m - 1)
        idx[s:s + (1 << 20)] = pos_rows[row_blob[s:s + (1 << 20), None], p]
    return idx


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=2_000_000)
    p.add_argument("--chunk-rows", type=int, default=524_288, help="rows per chunk of the held lists")
    p.add_argument("--repeat", type=int, default=2)
    a = p.parse_args()

    import dask.array as da
    from distributed import Client, LocalCluster, wait

    from infoclust_dask import engine
    from infoclust_dask.cluster._smic_solve import graph_components
    from infoclust_dask.kernels.components import COMPONENTS, component_labels

    idx = chain_lists(a.n)
    n = idx.shape[0]
    ways = {
        "the fit's (a forest per chunk, fan-in 2)": lambda d: graph_components(d, 10),
        "a forest per 4 MiB logical block, fan-in 2 (before)": lambda d: component_labels(
            engine.map_reduce(COMPONENTS, d, params={"t": 10}, split_every=2), n),
        "a forest per chunk, fan-in 8": lambda d: component_labels(
            engine.map_reduce(COMPONENTS, d, params={"t": 10}, split_every=8, block_rows=max(d.chunks[0])), n),
    }
    with LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="8GB", dashboard_address=None) as lc, \
            Client(lc) as client:
        held = da.from_array(idx, chunks=(a.chunk_rows, 10)).persist()
        wait(held)
        del idx
        times = {}
        with engine.installed(client):
            for _ in range(a.repeat):
                for name, way in ways.items():
                    t0 = time.perf_counter()
                    labels, k = way(held)
                    times.setdefault(name, []).append(time.perf_counter() - t0)
                    assert k == 10, (name, k)
        first = min(times[next(iter(ways))])
        print(f"n={n:,}, {len(held.chunks[0])} chunks of {a.chunk_rows:,} rows, 2 workers; best of {a.repeat}")
        for name, ts in times.items():
            print(f"{name}: {min(ts):.2f} s (runs {', '.join(f'{t:.2f}' for t in ts)}), {min(ts) / first:.2f}x the fit's")


if __name__ == "__main__":
    main()
