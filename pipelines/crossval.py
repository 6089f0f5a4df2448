"""The cross-validation sweep flow: a store, a method, a parameter grid, k folds.

Each (fold, parameters) cell is a mapped Prefect task that calls
:func:`infoclust_dask.crossval.run_cell`; finished cells are kept as JSON
under ``<storage>/crossval/cells/`` keyed by a hash of the store, method,
parameters, fold definition and seed, so a re-run (after a crash, or with a
larger grid) computes only what is missing. Cells that fail (e.g. a dask
worker lost mid-pass) are retried twice.

Every dask pass of every cell goes to one scheduler, chosen by the engine
(``scheduler=`` parameter: ``"local"`` starts a LocalCluster on 127.0.0.1,
``tcp://HOST:8786`` uses an existing one, ``None`` reads
``DASK_SCHEDULER_ADDRESS`` and otherwise lets the store's size decide:
this process when it fits the in-process budget, else ``"local"``). The cells run as
threads of the flow process (Prefect's ThreadPoolTaskRunner) and submit
their passes to that scheduler; we do not use prefect-dask's DaskTaskRunner,
whose task code would run *on* the dask workers: each worker would start its
own temporary Prefect API when there is no server (measured: ~15 s per
worker), and a task that itself submits passes would occupy a worker slot
while waiting on them. The drivers of our estimators hold only small
statistics, so the flow process is the right place for them.

    python -m infoclust_pipelines.crossval STORE --method dc --grid sigma=0.5,1,2 --grid n_clusters=2,5,10 --folds 10
    infoclust crossval STORE ...           (the same)
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from . import _env  # noqa: F401  (Prefect offline defaults before importing prefect)
from ._env import default_scheduler

# isort: split
from prefect import get_run_logger, task  # noqa: E402
from prefect.task_runners import ThreadPoolTaskRunner  # noqa: E402

from ._checked import Location, checked_flow  # noqa: E402

__all__ = ["crossval_flow", "main"]

DEFAULT_GRID = {"n_clusters": [2, 5, 10]}


@task(name="plan-sweep")
def plan_sweep(store: str, method: str, grid: dict, n_folds: int, fold_kind: str, seed: int) -> list[dict]:
    from infoclust_dask.crossval import plan

    return plan(store, method, grid, n_folds, fold_kind, seed)


@task(name="cv-cell", retries=2, retry_delay_seconds=2, task_run_name="cv-cell-{key}")
def cv_cell(key: str, params: dict, fold: int, store: str, method: str, n_folds: int, fold_kind: str,
            seed: int, scheduler: str | None, cache_dir: str, position: str = "") -> dict:
    """Fit and score one (fold, parameters) cell; save its result atomically."""
    from infoclust_dask.crossval import CellCache, run_cell

    result = run_cell(store, method, params, fold, n_folds, fold_kind, seed, scheduler)
    CellCache(cache_dir).save(key, result)
    get_run_logger().info("cell %s %s fold %d: score %.6g (%.1f s)", position, params, fold, result["score"],
                          result["seconds"])
    return {"key": key, **result}


@task(name="summarize-sweep")
def summarize_sweep(results: list[dict], method: str, params: list[str], run_dir: str, store: str) -> dict:
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    from infoclust_dask.crossval import summarize, table_markdown, write_results
    from infoclust_dask.plotting import plot_tradeoff, plot_validation_curve
    from infoclust_dask.runs import run_path

    from ._artifacts import publish_plot

    rows, best = summarize(results)
    run = run_path(run_dir)
    write_results(run, results, rows, best, params)
    plots = [str(plot_validation_curve(rows, params, run / "validation.png",
                                       title=f"{method} on {Path(store).name}: held-out score"))]
    if method == "dc" and "reg_strength" in params and len({r["reg_strength"] for r in rows}) > 1:
        plots.append(str(plot_tradeoff(rows, run / "tradeoff.png")))
    md = table_markdown(rows, params)
    best_params = {p: best[p] for p in params}
    create_table_artifact(
        table=[{k: (round(v, 6) if isinstance(v, float) else v) for k, v in r.items()} for r in rows],
        key=f"crossval-{method}", description=f"Held-out scores of {method} on {store} (mean over folds)")
    create_markdown_artifact(
        markdown=f"# {method} sweep on `{store}`\n\nBest: `{best_params}` "
                 f"(mean held-out score {best['score_mean']:.6g})\n\n{md}\n\nRun folder: `{run}`\n",
        key=f"crossval-{method}-report", description="cross-validation summary")
    (run / "report.md").write_text(f"# {method} sweep on `{store}`\n\nBest: `{best_params}`\n\n{md}\n")
    for plot in plots:
        publish_plot(plot, key=f"crossval-{method}-{Path(plot).stem}", title=f"{method}: {Path(plot).stem}")
    return {"best": best_params, "best_score": best["score_mean"], "table": md, "plots": plots}


# (prefect's ThreadPoolTaskRunner is generic: its constructor's type does not match the decorator's hint)
@checked_flow(name="infoclust-crossval", log_prints=True, task_runner=ThreadPoolTaskRunner(max_workers=4))
def crossval_flow(store: Location, method: str = "dc", grid: dict | None = None, n_folds: int = 10,
                  fold_kind: str = "ranges", seed: int = 0, scheduler: Location | None = None,
                  storage: Location | None = None) -> dict:
    """Cross-validate ``method`` over ``grid`` on ``store``; resume finished cells.

    Returns a dict with the run folder, the best parameters, the Markdown
    table, and the keys of the cells computed and reused in this run.
    """
    from infoclust_dask.crossval import CellCache
    from infoclust_dask.runs import new_run_dir, run_path, storage_root

    if grid is not None and not grid:
        raise ValueError("grid={} names no parameter to sweep; give e.g. grid={'sigma': [0.5, 1.0], "
                         "'n_clusters': [5, 10]}, or leave grid out for the default grid.")
    t0 = time.perf_counter()
    log = get_run_logger()
    grid = dict(DEFAULT_GRID) if grid is None else grid
    root = run_path(storage, "storage root") if storage else storage_root()
    scheduler = default_scheduler(scheduler)
    cache = CellCache(root / "crossval" / "cells")
    cells = plan_sweep(store, method, grid, n_folds, fold_kind, seed)
    done: dict[str, Any] = {c["key"]: cache.load(c["key"]) for c in cells}
    todo = [c for c in cells if done[c["key"]] is None]
    log.info("%d cells: %d finished earlier, %d to compute on %s", len(cells), len(cells) - len(todo), len(todo),
             scheduler)
    if todo:
        futures = cv_cell.map(
            [c["key"] for c in todo], [c["params"] for c in todo], [c["fold"] for c in todo],
            store=store, method=method, n_folds=n_folds, fold_kind=fold_kind, seed=seed, scheduler=scheduler,
            cache_dir=str(cache.root), position=[f"{i + 1}/{len(todo)}" for i in range(len(todo))])
        for c, res in zip(todo, futures.result(), strict=True):
            done[c["key"]] = res
    results = [done[c["key"]] for c in cells]
    run = new_run_dir(f"crossval-{method}", root=root)
    params = sorted(grid)
    summary = summarize_sweep(results, method, params, str(run), store)
    from prefect.runtime import flow_run

    out = {"run_dir": str(run), "flow_run_id": str(flow_run.id), **summary, "computed": [c["key"] for c in todo],
           "reused": len(cells) - len(todo), "cells": len(cells), "seconds": round(time.perf_counter() - t0, 1)}
    (run / "flow.json").write_text(json.dumps(out, indent=1, default=str))
    print(f"run folder: {run}")
    print(f"best parameters: {summary['best']} (held-out score {summary['best_score']:.6g})")
    print(summary["table"])
    return out


def build_parser():
    from infoclust_dask.crossval import add_arguments

    p = argparse.ArgumentParser(prog="python -m infoclust_pipelines.crossval",
                                description="Cross-validation sweep (Prefect flow; resumes finished cells).")
    return add_arguments(p)


def run_from_args(a) -> dict:
    from infoclust_dask.crossval import parse_grid, plan

    grid = parse_grid(a.grid) or None
    if a.concurrency < 1:
        raise ValueError(f"--concurrency must be >= 1; got {a.concurrency}.")
    plan(a.store, a.method, grid or DEFAULT_GRID, a.folds, a.fold_kind, a.seed)  # fail before Prefect starts
    f = crossval_flow.with_options(task_runner=ThreadPoolTaskRunner(max_workers=a.concurrency))
    return f(store=a.store, method=a.method, grid=grid, n_folds=a.folds, fold_kind=a.fold_kind, seed=a.seed,
             scheduler=a.scheduler, storage=a.storage)


def main(argv=None):
    run_from_args(build_parser().parse_args(argv))


if __name__ == "__main__":
    main()
