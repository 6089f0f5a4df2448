"""The compiled kernels from a read-only install run by a user who can
write nowhere numba caches (no writable package folder, no writable home):
they compile without a cache instead of failing with numba's "cannot cache
function ... no locator available", and give brute force's numbers."""

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import infoclust_dask

SCRIPT = r"""
import numpy as np
from infoclust_dask.kernels import _compiled as C, _loops
assert not _loops.CACHE, "a cache folder was found writable"
rng = np.random.default_rng(0)
x, m = rng.normal(size=(500, 4)), rng.normal(size=(3, 4))
labels, dmin, counts, sums = C.lloyd(x, centers=m)
d2 = ((x[:, None, :] - m[None]) ** 2).sum(-1)  # the reference: brute force in numpy
assert (labels == d2.argmin(1)).all()
assert np.allclose(dmin, d2.min(1), rtol=0, atol=1e-10)
assert np.allclose(sums, [x[labels == j].sum(0) for j in range(3)], rtol=0, atol=1e-10)
print("ok")
"""


def _readonly_copy(tmp_path):
    """A copy of the package and a home folder nobody (root included) can
    write: read-only modes for a normal user; for root, who ignores modes,
    the immutable attribute (``chattr +i``, ext4 and most Linux file systems)."""
    pkg = Path(infoclust_dask.__file__).parent
    dest = tmp_path / "ro" / "infoclust_dask"
    shutil.copytree(pkg, dest, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "ro" / "home").mkdir()
    if os.geteuid() == 0:
        r = subprocess.run(["chattr", "-R", "+i", str(tmp_path / "ro")], capture_output=True, text=True)
        assert r.returncode == 0, f"chattr +i failed, so root could write the copy: {r.stderr}"
    else:
        for root, dirs, files in os.walk(tmp_path / "ro", topdown=False):
            for name in files:
                os.chmod(os.path.join(root, name), stat.S_IRUSR)
            for name in dirs:
                os.chmod(os.path.join(root, name), stat.S_IRUSR | stat.S_IXUSR)
        os.chmod(tmp_path / "ro", stat.S_IRUSR | stat.S_IXUSR)
    return tmp_path / "ro"


def _undo(ro):
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-R", "-i", str(ro)], capture_output=True)
    else:
        for root, dirs, _ in os.walk(ro):
            os.chmod(root, 0o755)
            for d in dirs:
                os.chmod(os.path.join(root, d), 0o755)


@pytest.mark.skipif(sys.platform != "linux", reason="permissions and chattr as on Linux")
def test_kernels_of_a_read_only_install_without_a_writable_home_compile_without_a_cache(tmp_path):
    pytest.importorskip("numba")
    ro = _readonly_copy(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "XDG_"))}
    env.update(PYTHONPATH=str(ro), HOME=str(ro / "home" / "user"), PYTHONDONTWRITEBYTECODE="1")
    try:
        r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, cwd=str(ro),
                           timeout=600)
    finally:
        _undo(ro)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]
    assert "no locator available" not in r.stderr
