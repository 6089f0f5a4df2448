"""The store against its model on the loopback S3 server through the
faulty proxy, the long run (5 examples of 12 steps; :mod:`test_store_model`
holds the machine and the short runs; 10 examples took 363 s on the Xeon and
717 s on the 2-core EPYC of 2026-11-30). A file of its own, collected first
(marker ``first``), as the local-disk long run."""

import pytest
from test_store_model import _s3


@pytest.mark.slow
@pytest.mark.first
@pytest.mark.timeout(1200)
def test_the_store_against_its_model_on_s3_with_faults_long(tmp_path, s3_bucket, monkeypatch):
    tally, cut = _s3(tmp_path, s3_bucket, monkeypatch, examples=5, steps=12)
    assert cut >= 1 and tally.get("append failed: connection cut", 0) >= 1, tally
