"""Stores in an S3-protocol bucket (moto's server on 127.0.0.1) against the
same store on local disk, in one run, on a LocalCluster of 2 worker
processes that read the chunks themselves:

- a Lloyd pass and a DC pass over the URL vs a plain
  ``dask.array.from_zarr(url).sum()`` of the same URL (target <= 1.3);
- a K-means fit and a DC fit from the URL and from local disk: the same
  numbers, and their seconds;
- the cost of the CRC-32C every chunk read checks (a Lloyd pass over the
  local store against a copy written without the checksum);
- appending 10 % new rows vs writing those rows alone (target <= 1.5), at
  the URL and on local disk, and a ``kill -9`` during a local append
  (``verify`` passes, the row count unchanged).

    python benchmarks/object_store.py [--rows 32000000] [--features 16] [--repeat 3]

The server holds the bucket in its memory (2 GB of data need ~2.5 GB).
"""

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server():
    """moto's S3 server on 127.0.0.1 (stopped by PID at the end); the
    environment names it and fake credentials for every process started
    after this (the cluster's workers)."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.environ.update(FSSPEC_S3_ENDPOINT_URL=f"http://127.0.0.1:{port}", AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}",
                      AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench-secret", AWS_DEFAULT_REGION="us-east-1")
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("moto's server did not start")


def timed(fn, repeat):
    ts = []
    out = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
    return min(ts), float(np.median(ts)), out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=32_000_000)
    p.add_argument("--features", type=int, default=16)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--max-iter", type=int, default=5, help="iterations of the timed K-means and DC fits")
    p.add_argument("--skip-fits", action="store_true", help="leave out the K-means and DC fits (7 min at 2 GB)")
    a = p.parse_args()

    server = start_server()
    data = HERE / "_data" / f"objstore-{uuid.uuid4().hex[:6]}"
    try:
        run(a, data)
    finally:
        shutil.rmtree(data, ignore_errors=True)
        server.terminate()
        server.wait(10)


def run(a, data):
    import dask.array as da
    import fsspec
    import xarray as xr
    from zarr.codecs import BloscCodec

    from infoclust_dask import DiscriminativeClustering, KMeans, engine, open_dataset, write_dataset
    from infoclust_dask.datasets import make_blobs
    from infoclust_dask.io.append import append_dataset
    from infoclust_dask.io.store import verify_store
    from infoclust_dask.kernels.dc import DC_COUNTS
    from infoclust_dask.kernels.kmeans import LLOYD_STEP

    fsspec.filesystem("s3").mkdir("bench")
    data.mkdir(parents=True)
    client = engine.local_client(n_workers=2, threads_per_worker=1)
    print(f"LocalCluster: {len(client.scheduler_info()['workers'])} worker processes x 1 thread; "
          f"S3 server {os.environ['FSSPEC_S3_ENDPOINT_URL']}")
    n, d, k = a.rows, a.features, 8
    n_old = int(n / 1.1)
    X, z, _ = make_blobs(n, d, centers=k, random_state=0, dtype=np.float32, chunks=1 << 20)
    z = (z % 3).astype(np.int32)
    url, local = "s3://bench/x.zarr", data / "x.zarr"
    for where in (local, url):
        t0 = time.perf_counter()
        write_dataset(where, X[:n_old], label=z[:n_old], check_finite=False, scheduler=client)
        print(f"wrote {n_old} x {d} float32 ({n_old * d * 4 / 1e9:.2f} GB) at {where} in "
              f"{time.perf_counter() - t0:.1f} s")
    ds_url, ds_local = open_dataset(url), open_dataset(local)
    nbytes = ds_url["x"].size * 4
    centers = np.random.default_rng(0).normal(size=(k, d))
    sigma = 2.0

    def fresh(ds):  # a new graph name each time: no run reuses another's results
        return ds["x"].data.map_blocks(lambda b: b, name=f"x-{uuid.uuid4().hex}")

    def plain(target, opts=None):
        arr = da.from_zarr(str(target), component="x", storage_options=opts, name=f"x-{uuid.uuid4().hex}")
        return float(engine.compute(arr.sum(dtype=np.float64), scheduler=client))

    runs = {
        "plain from_zarr(url).sum()": lambda: plain(url),
        "Lloyd pass, url": lambda: engine.map_reduce(LLOYD_STEP, fresh(ds_url), None,
                                                     params={"centers": centers}, scheduler=client),
        "DC count pass, url": lambda: engine.map_reduce(DC_COUNTS, fresh(ds_url), ds_url["label"].data,
                                                        params={"centers": centers, "sigma": sigma,
                                                                "n_classes": 3}, scheduler=client),
        "plain from_zarr(local).sum()": lambda: plain(local),
        "Lloyd pass, local": lambda: engine.map_reduce(LLOYD_STEP, fresh(ds_local), None,
                                                       params={"centers": centers}, scheduler=client),
    }
    res = {}
    for name, fn in runs.items():
        best, med, _ = timed(fn, a.repeat)
        res[name] = best
        print(f"{name:34s} best {best:7.2f} s  median {med:7.2f} s  ({nbytes / best / 1e9:.2f} GB/s)")
    print(f"RATIO pass/plain read at the URL: Lloyd {res['Lloyd pass, url'] / res['plain from_zarr(url).sum()']:.2f}, "
          f"DC counts {res['DC count pass, url'] / res['plain from_zarr(url).sum()']:.2f} (target <= 1.3)")

    # the same fits from the URL and from local disk
    for name, make in () if a.skip_fits else (("KMeans", lambda: KMeans(k, random_state=0, max_iter=a.max_iter, scheduler=client)),
                       ("DC", lambda: DiscriminativeClustering(k, sigma=sigma, random_state=0, max_iter=a.max_iter,
                                                               scheduler=client))):
        fits = {}
        for where in (url, str(local)):
            t0 = time.perf_counter()
            est = make().fit(where) if name == "KMeans" else make().fit(where, open_dataset(where)["label"])
            fits[where] = (time.perf_counter() - t0, est.cluster_centers_)
        same = np.array_equal(fits[url][1], fits[str(local)][1])
        print(f"{name} fit (max_iter={a.max_iter}): url {fits[url][0]:.1f} s, local {fits[str(local)][0]:.1f} s, "
              f"identical centres: {same}")

    # the CRC-32C of every chunk: a Lloyd pass over the store and over a copy without the checksum
    nocrc = data / "nocrc.zarr"
    enc = {"x": {"chunks": ds_local["x"].encoding.get("chunks", (ds_local["x"].chunks[0][0], d)),
                 "compressors": (BloscCodec(cname="lz4", clevel=5, shuffle="shuffle", typesize=4),)}}
    xr.Dataset({"x": ds_local["x"]}).to_zarr(nocrc, mode="w-", zarr_format=3, consolidated=False, encoding=enc,
                                             compute=False).compute(scheduler=client)
    arr_nocrc = da.from_zarr(str(nocrc), component="x")
    t_crc = timed(lambda: engine.map_reduce(LLOYD_STEP, fresh(ds_local), None, params={"centers": centers},
                                            scheduler=client), a.repeat)[0]
    t_plain = timed(lambda: engine.map_reduce(LLOYD_STEP, arr_nocrc.map_blocks(lambda b: b, name=f"n-{uuid.uuid4().hex}"),
                                              None, params={"centers": centers}, scheduler=client), a.repeat)[0]
    print(f"Lloyd pass, local: with CRC-32C {t_crc:.2f} s, without {t_plain:.2f} s: the check costs "
          f"{100 * (t_crc / t_plain - 1):+.1f} %")

    # append 10 % vs writing those rows alone
    for where, alone in ((url, "s3://bench/alone.zarr"), (local, data / "alone.zarr")):
        t0 = time.perf_counter()
        write_dataset(alone, X[n_old:], label=z[n_old:], check_finite=False, scheduler=client,
                      chunks=ds_local["x"].chunks[0][0])
        t_alone = time.perf_counter() - t0
        rep = append_dataset(where, X[n_old:], label=z[n_old:], scheduler=client)
        print(f"append {n - n_old} rows at {where}: {rep['seconds']:.1f} s; writing them alone "
              f"{t_alone:.1f} s: RATIO {rep['seconds'] / t_alone:.2f} (target <= 1.5)")
        assert open_dataset(where).sizes["sample"] == n

    # kill -9 during an append on local disk
    victim = data / "victim.zarr"
    write_dataset(victim, X[:n_old], label=z[:n_old], check_finite=False, scheduler=client)
    np.save(data / "new.npy", np.asarray(X[n_old:]))
    np.save(data / "newz.npy", np.asarray(z[n_old:]))
    code = ("import numpy as np; from infoclust_dask.io.append import append_dataset; "
            f"append_dataset({str(victim)!r}, np.load({str(data / 'new.npy')!r}), "
            f"label=np.load({str(data / 'newz.npy')!r}), scheduler='threads')")
    for delay in (2.0, 5.0, 8.0):
        child = subprocess.Popen([sys.executable, "-c", code])
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        child.wait()
        from infoclust_dask.io import store as store_mod

        store_mod.forget_opened()
        rows = open_dataset(victim).sizes["sample"]
        problems = verify_store(victim)["problems"]
        print(f"kill -9 after {delay:.0f} s of an append: {rows} rows readable (before: {n_old}, after a "
              f"finished append: {n}); verify: {problems or 'no problems'}")
        if rows == n:
            break
    engine.close_local_client()


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
