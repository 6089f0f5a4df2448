"""Every ```python block of the README and of the documentation runs as a
script in an empty folder, as a new user would paste it, within a minute
(the README's in the fast suite; the documentation's, about a minute and a
half together, with the slow tests).

A minute of work, counted in the CPU-seconds of the block's processes
(``RUSAGE_CHILDREN``; its workers' too, when it starts a cluster), not on
the clock: the suites run two tests at a time on two cores, and a CI run
saw the longest block (in-depth.md#2, a DC width search on Satimage, 28.5
CPU-seconds in 28.3 s alone on the Xeon) take 63 s on the clock beside
another test. Every block here spends about as many CPU-seconds as seconds
on an idle machine (2.3-28.3 s, 2026-12-07)."""

import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _blocks(*files):
    for f in files:
        for i, code in enumerate(BLOCK.findall(f.read_text())):
            yield pytest.param(code, id=f"{f.relative_to(ROOT)}#{i + 1}")


#: the user's script, with warnings as errors (scikit-learn's note that it skipped its array-API check aside)
PRELUDE = """
import runpy, sys, warnings
from sklearn.exceptions import SkipTestWarning
warnings.simplefilter("error", UserWarning)
warnings.simplefilter("ignore", SkipTestWarning)
runpy.run_path(sys.argv[1], run_name="__main__")
"""

DOCS = sorted(p for p in (ROOT / "docs").rglob("*.md") if "_build" not in p.parts)


def _run(code, tmp_path):
    script = tmp_path / "example.py"
    script.write_text(code)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INFOCLUST_", "DASK_SCHEDULER"))}
    t, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run([sys.executable, "-c", PRELUDE, str(script)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    seconds, after = time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert r.returncode == 0, r.stderr[-3000:]
    assert cpu < 60, f"{cpu:.0f} CPU-seconds ({seconds:.0f} s on the clock)"


def test_the_documentation_has_python_blocks():
    assert len(list(_blocks(ROOT / "README.md"))) >= 1 and len(list(_blocks(*DOCS))) >= 8


@pytest.mark.parametrize("code", list(_blocks(ROOT / "README.md")))
def test_readme_python_blocks_run(code, tmp_path):
    _run(code, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("code", list(_blocks(*DOCS)))
def test_docs_python_blocks_run(code, tmp_path):
    _run(code, tmp_path)
