"""The bootstrap reliability flow for associative clustering.

A reference fit on the store's paired views ``x`` and ``y``, then
``n_boot`` replicates as *mapped tasks* (each refits on a resample of the
pairs at the reference's chosen widths and matches its clusters to the reference;
:func:`infoclust_dask.reliability.bootstrap_replicate`), run concurrently
with their dask passes on the cluster, then a summary: for each cross
cluster, how often it recurs as surprising. Writes ``reliability.csv``,
``summary.json`` and ``heatmap.png`` (the table annotated with the
reliabilities) to a run folder and a table artifact to Prefect.

    python -m infoclust_pipelines.bootstrap STORE -K 4 -L 4 --n-boot 20
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from . import _env  # noqa: F401  (Prefect offline defaults before importing prefect)
from ._env import default_scheduler

# isort: split
from prefect import get_run_logger, task  # noqa: E402
from prefect.task_runners import ThreadPoolTaskRunner  # noqa: E402

from infoclust_dask.runs import run_path  # noqa: E402

from ._checked import Location, checked_flow  # noqa: E402

__all__ = ["bootstrap_flow", "main"]


@task(name="ac-reference-fit")
def reference_fit(store: str, params: dict, seed: int, scheduler: str | None, run_dir: str) -> dict:
    from infoclust_dask import AssociativeClustering, engine
    from infoclust_dask.io.store import open_dataset
    from infoclust_dask.reliability import replicate_params
    from infoclust_dask.runs import save_model

    ds = open_dataset(store)
    if "y" not in ds:
        raise ValueError(f"The store '{store}' has no second view 'y'; associative clustering needs paired data.")
    t0 = time.perf_counter()
    with engine.installed(scheduler, data=ds["x"]):  # placed once, by the store's size
        # hundreds of passes: the fit keeps small data in worker memory (engine.prepare)
        ac = AssociativeClustering(**params, random_state=seed).fit(ds["x"], ds["y"])
    save_model(ac, run_path(run_dir) / "ac-reference-model.json")
    return {"mx": ac.cluster_centers_x_.tolist(), "my": ac.cluster_centers_y_.tolist(),
            "table": ac.contingency_.tolist(), "sigma": list(ac.sigma_),
            "params": replicate_params(ac),  # sigma fixed at the reference's choice
            "seconds": round(time.perf_counter() - t0, 2)}


@task(name="bootstrap-replicate", retries=2, retry_delay_seconds=2, task_run_name="bootstrap-replicate-{seed}")
def replicate(store: str, params: dict, reference: dict, seed: int, alpha: float, scheduler: str | None) -> dict:
    import numpy as np

    from infoclust_dask.reliability import bootstrap_replicate

    ref = (np.asarray(reference["mx"]), np.asarray(reference["my"]))
    return bootstrap_replicate(store, store, params, ref, seed, alpha=alpha, scheduler=scheduler)


@task(name="bootstrap-summary")
def summarize(reference: dict, replicates: list[dict], alpha: float, run_dir: str, store: str, top: int) -> dict:
    import numpy as np
    from prefect.artifacts import create_table_artifact

    from infoclust_dask.plotting import plot_contingency_heatmap
    from infoclust_dask.reliability import summarize_replicates
    from infoclust_dask.runs import write_csv

    from ._artifacts import publish_plot

    cells, rel = summarize_replicates(reference["table"], replicates, alpha=alpha)
    run = run_path(run_dir)
    cols = ["x_cluster", "y_cluster", "count", "expected", "log2_ratio", "mi_share", "p_over", "p_under",
            "surprising", "reliability"]
    write_csv(run / "reliability.csv", cells, cols)
    K, L = np.asarray(reference["table"]).shape
    direction = [["-"] * L for _ in range(K)]
    for c in cells:
        direction[c["x_cluster"]][c["y_cluster"]] = c["surprising"]
    plot_contingency_heatmap(reference["table"], rel.tolist(), run / "heatmap.png", surprising=direction,
                             title=f"{Path(store).name}: count, reliability ({len(replicates)} replicates)")
    over = [c for c in cells if c["surprising"] == "over"][:top]
    under = sorted([c for c in cells if c["surprising"] == "under"], key=lambda c: c["p_under"])[:top]
    create_table_artifact(table=[{k: (round(v, 6) if isinstance(v, float) else v) for k, v in c.items() if k in cols}
                                 for c in cells],
                          key="ac-bootstrap-reliability", description=f"cross clusters of {store}")
    publish_plot(run / "heatmap.png", key="ac-bootstrap-heatmap",
                 title=f"{Path(store).name}: cross clusters, count and reliability")
    summary = {"store": store, "n_boot": len(replicates), "alpha": alpha, "reference": reference,
               "cells": cells, "most_over": over, "most_under": under}
    (run / "summary.json").write_text(json.dumps(summary, indent=1, default=float))
    return {"most_over": over, "most_under": under, "heatmap": str(run / "heatmap.png")}


def _line(c):
    return (f"  x{c['x_cluster']} y{c['y_cluster']}: {c['count']} pairs vs {c['expected']:.1f} expected "
            f"(p_over {c['p_over']:.2g}, p_under {c['p_under']:.2g}), reliability {c['reliability']:.0%}")


# (prefect's ThreadPoolTaskRunner is generic: its constructor's type does not match the decorator's hint)
@checked_flow(name="infoclust-ac-bootstrap", log_prints=True, task_runner=ThreadPoolTaskRunner(max_workers=4))
def bootstrap_flow(store: Location, n_clusters: tuple[int, int] = (4, 4), n_boot: int = 20, alpha: float = 0.01,
                   params: dict | None = None, seed: int = 0, scheduler: Location | None = None,
                   storage: Location | None = None, top: int = 3) -> dict:
    """Associative clustering of the store's (x, y) with bootstrap reliability
    of its cross clusters. Returns the run folder and the most surprising cells."""
    import numpy as np

    from infoclust_dask.runs import new_run_dir, storage_root

    t0 = time.perf_counter()
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1; got {n_boot}.")
    scheduler = default_scheduler(scheduler)
    run = new_run_dir("ac-bootstrap", root=storage or storage_root())
    params = {**(params or {}), "n_clusters": list(n_clusters)}
    ref = reference_fit(store, params, seed, scheduler, str(run))
    seeds = [int(s) for s in np.random.default_rng(seed).integers(0, 2**31, n_boot)]
    from prefect import unmapped

    reps = replicate.map(unmapped(store), unmapped(ref["params"]), unmapped(ref), seeds, alpha=alpha,
                         scheduler=scheduler).result()
    out = summarize(ref, reps, alpha, str(run), store, top)
    get_run_logger().info("reference fit %.1f s; %d replicates", ref["seconds"], n_boot)
    print(f"run folder: {run}")
    print("most over-represented cross clusters:")
    for c in out["most_over"]:
        print(_line(c))
    print("most under-represented cross clusters:")
    for c in out["most_under"]:
        print(_line(c))
    return {"run_dir": str(run), **out, "seconds": round(time.perf_counter() - t0, 1)}


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m infoclust_pipelines.bootstrap", description=(bootstrap_flow.__doc__ or "").split("\n")[0])
    p.add_argument("store", help="store with paired views x and y")
    p.add_argument("-K", type=int, default=4, help="x clusters")
    p.add_argument("-L", type=int, default=4, help="y clusters")
    p.add_argument("--n-boot", type=int, default=20)
    p.add_argument("--alpha", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--scheduler", default=None)
    p.add_argument("--storage", default=None)
    a = p.parse_args(argv)
    bootstrap_flow(store=a.store, n_clusters=(a.K, a.L), n_boot=a.n_boot, alpha=a.alpha, seed=a.seed,
                   scheduler=a.scheduler, storage=a.storage)


if __name__ == "__main__":
    main()
