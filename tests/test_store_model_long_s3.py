"""The store against its model on the loopback S3 server through the
faulty proxy, the long run (10 examples of 12 steps; :mod:`test_store_model`
holds the machine and the short runs). A file of its own, collected first
(marker ``first``), as the local-disk long run."""

import pytest
from test_store_model import _s3


@pytest.mark.slow
@pytest.mark.first
@pytest.mark.timeout(1200)
def test_the_store_against_its_model_on_s3_with_faults_long(tmp_path, s3_bucket, monkeypatch):
    tally, cut = _s3(tmp_path, s3_bucket, monkeypatch, examples=10, steps=12)
    assert cut >= 1 and tally.get("append failed: connection cut", 0) >= 1, tally
