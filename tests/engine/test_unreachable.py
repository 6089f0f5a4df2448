"""The engine's answer to a worker that cannot reach the object store
(:func:`infoclust_dask.engine.execute.around_unreachable`), with the
scheduler's worker list given: each such worker left out once and named in
one line, every worker failing ends in one error naming them, and an error
the scheduler kept from the previous run (it names a worker the new run was
kept off) sent again a bounded number of times. The same on hosts of their
own: tests/hosts/test_hosts.py."""

from __future__ import annotations

import logging

import pytest

from infoclust_dask._support.unreachable import NoWorkerReachesStorage, StorageUnreachable
from infoclust_dask.engine import execute

WORKERS = {"tcp://10.0.0.2:1", "tcp://10.0.0.3:1", "tcp://10.0.0.4:1"}


@pytest.fixture
def scheduler(monkeypatch):
    """A scheduler with three workers, no avoided worker, no sleeping."""
    monkeypatch.setattr(execute, "_AVOIDED", {})
    monkeypatch.setattr(execute, "_workers", lambda client: set(WORKERS))
    monkeypatch.setattr(execute, "_address", lambda client: "tcp://10.0.0.1:8786")
    slept: list = []
    monkeypatch.setattr("time.sleep", slept.append)
    return slept


def _runs(*outcomes):
    """A ``run(placement)`` raising or returning ``outcomes`` in order; the
    placements it was given in ``calls``."""
    calls: list = []

    def run(place):
        calls.append(place)
        out = outcomes[len(calls) - 1]
        if isinstance(out, BaseException):
            raise out
        return out

    return run, calls


def _unreachable(worker):
    return StorageUnreachable(worker, "EndpointConnectionError: Could not connect")


def test_a_worker_that_cannot_read_is_left_out_once_with_one_line(scheduler, caplog):
    run, calls = _runs(_unreachable("tcp://10.0.0.3:1"), "model")
    with caplog.at_level(logging.WARNING, logger="infoclust_dask"):
        assert execute.around_unreachable(object(), run) == "model"
    assert calls == [{}, {"workers": ["tcp://10.0.0.2:1", "tcp://10.0.0.4:1"], "allow_other_workers": False}]
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "tcp://10.0.0.3:1 could not reach the object store" in lines[0]
    assert execute.avoided(object()) == {"tcp://10.0.0.3:1"}
    assert scheduler == []


def test_every_worker_failing_ends_in_one_error_naming_them(scheduler):
    order = sorted(WORKERS)
    run, calls = _runs(*[_unreachable(w) for w in order])
    with pytest.raises(NoWorkerReachesStorage) as err:
        execute.around_unreachable(object(), run)
    assert len(calls) == 3
    assert all(w in str(err.value) for w in order) and "\n" not in str(err.value)


def test_an_error_kept_from_the_run_before_is_sent_again(scheduler):
    """The second run was kept off the first failing worker, yet its error
    names that worker (the scheduler still held the erred key): sent again
    after a pause, and the third run's answer is the fit's."""
    w = "tcp://10.0.0.3:1"
    run, calls = _runs(_unreachable(w), _unreachable(w), "model")
    assert execute.around_unreachable(object(), run) == "model"
    assert len(calls) == 3 and all(w not in c["workers"] for c in calls[1:])
    assert scheduler == [1.0]


def test_an_error_kept_for_good_ends_after_bounded_attempts(scheduler):
    w = "tcp://10.0.0.3:1"
    run, calls = _runs(*[_unreachable(w)] * (execute.STALE_ATTEMPTS + 2))
    with pytest.raises(StorageUnreachable) as err:
        execute.around_unreachable(object(), run)
    assert err.value.worker == w and not isinstance(err.value, NoWorkerReachesStorage)
    assert "handed back this failed read" in str(err.value)
    assert len(calls) == execute.STALE_ATTEMPTS + 2
    assert scheduler == [0.5 * 2 ** k for k in range(1, execute.STALE_ATTEMPTS + 1)]


def test_a_worker_failing_again_after_its_pause_ends_the_run(scheduler, monkeypatch):
    """No longer avoided (its pause is over) and failing again: not an old
    error, so not sent again."""
    monkeypatch.setenv("INFOCLUST_UNREACHABLE_PAUSE", "1e-9")
    w = "tcp://10.0.0.3:1"
    run, calls = _runs(_unreachable(w), _unreachable(w), "model")
    with pytest.raises(StorageUnreachable):
        execute.around_unreachable(object(), run)
    assert len(calls) == 2 and scheduler == []
