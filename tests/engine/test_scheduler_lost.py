"""A pass whose scheduler stops answering ends with the engine's one message
(:class:`~infoclust_dask.engine.execute.NoWorkersError`, "The dask scheduler
at ... stopped answering ... --resume"), whichever way the client notices:
the pass cancelled, or the client's own connection error. A CI run on the
hosts (``make test-hosts``, the scheduler's host cut off 8 s into a CLI fit)
ended instead with ``infoclust: error: in <TCP (closed)
ConnectionPool.gather local=... remote=...:8786>: TimeoutError: [Errno 110]
Connection timed out``: distributed's ``CommClosedError`` from the gather of
the result, which the engine passed on as the pass's own error."""

import time
import types

import pytest
from distributed.comm import CommClosedError

from infoclust_dask.engine import execute

ADDRESS = "tcp://10.213.31.11:8786"


class _Client:
    """What ``_compute`` and ``_scheduler_alive`` ask of a client: a
    scheduler that answers ``identity`` or, cut off, does not."""

    def __init__(self, answers: bool, status: str = "running"):
        self.status, self.answers, self.asked = status, answers, []
        self.scheduler = types.SimpleNamespace(address=ADDRESS, identity=object())

    def compute(self, obj, **kwargs):
        return types.SimpleNamespace(release=lambda: None)

    def sync(self, func, *args, callback_timeout=None, **kwargs):
        self.asked.append((func, kwargs, callback_timeout))
        if not self.answers:
            raise TimeoutError("no answer")
        return {"workers": {}}


def _pass_ending_with(monkeypatch, exc):
    def result(client, fut, watch=None):
        raise exc

    monkeypatch.setattr(execute, "result", result)


def test_a_connection_error_with_the_scheduler_gone_is_the_one_message(monkeypatch):
    _pass_ending_with(monkeypatch, CommClosedError(
        f"in <TCP (closed) ConnectionPool.gather local=tcp://10.213.31.1:42116 remote={ADDRESS}>: "
        "TimeoutError: [Errno 110] Connection timed out"))
    client = _Client(answers=False)
    with pytest.raises(execute.NoWorkersError) as got:
        execute._compute(client, object(), {}, False, 0)
    message = str(got.value)
    assert message.startswith(f"The dask scheduler at {ADDRESS} stopped answering during a pass")
    assert "--resume" in message and "ConnectionPool" not in message and "Errno" not in message
    (func, kwargs, timeout), = client.asked  # asked once, bounded
    assert func is client.scheduler.identity and timeout == execute.SCHEDULER_ANSWER_TIMEOUT


def test_an_os_error_of_the_pass_itself_is_passed_on_while_the_scheduler_answers(monkeypatch):
    """A missing file read by a task is an OSError too: the scheduler
    answers, so it is the pass's own error, unchanged."""
    missing = FileNotFoundError(2, "No such file or directory", "/data/store.zarr/x/c/0/0")
    _pass_ending_with(monkeypatch, missing)
    client = _Client(answers=True)
    with pytest.raises(FileNotFoundError) as got:
        execute._compute(client, object(), {}, False, 0)
    assert got.value is missing and len(client.asked) == 1


def test_a_client_no_longer_connected_is_not_asked():
    client = _Client(answers=True, status="connecting")
    assert execute._scheduler_alive(client) is False and client.asked == []


def test_a_real_scheduler_answers_then_stopped_does_not_within_the_bound():
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=0, processes=False, host="127.0.0.1", protocol="tcp", dashboard_address=None)
    client = Client(cluster, set_as_default=False)
    try:
        assert execute._scheduler_alive(client) is True
        cluster.close()
        t0 = time.monotonic()
        assert execute._scheduler_alive(client) is False
        assert time.monotonic() - t0 < execute.SCHEDULER_ANSWER_TIMEOUT + 5
    finally:
        client.close()
        cluster.close()
