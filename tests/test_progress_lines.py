"""Progress of a dask computation: a bar on a terminal, plain periodic lines
in a file (no carriage-return fragments), nothing when quiet."""

import io
import json
import time

import dask
import dask.array as da

from infoclust_dask._support import progress as _progress
from infoclust_dask.cli import main


class _Tty(io.StringIO):
    def isatty(self):
        return True


def _slow_sum(n_tasks=8, seconds=0.05):
    def slow(b):
        time.sleep(seconds)
        return b

    x = da.ones((n_tasks, 2), chunks=(1, 2)).map_blocks(slow)
    return x.sum()


def test_plain_lines_when_not_a_terminal():
    out = io.StringIO()
    with _progress.dask_progress(out=out, every=0.1):
        assert dask.compute(_slow_sum(), scheduler="sync")[0] == 16
    text = out.getvalue()
    assert "\r" not in text and text.count("\n") >= 2
    assert all(line.startswith("infoclust: ") and " tasks, " in line for line in text.splitlines())


def test_a_bar_on_a_terminal():
    out = _Tty()
    with _progress.dask_progress(out=out):
        dask.compute(_slow_sum(2, 0.0), scheduler="sync")
    assert "Completed" in out.getvalue()


def test_cli_quiet_writes_nothing_on_stderr(tmp_path, capsys):
    store = tmp_path / "w.zarr"
    assert main(["ingest", "wine", str(store)]) == 0
    capsys.readouterr()
    assert main(["fit", "dc", str(store), "-k", "3", "--quiet", "--storage", str(tmp_path / "st")]) == 0
    out, err = capsys.readouterr()
    assert err == "" and json.loads(out)["method"] == "dc"
    assert main(["fit", "dc", str(store), "-k", "3", "--storage", str(tmp_path / "st")]) == 0
    err = capsys.readouterr().err
    # a line per width candidate and per optimization (3 splits x 9 widths + the final one), not per evaluation
    assert 5 < len(err.splitlines()) < 60


def test_a_refused_parameter_leaves_no_run_folder(tmp_path, capsys):
    store = tmp_path / "w.zarr"
    assert main(["ingest", "wine", str(store)]) == 0
    for k in ("0", "500"):
        assert main(["fit", "kmeans", str(store), "-k", k, "--storage", str(tmp_path / "st")]) == 2
        err = capsys.readouterr().err
        assert ("n_clusters" in err) if k == "0" else ("larger than the store's 178 rows" in err)
        assert "--resume" not in err
    assert not (tmp_path / "st" / "runs").exists() or not any((tmp_path / "st" / "runs").iterdir())
