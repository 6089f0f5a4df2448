"""Faults a careless or hostile user meets: overwriting what is not ours,
crashed writers' leftovers, concurrent writers, bad bytes on disk, model
files that name other code, errors that must be messages."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from infoclust_dask import KMeans, open_dataset, write_dataset
from infoclust_dask.cli import main
from infoclust_dask.io.store import StoreError, clean_stale_temporaries, verify_store
from infoclust_dask.runs import load_model, save_model


def _store(tmp_path, name="s.zarr", n=400, chunks=100):
    rng = np.random.default_rng(0)
    return write_dataset(tmp_path / name, rng.normal(size=(n, 3)), label=rng.integers(0, 3, n), chunks=chunks,
                         codec="none")


# --------------------------------------------------------------------------- overwrite
def test_overwrite_refuses_a_project_folder_a_file_and_a_foreign_zarr(tmp_path, capsys):
    src = tmp_path / "good.npy"
    np.save(src, np.ones((10, 2)))
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "thesis.tex").write_text("years of work")
    assert main(["ingest", str(src), str(project), "--overwrite"]) == 2
    assert "not an infoclust store" in capsys.readouterr().err
    assert (project / "src" / "thesis.tex").read_text() == "years of work"
    notes = tmp_path / "notes.txt"
    notes.write_text("keep")
    assert main(["ingest", str(src), str(notes), "--overwrite"]) == 2
    assert "is a file" in capsys.readouterr().err and notes.read_text() == "keep"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no .name.old-* left behind
    foreign = tmp_path / "foreign.zarr"
    foreign.mkdir()
    (foreign / "zarr.json").write_text(json.dumps({"zarr_format": 3, "node_type": "group", "attributes": {}}))
    assert main(["ingest", str(src), str(foreign), "--overwrite"]) == 2
    assert (foreign / "zarr.json").exists()
    ours = _store(tmp_path, "ours.zarr")  # a store of ours is replaced
    assert main(["ingest", str(src), str(ours), "--overwrite"]) == 0
    assert open_dataset(ours)["x"].shape == (10, 2)


def test_stale_temporaries_of_a_dead_writer_are_removed_and_a_live_ones_kept(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    dest = tmp_path / "d.zarr"
    stale = tmp_path / f".d.zarr.tmp-{dead.pid}-abcd1234"
    (stale / "x").mkdir(parents=True)
    live = tmp_path / f".d.zarr.tmp-{os.getpid()}-abcd1234"
    live.mkdir()
    lock = tmp_path / ".d.zarr.lock-"
    lock.write_text(str(dead.pid))
    assert set(clean_stale_temporaries(dest)) == {stale, lock}
    assert live.exists() and not stale.exists() and not lock.exists()


def test_second_writer_of_one_destination_gets_a_clear_error(tmp_path):
    dest = tmp_path / "d.zarr"
    (tmp_path / ".d.zarr.lock-").write_text(str(os.getpid()))  # a live writer holds it
    with pytest.raises(StoreError, match=rf"Another process \(PID {os.getpid()}\) is writing"):
        write_dataset(dest, np.ones((5, 2)))
    assert not dest.exists()


def test_two_concurrent_ingests_one_wins_the_store_is_whole(tmp_path):
    src = tmp_path / "big.npy"
    np.save(src, np.random.default_rng(0).normal(size=(400_000, 8)))
    dest = tmp_path / "d.zarr"
    cmd = [sys.executable, "-m", "infoclust_dask.cli", "ingest", str(src), str(dest), "--chunks", "20000"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], outs
    err = next(e for (o, e), p in zip(outs, procs, strict=True) if p.returncode == 2)
    assert "is writing" in err or "already exists" in err
    np.testing.assert_array_equal(open_dataset(dest)["x"].values, np.load(src))
    assert verify_store(dest)["problems"] == []


@pytest.mark.slow  # make test took 532-544 s on a fresh clone on 2026-11-29: in make test-slow (4.1 s)
def test_ingest_killed_mid_write_leaves_nothing_and_a_rerun_succeeds(tmp_path):
    src = tmp_path / "big.npy"
    np.save(src, np.random.default_rng(0).normal(size=(3_000_000, 8)).astype(np.float32))
    dest = tmp_path / "d.zarr"
    cmd = [sys.executable, "-m", "infoclust_dask.cli", "ingest", str(src), str(dest), "--chunks", "50000",
           "--codec", "zstd"]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(tmp_path.glob(".d.zarr.tmp-*/x/c")):
        time.sleep(0.02)
    assert list(tmp_path.glob(".d.zarr.tmp-*")), "the writer never started writing"
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert not dest.exists()  # absent, never half-written
    assert list(tmp_path.glob(".d.zarr.tmp-*"))  # the killed writer's leftovers ...
    assert main(["ingest", str(src), str(dest), "--chunks", "500000"]) == 0
    assert not list(tmp_path.glob(".d.zarr.*"))  # ... are removed by the next run
    assert open_dataset(dest)["x"].shape == (3_000_000, 8)


@pytest.mark.slow  # make test took 532-544 s on a fresh clone on 2026-11-29: in make test-slow (3.9 s)
def test_sigterm_during_ingest_removes_the_temporary(tmp_path):
    src = tmp_path / "big.npy"
    np.save(src, np.random.default_rng(0).normal(size=(3_000_000, 8)).astype(np.float32))
    dest = tmp_path / "d.zarr"
    p = subprocess.Popen([sys.executable, "-m", "infoclust_dask.cli", "ingest", str(src), str(dest), "--chunks",
                          "50000", "--codec", "zstd"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(tmp_path.glob(".d.zarr.tmp-*/x/c")):
        time.sleep(0.02)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143 and "terminated (SIGTERM)" in err and "Traceback" not in err
    assert not dest.exists() and not list(tmp_path.glob(".d.zarr*"))


# --------------------------------------------------------------------------- bad bytes
def test_deleted_truncated_and_garbled_chunks_are_named(tmp_path, capsys):
    store = _store(tmp_path)
    clean = verify_store(store)
    assert (clean["store"], clean["chunks"], clean["rows"], clean["problems"], clean["notes"]) == \
        (str(store), 8, 400, [], [])
    x2 = store / "x" / "c" / "2" / "0"
    x2.write_bytes(x2.read_bytes()[:-8])  # truncated
    (store / "label" / "c" / "1").unlink()  # deleted: zarr would read the fill value as a class
    with pytest.raises(StoreError, match=r"damaged: .*array 'label', chunk \(1,\).* is missing|"
                                         r"damaged: .*array 'x', chunk \(2, 0\)"):
        open_dataset(store)
    assert main(["verify", str(store)]) == 1
    out = capsys.readouterr().out
    assert "array 'x', chunk (2, 0)" in out and "has 2396 bytes, 2404 were written" in out  # (+4: the CRC-32C)
    assert "array 'label', chunk (1,)" in out and "is missing" in out
    store2 = _store(tmp_path, "g.zarr")
    x1 = store2 / "x" / "c" / "1" / "0"
    raw = bytearray(x1.read_bytes())
    raw[100:108] = b"\xff" * 8  # garbage of the same size: a NaN-free inf-free float? no: caught by CRC
    x1.write_bytes(bytes(raw))
    assert main(["verify", str(store2)]) == 1
    assert "array 'x', chunk (1, 0)" in capsys.readouterr().out
    # a fit on it stops at the first read of that chunk (its CRC-32C) and points to verify
    assert main(["fit", "kmeans", str(store2), "-k", "2", "--scheduler", "sync", "--storage", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "failed its CRC-32C check" in err and "infoclust verify" in err and "Traceback" not in err


def test_truncated_metadata_is_a_clear_error(tmp_path, capsys):
    store = _store(tmp_path)
    meta = store / "x" / "zarr.json"
    meta.write_text(meta.read_text()[:40])
    assert main(["info", str(store)]) == 2
    err = capsys.readouterr().err
    assert f"The store at '{store}' is damaged: array 'x': its metadata (x/zarr.json) differs from that written: " \
           "it is not JSON" in err and "Traceback" not in err


def test_undecodable_chunk_says_verify(tmp_path, capsys):
    rng = np.random.default_rng(0)
    store = write_dataset(tmp_path / "c.zarr", np.round(rng.normal(size=(4000, 3)), 1), chunks=1000, codec="lz4")
    x1 = store / "x" / "c" / "1" / "0"
    raw = bytearray(x1.read_bytes())
    raw[16:] = bytes(len(raw) - 16)  # same size, compressed stream destroyed
    x1.write_bytes(bytes(raw))
    assert main(["fit", "kmeans", str(store), "-k", "2", "--scheduler", "sync", "--storage", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "infoclust verify" in err


# --------------------------------------------------------------------------- model files
def test_load_model_rebuilds_only_estimators(tmp_path):
    X = np.random.default_rng(0).normal(size=(50, 2))
    path = save_model(KMeans(2, n_init=1, scheduler="sync", random_state=0).fit(X), tmp_path / "m.json")
    doc = json.loads(path.read_text())
    assert doc["schema"] == "infoclust-model" and doc["class"] == "KMeans"
    np.testing.assert_array_equal(load_model(path).predict(X), KMeans(2, n_init=1, scheduler="sync",
                                                                      random_state=0).fit(X).labels_)
    victim = tmp_path / "written.txt"
    for cls, params, message in (
        ("infoclust_dask.runs.write_json", {"path": str(victim), "obj": 1}, "not an infoclust_dask estimator"),
        ("os.system", {"command": "touch " + str(victim)}, "not an infoclust_dask estimator"),
        ("KMeans", {"n_clusters": 2, "evil": 1}, r"no parameters \['evil'\]"),
    ):
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps({**doc, "class": cls, "params": params}))
        with pytest.raises(ValueError, match=message):
            load_model(bad)
        assert not victim.exists()
    bad.write_text(json.dumps({**doc, "fitted": {"cluster_centers_": {"__ndarray__": [1], "dtype": "object"}}}))
    with pytest.raises(ValueError, match="dtype 'object'"):
        load_model(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(ValueError, match="is not a model file"):
        load_model(bad)


# --------------------------------------------------------------------------- messages, not tracebacks
def test_cli_errors_are_messages(tmp_path, capsys):
    np.savez(tmp_path / "f.npz", x=np.ones((3, 2)), label=np.array([0.5, 1.0, 2.0]))
    assert main(["ingest", str(tmp_path / "f.npz"), str(tmp_path / "a.zarr")]) == 2
    assert "array 'label' has dtype float64" in capsys.readouterr().err
    store = _store(tmp_path)
    blocked = tmp_path / "a-file"  # a storage root under a regular file cannot be created, even by root
    blocked.write_text("")
    t0 = time.perf_counter()
    assert main(["fit", "kmeans", str(store), "-k", "2", "--scheduler", "sync", "--storage",
                 str(blocked / "storage")]) == 2
    err = capsys.readouterr().err
    assert "not writable" in err and str(blocked / "storage") in err and "Traceback" not in err
    assert time.perf_counter() - t0 < 5  # checked before the fit, not after


# --------------------------------------------------------------------------- bad scheduler addresses
@pytest.mark.slow  # 9.6 s on a fresh clone: make test stays under 8 minutes (issue 63's run: 495 s)
def test_bad_scheduler_addresses_fail_within_the_deadline(tmp_path, capsys, monkeypatch):
    """A refused port fails at once; a server that accepts TCP but never
    speaks dask (a silent socket, an HTTP server) fails at the deadline;
    crossval fails before Prefect's server starts."""
    import socket
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    monkeypatch.setenv("INFOCLUST_CONNECT_TIMEOUT", "1")  # the deadline under test (was 3 s: 15.5 s of make test)
    store = _store(tmp_path)
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    http = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)  # its request threads are daemons
    threading.Thread(target=http.serve_forever, daemon=True).start()
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    refused = free.getsockname()[1]
    free.close()
    try:
        for port, limit in ((refused, 2.0), (silent.getsockname()[1], 6.0), (http.server_address[1], 6.0)):
            address = f"tcp://127.0.0.1:{port}"
            commands = [["fit", "kmeans", str(store), "-k", "2"], ["crossval", str(store), "--method", "kmeans"]]
            for argv in commands[: 1 if port == http.server_address[1] else 2]:  # crossval: refused and silent
                t0 = time.perf_counter()
                assert main(argv + ["--scheduler", address, "--storage", str(tmp_path)]) == 2
                took = time.perf_counter() - t0
                err = capsys.readouterr().err
                assert f"Could not connect to the dask scheduler at '{address}'" in err, err
                assert took < limit, (address, argv[0], took)
    finally:
        silent.close()
        http.shutdown()
    assert not (tmp_path / ".prefect").exists()  # no Prefect server was started for crossval


# --------------------------------------------------------------------------- unclear crashes -> messages
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_extreme_parameters_and_inputs_are_clear_errors_or_fits():
    import dask.array as da

    from infoclust_dask import AssociativeClustering, DiscriminativeClustering

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(200, 3)), rng.integers(0, 3, 200)
    cases = [
        (lambda: DiscriminativeClustering(2, sigma=1e-300, scheduler="sync").fit(X, y), r"'sigma'.*\[1e-100, 1e\+100\].*Got 1e-300"),
        (lambda: DiscriminativeClustering(2, sigma=1e300, scheduler="sync").fit(X, y), r"'sigma'.*Got 1e\+300"),
        (lambda: AssociativeClustering(2, sigma=(1.0, 1e-300), scheduler="sync").fit(X, X[:, :2]), r"'sigma'.*pair"),
        (lambda: DiscriminativeClustering(2, sigma=1.0, scheduler="sync").fit(X, None), r"y is None.*fit\(X, y\)"),
        (lambda: KMeans(2, scheduler="sync", random_state=-1).fit(X), r"'random_state'.*Got -1"),
        (lambda: KMeans(2, scheduler="sync").fit(da.zeros((100, 0), chunks=50)), r"0 feature\(s\)"),
        (lambda: KMeans(2, scheduler="sync").fit(da.from_array(X.astype(str), chunks=50)), r"X must be numeric; got dtype <U"),
    ]
    for fit, message in cases:
        with pytest.raises(ValueError, match=message):
            fit()
    # the ends of the sigma range and huge class ids fit
    for sigma in (1e-100, 1e100):
        m = DiscriminativeClustering(2, sigma=sigma, max_iter=3, scheduler="sync", random_state=0).fit(X, y)
        assert np.isfinite(m.cluster_centers_).all()
    m = DiscriminativeClustering(2, sigma=1.0, max_iter=3, scheduler="sync").fit(X, np.where(y == 0, 10**9, y))
    assert m.classes_.tolist() == [1, 2, 10**9]
    # numpy and dask booleans are treated alike (0/1)
    a = KMeans(2, n_init=1, random_state=0, scheduler="sync").fit(X > 0)
    b = KMeans(2, n_init=1, random_state=0, scheduler="sync").fit(da.from_array(X > 0, chunks=50))
    np.testing.assert_allclose(a.cluster_centers_, b.cluster_centers_, atol=1e-12)


def test_ingest_complex_latin1_and_demo_paths_stay_clear_and_inside_storage(tmp_path, capsys):
    from infoclust_dask.runs import dataset_store_path, new_run_dir

    np.save(tmp_path / "c.npy", np.ones((4, 2)) * (1 + 2j))
    assert main(["ingest", str(tmp_path / "c.npy"), str(tmp_path / "c.zarr")]) == 2
    assert "are complex (complex128)" in capsys.readouterr().err
    latin = tmp_path / "l.csv"
    latin.write_bytes("caf\xe9,x\n1,2\n3,4\n".encode("latin-1"))
    assert main(["ingest", str(latin), str(tmp_path / "l.zarr")]) == 2
    assert "is not utf-8 text: byte b'\\xe9' at offset 3" in capsys.readouterr().err
    assert main(["ingest", str(latin), str(tmp_path / "l.zarr"), "--encoding", "latin-1"]) == 0
    storage = tmp_path / "storage"
    assert dataset_store_path(storage, "/abs/where/data.npz") == str(storage / "datasets" / "data-demo.zarr")
    assert dataset_store_path(storage, "satimage") == str(storage / "datasets" / "satimage-demo.zarr")
    assert dataset_store_path(storage, "../../etc") == str(storage / "datasets" / "etc-demo.zarr")  # the stem only
    for bad in ("..", "/abs/.hidden.npz", "a b"):
        with pytest.raises(ValueError, match="cannot name a folder under the storage root"):
            dataset_store_path(storage, bad)
    with pytest.raises(ValueError, match="run name '../x'"):
        new_run_dir("../x", root=storage)


def _live_children(proc):
    """(process, command line) of ``proc``'s descendants that are running:
    a child that exited between listing and reading its command line (a
    zombie not yet reaped, or gone) is not one the watchdog must stop."""
    import psutil

    out = []
    for k in proc.children(recursive=True):
        try:
            out.append((k, " ".join(k.cmdline())))
        except psutil.NoSuchProcess:  # ZombieProcess is a NoSuchProcess
            continue
    return out


@pytest.mark.slow  # ~28 s: a CLI crossval with a Prefect server, killed (make test-slow, run by .ci/run)
def test_children_of_a_killed_crossval_die_with_it(tmp_path):
    """kill -9 of `infoclust crossval` while Prefect's temporary server and the
    LocalCluster run (named: a store this small would run in-process): the
    watchdog stops every child it saw within seconds."""
    import psutil

    store = _store(tmp_path, n=4000, chunks=1000)
    env = {**os.environ, "INFOCLUST_STORAGE": str(tmp_path / "storage"), "PREFECT_HOME": str(tmp_path / "prefect")}
    p = subprocess.Popen([sys.executable, "-m", "infoclust_dask.cli", "crossval", str(store), "--method", "kmeans",
                          "--grid", "n_clusters=2,3,4,5", "--folds", "5", "--scheduler", "local"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proc = psutil.Process(p.pid)
    deadline = time.monotonic() + 180
    kids = []
    while time.monotonic() < deadline:
        kids = [(k, cmd) for k, cmd in _live_children(proc) if "_watchdog" not in cmd]
        if any("uvicorn" in cmd or "prefect" in cmd for _, cmd in kids) and len(kids) >= 3:
            break
        time.sleep(0.2)
    kids = {k: cmd for k, cmd in _live_children(proc) if "_watchdog" not in cmd}
    assert kids, "crossval started no child processes"
    p.send_signal(signal.SIGKILL)
    p.wait()
    gone, alive = psutil.wait_procs(list(kids), timeout=15)
    assert not alive, [kids[k][:120] for k in alive]


def test_ingest_into_a_full_disk_is_named_and_leaves_nothing(tmp_path):
    """A 2 MB tmpfs (or, where mounting is not allowed, a 2 MB file-size
    limit) cannot hold a 16 MB store: a clear error with the path and the
    space needed, and nothing half-written."""
    src = tmp_path / "big.npy"
    np.save(src, np.random.default_rng(0).normal(size=(250_000, 8)))
    small = tmp_path / "small"
    small.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(small)],
                             capture_output=True).returncode == 0
    code = ("import resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
            + ("" if mounted else "resource.setrlimit(resource.RLIMIT_FSIZE, (2**21, 2**21)); ")
            + "from infoclust_dask.cli import main; sys.exit(main(sys.argv[1:]))")
    try:
        r = subprocess.run([sys.executable, "-c", code, "ingest", str(src), str(small / "d.zarr"), "--codec", "none"],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 2, r.stderr
        expect = "No space left for the store" if mounted else "hit the file size limit"
        assert expect in r.stderr and str(small / "d.zarr") in r.stderr and "GiB" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr
        assert not list(small.iterdir())  # neither the store nor a temporary
    finally:
        if mounted:
            subprocess.run(["umount", str(small)], check=True)


@pytest.mark.slow  # ~8 s: a CLI fit on its own LocalCluster, interrupted (make test-slow, run by .ci/run)
def test_ctrl_c_during_a_fit_on_the_local_cluster_ends_with_one_line(tmp_path):
    """SIGINT to the whole process group (what Ctrl-C in a terminal sends,
    workers included) during `infoclust fit` on a local cluster:
    exit 130 with one line, no tracebacks from this process or its workers,
    and no worker left behind."""
    import psutil

    store = _store(tmp_path, n=400_000, chunks=50_000)
    p = subprocess.Popen([sys.executable, "-m", "infoclust_dask.cli", "fit", "softkmeans", str(store), "-k", "6",
                          "--n-betas", "200", "--scheduler", "local", "--storage", str(tmp_path / "st")],
                         stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # a background job's
    proc = psutil.Process(p.pid)  # shell ignores SIGINT, and children inherit that: give Ctrl-C back
    for _ in range(50):  # "run folder: ..." (stderr) is printed once the local cluster is up and the fit starts
        if "run folder" in p.stderr.readline():
            break
    kids = [k for k, cmd in _live_children(proc) if "_watchdog" not in cmd]
    assert len(kids) >= 2
    time.sleep(2)
    assert p.poll() is None, "the fit ended before Ctrl-C: make it longer"
    os.killpg(p.pid, signal.SIGINT)
    _, err = p.communicate(timeout=90)
    assert p.returncode == 130, err[-2000:]
    lines = [ln for ln in err.splitlines() if ln.strip() and "%" not in ln and not ln.startswith("[")]
    assert "Traceback" not in err and len(lines) <= 2, err[-3000:]
    assert any("interrupted" in ln.lower() for ln in lines), lines
    gone, alive = psutil.wait_procs(kids, timeout=15)
    assert not alive


def test_ingest_refuses_values_whose_squares_overflow(tmp_path, capsys):
    X = np.random.default_rng(0).normal(size=(50, 3))
    X[:, 1] *= 1e300
    np.savetxt(tmp_path / "h.csv", X, delimiter=",", header="a,b,c", comments="")
    assert main(["ingest", str(tmp_path / "h.csv"), str(tmp_path / "h.zarr"), "--standardize"]) == 2
    err = capsys.readouterr().err
    assert "Feature 1" in err and "overflow" in err and "Rescale" in err
    assert not (tmp_path / "h.zarr").exists()
    X[:, 1] /= 1e160  # 1e140: squares stay finite, the store is written and standardized
    np.savetxt(tmp_path / "ok.csv", X, delimiter=",", header="a,b,c", comments="")
    assert main(["ingest", str(tmp_path / "ok.csv"), str(tmp_path / "ok.zarr"), "--standardize"]) == 0
    from infoclust_dask import open_dataset

    np.testing.assert_allclose(open_dataset(tmp_path / "ok.zarr")["x"].values.std(0), 1.0, rtol=1e-9)


def test_a_store_of_ours_without_its_manifest_is_refused_unless_trusted(tmp_path, capsys):
    from infoclust_dask import open_dataset, write_dataset
    from infoclust_dask.io.store import StoreError

    X = np.random.default_rng(0).normal(size=(200, 3))
    s = write_dataset(tmp_path / "s.zarr", X, label=np.arange(200) % 2, chunks=50)
    (s / "x" / "infoclust-manifest.json").unlink()
    with pytest.raises(StoreError, match=r"'x' has no chunk manifest .* --trust"):
        open_dataset(s)
    np.testing.assert_array_equal(open_dataset(s, trust=True)["x"].values, X)
    args = ["fit", "kmeans", str(s), "-k", "2", "--scheduler", "sync", "--storage", str(tmp_path / "st")]
    assert main(args) == 2 and "no chunk manifest" in capsys.readouterr().err
    assert main([*args, "--trust"]) == 0
    assert main(["info", str(s), "--trust"]) == 0


def test_a_full_disk_during_a_small_write_names_the_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    import errno

    from infoclust_dask.runs import write_json, write_npy

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "save", full)
    with pytest.raises(OSError, match=r"No space left to write '.*labels\.npy' \(40 bytes; \d+ bytes free"):
        write_npy(tmp_path / "labels.npy", np.arange(5))
    monkeypatch.undo()
    monkeypatch.setattr(Path, "write_bytes", full)
    with pytest.raises(OSError, match=r"No space left to write '.*summary\.json'"):
        write_json(tmp_path / "summary.json", {"a": 1})
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no temporary left behind
    # a killed writer's temporary names its PID and is removed by the next write
    (tmp_path / ".labels.npy.tmp-999999999-abcdef01").write_bytes(b"half")
    write_npy(tmp_path / "labels.npy", np.arange(5))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["labels.npy"]


def test_ragged_rows_trailing_commas_empty_labels_and_nested_stores_are_named(tmp_path, capsys):
    from infoclust_dask import write_dataset

    cases = {
        "ragged.csv": ("a,b,c\n1,2,3\n4,5\n6,7,8\n", (), r"line 3 has 2 fields, expected 3: the file is ragged"),
        "trailing.csv": ("a,b,c,\n1,2,3,\n4,5,6,\n", (), r"end with an empty field \(a trailing comma"),
        "label.csv": ("a,b,cls\n1,2,x\n3,4,\n5,6,y\n", ("--label-column", "cls"),
                      r"line 3, column 3 \('cls'\): the class label is empty"),
    }
    for name, (text, extra, message) in cases.items():
        (tmp_path / name).write_text(text)
        assert main(["ingest", str(tmp_path / name), str(tmp_path / f"{name}.zarr"), *extra]) == 2
        err = capsys.readouterr().err
        assert re.search(message, err), err
        assert not (tmp_path / f"{name}.zarr").exists()
    base = write_dataset(tmp_path / "base.zarr", np.ones((10, 2)))
    np.save(tmp_path / "a.npy", np.ones((10, 2)))
    assert main(["ingest", str(tmp_path / "a.npy"), str(base / "x" / "inner.zarr")]) == 2
    assert f"lies inside the zarr store '{base}'" in capsys.readouterr().err
    assert not (base / "x" / "inner.zarr").exists()


def test_a_malformed_manifest_entry_is_named_by_verify_and_open(tmp_path):
    from infoclust_dask import open_dataset, write_dataset
    from infoclust_dask.io.store import StoreError, verify_store

    s = write_dataset(tmp_path / "s.zarr", np.ones((100, 3)), chunks=50)
    man = s / "x" / "infoclust-manifest.json"
    doc = json.loads(man.read_text())
    doc["chunks"]["x/c/0/0"] = {"size": 1}
    man.write_text(json.dumps(doc))
    assert verify_store(s)["problems"] == ["manifest entry 'x/c/0/0' is malformed ({'size': 1}; expected [size >= 0, "
                                           "CRC-32 or null, CRC-32C trailer or null] as integers)"]
    with pytest.raises(StoreError, match="manifest entry 'x/c/0/0' is malformed"):
        open_dataset(s)
