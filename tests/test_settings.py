"""One parser for the numbers of INFOCLUST_* environment settings."""

import pytest

from infoclust_dask._support.settings import env_number
from infoclust_dask.engine.choose import in_process_budget
from infoclust_dask.engine.clients import connect_timeout


def test_env_number(monkeypatch):
    monkeypatch.delenv("INFOCLUST_T", raising=False)
    assert env_number("INFOCLUST_T", 7.5) == 7.5
    monkeypatch.setenv("INFOCLUST_T", " 30s ")
    assert env_number("INFOCLUST_T", 1.0, seconds=True) == 30.0
    with pytest.raises(ValueError, match=r"INFOCLUST_T=' 30s ' is not a number; unset it or give e.g. INFOCLUST_T=1"):
        env_number("INFOCLUST_T", 1)
    monkeypatch.setenv("INFOCLUST_T", "1e9")
    assert env_number("INFOCLUST_T", 0, kind=int) == 10**9
    monkeypatch.setenv("INFOCLUST_T", "0")
    assert env_number("INFOCLUST_T", 5, kind=int, allow_zero=True) == 0
    with pytest.raises(ValueError, match=r"INFOCLUST_T='0' must be > 0"):
        env_number("INFOCLUST_T", 5)
    monkeypatch.setenv("INFOCLUST_T", "-1")
    with pytest.raises(ValueError, match=r"must be >= 0"):
        env_number("INFOCLUST_T", 5, allow_zero=True)


def test_the_settings_that_use_it(monkeypatch):
    monkeypatch.setenv("INFOCLUST_CONNECT_TIMEOUT", "3s")
    assert connect_timeout() == 3.0
    monkeypatch.setenv("INFOCLUST_CONNECT_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="INFOCLUST_CONNECT_TIMEOUT='soon' is not a number of seconds"):
        connect_timeout()
    monkeypatch.setenv("INFOCLUST_IN_PROCESS_BYTES", "2e6")
    assert in_process_budget() == 2_000_000
    monkeypatch.setenv("INFOCLUST_IN_PROCESS_BYTES", "lots")
    with pytest.raises(ValueError, match="INFOCLUST_IN_PROCESS_BYTES='lots' is not a number"):
        in_process_budget()


@pytest.mark.parametrize("raw", ["inf", "-inf", "nan", "1e400"])
def test_infinite_and_nan_settings_are_refused_in_one_line(monkeypatch, raw):
    """INFOCLUST_IN_PROCESS_BYTES=inf gave "OverflowError: cannot convert
    float infinity to integer"; =nan advised "give e.g. ...=None", which is
    refused (issue 53): one line naming the variable and a value that works."""
    from infoclust_dask.engine import in_process_budget

    monkeypatch.setenv("INFOCLUST_IN_PROCESS_BYTES", raw)
    with pytest.raises(ValueError, match=r"INFOCLUST_IN_PROCESS_BYTES=.* is not a finite number.*=1e9") as e:
        in_process_budget()
    assert "None" not in str(e.value)
