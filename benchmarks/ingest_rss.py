"""Peak memory of `infoclust ingest` against the size of the CSV it reads.

Writes CSV files of 16 float columns plus a string class column (sizes
given in GB), then runs `infoclust ingest FILE STORE --label-column cls
--standardize` as a user does (``python -m infoclust_dask.cli``, a process
of its own, with its watchdog child) and prints the command's own peak RSS
(its high-water mark, ``VmHWM`` of ``/proc/PID/status``, which the kernel
keeps per process and which no sampling can miss), the peak of its whole
process tree's summed RSS (sampled every 10 ms), the sum of the tree's
high-water marks (an upper bound of the tree's peak: each process at its
own peak at once), the time, and the ratio of the tree's peak between the
largest and the smallest file (1.0 = independent of file size).

Not ``wait4``'s ``ru_maxrss``: Linux carries a process's high-water mark
across ``exec``, so a command started from this (large) benchmark process
reports the benchmark's own RSS at the fork when that is higher (720 MB
against the 353 MB that ``/usr/bin/time`` shows for the same command).

    python benchmarks/ingest_rss.py --sizes 0.25 2.2

Files go to benchmarks/_data (gitignored) and are kept for reruns.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DATA = HERE / "_data"
COLS = 16
CLASSES = np.array(["alpha", "beta", "gamma", "delta", "epsilon", "zeta"])


def make_csv(path: Path, gigabytes: float, seed=0):
    if path.exists() and abs(path.stat().st_size / 1e9 - gigabytes) < 0.05 * gigabytes:
        return path
    rng = np.random.default_rng(seed)
    tmp = path.with_suffix(".part")
    with tmp.open("w") as fh:
        fh.write(",".join([f"f{j}" for j in range(COLS)] + ["cls"]) + "\n")
        while fh.tell() < gigabytes * 1e9:
            n = 200_000
            lab = rng.integers(0, len(CLASSES), n)
            x = rng.normal(size=(n, COLS)) + lab[:, None]
            lines = np.char.add(np.char.add([",".join(r) for r in np.char.mod("%.6f", x)], ","), CLASSES[lab])
            fh.write("\n".join(lines.tolist()) + "\n")
    tmp.rename(path)
    return path


def tree_peak(cmd):
    """Run ``cmd`` (a process of its own, as a user runs the CLI); returns
    (its stdout, seconds, its own high-water RSS (``VmHWM``), the peak of
    the whole tree's summed RSS - it and its children, e.g. the watchdog -
    sampled every 10 ms, and the sum of the tree's high-water marks)."""
    import os
    import threading
    import time

    import psutil

    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak, done, hwm = [0], threading.Event(), {}

    def high_water(pid):
        with open(f"/proc/{pid}/status") as fh:
            return next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmHWM:"))

    def sample():
        root = psutil.Process(proc.pid)
        while not done.is_set():
            try:
                procs = [root, *root.children(recursive=True)]
                peak[0] = max(peak[0], sum(p.memory_info().rss for p in procs if p.is_running()))
                for p in procs:  # VmHWM only grows: the last reading before a process ends is its peak
                    hwm[p.pid] = max(hwm.get(p.pid, 0), high_water(p.pid))
            except (psutil.Error, OSError, StopIteration):  # a process ended between the listing and the reading
                pass
            time.sleep(0.01)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    out, err = [], []
    readers = [threading.Thread(target=lambda f=f, b=b: b.append(f.read())) for f, b in ((proc.stdout, out),
                                                                                        (proc.stderr, err))]
    for r in readers:
        r.start()
    _, status, _ = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    done.set()
    th.join()
    for r in readers:
        r.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit("".join(err)[-3000:])
    return "".join(out), seconds, hwm.get(proc.pid, 0), peak[0], sum(hwm.values())


def ingest_peak(src: Path):
    dest = DATA / (src.stem + ".zarr")
    shutil.rmtree(dest, ignore_errors=True)
    out, seconds, own, tree, tree_hwm = tree_peak([sys.executable, "-m", "infoclust_dask.cli", "ingest", str(src), str(dest),
                                         "--label-column", "cls", "--standardize"])
    rows = json.loads(out)["rows_written"]
    shutil.rmtree(dest, ignore_errors=True)
    return {"file_gb": round(src.stat().st_size / 1e9, 3), "rows": rows, "seconds": round(seconds, 1),
            "peak_rss_mb": round(own / 1e6), "tree_peak_rss_mb": round(tree / 1e6),
            "tree_high_water_sum_mb": round(tree_hwm / 1e6)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=float, nargs="+", default=[0.25, 2.2], help="CSV sizes in GB")
    args = ap.parse_args(argv)
    DATA.mkdir(exist_ok=True)
    rows = []
    for gb in args.sizes:
        src = make_csv(DATA / f"ingest-{gb:g}gb.csv", gb)
        rows.append(ingest_peak(src))
        print(json.dumps(rows[-1]), flush=True)
    print(f"tree peak RSS ratio largest/smallest file: {rows[-1]['tree_peak_rss_mb'] / rows[0]['tree_peak_rss_mb']:.2f} "
          f"for {rows[-1]['file_gb'] / rows[0]['file_gb']:.1f}x the bytes; throughput "
          f"{rows[-1]['file_gb'] * 1e3 / rows[-1]['seconds']:.0f} MB/s of CSV")


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
