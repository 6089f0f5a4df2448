"""The store against its model on a local disk, the long run (15 examples
of 15 steps; :mod:`test_store_model` holds the machine and the short runs;
30 examples took 170-205 s on the Xeon and 826 s on the 2-core EPYC of
2026-11-30, so CI's budget holds 15 there).
A file of its own, collected first (marker ``first``): ``make test-slow``'s
two pytest-xdist processes start it and the S3 run together instead of
after everything else."""

import pytest
from test_store_model import _local


@pytest.mark.slow
@pytest.mark.first
@pytest.mark.timeout(1200)
def test_the_store_against_its_model_on_a_local_disk_long(tmp_path):
    _local(tmp_path, examples=15, steps=15)
