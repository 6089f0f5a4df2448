"""A model-based test of the store (issue 53), as storage projects test
theirs: a Hypothesis state machine interleaves appends (in this process,
and in another process killed with SIGKILL at a random instant), label
writes through ``infoclust predict --write-labels``, fits, verifies,
opens and readers running beside an append, against a model of the
committed rows - on a local disk and on the loopback S3 server, where
every write goes through a proxy that adds latency and drops connections.

After each step the store must hold exactly the model's rows (or, after a
write that was killed or failed, exactly the rows with or without that
write, whole), verify clean, and fit to the labels the model's rows
give. ``make test`` runs a bounded number of examples; ``make test-slow``
runs more (counts in docs/RELIABILITY.md).
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
from itertools import count

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from infoclust_dask import KMeans, append_dataset, open_dataset, write_dataset
from infoclust_dask._support.messages import is_connection_error
from infoclust_dask.cli import main as cli_main
from infoclust_dask.io.verify import verify_store
from infoclust_dask.runs import save_model

D = 4  # features
CHUNK = 16  # rows per chunk: appends replace a partly filled last chunk and add whole ones
_NAMES = count()
#: what the machines did, summed over a test (the test prints it: docs/RELIABILITY.md quotes it)
TALLY: dict[str, int] = {}


def _tally(what: str) -> None:
    TALLY[what] = TALLY.get(what, 0) + 1


# --------------------------------------------------------------------------- faults on the wire
class FaultyProxy:
    """A TCP proxy on 127.0.0.1 in front of the S3 server. While ``latency``
    or ``drop`` are set, each forwarded piece (a request's or a response's
    bytes as they arrive) waits ``latency`` seconds and, with probability
    ``drop``, its connection is cut instead (both sides closed): S3
    clients keep connections alive, so cuts fall inside requests."""

    def __init__(self, target_port: int) -> None:
        self.target = ("127.0.0.1", target_port)
        self.latency = 0.0
        self.drop = 0.0
        self.dropped = 0
        self.accepted = 0
        self.pieces = 0
        self.rng = random.Random(0)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            self.accepted += 1
            pair = [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b, pair), daemon=True).start()

    def _pipe(self, src, dst, pair) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                self.pieces += 1
                if self.latency:
                    time.sleep(self.latency)
                if self.drop and self.rng.random() < self.drop:  # connections are kept alive: cut mid-way
                    self.dropped += 1
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in pair:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def faults(self, latency: float, drop: float) -> None:
        self.latency, self.drop = latency, drop

    def close(self) -> None:
        self.closed = True
        self.listener.close()


# --------------------------------------------------------------------------- appends to kill
#: a process that imports the library, says "ready", then appends the rows of the .npz named on its stdin
#: (a forked copy of this process would hang: zarr's event-loop thread is not copied into the child)
APPENDER = """
import json, sys, tempfile, time
import numpy as np
from infoclust_dask import append_dataset, write_dataset
with tempfile.TemporaryDirectory() as warm:  # the first append's lazy imports and set-up, before the clock
    write_dataset(warm + "/w.zarr", np.ones((3, 2)), codec="none")
    append_dataset(warm + "/w.zarr", np.ones((2, 2)))
print("ready", flush=True)
job = json.loads(sys.stdin.readline())
with np.load(job["rows"]) as z:
    extra = {k[6:]: z[k] for k in z.files if k.startswith("extra_")}
    x, label = z["x"], z["label"]
print("go", flush=True)
t = time.perf_counter()
append_dataset(job["store"], x, label=label, extra_labels=extra or None)
print("done", time.perf_counter() - t, flush=True)
"""


class Appenders:
    """One appender process kept started ahead (its imports take ~2 s), so a
    kill costs no start-up inside the step."""

    def __init__(self) -> None:
        self.next = self._start()

    @staticmethod
    def _start():
        return subprocess.Popen([sys.executable, "-c", APPENDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def take(self):
        p, self.next = self.next, self._start()
        line = p.stdout.readline().strip()
        assert line == "ready", p.stderr.read()
        return p

    def close(self) -> None:
        self.next.kill()
        self.next.wait(30)


class StoreMachine(RuleBasedStateMachine):
    """The store at ``place()`` against a model of its committed rows."""

    place = staticmethod(lambda: "")  # set by each test: a new store path per example
    proxy: FaultyProxy | None = None
    appenders: Appenders
    scratch = ""
    append_seconds = 0.1  # about how long an append of up to 40 rows takes there (kills are drawn inside it)

    @initialize(n=st.integers(1, 40), seed=st.integers(0, 2**16), kill_at=st.floats(0.0, 1.0),
                latency=st.sampled_from([0.002, 0.01, 0.0]), drop=st.sampled_from([0.1, 0.3, 0.0]))
    def write(self, n, seed, kill_at, latency, drop):
        """A new store; on S3, the wire's faults for the writes that follow and one append through them;
        then one append killed at ``kill_at`` of its course (so that every example, however short, kills
        one)."""
        self.where = self.place()
        rng = np.random.default_rng(seed)
        self.x = rng.normal(size=(n, D))
        self.label = rng.integers(0, 3, n)
        self.extra: dict[str, np.ndarray] = {}  # label variables written by predict --write-labels
        self.model_file = os.path.join(self.scratch, f"km-{next(_NAMES)}.json")
        write_dataset(self.where, self.x, label=self.label, chunks=CHUNK, codec="none")
        _tally("write")
        if self.proxy is not None:  # every example writes through the wire's faults at least once
            self.wire(latency, drop)
            self.append(n, seed + 2)
        self.append_killed(n, seed + 1, kill_at)

    @rule(n=st.integers(1, 40), seed=st.integers(0, 2**16))
    def append_timed(self, n, seed):
        """An append in another process, left to finish: its duration is the course later kills fall in."""
        self.append_killed(n, seed, float("inf"))

    # -- writes --------------------------------------------------------------
    def _new_rows(self, n, seed):
        rng = np.random.default_rng(seed)
        x = rng.normal(size=(n, D)) + rng.normal(scale=3, size=D)
        label = rng.integers(0, 3, n)
        extra = {k: rng.integers(0, 5, n) for k in self.extra}
        return x, label, extra

    def _settle(self, x, label, extra, what):
        """The store after a write that may or may not have committed: exactly the model's rows, or
        exactly the model's rows followed by the new ones; the model follows the store."""
        ds = open_dataset(self.where)
        n = ds.sizes["sample"]
        if n == len(self.x):
            _tally(f"{what}: not committed")
        elif n == len(self.x) + len(x):
            self.x = np.vstack([self.x, x])
            self.label = np.concatenate([self.label, label])
            self.extra = {k: np.concatenate([v, extra[k]]) for k, v in self.extra.items()}
            _tally(f"{what}: committed")
        else:
            raise AssertionError(f"{what}: the store holds {n} rows; the model {len(self.x)} or "
                                 f"{len(self.x) + len(x)}")

    @precondition(lambda self: self.proxy is not None)
    @rule(latency=st.sampled_from([0.0, 0.002, 0.01]), drop=st.sampled_from([0.0, 0.1, 0.3]))
    def wire(self, latency, drop):
        """The faults the proxy injects into the writes that follow (reads and checks run without)."""
        self.fault_level = (latency, drop)
        _tally(f"writes with latency {latency} s, drop {drop}")

    def _faulty(self):
        if self.proxy is not None:
            self.proxy.faults(*getattr(self, "fault_level", (0.0, 0.0)))

    def _calm(self):
        if self.proxy is not None:
            self.proxy.faults(0.0, 0.0)

    @rule(n=st.integers(1, 40), seed=st.integers(0, 2**16))
    def append(self, n, seed):
        x, label, extra = self._new_rows(n, seed)
        self._faulty()
        try:
            append_dataset(self.where, x, label=label, extra_labels=extra or None)
        except Exception as exc:  # a connection cut by the proxy: it must say so, and leave no damage
            assert self.proxy is not None and self.proxy.drop and is_connection_error(exc), repr(exc)
            _tally("append failed: connection cut")
        finally:
            self._calm()
        self._settle(x, label, extra, "append")

    @rule(n=st.integers(1, 40), seed=st.integers(0, 2**16), delay=st.floats(0.0, 1.0))
    def append_killed(self, n, seed, delay):
        """An append in another process, SIGKILLed ``delay`` x :attr:`append_seconds` after it starts
        (it may finish first)."""
        x, label, extra = self._new_rows(n, seed)
        rows = os.path.join(self.scratch, "rows.npz")
        np.savez(rows, x=x, label=label, **{f"extra_{k}": v for k, v in extra.items()})
        p = self.appenders.take()
        self._faulty()
        try:
            p.stdin.write(json.dumps({"store": self.where, "rows": rows}) + "\n")
            p.stdin.flush()
            assert p.stdout.readline().strip() == "go", p.stderr.read()
            if delay == float("inf"):
                p.wait(300)
            else:
                time.sleep(delay * self.append_seconds)
            if p.poll() is None:
                p.kill()
                _tally("kill -9 during an append")
            p.wait(120)
            took = p.stdout.read().split()
            if took[:1] == ["done"]:  # it finished first: later kills are drawn over the longer course seen
                type(self).append_seconds = max(self.append_seconds, float(took[1]))
                _tally("append in another process" if delay == float("inf") else "killed append: finished first")
        finally:
            self._calm()
        self._settle(x, label, extra, "append in another process" if delay == float("inf") else "killed append")

    @precondition(lambda self: self.proxy is None)  # labels are written by a rename: local stores only
    @rule(k=st.integers(1, 3))
    def fit_and_write_labels(self, k):
        """Fit K-means on the store, then ``infoclust predict MODEL STORE --write-labels km --overwrite``:
        the labels written are the fitted model's on the model's rows."""
        k = min(k, len(np.unique(self.x, axis=0)))
        km = KMeans(k, random_state=0, n_init=1, scheduler="sync").fit(self.where)
        np.testing.assert_array_equal(km.labels_, km.predict(self.x))
        save_model(km, self.model_file, overwrite=True)
        self._faulty()
        try:
            code = cli_main(["predict", self.model_file, self.where, "--write-labels", "km", "--overwrite"])
        finally:
            self._calm()
        ds = open_dataset(self.where)
        written = km.predict(self.x)
        if code == 0:
            np.testing.assert_array_equal(ds["km"].values, written)
            self.extra["km"] = written
            _tally("predict --write-labels")
        else:
            raise AssertionError(f"predict --write-labels failed with {code} on a local store")

    @rule(n=st.integers(1, 40), seed=st.integers(0, 2**16))
    def append_beside_readers(self, n, seed):
        """Readers open and read the store while an append runs: each read is the old rows or the new
        rows, whole."""
        x, label, extra = self._new_rows(n, seed)
        old, new = self.x, np.vstack([self.x, x])
        seen, errors, stop = [], [], threading.Event()

        def read():
            while not stop.is_set():
                try:
                    got = open_dataset(self.where)["x"].values
                except Exception as exc:  # noqa: BLE001 - reported below
                    errors.append(exc)
                    return
                seen.append(len(got))
                assert np.array_equal(got, old) or np.array_equal(got, new), "a read saw a torn store"

        readers = [threading.Thread(target=read) for _ in range(2)]
        for t in readers:
            t.start()
        try:
            append_dataset(self.where, x, label=label, extra_labels=extra or None)
        finally:
            stop.set()
            for t in readers:
                t.join(60)
        assert not errors, errors
        self._settle(x, label, extra, "append beside readers")
        _tally("reads beside an append")

    # -- checks after every step -------------------------------------------------
    @precondition(lambda self: self.proxy is not None)
    @rule(k=st.integers(1, 3))
    def fit(self, k):
        """Fit K-means on the store at the URL: its labels are those of the model's rows."""
        k = min(k, len(np.unique(self.x, axis=0)))
        km = KMeans(k, random_state=0, n_init=1, scheduler="sync").fit(self.where)
        np.testing.assert_array_equal(km.labels_, km.predict(self.x))
        _tally("fit")

    @invariant()
    def store_is_the_model(self):
        if not hasattr(self, "where"):
            return
        report = verify_store(self.where)
        assert report["problems"] == [], report["problems"]
        ds = open_dataset(self.where)
        np.testing.assert_array_equal(ds["x"].values, self.x)
        np.testing.assert_array_equal(ds["label"].values, self.label)
        for name, values in self.extra.items():
            np.testing.assert_array_equal(ds[name].values, values)
        assert set(ds.data_vars) == {"x", "label", *self.extra}
        _tally("verify + open checked")


def _run(machine, place, scratch, examples, steps, proxy=None, append_seconds=0.1):
    TALLY.clear()
    machine.place = staticmethod(place)
    machine.scratch = scratch
    machine.proxy = proxy
    machine.append_seconds = append_seconds
    machine.appenders = Appenders()
    machine.TestCase.settings = settings(max_examples=examples, stateful_step_count=steps, deadline=None,
                                         suppress_health_check=list(HealthCheck), derandomize=True,
                                         database=None)
    try:
        machine.TestCase().runTest()
    finally:
        machine.appenders.close()
    print(f"\nstore model ({examples} examples x <= {steps} steps):", dict(sorted(TALLY.items())))
    return dict(TALLY)


def _local(tmp_path, examples, steps):
    places = (str(tmp_path / f"s{i}.zarr") for i in count())
    tally = _run(StoreMachine, lambda: next(places), str(tmp_path), examples, steps)
    assert tally.get("kill -9 during an append", 0) >= 1 and tally.get("append: committed", 0) >= 1
    assert tally.get("predict --write-labels", 0) >= 1 and tally.get("reads beside an append", 0) >= 1


def _s3(tmp_path, s3_bucket, monkeypatch, examples, steps):
    import fsspec

    endpoint = fsspec.config.conf["s3"]["endpoint_url"]
    proxy = FaultyProxy(int(endpoint.rsplit(":", 1)[1]))
    monkeypatch.setitem(fsspec.config.conf["s3"], "endpoint_url", f"http://127.0.0.1:{proxy.port}")
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{proxy.port}")  # the appender processes' too
    monkeypatch.setenv("FSSPEC_S3_ENDPOINT_URL", f"http://127.0.0.1:{proxy.port}")
    monkeypatch.setenv("INFOCLUST_S3_ATTEMPTS", "3")
    places = (f"{s3_bucket}/s{i}.zarr" for i in count())
    try:
        tally = _run(StoreMachine, lambda: next(places), str(tmp_path), examples, steps, proxy, append_seconds=3.0)
    finally:
        proxy.close()
    print(f"through the proxy: {proxy.accepted} connections, {proxy.pieces} pieces, {proxy.dropped} cut")
    assert tally.get("kill -9 during an append", 0) >= 1 and proxy.dropped >= 1
    return tally, proxy.dropped


@pytest.mark.slow  # ~8 s (make test-slow, run by .ci/run, with the long local and S3 runs)
def test_the_store_against_its_model_on_a_local_disk(tmp_path):
    _local(tmp_path, examples=3, steps=8)


@pytest.mark.slow  # ~5 s (make test-slow, run by .ci/run); make test keeps the local-disk run
def test_the_store_against_its_model_on_s3_with_faults(tmp_path, s3_bucket, monkeypatch):
    _s3(tmp_path, s3_bucket, monkeypatch, examples=1, steps=8)


# the long runs (15 and 5 examples) are in test_store_model_long_disk.py and test_store_model_long_s3.py: a
# file of their own each, collected first (marker ``first``), so that make test-slow's two processes run them at once
