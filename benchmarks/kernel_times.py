"""The compiled block kernels, one thread, best of 7: this checkout against
another one (e.g. the commit before a kernel change), in one run.

Each side runs in its own process (its own numba cache folder), twice,
alternating, and the best of both runs is kept; the last column is this
checkout / the other one. Rows: a soft K-means pass over Letter (20 000 x
16, 26 centres), soft K-means, DC's counts and gradient and Lloyd's exact
loop over 1e6 x 16 rows (K = C = 8).

    git worktree add /tmp/before COMMIT
    python benchmarks/kernel_times.py --other /tmp/before
    python benchmarks/kernel_times.py          # this checkout only
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def measure():
    import numpy as np
    from _bench import best as best_median

    from infoclust_dask.datasets import load_bundled
    from infoclust_dask.kernels import _compiled as C

    def best(fn):
        fn()  # compile / warm
        return best_median(fn, 7)[0] * 1e3

    rng = np.random.default_rng(0)
    letter = np.ascontiguousarray(load_bundled("letter")[0], dtype=np.float64)
    c_letter = letter[rng.choice(len(letter), 26)]
    x64 = rng.normal(size=(1_000_000, 16))
    x32 = x64.astype(np.float32)
    c = x64[:8] * 0.5
    cls = rng.integers(0, 8, len(x64))
    L = rng.normal(size=(8, 8))
    rows = {
        "soft K-means, Letter 20000 x 16, K = 26, float64": lambda: C.soft_kmeans(letter, centers=c_letter, beta=0.1),
        "soft K-means, 1e6 x 16, K = 8, float64": lambda: C.soft_kmeans(x64, centers=c, beta=1 / 16),
        "soft K-means, 1e6 x 16, K = 8, float32": lambda: C.soft_kmeans(x32, centers=c, beta=1 / 16),
        "DC counts, 1e6 x 16, K = C = 8, float64": lambda: C.dc_counts(x64, cls, centers=c, sigma=4.0, n_classes=8),
        "DC gradient, 1e6 x 16, K = C = 8, float64": lambda: C.dc_grad(x64, cls, centers=c, sigma=4.0, L=L),
        "Lloyd step (exact loop), 1e6 x 16, k = 8, float64": lambda: C.lloyd_sums(x64, centers=c),
        "Lloyd step (exact loop), 1e6 x 16, k = 8, float32": lambda: C.lloyd_sums(x32, centers=c.astype(np.float32)),
    }
    return {name: best(fn) for name, fn in rows.items()}


def run_side(tree, cache):
    """The kernels of the checkout at ``tree``, timed in a fresh process that
    imports the package from there (first on its path, ahead of the working
    folder and the installed package; asserted)."""
    code = (
        "import sys, json\n"
        f"sys.path.insert(0, {str(tree)!r})\n"
        f"sys.path.insert(0, {str(HERE / 'benchmarks')!r})\n"
        "import infoclust_dask, kernel_times\n"
        f"assert infoclust_dask.__file__.startswith({str(tree)!r}), infoclust_dask.__file__\n"
        "print(json.dumps(kernel_times.measure()))\n"
    )
    env = {**os.environ, "NUMBA_CACHE_DIR": cache, "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--other", default=None, help="another checkout of the project (e.g. a git worktree)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="kernel-times-"))
    sides = {"this": HERE} if args.other is None else {"other": Path(args.other).resolve(), "this": HERE}
    best: dict = {s: {} for s in sides}
    for _ in range(2):
        for side, tree in sides.items():
            for name, ms in run_side(tree, str(tmp / side)).items():
                best[side][name] = min(ms, best[side].get(name, float("inf")))
    if args.other is None:
        print("| kernel | ms |\n|---|---|")
        for name, ms in best["this"].items():
            print(f"| {name} | {ms:.2f} |")
        return
    print("| kernel | other checkout ms | this checkout ms | this / other |\n|---|---|---|---|")
    for name, ms in best["this"].items():
        print(f"| {name} | {best['other'][name]:.2f} | {ms:.2f} | {ms / best['other'][name]:.2f} |")


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()  # where it ran (issue 63)
    main()
