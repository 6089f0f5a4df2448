"""The demo's report: ``report.md`` and ``summary.json`` of its run folder,
one section per method with results (orchestration and text only: every
number comes from the demo's tasks)."""

from __future__ import annotations

import json

from prefect import task

from infoclust_dask.runs import run_path

__all__ = ["report", "DEMO_STEPS", "methods_table"]

#: where the demo shows each registered method (infoclust_dask.registry.METHODS)
DEMO_STEPS = {
    "kmeans": "fit-kmeans: K-means on the dataset, against its classes",
    "softkmeans": "anneal: soft K-means over a beta schedule (the pitchfork splits)",
    "dc": "crossval (sigma by held-out log posterior) + fit-dc against K-means, MoG and MDA2",
    "mog": "fit-dc: the MoG baseline's partition scored by DC's log posterior (9)",
    "mda2": "fit-dc: the MDA2 baseline's partition scored by DC's log posterior (9)",
    "ac": "bootstrap reliability + ac-vs-kmeans on a planted dependency",
    "smic": "smic-toys (Fig. 4 sets) + smic-store (digits) against K-means",
    "cmbc": "cmbc-next-clustering: the second clustering of a generated binary set given the first, against EM",
}


def methods_table() -> list[str]:
    """The registry's methods with the demo step that shows each (Markdown lines)."""
    from infoclust_dask.registry import METHODS

    rows = ["| method | estimator | what it does | shown by |", "|---|---|---|---|"]
    for name, m in METHODS.items():
        rows.append(f"| `{name}` | `{m.estimator_name}` | {m.help} | {DEMO_STEPS.get(name, 'not shown by the demo')} |")
    return rows


def _kernels_line() -> str:
    from importlib.metadata import version

    from infoclust_dask.kernels._cache import can_cache

    cache = "cached on disk" if can_cache() else "compiled in each process: no writable cache folder"
    return f"Block kernels: compiled (numba {version('numba')}; {cache})."


def _integrity_line(v: dict) -> str:
    """One report line from :func:`infoclust_dask.io.store.verify_store`."""
    if v["chunks"] == 0:
        return f"Integrity: not verifiable ({'; '.join(v['problems'])})."
    state = "all bytes as written" if not v["problems"] else f"{len(v['problems'])} damaged: {v['problems'][:2]}"
    return (f"Integrity: {v['chunks']} chunks ({v['bytes'] / 1e6:.1f} MB) checked against the store's manifest "
            f"(sizes and CRC-32, `infoclust verify`): {state}. Every read of the fits above also checked each "
            "chunk against its own key's entry (size and CRC-32C trailer): a moved or swapped chunk stops a fit.")


def _table(rows) -> list[str]:
    return ["      " + " ".join(f"{v:5d}" for v in row) for row in rows]


def _kmeans_lines(km: dict, cv: dict | None) -> list[str]:
    lines = ["## K-means",
             f"- inertia {km['inertia']:.6g} after {km['n_iter']} Lloyd iterations ({km['seconds']} s)",
             f"- cluster sizes {km['sizes']}"]
    if "paths" in km:  # chosen by measurement where the fit ran; every path gives the same bits (issue 63)
        lines.append(f"- Lloyd's paths: {km['paths'] or 'no choice to make (tiny data: numpy forms; below 8 centres: the exact loops)'}")
    if "ari_vs_classes" in km:
        lines += [f"- agreement with the known classes: ARI {km['ari_vs_classes']:.3f}, "
                  f"NMI {km['nmi_vs_classes']:.3f}",
                  "- contingency table (rows clusters, columns classes):", "", *_table(km["contingency"])]
    return lines


def _annealing_lines(da_: dict, cv: dict | None) -> list[str]:
    return ["## Deterministic annealing (soft K-means, MacKay §20.5)",
            f"- predicted first split at beta = 1/sigma_1^2 = {da_['predicted_first_split']:.4g}",
            f"- observed splits (beta, number of distinct centres after): {da_['observed_splits']}",
            f"- {da_['n_passes']} passes over the data in {da_['seconds']} s"] + _auto_lines(da_.get("auto")) + \
        _lazy_lines(da_.get("lazy_kmeans"))


def _lazy_lines(km: dict | None) -> list[str]:
    if not km:
        return []
    return [f"- K-means on the store's lazy rows on {km['runner']}, pass by pass ({km['n_iter']} Lloyd "
            f"iterations): {km['data']}"]


def _auto_lines(auto: dict | None) -> list[str]:
    if not auto:
        return []
    where = auto["runner"].get("whole_fit_on")
    return [f"- the path placed from the data (`beta_schedule=\"auto\"`): {auto['betas']} betas, "
            f"{auto['n_passes']} passes, {auto['seconds']} s, splits {auto['observed_splits']}",
            f"- it ran on {auto['runner']['runner']}"
            + (f", as one task on worker {where} (its data fit one worker)" if where else "")]


def _dc_lines(dc: dict, cv: dict | None) -> list[str]:
    lines = []
    if cv is not None:
        lines += ["## Cross-validation of the DC width sigma (cross-validation flow)",
                  f"- {cv['cells']} cells ({cv['reused']} reused from earlier runs) in {cv['seconds']} s; "
                  f"run folder `{cv['run_dir']}`",
                  f"- best: {cv['best']} (mean held-out log posterior (9) per fold {cv['best_score']:.2f})", "",
                  cv["table"], ""]
    return lines + [
        "## Discriminative clustering (Kaski et al. 2005)",
        f"- sigma {dc['sigma']:.4g} ({'chosen by cross-validation' if cv is not None else 'given'}); "
        f"{dc['evaluations']} objective evaluations ({dc['seconds']} s)",
        f"- log posterior (9) of the partition: DC {dc['log_posterior']:.2f} vs K-means "
        f"{dc['kmeans_log_posterior']:.2f}, MoG {dc['mog_log_posterior']:.2f}, MDA2 {dc['mda2_log_posterior']:.2f} "
        "(higher is better; same number of clusters)",
        *([f"- K-means streamed through `partial_fit`, one pass over the rows in store order in {dc['streamed']['blocks']} blocks (a class-sorted set is a stream's hard case: the first block seeds every centre): "
           f"inertia {dc['streamed']['inertia_ratio']:.4f} x the full fit's; MoG's BIC {dc['mog_bic']:.1f}"]
          if "streamed" in dc else []),
        *(_default_width_lines(dc["default_width"]) if "default_width" in dc else []),
        *(_same_answer_lines(dc["same_answer"]) if "same_answer" in dc else []),
        "- contingency table (rows clusters, columns classes):", "", *_table(dc["contingency"])]


def _same_answer_lines(s: dict) -> list[str]:
    same = s["max_gap"] == 0.0 and s["same_labels"]
    return [f"- the same model wherever it runs: the fit on {s['where']} and again on {s['here']}: "
            + ("identical prototypes and labels, bit for bit" if same else
               f"prototypes {s['max_gap']:.3g} apart, labels {'equal' if s['same_labels'] else 'DIFFERENT'} "
               "(the same-answer contract is broken: please report it)")]


def _default_width_lines(w: dict) -> list[str]:
    same = abs(w["other_units_sigma"] - w["sigma"]) <= 1e-9 * w["sigma"]
    return [f"- the default width (`sigma=\"auto\"`: held-out posterior (9) over 3 hashed splits, the one-standard-"
            f"error rule) chose sigma {w['sigma']:.4g} (log posterior (9) {w['log_posterior']:.2f}); the same fit on "
            f"X x 1000 + 5 chose {w['other_units_sigma']:.4g} x 1000: "
            + ("**the same choice**" if same else "**another choice**"),
            "", "| candidate sigma | mean held-out (9) per row | standard error | CG moved |", "|---|---|---|---|",
            *[f"| {s:.4g} | {m:.5f} | {e:.5f} | {'yes' if mv else 'no'} |" for s, m, e, mv in w["candidates"]], ""]


def _ac_lines(ac: dict, cv: dict | None) -> list[str]:
    def cell(c):
        return (f"- x{c['x_cluster']} y{c['y_cluster']}: {c['count']} pairs vs {c['expected']:.1f} expected, "
                f"reliability {c['reliability']:.0%}")

    return ["## Associative clustering with bootstrap reliability (Sinkkonen et al.)",
            f"- paired store `{ac['store']}` (planted dependency in the low-variance features); "
            f"run folder `{ac['run_dir']}` with `heatmap.png`",
            f"- mutual information between the two partitions: AC {ac['ac_mi']:.3f} nats, K-means per view "
            f"{ac['kmeans_mi']:.3f}, planted (oracle) {ac['oracle_mi']:.3f}",
            f"- most over-represented cross clusters ({ac['n_boot']} bootstrap replicates):",
            *[cell(c) for c in ac["most_over"]], "- most under-represented:", *[cell(c) for c in ac["most_under"]]]


def _cmbc_lines(cmbc: dict, cv: dict | None) -> list[str]:
    return ["## CMBC: the next clustering (Gondek, Vaithyanathan & Garg)",
            f"- generated binary store `{cmbc['store']}` ({cmbc['n']} rows, 18 features, four planted 2-way "
            "clusterings Q1..Q4, p_noise 0.1); Q1 is given as the known clustering", "",
            "| method | NMI(C,Q1) | NMI(C,Q2) | NMI(C,Q3) | NMI(C,Q4) | passes | seconds |",
            "|---|---|---|---|---|---|---|",
            *[f"| {k} | " + " | ".join(f"{v:.3f}" for v in cmbc[k]["nmi"]) + f" | {cmbc[k]['passes']} | "
              f"{cmbc[k]['seconds']} |" for k in ("CMBC", "EM")]]


def _smic_lines(smic: dict, cv: dict | None) -> list[str]:
    toys, real = smic["toys"], smic["store"]
    lines = [
        "## SMIC with LSMI model selection (Sugiyama et al.)",
        "- toy sets of §4.1 (n=200, one draw), ARI against the true classes, t chosen by LSMI "
        "(`smic-fig4.png`: clusters and LSMI curves; the paper's Fig. 4 has 1, 1, 1, 0.773):", "",
        "| set | SMIC kernel (7) (t) | SMIC symmetric (t) | K-means |", "|---|---|---|---|",
        *[f"| {r['set']} | {r['none']:.3f} ({r['t_none']}) | {r['symmetric']:.3f} ({r['t_symmetric']}) | "
          f"{r['kmeans']:.3f} |" for r in toys["rows"]],
        "",
        f"- digits store `{real['store']}` ({real['n']} samples, 10 classes), {real.get('runner', '?')}: "
        f"SMIC ARI {real['ari']:.3f} (t={real['t']} by LSMI, {real['seconds']} s for the whole model "
        f"selection: {real['timings']}) vs K-means ARI {real['kmeans_ari']:.3f}",
        f"- LSMI per t: {real['lsmi']}",
    ]
    big = smic.get("large")
    if big and "skipped" in big:
        lines += [f"- {big['n']:,} generated rows: skipped, {big['skipped']}"]
    elif big:
        lines += [
            f"- {big['n']:,} generated rows (8 blobs 9 sigma apart, d = 16, t = 10), {big.get('runner', '?')}: "
            f"neighbour graph {big['knn']} (recall {big['recall']:.3f} against exact search on 2000 rows, "
            f"{big['components']} connected components), kernel and eigensolver products "
            f"{'as row blocks (map-reduce products)' if big['on_workers'] else 'as one matrix in this process'}: "
            f"ARI {big['ari']:.3f} in {big['seconds']} s ({big['timings']})",
        ]
    return lines


def _generic_lines(name: str, result: dict) -> list[str]:
    """A method without a section of its own (e.g. one registered from outside the package): its facts."""
    return [f"## {name}", *[f"- {k}: {v}" for k, v in result.items()]]


#: the report's section of each method the demo runs, by registry name (a method the demo shows but has no
#: section for here gets :func:`_generic_lines`)
SECTIONS = {"kmeans": _kmeans_lines, "softkmeans": _annealing_lines, "dc": _dc_lines, "ac": _ac_lines,
            "cmbc": _cmbc_lines, "smic": _smic_lines}
#: the key of each method's results in the run's summary.json
SUMMARY_KEYS = {"softkmeans": "annealing"}


@task(name="plot-and-report")
def report(store: str, run_dir: str, dataset: str, results: dict, cv: dict | None = None) -> str:
    """The run's ``report.md`` and ``summary.json``: one section per method
    of the registry that has results (``results``: registry name -> the
    facts of its demo step, or None when the step did not run), in the
    registry's order, after the store's facts and the methods table."""
    import numpy as np

    from infoclust_dask import engine
    from infoclust_dask.io.store import open_dataset, verify_store
    from infoclust_dask.plotting import plot_clusters_2d
    from infoclust_dask.preprocess import principal_axes
    from infoclust_dask.registry import METHODS
    from infoclust_dask.runs import load_model

    run = run_path(run_dir)
    ds = open_dataset(store)
    mean, axes, var = principal_axes(ds["x"], ds.sizes["feature"], scheduler="threads")
    explained, axes = var[:2] / var.sum(), axes[:2]
    n = ds.sizes["sample"]
    take = np.sort(np.random.default_rng(0).choice(n, size=min(n, 5000), replace=False))
    xs = engine.compute(ds["x"].data[take], scheduler="threads")  # 5000 rows for the figure
    model = load_model(run / "kmeans-model.json")
    plot_clusters_2d((xs - mean) @ axes.T, model.predict(xs), (model.cluster_centers_ - mean) @ axes.T,
                     run / "kmeans.png", title=f"K-means, K={model.n_clusters}, on {dataset} (5000 rows shown)",
                     explained=explained)
    lines = [
        f"# infoclust demo: {dataset}",
        "",
        f"Store: `{store}` ({n} samples x {ds.sizes['feature']} features, standardized).",
        _integrity_line(verify_store(store)),
        _kernels_line(),
        "",
        "## Methods in this build (infoclust_dask.registry)",
        "",
        *methods_table(),
    ]
    for name in METHODS:
        result = results.get(name)
        if result is not None:
            section = SECTIONS.get(name)
            lines += ["", *(section(result, cv) if section else _generic_lines(name, result))]
    lines += ["", "Plots: `kmeans.png` (clusters on the first two principal components), "
              "`annealing.png` (centres along PC 1 against beta), `smic-fig4.png` (SMIC on the toy sets)."]
    (run / "report.md").write_text("\n".join(lines) + "\n")
    from ._artifacts import publish_plot

    for name, title in (("kmeans", f"K-means on {dataset} (first two principal components)"),
                        ("annealing", "Deterministic annealing: centres along PC 1 against beta"),
                        ("smic-fig4", "SMIC on the toy sets (Sugiyama et al. 2011, Fig. 4)")):
        publish_plot(run / f"{name}.png", key=f"demo-{name}", title=title)
    summary = {SUMMARY_KEYS.get(name, name): result for name, result in results.items()}
    (run / "summary.json").write_text(json.dumps({**summary, "crossval": cv}, indent=2, default=float))
    return str(run / "report.md")
