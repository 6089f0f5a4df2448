"""The local services' ports: fixed by default (so a restart keeps the
address the deployments were made with), chosen by flag or environment, a
taken port refused with the fix before anything starts."""

import socket
from pathlib import Path

import pytest
from helpers import local_services

ROOT = Path(__file__).resolve().parents[1]


def test_defaults_are_fixed_and_overridable(monkeypatch):
    svc = local_services()
    monkeypatch.delenv("INFOCLUST_SCHEDULER_PORT", raising=False)
    assert svc.default_port("scheduler") == 8786 and svc.default_port("prefect") == 4200
    monkeypatch.setenv("INFOCLUST_SCHEDULER_PORT", "9876")
    assert svc.default_port("scheduler") == 9876


def test_a_taken_port_is_refused_before_anything_starts(tmp_path):
    svc = local_services()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(RuntimeError, match=f"port {port} on 127.0.0.1 for the scheduler is taken.*--scheduler-port"):
            svc.start(tmp_path, n_workers=0, prefect=False, ports={"scheduler": port}, timeout=30)
    assert svc.status(tmp_path).get("running") is False or not svc.status(tmp_path).get("processes")


def test_the_scheduler_starts_on_the_port_asked_for(tmp_path):
    svc = local_services()
    port = svc.free_port()
    state = svc.start(tmp_path, n_workers=0, prefect=False, ports={"scheduler": port}, timeout=60)
    try:
        assert state["scheduler_address"] == f"tcp://127.0.0.1:{port}"
    finally:
        svc.stop(tmp_path)
