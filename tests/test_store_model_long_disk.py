"""The store against its model on a local disk, the long run (30 examples
of 15 steps; :mod:`test_store_model` holds the machine and the short runs).
A file of its own, collected first (marker ``first``): ``make test-slow``'s
two pytest-xdist processes start it and the S3 run together instead of
after everything else."""

import pytest
from test_store_model import _local


@pytest.mark.slow
@pytest.mark.first
@pytest.mark.timeout(1200)
def test_the_store_against_its_model_on_a_local_disk_long(tmp_path):
    _local(tmp_path, examples=30, steps=15)
