"""The `infoclust` command: ingest validation, fit, run folders."""

import json
import os
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from infoclust_dask import open_dataset
from infoclust_dask.cli import main
from infoclust_dask.runs import load_model


def _csv(tmp_path, text, name="d.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_ingest_csv_with_header_and_label(tmp_path, capsys):
    src = _csv(tmp_path, "a,b,cls\n1,2,x\n3,4,y\n5,6,x\n")
    assert main(["ingest", str(src), str(tmp_path / "s.zarr"), "--label-column", "cls"]) == 0
    ds = open_dataset(tmp_path / "s.zarr")
    np.testing.assert_array_equal(ds["x"].values, [[1, 2], [3, 4], [5, 6]])
    np.testing.assert_array_equal(ds["label"].values, [0, 1, 0])
    assert ds.attrs["class_names"] == ["x", "y"]


def test_ingest_npy_and_bundled(tmp_path):
    x = np.random.default_rng(0).normal(size=(50, 3))
    np.save(tmp_path / "x.npy", x)
    assert main(["ingest", str(tmp_path / "x.npy"), str(tmp_path / "n.zarr")]) == 0
    np.testing.assert_array_equal(open_dataset(tmp_path / "n.zarr")["x"].values, x)
    assert main(["ingest", "wine", str(tmp_path / "w.zarr"), "--standardize"]) == 0
    ds = open_dataset(tmp_path / "w.zarr")
    assert ds["x"].shape == (178, 13) and ds.attrs["provenance"]["source"] == "bundled:wine"
    np.testing.assert_allclose(ds["x"].values.mean(axis=0), 0, atol=1e-10)


@pytest.mark.parametrize(
    "text, extra, match",
    [
        ("a,b\n1,2\n3,oops\n", [], r"line 3, column 2 \('b'\): 'oops' is not a number"),
        ("1,2\n3,4,5\n", [], r"line 2 has 3 fields, expected 2: the file is ragged"),
        ("1,2\nnan,4\n", [], r"1 row\(s\) .* contain NaN or inf \(first at rows \[1\].*--drop-nonfinite"),
        ("a,b\n1,2\n", ["--label-column", "c"], r"no column named 'c'"),
    ],
)
def test_ingest_rejections_name_row_column_and_fix(tmp_path, capsys, text, extra, match):
    src = _csv(tmp_path, text)
    assert main(["ingest", str(src), str(tmp_path / "s.zarr"), *extra]) == 2
    import re

    assert re.search(match, capsys.readouterr().err), match
    assert not (tmp_path / "s.zarr").exists()
    assert [p for p in os.listdir(tmp_path) if p.startswith(".")] == []


def test_ingest_drop_nonfinite(tmp_path):
    src = _csv(tmp_path, "1,2\nnan,4\n5,6\n")
    assert main(["ingest", str(src), str(tmp_path / "s.zarr"), "--drop-nonfinite"]) == 0
    np.testing.assert_array_equal(open_dataset(tmp_path / "s.zarr")["x"].values, [[1, 2], [5, 6]])


def test_ingest_refuses_existing_destination(tmp_path, capsys):
    src = _csv(tmp_path, "1,2\n3,4\n")
    dest = tmp_path / "s.zarr"
    assert main(["ingest", str(src), str(dest)]) == 0
    src2 = _csv(tmp_path, "9,9\n", name="e.csv")
    assert main(["ingest", str(src2), str(dest)]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert open_dataset(dest)["x"].shape == (2, 2)
    assert main(["ingest", str(src2), str(dest), "--overwrite"]) == 0
    assert open_dataset(dest)["x"].shape == (1, 2)


def test_fit_kmeans_writes_run_folder(tmp_path, capsys, blobs):
    X, _, _ = blobs
    np.save(tmp_path / "b.npy", X)
    store = tmp_path / "b.zarr"
    assert main(["ingest", str(tmp_path / "b.npy"), str(store)]) == 0
    capsys.readouterr()
    assert main(["fit", "kmeans", str(store), "-k", "4", "--scheduler", "threads",
                 "--storage", str(tmp_path / "st")]) == 0
    out, err = capsys.readouterr()
    assert "iteration" in err  # progress, one line per pass, on stderr (stdout is for results)
    run = Path(json.loads(out)["run_dir"])
    summary = json.loads((run / "summary.json").read_text())
    assert summary["n_clusters"] == 4 and sum(summary["cluster_sizes"]) == len(X)
    model = load_model(run / "model.json")
    d2 = ((X[:, None] - model.cluster_centers_[None]) ** 2).sum(-1).min(1)
    np.testing.assert_allclose(summary["inertia"], d2.sum(), rtol=1e-10)
    assert not list(run.glob("*.pkl"))


def test_fit_on_a_cluster_pass_by_pass_reports_from_the_held_rows(tmp_path, capsys, blobs, monkeypatch,
                                                                   local_cluster_client):
    """On a LocalCluster, pass by pass (no whole fit on a worker): the
    workers hold the store's rows, the summary says so, and its sizes and
    inertia come from the labels gathered once (a DataArray's dask array)."""
    from infoclust_dask.engine.cluster_runner import Distributed

    monkeypatch.setattr(Distributed, "loop_budget", lambda self: 0)
    X, _, _ = blobs
    np.save(tmp_path / "b.npy", X)
    store = tmp_path / "b.zarr"
    assert main(["ingest", str(tmp_path / "b.npy"), str(store)]) == 0
    capsys.readouterr()
    assert main(["fit", "kmeans", str(store), "-k", "4", "--scheduler", "local", "-q",
                 "--storage", str(tmp_path / "st")]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["runner"]["runner"].startswith("distributed") and "whole_fit_on" not in summary["runner"]
    assert "held in the workers' memory" in summary["runner"]["data"]
    assert sum(summary["cluster_sizes"]) == len(X)
    model = load_model(Path(summary["run_dir"]) / "model.json")
    lab = ((X[:, None] - model.cluster_centers_[None]) ** 2).sum(-1).argmin(1)
    assert summary["cluster_sizes"] == np.bincount(lab, minlength=4).tolist()


def test_fit_missing_store_is_a_clear_error(tmp_path, capsys):
    assert main(["fit", "kmeans", str(tmp_path / "none.zarr"), "--scheduler", "sync"]) == 2
    assert "No dataset store at" in capsys.readouterr().err


def test_help_lists_commands(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for cmd in ("ingest", "fit", "info", "demo"):
        assert cmd in out


def test_version_and_every_option_has_a_help_line(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"infoclust {version('infoclust_dask')}"

    from infoclust_dask.registry import METHODS

    def undocumented(argv):
        with pytest.raises(SystemExit):
            main([*argv, "--help"])
        lines = capsys.readouterr().out.split("options:")[1].splitlines()
        bare = []
        for i, line in enumerate(lines):
            if re.match(r"^  -", line):
                same = re.search(r"\S\s{2,}\S", line.strip())
                below = i + 1 < len(lines) and re.match(r"^ {10,}\S", lines[i + 1])
                if not (same or below) and not line.strip().startswith("-h, --help"):
                    bare.append(line.strip())
        return bare

    commands = [["ingest"], ["info"], ["verify"], ["predict"], ["crossval"], ["demo"]] + \
        [["fit", m] for m in METHODS]
    assert {" ".join(c): undocumented(c) for c in commands} == {" ".join(c): [] for c in commands}


def test_info_and_fit_softkmeans(tmp_path, capsys):
    x = np.random.default_rng(0).normal(0, 2.0, size=(3000, 1))
    np.save(tmp_path / "x.npy", x)
    store = tmp_path / "x.zarr"
    assert main(["ingest", str(tmp_path / "x.npy"), str(store), "--chunks", "1000"]) == 0
    capsys.readouterr()
    assert main(["info", str(store), "--text"]) == 0
    text = capsys.readouterr().out
    assert "samples   3,000" in text and "features  1" in text and "3 chunk(s) of 1,000 rows" in text
    for argv in (["info", str(store)], ["info", str(store), "--json"]):  # JSON by default, as every command
        assert main(argv) == 0
        info = json.loads(capsys.readouterr().out)
        assert info["variables"]["x"]["shape"] == [3000, 1] and info["attrs"]["schema_version"] == 1
        assert "\n".join(info["description"]) + "\n" == text
    assert main(["fit", "softkmeans", str(store), "-k", "2", "--beta-min", "0.05", "--beta-max", "1",
                 "--n-betas", "30", "--scheduler", "sync", "--storage", str(tmp_path / "st")]) == 0
    out = capsys.readouterr().out
    summary = json.loads(out[out.index("{"): out.rindex("}") + 1])
    (beta, n), = summary["critical_betas"]  # one split, near 1/var = 0.25
    assert n == 2 and abs(beta * x.var() - 1) < 0.15


def test_ingest_help_lists_every_bundled_dataset(capsys):
    from infoclust_dask.cli import BUNDLED_NAMES
    from infoclust_dask.datasets import BUNDLED

    assert BUNDLED_NAMES == tuple(BUNDLED)
    with pytest.raises(SystemExit):
        main(["ingest", "--help"])
    out = capsys.readouterr().out
    assert all(name in out for name in BUNDLED)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_fit_dc_on_a_labelled_store(tmp_path, capsys):
    assert main(["ingest", "wine", str(tmp_path / "w.zarr"), "--standardize"]) == 0
    capsys.readouterr()
    assert main(["fit", "dc", str(tmp_path / "w.zarr"), "-k", "3", "--sigma", "1.5", "--max-iter", "20",
                 "--scheduler", "sync", "--storage", str(tmp_path / "st")]) == 0
    out, err = capsys.readouterr()
    assert "log posterior (10)" in err  # progress per evaluation, on stderr
    summary = json.loads(out[out.index("{\n"): out.rindex("}") + 1])
    assert summary["sigma"] == 1.5 and np.asarray(summary["contingency"]).sum() == 178
    x = np.zeros((5, 2))
    np.save(tmp_path / "nolab.npy", x)
    assert main(["ingest", str(tmp_path / "nolab.npy"), str(tmp_path / "n.zarr")]) == 0
    assert main(["fit", "dc", str(tmp_path / "n.zarr"), "-k", "2", "--scheduler", "sync"]) == 2
    assert "has no 'label' variable" in capsys.readouterr().err


def test_fit_ac_on_a_paired_store(tmp_path, capsys):
    from infoclust_dask import write_dataset
    from infoclust_dask.datasets import make_paired_dependency

    X, Y, _, _, _ = make_paired_dependency(600, n_latent=3, random_state=0)
    store = write_dataset(tmp_path / "p.zarr", X, y=Y)
    rc = main(["fit", "ac", str(store), "-k", "3", "--sigma", "0.3", "--scheduler", "threads",
               "--storage", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    summary = json.loads(out[out.index("{\n"):out.rindex("}") + 1])
    assert summary["mutual_information"] > 0.3 and len(summary["most_over_represented"]) == 3
    model = load_model(next((tmp_path / "runs").glob("*-ac-*")) / "model.json")
    assert model.predict_x(X).shape == (600,)
    write_dataset(tmp_path / "x.zarr", X)
    assert main(["fit", "ac", str(tmp_path / "x.zarr"), "--scheduler", "threads"]) == 2
    assert "needs a second, paired view" in capsys.readouterr().err


def test_fit_smic_on_a_labelled_store(tmp_path, capsys):
    from infoclust_dask import write_dataset
    from infoclust_dask.datasets import make_smic_toy

    X, y = make_smic_toy("double_spirals", random_state=0)
    store = write_dataset(tmp_path / "s.zarr", X, label=y)
    # t=4 (the largest LSMI) splits one spiral into two components: it is left out of the choice, which takes
    # the best t whose graph has at most 2 components (no warning about uncovered rows any more)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        rc = main(["fit", "smic", str(store), "-k", "2", "--scheduler", "sync", "--storage", str(tmp_path)])
    out, err = capsys.readouterr()
    assert rc == 0, out + err
    assert "[SMIC] t=10: 1 connected component(s), LSMI=" in err  # one progress line per candidate, on stderr
    summary = json.loads(out[out.index("{\n"):out.rindex("}") + 1])
    assert summary["agreement_with_label"]["ari"] == 1.0 and sorted(map(int, summary["lsmi"])) == list(range(1, 11))
    model = load_model(next((tmp_path / "runs").glob("*-smic-*")) / "model.json")
    assert 4 in model.t_excluded_ and summary["t"] not in model.t_excluded_
    eligible = {int(t): v for t, v in summary["lsmi"].items() if int(t) not in model.t_excluded_}
    assert summary["t"] == max(eligible, key=eligible.get)  # the largest LSMI among the eligible
    run = next((tmp_path / "runs").glob("*-smic-*"))
    from sklearn.metrics import adjusted_rand_score

    assert adjusted_rand_score(y, np.load(run / "labels.npy")) == 1.0
    model = load_model(run / "model.json")
    assert model.t_ == summary["t"] and sorted(model.lsmi_) == list(range(1, 11))  # int keys again
    # fitted on a store, the saved model predicts (its training rows are read from the store it names)
    from infoclust_dask import SMIC

    ref = SMIC(2, random_state=0, scheduler="sync").fit(store)
    np.testing.assert_array_equal(model.set_params(scheduler="sync").predict(X[:3]), ref.predict(X[:3]))
    assert main(["fit", "smic", str(store), "-k", "2", "--t", "250", "--scheduler", "sync"]) == 2
    assert "needs at least t + 1 = 251 samples" in capsys.readouterr().err


def test_fit_cmbc_finds_the_next_clustering(tmp_path, capsys):
    """infoclust fit cmbc: binary store with the known clustering as its label;
    the summary reports NMI against every integer label column of the store."""
    from infoclust_dask import write_dataset
    from infoclust_dask.datasets import make_cmbc_data

    Y, Q, _ = make_cmbc_data(1000, p_noise=0.1, random_state=3)
    store = write_dataset(tmp_path / "bin.zarr", Y.astype("float32"), label=Q[:, 0])
    rc = main(["fit", "cmbc", str(store), "-k", "2", "--scheduler", "sync", "--storage", str(tmp_path)])
    assert rc == 0
    out = capsys.readouterr().out
    summary = json.loads(out[out.index("{"): out.rindex("}") + 1])
    assert summary["nmi_vs_label"] < 0.02 and summary["gamma"] == 0.995 and summary["n_patterns"] == 2
    assert Path(summary["plots"]["label"]).stat().st_size > 0  # contingency heatmap in the run folder
    rc = main(["fit", "cmbc", str(store), "-k", "2", "--known", "none", "--scheduler", "sync", "--storage",
               str(tmp_path)])
    out = capsys.readouterr().out
    em = json.loads(out[out.index("{"): out.rindex("}") + 1])
    assert rc == 0 and em["n_patterns"] == 1 and em["nmi_vs_label"] > 0.8  # the EM baseline finds Q1
    assert main(["fit", "cmbc", str(store), "--known", "topic", "--scheduler", "sync"]) == 2
    assert "the store has no 'topic' variable; it holds ['label', 'x']" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["fit", "cmbc", str(store), "--gamma", "x", "--scheduler", "sync"])
    assert "--gamma: invalid 'default' or float value: 'x'" in capsys.readouterr().err


def test_ingest_binary_csv_then_fit_cmbc(tmp_path, capsys):
    """A 0/1 CSV with a label column becomes a uint8 store; CMBC reads it;
    a value other than 0/1 is refused by message and nothing is written."""
    from infoclust_dask.datasets import make_cmbc_data

    Y, Q, _ = make_cmbc_data(600, p_noise=0.1, random_state=4)
    src = tmp_path / "docs.csv"
    header = ",".join([f"t{j}" for j in range(Y.shape[1])] + ["known"])
    rows = [",".join(map(str, list(r) + [int(q)])) for r, q in zip(Y, Q[:, 0], strict=True)]
    src.write_text(header + "\n" + "\n".join(rows) + "\n")
    store = tmp_path / "docs.zarr"
    assert main(["ingest", str(src), str(store), "--label-column", "known", "--binary"]) == 0
    ds = open_dataset(store)
    assert ds["x"].dtype == np.uint8 and np.array_equal(ds["x"].values, Y)
    capsys.readouterr()
    assert main(["fit", "cmbc", str(store), "-k", "2", "--scheduler", "sync", "--storage", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert json.loads(out[out.index("{"): out.rindex("}") + 1])["nmi_vs_label"] < 0.05
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n0,1\n2,0\n")
    assert main(["ingest", str(bad), str(tmp_path / "bad.zarr"), "--binary"]) == 2
    assert "hold values other than 0 and 1 ([2.0])" in capsys.readouterr().err
    assert not (tmp_path / "bad.zarr").exists()
    assert main(["ingest", str(bad), str(tmp_path / "b2.zarr"), "--binary", "--standardize"]) == 2


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # tiny max_iter on purpose
def test_saved_dc_and_cmbc_models_predict_and_score_after_loading(tmp_path):
    from infoclust_dask import CMBC, DiscriminativeClustering
    from infoclust_dask.datasets import make_cmbc_data
    from infoclust_dask.runs import save_model

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2))
    y = np.where(X[:, 0] > 0, "right", "left")
    dc = DiscriminativeClustering(2, sigma=0.5, max_iter=5, scheduler="sync").fit(X, y)
    back = load_model(save_model(dc, tmp_path / "dc.json"))
    assert list(back.classes_) == ["left", "right"] and back.score(X, y) == pytest.approx(dc.score(X, y))
    Y, Q, _ = make_cmbc_data(400, random_state=0)
    cm = CMBC(2, scheduler="sync", max_iter=10).fit(Y, known=Q[:, 0])
    back = load_model(save_model(cm, tmp_path / "cm.json"))
    np.testing.assert_array_equal(back.predict(Y), cm.labels_)
    assert back.gamma_ == cm.gamma_ and back.temperatures_ == cm.temperatures_


def test_ingest_sparse_npz_with_known_clusterings_then_fit_cmbc_known_two(tmp_path, capsys):
    """A scipy sparse .npz with a .npz of label columns becomes a uint8 store
    equal to the dense matrix, written chunk by chunk (each chunk densified on
    its own); every label column is a store variable; `fit cmbc --known
    label,q2` conditions on both and reports NMI against all four."""
    import scipy.sparse as sp

    from infoclust_dask.datasets import make_cmbc_data

    Y, Q, _ = make_cmbc_data(900, p_noise=0.1, random_state=5)
    src = tmp_path / "docs.npz"
    sp.save_npz(src, sp.csr_matrix(Y))
    lab = tmp_path / "known.npz"
    np.savez(lab, q1=Q[:, 0], q2=Q[:, 1], q3=Q[:, 2], q4=Q[:, 3])
    store = tmp_path / "docs.zarr"
    assert main(["ingest", str(src), str(store), "--binary", "--labels", str(lab), "--chunks", "200"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["sparse_nnz"] == int(Y.sum()) and rep["labels"] == ["q1", "q2", "q3", "q4"]
    ds = open_dataset(store)
    assert ds["x"].dtype == np.uint8 and ds["x"].chunks[0] == (200, 200, 200, 200, 100)
    np.testing.assert_array_equal(ds["x"].values, Y)
    for j, name in enumerate(("q1", "q2", "q3", "q4")):  # named columns keep their names
        np.testing.assert_array_equal(ds[name].values, Q[:, j])
    assert ds.attrs["label_columns"] == ["q1", "q2", "q3", "q4"] and "label" not in ds
    np.testing.assert_allclose(ds.attrs["feature_mean"], Y.mean(axis=0), atol=1e-12)
    np.testing.assert_allclose(ds.attrs["feature_std"], Y.std(axis=0), atol=1e-12)
    assert main(["fit", "cmbc", str(store), "-k", "2", "--scheduler", "sync", "--storage", str(tmp_path)]) == 2
    assert "the store has no 'label' variable; it holds ['q1', 'q2', 'q3', 'q4', 'x']" in capsys.readouterr().err
    assert main(["fit", "cmbc", str(store), "-k", "2", "--known", "q1,q2", "--scheduler", "sync",
                 "--storage", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    summary = json.loads(out[out.index("{"): out.rindex("}") + 1])
    assert {"nmi_vs_q1", "nmi_vs_q2", "nmi_vs_q3", "nmi_vs_q4"} <= set(summary)
    assert summary["nmi_vs_q1"] < 0.05 and summary["nmi_vs_q2"] < 0.05
    assert max(summary["nmi_vs_q3"], summary["nmi_vs_q4"]) > 0.5  # the next clustering, not the known two


def test_ingest_several_label_columns_and_bad_label_files(tmp_path, capsys):
    src = tmp_path / "t.csv"
    src.write_text("a,b,cls,topic\n1,2,x,sports\n3,4,y,arts\n5,6,x,arts\n")
    store = tmp_path / "t.zarr"
    assert main(["ingest", str(src), str(store), "--label-column", "cls", "--label-column", "topic"]) == 0
    ds = open_dataset(store)
    assert ds["x"].shape == (3, 2) and ds["label"].values.tolist() == [0, 1, 0]
    assert ds["topic"].values.tolist() == [1, 0, 0] and ds.attrs["label_class_names"] == {"topic": ["arts", "sports"]}
    capsys.readouterr()
    dense = tmp_path / "d.npz"
    np.savez(dense, x=np.ones((3, 2)))
    for labels, message in (
        (dict(q=np.zeros(4, int)), r"'q' has shape \(4,\) but the data have 3 rows"),
        (dict(q=np.array([0.5, 1.0, 2.0])), r"'q' has dtype float64; labels must be integer"),
        (dict(x=np.zeros(3, int)), r"'x' cannot name a store variable"),
    ):
        np.savez(tmp_path / "l.npz", **labels)
        assert main(["ingest", str(dense), str(tmp_path / "bad.zarr"), "--labels", str(tmp_path / "l.npz"),
                     "--overwrite"]) == 2
        assert re.search(message, capsys.readouterr().err)
        assert not (tmp_path / "bad.zarr").exists()
    np.savez(tmp_path / "fl.npz", x=np.ones((3, 2)), label=np.array([0.5, 1.0, 2.0]))
    assert main(["ingest", str(tmp_path / "fl.npz"), str(tmp_path / "bad.zarr")]) == 2
    assert "array 'label' has dtype float64" in capsys.readouterr().err


def test_fit_write_labels_then_predict_a_saved_model_block_by_block(tmp_path, capsys):
    """`fit --write-labels` adds the clusters to the store (atomic, no
    overwrite without --overwrite); `predict MODEL STORE` applies the saved
    model block by block and gives the same labels."""
    from infoclust_dask import write_dataset
    from infoclust_dask.io.store import verify_store

    rng = np.random.default_rng(0)
    X = rng.normal(size=(5000, 3)) + 4 * rng.integers(0, 3, 5000)[:, None]
    store = write_dataset(tmp_path / "s.zarr", X, chunks=1000)
    argv = ["fit", "kmeans", str(store), "-k", "3", "--scheduler", "sync", "--storage", str(tmp_path),
            "--write-labels", "clusters"]
    assert main(argv) == 0
    run = Path(json.loads(capsys.readouterr().out)["run_dir"])
    ds = open_dataset(store)
    stored = ds["clusters"].values
    model = load_model(run / "model.json")
    model.set_params(scheduler="sync")
    np.testing.assert_array_equal(stored, model.predict(X))
    assert np.bincount(stored).min() > 1000
    assert ds.attrs["label_columns"] == ["clusters"] and ds["clusters"].chunks[0][0] == 1000
    assert verify_store(store)["problems"] == []
    assert main(argv) == 2
    assert "already has a variable 'clusters'" in capsys.readouterr().err
    out = tmp_path / "p.npy"
    assert main(["predict", str(run / "model.json"), str(store), "--out", str(out), "--write-labels", "again",
                 "--scheduler", "sync"]) == 0
    report = json.loads(capsys.readouterr().out)
    np.testing.assert_array_equal(np.load(out), stored)
    np.testing.assert_array_equal(open_dataset(store)["again"].values, stored)
    assert sum(report["cluster_sizes"]) == 5000
    capsys.readouterr()  # neither --out nor --write-labels (issue 54): the labels in the JSON on stdout
    assert main(["predict", str(run / "model.json"), str(store), "--scheduler", "sync"]) == 0
    np.testing.assert_array_equal(json.loads(capsys.readouterr().out)["labels"], stored)
    assert main(["predict", str(run / "model.json"), str(store), "--write-labels", "x", "--overwrite"]) == 2
    assert "'x' cannot name a label variable" in capsys.readouterr().err


def test_feature_names_travel_from_the_csv_header_to_the_model_and_back(tmp_path):
    from infoclust_dask import KMeans
    from infoclust_dask.runs import save_model

    src = tmp_path / "t.csv"
    rng = np.random.default_rng(0)
    rows = "\n".join(f"{a:.3f},{b:.3f},{'x' if a > 0 else 'y'},{c:.3f}" for a, b, c in rng.normal(size=(60, 3)))
    src.write_text("height,weight,cls,age\n" + rows + "\n")
    store = tmp_path / "t.zarr"
    assert main(["ingest", str(src), str(store), "--label-column", "cls"]) == 0
    assert open_dataset(store)["x"].attrs["feature_names"] == ["height", "weight", "age"]
    m = KMeans(2, n_init=1, random_state=0, scheduler="sync").fit(store)
    assert m.feature_names_in_.tolist() == ["height", "weight", "age"] and m.feature_names_in_.dtype == object
    back = load_model(save_model(m, tmp_path / "m.json"))
    assert back.feature_names_in_.tolist() == ["height", "weight", "age"] and back.feature_names_in_.dtype == object
    m.fit(np.ones((10, 3)) * np.arange(10)[:, None])  # refitted on unnamed data: no names left
    assert not hasattr(m, "feature_names_in_")
    assert main(["ingest", str(store), str(tmp_path / "std.zarr"), "--standardize"]) == 0  # kept store -> store
    assert open_dataset(tmp_path / "std.zarr")["x"].attrs["feature_names"] == ["height", "weight", "age"]


def test_warnings_of_a_cli_run_are_one_line_without_a_source_line(tmp_path):
    import subprocess
    import sys

    import numpy as np

    from infoclust_dask import write_dataset

    rng = np.random.default_rng(0)
    store = write_dataset(tmp_path / "w.zarr", rng.normal(size=(300, 2)), label=rng.integers(0, 2, 300))
    r = subprocess.run([sys.executable, "-m", "infoclust_dask.cli", "fit", "dc", str(store), "-k", "2", "--max-iter",
                        "2", "--scheduler", "sync", "--storage", str(tmp_path / "st")], capture_output=True, text=True,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if "ConvergenceWarning" in ln]
    assert lines == ["infoclust: warning: ConvergenceWarning: DiscriminativeClustering: conjugate gradients stopped "
                     "at max_iter=2; increase max_iter for a tighter optimum."], r.stderr
    assert ".py:" not in r.stderr


def test_predict_reads_rows_from_files_and_prints_labels(tmp_path, capsys):
    """Issue 54: `infoclust predict MODEL rows.npy` failed with "not a zarr group"; without --out or
    --write-labels it refused. Now .npy/.npz/.csv/.parquet rows are read as ingest reads them and the labels
    come back in the JSON on stdout (or in --out); rows for a model of a standardized store are refused."""
    from infoclust_dask.datasets import load_bundled

    X = np.asarray(load_bundled("wine")[0], dtype=np.float64)
    assert main(["ingest", "wine", str(tmp_path / "w.zarr")]) == 0
    assert main(["fit", "kmeans", str(tmp_path / "w.zarr"), "-k", "3", "-q", "--storage", str(tmp_path / "st")]) == 0
    run = next((tmp_path / "st" / "runs").iterdir())
    expected = load_model(run / "model.json").predict(X[:7]).tolist()
    np.save(tmp_path / "rows.npy", X[:7])
    np.savetxt(tmp_path / "rows.csv", X[:7], delimiter=",")
    for rows in ("rows.npy", "rows.csv"):
        capsys.readouterr()
        assert main(["predict", str(run), str(tmp_path / rows)]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["labels"] == expected and out["n_samples"] == 7 and out["written"] == []
    assert main(["predict", str(run), str(tmp_path / "rows.npy"), "--out", str(tmp_path / "l.npy")]) == 0
    assert np.load(tmp_path / "l.npy").tolist() == expected
    assert main(["predict", str(run), str(tmp_path / "rows.npy"), "--write-labels", "k"]) == 2
    assert "is a file" in capsys.readouterr().err
    assert main(["ingest", "wine", str(tmp_path / "s.zarr"), "--standardize"]) == 0
    assert main(["fit", "kmeans", str(tmp_path / "s.zarr"), "-k", "3", "-q", "--storage", str(tmp_path / "st2")]) == 0
    capsys.readouterr()
    assert main(["predict", str(next((tmp_path / "st2" / "runs").iterdir())), str(tmp_path / "rows.npy")]) == 2
    assert "which ingest standardized" in capsys.readouterr().err


def test_a_fit_that_refuses_its_data_leaves_no_run_folder(tmp_path, capsys):
    """Issue 54: a failed `fit cmbc` on non-binary data left a run folder behind."""
    assert main(["ingest", "wine", str(tmp_path / "w.zarr")]) == 0
    assert main(["fit", "cmbc", str(tmp_path / "w.zarr"), "-k", "2", "-q", "--storage", str(tmp_path / "st")]) == 2
    assert "must be binary" in capsys.readouterr().err
    assert not (tmp_path / "st" / "runs").exists() or not list((tmp_path / "st" / "runs").iterdir())


@pytest.mark.parametrize("argv, usage", [
    (["fit", "kmeans", "s.zarr", "--bogus", "3"], "usage: infoclust fit kmeans"),
    (["verify", "s.zarr", "--y"], "usage: infoclust verify"),
    (["crossval", "s.zarr", "--nope"], "usage: infoclust crossval"),
    (["fit", "dc", "s.zarr", "-k", "abc"], "usage: infoclust fit dc"),
])
def test_argument_errors_show_the_sub_commands_usage(capsys, argv, usage):
    """Issue 54: an unknown option printed the top-level usage; every
    argument error shows the usage of the sub-command it was given to."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith(usage), err
    assert "{ingest,info" not in err
