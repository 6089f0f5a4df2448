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


def test_steps_plain_lines_carry_total_eta_and_the_work_inside_a_step():
    """Issue 54: off a terminal, long loops print plain periodic lines with
    their position, total and ETA, and the work inside a step (passes at one
    beta) keeps the log from going silent; on a terminal, a bar; nothing with
    verbose=0."""
    class Est:
        verbose = 1

    out = io.StringIO()
    with _progress.Steps(Est(), 4, "demo", unit="beta", out=out, every=0.0) as bar:
        bar.update(1, beta="0.1")
        bar.tick(passes=7)
        bar.to(3)
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert lines[0].startswith("demo: 1/4 beta, ") and ", ETA " in lines[0] and "beta=0.1" in lines[0]
    assert lines[1].endswith("beta=0.1, passes=7") and lines[2].startswith("demo: 3/4 beta")
    assert lines[-1].endswith("(done)")
    quiet = io.StringIO()

    class Silent:
        verbose = 0

    with _progress.Steps(Silent(), 4, "demo", out=quiet, every=0.0) as bar:
        bar.update(2)
    assert quiet.getvalue() == ""
    tty = _Tty()
    with _progress.Steps(Est(), 4, "demo", unit="beta", out=tty) as bar:
        bar.update(2, beta="1")
        bar.bar.refresh()  # tqdm redraws at most every 0.1 s
    assert "2/4" in tty.getvalue() and "beta=1" in tty.getvalue()


def test_soft_kmeans_annealing_reports_its_position_along_the_beta_range_and_passes(monkeypatch, capsys):
    """Issue 54: soft K-means printed one line per beta with no total and was
    silent inside a beta; its plain lines now give the share of the log-beta
    range done (an automatic schedule has no known length) and the passes at
    the current beta."""
    import numpy as np

    from infoclust_dask import SoftKMeans

    monkeypatch.setattr(_progress, "PLAIN_EVERY", 0.0)
    X = np.random.default_rng(0).normal(size=(300, 2)) + np.repeat([[0, 0], [6, 0], [0, 6]], 100, axis=0)
    SoftKMeans(3, beta=5.0, beta_schedule="auto", random_state=0, verbose=1, scheduler="sync").fit(X)
    err = capsys.readouterr().err
    steps = [line for line in err.splitlines() if line.startswith("SoftKMeans: annealing: ")]
    assert any(", passes=" in line for line in steps), err
    final = [line for line in steps if " %" in line and "(done)" in line]
    assert final and final[-1].startswith("SoftKMeans: annealing: 100/100 %"), steps[-3:]


def test_a_cluster_computation_writes_plain_lines_to_a_file_and_a_bar_to_a_terminal(local_cluster_client):
    """Futures on a distributed scheduler (a persist with progress, e.g.
    SMIC's neighbour search): off a terminal, periodic plain lines and no
    carriage returns (distributed's bar wrote ten fragments a second into
    the log); on a terminal, distributed's bar; the futures are done
    either way."""
    out = io.StringIO()
    futures = local_cluster_client.map(lambda i: time.sleep(0.4) or i, range(4), pure=False)
    _progress.futures_progress(futures, out=out, every=0.1)
    assert all(f.done() for f in futures) and [f.result() for f in futures] == [0, 1, 2, 3]
    text = out.getvalue()
    assert "\r" not in text and text.count("\n") >= 2, text
    assert all(line.startswith("infoclust: ") and "/4 tasks, " in line for line in text.splitlines())
    persisted = local_cluster_client.persist(_slow_sum(4, 0.1))
    tty = _Tty()
    _progress.futures_progress(persisted, out=tty)
    assert "Completed" in tty.getvalue()
    assert local_cluster_client.compute(persisted).result() == 8


def test_plain_lines_name_the_upstream_tasks_finished_while_the_results_wait(local_cluster_client):
    """A result that waits on long upstream tasks (SMIC's neighbour search:
    at 1e7 rows, 40 results behind 10 cell builds; its lines read "0/40
    tasks" for over five minutes): the plain lines also count the tasks the cluster
    finished, by name, so a long pass shows it is moving."""
    import dask

    def step(i):
        time.sleep(0.3)
        return i

    parts = [dask.delayed(step, pure=False)(i, dask_key_name=f"slowstep-{i}") for i in range(4)]
    total = dask.delayed(sum, pure=False)(parts, dask_key_name="total-0")
    out = io.StringIO()
    (persisted,) = local_cluster_client.persist([total])
    _progress.futures_progress(persisted, out=out, every=0.1)
    assert local_cluster_client.compute(persisted).result() == 6
    lines = out.getvalue().splitlines()
    assert lines and all(line.startswith("infoclust: 0/1 tasks, ") for line in lines[:1]), lines
    counted = [line for line in lines if "; finished: slowstep " in line]
    assert counted, lines
    # the counts grow as the steps finish, and never exceed the four there are
    numbers = [int(line.split("slowstep ")[1].split(",")[0]) for line in counted]
    assert numbers == sorted(numbers) and 1 <= numbers[-1] <= 4, counted


def test_with_the_graph_the_lines_count_all_its_tasks_and_each_name_out_of_its_total(local_cluster_client):
    """Given the collections before the persist (``graph_of``), the first
    number counts every task of their graph - it moves while the results
    wait - and each name reads "finished/total"; results held from an
    earlier persist are not counted as tasks to run."""
    import dask
    import dask.array as da

    from infoclust_dask._support.progress import graph_keys

    def step(i):
        time.sleep(0.3)
        return i

    held = local_cluster_client.persist(da.ones((3, 2), chunks=(1, 2)))
    assert graph_keys(held) == set() and len(graph_keys(held + 1)) == 3
    parts = [dask.delayed(step, pure=False)(i, dask_key_name=f"slowpart-{i}") for i in range(4)]
    total = dask.delayed(sum, pure=False)(parts, dask_key_name="grand-0")
    assert graph_keys([total]) == {f"slowpart-{i}" for i in range(4)} | {"grand-0"}
    out = io.StringIO()
    (persisted,) = local_cluster_client.persist([total])
    _progress.futures_progress(persisted, out=out, every=0.1, graph_of=[total])
    assert local_cluster_client.compute(persisted).result() == 6
    lines = out.getvalue().splitlines()
    assert lines and all(line.startswith("infoclust: ") and "/5 tasks, " in line for line in lines), lines
    heads = [int(line.split("infoclust: ")[1].split("/")[0]) for line in lines]
    assert heads == sorted(heads) and 1 <= heads[-1] <= 5, lines
    parts_done = [int(line.split("slowpart ")[1].split("/")[0]) for line in lines if "slowpart " in line]
    assert parts_done and parts_done[-1] >= 1 and all(f"slowpart {n}/4" in out.getvalue() for n in parts_done)
    # only this graph's tasks, each once: the parts, and the grand total when it finished between the last look at
    # the result and the read of the task stream for that line (a fast-suite run printed "5/5 tasks ... grand 1/1")
    assert heads[-1] == parts_done[-1] + ("grand 1/1" in lines[-1]), lines
