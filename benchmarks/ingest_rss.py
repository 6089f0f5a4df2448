"""Peak memory of `infoclust ingest` against the size of the CSV it reads.

Writes CSV files of 16 float columns plus a string class column (sizes
given in GB), then runs `infoclust ingest FILE STORE --label-column cls
--standardize` in a fresh process per file and prints the process' peak RSS
(``getrusage(RUSAGE_SELF).ru_maxrss``), the time, and the ratio of peak RSS
between the largest and the smallest file (1.0 = independent of file size).

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


RUN = """
import resource, sys, time, json
from infoclust_dask.cli import main
t = time.perf_counter()
code = main(sys.argv[1:])
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
print(json.dumps({"code": code, "seconds": time.perf_counter() - t, "peak_rss_gib": rss}), file=sys.stderr)
"""


def ingest_peak(src: Path):
    dest = DATA / (src.stem + ".zarr")
    shutil.rmtree(dest, ignore_errors=True)
    p = subprocess.run([sys.executable, "-c", RUN, "ingest", str(src), str(dest), "--label-column", "cls",
                        "--standardize"], capture_output=True, text=True)
    last = [ln for ln in p.stderr.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not last:
        raise SystemExit(p.stderr[-3000:])
    out = json.loads(last[-1])
    rows = json.loads(p.stdout)["rows_written"]
    shutil.rmtree(dest, ignore_errors=True)
    return {"file_gb": round(src.stat().st_size / 1e9, 3), "rows": rows, "seconds": round(out["seconds"], 1),
            "peak_rss_gib": round(out["peak_rss_gib"], 3)}


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
    print(f"peak RSS ratio largest/smallest file: {rows[-1]['peak_rss_gib'] / rows[0]['peak_rss_gib']:.2f} "
          f"for {rows[-1]['file_gb'] / rows[0]['file_gb']:.1f}x the bytes; throughput "
          f"{rows[-1]['file_gb'] * 1e3 / rows[-1]['seconds']:.0f} MB/s of CSV")


if __name__ == "__main__":
    main()
