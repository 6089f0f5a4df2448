"""Driver crash and resume: a fit journals its passes in the run folder
(infoclust_dask.journal); a fit resumed from it replays them and ends where
an uninterrupted fit ends."""

import json
import signal
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

from infoclust_dask import (
    CMBC,
    AssociativeClustering,
    DiscriminativeClustering,
    KMeans,
    SoftKMeans,
    journal,
    open_dataset,
    write_dataset,
)
from infoclust_dask.runs import load_model


def _cut(folder, keep):
    """Keep the journal's first ``keep`` passes (a driver killed there)."""
    journal.truncate(folder, keep)


class CountPasses:
    def __init__(self, monkeypatch):
        self.n = 0
        from infoclust_dask.engine import passes

        real = passes._map_reduce

        def counting(*a, **k):
            self.n += 1
            return real(*a, **k)

        monkeypatch.setattr(passes, "_map_reduce", counting)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("name", ["kmeans", "softkmeans", "dc", "ac", "cmbc"])
def test_resumed_fit_equals_uninterrupted_fit(name, tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 4)) + 3 * rng.integers(0, 4, 3000)[:, None]
    y = rng.integers(0, 3, 3000)
    from infoclust_dask.datasets import make_cmbc_data

    Yb, Q, _ = make_cmbc_data(2000, random_state=0)
    make, args, kw, attrs = {
        "kmeans": (lambda: KMeans(5, n_init=2, random_state=0, scheduler="sync"), (X,), {}, ["cluster_centers_"]),
        "softkmeans": (lambda: SoftKMeans(3, beta_schedule=[0.05, 0.2, 1.0], random_state=0, scheduler="sync"),
                       (X,), {}, ["cluster_centers_", "centers_path_"]),
        "dc": (lambda: DiscriminativeClustering(3, sigma=1.0, max_iter=20, random_state=0, scheduler="sync"),
               (X, y), {}, ["cluster_centers_"]),
        "ac": (lambda: AssociativeClustering((2, 2), sigma=(1.0, 1.0), n_init=1, anneal_steps=2, random_state=0,
                                             scheduler="sync"), (X, X[:, :2] + rng.normal(size=(3000, 2))), {},
               ["cluster_centers_x_", "cluster_centers_y_"]),
        "cmbc": (lambda: CMBC(2, random_state=0, scheduler="sync"), (Yb,), {"known": Q[:, 0]}, ["theta_"]),
    }[name]
    ref = make().fit(*args, **kw, checkpoint=tmp_path / "run")
    total = journal.recorded_passes(tmp_path / "run")
    assert total > 6
    _cut(tmp_path / "run", total // 2)  # as if the driver died half-way
    assert journal.recorded_passes(tmp_path / "run") == total // 2
    # ... while writing the next batch: a torn temporary (it sorts first) must not end the journal
    (tmp_path / "run" / "passes" / f".{total // 2:07d}.abcdef.tmp.npz").write_bytes(b"PK\x03\x04torn")
    count = CountPasses(monkeypatch)
    got = make().fit(*args, **kw, resume=tmp_path / "run")
    assert got.resumed_passes_ == total // 2
    assert count.n == total - total // 2  # the replayed passes did not touch the data
    for a in attrs:
        np.testing.assert_allclose(getattr(got, a), getattr(ref, a), rtol=0, atol=1e-10)


def test_resume_refuses_another_fit_and_a_missing_checkpoint(tmp_path):
    X = np.random.default_rng(0).normal(size=(500, 3))
    KMeans(3, n_init=1, random_state=0, scheduler="sync").fit(X, checkpoint=tmp_path / "run")
    with pytest.raises(ValueError, match=r"made by another fit \(params: .*'n_clusters': 3.*'n_clusters': 4"):
        KMeans(4, n_init=1, random_state=0, scheduler="sync").fit(X, resume=tmp_path / "run")
    with pytest.raises(ValueError, match=r"shape: checkpoint \[500, 3\], now \[400, 3\]"):
        KMeans(3, n_init=1, random_state=0, scheduler="sync").fit(X[:400], resume=tmp_path / "run")
    with pytest.raises(FileNotFoundError, match="nothing to resume"):
        KMeans(3, scheduler="sync").fit(X, resume=tmp_path / "elsewhere")
    with pytest.raises(FileExistsError, match="already holds a checkpoint"):
        KMeans(3, scheduler="sync").fit(X, checkpoint=tmp_path / "run")


# ~10-11 s each: a CLI fit killed with SIGKILL and resumed (make test-slow, run by .ci/run); make test keeps the
# in-process resume tests above
@pytest.mark.slow
@pytest.mark.parametrize("method,extra", [("kmeans", ["--n-init", "1", "--max-iter", "150", "--tol", "0"]),
                                          ("dc", ["--sigma", "2.0", "--max-iter", "80"])])
def test_killed_cli_fit_resumes_to_the_uninterrupted_result(method, extra, tmp_path):
    """kill -9 of `infoclust fit` mid-fit, then `--resume RUN_DIR`: the same
    centres as an uninterrupted fit (1e-10)."""
    rng = np.random.default_rng(1)
    n = 1_600_000 if method == "kmeans" else 600_000
    lab = rng.integers(0, 6, n)
    if method == "kmeans":
        # no cluster structure: Lloyd needs all its 150 iterations (~6 s here), so the
        # kill lands mid-fit however fast a pass is (clustered rows converged in 23, ~1 s)
        X = rng.uniform(size=(n, 6))
    else:
        X = rng.normal(size=(n, 6)) + 2.0 * lab[:, None] * (np.arange(6) % 2)
    store = write_dataset(tmp_path / "s.zarr", X, label=lab % 3, chunks=n // 8)
    storage = tmp_path / "storage"
    cmd = [sys.executable, "-m", "infoclust_dask.cli", "fit", method, str(store), "-k", "6", "--scheduler", "threads",
           "--storage", str(storage), *extra]
    err = open(tmp_path / "stderr.txt", "w")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
    deadline = time.monotonic() + 240
    run = None
    while time.monotonic() < deadline and p.poll() is None:
        runs = list((storage / "runs").glob(f"*-{method}-*")) if (storage / "runs").exists() else []
        if runs and (runs[0] / "passes").exists() and journal.recorded_passes(runs[0]) >= 8:
            run = runs[0]
            break
        time.sleep(0.05)
    err.close()
    assert run is not None and p.poll() is None, (
        f"the fit ended (rc {p.poll()}) before it could be killed: {(tmp_path / 'stderr.txt').read_text()[-2000:]}")
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert not (run / "model.json").exists()
    done = journal.recorded_passes(run)
    r = subprocess.run(cmd + ["--resume", str(run)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    replayed = json.loads(r.stdout)["resumed_passes"]  # stdout: the summary JSON only
    assert f"resumed: {replayed} passes replayed" in r.stderr
    assert replayed >= done - 1 >= 7
    got = load_model(run / "model.json")
    ds = open_dataset(store)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if method == "kmeans":
            ref = KMeans(6, n_init=1, max_iter=150, tol=0.0, random_state=0, scheduler="threads").fit(ds["x"])
        else:
            ref = DiscriminativeClustering(6, sigma=2.0, max_iter=80, random_state=0, scheduler="threads").fit(
                ds["x"], ds["label"])
    np.testing.assert_allclose(got.cluster_centers_, ref.cluster_centers_, rtol=0, atol=1e-10)
    assert json.loads((run / "summary.json").read_text())["method"] == method


def test_a_reader_beside_a_live_fit_leaves_its_batch_alone(tmp_path):
    """Counting a live fit's passes must not delete the batch it is writing
    (it did: the fit died renaming it); resuming removes a torn one."""
    X = np.random.default_rng(0).normal(size=(500, 3))
    KMeans(3, n_init=1, random_state=0, scheduler="sync").fit(X, checkpoint=tmp_path / "run")
    total = journal.recorded_passes(tmp_path / "run")
    live = tmp_path / "run" / "passes" / f".{total:07d}.abcdef.tmp.npz"
    live.write_bytes(b"PK\x03\x04being written")
    assert journal.recorded_passes(tmp_path / "run") == total  # skipped ...
    assert live.exists()  # ... and left in place
    journal.truncate(tmp_path / "run", total - 1)
    assert live.exists()
    KMeans(3, n_init=1, random_state=0, scheduler="sync").fit(X, resume=tmp_path / "run")
    assert not live.exists()  # the resuming process owns the journal: a torn batch goes


def _replay_all(folder, fingerprint, recorded):
    """Every recorded pass looked up again in order (a resumed fit's replay)."""
    j = journal.Journal(folder, fingerprint, resume=True)
    out = []
    for name, params, result in recorded:
        out.append(j.lookup(name, params))
        if out[-1] is None:  # a pass whose result was not stored runs again and is recorded in its place
            j.record(name, params, result)
    assert j.replaying and j.position == len(recorded)  # the whole journal matched
    return out


def _assert_same_results(got, recorded):
    for out, (_, _, result) in zip(got, recorded, strict=True):
        if journal._storable(result) is None:
            assert out is None  # not storable: the pass runs again
            continue
        assert out is not None and set(out) == set(result)
        for k, v in result.items():
            assert np.asarray(out[k]).dtype == np.asarray(v).dtype and np.shape(out[k]) == np.shape(v)
            assert np.asarray(out[k]).tobytes() == np.asarray(v).tobytes()  # the same floats, bit for bit


def test_a_batch_of_mixed_records_replays_each_result_bit_for_bit(tmp_path):
    """Records of one batch are stored grouped by their arrays' names,
    dtypes and shapes (a stacked array per group and name); results of
    other kinds in the same batch (other shapes, scalars only, int arrays,
    results that cannot be stored) come back as they were recorded, also
    after the journal is cut inside the batch and rewritten."""
    rng = np.random.default_rng(1)
    recorded = []
    for i in range(40):
        kind = i % 5
        if kind == 0:
            result = {"R": rng.normal(size=3), "S": rng.normal(size=(3, 2)), "log_z": np.float64(rng.normal())}
        elif kind == 1:
            result = {"R": rng.normal(size=4), "S": rng.normal(size=(4, 2)), "log_z": float(rng.normal())}
        elif kind == 2:
            result = {"counts": rng.integers(0, 9, size=(2, 3)), "f": np.float32(rng.normal())}
        elif kind == 3:
            result = {"label": "not an array"}  # not storable
        else:
            result = {"R": rng.normal(size=3).astype(np.float32), "S": rng.normal(size=(3, 2)),
                      "log_z": np.float64(i)}
        recorded.append((f"pass{kind}", {"centers": rng.normal(size=(3, 2)), "i": i}, result))
    fp = {"estimator": "test"}
    with journal.recording(tmp_path / "run", fp, resume=False) as j:
        for name, params, result in recorded:
            j.record(name, params, result)
    files = list((tmp_path / "run" / "passes").glob("*.npz"))
    assert len(files) == 1  # one batch ...
    with np.load(files[0]) as z:
        assert len(z.files) == 1 + 3 + 3 + 2 + 0 + 3  # ... of one member per group and name, not per record
    _assert_same_results(_replay_all(tmp_path / "run", fp, recorded), recorded)
    journal.truncate(tmp_path / "run", 23)  # cut inside the batch: its first 23 records rewritten
    assert journal.recorded_passes(tmp_path / "run") == 23
    _assert_same_results(_replay_all(tmp_path / "run", fp, recorded[:23]), recorded[:23])


def test_a_journal_written_before_the_grouped_batches_still_replays(tmp_path):
    """Batches of one zip member per record and array (``m{i}``,
    ``a{i}.{name}``) and files of one record (``__meta__``), as earlier
    versions wrote them, replay and can be cut."""
    rng = np.random.default_rng(2)
    recorded = [(f"p{i}", {"i": i}, {"R": rng.normal(size=3), "log_z": np.float64(rng.normal())}) for i in range(6)]
    fp = {"estimator": "old"}
    folder = tmp_path / "run"
    (folder / "passes").mkdir(parents=True)
    (folder / "checkpoint.json").write_text(json.dumps({"journal_version": 1, **fp}))

    def meta(i):
        name, params, _ = recorded[i]
        m = {"position": i, "name": name, "params": journal._digest(params), "stored": True}
        return np.frombuffer(json.dumps(m).encode(), dtype=np.uint8)

    old_batch = {}
    for i in range(4):
        old_batch[f"m{i}"] = meta(i)
        old_batch.update({f"a{i}.{k}": np.asarray(v) for k, v in recorded[i][2].items()})
    np.savez(folder / "passes" / "0000000.npz", **old_batch)
    for i in (4, 5):
        np.savez(folder / "passes" / f"{i:07d}.npz", __meta__=meta(i),
                 **{k: np.asarray(v) for k, v in recorded[i][2].items()})
    assert journal.recorded_passes(folder) == 6
    _assert_same_results(_replay_all(folder, fp, recorded), recorded)
    journal.truncate(folder, 3)  # the old batch rewritten as a grouped one
    assert journal.recorded_passes(folder) == 3
    _assert_same_results(_replay_all(folder, fp, recorded[:3]), recorded[:3])


@pytest.mark.parametrize("edit", ["halved", "scaled", "nan"])
def test_an_edited_journal_batch_is_recomputed_not_replayed(tmp_path, edit):
    """A pass journal's batch file edited after it was written (its arrays
    halved, scaled by 1.5 or set to NaN; issue 53: the resumed fit returned
    another model with exit 0) no longer matches the checksum recorded with
    each pass: the resumed fit warns and recomputes from that pass, and
    ends where the uninterrupted fit ends."""
    from infoclust_dask import IsotropicGaussianMixture

    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(size=(150, 2)) + c for c in ([0, 0], [6, 0], [0, 6])])
    run = tmp_path / "run"
    first = IsotropicGaussianMixture(3, random_state=0, scheduler="sync").fit(X, checkpoint=run)
    batch = sorted((run / "passes").glob("*.npz"))[0]
    with np.load(batch) as z:
        data = {k: z[k] for k in z.files}
    factor = {"halved": 0.5, "scaled": 1.5, "nan": np.nan}[edit]
    for k, v in data.items():
        if k != "__batch__" and v.dtype.kind == "f":
            data[k] = v * factor
    with open(batch, "wb") as fh:
        np.savez(fh, **data)
    with pytest.warns(RuntimeWarning, match="does not match its checksum"):
        resumed = IsotropicGaussianMixture(3, random_state=0, scheduler="sync").fit(X, resume=run)
    np.testing.assert_array_equal(resumed.labels_, first.labels_)
    np.testing.assert_allclose(resumed.means_ if hasattr(resumed, "means_") else resumed.cluster_centers_,
                               first.means_ if hasattr(first, "means_") else first.cluster_centers_, rtol=0, atol=0)


def test_an_edited_checkpoint_is_refused_on_resume(tmp_path):
    """checkpoint.json (the fit's estimator, parameters and data shape)
    carries a checksum of its fields: edited, the resume is refused naming
    the file; a checkpoint written before the checksum still resumes."""
    X = np.random.default_rng(0).normal(size=(120, 2))
    run = tmp_path / "run"
    first = KMeans(3, random_state=0, scheduler="sync").fit(X, checkpoint=run)
    meta = run / "checkpoint.json"
    doc = json.loads(meta.read_text())
    assert "sha" in doc
    edited = dict(doc)
    edited["shape"] = [999, 2] if "shape" in doc else edited.get("shape")
    edited["journal_version"] = 1
    edited["estimator"] = doc.get("estimator", "KMeans") + " "
    meta.write_text(json.dumps(edited))
    with pytest.raises(ValueError, match="does not match the checksum"):
        KMeans(3, random_state=0, scheduler="sync").fit(X, resume=run)
    meta.write_text(json.dumps({k: v for k, v in doc.items() if k != "sha"}))  # as an older version wrote it
    again = KMeans(3, random_state=0, scheduler="sync").fit(X, resume=run)
    np.testing.assert_array_equal(again.labels_, first.labels_)


def test_a_resume_whose_passes_folder_was_deleted_runs_every_pass_again(tmp_path):
    """``--resume`` after ``passes/`` was deleted said "[Errno 2] ... .tmp.npz" (issue 53): the resumed fit
    warns that there is nothing to replay, runs every pass and ends where the first fit ended."""
    import shutil

    X = np.random.default_rng(1).normal(size=(150, 2))
    run = tmp_path / "run"
    first = KMeans(3, random_state=0, scheduler="sync").fit(X, checkpoint=run)
    shutil.rmtree(run / "passes")
    with pytest.warns(RuntimeWarning, match="has no passes/ folder: nothing to replay"):
        again = KMeans(3, random_state=0, scheduler="sync").fit(X, resume=run)
    np.testing.assert_array_equal(again.labels_, first.labels_)
    assert journal.recorded_passes(run) > 0


def test_predict_takes_a_run_folder_for_its_model(tmp_path, capsys):
    """``infoclust predict RUN_DIR STORE`` said "[Errno 21] Is a directory" (issue 53): a finished run
    folder stands for its model.json; a folder without one is named with the fix."""
    from infoclust_dask import cli

    X = np.random.default_rng(2).normal(size=(90, 3))
    store = tmp_path / "s.zarr"
    write_dataset(store, X)
    assert cli.main(["fit", "kmeans", str(store), "-k", "2", "-q", "--storage", str(tmp_path / "st")]) == 0
    run = next((tmp_path / "st" / "runs").iterdir())
    capsys.readouterr()
    assert cli.main(["predict", str(run), str(store), "--out", str(tmp_path / "lab.npy")]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "lab.npy"), load_model(run / "model.json").predict(X))
    (tmp_path / "empty").mkdir()
    assert cli.main(["predict", str(tmp_path / "empty"), str(store), "--out", str(tmp_path / "l2.npy")]) == 2
    assert "is a folder without a model.json" in capsys.readouterr().err
