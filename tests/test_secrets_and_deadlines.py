"""Integrity, second round (issue 38): no secret in any output, URL typos
refused rather than made into folders, object stores with deadlines."""

import inspect
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from infoclust_dask import cli
from infoclust_dask.storage.location import object_store_defaults, resolve, run_path
from infoclust_dask.storage.paths import check_path, local_path, redact

SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYzz"  # slashes and a plus, as AWS secret keys have


def _run(argv, capsys):
    rc = cli.main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def test_credentials_in_a_url_are_refused_and_never_shown(tmp_path, monkeypatch, capsys, s3_bucket):
    """Every command, given a URL with credentials in any of its path
    arguments: exit 2 with the URL redacted; the secret in no output, no
    file under the working folder, no object in the bucket."""
    monkeypatch.chdir(tmp_path)
    np.save(tmp_path / "d.npy", np.random.default_rng(0).normal(size=(50, 3)))
    bucket = s3_bucket[len("s3://"):]
    bad = f"s3://AKIAEXAMPLE:{SECRET}@{bucket}/c.zarr"
    commands = [
        ["ingest", "d.npy", bad],
        ["info", bad],
        ["verify", bad],
        ["fit", "kmeans", bad, "-k", "2", "--storage", str(tmp_path / "st")],
        ["fit", "kmeans", str(tmp_path / "none.zarr"), "-k", "2", "--storage", f"s3://K:{SECRET}@{bucket}/st"],
        ["predict", f"s3://K:{SECRET}@{bucket}/run/model.json", str(tmp_path / "none.zarr")],
        ["crossval", bad, "--storage", str(tmp_path / "st")],
        ["demo", "--storage", f"s3://K:{SECRET}@{bucket}/st"],
        ["ingest", "d.npy", f"s3://{SECRET}@{bucket}/c.zarr"],  # a bare key as the userinfo
    ]
    for argv in commands:
        rc, out, err = _run(argv, capsys)
        assert rc == 2, (argv, out, err)
        assert SECRET not in out + err and SECRET.split("/")[0] not in out + err, (argv, err)
        assert "***@" in err and "carries credentials" in err, err
    for f in tmp_path.rglob("*"):
        if f.is_file():
            assert SECRET.encode() not in f.read_bytes(), f
    import fsspec

    fs = fsspec.filesystem("s3")
    fs.invalidate_cache()
    assert fs.find(bucket) == []  # nothing was written to the bucket


def test_redact_removes_userinfo_and_credential_environment_values(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-1234567890")
    text = (f'Invalid bucket name "KEYID:{SECRET}@bucket"; s3://A:{SECRET}@b/x.zarr; gs://user@b/y; '
            "token tok-1234567890; http://127.0.0.1:9000/b/x.zarr stays")
    got = redact(text)
    assert SECRET not in got and "KEYID" not in got and "tok-1234567890" not in got and "user@" not in got
    assert "s3://***@b/x.zarr" in got and "http://127.0.0.1:9000/b/x.zarr stays" in got
    assert redact("plain local/path.zarr and name@example") == "plain local/path.zarr and name@example"


@pytest.mark.parametrize("path", ["s3:/bucket/q.zarr", "s3:bucket/q.zarr", "gs:/b/x", "memory:/x.zarr"])
def test_a_protocol_without_its_two_slashes_is_refused_never_a_folder(path, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"not '\w+://': write '\w+://"):
        check_path(path, "store")
    with pytest.raises(ValueError, match="not '"):
        resolve(path)
    with pytest.raises(ValueError, match="not '"):
        run_path(path)
    with pytest.raises(ValueError, match="not '"):
        local_path(path)  # a source file: once a local path 's3:/...'
    np.save(tmp_path / "d.npy", np.zeros((5, 2)))
    rc, _, err = _run(["ingest", "d.npy", path], capsys)
    assert rc == 2 and "://" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.npy"]  # no folder named 's3:'
    # a local path that merely contains a colon stays a local path
    assert check_path("./s3:/x.zarr") == "./s3:/x.zarr" and check_path("C:/data/x.zarr") == "C:/data/x.zarr"


def test_memory_urls_are_refused_by_the_cli(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    np.save(tmp_path / "d.npy", np.zeros((5, 2)))
    rc, _, err = _run(["ingest", "d.npy", "memory://m/s.zarr"], capsys)
    assert rc == 2 and "gone when `infoclust` exits" in err


def test_no_tracked_path_contains_a_colon():
    """A path with ':' is a URL typo that became a folder (the repository
    once tracked `memory:/x.zarr`)."""
    root = Path(__file__).resolve().parents[1]
    if (root / ".git").exists():
        listed = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout
        names = listed.splitlines()
    else:  # an unpacked source tree
        names = [str(p.relative_to(root)) for p in root.rglob("*") if ".venv" not in p.parts]
    assert names and [n for n in names if ":" in n] == []


# ---------------------------------------------------------------- deadlines
class Silent:
    """A TCP listener on 127.0.0.1 that accepts connections and never answers."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        self.stop = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self.stop:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)

    def close(self):
        self.stop = True
        for c in self.conns:
            c.close()
        self.sock.close()


def _env(port, **extra):
    env = dict(os.environ)
    env.update(FSSPEC_S3_ENDPOINT_URL=f"http://127.0.0.1:{port}", AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}",
               **extra)
    return env


@pytest.mark.parametrize("argv", [["info", "s3://b/x.zarr"], ["fit", "kmeans", "s3://b/x.zarr", "-k", "2"]])
def test_a_silent_endpoint_fails_within_its_deadline(argv, tmp_path):
    server = Silent()
    try:
        t = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "infoclust_dask.cli", *argv, *(
            ["--storage", str(tmp_path / "st")] if argv[0] == "fit" else [])], cwd=tmp_path, capture_output=True,
            text=True, timeout=120, env=_env(server.port, INFOCLUST_S3_READ_TIMEOUT="1", INFOCLUST_S3_ATTEMPTS="1"))
        took = time.monotonic() - t
    finally:
        server.close()
    assert r.returncode == 2, r.stderr
    assert f"object store at http://127.0.0.1:{server.port} could not be reached, did not answer or dropped the connection" in r.stderr
    assert "INFOCLUST_S3_READ_TIMEOUT" in r.stderr and "Traceback" not in r.stderr
    assert took < 30, took  # 1 s per request; without deadlines it waited 150 s and more


def test_a_stopped_endpoint_is_one_line(tmp_path):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = subprocess.run([sys.executable, "-m", "infoclust_dask.cli", "fit", "kmeans", "s3://b/x.zarr", "-k", "2",
                        "--storage", str(tmp_path / "st")], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env=_env(port, INFOCLUST_S3_ATTEMPTS="1"))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f"object store at http://127.0.0.1:{port} could not be reached" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_s3_file_systems_carry_the_deadlines(monkeypatch, s3_bucket):
    import pickle

    monkeypatch.setenv("INFOCLUST_S3_READ_TIMEOUT", "7.5")
    loc = resolve(s3_bucket + "/x.zarr")
    cfg = loc.fs.config_kwargs if hasattr(loc.fs, "config_kwargs") else loc.fs.storage_options["config_kwargs"]
    assert cfg["read_timeout"] > 0 and cfg["connect_timeout"] > 0 and cfg["retries"]["total_max_attempts"] == 1
    again = pickle.loads(pickle.dumps(loc.fs))  # as a worker receives it inside a task graph
    assert again.storage_options.get("config_kwargs") == loc.fs.storage_options.get("config_kwargs")
    assert object_store_defaults()["config_kwargs"]["read_timeout"] == 7.5
    monkeypatch.setenv("INFOCLUST_S3_READ_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="INFOCLUST_S3_READ_TIMEOUT='soon' is not a number"):
        object_store_defaults()
    monkeypatch.setenv("INFOCLUST_S3_READ_TIMEOUT", "0")
    with pytest.raises(ValueError, match="must be > 0"):
        object_store_defaults()


def test_credentials_in_a_query_string_are_never_shown(tmp_path, monkeypatch, capsys):
    """A presigned URL's signature and credential, an Azure SAS ``sig``, a
    ``?secret=`` or ``?token=`` on a store URL: redacted in every message,
    whatever the command does with the URL: refused before anything is
    reached (no server is contacted: the endpoint is a closed port on
    127.0.0.1)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("INFOCLUST_S3_ATTEMPTS", "1")
    np.save(tmp_path / "d.npy", np.random.default_rng(0).normal(size=(20, 2)))
    sig, cred, token = "c0ffee5ignature99", "AKIAQUERYCRED", "t0kenSECRETvalue"
    presigned = (f"https://127.0.0.1:9/d.csv?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential={cred}%2F20261127"
                 f"&X-Amz-Signature={sig}&X-Amz-Expires=300")
    for argv in (["ingest", presigned, str(tmp_path / "q.zarr")],
                 ["ingest", "d.npy", f"s3://no-such-bucket-here/x.zarr?secret={token}"],
                 ["info", f"s3://no-such-bucket-here/x.zarr?token={token}&sig={sig}"]):
        rc, out, err = _run(argv, capsys)
        assert rc == 2 and "query string" in err, (argv, err)
        for secret in (sig, cred, token):
            assert secret not in out + err, (argv, err)
    assert redact(presigned).count("***") == 2 and "X-Amz-Expires=300" in redact(presigned)
    assert redact("a/b.zarr?x=1") == "a/b.zarr?x=1"
    assert token not in redact(f"prefix=x.zarr%3Fsecret%3D{token}%2F&delimiter=")  # as a client library echoes it


def test_every_flow_checks_its_paths_and_urls_before_prefect_sees_them():
    """Each flow parameter that names a store, a file, a folder or a scheduler is a ``Location``: checked by
    the flow's call before Prefect creates a run, and carried as a pattern in the deployments' schema."""
    import jsonschema

    from infoclust_pipelines import bootstrap, crossval, demo, ingest, update
    from infoclust_pipelines._checked import CheckedFlow, location_parameters

    places = {"store", "storage", "source", "dest", "model", "inbox", "scheduler"}
    for flow in (bootstrap.bootstrap_flow, crossval.crossval_flow, demo.demo_flow, ingest.ingest_flow,
                 update.update_flow):
        assert isinstance(flow, CheckedFlow), flow.name
        named = places & set(inspect.signature(flow.fn).parameters)
        assert named and set(location_parameters(flow.fn)) == named, flow.name
        schema = flow.parameters.model_dump()
        for name in named:
            bad = {name: "s3://AK:SECRET@b/x.zarr"}
            with pytest.raises(jsonschema.ValidationError):
                jsonschema.validate(bad, {**schema, "required": []})
    schema = crossval.crossval_flow.parameters.model_dump()
    for fine in ("data/x.zarr", "s3://b/x.zarr", "s3://b/x.zarr?versionId=2", "/abs/x.zarr", "file:///abs/x.zarr"):
        jsonschema.validate({"store": fine}, schema)
    for bad in ("s3://b/x.zarr?X-Amz-Signature=1", "https://h/d.csv?a=1&SIG=2", "gs://k@b/x", "s3://a:b/c@d/x",
                "https://h/x?Token=3"):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({"store": bad}, schema)
        with pytest.raises(ValueError, match="carries credentials"):
            crossval.crossval_flow(bad)
