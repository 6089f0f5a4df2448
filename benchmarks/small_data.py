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
  path), dc, mog and mda2, SpectralClustering(affinity="nearest_neighbors")
  for smic, KMeans(n_init=10) on each view for ac and on the binary rows for
  cmbc (scikit-learn has no Bernoulli mixture).

The methods that need more than the rows read derived stores of the same
rows: ac a paired store (x = the first half of the columns, y = the rest,
K = L = the number of classes), cmbc a binary store (each column above its
median: 1) whose known clustering is the class. K is the number of classes.
Prints a Markdown table with the ratio (ours / peer); targets: kmeans <= 2x,
softkmeans <= 3x on every dataset; the others are recorded. ``--plot
FILE.png`` draws the ratios.

    python benchmarks/small_data.py [--datasets iris,wine] [--methods kmeans,softkmeans] [--plot docs/figures/small_data.png]
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
    "mog": ("from sklearn.mixture import GaussianMixture as E; "
            "kw = dict(covariance_type='spherical', n_init=10, random_state=0)"),
    "mda2": ("from sklearn.mixture import GaussianMixture as E; "
             "kw = dict(covariance_type='spherical', n_init=10, random_state=0)"),
    "ac": "from sklearn.cluster import KMeans as E; kw = dict(n_init=10, random_state=0)",
    "cmbc": "from sklearn.cluster import KMeans as E; kw = dict(n_init=10, random_state=0)",
}
DATASETS = ("iris", "wine", "digits", "satimage", "optdigits", "penbased", "letter")
METHODS = ("kmeans", "softkmeans", "dc", "smic", "ac", "cmbc", "mog", "mda2")
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


def derived_stores(exe, env, tmp, name, X, c, methods):
    """Ingest the stores the methods read: {method: (store, peer's .npy, extra CLI args)}."""

    def ingest(src, dest, *extra):
        subprocess.run([exe, "ingest", str(src), str(dest), *extra], check=True, capture_output=True, env=env)

    npy = tmp / f"{name}.npy"
    np.save(npy, X)
    store = tmp / f"{name}.zarr"
    ingest(name, store)
    out = {m: (store, npy, ()) for m in methods}
    np.save(tmp / f"{name}-label.npy", np.asarray(c))
    if "ac" in methods:  # two views of the same rows: the first half of the columns, the rest
        h = X.shape[1] // 2
        np.save(tmp / f"{name}-x.npy", X[:, :h])
        np.save(tmp / f"{name}-y.npy", X[:, h:])
        ingest(tmp / f"{name}-x.npy", tmp / f"{name}-ac.zarr", "--y", tmp / f"{name}-y.npy")
        out["ac"] = (tmp / f"{name}-ac.zarr", npy, ("-l", str(len(np.unique(c)))))
    if "cmbc" in methods:  # binary rows: a column above its median is 1; the known clustering is the class
        B = (X > np.median(X, axis=0)).astype(np.uint8)
        np.save(tmp / f"{name}-b.npy", B)
        ingest(tmp / f"{name}-b.npy", tmp / f"{name}-b.zarr", "--binary", "--labels", tmp / f"{name}-label.npy")
        out["cmbc"] = (tmp / f"{name}-b.zarr", tmp / f"{name}-b.npy", ())
    return out


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
        X = np.asarray(X, dtype=np.float64)
        k = len(np.unique(c))
        stores = derived_stores(exe, env, tmp, name, X, c, args.methods.split(","))
        for method in args.methods.split(","):
            store, npy, extra = stores[method]
            ours, out = wall([exe, "fit", method, str(store), "-k", str(k), *extra,
                              "--storage", str(tmp / "runs")], env=env, repeat=args.repeat)
            ran = json.loads(out).get("runner", {}).get("runner", "?")
            fit = f"E({k}, **kw).fit(X)"
            if method == "ac":  # one clustering of each view
                fit = f"h = X.shape[1] // 2; E({k}, **kw).fit(X[:, :h]); E({k}, **kw).fit(X[:, h:])"
            code = f"import numpy as np; {PEERS[method]}; X = np.load({str(npy)!r}); {fit}"
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
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
