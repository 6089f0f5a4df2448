"""Small data through the CLI with its defaults, against the scikit-learn
process doing the nearest job, measured in one run.

For each bundled dataset (iris, wine, digits, satimage, optdigits, penbased,
letter) the rows are ingested once (`infoclust ingest NAME STORE`, not
timed) and written to a .npy file; then, per method, the whole wall time of
two fresh processes is measured (best of ``--repeat``):

- ours: ``infoclust fit METHOD STORE -k K`` with the CLI's defaults (the
  data decide where the fit runs);
- the peer: ``python -c`` that imports scikit-learn, loads the .npy and fits
  the nearest estimator: KMeans(n_init=10) for kmeans,
  GaussianMixture(spherical, n_init=10) for softkmeans (the whole annealing
  path) and dc, SpectralClustering(affinity="nearest_neighbors") for smic.

K is the number of classes. Prints a Markdown table with the ratio (ours /
peer); targets: kmeans <= 2x, softkmeans <= 3x on every dataset; dc and
smic are recorded. ``--plot FILE.png`` draws the ratios.

    python benchmarks/small_data.py [--datasets iris,wine] [--methods kmeans,softkmeans] [--plot docs/small_data.png]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

PEERS = {
    "kmeans": "from sklearn.cluster import KMeans as E; kw = dict(n_init=10, random_state=0)",
    "softkmeans": ("from sklearn.mixture import GaussianMixture as E; "
                   "kw = dict(covariance_type='spherical', n_init=10, random_state=0)"),
    "dc": ("from sklearn.mixture import GaussianMixture as E; "
           "kw = dict(covariance_type='spherical', n_init=10, random_state=0)"),
    "smic": ("from sklearn.cluster import SpectralClustering as E; "
             "kw = dict(affinity='nearest_neighbors', random_state=0)"),
}
DATASETS = ("iris", "wine", "digits", "satimage", "optdigits", "penbased", "letter")
METHODS = ("kmeans", "softkmeans", "dc", "smic")
TARGET = {"kmeans": 2.0, "softkmeans": 3.0}


def wall(cmd, env=None, repeat=1):
    best, out = np.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        dt = time.perf_counter() - t0
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
        if dt < best:
            best, out = dt, p.stdout
    return best, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--plot", default=None)
    args = ap.parse_args()
    exe = str(Path(sys.executable).with_name("infoclust"))
    tmp = Path(tempfile.mkdtemp(prefix="infoclust-small-"))
    env = {**os.environ, "INFOCLUST_STORAGE": str(tmp / "storage")}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    from infoclust_dask.datasets import load_bundled

    rows = []
    print("| dataset | n x d | K | method | ours (s) | where it ran | peer (s) | ratio | target |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.datasets.split(","):
        X, c, _ = load_bundled(name)
        k = len(np.unique(c))
        np.save(tmp / f"{name}.npy", np.asarray(X, dtype=np.float64))
        store = tmp / f"{name}.zarr"
        subprocess.run([exe, "ingest", name, str(store)], check=True, capture_output=True, env=env)
        for method in args.methods.split(","):
            ours, out = wall([exe, "fit", method, str(store), "-k", str(k), "--storage", str(tmp / "runs")],
                             env=env, repeat=args.repeat)
            ran = json.loads(out).get("runner", {}).get("runner", "?")
            code = (f"import numpy as np; {PEERS[method]}; X = np.load({str(tmp / (name + '.npy'))!r}); "
                    f"E({k}, **kw).fit(X)")
            peer, _ = wall([sys.executable, "-c", code], env=env, repeat=args.repeat)
            ratio = ours / peer
            target = TARGET.get(method)
            mark = "" if target is None else (f"<= {target:g}: {'met' if ratio <= target else 'MISSED'}")
            rows.append({"dataset": name, "method": method, "ours": ours, "peer": peer, "ratio": ratio})
            print(f"| {name} | {X.shape[0]} x {X.shape[1]} | {k} | {method} | {ours:.2f} | {ran} | {peer:.2f} | "
                  f"{ratio:.2f} | {mark} |", flush=True)
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(8, 4))
        names = list(dict.fromkeys(r["dataset"] for r in rows))
        methods = list(dict.fromkeys(r["method"] for r in rows))
        width = 0.8 / len(methods)
        for j, m in enumerate(methods):
            vals = [next((r["ratio"] for r in rows if r["dataset"] == n and r["method"] == m), np.nan) for n in names]
            ax.bar(np.arange(len(names)) + j * width, vals, width, label=m)
        ax.axhline(2.0, color="k", lw=0.8, ls="--")
        ax.axhline(3.0, color="k", lw=0.8, ls=":")
        ax.set_xticks(np.arange(len(names)) + 0.4 - width / 2, names)
        ax.set_ylabel("CLI wall time / scikit-learn process")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
