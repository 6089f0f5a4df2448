"""NN-descent against an earlier revision's, interleaved in one process.

The VM this project is measured on drifts by 10-25 % from one hour to the
next, so two versions of the graph builder are timed turn about in one
process on the same rows: this checkout's
``infoclust_dask.kernels._nn_descent.nn_descent`` and the one at ``--rev``
(its ``_nn_descent.py`` and ``_nn_candidates.py`` read with ``git show``
into a temporary folder, compiled without the disk cache). Prints each
turn's seconds, whether the two graphs are equal bit for bit, and the
medians.

    python benchmarks/nn_descent_ab.py --rev 89fac0f --n 1000000 --repeats 2
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def _old_modules(rev: str, folder: Path):
    """The revision's candidates and NN-descent modules, loaded from
    ``folder`` under their own names (absolute imports, no disk cache)."""
    def source(name):
        text = subprocess.run(["git", "show", f"{rev}:infoclust_dask/kernels/{name}.py"], cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout
        text = text.replace("CACHE = can_cache()", "CACHE = False")
        for mod in ("_cache", "_prefetch"):
            text = text.replace(f"from .{mod} import", f"from infoclust_dask.kernels.{mod} import")
        return text.replace("from ._nn_candidates import", "from ab_nn_candidates import")

    sys.path.insert(0, str(folder))
    for name in ("_nn_candidates", "_nn_descent"):
        (folder / f"ab{name}.py").write_text(source(name))
    spec = importlib.util.spec_from_file_location("ab_nn_descent", folder / "ab_nn_descent.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _start_of(module):
    """``build(x, width, seed)`` running only ``module``'s start, as its
    ``nn_descent`` would (the trees' count and leaf size), returning the
    lists' ids (equal ids: the same start)."""
    def build(x, width, seed=0):
        n = x.shape[0]
        trees = int(max(3, min(12, round(2.0 * np.log10(max(n, 2))))))
        out = module._start(x, width, trees, max(width, 10), seed, map, [range(module.ROW_PARTS)])
        return out[1]
    return build


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rev", required=True, help="the earlier revision (a commit or tag)")
    p.add_argument("--n", type=int, default=400_000)
    p.add_argument("--d", type=int, default=16)
    p.add_argument("--width", type=int, default=28, help="n_neighbors (28: SMIC's cells of 1e6 rows at t = 10)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--start-only", action="store_true",
                   help="time only the start (the random-projection trees and their leaves' pairs, `_start`)")
    a = p.parse_args()

    from infoclust_dask.kernels import _nn_descent as here

    with tempfile.TemporaryDirectory() as tmp:
        modules = {a.rev: _old_modules(a.rev, Path(tmp)), "here": here}
        builders = {k: (_start_of(m) if a.start_only else m.nn_descent) for k, m in modules.items()}
        x = np.random.default_rng(0).standard_normal((a.n, a.d)).astype(np.float32)
        for build in builders.values():  # compiled before any turn is timed
            build(x[:3000], a.width)
        spent: dict[str, list[float]] = {k: [] for k in builders}
        what = "NN-descent's start" if a.start_only else "NN-descent"
        print(f"{what}, {a.n} Gaussian rows x {a.d}, width {a.width}, one thread: {a.rev} against this checkout")
        for turn in range(a.repeats):
            graphs = {}
            for name, build in builders.items():
                t0 = time.perf_counter()
                graphs[name] = build(x, a.width, seed=1)
                spent[name].append(time.perf_counter() - t0)
            same = np.array_equal(graphs[a.rev], graphs["here"])
            print(f"turn {turn + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in spent.items())
                  + f"; the same graph: {same}", flush=True)
        print("medians: " + ", ".join(f"{k} {np.median(v):.2f} s" for k, v in spent.items()))


if __name__ == "__main__":
    from _bench import print_machine

    print_machine()
    main()
