"""The update flow: new source files -> append -> warm-started refit ->
comparison with the previous model -> a new model version.

Each run appends the files of ``inbox`` (a glob pattern) not appended
before (:class:`infoclust_dask.update.ModelVersions` remembers them by
name, size and modification time), refits ``method`` on the whole store
starting from the latest version (``fit(..., init=previous)``: fewer passes
than a cold fit), compares the two versions (ARI of their labels on a
fixed sample of rows, the drift of every prototype, each one's objective on
today's rows; :func:`infoclust_dask.update.compare_models`) and keeps the
new model as the next version, every older one still loadable. The report
is a markdown artifact and a PNG of the drift across versions. The
deployment ``nightly-update`` (deploy/prefect.yaml) runs it every night.

    python -m infoclust_pipelines.update STORE --inbox 'incoming/*.csv' --model storage/models/mine --method kmeans -k 8
"""

from __future__ import annotations

import argparse
import glob
import json
import time
from pathlib import Path

from . import _env  # noqa: F401  (Prefect offline defaults before importing prefect)

# isort: split
from prefect import get_run_logger, task  # noqa: E402

from ._checked import Location, checked_flow  # noqa: E402

__all__ = ["update_flow", "main"]

#: methods with a warm start and prototypes to compare
UPDATABLE = ("kmeans", "softkmeans", "dc")


@task(name="update-append")
def append_task(store: str, files: list[str], label_column: str | None, scheduler: str | None) -> list[dict]:
    from infoclust_dask.io.ingest import ingest

    out = []
    for f in files:
        _, report = ingest(f, store, append=True, label_column=label_column, scheduler=scheduler or "threads")
        out.append({"file": f, **report})
    return out


@task(name="update-refit")
def refit_task(store: str, model: str, method: str, params: dict, scheduler: str | None, sample_size: int,
               seed: int, appended: list[dict]) -> dict:
    from infoclust_dask.io.store import open_dataset
    from infoclust_dask.registry import get_method
    from infoclust_dask.update import ModelVersions, compare_models, fixed_sample

    versions = ModelVersions(model)
    ds = open_dataset(store)
    m = get_method(method)
    est = m.estimator_class()(**{"random_state": seed, **params, "scheduler": scheduler or "threads"})
    previous = versions.load() if versions.latest() is not None else None
    t0 = time.perf_counter()
    if previous is not None:
        m.fit(est, ds, init=previous)
    else:
        m.fit(est, ds)
    seconds = time.perf_counter() - t0
    rows = int(ds.sizes["sample"])
    first = versions.info(versions.versions()[0]) if versions.versions() else None
    sample_from = int(first["sample_from_rows"]) if first else rows
    info = {"store": store, "rows": rows, "method": method, "params": params, "fit_seconds": round(seconds, 3),
            "n_iter": int(getattr(est, "n_iter_", -1)), "warm_started": previous is not None,
            "appended": [{"file": a["file"], "rows": a["rows_added"]} for a in appended],
            "sample_from_rows": sample_from}
    if previous is not None:
        idx = fixed_sample(sample_from, sample_size, seed)
        names = m.aux_names()
        aux = ds[names[0]] if names else None
        info["comparison"] = compare_models(previous, est, ds["x"].data[idx], X=ds["x"], aux=aux)
        info["previous_version"] = versions.latest()
    info["version"] = versions.save(est, info)
    return info


@task(name="update-report")
def report_task(model: str, info: dict) -> str:
    from prefect.artifacts import create_markdown_artifact

    from infoclust_dask.plotting import plot_drift
    from infoclust_dask.update import ModelVersions

    from ._artifacts import publish_plot

    versions = ModelVersions(model)
    folder = versions.path(info["version"])
    history = []
    for v in versions.versions():
        c = versions.info(v).get("comparison")
        if c:
            history.append({"version": v, "max_relative_drift": c["max_relative_drift"], "ari": c["ari"]})
    lines = [f"# Update of `{info['store']}`: model version {info['version']}", "",
             f"- rows: {info['rows']} ({sum(a['rows'] for a in info['appended'])} appended from "
             f"{len(info['appended'])} new file(s))",
             f"- {info['method']} {'warm-started from version ' + str(info.get('previous_version')) if info['warm_started'] else 'cold fit (first version)'}: "
             f"{info['n_iter']} iterations, {info['fit_seconds']} s"]
    c = info.get("comparison")
    if c:
        lines += [f"- ARI to the previous version on {c['sample_rows']} fixed rows: {c['ari']:.4f}",
                  f"- objective (held-out score on today's rows, higher is better): previous model "
                  f"{c['objective_before']:.6g}, new model {c['objective_after']:.6g}",
                  "", "| prototype | drift | drift / nearest-prototype distance |", "|---|---|---|"]
        lines += [f"| {j} | {d:.4g} | {r:.4g} |" for j, (d, r) in enumerate(zip(c["drift"], c["relative_drift"],
                                                                                strict=True))]
    md = "\n".join(lines) + "\n"
    (folder / "report.md").write_text(md)
    create_markdown_artifact(markdown=md, key="update-report", description="what the nightly update changed")
    if history:
        png = plot_drift(history, folder / "drift.png", title=f"{info['method']} on {Path(info['store']).name}")
        publish_plot(png, key="update-drift", title="drift between model versions")
    get_run_logger().info("model version %s in %s", info["version"], folder)
    return str(folder)


@checked_flow(name="infoclust-update", log_prints=True)
def update_flow(store: Location, model: Location, inbox: Location | None = None, method: str = "kmeans",
                params: dict | None = None, label_column: str | None = None, sample_size: int = 2000,
                seed: int = 0, scheduler: Location | None = None) -> dict:
    """Append the new files of ``inbox`` to ``store``, refit ``method`` warm
    from the latest version in the model folder ``model``, compare, keep the
    new version; returns the version's facts."""
    from infoclust_dask.update import ModelVersions

    if method not in UPDATABLE:
        raise ValueError(f"method must be one of {UPDATABLE} (a warm start and prototypes to compare); got "
                         f"{method!r}.")
    if isinstance(sample_size, bool) or not isinstance(sample_size, int) or sample_size < 1:
        raise ValueError(f"sample_size={sample_size!r}: the old and new versions are compared on a fixed sample of "
                         "that many rows; give a positive integer (default 2000).")
    params = dict(params or {"n_clusters": 8})
    if inbox:
        folder = Path(inbox).parent
        while glob.has_magic(str(folder)):  # the folder part before the first wildcard
            folder = folder.parent
        if not folder.is_dir():
            raise FileNotFoundError(f"The inbox '{inbox}' names the folder '{folder}', which does not exist: no new "
                                    "file can arrive there. Create it, or fix the pattern (e.g. "
                                    "'storage/inbox/mine/*.csv').")
    files = sorted(glob.glob(inbox)) if inbox else []
    new = ModelVersions(model).new_files(files)
    appended = append_task(store, new, label_column, scheduler) if new else []
    if new:
        ModelVersions(model).record_appended(new, [a["rows_added"] for a in appended])
    info = refit_task(store, model, method, params, scheduler, sample_size, seed, appended)
    info["report_dir"] = report_task(model, info)
    print(json.dumps({k: info[k] for k in ("version", "rows", "n_iter", "warm_started")}))
    return info


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m infoclust_pipelines.update", description=update_flow.__doc__)
    p.add_argument("store")
    p.add_argument("--model", required=True, help="model folder (versions are kept in it)")
    p.add_argument("--inbox", default=None, help="glob pattern of new source files, e.g. 'incoming/*.csv'")
    p.add_argument("--method", default="kmeans", choices=UPDATABLE)
    p.add_argument("-k", "--n-clusters", type=int, default=8)
    p.add_argument("--label-column", default=None)
    p.add_argument("--scheduler", default=None)
    a = p.parse_args(argv)
    update_flow(store=a.store, model=a.model, inbox=a.inbox, method=a.method, params={"n_clusters": a.n_clusters},
                label_column=a.label_column, scheduler=a.scheduler)


if __name__ == "__main__":
    main()
