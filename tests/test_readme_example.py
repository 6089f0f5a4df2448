"""The README's first library example, saved as a script and run from an
empty folder, as a new user would (smaller data): with scheduler="local" it
needs its ``if __name__ == "__main__":`` guard, since the LocalCluster's
worker processes import the script."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # a LocalCluster in a subprocess: run by `make test-slow` in .ci/run
def test_the_first_library_example_runs_as_a_script(tmp_path):
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## Library\n\n```python\n(.*?)```", text, re.S).group(1)
    assert 'if __name__ == "__main__":' in block and 'scheduler="local"' in block
    script = block.replace("10_000_000", "20_000")
    (tmp_path / "example.py").write_text(script + "\n")
    r = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (tmp_path / "storage" / "datasets" / "blobs.zarr" / "zarr.json").exists()
