"""The demo flow runs end to end (Prefect without a server) on a small dataset."""

import json
from pathlib import Path

import pytest


@pytest.mark.slow  # 51 s: run by `make test-slow` in .ci/run (keeps `make test` under 8 minutes)
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # the paper's 29-iteration cap
def test_demo_flow_writes_report_and_plots(prefect_harness, tmp_path):
    from infoclust_pipelines.demo import demo_flow

    run = Path(demo_flow(dataset="wine", n_clusters=3, scheduler="threads", storage=str(tmp_path), n_betas=10,
                         n_boot=2, n_pairs=1000, smic_rows=0))  # the 250 000-row SMIC: make demo
    assert run.parent == tmp_path / "runs"
    report = (run / "report.md").read_text()
    assert "K-means" in report and "ARI" in report and "predicted first split" in report
    assert "Discriminative clustering" in report
    for png in ("kmeans.png", "annealing.png"):
        assert (run / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["kmeans"]["ari_vs_classes"] > 0.8  # standardized wine: 3 well-separated cultivars
    assert sum(map(sum, summary["dc"]["contingency"])) == 178  # every wine sample in the DC table
    # one pass over class-sorted wine in 20 blocks (measured 1.27 x; shuffled rows: tests/cluster/test_kmeans.py)
    assert 0.95 < summary["dc"]["streamed"]["inertia_ratio"] < 1.5 and "streamed through `partial_fit`" in report
    assert (tmp_path / "datasets" / "wine-demo.zarr").exists()
    cv = summary["crossval"]
    assert cv["cells"] == 9 and cv["reused"] == 0 and cv["best"]["sigma"] in (0.75, 1.5, 3.0)
    assert summary["dc"]["sigma"] == cv["best"]["sigma"] and "Cross-validation" in report
    width = summary["dc"]["default_width"]  # the default width, and the same fit in other units (issue 54)
    assert width["other_units_sigma"] == pytest.approx(width["sigma"], rel=1e-9) and "**the same choice**" in report
    assert len(width["candidates"]) == 9 and width["sigma"] in [c[0] for c in width["candidates"]]
    assert (Path(cv["run_dir"]) / "validation.png").exists()
    ac = summary["ac"]
    assert ac["ac_mi"] > 0.5 > 0.05 > ac["kmeans_mi"] and "Associative clustering" in report
    assert len(ac["most_over"]) == 3 and (Path(ac["run_dir"]) / "heatmap.png").exists()
    smic = summary["smic"]
    assert [r["set"] for r in smic["toys"]["rows"]] == ["four_blobs", "circle_gaussian", "double_spirals", "high_low"]
    assert smic["toys"]["rows"][0]["symmetric"] == 1.0 and "SMIC" in report
    assert smic["store"]["ari"] > smic["store"]["kmeans_ari"]  # digits: SMIC beats K-means
    assert sorted(map(int, smic["store"]["lsmi"])) == list(range(1, 11))
    assert (run / "smic-fig4.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Block kernels: compiled (numba" in report
    auto = summary["annealing"]["auto"]  # the adaptive path on the named scheduler (make demo: the LocalCluster,
    # where it runs as one task on a worker - tests/cluster/test_whole_fit.py)
    assert auto["runner"]["runner"].startswith("in-process") and auto["n_passes"] > 0 and auto["observed_splits"]
    assert "the path placed from the data" in report
    lazy = summary["annealing"]["lazy_kmeans"]  # the store's lazy rows, placed by the runner (make demo: the
    # LocalCluster, whose workers hold them - tests/engine/test_runners.py)
    assert lazy["n_iter"] > 0 and "of lazy input read into this process once" in lazy["data"]
    assert "K-means on the store's lazy rows" in report
    # a second run reuses the store instead of overwriting it, and every finished cell
    run2 = Path(demo_flow(dataset="wine", n_clusters=3, scheduler="threads", storage=str(tmp_path), n_betas=6,
                          n_boot=2, n_pairs=1000, smic=False))
    assert run2 != run and (run2 / "report.md").exists()
    assert json.loads((run2 / "summary.json").read_text())["crossval"]["reused"] == 9
