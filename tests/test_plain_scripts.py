"""A plain script - no ``if __name__ == "__main__":`` guard - whose fit is
placed on a LocalCluster (its store is above the in-process budget). Worker
processes import ``__main__`` again, so the cluster must not spawn them
for such a script: its workers run as threads, the body runs once, and a
warning says what to add. A guarded script keeps worker processes."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from infoclust_dask import write_dataset

    path = tmp_path_factory.mktemp("plain") / "p.zarr"
    write_dataset(path, np.random.default_rng(0).normal(size=(3000, 4)))
    return path


def _run(tmp_path, body):
    script = tmp_path / "fit_it.py"
    script.write_text(textwrap.dedent(body))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DASK_", "INFOCLUST_"))}
    env.update(INFOCLUST_IN_PROCESS_BYTES="1000", INFOCLUST_STORAGE=str(tmp_path / "storage"))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=300)


def test_a_script_without_a_main_guard_fits_once_on_threads(store, tmp_path):
    r = _run(tmp_path, f"""
        print("BODY RAN", flush=True)
        from infoclust_dask import KMeans
        km = KMeans(3, random_state=0).fit({str(store)!r})
        print("RUNNER", km.runner_["runner"], flush=True)
        """)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("BODY RAN") == 1, r.stdout
    assert "RUNNER distributed (inproc://" in r.stdout, r.stdout  # the LocalCluster, its workers threads
    assert "Nanny failed to start" not in r.stderr and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert 'outside `if __name__ == "__main__":`' in r.stderr


@pytest.mark.slow  # make test took 532-544 s on a fresh clone on 2026-11-29: in make test-slow (5.0 s)
def test_a_guarded_script_keeps_worker_processes(store, tmp_path):
    r = _run(tmp_path, f"""
        print("BODY RAN", flush=True)
        from infoclust_dask import KMeans
        if __name__ == "__main__":
            km = KMeans(3, random_state=0).fit({str(store)!r})
            print("RUNNER", km.runner_["runner"], flush=True)
        """)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "RUNNER distributed (tcp://127.0.0.1:" in r.stdout, r.stdout
    assert "__main__" not in r.stderr, r.stderr[-3000:]


def test_unguarded_main_reads_where_the_call_stands(tmp_path):
    """The rule itself, in a child whose ``__main__`` is a script: a call at
    top level outside the guard, inside it (either order of ``==``), and from
    a function that the guard calls."""
    script = tmp_path / "probe.py"
    script.write_text(textwrap.dedent("""
        from infoclust_dask.engine.clients import unguarded_main
        print("top", unguarded_main())
        def f():
            return unguarded_main()
        if __name__ == "__main__":
            print("guard", unguarded_main())
            print("function", f())
        if "__main__" == __name__:
            print("reversed", unguarded_main())
        if __name__ != "__main__":
            pass
        print("after", f())
        """))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    got = dict(line.split() for line in r.stdout.splitlines())
    assert got == {"top": "True", "guard": "False", "function": "False", "reversed": "False", "after": "True"}
